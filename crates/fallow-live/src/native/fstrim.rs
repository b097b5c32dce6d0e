//! `fstrim:MOUNT`: FITRIM by ranges, one range per BG request.
//!
//! `fstrim` issues one `FITRIM` ioctl over the whole file system: minutes
//! of discards on a large disk, which nothing can pause. Here each BG
//! request is one `FITRIM` over `[offset, offset + size)` (the semantics of
//! `fstrim --offset --length`: file-system byte addresses, `minlen` the
//! least free extent worth discarding), so an FG arrival waits for one
//! range at most. The file system's size is `statvfs`'s `f_blocks ×
//! f_frsize`, which for ext4 leaves out its fixed overhead; the last range
//! therefore runs to the end of the address space (`len = u64::MAX −
//! offset`, as `fstrim` does by default), so no range past that estimate is
//! skipped.
//!
//! The kernel keeps no position, so fallow does: after every range the
//! next offset, the bytes the file system reports trimmed and the ranges
//! are written atomically to a checksummed checkpoint ([`OffsetCheckpoint`],
//! checked against the file system's size before it is trusted), and
//! `--resume` continues at that offset. A range
//! repeated after a crash costs a little time and nothing else (trimming
//! free space twice is harmless).
//!
//! **ext4: ranges on block-group boundaries**. ext4 trims each
//! free extent that starts in the range to its end within the block group
//! (fs/ext4/mballoc.c `ext4_try_to_trim_range`: `next =
//! mb_find_next_bit(bitmap, last + 1, start)`, `last` the group's last
//! cluster), and marks a group trimmed only when the range covered all of
//! it (`ext4_trim_all_free`: `set_trimmed` when `start == 0 && max ==
//! last`). A range ending mid-group therefore discarded the tail of a free
//! extent that the next range discarded again, and both counted it (16 MiB
//! ranges reported 1.8×, 4 MiB ranges 4.8× what `fstrim` does). So on ext4
//! every range ends on a block-group boundary, read from the superblock
//! ([`Ext4Groups`]): no free extent is discarded twice and the reported
//! bytes are the unique bytes discarded. Other file systems (xfs trims
//! exactly the range) keep ranges of the request size.
//!
//! The discards (and the checkpoint's write, when it is on the same disk)
//! are the job's own I/O: the [`Gate`] is open from just before the ioctl
//! until the checkpoint is on disk.

use super::checkpoint::{check_paths, Bad, Detail, OffsetCheckpoint};
use super::control::Control;
use super::gate::Gate;
use super::{Kind, NativeConfig, NativeExecutor, NativeReport, NativeTarget};
use crate::clock::monotonic_ns;
use crate::driver::{BgExecutor, Step};
use crate::error::{Error, Result};
use crate::monitor::resolve_device;
use crate::run::guardian::ReleaseAction;
use crate::scrub::checkpoint::Lock;
use crate::scrub::{TokenBucket, Windows};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

/// The registry entry.
pub const KIND: Kind = Kind {
    prefix: "fstrim",
    summary: "FITRIM of a mounted file system's free space, one range of the request size per BG request, resumable by offset",
    open,
};

/// Smallest range, bytes: file systems refuse a FITRIM shorter than a block.
pub const MIN_RANGE_BYTES: u64 = 1 << 20;

fn open(
    t: &NativeTarget,
    cfg: &NativeConfig,
    _ctl: Arc<dyn Control>,
) -> Result<Box<dyn NativeExecutor>> {
    Ok(Box::new(Fstrim::open(t, cfg)?))
}

/// The fstrim fields of its checkpoint ([`OffsetCheckpoint`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrimDetail {
    /// `minlen`, bytes.
    pub minlen_bytes: u64,
    /// Bytes the file system reported trimmed in this pass. The kernel's
    /// count, not bounded here: btrfs also counts unallocated space on
    /// every device, which can exceed the size `statvfs` gives.
    pub trimmed_bytes: u64,
}

impl Detail for TrimDetail {
    const KIND: &'static Kind = &KIND;

    fn job(&self) -> String {
        "trim".into()
    }

    fn min_step_bytes(&self) -> u64 {
        MIN_RANGE_BYTES
    }

    fn validate(&self, _: &OffsetCheckpoint<Self>) -> std::result::Result<(), Bad> {
        Ok(())
    }
}

/// ext4's block groups in FITRIM's byte addresses: group `g` is
/// `[first_byte + g × group_bytes, first_byte + (g + 1) × group_bytes)`
/// (ext4_get_group_no_and_offset: block − `s_first_data_block`, divided
/// by the blocks per group).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ext4Groups {
    /// `s_first_data_block` × block size (1 KiB blocks start at block 1).
    pub first_byte: u64,
    /// `s_blocks_per_group` × block size.
    pub group_bytes: u64,
}

/// `EXT4_SUPER_MAGIC` (also ext2/ext3, which the ext4 driver serves).
const EXT4_MAGIC: u16 = 0xEF53;

impl Ext4Groups {
    /// From the 1024-byte superblock (at byte 1024 of the device;
    /// fs/ext4/ext4.h `struct ext4_super_block`): `s_first_data_block` at
    /// 20, `s_log_block_size` at 24 (block = 1024 << it), `s_blocks_per_group`
    /// at 32, `s_magic` at 56, little-endian.
    pub fn parse(sb: &[u8]) -> std::result::Result<Ext4Groups, String> {
        let u32_at = |o: usize| -> std::result::Result<u32, String> {
            sb.get(o..o + 4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .ok_or_else(|| format!("superblock: {} bytes, too short", sb.len()))
        };
        let magic = sb
            .get(56..58)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .ok_or_else(|| format!("superblock: {} bytes, too short", sb.len()))?;
        if magic != EXT4_MAGIC {
            return Err(format!(
                "superblock: s_magic {magic:#06x}, not ext4's 0xef53"
            ));
        }
        let log = u32_at(24)?;
        // the kernel mounts 1 KiB to 64 KiB blocks
        if log > 6 {
            return Err(format!(
                "superblock: s_log_block_size {log} (blocks of 1 KiB to 64 KiB are 0 to 6)"
            ));
        }
        let block = 1024u64 << log;
        let bpg = u64::from(u32_at(32)?);
        // at most 8 × the block size: one bitmap block per group
        if bpg == 0 || bpg > 8 * block {
            return Err(format!(
                "superblock: s_blocks_per_group {bpg} with {block}-byte blocks"
            ));
        }
        let first = u64::from(u32_at(20)?);
        if first > 1 {
            return Err(format!("superblock: s_first_data_block {first} (0 or 1)"));
        }
        Ok(Ext4Groups {
            first_byte: first * block,
            group_bytes: bpg * block,
        })
    }

    /// The file system mounted at `dir`'s groups, if it is ext4: its
    /// superblock read from its device node (`/dev/block/MAJ:MIN`, else
    /// `/dev/` + the `DEVNAME` of `/sys/dev/block/MAJ:MIN/uevent`). `None`
    /// for another file system, or when no device node can be opened (a
    /// container without it): ranges are then of the request size, and
    /// the report has no `ext4_group_bytes`.
    pub fn of_mount(dir: &File) -> Result<Option<Ext4Groups>> {
        use std::os::unix::fs::FileExt;
        let fs = rustix::fs::fstatfs(dir)
            .map_err(|e| Error::io("mount point", "statfs failed", e.into()))?;
        if fs.f_type as u64 != u64::from(EXT4_MAGIC) {
            return Ok(None);
        }
        let st = rustix::fs::fstat(dir)
            .map_err(|e| Error::io("mount point", "stat failed", e.into()))?;
        let id = format!(
            "{}:{}",
            rustix::fs::major(st.st_dev),
            rustix::fs::minor(st.st_dev)
        );
        let by_name = std::fs::read_to_string(format!("/sys/dev/block/{id}/uevent"))
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("DEVNAME="))
                    .map(|n| PathBuf::from("/dev").join(n.trim()))
            });
        let candidates = std::iter::once(PathBuf::from(format!("/dev/block/{id}"))).chain(by_name);
        let Some((node, dev)) = candidates
            .filter_map(|p| File::open(&p).ok().map(|f| (p, f)))
            .next()
        else {
            return Ok(None);
        };
        let mut sb = vec![0u8; 1024];
        dev.read_exact_at(&mut sb, 1024)
            .map_err(|e| Error::io(&node, "cannot read the ext4 superblock of", e))?;
        Ext4Groups::parse(&sb).map(Some).map_err(|m| Error::Parse {
            path: node,
            message: m,
        })
    }

    /// The end of a range from `start` of at least `size` bytes: the
    /// first group boundary at or past `start + size`.
    pub fn range_end(&self, start: u64, size: u64) -> u64 {
        let want = start.saturating_add(size);
        if want <= self.first_byte {
            return self.first_byte;
        }
        let k = (want - self.first_byte).div_ceil(self.group_bytes);
        self.first_byte
            .saturating_add(k.saturating_mul(self.group_bytes))
    }
}

/// The end of the next range from `start` for a request of `size_bytes`:
/// at least [`MIN_RANGE_BYTES`], on ext4 the next group boundary (`groups`),
/// and never more than `cap_bytes` past `start` (what `--max-bytes` leaves
/// this run): capped, a range ends on the last group boundary within the
/// cap on ext4 (a range ending mid-group would have ext4 discard the free
/// extent across its end twice), else on the last whole MiB (FITRIM refuses
/// ranges shorter than a block). `None` when the cap leaves no such range:
/// the run is done, short of the cap by less than a group (a MiB).
pub fn next_range_end(
    start: u64,
    size_bytes: u64,
    groups: Option<&Ext4Groups>,
    cap_bytes: Option<u64>,
) -> Option<u64> {
    let size = size_bytes.max(MIN_RANGE_BYTES);
    let end = match groups {
        Some(g) => g.range_end(start, size),
        None => start.saturating_add(size),
    };
    let Some(cap) = cap_bytes else {
        return Some(end);
    };
    if end - start <= cap {
        return Some(end);
    }
    let end = match groups {
        Some(g) => {
            let limit = start.saturating_add(cap);
            let k = limit.checked_sub(g.first_byte)? / g.group_bytes;
            g.first_byte.saturating_add(k.saturating_mul(g.group_bytes))
        }
        None => start.saturating_add(cap / MIN_RANGE_BYTES * MIN_RANGE_BYTES),
    };
    (end > start).then_some(end)
}

/// fallow's progress of a trim, in its checkpoint file.
pub type TrimCheckpoint = OffsetCheckpoint<TrimDetail>;

#[allow(unsafe_code)]
mod ioctl {
    use std::os::fd::AsFd;

    /// `_IOWR('X', 121, struct fstrim_range)` (linux/fs.h).
    const FITRIM: rustix::ioctl::Opcode = 0xC018_5879;

    /// `struct fstrim_range`.
    #[repr(C)]
    struct FstrimRange {
        start: u64,
        len: u64,
        minlen: u64,
    }

    /// Trim `[start, start + len)` of the file system holding `fd`; the
    /// bytes the file system says it trimmed.
    pub(super) fn fitrim(fd: impl AsFd, start: u64, len: u64, minlen: u64) -> std::io::Result<u64> {
        let mut r = FstrimRange { start, len, minlen };
        // SAFETY: FITRIM takes a `struct fstrim_range *`, which
        // `FstrimRange` mirrors (`repr(C)`, three u64); the kernel reads it
        // and writes the trimmed byte count back into `len` during the call
        // and keeps no pointer after it returns.
        unsafe {
            let req = rustix::ioctl::Updater::<FITRIM, FstrimRange>::new(&mut r);
            rustix::ioctl::ioctl(fd.as_fd(), req)?;
        }
        Ok(r.len)
    }
}

/// A trim under fallow's control.
#[derive(Debug)]
pub struct Fstrim {
    label: String,
    dir: File,
    devices: Vec<String>,
    gate: Arc<Gate>,
    ck: TrimCheckpoint,
    ck_path: PathBuf,
    _lock: Lock,
    windows: Windows,
    bucket: Option<TokenBucket>,
    max_bytes: Option<u64>,
    /// ext4's block groups: ranges end on their boundaries.
    groups: Option<Ext4Groups>,
    resumed_from: u64,
    requests: u64,
    active_ns: u64,
    t0_ns: u64,
}

impl Fstrim {
    /// Open `fstrim:MOUNT`, loading or starting its checkpoint.
    pub fn open(t: &NativeTarget, cfg: &NativeConfig) -> Result<Fstrim> {
        cfg.check_options("fstrim", &["minlen"])?;
        let label = t.to_string();
        let mount = PathBuf::from(&t.arg);
        let minlen_bytes = match cfg.options.get("minlen") {
            Some(v) => fallow_core::units::parse_bytes(v)
                .map_err(|e| Error::invalid("--minlen", format!("`{v}`: {e}")))?,
            None => 0,
        };
        // the checkpoint path is checked before anything is opened or written
        let ck_path = cfg.checkpoint_path.clone().ok_or_else(|| {
            Error::invalid(
                "--checkpoint",
                format!("{label}: a checkpoint file is needed"),
            )
        })?;
        check_paths(&ck_path, &cfg.outputs)?;
        let md = std::fs::metadata(&mount).map_err(|e| Error::io(&mount, "cannot stat", e))?;
        if !md.is_dir() {
            return Err(Error::invalid(
                "target",
                format!("{label}: give the file system's mount point (a directory)"),
            ));
        }
        let dir = File::open(&mount).map_err(|e| Error::io(&mount, "cannot open", e))?;
        let vfs = rustix::fs::fstatvfs(&dir)
            .map_err(|e| Error::io(&mount, "statvfs failed", e.into()))?;
        let fs_bytes = vfs.f_blocks.saturating_mul(vfs.f_frsize);
        let groups = Ext4Groups::of_mount(&dir)?;
        let fresh = TrimCheckpoint::new(
            &label,
            fs_bytes,
            TrimDetail {
                minlen_bytes,
                trimmed_bytes: 0,
            },
        );
        let (ck, lock) =
            OffsetCheckpoint::open(&ck_path, &cfg.outputs, cfg.resume, fresh, |old, new| {
                old.minlen_bytes = new.minlen_bytes
            })?;
        let devices: Vec<String> = resolve_device(&mount)?
            .map(|d| d.disk)
            .into_iter()
            .collect();
        let sources = devices
            .iter()
            .map(|d| crate::monitor::StatSource::sysfs(d))
            .collect::<Result<Vec<_>>>()?;
        let bucket = cfg
            .max_rate_bytes_per_s
            .map(|r| TokenBucket::new(r, MIN_RANGE_BYTES))
            .transpose()?;
        Ok(Fstrim {
            label,
            dir,
            devices,
            gate: Gate::new(&sources)?,
            resumed_from: ck.next_offset_bytes,
            ck,
            ck_path,
            _lock: lock,
            windows: cfg.windows.clone(),
            bucket,
            max_bytes: cfg.max_bytes,
            groups,
            requests: 0,
            active_ns: 0,
            t0_ns: monotonic_ns(),
        })
    }

    /// The checkpoint as it stands.
    pub fn checkpoint(&self) -> &TrimCheckpoint {
        &self.ck
    }

    fn run_bytes(&self) -> u64 {
        self.ck.next_offset_bytes.saturating_sub(self.resumed_from)
    }
}

impl BgExecutor for Fstrim {
    fn ready_in_ns(&mut self, size_bytes: u64, now_ns: u64) -> Result<u64> {
        let w = u64::from(self.windows.wait_now_s()) * 1_000_000_000;
        if w > 0 {
            return Ok(w);
        }
        Ok(match &mut self.bucket {
            Some(b) => b.ready_in_ns(size_bytes.max(MIN_RANGE_BYTES), now_ns),
            None => 0,
        })
    }

    fn run_one(&mut self, size_bytes: u64) -> Result<Step> {
        if self.ck.complete || self.max_bytes.is_some_and(|m| self.run_bytes() >= m) {
            return Ok(Step::Finished);
        }
        let start = self.ck.next_offset_bytes;
        // whole groups on ext4: no free extent discarded twice (module
        // docs); never past --max-bytes
        // (a cap past the file system's end leaves the rest uncapped: the
        // last range, to the end, fits in it)
        let cap = self
            .max_bytes
            .map(|m| m.saturating_sub(self.run_bytes()))
            .filter(|c| start.saturating_add(*c) < self.ck.size_bytes);
        let Some(end) = next_range_end(start, size_bytes, self.groups.as_ref(), cap) else {
            return Ok(Step::Finished);
        };
        let size = end - start;
        let last = start.saturating_add(size) >= self.ck.size_bytes;
        let len = if last { u64::MAX - start } else { size };
        let t0 = monotonic_ns();
        self.gate.open();
        let trimmed = ioctl::fitrim(&self.dir, start, len, self.ck.detail.minlen_bytes);
        let trimmed = match trimmed {
            Ok(n) => n,
            Err(e) => {
                self.gate.close();
                let unsupported =
                    e.raw_os_error() == Some(rustix::io::Errno::OPNOTSUPP.raw_os_error());
                return Err(match unsupported {
                    true => Error::Unsupported(format!(
                        "{}: the file system or its device does not support discard (FITRIM: {e})",
                        self.label
                    )),
                    false => Error::io(
                        &self.label,
                        format!(
                            "FITRIM of bytes {start}..{} failed",
                            start.saturating_add(len)
                        ),
                        e,
                    ),
                });
            }
        };
        if let Some(b) = &mut self.bucket {
            b.take(size, monotonic_ns());
        }
        self.requests += 1;
        self.ck.requests += 1;
        self.ck.detail.trimmed_bytes += trimmed;
        self.ck.next_offset_bytes = if last {
            self.ck.size_bytes
        } else {
            start + size
        };
        self.ck.complete = last;
        let saved = self.ck.save(&self.ck_path);
        self.gate.close();
        self.active_ns += monotonic_ns() - t0;
        saved?;
        Ok(
            if self.ck.complete || self.max_bytes.is_some_and(|m| self.run_bytes() >= m) {
                Step::Finished
            } else {
                Step::More
            },
        )
    }
}

impl NativeExecutor for Fstrim {
    fn devices(&self) -> Vec<String> {
        self.devices.clone()
    }

    fn gate(&self) -> Arc<Gate> {
        self.gate.clone()
    }

    fn release_actions(&self) -> Vec<ReleaseAction> {
        // each range ends by itself: nothing is left paused
        Vec::new()
    }

    fn report(&mut self) -> Result<NativeReport> {
        let mut native = BTreeMap::new();
        native.insert("trimmed_bytes".to_string(), self.ck.detail.trimmed_bytes);
        native.insert("ranges".to_string(), self.ck.requests);
        if let Some(g) = &self.groups {
            native.insert("ext4_group_bytes".to_string(), g.group_bytes);
        }
        native.insert("minlen_bytes".to_string(), self.ck.detail.minlen_bytes);
        native.insert("pass".to_string(), self.ck.pass);
        Ok(NativeReport {
            target: self.label.clone(),
            kind: "fstrim".into(),
            tool: "FITRIM ioctl".into(),
            target_bytes: Some(self.ck.size_bytes),
            scrubbed_bytes: self.ck.next_offset_bytes,
            position_bytes: self.ck.next_offset_bytes,
            run_bytes: self.run_bytes(),
            run_requests: self.requests,
            run_active_s: self.active_ns as f64 / 1e9,
            run_elapsed_s: (monotonic_ns() - self.t0_ns) as f64 / 1e9,
            complete: self.ck.complete,
            errors_corrected: None,
            errors_uncorrectable: None,
            native,
            rate_limit: self
                .bucket
                .as_ref()
                .map(|b| format!("fallow pacing at {:.0} bytes/s", b.rate_bytes_per_s())),
            checkpoint: Some(self.ck_path.display().to_string()),
        })
    }

    fn finish(&mut self) -> Result<()> {
        // saved after every range; nothing is in flight between requests
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Ext4Groups;

    /// A superblock with the fields `Ext4Groups` reads, by hand.
    fn sb(first: u32, log: u32, bpg: u32, magic: u16) -> Vec<u8> {
        let mut b = vec![0u8; 1024];
        b[20..24].copy_from_slice(&first.to_le_bytes());
        b[24..28].copy_from_slice(&log.to_le_bytes());
        b[32..36].copy_from_slice(&bpg.to_le_bytes());
        b[56..58].copy_from_slice(&magic.to_le_bytes());
        b
    }

    /// `--max-bytes` is a hard cap on the ranges' bytes (docs/native.md).
    #[test]
    fn ranges_stop_at_the_cap_on_group_or_mib_boundaries() {
        const MIB: u64 = 1 << 20;
        // no cap, no groups: the request size, at least 1 MiB
        assert_eq!(next_range_end(0, 4 * MIB, None, None), Some(4 * MIB));
        assert_eq!(next_range_end(0, 4096, None, None), Some(MIB));
        // capped: 2.5 MiB left of a 4 MiB request → 2 MiB; below 1 MiB → done
        assert_eq!(
            next_range_end(8 * MIB, 4 * MIB, None, Some(5 * MIB / 2)),
            Some(10 * MIB)
        );
        assert_eq!(next_range_end(8 * MIB, 4 * MIB, None, Some(MIB - 1)), None);
        assert_eq!(
            next_range_end(8 * MIB, 4 * MIB, None, Some(4 * MIB)),
            Some(12 * MIB)
        );
        // ext4, 128 MiB groups: a 4 MiB request is a whole group when the
        // cap allows it, the last whole group within the cap else, none
        // when the cap ends inside the first group
        let g = Ext4Groups::parse(&sb(0, 2, 32768, 0xEF53)).unwrap();
        assert_eq!(
            next_range_end(0, 4 * MIB, Some(&g), Some(200 * MIB)),
            Some(128 * MIB)
        );
        assert_eq!(
            next_range_end(128 * MIB, 300 * MIB, Some(&g), Some(300 * MIB)),
            Some(384 * MIB)
        );
        assert_eq!(
            next_range_end(128 * MIB, 4 * MIB, Some(&g), Some(100 * MIB)),
            None
        );
        // 1 KiB blocks: groups from byte 1024
        let g = Ext4Groups::parse(&sb(1, 0, 8192, 0xEF53)).unwrap();
        assert_eq!(
            next_range_end(0, 20 * MIB, Some(&g), Some(17 * MIB)),
            Some(1024 + 16 * MIB)
        );
        assert_eq!(next_range_end(0, MIB, Some(&g), Some(512)), None);
    }

    #[test]
    fn ext4_groups_from_the_superblock_and_ranges_on_their_boundaries() {
        // 4 KiB blocks, 32768 per group: 128 MiB groups from byte 0
        let g = Ext4Groups::parse(&sb(0, 2, 32768, 0xEF53)).unwrap();
        assert_eq!(
            g,
            Ext4Groups {
                first_byte: 0,
                group_bytes: 128 << 20
            }
        );
        // a 4 MiB request becomes the whole first group; the next starts there
        assert_eq!(g.range_end(0, 4 << 20), 128 << 20);
        assert_eq!(g.range_end(128 << 20, 4 << 20), 256 << 20);
        // exactly a group, and a bit more than one
        assert_eq!(g.range_end(0, 128 << 20), 128 << 20);
        assert_eq!(g.range_end(0, (128 << 20) + 1), 256 << 20);
        // 1 KiB blocks: data from block 1, 8192 blocks (8 MiB) per group
        let g = Ext4Groups::parse(&sb(1, 0, 8192, 0xEF53)).unwrap();
        assert_eq!((g.first_byte, g.group_bytes), (1024, 8 << 20));
        assert_eq!(g.range_end(0, 1 << 20), 1024 + (8 << 20));
        assert_eq!(g.range_end(1024 + (8 << 20), 1 << 20), 1024 + (16 << 20));
        // refusals name the field
        for (bad, field) in [
            (sb(0, 2, 32768, 0x1234), "s_magic"),
            (sb(0, 9, 32768, 0xEF53), "s_log_block_size"),
            (sb(0, 2, 0, 0xEF53), "s_blocks_per_group"),
            (sb(0, 2, 32769, 0xEF53), "s_blocks_per_group"),
            (sb(2, 2, 32768, 0xEF53), "s_first_data_block"),
        ] {
            let e = Ext4Groups::parse(&bad).unwrap_err();
            assert!(e.contains(field), "{e}");
        }
        assert!(Ext4Groups::parse(&[0u8; 40])
            .unwrap_err()
            .contains("too short"));
    }

    use super::*;
    use crate::scrub::Resume;
    use fallow_core::outpath::OutputGuard;
    use std::path::Path;

    fn cfg(ck: &Path, resume: Resume) -> NativeConfig {
        NativeConfig {
            checkpoint_path: Some(ck.to_path_buf()),
            resume,
            ..NativeConfig::default()
        }
    }

    #[test]
    fn checkpoints_of_other_targets_and_unfinished_ones_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let ck = d.path().join("ck.json");
        let t = NativeTarget::parse(&format!("fstrim:{}", d.path().display()))
            .unwrap()
            .unwrap();
        let vfs = rustix::fs::statvfs(d.path()).unwrap();
        let fs_bytes = vfs.f_blocks * vfs.f_frsize;
        let detail = TrimDetail {
            minlen_bytes: 0,
            trimmed_bytes: 0,
        };
        let mut other = TrimCheckpoint::new("fstrim:/elsewhere", fs_bytes, detail);
        other.next_offset_bytes = 1 << 20;
        other.requests = 1;
        other.save(&ck).unwrap();
        let e = Fstrim::open(&t, &cfg(&ck, Resume::Yes)).unwrap_err();
        assert!(
            e.is_bad_input() && e.to_string().contains("/elsewhere"),
            "{e}"
        );
        other.target = t.to_string();
        other.save(&ck).unwrap();
        let e = Fstrim::open(&t, &cfg(&ck, Resume::No))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--resume continues it"), "{e}");
        let f = Fstrim::open(&t, &cfg(&ck, Resume::Yes)).unwrap();
        assert_eq!(f.checkpoint().next_offset_bytes, 1 << 20);
        drop(f);
        // the file system's size is part of what the checkpoint is checked against
        let mut resized = other.clone();
        resized.size_bytes = fs_bytes + (1 << 20);
        resized.save(&ck).unwrap();
        let e = Fstrim::open(&t, &cfg(&ck, Resume::Yes))
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("has {fs_bytes} now")), "{e}");
        let f = Fstrim::open(&t, &cfg(&ck, Resume::Restart)).unwrap();
        assert_eq!(f.checkpoint().next_offset_bytes, 0);
        drop(f);
        // a file that is not fallow's is not touched without --overwrite,
        // and not read as a checkpoint with it
        std::fs::write(&ck, "{\"x\": 1}").unwrap();
        let e = Fstrim::open(&t, &cfg(&ck, Resume::Yes))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--overwrite"), "{e}");
        let mut forced = cfg(&ck, Resume::Yes);
        forced.outputs = OutputGuard::new(true);
        let e = Fstrim::open(&t, &forced).unwrap_err().to_string();
        assert!(e.contains("not a fallow fstrim checkpoint"), "{e}");
        let mut bad = cfg(&ck, Resume::Restart);
        bad.options.insert("minlen".into(), "lots".into());
        let e = Fstrim::open(&t, &bad).unwrap_err().to_string();
        assert!(e.contains("--minlen"), "{e}");
        std::fs::remove_file(&ck).unwrap();
        std::fs::write(d.path().join("file"), "").unwrap();
        let t = NativeTarget::parse(&format!("fstrim:{}", d.path().join("file").display()))
            .unwrap()
            .unwrap();
        let e = Fstrim::open(&t, &cfg(&ck, Resume::Restart))
            .unwrap_err()
            .to_string();
        assert!(e.contains("mount point"), "{e}");
    }
}
