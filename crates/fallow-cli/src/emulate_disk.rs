//! `fallow emulate-disk IMAGE MOUNTPOINT`: serve an image file as
//! `MOUNTPOINT/disk` over FUSE with HDD-like service times (see the
//! `fallow-emu` crate), so live runs see HDD-scale interference where no
//! spinning disk exists. Put a loop device over it for a block device:
//! `losetup -f --show MOUNTPOINT/disk`.
//!
//! By default the command returns once the disk is mounted, leaving a
//! server process behind (stop it with `kill PID`); `--foreground` keeps it
//! in the terminal (Ctrl-C unmounts). Either way the first line on stdout
//! is the disk's path (or, with `--json`, an object with it), for scripts.

use crate::BadInput;
use anyhow::{Context, Result};
use clap::Args;
use fallow_core::outpath::OutputKind;
use fallow_core::service::{DiskModel, Draws, ServiceModel};
use fallow_core::units::parse_bytes;
use fallow_emu::{EmuConfig, Emulator, FailRanges};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Arguments of `fallow emulate-disk`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples (as root; FUSE):
  truncate -s 4G disk.img && mkdir -p /mnt/emu && fallow emulate-disk disk.img /mnt/emu
      a 7200 rpm HDD; then `losetup -f --show --direct-io=on /mnt/emu/disk` gives a block device
  fallow emulate-disk disk.img /mnt/emu --rpm 5400 --fail 1000-1007 --stat-file /run/emu.stat
      a slower disk with a bad sector range, its counters published for a monitor
  fallow emulate-disk disk.img /mnt/emu --power power.toml --foreground
      with power states (echo standby > /mnt/emu/power), until Ctrl-C")]
pub struct EmulateDiskArgs {
    /// The image file whose bytes the disk holds (a test image: writes to
    /// the disk go to it). Make one with `truncate -s 4G disk.img`.
    #[arg(value_name = "IMAGE")]
    pub image: PathBuf,

    /// An existing empty directory to mount on; the disk is MOUNTPOINT/disk.
    #[arg(value_name = "MOUNTPOINT")]
    pub mountpoint: PathBuf,

    /// Service-time model: `hdd` (seek + rotation + transfer, shaped by
    /// --rpm, --seek-ms, --bandwidth, --capacity), `none` (no added delay:
    /// counters and --fail only), or any `fallow simulate --service` model
    /// such as `const:5ms` or `disk:rpm=5400,seek=1ms..20ms`.
    #[arg(long, value_name = "MODEL", default_value = "hdd")]
    pub model: String,

    /// Spindle speed of the hdd model, rpm. [default: 7200]
    #[arg(long, value_name = "RPM")]
    pub rpm: Option<f64>,

    /// Seek times of the hdd model, ms: `TRACK..FULL` (track-to-track and
    /// full-stroke), the seek growing with the square root of the distance.
    /// [default: 0.6..16]
    #[arg(long, value_name = "TRACK..FULL")]
    pub seek_ms: Option<String>,

    /// Media transfer rate of the hdd model, e.g. `120MB/s`. [default: 150MB/s]
    #[arg(long, value_name = "RATE")]
    pub bandwidth: Option<String>,

    /// Capacity the hdd model spreads seeks over, e.g. `1TB`. [default: the
    /// image's size, so a seek across the image is a full stroke]
    #[arg(long, value_name = "SIZE")]
    pub capacity: Option<String>,

    /// Sectors (512 B) whose reads fail with EIO: `1000-1007,5000` (ranges
    /// inclusive). Writes to them succeed, as a disk remaps on write.
    #[arg(long, value_name = "SECTORS")]
    pub fail: Option<String>,

    /// Like --fail, in bytes: `4096-8191,10000`.
    #[arg(long, value_name = "BYTES")]
    pub fail_bytes: Option<String>,

    /// Publish counters in /sys/block/<dev>/stat format to this file
    /// (rewritten atomically after each change, at most every 1 ms), for a
    /// monitor to sample instead of sysfs.
    #[arg(long, value_name = "PATH", help_heading = crate::atomic::OUTPUT_FILES)]
    pub stat_file: Option<PathBuf>,

    /// Serve the image read-only (writes fail with EROFS).
    #[arg(long)]
    pub read_only: bool,

    /// Power model of the disk's power states, a TOML file in the format
    /// of `fallow energy --power` (read_write_w, idle_w, standby_w,
    /// spinup_j, spinup_s, shutdown_j, shutdown_s, …; [device.N] tables
    /// are not used). The disk starts spinning; `echo standby >
    /// MOUNTPOINT/power` spins it down, the next request pays the spin-up
    /// delay, and `cat MOUNTPOINT/power` shows the state, spin-ups,
    /// spin-downs, time and energy per state without waking it.
    /// [default: the WD2500JD of the SARD seed: 9 s spin-up, 4 s spin-down]
    #[arg(long, value_name = "power.toml")]
    pub power: Option<PathBuf>,

    /// Seed of the model's random rotational positions.
    #[arg(long, value_name = "N", default_value_t = fallow_core::sim::DEFAULT_SEED)]
    pub seed: u64,

    /// How the model's random part (the hdd's rotational position) is
    /// drawn: `in-order`, one stream in the order requests come (the
    /// simulator's), or `per-request`, from the seed, offset and size of
    /// each request, so two runs that issue the same requests (fio with one
    /// --randseed) draw the same times for them and differ only by what
    /// else ran: a paired comparison of an FG alone and beside BG work
    /// (bench/live_bench.py --live-budget). The same request twice in one
    /// run takes the same time twice.
    #[arg(long, value_name = "HOW", default_value_t = Draws::InOrder,
          value_parser = |s: &str| s.parse::<Draws>())]
    pub draws: Draws,

    /// FUSE threads: requests that can wait in the emulator's queue at once
    /// (and show as in_flight in the stat file).
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub threads: usize,

    /// Stay in the foreground until Ctrl-C or SIGTERM, then unmount.
    #[arg(long)]
    pub foreground: bool,

    /// In the background, append the emulator's messages (unmount, busy)
    /// to this file. [default: they are discarded]
    #[arg(long, value_name = "PATH", conflicts_with = "foreground", help_heading = crate::atomic::OUTPUT_FILES)]
    pub log: Option<PathBuf>,

    /// Internal: this process is the background server that a plain
    /// `fallow emulate-disk` started; let go of the caller's stderr once
    /// mounted, so `$(fallow emulate-disk …)` and pipes see their end.
    #[arg(long, hide = true)]
    pub detached_child: bool,

    /// Print the ready line as JSON (disk, mountpoint, image, size_bytes,
    /// model, seed, draws, power_file, stat, power_model, stat_file, fail_bytes,
    /// pid).
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub out: crate::atomic::OverwriteArg,
}

fn bad(e: impl std::fmt::Display) -> anyhow::Error {
    BadInput(e.to_string()).into()
}

/// The model and a one-line description of it.
fn model(args: &EmulateDiskArgs, image_bytes: u64) -> Result<Option<ServiceModel>> {
    let hdd_flags = args.rpm.is_some()
        || args.seek_ms.is_some()
        || args.bandwidth.is_some()
        || args.capacity.is_some();
    match args.model.trim() {
        "hdd" => {
            let mut d: DiskModel = EmuConfig::hdd_model(image_bytes);
            if let Some(rpm) = args.rpm {
                if !(rpm.is_finite() && rpm > 0.0) {
                    return Err(bad(format!("--rpm {rpm}: must be positive")));
                }
                d.rpm = rpm;
            }
            if let Some(s) = &args.seek_ms {
                let (lo, hi) = s.split_once("..").ok_or_else(|| {
                    bad(format!(
                        "--seek-ms `{s}`: expected TRACK..FULL, e.g. 0.6..16"
                    ))
                })?;
                let ms = |v: &str| {
                    v.trim()
                        .parse::<f64>()
                        .ok()
                        .filter(|x| x.is_finite() && *x >= 0.0)
                        .ok_or_else(|| bad(format!("--seek-ms `{s}`: `{v}` is not a number of ms")))
                };
                let (lo, hi) = (ms(lo)?, ms(hi)?);
                if hi < lo {
                    return Err(bad(format!(
                        "--seek-ms `{s}`: full stroke is shorter than track-to-track"
                    )));
                }
                d.track_to_track_ns = lo * 1e6;
                d.full_stroke_ns = hi * 1e6;
            }
            if let Some(b) = &args.bandwidth {
                let v = parse_bytes(b.trim().trim_end_matches("/s"))
                    .map_err(|e| bad(format!("--bandwidth: {e}")))?;
                if v == 0 {
                    return Err(bad("--bandwidth must be positive"));
                }
                d.transfer_bytes_per_s = v as f64;
            }
            if let Some(c) = &args.capacity {
                let v = parse_bytes(c).map_err(|e| bad(format!("--capacity: {e}")))?;
                if v == 0 {
                    return Err(bad("--capacity must be positive"));
                }
                d.capacity_bytes = v as f64;
            }
            Ok(Some(ServiceModel::Disk(d)))
        }
        other if hdd_flags => Err(bad(format!(
            "--rpm, --seek-ms, --bandwidth and --capacity shape --model hdd, not `{other}`"
        ))),
        "none" => Ok(None),
        spec => spec
            .parse::<ServiceModel>()
            .map(Some)
            .map_err(|e| bad(format!("--model: {e} (or hdd, none)"))),
    }
}

fn describe(model: &Option<ServiceModel>) -> String {
    match model {
        None => "no added delay".into(),
        Some(ServiceModel::Disk(d)) => format!(
            "{} rpm, seek {}..{} ms, {} MB/s over {}",
            d.rpm,
            d.track_to_track_ns / 1e6,
            d.full_stroke_ns / 1e6,
            d.transfer_bytes_per_s / 1e6,
            crate::human::bytes(d.capacity_bytes as u64)
        ),
        Some(m) => m.to_string(),
    }
}

/// Run `fallow emulate-disk`.
pub fn run(args: EmulateDiskArgs) -> Result<()> {
    // the counters and the log never replace the image or a device
    let guard = args.out.guard(
        [Some(args.image.as_path()), args.power.as_deref()]
            .into_iter()
            .flatten(),
    );
    if let Some(p) = &args.stat_file {
        crate::atomic::check(&guard, p, OutputKind::StatFile, "--stat-file")?;
    }
    if let Some(p) = &args.log {
        crate::atomic::check(&guard, p, OutputKind::MessageLog, "--log")?;
    }
    if !args.foreground && !args.detached_child {
        return run_detached();
    }
    let meta = std::fs::metadata(&args.image)
        .map_err(|e| bad(format!("image {}: {e}", args.image.display())))?;
    let model = model(&args, meta.len())?;
    let mut fail = FailRanges::none();
    if let Some(s) = &args.fail {
        fail = fail.union(&FailRanges::parse_sectors(s).map_err(bad)?);
    }
    if let Some(s) = &args.fail_bytes {
        fail = fail.union(&FailRanges::parse_bytes(s).map_err(bad)?);
    }
    let power = match &args.power {
        Some(p) => fallow_core::energy::PowerFile::read(p)
            .and_then(|f| f.model(None))
            .map_err(|e| bad(format!("--power: {e}")))?,
        None => fallow_core::energy::PowerModel::default(),
    };
    let cfg = EmuConfig {
        power: power.clone(),
        image: args.image.clone(),
        model: model.clone(),
        fail: fail.clone(),
        stat_file: args.stat_file.clone(),
        seed: args.seed,
        draws: args.draws,
        threads: args.threads,
        read_only: args.read_only,
    };
    let mut emu = Emulator::mount(cfg, &args.mountpoint).map_err(|e| match e {
        fallow_emu::Error::BadImage { .. }
        | fallow_emu::Error::BadMountpoint { .. }
        | fallow_emu::Error::InvalidParameter { .. } => bad(e),
        fallow_emu::Error::Image { ref source, .. }
            if matches!(
                source.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
            ) =>
        {
            bad(e)
        }
        other => anyhow::Error::from(other),
    })?;
    let disk = emu.disk_path();
    let ready = if args.json {
        serde_json::json!({
            "schema_version": fallow_core::JSON_SCHEMA_VERSION,
            "disk": disk,
            "mountpoint": emu.mountpoint(),
            "image": args.image.canonicalize().unwrap_or(args.image.clone()),
            "size_bytes": emu.size_bytes(),
            "model": model.as_ref().map(|m| m.to_string()),
            "seed": args.seed,
            "draws": args.draws.to_string(),
            "power_file": emu.power_path(),
            "stat": emu.mountpoint().join(fallow_emu::STAT_FILE_NAME),
            "power_model": power.name,
            "stat_file": args.stat_file.as_deref().map(|p| std::path::absolute(p).unwrap_or(p.to_path_buf())),
            "fail_bytes": fail.ranges().iter().map(|&(s, e)| [s, e - 1]).collect::<Vec<_>>(),
            "pid": std::process::id(),
        })
        .to_string()
    } else {
        disk.display().to_string()
    };
    eprintln!(
        "fallow: serving {} ({}) as {}: {}; power {} (spin-up {} s, spin-down {} s; control and counters in {}){}{}",
        args.image.display(),
        crate::human::bytes(emu.size_bytes()),
        disk.display(),
        describe(&model),
        power.name,
        power.spinup_ns as f64 / 1e9,
        power.shutdown_ns as f64 / 1e9,
        emu.power_path().display(),
        if fail.is_empty() {
            String::new()
        } else {
            format!("; reads of bytes {fail} fail")
        },
        match &args.stat_file {
            Some(p) => format!("; counters in {}", p.display()),
            None => String::new(),
        },
    );
    eprintln!(
        "fallow: block device: losetup -f --show {}; stop: Ctrl-C or kill {}",
        disk.display(),
        std::process::id()
    );
    let mut out = std::io::stdout().lock();
    writeln!(out, "{ready}").context("writing the ready line")?;
    out.flush().context("writing the ready line")?;
    drop(out);
    if args.detached_child {
        release_stderr(args.log.as_deref())?;
    }
    serve_until_signalled(&mut emu)
}

/// Wait for SIGINT/SIGTERM/SIGHUP, then unmount; while the disk is busy
/// (a loop device or an open file on it), say so and keep serving.
fn serve_until_signalled(emu: &mut Emulator) -> Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
        .context("installing signal handlers")?;
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = signals.handle();
    let thread = std::thread::spawn(move || {
        for s in signals.forever() {
            if tx.send(s).is_err() {
                break;
            }
        }
    });
    let result = loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(_) => match emu.unmount() {
                Ok(()) => {
                    let s = emu.stats();
                    eprintln!(
                        "fallow: unmounted {} after {} and {}",
                        emu.mountpoint().display(),
                        crate::human::counted(s.read_ios, "read", "reads"),
                        crate::human::counted(s.write_ios, "write", "writes")
                    );
                    break Ok(());
                }
                Err(e) => eprintln!(
                    "fallow: not unmounting: {e}; still serving (signal again when it is free)"
                ),
            },
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if !emu.is_serving() {
                    eprintln!(
                        "fallow: {} was unmounted; stopping",
                        emu.mountpoint().display()
                    );
                    break Ok(());
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                break Err(anyhow::anyhow!("signal handling stopped"))
            }
        }
    };
    handle.close();
    let _ = thread.join();
    result
}

/// Point stderr at `log` (appending) or /dev/null: the caller that started
/// us has its answer and may be waiting for its stderr to close.
fn release_stderr(log: Option<&std::path::Path>) -> Result<()> {
    let target = log.unwrap_or(std::path::Path::new("/dev/null"));
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(target)
        .with_context(|| format!("--log {}", target.display()))?;
    rustix::stdio::dup2_stderr(&f)
        .with_context(|| format!("redirecting stderr to {}", target.display()))?;
    // a first line that marks the log as fallow's own, so the next run
    // may append to it (OutputKind::MessageLog) and nobody else's file
    if log.is_some() {
        eprintln!(
            "fallow emulate-disk: messages of pid {}",
            std::process::id()
        );
    }
    Ok(())
}

/// Start this same command as a detached process (its
/// own process group, so the terminal's Ctrl-C does not reach it), relay
/// its ready line, and return.
fn run_detached() -> Result<()> {
    let me = crate::invocation::relaunch()?;
    let mut child = Command::new(&me.program)
        .args(&me.leading_args)
        .args(crate::invocation::args())
        .arg("--detached-child")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .process_group(0)
        .spawn()
        .context("starting the emulator process")?;
    let stdout = child.stdout.take().expect("piped stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .context("reading the emulator's ready line")?;
    if line.is_empty() {
        // it failed before mounting and has said why on stderr
        let status = child.wait().context("waiting for the emulator process")?;
        return Err(match status.code() {
            Some(2) => BadInput("the emulated disk was not mounted".into()).into(),
            _ => anyhow::anyhow!("the emulated disk was not mounted ({status})"),
        });
    }
    print!("{line}");
    std::io::stdout()
        .flush()
        .context("writing the ready line")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: EmulateDiskArgs,
    }

    fn args(extra: &[&str]) -> EmulateDiskArgs {
        let mut v = vec!["t", "img", "mnt"];
        v.extend_from_slice(extra);
        T::parse_from(v).a
    }

    #[test]
    fn hdd_flags_shape_the_disk_model() {
        let a = args(&[
            "--rpm",
            "5400",
            "--seek-ms",
            "1..20",
            "--bandwidth",
            "120MB/s",
        ]);
        let Some(ServiceModel::Disk(d)) = model(&a, 1 << 30).unwrap() else {
            panic!()
        };
        assert_eq!(
            (
                d.rpm,
                d.track_to_track_ns,
                d.full_stroke_ns,
                d.transfer_bytes_per_s,
                d.capacity_bytes
            ),
            (5400.0, 1e6, 20e6, 120e6, (1u64 << 30) as f64)
        );
        let a = args(&["--capacity", "1TB"]);
        let Some(ServiceModel::Disk(d)) = model(&a, 1 << 30).unwrap() else {
            panic!()
        };
        assert_eq!(d.capacity_bytes, 1e12);
        assert_eq!(model(&args(&["--model", "none"]), 1).unwrap(), None);
        assert_eq!(
            model(&args(&["--model", "const:5ms"]), 1).unwrap(),
            Some(ServiceModel::Constant { ns: 5_000_000 })
        );
    }

    #[test]
    fn bad_model_flags_are_named() {
        for (extra, needle) in [
            (&["--seek-ms", "5"][..], "--seek-ms `5`"),
            (&["--seek-ms", "9..2"][..], "shorter"),
            (&["--rpm", "0"][..], "--rpm"),
            (&["--bandwidth", "fast"][..], "--bandwidth"),
            (&["--model", "warp"][..], "--model"),
            (
                &["--model", "none", "--rpm", "5400"][..],
                "shape --model hdd",
            ),
        ] {
            let e = model(&args(extra), 1 << 20).unwrap_err().to_string();
            assert!(e.contains(needle), "{extra:?}: {e}");
        }
    }
}
