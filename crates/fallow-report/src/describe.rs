//! The input of a page in words: what was analysed or simulated, one
//! line each. The CLI's terminal summary and JSON use the same sentences,
//! and Python's pages get them through the same functions, so a page
//! written from Python is the CLI's page.

use fallow_core::human::{bytes, count, num, pct, secs};
use fallow_core::period::CompletionSource;
use fallow_core::sim::{BgService, BgWork, Prepared, SimConfig, Workload};
use fallow_core::trace::DeviceCount;
use fallow_core::workload::ArrivalProcess;
use fallow_core::{Characterization, ServiceModel};
use std::path::Path;

/// What a simulation page (compare, pareto) ran on: its heading, one line
/// on it, and its FG utilisation.
#[derive(Debug, Clone, PartialEq)]
pub struct Subject {
    /// File name, or `synthetic workload`.
    pub title: String,
    /// One line on what the input is.
    pub detail: String,
    /// Share of the span the device serves FG requests (no BG work).
    pub fg_utilization: f64,
}

impl Subject {
    /// One device of a trace, read as `title` (its file name, [`file_name`]):
    /// `device` ([`describe_device`]), its requests and span, and how its
    /// completions were had (`service`, the FG service model, or recorded).
    pub fn of_trace(
        prep: &Prepared,
        title: String,
        device: String,
        service: Option<&ServiceModel>,
        seed: u64,
    ) -> Subject {
        let mut parts = vec![device];
        parts.push(format!(
            "{} requests over {}",
            count(prep.requests() as u64),
            secs(prep.span_ns() as f64 / 1e9)
        ));
        parts.push(match service {
            Some(m) => format!(
                "completions modelled: {}, seed {seed}",
                describe_model(&m.to_string()),
            ),
            None => "completion times recorded".into(),
        });
        Subject {
            title,
            detail: parts.join(" · "),
            fg_utilization: fg_utilization(prep),
        }
    }

    /// A synthetic workload `w`, generated with `arrivals` and `service`
    /// (what [`fallow_core::sim::Request::synthetic`] fitted).
    pub fn of_workload(
        prep: &Prepared,
        w: &Workload,
        arrivals: &ArrivalProcess,
        service: &ServiceModel,
        seed: u64,
    ) -> Subject {
        let detail = format!(
            "{} requests of {}, {} ({} req/s, inter-arrival CV {}), {}, {} writes, seed {}",
            count(w.requests as u64),
            bytes(w.request_size_bytes),
            describe_arrivals(arrivals),
            num(arrivals.mean_rate_per_s()),
            num(arrivals.interarrival_cv()),
            describe_model(&service.to_string()),
            pct(w.write_fraction),
            seed
        );
        Subject {
            title: "synthetic workload".into(),
            detail,
            fg_utilization: fg_utilization(prep),
        }
    }
}

/// Share of the span the device serves FG requests (no BG work).
pub fn fg_utilization(prep: &Prepared) -> f64 {
    let span = prep.span_ns() as f64;
    if span > 0.0 {
        prep.periods().busy_total_ns() as f64 / span
    } else {
        0.0
    }
}

/// The last part of a path, for titles.
pub fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// A trace's title: its file's name, or `trace` for one with none (built
/// in memory).
pub fn trace_title(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "trace".into())
}

/// `device 0 of 2`: device `id` of a file with `devices`.
pub fn describe_device(devices: &[DeviceCount], id: u32) -> String {
    format!(
        "device {}{}",
        fallow_core::trace::device_label(devices, id),
        if devices.len() > 1 {
            format!(" of {}", devices.len())
        } else {
            String::new()
        }
    )
}

/// What was analysed, when it is not a file (the demo's generated workload).
pub struct Source {
    /// Short name, used as the heading.
    pub title: String,
    /// One sentence on what the data is.
    pub detail: String,
}

/// The one-line description of the input: file, format, device, completions.
pub fn describe_input(c: &Characterization) -> String {
    let t = &c.trace;
    let mut parts = Vec::new();
    if let Some(f) = t.format {
        parts.push(format!("format {f}"));
    }
    let label = |d| fallow_core::trace::device_label(&t.devices, d);
    match (t.device, t.devices.len()) {
        (Some(d), 1) => parts.push(format!("device {}", label(d))),
        (Some(d), n) => parts.push(format!("device {} of {n}", label(d))),
        (None, _) => {}
    }
    parts.push(match &t.completions {
        CompletionSource::Recorded => "completion times recorded".to_string(),
        CompletionSource::Modelled { model, seed } => {
            format!(
                "completion times modelled: {}, seed {seed}",
                describe_model(model)
            )
        }
    });
    parts.join(" · ")
}

/// A service model in words (`disk model: 7200 rpm, seek 0.6–16 ms, 150 MB/s`);
/// the core's canonical string when it does not parse.
pub fn describe_model(model: &str) -> String {
    match model.parse::<ServiceModel>() {
        Ok(ServiceModel::Constant { ns }) => {
            format!("constant {} per request", secs(ns as f64 / 1e9))
        }
        Ok(ServiceModel::Exponential { mean_ns }) => {
            format!("exponential service, mean {}", secs(mean_ns as f64 / 1e9))
        }
        Ok(ServiceModel::Lognormal { mean_ns, cv }) => format!(
            "lognormal service, mean {}, CV {}",
            secs(mean_ns as f64 / 1e9),
            num(cv)
        ),
        Ok(ServiceModel::Hyperexponential { mean_ns, cv }) => format!(
            "hyperexponential service, mean {}, CV {}",
            secs(mean_ns as f64 / 1e9),
            num(cv)
        ),
        Ok(ServiceModel::Disk(d)) => format!(
            "disk model ({} rpm, seek {}–{}, {} MB/s)",
            num(d.rpm),
            secs(d.track_to_track_ns / 1e9),
            secs(d.full_stroke_ns / 1e9),
            num(d.transfer_bytes_per_s / 1e6)
        ),
        Err(_) => model.to_string(),
    }
}

/// An arrival process in words: `two-state MMPP arrivals (59.7/s for ~16.8 s,
/// 0.309/s for ~16.8 s)`.
pub fn describe_arrivals(p: &ArrivalProcess) -> String {
    match *p {
        ArrivalProcess::Poisson { .. } => "Poisson arrivals".into(),
        ArrivalProcess::Erlang { k, .. } => format!("Erlang-{k} inter-arrival times"),
        ArrivalProcess::Lognormal { .. } => "lognormal inter-arrival times".into(),
        ArrivalProcess::Hyperexponential { .. } => "hyperexponential inter-arrival times".into(),
        ArrivalProcess::Mmpp2 {
            rate_per_s,
            switch_per_s,
        } => format!(
            "two-state MMPP arrivals ({}/s for ~{}, {}/s for ~{})",
            num(rate_per_s[0]),
            secs(1.0 / switch_per_s[0]),
            num(rate_per_s[1]),
            secs(1.0 / switch_per_s[1])
        ),
    }
}

/// The BG settings in one line: `BG service exponential, mean 10.0 ms,
/// 64 KiB requests, endless work` (the seed is not part of it).
pub fn bg_settings(cfg: &SimConfig) -> String {
    let mut s = format!(
        "BG service {}, {} requests, {}",
        describe_bg(&cfg.bg_service),
        bytes(cfg.bg_size_bytes),
        describe_work(&cfg.bg_work)
    );
    if cfg.switch_penalty_ns > 0 {
        s.push_str(&format!(
            ", switch penalty {}",
            secs(cfg.switch_penalty_ns as f64 / 1e9)
        ));
    }
    s
}

/// A BG service model in words.
pub fn describe_bg(m: &BgService) -> String {
    match *m {
        BgService::Exponential { mean_ns } => {
            format!("exponential, mean {}", secs(mean_ns as f64 / 1e9))
        }
        BgService::Constant { ns } => format!("constant {}", secs(ns as f64 / 1e9)),
        BgService::SizeBased {
            base_ns,
            knee_bytes,
            rate_bytes_per_s,
        } => format!(
            "{} up to {}, then {} MB/s",
            secs(base_ns as f64 / 1e9),
            bytes(knee_bytes),
            num(rate_bytes_per_s / 1e6)
        ),
    }
}

/// How much BG work, in words.
pub fn describe_work(w: &BgWork) -> String {
    match *w {
        BgWork::Endless => "endless work".into(),
        BgWork::Requests(n) => format!("{} requests of work", count(n)),
        BgWork::Bytes(b) => format!("{} of work", bytes(b)),
        BgWork::PerFgWrite { ratio } => {
            format!("work spawned by FG writes ({} of FG work)", pct(ratio))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_models() {
        let d = describe_model(
            "disk:rpm=7200,seek=600000ns..16000000ns,rate=150000000B,capacity=1000000000000B",
        )
        .replace('\u{a0}', " ");
        assert_eq!(d, "disk model (7200 rpm, seek 600 µs–16.0 ms, 150 MB/s)");
        assert_eq!(
            describe_model("exp:5000000ns").replace('\u{a0}', " "),
            "exponential service, mean 5.00 ms"
        );
        assert_eq!(describe_model("???"), "???");
    }
}
