//! Busy periods and idle intervals.
//!
//! The device is busy while at least one request is outstanding, so busy
//! periods are the union of the `[arrival, completion]` intervals and idle
//! intervals are the gaps between them (docs/characterisation.md).
//! A request arriving exactly when the device falls idle continues the busy
//! period: idle intervals are strictly positive. Time before the first
//! arrival and after the last completion is not an idle interval: nothing
//! bounds it.
//!
//! Traces without completion times get them from a [`ServiceModel`] and a
//! FCFS single-server queue ([`fcfs_completions`], with the service models).

use crate::error::{Error, Result};
use crate::polled::{cancelled, CANCEL_EVERY_REQUESTS};
use crate::service::{fcfs_completions_cancellable, ServiceModel};
use crate::trace::Trace;
use serde::Serialize;
use std::borrow::Cow;
use std::sync::atomic::AtomicBool;

/// Busy periods and the idle intervals between them, in time order.
///
/// `idle_len_ns[i]` is the gap between busy period `i` and busy period `i+1`,
/// so there is one idle interval fewer than busy periods.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Periods {
    /// Start of each busy period (arrival of its first request), ns.
    pub busy_start_ns: Vec<u64>,
    /// Length of each busy period, ns.
    pub busy_len_ns: Vec<u64>,
    /// Requests that arrived during each busy period.
    pub busy_requests: Vec<u32>,
    /// Start of each idle interval (end of the busy period before it), ns.
    pub idle_start_ns: Vec<u64>,
    /// Length of each idle interval, ns (always > 0).
    pub idle_len_ns: Vec<u64>,
}

impl Periods {
    /// Total busy time, ns.
    pub fn busy_total_ns(&self) -> u64 {
        self.busy_len_ns.iter().sum()
    }
    /// Total idle time between the first arrival and the last completion, ns.
    pub fn idle_total_ns(&self) -> u64 {
        self.idle_len_ns.iter().sum()
    }
    /// Fraction of the observed window `[first arrival, last completion]`
    /// during which the device was busy.
    pub fn utilization(&self) -> f64 {
        let busy = self.busy_total_ns() as f64;
        let total = busy + self.idle_total_ns() as f64;
        if total > 0.0 {
            busy / total
        } else {
            0.0
        }
    }
}

/// Extract periods from arrival and completion columns. `arrival_ns` must be
/// sorted (a [`Trace`] always is); completions may be in any order.
pub fn extract(arrival_ns: &[u64], completion_ns: &[u64]) -> Periods {
    extract_cancellable(arrival_ns, completion_ns, None).expect("no cancel flag, never stopped")
}

/// [`extract`] that gives up (`None`) soon after `cancel` is set: it is
/// read every [`CANCEL_EVERY_REQUESTS`] requests.
pub fn extract_cancellable(
    arrival_ns: &[u64],
    completion_ns: &[u64],
    cancel: Option<&AtomicBool>,
) -> Option<Periods> {
    assert_eq!(arrival_ns.len(), completion_ns.len());
    let n = arrival_ns.len();
    let mut p = Periods::default();
    if n == 0 {
        return Some(p);
    }
    // Typical traces have ~1-2 requests per busy period.
    let est = n / 2 + 1;
    p.busy_start_ns.reserve(est);
    p.busy_len_ns.reserve(est);
    p.busy_requests.reserve(est);
    p.idle_start_ns.reserve(est);
    p.idle_len_ns.reserve(est);

    let mut start = arrival_ns[0];
    let mut end = completion_ns[0].max(start);
    let mut count: u32 = 1;
    let mut from = 1;
    while from < n {
        if cancelled(cancel) {
            return None;
        }
        let to = (from + CANCEL_EVERY_REQUESTS).min(n);
        for i in from..to {
            let a = arrival_ns[i];
            let c = completion_ns[i];
            if a > end {
                p.busy_start_ns.push(start);
                p.busy_len_ns.push(end - start);
                p.busy_requests.push(count);
                p.idle_start_ns.push(end);
                p.idle_len_ns.push(a - end);
                start = a;
                end = c.max(a);
                count = 1;
            } else {
                end = end.max(c);
                count = count.saturating_add(1);
            }
        }
        from = to;
    }
    p.busy_start_ns.push(start);
    p.busy_len_ns.push(end - start);
    p.busy_requests.push(count);
    Some(p)
}

/// Only the idle interval lengths, ns: the same gaps as
/// [`extract`]`(..).idle_len_ns`, without building the other four columns
/// (a third of the memory traffic when only idleness is wanted).
pub fn idle_lengths_ns(arrival_ns: &[u64], completion_ns: &[u64]) -> Vec<u64> {
    assert_eq!(arrival_ns.len(), completion_ns.len());
    let Some((&a0, _)) = arrival_ns.split_first() else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity(arrival_ns.len() / 2 + 1);
    let mut end = completion_ns[0].max(a0);
    for (&a, &c) in arrival_ns[1..].iter().zip(&completion_ns[1..]) {
        if a > end {
            out.push(a - end);
            end = c.max(a);
        } else {
            end = end.max(c);
        }
    }
    out
}

/// Where a trace's completion times come from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum CompletionSource {
    /// Recorded in the trace.
    Recorded,
    /// Modelled with a service model and a FCFS queue.
    Modelled {
        /// The model, as given (`exp:5ms`, `disk`, …).
        model: String,
        /// Seed of its random stream.
        seed: u64,
    },
}

/// Periods of a trace: exact when it has completions; otherwise through
/// `model` (an error if there is none).
pub fn periods_of(
    trace: &Trace,
    model: Option<&ServiceModel>,
    seed: u64,
) -> Result<(Periods, CompletionSource)> {
    let (completion_ns, source) = completions_of(trace, model, seed, None)?;
    Ok((extract(trace.arrival_ns(), &completion_ns), source))
}

/// A trace's completion times, ns, and where they come from: `model`'s
/// through a FCFS queue (seeded) when one is given, else the trace's own;
/// the one place that decides it for periods, the simulator's and the
/// energy study's preparation. With `cancel`, [`Error::Interrupted`] soon
/// after it is set (it is read every [`CANCEL_EVERY_REQUESTS`] requests).
pub fn completions_of<'t>(
    trace: &'t Trace,
    model: Option<&ServiceModel>,
    seed: u64,
    cancel: Option<&AtomicBool>,
) -> Result<(Cow<'t, [u64]>, CompletionSource)> {
    match (trace.completion_ns(), model) {
        (_, Some(m)) => {
            let c = fcfs_completions_cancellable(
                trace.arrival_ns(),
                trace.offset_bytes(),
                trace.size_bytes(),
                m,
                seed,
                cancel,
            )
            .ok_or(Error::Interrupted)?;
            let source = CompletionSource::Modelled {
                model: m.to_string(),
                seed,
            };
            Ok((Cow::Owned(c), source))
        }
        (Some(c), None) => Ok((Cow::Borrowed(c), CompletionSource::Recorded)),
        (None, None) => Err(Error::Unsupported(format!(
            "{}: the trace has no completion times{}; give a service model (e.g. --service disk or --service exp:5ms) to derive busy and idle periods",
            trace.report().path.display(),
            // fio iologs look complete but record submissions only.
            match (trace.report().format, trace.report().source_format) {
                (Some(f), _) | (_, Some(f)) if f == crate::trace::Format::FioIolog => {
                    " (a fio iolog records when fio submitted each I/O, never when it completed; \
                     fio's latency logs, write_lat_log with log_offset=1, carry completions)"
                }
                _ => "",
            }
        ))),
    }
}

/// The idle interval lengths of a trace (one device), ns: those of
/// [`periods_of`], through the lean [`idle_lengths_ns`] when the trace's
/// own completions are used (no service model).
pub fn idle_lengths_of(trace: &Trace, model: Option<&ServiceModel>, seed: u64) -> Result<Vec<u64>> {
    match (model, trace.completion_ns()) {
        (None, Some(c)) => Ok(idle_lengths_ns(trace.arrival_ns(), c)),
        _ => periods_of(trace, model, seed).map(|(p, _)| p.idle_len_ns),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_lengths_of_a_trace_recorded_or_modelled() {
        use crate::trace::Op;
        // busy [0,10] [15,20], gap 5; then [40,41] after a gap of 20
        let t = Trace::from_columns(
            vec![0, 5, 15, 40],
            Some(vec![10, 8, 20, 41]),
            vec![0; 4],
            vec![512; 4],
            vec![Op::Read; 4],
            vec![0; 4],
        )
        .unwrap();
        assert_eq!(idle_lengths_of(&t, None, 1).unwrap(), [5, 20]);
        // a constant 2 ns service, FCFS: busy [0,2] [5,7] [15,17] [40,42]
        let m: ServiceModel = "const:2ns".parse().unwrap();
        assert_eq!(idle_lengths_of(&t, Some(&m), 1).unwrap(), [3, 8, 23]);
        let bare = Trace::from_columns(
            vec![0, 9],
            None,
            vec![0; 2],
            vec![1; 2],
            vec![Op::Read; 2],
            vec![0; 2],
        )
        .unwrap();
        assert!(idle_lengths_of(&bare, None, 1).is_err());
    }

    #[test]
    fn union_of_overlapping_requests() {
        // [0,10] [5,12] | gap 3 | [15,20] | gap 0 -> same period [20,25] | gap 5 | [30,31]
        let a = [0, 5, 15, 20, 30];
        let c = [10, 12, 20, 25, 31];
        let p = extract(&a, &c);
        assert_eq!(p.busy_start_ns, vec![0, 15, 30]);
        assert_eq!(p.busy_len_ns, vec![12, 10, 1]);
        assert_eq!(p.busy_requests, vec![2, 2, 1]);
        assert_eq!(p.idle_start_ns, vec![12, 25]);
        assert_eq!(p.idle_len_ns, vec![3, 5]);
        assert_eq!(p.busy_total_ns() + p.idle_total_ns(), 31);
    }

    #[test]
    fn long_request_covers_later_ones() {
        // request 0 outlasts 1 and 2 (completions out of order)
        let p = extract(&[0, 1, 2, 50], &[40, 3, 4, 60]);
        assert_eq!(p.busy_len_ns, vec![40, 10]);
        assert_eq!(p.busy_requests, vec![3, 1]);
        assert_eq!(p.idle_len_ns, vec![10]);
    }

    #[test]
    fn idle_lengths_equal_extract() {
        let a = [0, 5, 15, 20, 30, 31, 100];
        let c = [10, 12, 20, 25, 31, 40, 101];
        assert_eq!(idle_lengths_ns(&a, &c), extract(&a, &c).idle_len_ns);
        assert!(idle_lengths_ns(&[], &[]).is_empty());
    }

    #[test]
    fn empty_and_single() {
        assert_eq!(extract(&[], &[]), Periods::default());
        let p = extract(&[7], &[9]);
        assert_eq!(p.busy_len_ns, vec![2]);
        assert!(p.idle_len_ns.is_empty());
        assert_eq!(p.utilization(), 1.0);
    }
}
