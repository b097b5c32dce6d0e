//! The event-driven monitor against the sysfs poller, in the same run on
//! the same loop device: CPU on an idle disk, and the time from an FG
//! read's issue to each monitor seeing it.
//!
//! ```text
//! sudo cargo run --release -p fallow-live --example monitor_bench -- [IDLE_SECONDS] [READS] [SCHEDULER]
//! ```
//! IDLE_SECONDS defaults to 20, READS to 200; SCHEDULER (`none`, `bfq`…)
//! is set on the loop device, else it keeps the one it has (a loop device
//! keeps what its previous user set). Needs root (a loop device
//! and perf events). Three monitors run at once:
//! - `poll`: [`Monitor`] sampling `/sys/block/loopN/stat` every 1 ms;
//! - `events`: [`Monitor`] woken by the block tracepoints (what
//!   `fallow scrub`/`run` use with `FALLOW_MONITOR=auto`);
//! - `raw`: an [`EventMonitor`] thread (what `fallow spindown` uses).
//!
//! CPU is each monitor thread's own (`CLOCK_THREAD_CPUTIME_ID`, the
//! `getrusage(RUSAGE_THREAD)` account). Latency: a reader thread issues
//! READS O_DIRECT 4 KiB reads 5 to 25 ms apart and notes
//! `CLOCK_MONOTONIC` just before each `pread`; a monitor sees a read when
//! its `Busy` event's sample is taken (`poll`, `events`) or when `wait`
//! returns the read's queue event (`raw`).

use fallow_live::clock::{monotonic_ns, thread_cpu_ns};
use fallow_live::monitor::{
    DevId, Event, EventMonitor, IoPhase, MonitorKind, MonitorStats, StatSource,
};
use fallow_live::{Monitor, MonitorConfig};
use rand::{Rng, SeedableRng};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn sh(cmd: &str, args: &[&str]) -> Result<String, String> {
    let o = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "{cmd} {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout).trim().into())
}

/// Collects the `Busy` sample times of a [`Monitor`] on its own thread.
fn collect(
    mut m: Monitor,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<(Vec<u64>, MonitorStats)> {
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            if let Ok(Some(Event::Busy { at_ns, .. })) = m.recv_timeout(20_000_000) {
                seen.push(at_ns);
            }
        }
        (seen, m.stop().expect("monitor"))
    })
}

fn pct(v: &mut [u64], p: f64) -> f64 {
    v.sort_unstable();
    if v.is_empty() {
        return f64::NAN;
    }
    let i = ((v.len() - 1) as f64 * p).round() as usize;
    v[i] as f64 / 1e3
}

/// Latency of each read to the first sight at or after its issue and
/// before the next read's issue; and the reads never seen.
fn latencies(issues: &[u64], sights: &[u64]) -> (Vec<u64>, usize) {
    let mut lat = Vec::new();
    let mut missed = 0;
    for (i, &t) in issues.iter().enumerate() {
        let next = issues.get(i + 1).copied().unwrap_or(u64::MAX);
        match sights.iter().find(|&&s| s >= t && s < next) {
            Some(&s) => lat.push(s - t),
            None => missed += 1,
        }
    }
    (lat, missed)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let idle_s: f64 = args.first().map_or(Ok(20.0), |s| s.parse())?;
    let reads: usize = args.get(1).map_or(Ok(200), |s| s.parse())?;
    if let Err(why) = EventMonitor::available() {
        return Err(format!("the event monitor cannot run here: {why}").into());
    }
    let dir = tempfile::tempdir()?;
    let img = dir.path().join("img");
    std::fs::File::create(&img)?.set_len(64 << 20)?;
    let dev = sh("losetup", &["-f", "--show", img.to_str().unwrap_or("")])?;
    // the I/O scheduler decides when a queued bio is issued to the driver:
    // set it (a previous user of the loop device may have left one), say which
    let sched = std::path::PathBuf::from("/sys/block")
        .join(dev.trim_start_matches("/dev/"))
        .join("queue/scheduler");
    if let Some(s) = args.get(2) {
        std::fs::write(&sched, s).map_err(|e| format!("{}: {e}", sched.display()))?;
    }
    println!(
        "{dev}: I/O scheduler {}",
        std::fs::read_to_string(&sched).unwrap_or_default().trim()
    );
    let result = bench(&dev, idle_s, reads);
    let _ = sh("losetup", &["-d", &dev]);
    result
}

fn bench(dev: &str, idle_s: f64, reads: usize) -> Result<(), Box<dyn std::error::Error>> {
    let name = dev.trim_start_matches("/dev/");
    let src = StatSource::sysfs(name)?;
    let stop = Arc::new(AtomicBool::new(false));
    let t_start = monotonic_ns();
    let pm = Monitor::start_kind(&src, vec![], MonitorConfig::default(), MonitorKind::Poll)?;
    let em = Monitor::start_kind(&src, vec![], MonitorConfig::default(), MonitorKind::Events)?;
    let (poll_sh, ev_sh) = (pm.shared_stats(), em.shared_stats());
    let poll = collect(pm, stop.clone());
    let events = collect(em, stop.clone());
    let mut raw = EventMonitor::open(&[DevId::of_name(name)?])?;
    let kick = raw.kick();
    let stop2 = stop.clone();
    // the raw monitor's thread: CPU and sight times, split at the end of the idle phase
    let idle_end_ns = monotonic_ns() + (idle_s * 1e9) as u64;
    let raw_t = std::thread::spawn(move || {
        let (cpu0, wall0) = (thread_cpu_ns(), monotonic_ns());
        let mut idle = None;
        let mut sights = Vec::new();
        while !stop2.load(Ordering::Relaxed) {
            let evs = raw.wait(None).expect("wait");
            let now = monotonic_ns();
            if idle.is_none() && now >= idle_end_ns {
                idle = Some((thread_cpu_ns() - cpu0, now - wall0, raw.stats().wakeups));
            }
            for e in evs {
                if e.phase == IoPhase::Queue && e.comm == "fallow-reader" {
                    sights.push((now, e.time_ns));
                }
            }
        }
        (
            idle,
            sights,
            thread_cpu_ns() - cpu0,
            monotonic_ns() - wall0,
            raw.stats(),
        )
    });
    // a timer for the raw thread to notice the end of the idle phase
    let k2 = kick.clone();
    let timer = std::thread::spawn(move || {
        fallow_live::clock::sleep_until(idle_end_ns);
        k2.kick();
    });
    println!("{dev}: idle for {idle_s} s with three monitors running…");
    timer.join().map_err(|_| "timer")?;
    // the Monitors publish their CPU every 64 samples (poll) or before
    // each sleep (events, which then spends none until woken)
    let idle_mon_wall_s = (monotonic_ns() - t_start) as f64 / 1e9;
    let (poll_idle, ev_idle) = (poll_sh.get(), ev_sh.get());
    std::thread::sleep(std::time::Duration::from_millis(50));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::DIRECT.bits() as i32)
        .open(dev)?;
    let mut buf = vec![0u8; 8192];
    let off = buf.as_ptr().align_offset(4096);
    let mut rng = rand_pcg::Pcg64::seed_from_u64(1);
    let reader = std::thread::Builder::new()
        .name("fallow-reader".into())
        .spawn(move || {
            let mut issues = Vec::with_capacity(reads);
            for _ in 0..reads {
                std::thread::sleep(std::time::Duration::from_micros(
                    rng.random_range(5_000..25_000),
                ));
                let at = rng.random_range(0..(64u64 << 20) / 4096) * 4096;
                let t = monotonic_ns();
                f.read_exact_at(&mut buf[off..off + 4096], at)
                    .expect("read");
                issues.push(t);
            }
            issues
        })?;
    let issues = reader.join().map_err(|_| "reader")?;
    std::thread::sleep(std::time::Duration::from_millis(100));
    stop.store(true, Ordering::SeqCst);
    kick.kick();
    let (poll_seen, poll_st) = poll.join().map_err(|_| "poll")?;
    let (ev_seen, ev_st) = events.join().map_err(|_| "events")?;
    let (idle, raw_sights, raw_cpu, raw_wall, raw_st) = raw_t.join().map_err(|_| "raw")?;
    let (idle_cpu, idle_wall, idle_wakeups) = idle.unwrap_or((0, 1, 0));

    println!(
        "\nwhole run ({:.1} s: {idle_s} s idle, then {reads} reads):",
        poll_st.wall_s
    );
    println!(
        "{:<8} {:>10} {:>12} {:>10} {:>10}",
        "monitor", "samples", "wakeups", "CPU s", "% of core"
    );
    for (n, s) in [("poll", &poll_st), ("events", &ev_st)] {
        println!(
            "{n:<8} {:>10} {:>12} {:>10.4} {:>10.4}",
            s.samples,
            s.wakeups,
            s.cpu_s,
            s.cpu_fraction() * 100.0
        );
    }
    println!(
        "{:<8} {:>10} {:>12} {:>10.4} {:>10.4}",
        "raw",
        raw_st.samples,
        raw_st.wakeups,
        raw_cpu as f64 / 1e9,
        raw_cpu as f64 / raw_wall as f64 * 100.0
    );
    println!("\nidle phase ({idle_mon_wall_s:.1} s, no I/O on {dev}):");
    println!(
        "{:<8} {:>10} {:>10} {:>12} {:>10}",
        "monitor", "samples", "wakeups", "CPU ms", "% of core"
    );
    for (n, s) in [("poll", &poll_idle), ("events", &ev_idle)] {
        println!(
            "{n:<8} {:>10} {:>10} {:>12.4} {:>10.5}",
            s.samples,
            s.wakeups,
            s.cpu_s * 1e3,
            s.cpu_s / idle_mon_wall_s * 100.0
        );
    }
    println!(
        "{:<8} {:>10} {:>10} {:>12.4} {:>10.5}   (wakeups include the kick that ended the phase)",
        "raw",
        "-",
        idle_wakeups,
        idle_cpu as f64 / 1e6,
        idle_cpu as f64 / idle_wall as f64 * 100.0
    );
    println!("\nlatency from a read's issue to the monitor seeing it, µs:");
    println!(
        "{:<8} {:>8} {:>8} {:>8} {:>8} {:>7}",
        "monitor", "p50", "p95", "p99", "max", "missed"
    );
    let raw_times: Vec<u64> = raw_sights.iter().map(|s| s.0).collect();
    for (n, sights) in [
        ("poll", &poll_seen),
        ("events", &ev_seen),
        ("raw", &raw_times),
    ] {
        let (mut l, missed) = latencies(&issues, sights);
        println!(
            "{n:<8} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {:>7}",
            pct(&mut l, 0.5),
            pct(&mut l, 0.95),
            pct(&mut l, 0.99),
            pct(&mut l, 1.0),
            missed
        );
    }
    // the same from the kernel's block_bio_queue timestamp of each read
    // (the raw monitor's record of it): without the reader thread's own
    // delay between noting the time and submitting, which a loaded
    // machine adds to every monitor alike
    let queued: Vec<u64> = issues
        .iter()
        .enumerate()
        .filter_map(|(i, &t)| {
            let next = issues.get(i + 1).copied().unwrap_or(u64::MAX);
            raw_sights
                .iter()
                .map(|s| s.1)
                .filter(|&k| k >= t && k < next)
                .min()
        })
        .collect();
    println!(
        "\nlatency from the read's block_bio_queue event ({} of {reads} reads recorded) to the monitor seeing it, µs:",
        queued.len()
    );
    println!(
        "{:<8} {:>8} {:>8} {:>8} {:>8} {:>7}",
        "monitor", "p50", "p95", "p99", "max", "missed"
    );
    for (n, sights) in [
        ("poll", &poll_seen),
        ("events", &ev_seen),
        ("raw", &raw_times),
    ] {
        let (mut l, missed) = latencies(&queued, sights);
        println!(
            "{n:<8} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {:>7}",
            pct(&mut l, 0.5),
            pct(&mut l, 0.95),
            pct(&mut l, 0.99),
            pct(&mut l, 1.0),
            missed
        );
    }
    let mut k2u: Vec<u64> = raw_sights.iter().map(|s| s.0.saturating_sub(s.1)).collect();
    println!(
        "raw: kernel tracepoint to user space p50 {:.0} µs, max {:.0} µs; {} lost samples; {} samples read for {} events (kernel filters {})",
        pct(&mut k2u, 0.5),
        pct(&mut k2u, 1.0),
        raw_st.lost,
        raw_st.samples,
        raw_st.events,
        if raw_st.kernel_filter { "accepted" } else { "refused: filtered here" }
    );
    Ok(())
}
