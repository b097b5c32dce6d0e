//! `busy-bee(idle-wait, window)`: Busy Bee's dynamic policy (Yan, Riska,
//! Smirni, ICPE 2012, §4, Figure 4, Eq. 1). Busy periods are measured in
//! FG requests. Over a learning window the policy collects their lengths;
//! at the window's end it computes *Threshold* (a period at least that long
//! is *long*) and the *Cluster Window Size* (CWS, Eq. 1: the smallest lag
//! whose Σ P_lag reaches 0.8) and discards the data (§4, §5.1: "the moment
//! the Threshold and CWS parameters are computed, the histogram is
//! discarded"); the parameters drive the next window. After a long busy
//! period, BG work is served *conservatively* (idle wait before the first
//! BG request) in the next CWS idle intervals — the gaps inside the cluster
//! of long periods that is expected to follow — and *aggressively* (no wait)
//! otherwise, until the next long period (§4, text after Eq. 1).
//!
//! Figure 4's pseudo-code disagrees with the text in two places; we follow
//! the text (docs/policies.md, Busy Bee, lists where):
//! - step 2.b.i runs *aggressive* scheduling while `BP_state = long and
//!   cluster_count > 0` and conservative otherwise: the branches are swapped
//!   (the text, Figure 5 and §5.2 all say conservative inside a cluster);
//! - step 2.d.i counts a departure as `QL ++`; it must be `QL --`. We never
//!   track the queue: the engine (or the live monitor) tells us when a busy
//!   period ends and how many requests it served ([`Policy::on_busy_end`]).
//!
//! Two further readings, documented because the pseudo-code leaves them open:
//! - `cluster_count` is decremented once per idle interval (the pseudo-code
//!   decrements inside "for no FG IO arrive do"), so CWS counts idle
//!   intervals, matching "CWS gives the number of upcoming busy periods that
//!   are expected to be long; during the intermittent idle intervals within
//!   those periods … conservatively";
//! - every long busy period re-arms the count to CWS, also one inside an
//!   armed cluster. Figure 4 guards the assignment with `BP_state = short`,
//!   but never sets `BP_state` back to short; we read the guard as "once per
//!   busy period" (the per-arrival `BP_length ++` would otherwise re-arm on
//!   every arrival), and a cluster longer than CWS stays conservative.
//!
//! Threshold is the 90th percentile of busy-period length in requests
//! (Figure 4 step 1.b; [`busy_clusters`]), a period at least that long
//! being long. Where that degenerates — the percentile is the shortest
//! length, so every period is long (≥ 90 % of periods of one request) —
//! the window falls back to the top-decile rule (the smallest T with
//! P(length ≥ T) ≤ 10 %) and the run's notes say in how many windows
//! ([`Policy::notes`]). `rule=top-decile` asks for the top decile always.
//! Before the first window completes nothing is learned, and the
//! policy is conservative: the paper's baseline, and the safe choice when
//! long and short periods cannot yet be told apart. A window with fewer than
//! 10 busy periods (no top decile to speak of) keeps the previous
//! //! parameters. A period is long when its length is ≥ Threshold (Figure 4
//! step 2.c.iv). Windows are spans of trace time (`window=5h`, §5.1) that
//! start at the first decision, or counts of busy periods (`window=2000bp`).
//! `threshold=` and `cws=` fix the parameters instead of learning them
//! (Figure 5 assumes converged values).

use super::{Ctx, Decision, Entry, Knob, Param, ParamKind, Params, Policy, Start};
use crate::error::{Error, Result};
use crate::stats::{busy_clusters_with, ThresholdRule};

/// Registry entry: what `fallow policies`, `tune` and the builders read.
pub const ENTRY: Entry = Entry {
    name: "busy-bee",
    aliases: &[],
    summary: "conservative (idle wait) for CWS idle intervals after a long busy period, aggressive otherwise; Threshold and CWS relearned every window",
    keys: &[
        Param::new("rule", ParamKind::Choice(&["p90", "top-decile"]), "p90").note("Threshold: p90 is Fig. 4's 90th percentile, the top decile where that makes every period long").example("top-decile"),
        Param::new("idle-wait", ParamKind::Duration, "100ms"),
        // idle-wait's other name: its default is idle-wait's
        Param::new("t", ParamKind::Duration, "").note("as idle-wait").example("100ms"),
        // Busy Bee §5.1's learning window
        Param::new("window", ParamKind::Other("DURATION|Nbp"), "5h"),
        Param::new("max-lag", ParamKind::Count, "20"),
        Param::new("threshold", ParamKind::Count, "").note("fix instead of learning, with cws").example("4").requires("cws=2"),
        Param::new("cws", ParamKind::Count, "").note("fix instead of learning, with threshold").example("2").requires("threshold=4"),
        Param::new("size", ParamKind::Bytes, "").example("64KiB"),
    ],
    clairvoyant: false,
    build: BusyBee::build,
    knob: Some(Knob::wait("idle-wait")),
    size_param: None,
    interval_rule: None,
};

/// Fewest busy periods a window needs to relearn: with fewer than 10, the
/// top decile is empty (⌊0.1·n⌋ = 0) and nothing could ever be long.
const MIN_PERIODS: usize = 10;

/// How long a learning window lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// A span of trace time, ns, from the first decision (`window=5h`, the
    /// paper's §5.1 setting).
    Time {
        /// Length of the window, ns.
        ns: u64,
    },
    /// A number of busy periods (`window=2000bp`).
    Periods {
        /// Busy periods per window.
        count: u64,
    },
}

/// Parameters of [`BusyBee`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BusyBeeConfig {
    /// Idle wait in conservative mode, ns.
    pub idle_wait_ns: u64,
    /// Learning window.
    pub window: Window,
    /// Largest lag of P_lag in Eq. 1 (the paper uses 20).
    pub max_lag: usize,
    /// Fixed Threshold (requests) and CWS (idle intervals) instead of learning.
    pub fixed: Option<(u64, u32)>,
    /// BG request size, bytes (`None`: the run's size).
    pub size_bytes: Option<u64>,
    /// How Threshold is learned: the 90th percentile (falling back to the
    /// top decile where it degenerates), or the top decile always.
    pub rule: ThresholdRule,
}

impl Default for BusyBeeConfig {
    /// The key table's defaults.
    fn default() -> Self {
        ENTRY.read_defaults(BusyBeeConfig::take)
    }
}

impl BusyBeeConfig {
    /// Take every key of the table, each not given from it (`threshold=`
    /// and `cws=`, which have no default, are learned).
    fn take(p: &mut Params) -> Result<Self> {
        let idle_wait_ns = match p.take("idle-wait") {
            Some(v) => crate::units::parse_duration_ns(&v)
                .map_err(|e| Error::invalid("busy-bee:idle-wait", e.to_string()))?,
            // `t=` is idle-wait's other name; with neither, idle-wait's default
            None if p.contains("t") => p.duration_ns("t")?,
            None => p.duration_ns("idle-wait")?,
        };
        let window = parse_window(&p.value("window")?)?;
        let max_lag = p.number("max-lag")?;
        if !(1.0..=1000.0).contains(&max_lag) || max_lag.fract() != 0.0 {
            return Err(Error::invalid(
                "busy-bee:max-lag",
                "must be a whole number from 1 to 1000",
            ));
        }
        let threshold = p.take("threshold");
        let cws = p.take("cws");
        let fixed = match (threshold, cws) {
            (None, None) => None,
            (Some(t), Some(c)) => {
                let t: u64 = t.parse().map_err(|_| {
                    Error::invalid("busy-bee:threshold", "needs a whole number of requests")
                })?;
                let c: u32 = c.parse().map_err(|_| {
                    Error::invalid("busy-bee:cws", "needs a whole number of idle intervals")
                })?;
                Some((t, c))
            }
            _ => {
                return Err(Error::invalid(
                    "busy-bee",
                    "give both threshold= and cws= (or neither, to learn them)",
                ))
            }
        };
        let size_bytes = p.bytes("size")?;
        let rule = match p.value("rule")?.trim() {
            "p90" => ThresholdRule::P90,
            "top-decile" => ThresholdRule::TopDecile,
            v => {
                return Err(Error::invalid(
                    "busy-bee:rule",
                    format!("`{v}`: use p90 (Busy Bee Fig. 4, the default) or top-decile"),
                ))
            }
        };
        Ok(BusyBeeConfig {
            idle_wait_ns,
            window,
            max_lag: max_lag as usize,
            fixed,
            size_bytes,
            rule,
        })
    }
}

/// The Busy Bee dynamic policy.
#[derive(Debug, Clone, Default)]
pub struct BusyBee {
    /// Its parameters.
    pub config: BusyBeeConfig,
    /// Threshold (requests) and CWS in force; `None` until learned.
    learned: Option<(u64, u32)>,
    /// Busy-period lengths of the window in progress, in order (P_lag needs
    /// the sequence, not only the histogram).
    window_lengths: Vec<u32>,
    /// Busy periods that ended since the last decision.
    pending: Vec<u32>,
    /// End of the current time window, ns (set at the first decision).
    window_end_ns: Option<u64>,
    /// Idle intervals still to serve conservatively.
    cluster_count: u32,
    /// Windows completed so far.
    windows: u64,
    /// Windows that learned, and those whose 90th percentile degenerated
    /// (every period long) so the top-decile rule set Threshold.
    learned_windows: u64,
    fallback_windows: u64,
    /// Windows whose Threshold marked none of their periods long (every
    /// period of one length, say): learning them would run fully
    /// aggressive, so they fall back to the fixed idle wait instead.
    degenerate_windows: u64,
    /// The rule that set the Threshold in force.
    last_rule: Option<ThresholdRule>,
}

impl BusyBee {
    /// A policy with these parameters.
    pub fn new(config: BusyBeeConfig) -> Self {
        BusyBee {
            config,
            learned: config.fixed,
            ..BusyBee::default()
        }
    }

    /// Build from `idle-wait=` (or `t=`), `window=`, `max-lag=`,
    /// `threshold=`, `cws=`, `rule=` and `size=`.
    pub fn build(mut p: Params) -> Result<Box<dyn Policy>> {
        let config = BusyBeeConfig::take(&mut p)?;
        p.finish_keys()?;
        Ok(Box::new(BusyBee::new(config)))
    }

    /// The concrete policy from parsed parameters ([`Params::parse`]),
    /// with busy-bee's key table for the keys not given (see
    /// [`BusyBee::build`]): for callers that ask it what it learned.
    pub fn from_params(p: Params) -> Result<BusyBee> {
        let mut p = p.with_keys(ENTRY.keys);
        let config = BusyBeeConfig::take(&mut p)?;
        p.finish_keys()?;
        Ok(BusyBee::new(config))
    }

    /// Threshold (requests) and CWS (idle intervals) in force, if learned.
    pub fn learned(&self) -> Option<(u64, u32)> {
        self.learned
    }

    /// Learning windows completed.
    pub fn windows(&self) -> u64 {
        self.windows
    }

    /// End of a learning window: learn from its busy periods, discard them.
    fn close_window(&mut self) {
        self.windows += 1;
        if self.config.fixed.is_some() || self.window_lengths.len() < MIN_PERIODS {
            self.window_lengths.clear();
            return;
        }
        let b = busy_clusters_with(&self.window_lengths, self.config.max_lag, self.config.rule);
        if b.long_fraction == 0.0 {
            // Threshold degenerates: no period of the window is long, and
            // learning it would make every interval aggressive (3x the FG
            // delay of the same idle wait on a real trace; docs/policies.md).
            // Nothing was learned: back to the fixed wait it starts from.
            self.learned = None;
            self.degenerate_windows += 1;
            self.last_rule = None;
            self.window_lengths.clear();
            return;
        }
        // Eq. 1 unreached within max_lag: busy_clusters caps CWS at max_lag,
        // the "no clustering → long CWS → conservative" end of §4.
        self.learned = Some((b.threshold_requests, b.cws));
        self.learned_windows += 1;
        if self.config.rule == ThresholdRule::P90 && b.threshold_rule == ThresholdRule::TopDecile {
            self.fallback_windows += 1;
        }
        self.last_rule = Some(b.threshold_rule);
        self.window_lengths.clear();
    }
}

/// `5h`, `30min` (time) or `2000bp` / `2000periods` (busy periods).
fn parse_window(v: &str) -> Result<Window> {
    let t = v.trim();
    let count = t
        .strip_suffix("bp")
        .or_else(|| t.strip_suffix("periods"))
        .map(str::trim);
    let w = match count {
        Some(n) => Window::Periods {
            count: n.parse().map_err(|_| {
                Error::invalid(
                    "busy-bee:window",
                    format!("`{v}`: not a count of busy periods"),
                )
            })?,
        },
        None => Window::Time {
            ns: crate::units::parse_duration_ns(t)
                .map_err(|e| Error::invalid("busy-bee:window", e.to_string()))?,
        },
    };
    if matches!(w, Window::Time { ns: 0 } | Window::Periods { count: 0 }) {
        return Err(Error::invalid("busy-bee:window", "must be positive"));
    }
    Ok(w)
}

impl Policy for BusyBee {
    fn name(&self) -> &str {
        "busy-bee"
    }

    fn notes(&self) -> Vec<String> {
        let mut notes = vec![];
        if self.config.fixed.is_some() {
            return notes;
        }
        match (self.learned, self.last_rule) {
            (Some((t, cws)), Some(rule)) => notes.push(format!(
                "busy-bee: {} of {} learning windows set Threshold and CWS; the last: Threshold {t} requests by {}, CWS {cws} idle intervals",
                self.learned_windows,
                self.windows,
                rule.describe()
            )),
            _ => notes.push(format!(
                "busy-bee: no learning window completed with at least {MIN_PERIODS} busy periods ({} window(s) closed): conservative (idle wait) throughout",
                self.windows
            )),
        }
        if self.degenerate_windows > 0 {
            notes.push(format!(
                "busy-bee: in {} of {} learning windows no busy period reached the Threshold, so nothing marked a cluster; those windows fell back to the fixed idle wait rather than running fully aggressive",
                self.degenerate_windows, self.windows
            ));
        }
        if self.fallback_windows > 0 {
            notes.push(format!(
                "busy-bee: in {} of {} learning windows the 90th percentile of busy-period length was the shortest length, which makes every period long; Threshold fell back to the top-decile rule there",
                self.fallback_windows, self.learned_windows
            ));
        }
        notes
    }

    fn on_busy_end(&mut self, _busy_ns: u64, requests: u32) {
        // Its time is known only at the next decision (the end of this busy
        // period, or of a later one it merged with after a collision).
        self.pending.push(requests);
    }

    fn on_idle(&mut self, ctx: &mut Ctx<'_>) -> Decision {
        let now = ctx.now_ns;
        let pending = std::mem::take(&mut self.pending);
        match self.config.window {
            Window::Time { ns } => {
                let end = *self.window_end_ns.get_or_insert(now.saturating_add(ns));
                if now >= end {
                    self.close_window();
                    // skip the windows an idle stretch spanned (nothing to learn)
                    let passed = (now - end) / ns + 1;
                    self.window_end_ns = Some(end.saturating_add(passed.saturating_mul(ns)));
                }
                // these periods ended after the old window closed
                self.window_lengths.extend_from_slice(&pending);
            }
            Window::Periods { count } => {
                for &len in &pending {
                    self.window_lengths.push(len);
                    if self.window_lengths.len() as u64 >= count {
                        self.close_window();
                    }
                }
            }
        }
        let wait = match self.learned {
            None => self.config.idle_wait_ns,
            Some((threshold, cws)) => {
                if pending.iter().any(|&len| len as u64 >= threshold) {
                    self.cluster_count = cws;
                }
                if self.cluster_count > 0 {
                    self.cluster_count -= 1;
                    self.config.idle_wait_ns
                } else {
                    0
                }
            }
        };
        Decision::Start(Start::until_fg(
            wait,
            self.config.size_bytes.unwrap_or(ctx.bg_size_bytes),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::BgService;

    const MS: u64 = 1_000_000;

    /// Ask `p` for a decision at `now_ns`; return the wait it chose.
    fn wait_at(p: &mut BusyBee, now_ns: u64) -> u64 {
        let svc = BgService::Constant { ns: MS };
        match crate::policy::testing::on_idle_at(p, now_ns, svc, 4096) {
            Decision::Start(s) => {
                assert_eq!(s.max_requests, u64::MAX, "runs until FG arrives");
                s.after_ns
            }
            Decision::Quiet => panic!("busy-bee always serves BG work"),
        }
    }

    fn build(spec: &str) -> BusyBee {
        BusyBee::from_params(Params::parse(spec).unwrap().1).unwrap()
    }

    #[test]
    fn figure_5_worked_example() {
        // Busy Bee Figure 5: busy periods of 2, 2, 2 requests (short), then
        // 6, 6, 6 (long); idle intervals of 5, 8, 4, 7, 8, 3 time units after
        // them; Threshold 4 and CWS 2 have converged; the dynamic idle wait is
        // 1.5 × the conservative one (2 × 3-unit user service = 6): 9 units.
        let mut bb = build("busy-bee:idle-wait=9ms,window=5h,threshold=4,cws=2");
        let busy = [2u32, 2, 2, 6, 6, 6];
        let idle = [5u64, 8, 4, 7, 8, 3];
        let mut now = 0;
        let mut waits = vec![];
        for (&b, &i) in busy.iter().zip(&idle) {
            now += 3 * b as u64 * MS;
            bb.on_busy_end(3 * b as u64 * MS, b);
            waits.push(wait_at(&mut bb, now) / MS);
            bb.on_idle_end(i * MS, false);
            now += i * MS;
        }
        // after short periods: aggressive; the long 4th period arms CWS = 2
        // intervals (4th, 5th), the 5th and 6th re-arm it: conservative to the end
        assert_eq!(waits, [0, 0, 0, 9, 9, 9]);
        // BG time each interval gets with back-to-back 1-unit BG requests,
        // by hand: idle − wait where positive.
        let work: Vec<u64> = idle
            .iter()
            .zip(&waits)
            .map(|(&i, &w)| i.saturating_sub(w))
            .collect();
        // dynamic: 17 units; conservative (wait 6) would get 0, 2, 0, 1, 2, 0
        // = 5 units, aggressive all 35 (the engine run of this example, with
        // collisions and shifts, is in tests/it/policies_bb.rs)
        assert_eq!(work, [5, 8, 4, 0, 0, 0]);
    }

    #[test]
    fn cluster_expires_after_cws_intervals() {
        let mut bb = build("busy-bee:idle-wait=50ms,window=5h,threshold=4,cws=2");
        let mut waits = vec![];
        for (k, len) in [5u32, 1, 1, 1, 4, 1].into_iter().enumerate() {
            bb.on_busy_end(MS, len);
            waits.push(wait_at(&mut bb, k as u64 * 1000 * MS) / MS);
        }
        // long (5) → 2 conservative intervals, then aggressive; long (4 = Threshold) again
        assert_eq!(waits, [50, 50, 0, 0, 50, 50]);
    }

    #[test]
    fn conservative_until_the_first_window_then_learns() {
        // window of 20 busy periods: lengths 1..=10 twice (stats/busy.rs's
        // hand example), the top-decile rule asked for: at most 2 of 20 may
        // be long, so Threshold = 10; the
        // long ones sit at 3 and 10; P_1..P_6 = 0, P_7 = 1/2, P_8.. = 0, so Σ
        // never reaches 0.8 and CWS = max_lag = 20.
        let l: Vec<u32> = vec![1, 2, 9, 10, 3, 4, 5, 6, 7, 8, 10, 1, 2, 3, 4, 5, 6, 7, 8, 9];
        let mut bb = build("busy-bee:idle-wait=7ms,window=20bp,rule=top-decile");
        for (k, &len) in l.iter().enumerate() {
            bb.on_busy_end(MS, len);
            let w = wait_at(&mut bb, k as u64 * MS);
            if k < 19 {
                assert_eq!(w, 7 * MS, "period {k}: not learned yet, conservative");
                assert_eq!(bb.learned(), None);
            }
        }
        assert_eq!(bb.learned(), Some((10, 20)));
        // a short period: aggressive
        bb.on_busy_end(MS, 3);
        assert_eq!(wait_at(&mut bb, 100 * MS), 0);
        // a long one: 20 conservative intervals, then aggressive again
        bb.on_busy_end(MS, 12);
        for k in 0..20 {
            assert_eq!(wait_at(&mut bb, (200 + k) * MS), 7 * MS, "{k}");
            bb.on_busy_end(MS, 1);
        }
        assert_eq!(wait_at(&mut bb, 300 * MS), 0);
    }

    #[test]
    fn time_windows_learn_then_discard() {
        // Window 1 = [0, 1 s) from the first decision: 20 periods, ten of 8
        // and ten of 1. At most ⌊0.1·20⌋ = 2 may be long, but ten are ≥ 8,
        // so Threshold = 9: nothing is long. That Threshold degenerates
        // (it would run fully aggressive): the fixed wait stays.
        let mut bb = build("busy-bee:idle-wait=5ms,window=1s,rule=top-decile");
        let mut t = 0;
        for k in 0..20 {
            bb.on_busy_end(MS, if (k / 2) % 2 == 0 { 8 } else { 1 });
            assert_eq!(wait_at(&mut bb, t), 5 * MS, "not learned yet");
            t += 40 * MS;
        }
        // the decision at 1.2 s closes window 1; its period opens window 2
        bb.on_busy_end(MS, 8);
        assert_eq!(wait_at(&mut bb, 1_200 * MS), 5 * MS);
        assert_eq!((bb.learned(), bb.windows()), (None, 1));
        assert!(bb.notes().iter().any(|n| n.contains("fell back to the fixed idle wait")));
        // window 2 = [1 s, 2 s): 8 (above), 30, then eighteen 1s
        t = 1_200 * MS;
        for k in 0..19 {
            bb.on_busy_end(MS, if k == 0 { 30 } else { 1 });
            t += 10 * MS;
            wait_at(&mut bb, t);
        }
        // closed at 9 s (after an idle stretch over several windows). Of 20,
        // two may be long: Threshold = 8 (8 and 30). They are adjacent:
        // P_1 = ½ (0→1 long, 1→2 short), P_2.. = 0; Σ = ½ < 0.8: CWS = 20.
        bb.on_busy_end(MS, 1);
        wait_at(&mut bb, 9_000 * MS);
        assert_eq!((bb.learned(), bb.windows()), (Some((8, 20)), 2));
        // window 3 holds one period: too few to relearn, the values stay
        bb.on_busy_end(MS, 1);
        wait_at(&mut bb, 20_000 * MS);
        assert_eq!((bb.learned(), bb.windows()), (Some((8, 20)), 3));
    }

    #[test]
    fn the_90th_percentile_by_default() {
        // the same 20 lengths: the 18th smallest is 9, so the periods of 9
        // and 10 (indices 2, 3, 10, 19) are long. P_1 = 1/3 (2→3),
        // P_2..P_6 = 0, P_7 = 1/3 (3→10), P_8 = 1/3 (2→10): Σ reaches 0.8
        // at lag 8
        let l: Vec<u32> = vec![1, 2, 9, 10, 3, 4, 5, 6, 7, 8, 10, 1, 2, 3, 4, 5, 6, 7, 8, 9];
        let mut bb = build("busy-bee:idle-wait=7ms,window=20bp");
        for (k, &len) in l.iter().enumerate() {
            bb.on_busy_end(MS, len);
            wait_at(&mut bb, k as u64 * MS);
        }
        assert_eq!(bb.learned(), Some((9, 8)));
        let notes = bb.notes();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("Threshold 9 requests by the 90th percentile"));
        // a period of 9 is long: conservative for 8 intervals
        bb.on_busy_end(MS, 9);
        for k in 0..8 {
            assert_eq!(wait_at(&mut bb, (100 + k) * MS), 7 * MS, "{k}");
            bb.on_busy_end(MS, 1);
        }
        assert_eq!(wait_at(&mut bb, 200 * MS), 0);
    }

    #[test]
    fn falls_back_to_the_top_decile_where_every_period_would_be_long_and_says_so() {
        // 19 of 20 periods have one request: p90 = 1 would make all long
        let mut bb = build("busy-bee:idle-wait=7ms,window=20bp");
        assert!(bb.notes()[0].contains("no learning window"));
        for k in 0..20u64 {
            bb.on_busy_end(MS, if k == 5 { 4 } else { 1 });
            wait_at(&mut bb, k * MS);
        }
        // at most 2 of 20 may be long: T = 4 (only the period of 4 is long)
        assert_eq!(bb.learned().map(|l| l.0), Some(4));
        let notes = bb.notes();
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[1].contains("in 1 of 1 learning windows"), "{notes:?}");
        // a one-request period is short: aggressive
        bb.on_busy_end(MS, 1);
        assert_eq!(wait_at(&mut bb, 100 * MS), 0);
    }

    #[test]
    fn builds_from_params() {
        assert!(crate::policy::build("busy-bee:rule=p90").is_ok());
        assert!(crate::policy::build("busy-bee:rule=top-decile").is_ok());
        assert!(crate::policy::build("busy-bee:rule=median").is_err());
        assert!(crate::policy::build("busy-bee:idle-wait=20ms,window=5h").is_ok());
        assert!(crate::policy::build("busy-bee:t=20ms,window=500bp").is_ok());
        assert!(crate::policy::build("busy-bee:threshold=4").is_err());
        assert!(crate::policy::build("busy-bee:window=0bp").is_err());
        assert!(crate::policy::build("busy-bee:bogus=1").is_err());
    }
}
