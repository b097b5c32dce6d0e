//! Every device of a multi-device file in one streaming pass
//! (`fallow analyze FILE --device all`): per device, the figures of
//! `fallow analyze FILE --device ID` that need no more than a fixed amount
//! of state — requests, span, utilisation, idle interval count, mean, CV
//! and 90th percentile, busy period mean — computed as the reader hands
//! each request on ([`crate::trace::stream_trace`]), so memory grows with
//! the number of devices, never with the number of requests.
//!
//! Each device keeps the state of [`crate::period::extract`] (the current
//! busy period), of [`crate::service::fcfs_completions`] when completions
//! are modelled (its own sampler, seeded like a one-device analysis, and
//! the time its queue frees), running sums, and a histogram of idle
//! lengths for the percentile. Counts, means, span and utilisation equal
//! the one-device analysis's exactly (the same integer periods, summed in
//! the same order); the CV is Welford's running form of the same
//! population CV (equal to ~1e-12); the 90th percentile is the
//! histogram's, within [`P90_RELATIVE_ERROR`] of an order statistic next
//! to the exact one.

use crate::error::{Error, Location, Result};
use crate::period::CompletionSource;
use crate::service::{ServiceModel, ServiceSampler};
use crate::trace::{stream_trace, RawRequest, ReadOptions, Streamed};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::HashMap;
use std::path::Path;

/// Significant decimal digits the idle-length histogram keeps: 2, so a
/// reported percentile is within 1 % of the true one, and a device's
/// histogram holds at most ~7,000 counters (56 KiB, for idle intervals up
/// to 2^63 ns), growing only with the longest interval seen.
pub const HISTOGRAM_SIGFIG: u8 = 2;

/// Relative error of [`DeviceRow::idle_p90_s`]: the histogram reports
/// the highest value equivalent to the order statistic's bucket.
pub const P90_RELATIVE_ERROR: f64 = 0.01;

/// Devices one pass tracks at most: far above any public fleet trace
/// (Tencent CBS has 5,584 volumes), and a bound on memory (~60 KiB each at
/// worst) whatever ids a malformed file holds.
pub const MAX_FLEET_DEVICES: usize = 1 << 16;

/// One device's figures, as `fallow analyze FILE --device ID --json`
/// reports them (seconds, fractions).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceRow {
    /// Device id in the trace.
    pub id: u32,
    /// Its name where the trace names devices (`hm:0`, `8,16`, `sda`).
    pub name: Option<String>,
    /// Requests (`trace.requests`).
    pub requests: u64,
    /// First arrival to last arrival or completion, seconds (`trace.span_s`).
    pub span_s: f64,
    /// Fraction of the window busy (`utilization`).
    pub utilization: f64,
    /// Idle intervals (`idle.count`).
    pub idle_count: u64,
    /// Total idle time, seconds (`idle.total_s`).
    pub idle_total_s: f64,
    /// Mean idle interval, seconds (`idle.mean_s`).
    pub idle_mean_s: f64,
    /// CV of idle intervals (`idle.cv`).
    pub idle_cv: f64,
    /// 90th percentile idle interval, seconds (`idle.p90_s`), within
    /// [`P90_RELATIVE_ERROR`].
    pub idle_p90_s: f64,
    /// Busy periods (`busy.count`).
    pub busy_count: u64,
    /// Mean busy period, seconds (`busy.mean_s`).
    pub busy_mean_s: f64,
}

/// Every device's row, by id, with what was read.
#[derive(Debug, Clone, Serialize)]
pub struct Fleet {
    /// Path of the trace file.
    pub path: String,
    /// Format read.
    pub format: Option<crate::trace::Format>,
    /// Requests in the file (all devices).
    pub requests: u64,
    /// Where completion times came from.
    pub completions: CompletionSource,
    /// Records skipped as malformed (`--skip-bad`).
    pub skipped: u64,
    /// Whether the file was streamed (false: a fallow binary cache,
    /// loaded whole first).
    pub streamed: bool,
    /// Relative error of `idle_p90_s`.
    pub p90_relative_error: f64,
    /// One row per device, by id.
    pub devices: Vec<DeviceRow>,
}

/// The running state of one device: fixed size apart from the histogram,
/// whose size depends on the longest idle interval only.
#[derive(Debug)]
pub struct DeviceState {
    requests: u64,
    first_arrival_ns: u64,
    last_arrival_ns: u64,
    last_end_ns: u64,
    // the busy period under way, as in `period::extract`
    busy_start_ns: u64,
    busy_end_ns: u64,
    busy_count: u64,
    busy_sum_s: f64,
    busy_total_ns: u128,
    idle_count: u64,
    idle_sum_s: f64,
    idle_total_ns: u128,
    // Welford's running mean and sum of squared deviations, seconds
    welford_mean_s: f64,
    welford_m2: f64,
    idle_hist: Histogram<u64>,
    // exact extremes, to keep the histogram's p90 within them
    idle_min_ns: u64,
    idle_max_ns: u64,
    // the FCFS queue of a modelled device
    sampler: Option<ServiceSampler>,
    free_at_ns: u64,
}

impl DeviceState {
    fn new(model: Option<&ServiceModel>, seed: u64) -> Self {
        DeviceState {
            requests: 0,
            first_arrival_ns: 0,
            last_arrival_ns: 0,
            last_end_ns: 0,
            busy_start_ns: 0,
            busy_end_ns: 0,
            busy_count: 0,
            busy_sum_s: 0.0,
            busy_total_ns: 0,
            idle_count: 0,
            idle_sum_s: 0.0,
            idle_total_ns: 0,
            welford_mean_s: 0.0,
            welford_m2: 0.0,
            idle_hist: Histogram::new(HISTOGRAM_SIGFIG).expect("2 significant digits are valid"),
            idle_min_ns: u64::MAX,
            idle_max_ns: 0,
            // one sampler per device, seeded as a one-device analysis seeds its own
            sampler: model.map(|m| m.sampler(seed)),
            free_at_ns: 0,
        }
    }

    /// Bytes this state holds: the struct and the histogram's counters.
    /// It does not grow with requests, only (logarithmically) with the
    /// longest idle interval.
    pub fn state_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.idle_hist.distinct_values() * std::mem::size_of::<u64>()
    }

    /// Take the next request of this device (arrivals non-decreasing).
    fn push(&mut self, r: &RawRequest) {
        let a = r.arrival_ns;
        let c = match &mut self.sampler {
            Some(s) => {
                let service = s.service_ns(r.offset_bytes, r.size_bytes);
                self.free_at_ns = a.max(self.free_at_ns).saturating_add(service);
                self.free_at_ns
            }
            None => r.completion_ns.unwrap_or(a),
        };
        if self.requests == 0 {
            self.first_arrival_ns = a;
            self.busy_start_ns = a;
            self.busy_end_ns = c.max(a);
        } else if a > self.busy_end_ns {
            self.close_busy();
            let idle_ns = a - self.busy_end_ns;
            self.idle(idle_ns);
            self.busy_start_ns = a;
            self.busy_end_ns = c.max(a);
        } else {
            self.busy_end_ns = self.busy_end_ns.max(c);
        }
        self.requests += 1;
        self.last_arrival_ns = a;
        // a one-device analysis's span counts recorded completions even when
        // a model replaces them (`Trace::span_ns`)
        let recorded = r.completion_ns.unwrap_or(a);
        self.last_end_ns = self.last_end_ns.max(c).max(a).max(recorded);
    }

    fn close_busy(&mut self) {
        let len_ns = self.busy_end_ns - self.busy_start_ns;
        self.busy_count += 1;
        self.busy_sum_s += len_ns as f64 / 1e9;
        self.busy_total_ns += u128::from(len_ns);
    }

    fn idle(&mut self, len_ns: u64) {
        let x = len_ns as f64 / 1e9;
        self.idle_count += 1;
        self.idle_sum_s += x;
        self.idle_total_ns += u128::from(len_ns);
        self.idle_min_ns = self.idle_min_ns.min(len_ns);
        self.idle_max_ns = self.idle_max_ns.max(len_ns);
        let d = x - self.welford_mean_s;
        self.welford_mean_s += d / self.idle_count as f64;
        self.welford_m2 += d * (x - self.welford_mean_s);
        // the histogram resizes to take the value; one past its largest
        // trackable value (~2^63 ns, 292 years) is clamped to that
        if self.idle_hist.record(len_ns).is_err() {
            self.idle_hist.saturating_record(len_ns);
        }
    }

    /// The device's row (closing the busy period under way).
    fn row(mut self, id: u32, name: Option<String>) -> DeviceRow {
        if self.requests > 0 {
            self.close_busy();
        }
        let busy = self.busy_total_ns as f64;
        let total = busy + self.idle_total_ns as f64;
        let n = self.idle_count as f64;
        let (idle_mean_s, idle_cv) = if self.idle_count == 0 {
            (0.0, 0.0)
        } else {
            let mean = self.idle_sum_s / n;
            let std = (self.welford_m2 / n).max(0.0).sqrt();
            (mean, if mean > 0.0 { std / mean } else { 0.0 })
        };
        DeviceRow {
            id,
            name,
            requests: self.requests,
            span_s: (self.last_end_ns.max(self.last_arrival_ns) - self.first_arrival_ns) as f64
                / 1e9,
            utilization: if total > 0.0 { busy / total } else { 0.0 },
            idle_count: self.idle_count,
            idle_total_s: self.idle_sum_s,
            idle_mean_s,
            idle_cv,
            idle_p90_s: if self.idle_count == 0 {
                0.0
            } else {
                // the bucket's highest value can pass the largest interval
                let v = self.idle_hist.value_at_quantile(0.9);
                v.clamp(self.idle_min_ns, self.idle_max_ns) as f64 / 1e9
            },
            busy_count: self.busy_count,
            busy_mean_s: if self.busy_count == 0 {
                0.0
            } else {
                self.busy_sum_s / self.busy_count as f64
            },
        }
    }
}

/// Every device of the trace at `path` in one streaming pass. Completions
/// are the file's own, or `service`'s through a FCFS queue per device
/// (replacing recorded ones, as in a one-device analysis). Each device's
/// requests must be in arrival order in the file (they are in the fleet
/// traces, sorted by time); one arriving before its device's previous
/// request is an error naming its line, since a pass that keeps nothing
/// cannot sort.
pub fn fleet_of(
    path: &Path,
    opts: &ReadOptions,
    service: Option<&ServiceModel>,
    seed: u64,
) -> Result<Fleet> {
    if service.is_none() {
        require_completions(path, opts)?;
    }
    let mut states: HashMap<u32, DeviceState> = HashMap::new();
    let display = path.display().to_string();
    let mut sink = |loc: Location, r: RawRequest| -> Result<()> {
        let n = states.len();
        let st = match states.entry(r.device) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                if n >= MAX_FLEET_DEVICES {
                    return Err(Error::Record {
                        path: path.to_path_buf(),
                        location: loc,
                        field: "device",
                        message: format!(
                            "device {} would be the {}th; one pass tracks at most {MAX_FLEET_DEVICES}",
                            r.device,
                            n + 1
                        ),
                    });
                }
                e.insert(DeviceState::new(service, seed))
            }
        };
        if st.requests > 0 && r.arrival_ns < st.last_arrival_ns {
            return Err(Error::Unsupported(format!(
                "{display}: {loc}: this request of device {} arrives {} ns before the device's \
                 previous one; --device all reads in one pass and needs each device's requests \
                 in arrival order (sort the file, or analyse one device with --device ID, \
                 which sorts)",
                r.device,
                st.last_arrival_ns - r.arrival_ns
            )));
        }
        st.push(&r);
        Ok(())
    };
    let streamed = stream_trace(path, opts, &mut sink)?;
    Ok(assemble(streamed, states, service, seed))
}

/// The error of a one-device analysis for a file without completions and
/// no service model, before reading it.
fn require_completions(path: &Path, opts: &ReadOptions) -> Result<()> {
    let format = crate::trace::detected_format(path, opts)?;
    // formats whose file says (a header flag, a column) are checked per record
    if format.entry().completions == crate::trace::Completions::InFile
        || format.entry().has_completion(opts)
    {
        return Ok(());
    }
    Err(Error::Unsupported(format!(
        "{}: the {format} format has no completion times; give a service model (e.g. \
         --service disk or --service exp:5ms) to derive busy and idle periods",
        path.display()
    )))
}

fn assemble(
    streamed: Streamed,
    states: HashMap<u32, DeviceState>,
    service: Option<&ServiceModel>,
    seed: u64,
) -> Fleet {
    let mut ids: Vec<u32> = states.keys().copied().collect();
    ids.sort_unstable();
    let mut states = states;
    let devices = ids
        .into_iter()
        .map(|id| {
            let st = states.remove(&id).expect("listed above");
            st.row(id, streamed.device_name(id))
        })
        .collect();
    let r = &streamed.report;
    Fleet {
        path: r.path.display().to_string(),
        format: r.format,
        requests: streamed.requests,
        completions: match service {
            Some(m) => CompletionSource::Modelled {
                model: m.to_string(),
                seed,
            },
            None => CompletionSource::Recorded,
        },
        skipped: r.skipped,
        streamed: !streamed.loaded_whole,
        p90_relative_error: P90_RELATIVE_ERROR,
        devices,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::characterize::{characterize, CharacterizeOptions};
    use crate::period::periods_of;
    use crate::trace::{read_trace, Format, Op};

    fn data(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/data/traces")
            .join(name)
    }

    /// Every row against a one-device analysis of the whole read:
    /// counts, means, span and utilisation exactly, CV to 1e-9, the p90
    /// within the histogram's error of an order statistic next to the
    /// exact (interpolated) one.
    fn check_against_one_device(path: &Path, opts: &ReadOptions, model: Option<&ServiceModel>) {
        let fleet = fleet_of(path, opts, model, 7).unwrap();
        let whole = read_trace(path, opts).unwrap();
        let devices = whole.devices();
        assert!(
            devices.len() > 1,
            "{}: a multi-device fixture",
            path.display()
        );
        assert_eq!(fleet.devices.len(), devices.len());
        assert_eq!(fleet.requests, whole.len() as u64);
        for (row, d) in fleet.devices.iter().zip(&devices) {
            assert_eq!((row.id, &row.name), (d.id, &d.name));
            let one = whole.select_device(d.id).unwrap();
            let copts = CharacterizeOptions {
                service: model.cloned(),
                seed: 7,
                ..Default::default()
            };
            let c = characterize(&one, devices.clone(), Some(d.id), &copts).unwrap();
            let at = format!("{} device {}", path.display(), d.id);
            assert_eq!(row.requests, c.trace.requests, "{at}");
            assert_eq!(row.span_s, c.trace.span_s, "{at}");
            assert_eq!(row.utilization, c.utilization, "{at}");
            assert_eq!(row.idle_count, c.idle.count, "{at}");
            assert_eq!(row.idle_mean_s, c.idle.mean_s, "{at}");
            assert_eq!(row.idle_total_s, c.idle.total_s, "{at}");
            assert_eq!(row.busy_count, c.busy.count, "{at}");
            assert_eq!(row.busy_mean_s, c.busy.mean_s, "{at}");
            assert!(
                (row.idle_cv - c.idle.cv).abs() <= 1e-9 * c.idle.cv.max(1.0),
                "{at}: {} vs {}",
                row.idle_cv,
                c.idle.cv
            );
            // the order statistics around the 90th percentile, from the
            // periods directly
            let (p, _) = periods_of(&one, model, 7).unwrap();
            let mut idle = p.idle_len_ns.clone();
            idle.sort_unstable();
            if idle.is_empty() {
                assert_eq!(row.idle_p90_s, 0.0, "{at}");
                continue;
            }
            let h = (idle.len() - 1) as f64 * 0.9;
            let lo = (h.floor() as usize).saturating_sub(1);
            let hi = (h.floor() as usize + 1).min(idle.len() - 1);
            let v = row.idle_p90_s * 1e9;
            let (a, b) = (idle[lo] as f64, idle[hi] as f64);
            assert!(
                v >= a * (1.0 - P90_RELATIVE_ERROR) - 1.0
                    && v <= b * (1.0 + P90_RELATIVE_ERROR) + 1.0,
                "{at}: p90 {v} ns outside [{a}, {b}] ± 1 % (exact {})",
                c.idle.p90_s * 1e9
            );
            assert!(
                (v - c.idle.p90_s * 1e9).abs() <= (b - a) + P90_RELATIVE_ERROR * b + 1.0,
                "{at}"
            );
        }
    }

    #[test]
    fn msr_disks_with_recorded_completions_match_one_device_analyses() {
        check_against_one_device(&data("small.msr.csv"), &ReadOptions::default(), None);
        // and modelled, replacing the recorded ones
        let m: ServiceModel = "exp:2ms".parse().unwrap();
        check_against_one_device(&data("small.msr.csv"), &ReadOptions::default(), Some(&m));
    }

    #[test]
    fn a_file_of_several_msr_hosts_matches_one_device_analyses() {
        // hosts rsrch (disks 0, 2) and hm (disk 0), interleaved by time,
        // each request served in 2 ms (20,000 ticks of 100 ns)
        let mut lines = Vec::new();
        let mut x: u64 = 11;
        for (k, (host, disk)) in [("rsrch", 0), ("hm", 0), ("rsrch", 2)].iter().enumerate() {
            let mut t = 128_166_372_000_000_000u64 + k as u64 * 977;
            for i in 0..400u64 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                t += 5_000 + (x >> 40) % (1 + 300_000 * (k as u64 + 1));
                let op = if i % 3 == 0 { "Write" } else { "Read" };
                lines.push((
                    t,
                    format!("{t},{host},{disk},{op},{},4096,20000", i * 65536),
                ));
            }
        }
        lines.sort_by_key(|l| l.0);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hosts.csv");
        let text: String = lines.into_iter().map(|l| l.1 + "\n").collect();
        std::fs::write(&path, text).unwrap();
        check_against_one_device(&path, &ReadOptions::default(), None);
        let fleet = fleet_of(&path, &ReadOptions::default(), None, 1).unwrap();
        let names: Vec<_> = fleet
            .devices
            .iter()
            .filter_map(|d| d.name.clone())
            .collect();
        assert_eq!(names, ["rsrch:0", "rsrch:2", "hm:0"]);
    }

    #[test]
    fn alibaba_and_tencent_volumes_match_one_device_analyses() {
        for model in ["disk", "const:3ms", "exp:1ms"] {
            let m: ServiceModel = model.parse().unwrap();
            check_against_one_device(
                &data("small.alibaba.csv"),
                &ReadOptions::default(),
                Some(&m),
            );
            check_against_one_device(
                &data("small.tencent.csv"),
                &ReadOptions::default(),
                Some(&m),
            );
        }
    }

    /// A generated fleet in the Alibaba layout: `devices` volumes with
    /// their own rates, interleaved in time order as the release is.
    fn generated_fleet(dir: &Path, devices: u32, per_device: u64) -> std::path::PathBuf {
        use std::io::Write;
        let mut rows: Vec<(u64, u32, u64, u32)> = Vec::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for d in 0..devices {
            let mut t_us = 1_577_836_800_000_000 + u64::from(d) * 17;
            for _ in 0..per_device {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // gaps of 1 µs to ~65 ms, scaled per device: bursts and lulls
                t_us += (x >> 48) % (1 + u64::from(d + 1) * 20_000) + 1;
                rows.push((t_us, d * 7 + 3, (x >> 20) % (1 << 30), 4096 << (x % 3)));
            }
        }
        rows.sort_by_key(|r| r.0);
        let path = dir.join("fleet.alibaba.csv");
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        for (t, d, off, len) in rows {
            let op = if off % 3 == 0 { 'W' } else { 'R' };
            writeln!(f, "{d},{op},{off},{len},{t}").unwrap();
        }
        f.flush().unwrap();
        path
    }

    #[test]
    fn a_generated_fleet_matches_one_device_analyses() {
        let dir = tempfile::tempdir().unwrap();
        let path = generated_fleet(dir.path(), 6, 2_000);
        let m: ServiceModel = "disk".parse().unwrap();
        check_against_one_device(&path, &ReadOptions::default(), Some(&m));
        let fleet = fleet_of(&path, &ReadOptions::default(), Some(&m), 1).unwrap();
        assert_eq!(fleet.format.map(Format::name), Some("alibaba"));
        assert!(fleet.streamed);
        assert_eq!(
            fleet.devices.iter().map(|d| d.id).collect::<Vec<_>>(),
            [3, 10, 17, 24, 31, 38]
        );
    }

    #[test]
    fn state_does_not_grow_with_requests() {
        // the same gap distribution (1..=1000 µs, cycled), 1,000 vs 200,000
        // requests: the state's size is the same
        let m: ServiceModel = "const:100ns".parse().unwrap();
        let size_after = |n: u64| {
            let mut st = DeviceState::new(Some(&m), 1);
            let mut t = 0u64;
            for i in 0..n {
                t += (i % 1000 + 1) * 1_000;
                st.push(&RawRequest {
                    arrival_ns: t,
                    completion_ns: None,
                    offset_bytes: 0,
                    size_bytes: 512,
                    op: Op::Read,
                    device: 0,
                });
            }
            assert_eq!(st.requests, n);
            st.state_bytes()
        };
        let small = size_after(1_000);
        assert_eq!(small, size_after(200_000));
        // and it is small: the struct plus one histogram of ~2^20 ns range
        assert!(small < 64 << 10, "{small} bytes");
    }

    #[test]
    fn a_device_out_of_order_is_refused_naming_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("late.alibaba.csv");
        std::fs::write(&path, "1,R,0,4096,100\n2,R,0,4096,50\n1,R,0,4096,90\n").unwrap();
        let m: ServiceModel = "const:1us".parse().unwrap();
        let e = fleet_of(&path, &ReadOptions::default(), Some(&m), 1)
            .unwrap_err()
            .to_string();
        // device 2 arriving before device 1 is fine; device 1 going back is not
        assert!(e.contains("line 3") && e.contains("device 1"), "{e}");
        assert!(e.contains("--device ID"), "{e}");
    }

    #[test]
    fn no_completions_and_no_model_is_refused_saying_so() {
        let e = fleet_of(&data("small.alibaba.csv"), &ReadOptions::default(), None, 1)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no completion times") && e.contains("--service"),
            "{e}"
        );
    }
}
