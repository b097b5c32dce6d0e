//! The `fallow simulate` command line that reproduces a tuned choice
//! (`tune`, `recommend` and `demo` print it): the inverse of the shared
//! input and BG flags ([`InputArgs`], `--bg*`), so a flag added to
//! [`crate::args`] is written back here.

use crate::args::InputArgs;
use fallow_core::sim::{BgWork, SimConfig};
use fallow_core::trace::TimeUnit;
use fallow_core::tune::Choice;

/// `fallow simulate` arguments that run `c` on the same input with the same settings.
pub fn simulate_args(i: &InputArgs, sim: &SimConfig, c: &Choice) -> Vec<String> {
    let mut a: Vec<String> = vec!["simulate".into()];
    let mut flag = |k: &str, v: String| {
        a.push(k.to_string());
        a.push(v);
    };
    if let Some(spec) = &i.workload {
        flag("--workload", spec.clone());
        if let Some(r) = i.arrival_rate {
            flag("--arrival-rate", r.to_string());
        }
        if let Some(u) = i.utilization {
            flag("--utilization", u.to_string());
        }
        flag("--requests", i.requests.to_string());
        flag("--request-size", i.request_size.to_string());
        flag("--write-fraction", i.write_fraction.to_string());
    }
    if let Some(d) = &i.device {
        flag("--device", d.to_string());
    }
    if let Some(f) = i.read.format {
        flag("--format", f.to_string());
    }
    if i.read.time_unit != TimeUnit::Ms {
        let u = match i.read.time_unit {
            TimeUnit::Ns => "ns",
            TimeUnit::Us => "us",
            TimeUnit::Ms => "ms",
            TimeUnit::S => "s",
        };
        flag("--time-unit", u.into());
    }
    if i.read.offset_unit != 1 {
        flag("--offset-unit", i.read.offset_unit.to_string());
    }
    if i.read.size_unit != 1 {
        flag("--size-unit", i.read.size_unit.to_string());
    }
    if let Some(m) = &i.service {
        flag("--service", m.to_string());
    }
    flag("--bg", sim.bg_service.to_string());
    flag("--bg-size", c.bg_size_bytes.to_string());
    match sim.bg_work {
        BgWork::Endless => {}
        BgWork::Requests(n) => flag("--bg-work", format!("requests:{n}")),
        BgWork::Bytes(b) => flag("--bg-work", format!("bytes:{b}")),
        BgWork::PerFgWrite { ratio } => flag("--bg-work", format!("writes:{ratio}")),
    }
    if sim.switch_penalty_ns > 0 {
        flag("--switch-penalty", format!("{}ns", sim.switch_penalty_ns));
    }
    flag("--seed", sim.seed.to_string());
    flag("--policy", c.spec.clone());
    if i.read.skip_bad {
        a.push("--skip-bad".into());
    }
    if let Some(p) = &i.trace {
        a.insert(1, p.display().to_string());
    }
    a
}

/// Quote for a POSIX shell when needed.
pub fn shell_quote(s: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./:=,%+@".contains(c);
    if !s.is_empty() && s.chars().all(safe) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}
