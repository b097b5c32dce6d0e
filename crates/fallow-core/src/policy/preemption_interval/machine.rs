//! The Moore machine of Eggert & Touch's idletime scheduler (SOSP 2005,
//! §3 and Appendix A): states I, F, B, P; events f, b, t, i; the four
//! variants' transition functions; and the per state × event counters of
//! §5.2. The policy that drives it from the engine's callbacks is in
//! `mod.rs`.

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use std::fmt;

/// The four state machines of Appendix A (Fig. 13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IntervalVariant {
    /// One interval per BG burst; B→I when the BG queue empties (top left, implemented).
    BurstIdle,
    /// One interval per BG burst; B→P when the BG queue empties (top right).
    BurstPreempt,
    /// One interval per BG request; B→I when the BG queue empties (bottom left).
    RequestIdle,
    /// One interval per BG request; B→P when the BG queue empties (bottom right).
    RequestPreempt,
}

impl IntervalVariant {
    /// Name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            IntervalVariant::BurstIdle => "burst-idle",
            IntervalVariant::BurstPreempt => "burst-preempt",
            IntervalVariant::RequestIdle => "request-idle",
            IntervalVariant::RequestPreempt => "request-preempt",
        }
    }

    /// `burst-idle`, …, or the Fig. 13 position `tl`, `tr`, `bl`, `br`.
    pub(crate) fn parse(s: &str) -> Option<IntervalVariant> {
        Some(match s {
            "burst-idle" | "tl" => IntervalVariant::BurstIdle,
            "burst-preempt" | "tr" => IntervalVariant::BurstPreempt,
            "request-idle" | "bl" => IntervalVariant::RequestIdle,
            "request-preempt" | "br" => IntervalVariant::RequestPreempt,
            _ => return None,
        })
    }

    /// B→P on b: a preemption interval before every BG request.
    pub fn interval_per_request(self) -> bool {
        matches!(
            self,
            IntervalVariant::RequestIdle | IntervalVariant::RequestPreempt
        )
    }

    /// B→P on i: a preemption interval after a BG burst.
    pub fn interval_after_burst(self) -> bool {
        matches!(
            self,
            IntervalVariant::BurstPreempt | IntervalVariant::RequestPreempt
        )
    }
}

/// A state of the machine (§3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum IntervalState {
    /// I: idle (the start state).
    Idle,
    /// F: serving an FG request.
    Fg,
    /// B: serving a BG request.
    Bg,
    /// P: in a preemption interval.
    Preempt,
}

impl IntervalState {
    /// All states, in the paper's order I, F, B, P.
    pub const ALL: [IntervalState; 4] = [
        IntervalState::Idle,
        IntervalState::Fg,
        IntervalState::Bg,
        IntervalState::Preempt,
    ];

    /// The paper's letter.
    pub fn letter(self) -> char {
        ['I', 'F', 'B', 'P'][self as usize]
    }
}

/// An event (§3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum IntervalEvent {
    /// f: an FG request heads the queue.
    Fg,
    /// b: a BG request heads the queue.
    Bg,
    /// t: the preemption interval expired.
    Timeout,
    /// i: the queue is empty.
    Empty,
}

impl IntervalEvent {
    /// All events, in the paper's order f, b, t, i.
    pub const ALL: [IntervalEvent; 4] = [
        IntervalEvent::Fg,
        IntervalEvent::Bg,
        IntervalEvent::Timeout,
        IntervalEvent::Empty,
    ];

    /// The paper's letter.
    pub fn letter(self) -> char {
        ['f', 'b', 't', 'i'][self as usize]
    }
}

/// The transition function of `variant` (Appendix A). Impossible pairs (t
/// outside P) leave the state unchanged.
pub fn next_state(variant: IntervalVariant, s: IntervalState, e: IntervalEvent) -> IntervalState {
    use {IntervalEvent as E, IntervalState as S};
    match (s, e) {
        (_, E::Fg) => S::Fg,
        (S::Idle, E::Bg) => S::Bg,
        (S::Fg, E::Bg | E::Empty) => S::Preempt,
        (S::Preempt, E::Timeout) => S::Idle,
        (S::Bg, E::Bg) if variant.interval_per_request() => S::Preempt,
        (S::Bg, E::Empty) if variant.interval_after_burst() => S::Preempt,
        (S::Bg, E::Empty) => S::Idle,
        (s, _) => s,
    }
}

/// Event counters per state × event (§5.2: "whenever a new foreground
/// request appears (event f) during a preemption interval (state P), the
/// scheduler increases the `P[f]` counter").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IntervalCounters {
    n: [[u64; 4]; 4],
}

impl IntervalCounters {
    /// How often `e` happened in state `s`.
    pub fn get(&self, s: IntervalState, e: IntervalEvent) -> u64 {
        self.n[s as usize][e as usize]
    }

    pub(crate) fn add(&mut self, s: IntervalState, e: IntervalEvent, k: u64) {
        self.n[s as usize][e as usize] += k;
    }
}

impl fmt::Display for IntervalCounters {
    /// Non-zero counters as `I[f]=1 F[b]=2 …`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for s in IntervalState::ALL {
            for e in IntervalEvent::ALL {
                let n = self.get(s, e);
                if n > 0 {
                    if !first {
                        f.write_str(" ")?;
                    }
                    first = false;
                    write!(f, "{}[{}]={n}", s.letter(), e.letter())?;
                }
            }
        }
        Ok(())
    }
}

impl Serialize for IntervalCounters {
    /// All sixteen as `{"I[f]": 1, …}`.
    fn serialize<S: Serializer>(&self, ser: S) -> std::result::Result<S::Ok, S::Error> {
        let mut m = ser.serialize_map(Some(16))?;
        for s in IntervalState::ALL {
            for e in IntervalEvent::ALL {
                m.serialize_entry(&format!("{}[{}]", s.letter(), e.letter()), &self.get(s, e))?;
            }
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use IntervalEvent::{Bg as b, Empty as i, Fg as f, Timeout as t};
    use IntervalState::{Bg as B, Fg as F, Idle as I, Preempt as P};

    #[test]
    fn transition_table_of_the_four_variants() {
        use IntervalVariant::*;
        for v in [BurstIdle, BurstPreempt, RequestIdle, RequestPreempt] {
            // common to all (Appendix A)
            assert_eq!(next_state(v, I, i), I);
            assert_eq!(next_state(v, I, f), F);
            assert_eq!(next_state(v, I, b), B);
            assert_eq!(next_state(v, F, b), P);
            assert_eq!(next_state(v, F, i), P);
            assert_eq!(next_state(v, P, t), I);
            assert_eq!(next_state(v, P, b), P);
            assert_eq!(next_state(v, B, f), F);
        }
        assert_eq!(next_state(BurstIdle, B, b), B);
        assert_eq!(next_state(BurstIdle, B, i), I);
        assert_eq!(next_state(BurstPreempt, B, b), B);
        assert_eq!(next_state(BurstPreempt, B, i), P);
        assert_eq!(next_state(RequestIdle, B, b), P);
        assert_eq!(next_state(RequestIdle, B, i), I);
        assert_eq!(next_state(RequestPreempt, B, b), P);
        assert_eq!(next_state(RequestPreempt, B, i), P);
    }

    #[test]
    fn counters_print_and_serialize_by_name() {
        let mut c = IntervalCounters::default();
        c.add(B, f, 2);
        assert_eq!(c.to_string(), "B[f]=2");
        let j = serde_json::to_value(c).unwrap();
        assert_eq!(j["B[f]"], 2);
        assert_eq!(j["I[i]"], 0);
        assert_eq!(j.as_object().unwrap().len(), 16);
    }
}
