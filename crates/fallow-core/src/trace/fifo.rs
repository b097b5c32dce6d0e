//! Issue/completion matching shared by the blkparse (text) and blktrace
//! (binary) readers: both see D (issue), R (requeue) and C (completion)
//! events of one request stream and pair them the same way, FIFO per
//! device and sector, so they cannot drift apart.

use super::ReadReport;
use std::collections::{HashMap, VecDeque};

/// What an event does to the request at its (device, sector).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Dispatched to the device (D).
    Issue,
    /// Put back in the queue (R): the newest pending issue is void.
    Requeue,
    /// Completed (C): the oldest pending issue is done.
    Complete,
}

/// The reasons counted in [`ReadReport::ignore`], worded per reader.
pub(crate) struct Reasons {
    pub requeue: &'static str,
    pub requeued_issue: &'static str,
    pub never_completed: &'static str,
    pub unmatched_completion: &'static str,
}

/// Pair completions with issues, FIFO per `(device, sector)` key, over
/// events in time order; the (issue, completion) pairs in issue order.
/// Requeues, requeued issues, issues never completed and completions
/// without a pending issue are counted in `report` by `reasons`.
pub(crate) fn pair<E>(
    events: impl IntoIterator<Item = E>,
    step_and_key: impl Fn(&E) -> (Step, (u32, u64)),
    report: &mut ReadReport,
    reasons: &Reasons,
) -> Vec<(E, E)> {
    enum State<E> {
        Waiting,
        Done(E),
        Requeued,
    }
    let mut issues: Vec<(E, State<E>)> = Vec::new();
    let mut pending: HashMap<(u32, u64), VecDeque<usize>> = HashMap::new();
    for ev in events {
        let (step, key) = step_and_key(&ev);
        match step {
            Step::Issue => {
                pending.entry(key).or_default().push_back(issues.len());
                issues.push((ev, State::Waiting));
            }
            Step::Requeue => {
                report.ignore(reasons.requeue);
                if let Some(idx) = take(&mut pending, key, false) {
                    issues[idx].1 = State::Requeued;
                    report.ignore(reasons.requeued_issue);
                }
            }
            Step::Complete => match take(&mut pending, key, true) {
                Some(idx) => issues[idx].1 = State::Done(ev),
                None => report.ignore(reasons.unmatched_completion),
            },
        }
    }
    let mut done = Vec::with_capacity(issues.len());
    for (issue, state) in issues {
        match state {
            State::Done(c) => done.push((issue, c)),
            State::Waiting => report.ignore(reasons.never_completed),
            State::Requeued => {}
        }
    }
    done
}

/// The oldest (`front`) or newest pending issue of `key`, forgetting the
/// key once none is left so the map holds only requests in flight.
fn take(
    pending: &mut HashMap<(u32, u64), VecDeque<usize>>,
    key: (u32, u64),
    front: bool,
) -> Option<usize> {
    let queue = pending.get_mut(&key)?;
    let idx = if front {
        queue.pop_front()
    } else {
        queue.pop_back()
    };
    if queue.is_empty() {
        pending.remove(&key);
    }
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: Reasons = Reasons {
        requeue: "rq",
        requeued_issue: "rqi",
        never_completed: "never",
        unmatched_completion: "unmatched",
    };

    #[test]
    fn pairs_fifo_per_key_and_counts_the_rest() {
        // (step, sector, name): two issues at sector 8 complete in order;
        // the issue at 16 is requeued, reissued and completed; one
        // completion has no issue; one issue never completes.
        let events = [
            (Step::Issue, 8, "a"),
            (Step::Issue, 8, "b"),
            (Step::Issue, 16, "c"),
            (Step::Requeue, 16, "r"),
            (Step::Issue, 16, "c2"),
            (Step::Complete, 8, "ca"),
            (Step::Complete, 16, "cc2"),
            (Step::Complete, 8, "cb"),
            (Step::Complete, 24, "orphan"),
            (Step::Issue, 32, "d"),
        ];
        let mut report = ReadReport::default();
        let got = pair(events, |e| (e.0, (0, e.1)), &mut report, &R);
        let names: Vec<(&str, &str)> = got.iter().map(|(i, c)| (i.2, c.2)).collect();
        assert_eq!(names, [("a", "ca"), ("b", "cb"), ("c2", "cc2")]);
        for (reason, n) in [("rq", 1), ("rqi", 1), ("never", 1), ("unmatched", 1)] {
            assert_eq!(report.ignored_by_reason[reason], n, "{reason}");
        }
        assert_eq!(report.ignored, 4);
    }

    #[test]
    fn devices_keep_separate_queues() {
        let events = [
            (Step::Issue, 1, "a"),
            (Step::Complete, 2, "x"),
            (Step::Complete, 1, "ca"),
        ];
        let mut report = ReadReport::default();
        let got = pair(events, |e| (e.0, (e.1, 8)), &mut report, &R);
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].0 .2, got[0].1 .2), ("a", "ca"));
        assert_eq!(report.ignored_by_reason["unmatched"], 1);
    }
}
