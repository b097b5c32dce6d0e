//! The busy periods a policy hears are the device's (docs/simulation.md, "The model"):
//! a BG collision delays a busy period, the delay counts in its length
//! (its FG requests were outstanding from their arrival), and a delay that
//! carries it past the next FG arrival merges the two into one.
//!
//! Expected sequences are worked out by hand on busy periods and idle
//! intervals given in ms; the same sequence against the live driver is
//! checked in fallow-live (`tests/virtual_device.rs`).

use fallow_core::period::extract;
use fallow_core::policy::{self, Ctx, Decision, Policy};
use fallow_core::sim::{simulate, BgService, BgWork, Prepared, SimConfig};

const MS: u64 = 1_000_000;

/// Wraps a registry policy and records what it hears.
struct Recorder {
    inner: Box<dyn Policy>,
    busy: Vec<(u64, u32)>,
    idle: Vec<(u64, bool)>,
}

impl Policy for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }
    fn on_idle(&mut self, ctx: &mut Ctx<'_>) -> Decision {
        self.inner.on_idle(ctx)
    }
    fn on_bg_done(&mut self, ctx: &mut Ctx<'_>, done: u64) -> Decision {
        self.inner.on_bg_done(ctx, done)
    }
    fn on_idle_end(&mut self, idle_ns: u64, collided: bool) {
        self.idle.push((idle_ns, collided));
        self.inner.on_idle_end(idle_ns, collided);
    }
    fn on_busy_end(&mut self, busy_ns: u64, requests: u32) {
        self.busy.push((busy_ns, requests));
        self.inner.on_busy_end(busy_ns, requests);
    }
}

type Heard = (Vec<(u64, u32)>, Vec<(u64, bool)>);

/// Run `spec` with constant BG service `bg_ms` over busy periods
/// (ms, requests) and the idle intervals (ms) between them.
fn heard(spec: &str, bg_ms: u64, busy: &[(u64, u32)], idle_ms: &[u64]) -> Heard {
    let len: Vec<u64> = busy.iter().map(|b| b.0 * MS).collect();
    let n: Vec<u32> = busy.iter().map(|b| b.1).collect();
    let idle: Vec<u64> = idle_ms.iter().map(|i| i * MS).collect();
    let prep = Prepared::from_periods(&len, &n, &idle).unwrap();
    let mut rec = Recorder {
        inner: policy::build(spec).unwrap(),
        busy: vec![],
        idle: vec![],
    };
    let cfg = SimConfig {
        bg_service: BgService::Constant { ns: bg_ms * MS },
        bg_work: BgWork::Endless,
        ..SimConfig::default()
    };
    simulate(&prep, &mut rec, &cfg).unwrap();
    (rec.busy, rec.idle)
}

fn ms(v: &[(u64, u32)]) -> Vec<(u64, u32)> {
    v.iter().map(|&(l, n)| (l * MS, n)).collect()
}

#[test]
fn without_bg_work_the_policy_hears_the_trace_periods() {
    let busy = [(10, 2), (5, 1), (8, 3)];
    let (b, i) = heard("fixed-wait:t=1h", 25, &busy, &[20, 3]);
    assert_eq!(b, ms(&busy));
    assert_eq!(i, vec![(20 * MS, false), (3 * MS, false)]);
}

#[test]
fn a_delay_that_runs_into_the_next_arrival_merges_two_busy_periods() {
    // busy 0..10, idle 10..30, busy 30..35 (1 req), idle 35..38, busy 38..46.
    // Aggressive: a 25 ms BG request from 10 to 35; the arrival at 30 waits
    // 5 ms, so busy period 2 ends at 40, after the arrival at 38: the device
    // is busy from 30 to 40 + 8 = 48 with 1 + 3 requests.
    let (b, i) = heard("aggressive", 25, &[(10, 2), (5, 1), (8, 3)], &[20, 3]);
    assert_eq!(b, ms(&[(10, 2), (18, 4)]));
    assert_eq!(i, vec![(20 * MS, true)]);
}

#[test]
fn a_delay_that_ends_before_the_next_arrival_lengthens_one_busy_period() {
    // busy 0..10, idle 10..30, busy 30..35, idle 35..43, busy 43..51.
    // BG 10..35 delays busy period 2 by 5 ms (30..40); idle 40..43; BG from
    // 40 to 65 delays busy period 3 by 22 ms: 43..73.
    let (b, i) = heard("aggressive", 25, &[(10, 2), (5, 1), (8, 3)], &[20, 8]);
    assert_eq!(b, ms(&[(10, 2), (10, 1), (30, 3)]));
    assert_eq!(i, vec![(20 * MS, true), (3 * MS, true)]);
}

#[test]
fn an_arrival_exactly_at_the_shifted_end_merges_as_extract_does() {
    // the shifted busy period 2 ends at 40; the next arrival is at 40
    let (b, _) = heard("aggressive", 25, &[(10, 2), (5, 1), (8, 3)], &[20, 5]);
    assert_eq!(b, ms(&[(10, 2), (18, 4)]));
    // period::extract, the trace reader's definition, agrees on the same
    // requests (arrival, completion with the BG delays), ms
    let arrival = [0, 5, 30, 40, 40, 40];
    let completion = [5, 10, 40, 43, 46, 48];
    let p = extract(&arrival, &completion);
    assert_eq!(p.busy_len_ns, [10, 18]);
    assert_eq!(p.busy_requests, [2, 4]);
}

#[test]
fn a_chain_of_merges_is_one_busy_period() {
    // BG 10..40 (30 ms) delays busy period 2 (30..31) by 10 ms: 40..41;
    // arrivals at 33 and 36 find it busy: 41..42, 42..43. One period of
    // 3 requests from 30 to 43.
    let (b, i) = heard(
        "aggressive",
        30,
        &[(10, 1), (1, 1), (1, 1), (1, 1)],
        &[20, 2, 2],
    );
    assert_eq!(b, ms(&[(10, 1), (13, 3)]));
    assert_eq!(i, vec![(20 * MS, true)]);
}
