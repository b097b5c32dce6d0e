//! Two traces one after the other, for workloads that change half-way:
//! Busy Bee §5.3 concatenates Trace2 and Trace1 into Trace4 to see how a
//! policy adapts "as the workload changes swiftly".

use super::{ReadReport, Trace};
use crate::error::{Error, Result};
use std::path::PathBuf;

/// The idle time between the two traces of [`Trace::then`] when none is
/// given (`--gap`, Python's `gap=`): long enough to end any busy period.
pub const DEFAULT_GAP_NS: u64 = 1_000_000_000;

impl Trace {
    /// `a`, then `b` shifted so that its first request arrives `gap_ns`
    /// after `a` ends (its last arrival or completion). Devices keep their
    /// ids (see [`Trace::set_device`] to splice one device after another).
    /// Completion times are kept only when both traces have them;
    /// otherwise both need a service model, as a trace without them does.
    /// With `gap_ns > 0`, the busy periods and idle intervals of the result
    /// are those of `a`, an idle interval of `gap_ns`, then those of `b`.
    pub fn concat(a: &Trace, b: &Trace, gap_ns: u64) -> Result<Trace> {
        let shift = a
            .span_ns()
            .checked_add(gap_ns)
            .filter(|s| s.checked_add(b.span_ns()).is_some())
            .ok_or_else(|| {
                Error::invalid(
                    "gap",
                    format!(
                        "{} then {} {gap_ns} ns later overflows the ns clock",
                        a.report.path.display(),
                        b.report.path.display()
                    ),
                )
            })?;
        fn join<T: Copy>(x: &[T], y: &[T]) -> Vec<T> {
            let mut v = Vec::with_capacity(x.len() + y.len());
            v.extend_from_slice(x);
            v.extend_from_slice(y);
            v
        }
        let shifted = |t: &[u64]| t.iter().map(|&v| v + shift).collect::<Vec<_>>();
        let mut arrival_ns = a.arrival_ns.clone();
        arrival_ns.extend(shifted(&b.arrival_ns));
        let completion_ns = match (&a.completion_ns, &b.completion_ns) {
            (Some(ca), Some(cb)) => {
                let mut c = ca.clone();
                c.extend(shifted(cb));
                Some(c)
            }
            _ => None,
        };
        let (ra, rb) = (&a.report, &b.report);
        let report = ReadReport {
            path: PathBuf::from(format!("{} + {}", ra.path.display(), rb.path.display())),
            format: ra.format.filter(|&f| rb.format == Some(f)),
            // Saturating: the counts may come from fallow binary headers.
            skipped: ra.skipped.saturating_add(rb.skipped),
            skip_examples: ra
                .skip_examples
                .iter()
                .chain(&rb.skip_examples)
                .cloned()
                .collect(),
            reordered: ra.reordered.saturating_add(rb.reordered),
            ignored: ra.ignored.saturating_add(rb.ignored),
            ignored_by_reason: {
                let mut m = ra.ignored_by_reason.clone();
                for (reason, n) in &rb.ignored_by_reason {
                    let e = m.entry(reason).or_default();
                    *e = e.saturating_add(*n);
                }
                m
            },
            origin_ns: ra.origin_ns,
            source_format: ra.source_format.filter(|&f| rb.source_format == Some(f)),
            // Device ids name hosts by index: only the same host list keeps meaning.
            hosts: if ra.hosts == rb.hosts {
                ra.hosts.clone()
            } else {
                Vec::new()
            },
        };
        Ok(Trace {
            arrival_ns,
            completion_ns,
            offset_bytes: join(&a.offset_bytes, &b.offset_bytes),
            size_bytes: join(&a.size_bytes, &b.size_bytes),
            op: join(&a.op, &b.op),
            device: join(&a.device, &b.device),
            report,
        })
    }

    /// Put every request on device `id` (so one device of a trace can
    /// follow another device of another trace as one device).
    pub fn set_device(&mut self, id: u32) {
        self.device.iter_mut().for_each(|d| *d = id);
    }

    /// One device whose workload changes: `first` (one device's requests)
    /// then `second`'s (one device's too) moved onto `first`'s device,
    /// starting `gap_ns` after `first` ends (`fallow simulate --then`,
    /// Python's `then=`). The first part is `first.len()` requests
    /// ([`crate::sim::simulate_split`]).
    pub fn then(first: &Trace, second: &Trace, gap_ns: u64) -> Result<Trace> {
        if gap_ns == 0 {
            return Err(Error::invalid(
                "gap",
                "must be positive, so the two traces stay apart",
            ));
        }
        let mut tail = second.clone();
        if let Some(&d) = first.device.first() {
            tail.set_device(d);
        }
        Trace::concat(first, &tail, gap_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::period::extract;
    use crate::trace::Op;

    fn trace(arrival: Vec<u64>, completion: Option<Vec<u64>>, device: u32) -> Trace {
        let n = arrival.len();
        Trace::from_columns(
            arrival,
            completion,
            vec![0; n],
            vec![4096; n],
            vec![Op::Read; n],
            vec![device; n],
        )
        .unwrap()
    }

    #[test]
    fn b_starts_gap_after_a_ends() {
        // a: [0,10] [30,45]; ends at 45. b: [0,5] [20,21]; shifted by 45 + 100
        let a = trace(vec![0, 30], Some(vec![10, 45]), 0);
        let b = trace(vec![0, 20], Some(vec![5, 21]), 3);
        let c = Trace::concat(&a, &b, 100).unwrap();
        assert_eq!(c.arrival_ns(), [0, 30, 145, 165]);
        assert_eq!(c.completion_ns().unwrap(), [10, 45, 150, 166]);
        assert_eq!(c.device(), [0, 0, 3, 3]);
        let p = extract(c.arrival_ns(), c.completion_ns().unwrap());
        // a's idle interval, the gap, b's idle interval
        assert_eq!(p.idle_len_ns, vec![20, 100, 15]);
        assert_eq!(p.busy_requests, vec![1, 1, 1, 1]);
        let mut c = c;
        c.set_device(7);
        assert_eq!(c.devices().len(), 1);
        assert_eq!(c.devices()[0].id, 7);
    }

    #[test]
    fn then_puts_the_second_on_the_first_device_and_needs_a_gap() {
        let a = trace(vec![0, 30], Some(vec![10, 45]), 2);
        let b = trace(vec![0, 20], Some(vec![5, 21]), 3);
        let c = Trace::then(&a, &b, 100).unwrap();
        assert_eq!(c.arrival_ns(), [0, 30, 145, 165]);
        assert_eq!(c.device(), [2, 2, 2, 2]);
        let e = Trace::then(&a, &b, 0).unwrap_err().to_string();
        assert!(e.contains("gap") && e.contains("positive"), "{e}");
    }

    #[test]
    fn completions_only_when_both_have_them() {
        let a = trace(vec![0, 30], Some(vec![10, 45]), 0);
        let b = trace(vec![0, 20], None, 0);
        let c = Trace::concat(&a, &b, 1).unwrap();
        assert!(c.completion_ns().is_none());
        // a without completions ends at its last arrival
        let c = Trace::concat(&b, &a, 1).unwrap();
        assert_eq!(c.arrival_ns(), [0, 20, 21, 51]);
    }

    #[test]
    fn overflow_is_an_error() {
        let a = trace(vec![0, 30], Some(vec![10, 45]), 0);
        let e = Trace::concat(&a, &a, u64::MAX - 10)
            .unwrap_err()
            .to_string();
        assert!(e.contains("overflows"), "{e}");
    }
}
