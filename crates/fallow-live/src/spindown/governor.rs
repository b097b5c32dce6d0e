//! One disk's spin-down decisions: the registry's [`SpinDown`] policy (the
//! very objects `fallow energy` simulates), asked when the disk falls
//! idle and told how each idle interval ended, plus the spin-up
//! [`Budget`]. Pure: it is fed observations with their times, so tests
//! drive it on a virtual clock and the daemon on the monotonic one.
//!
//! The rules are the simulation's (crates/fallow-core/src/energy/sim.rs,
//! SARD seed §II, Figure 1): an idle interval starts when the last request
//! completes; the policy's timeout runs from there; any I/O ends the
//! interval; I/O on a spun-down disk is a spin-up.

use super::budget::Budget;
use fallow_core::energy::spindown::{IdleCtx, SpinDown};
use fallow_core::energy::PowerModel;

/// Where the disk is, as the governor sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GovState {
    /// Requests in flight.
    Busy,
    /// Spinning with nothing to do since `since_ns`; spin down after
    /// `timeout_ns` (the policy's, or longer when the budget held it).
    Idle {
        /// When the interval began, ns.
        since_ns: u64,
        /// The policy's timeout (`None`: stay spinning).
        timeout_ns: Option<u64>,
        /// The budget's later deadline, when it held the policy back, ns.
        held_until_ns: Option<u64>,
    },
    /// Spun down at `at_ns` (in an interval that began at `idle_since_ns`).
    Down {
        /// When the idle interval began, ns.
        idle_since_ns: u64,
        /// When the spin-down was commanded, ns.
        at_ns: u64,
    },
}

/// What [`Governor::tick`] asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tick {
    /// Nothing to do now.
    Wait,
    /// Spin the disk down now: it has been idle `idle_ns` and the timeout
    /// in force was `timeout_ns`.
    SpinDown {
        /// Idle so far, ns.
        idle_ns: u64,
        /// The timeout that expired (the policy's, or the budget's longer one), ns.
        timeout_ns: u64,
    },
    /// The policy's timeout expired but the budget has no spin-up to spare
    /// until `until_ns`: the timeout is lengthened to that. Reported once
    /// each time the budget becomes exhausted (not each idle interval it
    /// holds back: it once logged one per interval); it is released by
    /// the next spin-down.
    BudgetHeld {
        /// The policy's timeout, ns.
        policy_timeout_ns: u64,
        /// The lengthened timeout, ns.
        timeout_ns: u64,
        /// Spin-downs in the budget's window.
        used_in_window: usize,
    },
}

/// A spin-up seen by [`Governor::observe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wake {
    /// The whole idle interval, from the last completion to this I/O, ns.
    pub idle_ns: u64,
    /// From the spin-down to this I/O, ns.
    pub down_ns: u64,
}

/// The policy, the budget and the state of one disk.
pub struct Governor {
    policy: Box<dyn SpinDown>,
    power: PowerModel,
    budget: Option<Budget>,
    state: GovState,
    /// The budget held a spin-down back and none has happened since.
    held: bool,
}

impl std::fmt::Debug for Governor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Governor")
            .field("policy", &self.policy.name())
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl Governor {
    /// A governor for a disk that is spinning and idle at `now_ns`.
    pub fn new(
        policy: Box<dyn SpinDown>,
        power: PowerModel,
        budget: Option<Budget>,
        now_ns: u64,
    ) -> Governor {
        let mut g = Governor {
            policy,
            power,
            budget,
            state: GovState::Busy,
            held: false,
        };
        g.start_idle(now_ns);
        g
    }

    /// A governor for a disk found in standby at `now_ns` (it is not
    /// spun up to find out anything).
    pub fn new_down(
        policy: Box<dyn SpinDown>,
        power: PowerModel,
        budget: Option<Budget>,
        now_ns: u64,
    ) -> Governor {
        Governor {
            policy,
            power,
            budget,
            state: GovState::Down {
                idle_since_ns: now_ns,
                at_ns: now_ns,
            },
            held: false,
        }
    }

    /// The state now.
    pub fn state(&self) -> GovState {
        self.state
    }

    /// The policy's name.
    pub fn policy_name(&self) -> &str {
        self.policy.name()
    }

    /// The budget, if one is kept.
    pub fn budget(&self) -> Option<&Budget> {
        self.budget.as_ref()
    }

    fn start_idle(&mut self, now_ns: u64) {
        let timeout_ns = self.policy.on_idle(&IdleCtx {
            now_ns,
            power: &self.power,
        });
        self.state = GovState::Idle {
            since_ns: now_ns,
            timeout_ns,
            held_until_ns: None,
        };
    }

    /// What the disk did since the last observation: `io` when its
    /// counters moved or requests are in flight, `in_flight` when some
    /// are still. Returns the spin-up when I/O found the disk down.
    pub fn observe(&mut self, now_ns: u64, io: bool, in_flight: bool) -> Option<Wake> {
        let mut wake = None;
        if io || in_flight {
            match self.state {
                GovState::Idle { since_ns, .. } => {
                    self.policy
                        .on_idle_end(now_ns.saturating_sub(since_ns), false);
                }
                GovState::Down {
                    idle_since_ns,
                    at_ns,
                } => {
                    let idle_ns = now_ns.saturating_sub(idle_since_ns);
                    self.policy.on_idle_end(idle_ns, true);
                    wake = Some(Wake {
                        idle_ns,
                        down_ns: now_ns.saturating_sub(at_ns),
                    });
                }
                GovState::Busy => {}
            }
            if in_flight {
                self.state = GovState::Busy;
            } else {
                // it all completed since the last look: idle from now
                self.start_idle(now_ns);
            }
        } else if self.state == GovState::Busy {
            self.start_idle(now_ns);
        }
        wake
    }

    /// When [`Governor::tick`] can next have something to do, ns: the end
    /// of the timeout in force while idle (the budget's later one once it
    /// held the policy back). `None` while busy, down, or under a policy
    /// that keeps the disk spinning: only I/O changes anything then, so
    /// the daemon sleeps until its monitor reports some.
    pub fn deadline_ns(&self) -> Option<u64> {
        match self.state {
            GovState::Idle {
                since_ns,
                timeout_ns: Some(t),
                held_until_ns,
            } => Some(held_until_ns.unwrap_or(since_ns.saturating_add(t))),
            _ => None,
        }
    }

    /// Time passes without I/O: whether to spin down now. `hold` keeps the
    /// disk spinning (a maintenance job runs on it).
    pub fn tick(&mut self, now_ns: u64, hold: bool) -> Tick {
        let GovState::Idle {
            since_ns,
            timeout_ns: Some(policy_timeout_ns),
            held_until_ns,
        } = self.state
        else {
            return Tick::Wait;
        };
        let due = since_ns.saturating_add(policy_timeout_ns);
        if hold || now_ns < due {
            return Tick::Wait;
        }
        let Some(b) = &self.budget else {
            return Tick::SpinDown {
                idle_ns: now_ns - since_ns,
                timeout_ns: policy_timeout_ns,
            };
        };
        let allowed = b.earliest_ns(now_ns);
        if allowed > now_ns {
            if held_until_ns.is_none() {
                let used = b.used_in_window(now_ns);
                self.state = GovState::Idle {
                    since_ns,
                    timeout_ns: Some(policy_timeout_ns),
                    held_until_ns: Some(allowed),
                };
                if !self.held {
                    self.held = true;
                    return Tick::BudgetHeld {
                        policy_timeout_ns,
                        timeout_ns: allowed - since_ns,
                        used_in_window: used,
                    };
                }
            }
            return Tick::Wait;
        }
        Tick::SpinDown {
            idle_ns: now_ns - since_ns,
            timeout_ns: held_until_ns.map_or(policy_timeout_ns, |u| u - since_ns),
        }
    }

    /// A new policy, power model and budget (SIGHUP's reload): the state
    /// is kept; an idle interval under way gets the new policy's timeout
    /// from its start. A budget of the same limit keeps its history.
    pub fn reconfigure(
        &mut self,
        policy: Box<dyn SpinDown>,
        power: PowerModel,
        budget: Option<Budget>,
        now_ns: u64,
    ) {
        let same = match (&self.budget, &budget) {
            (Some(a), Some(b)) => a.limit() == b.limit(),
            (None, None) => true,
            _ => false,
        };
        if !same {
            self.budget = budget;
            self.held = false;
        }
        self.policy = policy;
        self.power = power;
        if let GovState::Idle { since_ns, .. } = self.state {
            let timeout_ns = self.policy.on_idle(&IdleCtx {
                now_ns,
                power: &self.power,
            });
            self.state = GovState::Idle {
                since_ns,
                timeout_ns,
                held_until_ns: None,
            };
        }
    }

    /// The spin-down asked for by [`Governor::tick`] happened (or, in a
    /// dry run, would have) at `now_ns`.
    pub fn spun_down(&mut self, now_ns: u64) {
        if let GovState::Idle { since_ns, .. } = self.state {
            if let Some(b) = &mut self.budget {
                b.spend(now_ns);
            }
            self.held = false;
            self.state = GovState::Down {
                idle_since_ns: since_ns,
                at_ns: now_ns,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fallow_core::energy::spindown::build;

    const S: u64 = 1_000_000_000;

    fn gov(spec: &str, budget: Option<Budget>) -> Governor {
        Governor::new(build(spec).unwrap(), PowerModel::default(), budget, 0)
    }

    #[test]
    fn timeout_spins_down_after_t_and_the_next_io_is_a_wake() {
        let mut g = gov("timeout:t=10s", None);
        // the daemon sleeps until the timeout ends at 10 s
        assert_eq!(g.deadline_ns(), Some(10 * S));
        assert_eq!(g.tick(9 * S, false), Tick::Wait);
        assert_eq!(
            g.tick(10 * S, false),
            Tick::SpinDown {
                idle_ns: 10 * S,
                timeout_ns: 10 * S
            }
        );
        g.spun_down(10 * S);
        // down: nothing to do until I/O
        assert_eq!(g.deadline_ns(), None);
        assert_eq!(g.tick(11 * S, false), Tick::Wait);
        let w = g.observe(25 * S, true, true).unwrap();
        assert_eq!((w.idle_ns, w.down_ns), (25 * S, 15 * S));
        assert_eq!(g.state(), GovState::Busy);
        assert_eq!(g.deadline_ns(), None);
        // the request completes: a new interval from 26 s
        assert_eq!(g.observe(26 * S, true, false), None);
        assert_eq!(g.deadline_ns(), Some(36 * S));
        assert_eq!(g.tick(35 * S, false), Tick::Wait);
        assert!(matches!(g.tick(36 * S, false), Tick::SpinDown { .. }));
        // I/O before the timeout restarts the interval
        let mut g = gov("timeout:t=10s", None);
        assert_eq!(g.observe(5 * S, true, false), None);
        assert_eq!(g.tick(14 * S, false), Tick::Wait);
        assert!(g.tick(14 * S, true) == Tick::Wait, "held by a job");
        assert!(matches!(g.tick(15 * S, false), Tick::SpinDown { .. }));
    }

    #[test]
    fn the_adaptive_policy_learns_from_live_intervals_as_in_simulation() {
        // adaptive grows its timeout x2 after a spin-down that did not pay
        // off (next I/O within the 18 s break-even of the WD2500JD)
        let mut g = gov("adaptive:t=4s,min=1s,max=60s", None);
        assert!(matches!(
            g.tick(4 * S, false),
            Tick::SpinDown { timeout_ns, .. } if timeout_ns == 4 * S
        ));
        g.spun_down(4 * S);
        g.observe(6 * S, true, false); // 2 s after the spin-down: too soon
        assert_eq!(g.tick(6 * S + 8 * S - 1, false), Tick::Wait);
        assert!(matches!(
            g.tick(14 * S, false),
            Tick::SpinDown { timeout_ns, .. } if timeout_ns == 8 * S
        ));
    }

    #[test]
    fn the_budget_lengthens_the_timeout_and_says_so_once_per_change() {
        use super::super::budget::SpinupLimit;
        // 1/h: one spin-down in any hour
        let hour = 3600 * S;
        let limit = SpinupLimit {
            count: 1,
            window_ns: hour,
        };
        let mut g = gov("timeout:t=10s", Some(Budget::new(limit).unwrap()));
        assert!(matches!(g.tick(10 * S, false), Tick::SpinDown { .. }));
        g.spun_down(10 * S);
        g.observe(20 * S, true, false);
        // next due at 30 s, but the window frees at 10 s + 1 h
        assert_eq!(
            g.tick(30 * S, false),
            Tick::BudgetHeld {
                policy_timeout_ns: 10 * S,
                timeout_ns: 10 * S + hour - 20 * S,
                used_in_window: 1
            }
        );
        assert_eq!(g.tick(31 * S, false), Tick::Wait, "reported once");
        // the daemon now sleeps until the window frees
        assert_eq!(g.deadline_ns(), Some(10 * S + hour));
        // I/O ends the interval; the next ones are held too, silently
        // (the state has not changed: still no spin-down to spare)
        for k in 0..5u64 {
            let t = 100 * S + k * 100 * S;
            g.observe(t, true, false);
            assert_eq!(g.tick(t + 10 * S, false), Tick::Wait, "interval {k}");
            assert_eq!(g.deadline_ns(), Some(10 * S + hour), "interval {k}");
        }
        g.observe(1000 * S, true, false);
        assert_eq!(g.tick(10 * S + hour - 1, false), Tick::Wait);
        assert_eq!(
            g.tick(10 * S + hour, false),
            Tick::SpinDown {
                idle_ns: 10 * S + hour - 1000 * S,
                timeout_ns: 10 * S + hour - 1000 * S
            }
        );
        g.spun_down(10 * S + hour);
        // a new spell of exhaustion is reported again, once
        let t = 10 * S + hour + 5 * S;
        g.observe(t, true, false);
        assert!(matches!(
            g.tick(t + 10 * S, false),
            Tick::BudgetHeld {
                used_in_window: 1,
                ..
            }
        ));
        g.observe(t + 20 * S, true, false);
        assert_eq!(g.tick(t + 30 * S, false), Tick::Wait);
    }

    #[test]
    fn always_on_never_spins_down() {
        let mut g = gov("always-on", None);
        assert_eq!(g.deadline_ns(), None, "no timer to wake for");
        assert_eq!(g.tick(1_000_000 * S, false), Tick::Wait);
    }
}
