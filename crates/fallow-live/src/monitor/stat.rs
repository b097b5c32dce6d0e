//! The kernel's per-device I/O counters: parsing `/sys/block/<dev>/stat`
//! and `inflight`, where to find them ([`StatSource`]), and which disk a
//! file or device node lives on ([`resolve_device`]).
//!
//! `stat` holds one line of up to 17 counters (Documentation/block/stat.rst):
//! reads completed, reads merged, sectors read, ms reading, writes
//! completed, writes merged, sectors written, ms writing, requests in
//! flight, ms doing I/O, weighted ms, then discards (4 fields) and flushes
//! (2 fields) on kernels from 4.18 and 5.5. Sectors are always 512 bytes.
//! `inflight` holds two numbers: reads and writes in flight.

use crate::error::{Error, Result};
use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Bytes per sector in the stat counters, whatever the device's own sector size.
pub const STAT_SECTOR_BYTES: u64 = 512;

/// One reading of a device's cumulative counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskStat {
    /// Reads completed.
    pub read_ios: u64,
    /// Reads merged into others.
    pub read_merges: u64,
    /// 512-byte sectors read.
    pub read_sectors: u64,
    /// Time spent reading, ms.
    pub read_ticks_ms: u64,
    /// Writes completed.
    pub write_ios: u64,
    /// Writes merged into others.
    pub write_merges: u64,
    /// 512-byte sectors written.
    pub write_sectors: u64,
    /// Time spent writing, ms.
    pub write_ticks_ms: u64,
    /// Requests in flight (reads and writes).
    pub in_flight: u64,
    /// Time the device had I/O in flight, ms.
    pub io_ticks_ms: u64,
    /// Weighted time in queue, ms.
    pub time_in_queue_ms: u64,
    /// Discards completed (0 on kernels before 4.18).
    pub discard_ios: u64,
    /// Discards merged.
    pub discard_merges: u64,
    /// 512-byte sectors discarded.
    pub discard_sectors: u64,
    /// Time spent discarding, ms.
    pub discard_ticks_ms: u64,
    /// Flushes completed (0 on kernels before 5.5).
    pub flush_ios: u64,
    /// Time spent flushing, ms.
    pub flush_ticks_ms: u64,
}

impl DiskStat {
    /// Parse the text of a `stat` file: 11, 15 or 17 whitespace-separated
    /// unsigned integers. The error names the field that is wrong.
    pub fn parse(text: &str) -> std::result::Result<DiskStat, String> {
        const NAMES: [&str; 17] = [
            "read I/Os",
            "read merges",
            "read sectors",
            "read ticks",
            "write I/Os",
            "write merges",
            "write sectors",
            "write ticks",
            "in_flight",
            "io_ticks",
            "time_in_queue",
            "discard I/Os",
            "discard merges",
            "discard sectors",
            "discard ticks",
            "flush I/Os",
            "flush ticks",
        ];
        let mut v = [0u64; 17];
        let mut n = 0;
        for (i, word) in text.split_ascii_whitespace().enumerate() {
            if i >= 17 {
                return Err(format!(
                    "more than 17 fields (a stat line has 11, 15 or 17): `{}`",
                    text.trim()
                ));
            }
            v[i] = word.parse().map_err(|_| {
                format!(
                    "field {} ({}): `{word}` is not an unsigned integer",
                    i + 1,
                    NAMES[i]
                )
            })?;
            n = i + 1;
        }
        if !matches!(n, 11 | 15 | 17) {
            return Err(format!(
                "{n} fields; a block device stat line has 11, 15 or 17 (`{}`)",
                text.trim()
            ));
        }
        Ok(DiskStat {
            read_ios: v[0],
            read_merges: v[1],
            read_sectors: v[2],
            read_ticks_ms: v[3],
            write_ios: v[4],
            write_merges: v[5],
            write_sectors: v[6],
            write_ticks_ms: v[7],
            in_flight: v[8],
            io_ticks_ms: v[9],
            time_in_queue_ms: v[10],
            discard_ios: v[11],
            discard_merges: v[12],
            discard_sectors: v[13],
            discard_ticks_ms: v[14],
            flush_ios: v[15],
            flush_ticks_ms: v[16],
        })
    }

    /// Requests that change data: writes, discards and flushes completed.
    pub fn modifying_ios(&self) -> u64 {
        self.write_ios
            .wrapping_add(self.discard_ios)
            .wrapping_add(self.flush_ios)
    }
}

/// Requests in flight by direction (`inflight`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Inflight {
    /// Reads in flight.
    pub reads: u64,
    /// Writes in flight.
    pub writes: u64,
}

impl Inflight {
    /// Parse the text of an `inflight` file: two unsigned integers.
    pub fn parse(text: &str) -> std::result::Result<Inflight, String> {
        let mut it = text.split_ascii_whitespace();
        let mut field = |name: &str| -> std::result::Result<u64, String> {
            let w = it
                .next()
                .ok_or_else(|| format!("missing the {name} field (want `READS WRITES`)"))?;
            w.parse()
                .map_err(|_| format!("{name}: `{w}` is not an unsigned integer"))
        };
        let reads = field("reads")?;
        let writes = field("writes")?;
        if it.next().is_some() {
            return Err(format!("more than two fields: `{}`", text.trim()));
        }
        Ok(Inflight { reads, writes })
    }
}

/// One sample of a source: the counters and, where known, in-flight
/// requests by direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sample {
    /// The cumulative counters.
    pub stat: DiskStat,
    /// Reads and writes in flight; `None` when the source has no
    /// `inflight` file (then only `stat.in_flight`, both directions, is known).
    pub inflight: Option<Inflight>,
}

/// Where a monitor reads its counters: a device in sysfs, or any file in
/// the same format (the emulated disk of `fallow emulate-disk` publishes one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatSource {
    /// What to call it in messages (`vda`, or the file's path).
    pub label: String,
    /// The `stat`-format file.
    pub stat_path: PathBuf,
    /// The `inflight`-format file, if there is one.
    pub inflight_path: Option<PathBuf>,
    /// True for sysfs, whose files are regenerated on every read at offset
    /// 0; other files are opened afresh for each sample so that one
    /// replaced by a rename, or served by FUSE, is read as it is now.
    pub sysfs: bool,
}

impl StatSource {
    /// A block device by its kernel name (`sda`, `nvme0n1`, `loop3`, or a
    /// partition such as `sda1`), from `/sys/class/block/NAME/`.
    pub fn sysfs(name: &str) -> Result<StatSource> {
        Self::sysfs_in(Path::new("/sys/class/block"), name)
    }

    fn sysfs_in(root: &Path, name: &str) -> Result<StatSource> {
        let name = name.trim().trim_start_matches("/dev/");
        if name.is_empty() || name.contains('/') {
            return Err(Error::invalid(
                "monitor",
                format!("`{name}` is not a block device name (like sda or loop0)"),
            ));
        }
        let dir = root.join(name);
        let stat_path = dir.join("stat");
        if !stat_path.is_file() {
            return Err(Error::invalid(
                "monitor",
                format!(
                    "no block device `{name}`: {} does not exist (lsblk lists the devices)",
                    stat_path.display()
                ),
            ));
        }
        let inflight = dir.join("inflight");
        Ok(StatSource {
            label: name.to_string(),
            stat_path,
            inflight_path: inflight.is_file().then_some(inflight),
            sysfs: true,
        })
    }

    /// Any file in the `stat` format; a file named `inflight` beside it,
    /// if present, gives reads and writes in flight.
    pub fn file(path: impl Into<PathBuf>) -> Result<StatSource> {
        let stat_path: PathBuf = path.into();
        let text = std::fs::read_to_string(&stat_path)
            .map_err(|e| Error::io(&stat_path, "cannot read the stat file", e))?;
        DiskStat::parse(&text).map_err(|m| Error::Parse {
            path: stat_path.clone(),
            message: m,
        })?;
        let inflight = stat_path.with_file_name("inflight");
        let sysfs = stat_path.starts_with("/sys/");
        Ok(StatSource {
            label: stat_path.display().to_string(),
            inflight_path: inflight.is_file().then_some(inflight),
            stat_path,
            sysfs,
        })
    }

    /// `sda` (a device name) or a path (anything with a `/`).
    pub fn parse(spec: &str) -> Result<StatSource> {
        if spec.contains('/') && !spec.starts_with("/dev/") {
            Self::file(spec)
        } else {
            Self::sysfs(spec)
        }
    }

    /// Open the files for sampling.
    pub fn open(&self) -> Result<StatReader> {
        let open = |p: &Path| File::open(p).map_err(|e| Error::io(p, "cannot open", e));
        let (stat, inflight) = if self.sysfs {
            (
                Some(open(&self.stat_path)?),
                self.inflight_path.as_deref().map(open).transpose()?,
            )
        } else {
            (None, None)
        };
        Ok(StatReader {
            source: self.clone(),
            stat,
            inflight,
            buf: vec![0; 4096],
        })
    }
}

/// Reads samples from a [`StatSource`] with as few system calls as it can.
#[derive(Debug)]
pub struct StatReader {
    source: StatSource,
    stat: Option<File>,
    inflight: Option<File>,
    buf: Vec<u8>,
}

impl StatReader {
    /// The source being read.
    pub fn source(&self) -> &StatSource {
        &self.source
    }

    /// Read one sample.
    pub fn read(&mut self) -> Result<Sample> {
        let text = read_text(self.stat.as_ref(), &self.source.stat_path, &mut self.buf)?;
        let stat = DiskStat::parse(&text).map_err(|m| Error::Parse {
            path: self.source.stat_path.clone(),
            message: m,
        })?;
        let inflight = match &self.source.inflight_path {
            // nothing in flight at all: no need to ask by direction (this
            // halves the system calls of an idle device's samples)
            Some(_) if stat.in_flight == 0 => Some(Inflight::default()),
            Some(p) => {
                let text = read_text(self.inflight.as_ref(), p, &mut self.buf)?;
                Some(Inflight::parse(&text).map_err(|m| Error::Parse {
                    path: p.clone(),
                    message: m,
                })?)
            }
            None => None,
        };
        Ok(Sample { stat, inflight })
    }
}

fn read_text(open: Option<&File>, path: &Path, buf: &mut [u8]) -> Result<String> {
    let n = match open {
        Some(f) => f.read_at(buf, 0),
        None => File::open(path).and_then(|f| f.read_at(buf, 0)),
    }
    .map_err(|e| Error::io(path, "cannot read", e))?;
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// The disk a file or device node lives on, as sysfs knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedDevice {
    /// Kernel name of the whole disk (`vda`, `sda`, `loop3`).
    pub disk: String,
    /// `major:minor` of the device the path is on (or is).
    pub dev: (u32, u32),
    /// The partition's name when the path is on (or is) a partition.
    pub partition: Option<String>,
    /// Where the partition starts on the disk, bytes (0 for a whole disk).
    pub start_bytes: u64,
    /// The disk's logical block size, bytes.
    pub logical_block_bytes: u64,
    /// Largest request the disk's queue takes without splitting, bytes.
    pub max_request_bytes: Option<u64>,
}

impl ResolvedDevice {
    /// The whole disk's counters.
    pub fn stat_source(&self) -> Result<StatSource> {
        StatSource::sysfs(&self.disk)
    }
}

/// Which disk `path` is: the device itself for a block device node, the
/// device holding it for a file (`st_dev`). A partition resolves to its
/// parent disk (foreground I/O to any partition competes for the same
/// arm). `Ok(None)` when sysfs has no block device for it (tmpfs,
/// overlayfs, btrfs subvolumes, network file systems).
pub fn resolve_device(path: &Path) -> Result<Option<ResolvedDevice>> {
    resolve_device_in(Path::new("/sys"), path)
}

fn resolve_device_in(sys: &Path, path: &Path) -> Result<Option<ResolvedDevice>> {
    let md = std::fs::metadata(path).map_err(|e| Error::io(path, "cannot stat", e))?;
    let raw = if md.file_type().is_block_device() {
        md.rdev()
    } else {
        md.dev()
    };
    let dev = (rustix::fs::major(raw), rustix::fs::minor(raw));
    let link = sys.join(format!("dev/block/{}:{}", dev.0, dev.1));
    let dir = match std::fs::canonicalize(&link) {
        Ok(d) => d,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(&link, "cannot resolve", e)),
    };
    let name = |d: &Path| d.file_name().map(|n| n.to_string_lossy().into_owned());
    let read_u64 = |p: PathBuf| -> Option<u64> {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|s| s.trim().parse().ok())
    };
    let (disk_dir, partition, start_bytes) = if dir.join("partition").is_file() {
        let start = read_u64(dir.join("start")).unwrap_or(0) * STAT_SECTOR_BYTES;
        let parent = dir.parent().map(Path::to_path_buf).unwrap_or(dir.clone());
        (parent, name(&dir), start)
    } else {
        (dir.clone(), None, 0)
    };
    let Some(disk) = name(&disk_dir) else {
        return Ok(None);
    };
    Ok(Some(ResolvedDevice {
        disk,
        dev,
        partition,
        start_bytes,
        logical_block_bytes: read_u64(disk_dir.join("queue/logical_block_size")).unwrap_or(512),
        max_request_bytes: read_u64(disk_dir.join("queue/max_sectors_kb")).map(|k| k * 1024),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_17_field_line() {
        // a line as the kernel prints it (padded columns)
        let s = DiskStat::parse(
            "   12345      67   890123     4567    23456      78   901234     5678        3     6789    10234      11       0     2048        5      99       12\n",
        )
        .unwrap();
        assert_eq!(s.read_ios, 12345);
        assert_eq!(s.read_sectors, 890123);
        assert_eq!(s.write_ios, 23456);
        assert_eq!(s.write_sectors, 901234);
        assert_eq!(s.in_flight, 3);
        assert_eq!(s.io_ticks_ms, 6789);
        assert_eq!(s.discard_sectors, 2048);
        assert_eq!(s.flush_ios, 99);
        assert_eq!(s.flush_ticks_ms, 12);
        assert_eq!(s.modifying_ios(), 23456 + 11 + 99);
    }

    #[test]
    fn parses_older_kernels_lines() {
        let eleven = DiskStat::parse("1 2 3 4 5 6 7 8 9 10 11").unwrap();
        assert_eq!(eleven.time_in_queue_ms, 11);
        assert_eq!(eleven.discard_ios, 0);
        let fifteen = DiskStat::parse("1 2 3 4 5 6 7 8 9 10 11 12 13 14 15").unwrap();
        assert_eq!(fifteen.discard_ticks_ms, 15);
        assert_eq!(fifteen.flush_ios, 0);
    }

    #[test]
    fn rejects_bad_lines_naming_the_field() {
        let e = DiskStat::parse("1 2 x 4 5 6 7 8 9 10 11").unwrap_err();
        assert!(e.contains("field 3 (read sectors)"), "{e}");
        let e = DiskStat::parse("1 2 3").unwrap_err();
        assert!(e.contains("3 fields"), "{e}");
        let e = DiskStat::parse("").unwrap_err();
        assert!(e.contains("0 fields"), "{e}");
        let e = DiskStat::parse(&"1 ".repeat(18)).unwrap_err();
        assert!(e.contains("more than 17"), "{e}");
        assert!(DiskStat::parse("1 2 3 4 5 6 7 8 -9 10 11").is_err());
    }

    #[test]
    fn parses_inflight() {
        assert_eq!(
            Inflight::parse("       2        1\n").unwrap(),
            Inflight {
                reads: 2,
                writes: 1
            }
        );
        assert!(Inflight::parse("2").unwrap_err().contains("writes"));
        assert!(Inflight::parse("2 x").unwrap_err().contains("writes"));
        assert!(Inflight::parse("1 2 3").is_err());
    }

    #[test]
    fn file_source_reads_the_current_content_and_a_sibling_inflight() {
        let dir = tempfile::tempdir().unwrap();
        let stat = dir.path().join("stat");
        std::fs::write(&stat, "1 0 8 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n").unwrap();
        let src = StatSource::file(&stat).unwrap();
        assert_eq!(src.inflight_path, None);
        let mut r = src.open().unwrap();
        assert_eq!(r.read().unwrap().stat.read_sectors, 8);
        // replaced by a rename, as a publisher that writes atomically does
        let tmp = dir.path().join("stat.tmp");
        std::fs::write(&tmp, "2 0 16 0 1 0 8 0 1 0 0 0 0 0 0 0 0\n").unwrap();
        std::fs::rename(&tmp, &stat).unwrap();
        let s = r.read().unwrap();
        assert_eq!((s.stat.read_sectors, s.stat.write_ios), (16, 1));
        std::fs::write(dir.path().join("inflight"), "0 1\n").unwrap();
        let mut r = StatSource::file(&stat).unwrap().open().unwrap();
        assert_eq!(
            r.read().unwrap().inflight,
            Some(Inflight {
                reads: 0,
                writes: 1
            })
        );
    }

    #[test]
    fn bad_sources_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let e = StatSource::file(dir.path().join("nope")).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
        let bad = dir.path().join("stat");
        std::fs::write(&bad, "hello\n").unwrap();
        let e = StatSource::file(&bad).unwrap_err().to_string();
        assert!(e.contains("field 1"), "{e}");
        let e = StatSource::sysfs_in(dir.path(), "sdzz")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no block device `sdzz`"), "{e}");
    }

    #[test]
    fn resolves_a_partition_to_its_disk_in_a_fake_sysfs() {
        // /sys/dev/block/M:m -> ../../block/sdx/sdx2, which has `partition`
        let sys = tempfile::tempdir().unwrap();
        let root = sys.path();
        let target = tempfile::NamedTempFile::new().unwrap();
        let md = std::fs::metadata(target.path()).unwrap();
        let (ma, mi) = (rustix::fs::major(md.dev()), rustix::fs::minor(md.dev()));
        let part = root.join("block/sdx/sdx2");
        std::fs::create_dir_all(&part).unwrap();
        std::fs::create_dir_all(root.join("block/sdx/queue")).unwrap();
        std::fs::write(part.join("partition"), "2\n").unwrap();
        std::fs::write(part.join("start"), "2048\n").unwrap();
        std::fs::write(root.join("block/sdx/queue/logical_block_size"), "4096\n").unwrap();
        std::fs::write(root.join("block/sdx/queue/max_sectors_kb"), "1280\n").unwrap();
        std::fs::create_dir_all(root.join("dev/block")).unwrap();
        std::os::unix::fs::symlink(&part, root.join(format!("dev/block/{ma}:{mi}"))).unwrap();
        let r = resolve_device_in(root, target.path()).unwrap().unwrap();
        assert_eq!(r.disk, "sdx");
        assert_eq!(r.partition.as_deref(), Some("sdx2"));
        assert_eq!(r.start_bytes, 2048 * 512);
        assert_eq!(r.logical_block_bytes, 4096);
        assert_eq!(r.max_request_bytes, Some(1280 * 1024));
        // a device sysfs does not know: None, not an error
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(
            resolve_device_in(empty.path(), target.path()).unwrap(),
            None
        );
    }

    #[test]
    fn resolves_a_real_file_when_sysfs_knows_its_disk() {
        // /tmp is on a block device on most machines; on tmpfs there is none
        let f = tempfile::NamedTempFile::new().unwrap();
        match resolve_device(f.path()).unwrap() {
            Some(d) => {
                let src = d.stat_source().unwrap();
                let s = src.open().unwrap().read().unwrap();
                assert!(s.stat.read_ios + s.stat.write_ios > 0, "{s:?}");
            }
            None => eprintln!("skip: the temp dir is not on a block device sysfs knows"),
        }
    }
}
