//! Record a loop device while doing known O_DIRECT I/O on it; the trace
//! holds exactly those requests and `fallow-core` reads it back. Needs
//! root, tracefs and losetup: `#[ignore = "needs root"]`, run by
//! `--include-ignored` (scripts/test.sh as root), failing where they are missing.

use fallow_record::{write_msr, Device, Op, Recorder};
use std::fs::OpenOptions;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn losetup(args: &[&str]) -> Result<String, String> {
    let out = Command::new("losetup")
        .args(args)
        .output()
        .map_err(|e| format!("losetup: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// Detaches the loop device even when an assertion fails.
struct Loop(String);
impl Drop for Loop {
    fn drop(&mut self) {
        let _ = losetup(&["-d", &self.0]);
    }
}

#[test]
#[ignore = "needs root"]
fn records_the_requests_done_on_a_loop_device() {
    assert!(
        rustix::process::geteuid().is_root(),
        "needs root (run without --include-ignored to count it as ignored)"
    );
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(32 << 20)
        .unwrap();
    let dev = match losetup(&["-f", "--show", img.to_str().unwrap()]) {
        Ok(d) => Loop(d),
        Err(e) => panic!("needs a loop device: {e}"),
    };
    // let udev's probing reads (if any) finish before recording
    std::thread::sleep(std::time::Duration::from_millis(300));
    let device = Device::resolve(&dev.0).unwrap();
    assert!(device.name.starts_with("loop"), "{device:?}");
    assert_eq!(device.major, 7);
    let recorder = match Recorder::start(&device) {
        Ok(r) => r,
        Err(e) => panic!("needs tracefs with block events: {e}"),
    };
    let instance_dir = std::fs::read_dir("/sys/kernel/tracing/instances")
        .map(|d| d.count())
        .unwrap_or(0);
    assert!(instance_dir >= 1, "an instance exists while recording");
    let stop = Arc::new(AtomicBool::new(false));
    let s = Arc::clone(&stop);
    let reader = std::thread::spawn(move || recorder.run(None, &s));

    // Known requests: sizes from 4 KiB to 256 KiB at scattered, 4 KiB
    // aligned, non-adjacent offsets (so nothing merges).
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&dev.0)
        .unwrap();
    let mut raw = vec![0u8; (256 << 10) + 4096];
    let at = raw.as_ptr().align_offset(4096);
    let buf = &mut raw[at..at + (256 << 10)];
    let mut expected = Vec::new();
    for i in 0..24u64 {
        let size = 4096usize << (i % 7); // 4 KiB .. 256 KiB
        let offset = (i * 1_234_567 % (28 << 20)) / 4096 * 4096;
        if i % 4 == 3 {
            f.write_all_at(&buf[..size], offset).unwrap();
            expected.push((Op::Write, offset, size as u32));
        } else {
            f.read_exact_at(&mut buf[..size], offset).unwrap();
            expected.push((Op::Read, offset, size as u32));
        }
    }
    drop(f);
    stop.store(true, Ordering::Relaxed);
    let rec = reader.join().unwrap().unwrap();
    assert_eq!(rec.device, device.name);
    assert_eq!(rec.lost_events, 0);
    let mut got: Vec<_> = rec
        .requests
        .iter()
        .map(|r| (r.op, r.offset_bytes, r.size_bytes))
        .collect();
    got.sort_by_key(|&(op, off, size)| (off, size, op == Op::Write));
    let mut want = expected.clone();
    want.sort_by_key(|&(op, off, size)| (off, size, op == Op::Write));
    assert_eq!(got, want, "recorded requests");
    assert!(rec
        .requests
        .iter()
        .all(|r| r.latency_ns > 0 && r.error == 0));
    // issue order is the order they were done in (one at a time)
    let order: Vec<_> = rec
        .requests
        .iter()
        .map(|r| (r.op, r.offset_bytes, r.size_bytes))
        .collect();
    assert_eq!(order, expected);
    // wall clock: issued within the last minute
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let first = rec.requests[0].issue_unix_ns;
    assert!(
        first <= now_ns && now_ns - first < 60_000_000_000,
        "{first} vs {now_ns}"
    );
    // the instance is gone
    assert!(!std::path::Path::new(&format!(
        "/sys/kernel/tracing/instances/fallow-{}",
        std::process::id()
    ))
    .exists());

    // fallow-core reads the CSV back with exact completions
    let csv = dir.path().join("trace.csv");
    let mut out = std::fs::File::create(&csv).unwrap();
    write_msr(&rec, "testhost", 0, &mut out).unwrap();
    drop(out);
    let trace = fallow_core::read_trace(&csv, &fallow_core::ReadOptions::default()).unwrap();
    assert_eq!(trace.len(), expected.len());
    let sizes: Vec<u32> = trace.size_bytes().to_vec();
    let want_sizes: Vec<u32> = expected.iter().map(|e| e.2).collect();
    assert_eq!(sizes, want_sizes);
    let offsets: Vec<u64> = trace.offset_bytes().to_vec();
    let want_offsets: Vec<u64> = expected.iter().map(|e| e.1).collect();
    assert_eq!(offsets, want_offsets);
    let completion = trace.completion_ns().expect("MSR carries completions");
    for (k, r) in rec.requests.iter().enumerate() {
        let resp = completion[k] - trace.arrival_ns()[k];
        // 100 ns ticks, rounded up
        assert_eq!(resp, r.latency_ns.div_ceil(100) * 100);
    }
}
