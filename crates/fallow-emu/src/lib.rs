//! An emulated slow disk for tests and benchmarks on machines without a
//! spinning disk.
//!
//! Live experiments need interference: a background request that a
//! foreground request has to wait for. On an SSD-backed virtual disk there
//! is none worth managing (docs/emulated-disk.md says why), so this crate
//! serves an image file through FUSE as a single file, `MOUNT/disk`, whose
//! every read and write goes through one non-preemptive server with
//! HDD-like service times, drawn from `fallow-core`'s
//! [`ServiceModel`](fallow_core::service::ServiceModel) (seek ∝ √distance +
//! rotation + transfer): the same model the simulator uses, so live and
//! simulated runs can be compared. A loop device over `MOUNT/disk`
//! (`losetup -f --show MOUNT/disk`) turns it into a block device.
//!
//! The tour:
//! - [`EmuConfig`]: the image, the model, injected errors, the stat file.
//! - [`Emulator::mount`]: mounts it (FUSE, `direct_io`, no libfuse needed
//!   as root) and serves until [`Emulator::unmount`] or drop.
//! - [`Server`]: the single FIFO server; [`ServiceRecord`]s tell the model's
//!   service time and the achieved one for each request.
//! - [`DiskStats`]: counters in the `/sys/block/<dev>/stat` format, also
//!   published to a file a monitor can be pointed at.
//! - [`FailRanges`]: sectors whose reads fail with `EIO`.
//! - Power states ([`PowerState`], [`PowerCounters`]): active, idle,
//!   spinning down, standby, spinning up, with the spin-up delay and the
//!   energy of `fallow-core`'s power model; `MOUNTPOINT/power` takes
//!   `standby` and reports the counters, `MOUNTPOINT/stat` the I/O counters.
//!
//! The emulator writes to the image: use it on test images made for it.
//!
//! ```no_run
//! use fallow_emu::{EmuConfig, Emulator, FailRanges};
//! let mut cfg = EmuConfig::new("disk.img");
//! cfg.fail = FailRanges::parse_sectors("1000-1007")?;
//! let mut emu = Emulator::mount(cfg, "/mnt/emu")?;
//! println!("serving {}", emu.disk_path().display());
//! // ... read /mnt/emu/disk, or losetup a loop device over it ...
//! println!("{}", emu.stats().to_stat_line());
//! emu.unmount()?;
//! # Ok::<(), fallow_emu::Error>(())
//! ```

#![deny(missing_docs)]

mod error;
mod fail;
mod fs;
pub mod issuers;
mod power;
mod server;
mod stat;

pub use error::{Error, Result};
pub use fail::{FailRanges, SECTOR_BYTES};
pub use fs::{DISK_FILE_NAME, ISSUERS_FILE_NAME, POWER_FILE_NAME, STAT_FILE_NAME};
pub use power::{PowerCounters, PowerState};
pub use server::{Op, Server, ServiceRecord};
pub use stat::{DiskStats, STAT_FIELDS};

use fallow_core::energy::PowerModel;
use fallow_core::service::{DiskModel, Draws, ServiceModel};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Most FUSE worker threads an emulator runs.
pub const MAX_THREADS: usize = 1024;

/// What to emulate.
#[derive(Debug, Clone)]
pub struct EmuConfig {
    /// The image file whose bytes the disk holds.
    pub image: PathBuf,
    /// Service-time model; `None` adds no delay (counters and injected
    /// errors only). Default: [`EmuConfig::hdd_model`] over the image.
    pub model: Option<ServiceModel>,
    /// Reads overlapping these bytes fail with `EIO`.
    pub fail: FailRanges,
    /// Where to publish the counters in `/sys/block/<dev>/stat` format.
    pub stat_file: Option<PathBuf>,
    /// Seed of the model's random stream (rotational positions).
    pub seed: u64,
    /// How the model's random part is drawn: in the order requests come
    /// (the simulator's), or per request, so two runs issuing the same
    /// requests can be compared request by request.
    pub draws: Draws,
    /// FUSE worker threads (1 to [`MAX_THREADS`]): how many requests can be waiting in the
    /// server's queue at once (more wait in the kernel, uncounted).
    pub threads: usize,
    /// Serve the image read-only (writes fail with `EROFS`).
    pub read_only: bool,
    /// Power states, spin-up and spin-down times and energy (default: the
    /// WD2500JD of SARD, Table III). The disk starts spinning and
    /// spins down only on a standby command (`MOUNTPOINT/power`).
    pub power: PowerModel,
}

impl EmuConfig {
    /// Defaults: a 7200 rpm disk model spread over the image, no injected
    /// errors, no stat file, 8 threads, writable.
    pub fn new(image: impl Into<PathBuf>) -> Self {
        EmuConfig {
            image: image.into(),
            model: Some(ServiceModel::Disk(DiskModel::default())),
            fail: FailRanges::none(),
            stat_file: None,
            seed: fallow_core::sim::DEFAULT_SEED,
            draws: Draws::InOrder,
            threads: 8,
            read_only: false,
            power: PowerModel::default(),
        }
    }

    /// `fallow-core`'s default 7200 rpm disk (0.6 ms track-to-track, 16 ms
    /// full stroke, 150 MB/s) with its capacity set to `capacity_bytes`, so
    /// a seek across the whole image is a full stroke: a small test image
    /// stands for a whole disk rather than a sliver of one.
    pub fn hdd_model(capacity_bytes: u64) -> DiskModel {
        DiskModel {
            capacity_bytes: capacity_bytes.max(1) as f64,
            ..DiskModel::default()
        }
    }
}

/// A mounted emulated disk. Dropping it unmounts (errors ignored); call
/// [`Emulator::unmount`] to see them.
pub struct Emulator {
    session: Option<fuser::BackgroundSession>,
    mountpoint: PathBuf,
    server: Arc<Server>,
    size_bytes: u64,
    _publisher: Option<stat::Publisher>,
}

impl std::fmt::Debug for Emulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emulator")
            .field("mountpoint", &self.mountpoint)
            .field("size_bytes", &self.size_bytes)
            .finish_non_exhaustive()
    }
}

impl Emulator {
    /// Mount the emulated disk on `mountpoint` (an existing directory) and
    /// start serving on background threads.
    pub fn mount(config: EmuConfig, mountpoint: impl AsRef<Path>) -> Result<Emulator> {
        let mountpoint = mountpoint.as_ref();
        let img_err = |source| Error::Image {
            path: config.image.clone(),
            source,
        };
        let image = open_image(&config.image, config.read_only).map_err(img_err)?;
        let meta = image.metadata().map_err(img_err)?;
        if !meta.is_file() {
            return Err(Error::BadImage {
                path: config.image.clone(),
                message: "not a regular file (the emulator serves an image file; \
                          for a block device, use it directly)"
                    .into(),
            });
        }
        if meta.len() == 0 {
            return Err(Error::BadImage {
                path: config.image.clone(),
                message: "is empty (make one with `truncate -s 1G` or `dd`)".into(),
            });
        }
        match std::fs::metadata(mountpoint) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(Error::BadMountpoint {
                    path: mountpoint.to_path_buf(),
                    message: "not a directory".into(),
                })
            }
            Err(e) => {
                let hint = if e.raw_os_error() == Some(107) {
                    // ENOTCONN: a FUSE server died without unmounting
                    " (a dead mount left by a killed emulator: umount -l it)"
                } else {
                    ""
                };
                return Err(Error::BadMountpoint {
                    path: mountpoint.to_path_buf(),
                    message: format!("{e}{hint}"),
                });
            }
        }
        if let Some(reason) = fuse_unavailable() {
            return Err(Error::NoFuse(reason));
        }
        // each is an OS thread: a count past the bound would fail to spawn
        if !(1..=MAX_THREADS).contains(&config.threads) {
            return Err(Error::InvalidParameter {
                what: "threads",
                message: format!("{}: must be 1 to {MAX_THREADS}", config.threads),
            });
        }
        config
            .power
            .validate()
            .map_err(|e| Error::InvalidParameter {
                what: "power model",
                message: e.to_string(),
            })?;
        let server = Arc::new(Server::with_power(
            config.model.as_ref(),
            config.seed,
            config.draws,
            config.fail.clone(),
            config.power.clone(),
        ));
        let publisher = match &config.stat_file {
            Some(p) => Some(stat::Publisher::start(
                Arc::clone(&server.counters),
                p.clone(),
            )?),
            None => None,
        };
        let disk = fs::DiskFs {
            image,
            size_bytes: meta.len(),
            writable: !config.read_only,
            server: Arc::clone(&server),
            uid: meta.uid(),
            gid: meta.gid(),
            mtime: meta.modified().unwrap_or(std::time::UNIX_EPOCH),
            issuers: issuers::Issuers::default(),
            snapshots: fs::Snapshots::default(),
        };
        let mut fuse_cfg = fuser::Config::default();
        fuse_cfg.mount_options = vec![
            fuser::MountOption::FSName(format!("fallow-emu:{}", config.image.display())),
            fuser::MountOption::Subtype("fallow-emu".into()),
            if config.read_only {
                fuser::MountOption::RO
            } else {
                fuser::MountOption::RW
            },
            fuser::MountOption::NoDev,
            fuser::MountOption::NoSuid,
        ];
        fuse_cfg.n_threads = Some(config.threads);
        let mount_err = |source| Error::Mount {
            path: mountpoint.to_path_buf(),
            source,
        };
        let session = fuser::Session::new(disk, mountpoint, &fuse_cfg)
            .map_err(mount_err)?
            .spawn()
            .map_err(mount_err)?;
        Ok(Emulator {
            session: Some(session),
            mountpoint: mountpoint
                .canonicalize()
                .unwrap_or_else(|_| mountpoint.to_path_buf()),
            server,
            size_bytes: meta.len(),
            _publisher: publisher,
        })
    }

    /// The emulated disk: `MOUNTPOINT/disk`.
    pub fn disk_path(&self) -> PathBuf {
        self.mountpoint.join(DISK_FILE_NAME)
    }

    /// The power control and counters file: `MOUNTPOINT/power`. Reading
    /// it gives [`PowerCounters::to_text`] and never wakes the disk;
    /// writing `standby` spins the disk down.
    pub fn power_path(&self) -> PathBuf {
        self.mountpoint.join(POWER_FILE_NAME)
    }

    /// Spin the disk down (after the requests queued before the command);
    /// false if it was already down or going down.
    pub fn standby(&self) -> bool {
        self.server.standby()
    }

    /// The power state and its counters now (never wakes the disk).
    pub fn power(&self) -> PowerCounters {
        self.server.power()
    }

    /// The mount point.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// The disk's size (the image's), bytes.
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    /// The counters now.
    pub fn stats(&self) -> DiskStats {
        self.server.stats()
    }

    /// Model and achieved service time of each request served so far.
    pub fn service_log(&self) -> Vec<ServiceRecord> {
        self.server.log()
    }

    /// Whether the file system is still mounted and served (someone may
    /// have run `umount` on it).
    pub fn is_serving(&self) -> bool {
        self.session
            .as_ref()
            .is_some_and(|s| !s.guard.is_finished())
    }

    /// Loop devices whose backing file is the emulated disk, e.g.
    /// `["/dev/loop3"]`: they keep the mount busy.
    pub fn loop_devices(&self) -> Vec<String> {
        loop_devices_over(&self.disk_path())
    }

    /// Unmount and stop serving. Refuses with [`Error::Busy`] while a loop
    /// device uses the disk, and keeps serving: unmounting would fail with
    /// EBUSY, or worse, detach lazily and leave the loop device failing
    /// every request. Detach the loop devices and call again.
    pub fn unmount(&mut self) -> Result<()> {
        let holders = self.loop_devices();
        if !holders.is_empty() {
            return Err(Error::Busy {
                path: self.disk_path(),
                holders: holders.join(", "),
            });
        }
        self.unmount_now()
    }

    fn unmount_now(&mut self) -> Result<()> {
        if self.session.is_none() {
            return Ok(());
        }
        // Unmount here first rather than through the session: when the
        // mount is busy (a file still open on it), the session stays ours
        // and keeps serving, and the caller can try again.
        rustix::mount::unmount(&self.mountpoint, rustix::mount::UnmountFlags::empty()).map_err(
            |e| Error::Unmount {
                path: self.mountpoint.clone(),
                source: e.into(),
            },
        )?;
        // The kernel ends the connection; the session's loop sees that and
        // returns.
        match self.session.take() {
            Some(s) => s.join().map_err(|source| Error::Unmount {
                path: self.mountpoint.clone(),
                source,
            }),
            None => Ok(()),
        }
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        if self.unmount_now().is_err() && self.session.is_some() {
            // Still busy and we are going away: detach lazily, so the mount
            // point is not left behind as a dead FUSE mount ("transport
            // endpoint is not connected"); open files then fail with ENOTCONN.
            let _ = rustix::mount::unmount(&self.mountpoint, rustix::mount::UnmountFlags::DETACH);
            drop(self.session.take());
        }
    }
}

fn open_image(path: &Path, read_only: bool) -> std::io::Result<File> {
    OpenOptions::new().read(true).write(!read_only).open(path)
}

/// Why FUSE cannot be used here, if it cannot.
pub fn fuse_unavailable() -> Option<String> {
    match OpenOptions::new().read(true).write(true).open("/dev/fuse") {
        Ok(_) => None,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Some("/dev/fuse does not exist (load the fuse module: modprobe fuse)".into())
        }
        Err(e) => Some(format!("/dev/fuse: {e}")),
    }
}

/// Loop devices whose backing file is `file`.
pub fn loop_devices_over(file: &Path) -> Vec<String> {
    let target = file.canonicalize().unwrap_or_else(|_| file.to_path_buf());
    let Ok(entries) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.starts_with("loop") {
                return None;
            }
            let backing = std::fs::read_to_string(e.path().join("loop/backing_file")).ok()?;
            (Path::new(backing.trim_end()) == target).then(|| format!("/dev/{name}"))
        })
        .collect();
    out.sort();
    out
}
