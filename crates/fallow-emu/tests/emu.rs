//! The emulated disk mounted for real: content, latencies against the
//! model, injected errors, the stat file, and a loop device on top.
//! Needs root and /dev/fuse: `#[ignore = "needs root"]`, run by `--include-ignored`.

use fallow_core::service::{DiskModel, ServiceModel};
use fallow_emu::{EmuConfig, Emulator, Error, FailRanges};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const IMAGE_BYTES: u64 = 64 << 20;

/// Deterministic image content: a byte per position from a 64-bit mix, so
/// a misplaced block cannot match by accident.
fn pattern(offset: u64, len: usize) -> Vec<u8> {
    (offset..offset + len as u64)
        .map(|i| {
            let mut x = (i / 8).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            x ^= x >> 29;
            (x >> (8 * (i % 8))) as u8
        })
        .collect()
}

/// One mounted emulator at a time: timing tests must not share the two
/// cores with another test's FUSE traffic.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Fixture {
    _serial: std::sync::MutexGuard<'static, ()>,
    _dir: tempfile::TempDir,
    image: PathBuf,
    mnt: PathBuf,
}

/// A temp dir with a patterned image and a mount point. The tests that use
/// it are `#[ignore = "needs root"]` (counted as ignored without
/// `--include-ignored`); run where root or FUSE is missing, they fail here
/// saying so instead of passing unchecked.
fn fixture(test: &str) -> Fixture {
    assert!(
        rustix_is_root(),
        "{test} needs root to mount FUSE without fusermount (run it without \
         --include-ignored to count it as ignored)"
    );
    if let Some(why) = fallow_emu::fuse_unavailable() {
        panic!("{test} needs FUSE: {why}");
    }
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("disk.img");
    let mut f = File::create(&image).unwrap();
    let chunk = 1 << 20;
    for off in (0..IMAGE_BYTES).step_by(chunk) {
        f.write_all(&pattern(off, chunk)).unwrap();
    }
    drop(f);
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    Fixture {
        _serial: serial,
        _dir: dir,
        image,
        mnt,
    }
}

fn rustix_is_root() -> bool {
    // SAFETY-free: geteuid via /proc, as this test crate denies unsafe
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

fn config(fx: &Fixture, model: Option<ServiceModel>) -> EmuConfig {
    let mut c = EmuConfig::new(&fx.image);
    c.model = model;
    c
}

/// A page-aligned buffer: an unaligned one spans one page more, and the
/// kernel splits a 1 MiB FUSE request at its 256-page limit.
fn aligned(raw: &mut Vec<u8>, len: usize) -> &mut [u8] {
    raw.resize(len + 4096, 0);
    let at = raw.as_ptr().align_offset(4096);
    &mut raw[at..at + len]
}

fn fast() -> Option<ServiceModel> {
    Some("const:200us".parse().unwrap())
}

#[test]
#[ignore = "needs root"]
fn reads_return_the_image_and_writes_reach_it() {
    let fx = fixture("reads_return_the_image_and_writes_reach_it");
    let mut emu = Emulator::mount(config(&fx, fast()), &fx.mnt).unwrap();
    let disk = emu.disk_path();
    assert_eq!(disk, fx.mnt.canonicalize().unwrap().join("disk"));
    assert_eq!(std::fs::metadata(&disk).unwrap().len(), IMAGE_BYTES);
    let mut names: Vec<String> = std::fs::read_dir(&fx.mnt)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["disk", "issuers", "power", "stat"],
        "the disk and its three small files"
    );
    let f = File::open(&disk).unwrap();
    let mut raw = Vec::new();
    let buf = aligned(&mut raw, 1 << 20);
    for off in (0..IMAGE_BYTES).step_by(buf.len()) {
        f.read_exact_at(buf, off).unwrap();
        assert!(buf == pattern(off, buf.len()), "bytes differ at {off}");
    }
    // an unaligned read in the middle, and the end of the disk
    let mut small = [0u8; 1000];
    f.read_exact_at(&mut small, 12_345).unwrap();
    assert_eq!(small.to_vec(), pattern(12_345, 1000));
    assert_eq!(f.read_at(&mut small, IMAGE_BYTES).unwrap(), 0);
    // writes go to the image
    let w = OpenOptions::new().write(true).open(&disk).unwrap();
    w.write_all_at(b"fallow!", 4096).unwrap();
    w.sync_data().unwrap();
    let mut back = [0u8; 7];
    File::open(&fx.image)
        .unwrap()
        .read_exact_at(&mut back, 4096)
        .unwrap();
    assert_eq!(&back, b"fallow!");
    // the disk cannot be truncated
    assert!(OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&disk)
        .is_err());
    let s = emu.stats();
    assert_eq!(s.read_ios, 64 + 1, "{s:?}"); // the read at the end is not a request
    assert_eq!((s.write_ios, s.flush_ios), (1, 1));
    // busy while a file is open, and still serving after the refusal
    let busy = emu.unmount();
    assert!(matches!(busy, Err(Error::Unmount { .. })), "{busy:?}");
    f.read_exact_at(&mut small, 0).unwrap();
    drop((f, w));
    emu.unmount().unwrap();
    assert!(!fx.mnt.join("disk").exists(), "unmounted");
}

/// Seek time by the formula in docs/emulated-disk.md (track-to-track plus the rest of
/// a full stroke scaled by √(distance / capacity)), written out here rather
/// than taken from the model under test.
fn seek_ms(distance: u64, track_ms: f64, full_ms: f64) -> f64 {
    if distance == 0 {
        0.0
    } else {
        track_ms + (full_ms - track_ms) * (distance as f64 / IMAGE_BYTES as f64).sqrt()
    }
}

#[test]
#[ignore = "needs root"]
fn latencies_follow_the_disk_model() {
    let fx = fixture("latencies_follow_the_disk_model");
    // 15k rpm (4 ms a turn), 0.5..10 ms seeks, 100 MB/s, over the image
    let model = DiskModel {
        rpm: 15_000.0,
        track_to_track_ns: 0.5e6,
        full_stroke_ns: 10e6,
        transfer_bytes_per_s: 100e6,
        capacity_bytes: IMAGE_BYTES as f64,
    };
    let mut emu = Emulator::mount(config(&fx, Some(ServiceModel::Disk(model))), &fx.mnt).unwrap();
    let f = File::open(emu.disk_path()).unwrap();
    let size = 64 << 10;
    let mut buf = vec![0u8; size];
    let mut timed = |off: u64| {
        let t = Instant::now();
        f.read_exact_at(&mut buf, off).unwrap();
        t.elapsed().as_secs_f64() * 1e3
    };
    let n = 40;
    timed(0); // puts the head at 64 KiB
    let seq: Vec<f64> = (1..=n).map(|i| timed(i * size as u64)).collect();
    // alternate between the two ends: every request seeks ~60 MiB
    let far_offsets: Vec<u64> = (0..n)
        .map(|i| {
            if i % 2 == 0 {
                IMAGE_BYTES - 2 * size as u64
            } else {
                0
            }
        })
        .collect();
    let mut head = (n + 1) * size as u64;
    let mut expected_seek = 0.0;
    for &off in &far_offsets {
        expected_seek += seek_ms(off.abs_diff(head), 0.5, 10.0);
        head = off + size as u64;
    }
    expected_seek /= n as f64;
    let far: Vec<f64> = far_offsets.iter().map(|&o| timed(o)).collect();
    drop(f);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let log = emu.service_log();
    let model_ms: Vec<f64> = log.iter().map(|r| r.model_ns as f64 / 1e6).collect();
    let (model_seq, model_far) = (
        mean(&model_ms[1..=n as usize]),
        mean(&model_ms[n as usize + 1..]),
    );
    let margin = mean(&far) - mean(&seq);
    // What the client saw beyond each request's own draw: FUSE and the
    // scheduler. Medians, because CI runs this beside a nice-19 fuzzer and
    // a compiler, and one preempted request moves a mean of 40 by ~0.1 ms
    // per ms lost (the stop-31 CI run failed on a mean).
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let seen_over = |seen: &[f64], drawn: &[f64]| -> Vec<f64> {
        seen.iter().zip(drawn).map(|(s, d)| s - d).collect()
    };
    let over_seq = median(seen_over(&seq, &model_ms[1..=n as usize]));
    let over_far = median(seen_over(&far, &model_ms[n as usize + 1..]));
    eprintln!(
        "sequential {:.2} ms (model drew {model_seq:.2}), far {:.2} ms (drew {model_far:.2}): \
         margin {margin:.2} ms; mean seek by the formula {expected_seek:.2} ms; \
         client overhead (median) sequential {over_seq:.3} ms, far {over_far:.3} ms",
        mean(&seq),
        mean(&far)
    );
    // The draws: far minus sequential is the mean seek, give or take the
    // rotational latency (uniform over 4 ms, sd 1.15 ms: the difference of
    // two means of 40 has sd 0.26 ms; 1 ms is ~4 sd).
    assert!(
        (model_far - model_seq - expected_seek).abs() < 1.0,
        "{model_far} - {model_seq} vs {expected_seek}"
    );
    // sequential draws: half a turn plus 0.66 ms transfer (same 4-sd bound
    // on a mean of 40 uniform rotations: sd 0.18 ms)
    let seq_model = 2.0 + size as f64 / 100e6 * 1e3;
    assert!(
        (model_seq - seq_model).abs() < 1.0,
        "{model_seq} vs {seq_model}"
    );
    // What the client saw: each request took its draw plus a FUSE overhead
    // that is small and the same near and far (the seek is served, not
    // skipped or doubled).
    for (what, over) in [("sequential", over_seq), ("far", over_far)] {
        assert!(
            (0.0..1.0).contains(&over),
            "{what}: the client saw {over} ms beyond the drawn service time"
        );
    }
    assert!(
        (over_far - over_seq).abs() < 0.5,
        "FUSE overhead far {over_far} ms vs sequential {over_seq} ms"
    );
    // achieved service time against the drawn one, request by request
    assert_eq!(log.len(), 2 * n as usize + 1);
    let mut over: Vec<f64> = log
        .iter()
        .map(|r| (r.achieved_ns as f64 - r.model_ns as f64) / 1e3)
        .collect();
    over.sort_by(f64::total_cmp);
    let (median, max) = (over[over.len() / 2], over[over.len() - 1]);
    eprintln!("achieved - model: median {median:.1} us, max {max:.1} us");
    assert!(over[0] >= 0.0, "a request finished early: {} us", over[0]);
    assert!(median < 200.0, "median overshoot {median} us");
    emu.unmount().unwrap();
}

#[test]
#[ignore = "needs root"]
fn failing_sectors_give_eio_exactly() {
    let fx = fixture("failing_sectors_give_eio_exactly");
    let mut cfg = config(&fx, fast());
    cfg.fail = FailRanges::parse_sectors("1000-1007,5000").unwrap();
    let mut emu = Emulator::mount(cfg, &fx.mnt).unwrap();
    let f = File::open(emu.disk_path()).unwrap();
    let read = |off: u64, len: usize| {
        let mut b = vec![0u8; len];
        match f.read_exact_at(&mut b, off) {
            Ok(()) => {
                assert_eq!(b, pattern(off, len));
                Ok(())
            }
            Err(e) => Err(e.raw_os_error()),
        }
    };
    const EIO: Option<i32> = Some(libc::EIO);
    let s = 512u64;
    assert_eq!(read(999 * s, 512), Ok(())); // just before
    assert_eq!(read(1000 * s, 512), Err(EIO)); // first bad sector
    assert_eq!(read(1007 * s, 512), Err(EIO)); // last bad sector
    assert_eq!(read(1008 * s, 512), Ok(())); // just after
    assert_eq!(read(999 * s, 1024), Err(EIO)); // straddles the start
    assert_eq!(read(1007 * s + 511, 1), Err(EIO)); // the last byte
    assert_eq!(read(0, 1 << 20), Err(EIO)); // covers the whole range
    assert_eq!(read(4999 * s, 512), Ok(()));
    assert_eq!(read(5000 * s, 4096), Err(EIO));
    assert_eq!(read(5001 * s, 4096), Ok(()));
    let log = emu.service_log();
    assert_eq!(log.iter().filter(|r| r.failed).count(), 6);
    drop(f);
    emu.unmount().unwrap();
}

fn stat_fields(path: &Path) -> Vec<u64> {
    let text = std::fs::read_to_string(path).unwrap();
    let v: Vec<u64> = text
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    assert_eq!(v.len(), 17, "{text:?}");
    v
}

#[test]
#[ignore = "needs root"]
fn stat_file_counts_the_requests() {
    let fx = fixture("stat_file_counts_the_requests");
    let stat = fx.image.with_file_name("stat");
    let mut cfg = config(&fx, Some("const:2ms".parse().unwrap()));
    cfg.stat_file = Some(stat.clone());
    let mut emu = Emulator::mount(cfg, &fx.mnt).unwrap();
    assert_eq!(stat_fields(&stat), vec![0; 17]);
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(emu.disk_path())
        .unwrap();
    let mut buf = vec![0u8; 8192];
    let t = Instant::now();
    let mut client_ms = 0.0;
    for i in 0..10u64 {
        let t = Instant::now();
        f.read_exact_at(&mut buf, i * 1_000_000).unwrap();
        client_ms += t.elapsed().as_secs_f64() * 1e3;
    }
    for i in 0..3u64 {
        f.write_all_at(&buf[..4096], i * 4096).unwrap();
    }
    f.read_exact_at(&mut buf[..700], 3).unwrap(); // 700 bytes: 2 sectors
    f.sync_all().unwrap();
    let wall_ms = t.elapsed().as_secs_f64() * 1e3;
    std::thread::sleep(std::time::Duration::from_millis(20));
    let v = stat_fields(&stat);
    // reads: 11 completed, 10·16 + 2 sectors; writes: 3, 24 sectors
    assert_eq!((v[0], v[1], v[2]), (11, 0, 162), "{v:?}");
    assert_eq!((v[4], v[5], v[6]), (3, 0, 24), "{v:?}");
    assert_eq!(v[8], 0, "nothing in flight");
    assert_eq!(v[15], 1, "one flush");
    // each read took at least its 2 ms service time, and no more than the
    // client saw
    assert!(
        v[3] >= 10 * 2 + 2 && (v[3] as f64) <= client_ms + 2.0 + 1.0,
        "{v:?} {client_ms}"
    );
    assert!(v[7] >= 3 * 2, "{v:?}");
    // busy time: one request at a time, so io_ticks ≈ time_in_queue, and
    // both fit in the wall time
    assert!(
        v[9] as f64 <= wall_ms + 1.0 && v[9] >= 14 * 2,
        "{v:?} {wall_ms}"
    );
    // time_in_queue is the sum of the three times before rounding down to
    // milliseconds, the ticks each after: it exceeds their sum by 0..=2
    let ticks = v[3] + v[7] + v[16];
    assert!((ticks..=ticks + 2).contains(&v[10]), "{v:?}");
    let s = emu.stats();
    assert_eq!((s.read_ios, s.write_ios, s.flush_ios), (11, 3, 1));
    drop(f);
    emu.unmount().unwrap();
}

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

#[test]
#[ignore = "needs root"]
fn loop_device_over_the_disk_reaches_the_emulator() {
    let fx = fixture("loop_device_over_the_disk_reaches_the_emulator");
    if losetup(&["--version"]).is_err() {
        eprintln!("skip: loop_device_over_the_disk_reaches_the_emulator: no losetup");
        return;
    }
    let mut emu = Emulator::mount(config(&fx, fast()), &fx.mnt).unwrap();
    let disk = emu.disk_path();
    let dev = match losetup(&["-f", "--show", disk.to_str().unwrap()]) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("skip: loop_device_over_the_disk_reaches_the_emulator: {e}");
            return;
        }
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        assert_eq!(emu.loop_devices(), vec![dev.clone()]);
        let before = emu.stats().read_ios;
        // O_DIRECT, so the loop device's own page cache cannot answer
        let f = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&dev)
            .unwrap();
        let mut raw = Vec::new();
        let buf = aligned(&mut raw, 64 << 10);
        f.read_exact_at(buf, 3 << 20).unwrap();
        assert!(buf == pattern(3 << 20, 64 << 10), "loop bytes differ");
        let after = emu.stats().read_ios;
        assert!(
            after > before,
            "the read reached the emulator: {before} -> {after}"
        );
        let hit = emu
            .service_log()
            .iter()
            .any(|r| r.offset_bytes <= 3 << 20 && r.offset_bytes + r.size_bytes as u64 > 3 << 20);
        assert!(hit, "a request covering 3 MiB was served");
    }));
    // a loop device in direct-I/O mode works too
    let dio = losetup(&["-f", "--show", "--direct-io=on", disk.to_str().unwrap()]);
    let dio_read = dio.as_ref().map(|d| {
        let before = emu.stats().read_ios;
        let f = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(d)
            .unwrap();
        let mut raw = Vec::new();
        let buf = aligned(&mut raw, 4096);
        let ok = f.read_exact_at(buf, 5 << 20).is_ok() && *buf == pattern(5 << 20, 4096)[..];
        (ok, emu.stats().read_ios > before)
    });
    if let Ok(d) = &dio {
        losetup(&["-d", d]).unwrap();
    }
    // busy while the loop device is attached; fine once detached
    let busy = emu.unmount();
    let detached = losetup(&["-d", &dev]);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
    assert!(matches!(busy, Err(Error::Busy { .. })), "{busy:?}");
    match dio_read {
        Ok(r) => assert_eq!(
            r,
            (true, true),
            "--direct-io=on: bytes right, reached the emulator"
        ),
        Err(e) => eprintln!("note: losetup --direct-io=on refused: {e}"),
    }
    detached.unwrap();
    // the kernel drops the backing file asynchronously after `losetup -d`
    for _ in 0..100 {
        if emu.loop_devices().is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    emu.unmount().unwrap();
}

#[test]
#[ignore = "needs root"]
fn the_power_file_spins_the_disk_down_and_the_next_read_pays_the_spin_up() {
    let fx = fixture("the_power_file_spins_the_disk_down_and_the_next_read_pays_the_spin_up");
    let mut c = config(&fx, fast());
    c.power.spinup_ns = 200_000_000;
    c.power.shutdown_ns = 50_000_000;
    let emu = Emulator::mount(c, &fx.mnt).unwrap();
    let power = emu.power_path();
    let text = std::fs::read_to_string(&power).unwrap();
    assert!(
        text.starts_with("state idle\nspinups 0\nspindowns 0\n"),
        "{text}"
    );
    std::fs::write(&power, "standby\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(emu.power().state, fallow_emu::PowerState::Standby);
    // reading the counters did not wake it
    assert_eq!(emu.power().spinups, 0);
    let f = File::open(emu.disk_path()).unwrap();
    let mut buf = vec![0u8; 4096];
    let t = std::time::Instant::now();
    f.read_exact_at(&mut buf, 0).unwrap();
    let waited = t.elapsed();
    assert!(
        waited >= std::time::Duration::from_millis(200),
        "{waited:?}"
    );
    let p = emu.power();
    assert_eq!((p.spinups, p.spindowns, p.delayed_requests), (1, 1, 1));
    // the exposed delay is the spin-up, from the read's arrival
    assert!(
        p.exposed_delay_ns >= 200_000_000 && p.exposed_delay_ns < 400_000_000,
        "{p:?}"
    );
    // stat in sysfs format, current
    let stat = std::fs::read_to_string(fx.mnt.join("stat")).unwrap();
    let v: Vec<u64> = stat
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    assert_eq!((v.len(), v[0], v[2]), (17, 1, 8));
    // anything but `standby` is refused
    let e = std::fs::write(&power, "wake\n").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(22));
}

/// An open small file reads as it was when it was opened (like procfs's
/// seq_file): a reader that takes it in two reads once got the tail of a
/// newer, longer text after the first (`read_to_string` reads again at the
/// end to find EOF).
#[test]
#[ignore = "needs root"]
fn a_small_file_reads_as_it_was_when_opened() {
    let fx = fixture("a_small_file_reads_as_it_was_when_opened");
    let emu = Emulator::mount(config(&fx, fast()), &fx.mnt).unwrap();
    let issuers = fx.mnt.join("issuers");
    let mut f = File::open(&issuers).unwrap();
    let mut first = vec![0u8; 4096];
    let n = std::io::Read::read(&mut f, &mut first).unwrap();
    assert_eq!(&first[..n], b"requests 0\n");
    // a request of this process: the text now has a line more
    File::open(emu.disk_path())
        .unwrap()
        .read_exact_at(&mut [0u8; 4096], 0)
        .unwrap();
    let live = std::fs::read_to_string(&issuers).unwrap();
    assert!(live.starts_with("requests 1\n") && live.len() > n, "{live}");
    // the handle opened before reads on to the end of its own text
    let mut rest = Vec::new();
    std::io::Read::read_to_end(&mut f, &mut rest).unwrap();
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
}
