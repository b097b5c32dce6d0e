//! The scrub target: a block device or a file, opened read-only (and only
//! ever read), with `O_DIRECT` so reads reach the media rather than the
//! page cache; its size, identity and sector size; and the read path
//! ([`Reader`]) with an aligned buffer.
//!
//! Where `O_DIRECT` is refused (tmpfs, some FUSE file systems) the target
//! is read through the page cache instead, with readahead off and the
//! range dropped from the cache before and after each read
//! (`POSIX_FADV_DONTNEED`), so the read still goes to the device and the
//! scrub does not evict everyone else's cache; the caller is told.

use super::checkpoint::TargetId;
use super::narrow::Verifier;
use crate::error::{Error, Result};
use crate::monitor::{resolve_device, OwnCounters, ResolvedDevice};
use rustix::fs::{fadvise, Advice, OFlags};
use std::fs::{File, OpenOptions};
use std::io::{self, ErrorKind, Seek, SeekFrom};
use std::num::NonZeroU64;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Alignment of the read buffer, bytes (a page: enough for any sector size).
const BUFFER_ALIGN: usize = 4096;

/// A block device or a regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetKind {
    /// A block device node.
    Block,
    /// A regular file.
    File,
}

/// An opened scrub target.
#[derive(Debug)]
pub struct Target {
    /// The path as given, made absolute.
    pub path: PathBuf,
    /// Block device or file.
    pub kind: TargetKind,
    /// Size, bytes.
    pub size_bytes: u64,
    /// The smallest unit a read can fail in (logical sector), bytes.
    pub granule_bytes: u64,
    /// Reads bypass the page cache.
    pub direct: bool,
    /// Why `O_DIRECT` is not used, when it is not.
    pub buffered_reason: Option<String>,
    /// The disk it is on, when sysfs knows it.
    pub device: Option<ResolvedDevice>,
    /// Identity for checkpoints.
    pub id: TargetId,
    file: File,
}

impl Target {
    /// Open `path` read-only, with `O_DIRECT` if `direct` and the file
    /// system allows it (see the module documentation).
    pub fn open(path: &Path, direct: bool) -> Result<Target> {
        let abs = std::path::absolute(path).map_err(|e| Error::io(path, "bad path", e))?;
        let md = std::fs::metadata(&abs).map_err(|e| {
            let what = if e.kind() == ErrorKind::NotFound {
                "no such file or block device"
            } else {
                "cannot stat"
            };
            Error::io(&abs, what, e)
        })?;
        let ft = md.file_type();
        let kind = if ft.is_block_device() {
            TargetKind::Block
        } else if ft.is_file() {
            TargetKind::File
        } else if ft.is_dir() {
            return Err(Error::invalid(
                "target",
                format!(
                    "{} is a directory: give a block device or a file",
                    abs.display()
                ),
            ));
        } else {
            return Err(Error::invalid(
                "target",
                format!(
                    "{} is neither a block device nor a regular file",
                    abs.display()
                ),
            ));
        };
        let open_err = |e: io::Error| {
            let what = if e.kind() == ErrorKind::PermissionDenied && kind == TargetKind::Block {
                "cannot open for reading (reading a block device needs root or membership of its group, usually `disk`)"
            } else {
                "cannot open for reading"
            };
            Error::io(&abs, what, e)
        };
        let device = resolve_device(&abs)?;
        let mut buffered_reason = None;
        let mut file = match OpenOptions::new()
            .read(true)
            .custom_flags(OFlags::DIRECT.bits() as i32)
            .open(&abs)
        {
            Ok(_) if !direct => {
                buffered_reason = Some("buffered reads asked for".into());
                None
            }
            Ok(f) => Some(f),
            Err(e) if e.raw_os_error() == Some(22) => {
                buffered_reason = Some(format!("O_DIRECT refused at open ({e})"));
                None
            }
            Err(e) => return Err(open_err(e)),
        };
        let size_bytes = match kind {
            TargetKind::File => md.len(),
            TargetKind::Block => {
                let f = match &file {
                    Some(f) => f.try_clone(),
                    None => File::open(&abs),
                }
                .map_err(open_err)?;
                (&f).seek(SeekFrom::End(0))
                    .map_err(|e| Error::io(&abs, "cannot find the device's size", e))?
            }
        };
        if kind == TargetKind::Block && size_bytes == 0 {
            return Err(Error::invalid(
                "target",
                format!(
                    "{} is a block device of 0 bytes (a loop device with no file attached, or a drive with no medium)",
                    abs.display()
                ),
            ));
        }
        let granule_bytes = match kind {
            TargetKind::Block => file
                .as_ref()
                .and_then(|f| rustix::fs::ioctl_blksszget(f).ok())
                .map(u64::from)
                .or(device.as_ref().map(|d| d.logical_block_bytes))
                .unwrap_or(512),
            TargetKind::File => device.as_ref().map_or(4096, |d| d.logical_block_bytes),
        }
        .max(512);
        // O_DIRECT can open and still refuse the read: probe the first sector
        if let Some(f) = &file {
            if size_bytes > 0 {
                let mut buf = AlignedBuf::new(granule_bytes as usize);
                if let Err(e) = f.read_at(buf.slice(granule_bytes as usize), 0) {
                    if e.raw_os_error() == Some(22) {
                        buffered_reason = Some(format!("O_DIRECT reads refused ({e})"));
                        file = None;
                    }
                    // any other error is the media's: the scrub will find it
                }
            }
        }
        let direct = file.is_some();
        let file = match file {
            Some(f) => f,
            None => {
                let f = File::open(&abs).map_err(open_err)?;
                // verify the media, not readahead's guesses
                let _ = fadvise(&f, 0, None, Advice::Random);
                f
            }
        };
        let device_id = match kind {
            TargetKind::Block => format!(
                "{}:{}",
                rustix::fs::major(md.rdev()),
                rustix::fs::minor(md.rdev())
            ),
            TargetKind::File => format!(
                "{}:{}:{}",
                rustix::fs::major(md.dev()),
                rustix::fs::minor(md.dev()),
                md.ino()
            ),
        };
        let id = TargetId {
            path: abs.display().to_string(),
            size_bytes,
            kind: match kind {
                TargetKind::Block => "block",
                TargetKind::File => "file",
            }
            .into(),
            device: device_id,
        };
        Ok(Target {
            path: abs,
            kind,
            size_bytes,
            granule_bytes: if direct { granule_bytes } else { 512 },
            direct,
            buffered_reason,
            device,
            id,
            file,
        })
    }

    /// The open file (read-only).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// A reader of this target that counts its reads in `own`.
    pub fn reader(&self, own: Arc<OwnCounters>) -> Result<Reader> {
        Ok(Reader {
            file: self
                .file
                .try_clone()
                .map_err(|e| Error::io(&self.path, "cannot duplicate the descriptor", e))?,
            direct: self.direct,
            granule: self.granule_bytes,
            size: self.size_bytes,
            buf: AlignedBuf::new(0),
            own,
        })
    }
}

/// A heap buffer whose usable part starts at a page (4 KiB) boundary,
/// as `O_DIRECT` needs: a plain `Vec` with slack, sliced at the aligned
/// offset, so no unsafe allocation code is needed.
#[derive(Debug)]
pub struct AlignedBuf {
    raw: Vec<u8>,
}

impl AlignedBuf {
    /// Room for `len` aligned bytes.
    pub fn new(len: usize) -> AlignedBuf {
        AlignedBuf {
            raw: vec![0; len + BUFFER_ALIGN],
        }
    }

    /// The aligned slice of `len` bytes, growing the buffer if needed.
    pub fn slice(&mut self, len: usize) -> &mut [u8] {
        if self.raw.len() < len + BUFFER_ALIGN {
            self.raw = vec![0; len + BUFFER_ALIGN];
        }
        let off = self.raw.as_ptr().align_offset(BUFFER_ALIGN);
        &mut self.raw[off..off + len]
    }
}

/// Reads the target, counting each read as fallow's own I/O.
#[derive(Debug)]
pub struct Reader {
    file: File,
    direct: bool,
    granule: u64,
    size: u64,
    buf: AlignedBuf,
    own: Arc<OwnCounters>,
}

impl Verifier for Reader {
    fn check(&mut self, offset: u64, len: u64) -> io::Result<u64> {
        let len = len.min(self.size.saturating_sub(offset));
        if len == 0 {
            return Ok(0);
        }
        // O_DIRECT lengths are whole sectors; the target's tail is read
        // as a whole sector and the read stops at its end
        let io_len = if self.direct {
            len.div_ceil(self.granule) * self.granule
        } else {
            len
        };
        let range = NonZeroU64::new(len);
        if !self.direct {
            // drop cached pages so the read goes to the device
            let _ = fadvise(&self.file, offset, range, Advice::DontNeed);
        }
        let buf = self.buf.slice(io_len as usize);
        let mut done = 0u64;
        let guard = self.own.begin_read(io_len);
        let result = loop {
            match self.file.read_at(&mut buf[done as usize..], offset + done) {
                Ok(0) => break Ok(done),
                Ok(n) => {
                    done += n as u64;
                    if done >= len {
                        break Ok(len);
                    }
                    if self.direct && done % self.granule != 0 {
                        break Ok(done);
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                // bytes before the error are good; the error shows on the retry
                Err(_) if done > 0 => break Ok(done),
                Err(e) => break Err(e),
            }
        };
        guard.done();
        if !self.direct {
            let _ = fadvise(&self.file, offset, range, Advice::DontNeed);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_buffers_are_aligned_and_grow() {
        let mut b = AlignedBuf::new(10);
        assert_eq!(b.slice(10).as_ptr() as usize % BUFFER_ALIGN, 0);
        let s = b.slice(1 << 20);
        assert_eq!(s.len(), 1 << 20);
        assert_eq!(s.as_ptr() as usize % BUFFER_ALIGN, 0);
    }

    #[test]
    fn opens_a_file_read_only_and_reads_it_whole() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.bin");
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        let t = Target::open(&p, true).unwrap();
        assert_eq!((t.kind, t.size_bytes), (TargetKind::File, 100_000));
        assert_eq!(t.id.kind, "file");
        let own = Arc::new(OwnCounters::new(None));
        let mut r = t.reader(own.clone()).unwrap();
        // the unaligned tail is read whole
        let tail_off = 100_000 / t.granule_bytes * t.granule_bytes;
        assert_eq!(r.check(0, tail_off).unwrap(), tail_off);
        assert_eq!(
            r.check(tail_off, 100_000 - tail_off).unwrap(),
            100_000 - tail_off
        );
        assert_eq!(own.reads_issued(), 2);
        // read-only: writing through its descriptor fails
        assert!(t.file().write_at(b"x", 0).is_err());
        assert_eq!(std::fs::read(&p).unwrap(), data);
    }

    #[test]
    fn buffered_reads_when_asked_read_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.bin");
        std::fs::write(&p, vec![3u8; 10_000]).unwrap();
        let t = Target::open(&p, false).unwrap();
        assert!(!t.direct);
        assert_eq!(t.granule_bytes, 512);
        assert_eq!(
            t.buffered_reason.as_deref(),
            Some("buffered reads asked for")
        );
        let own = Arc::new(OwnCounters::new(None));
        let mut r = t.reader(own.clone()).unwrap();
        assert_eq!(r.check(0, 8192).unwrap(), 8192);
        assert_eq!(r.check(8192, 1808).unwrap(), 1808);
        assert_eq!(own.read_bytes(), 8192 + 2048);
    }

    #[test]
    fn tmpfs_falls_back_to_buffered_reads_with_a_reason() {
        let shm = Path::new("/dev/shm");
        if !shm.is_dir() {
            eprintln!("skip: no /dev/shm");
            return;
        }
        let dir = tempfile::tempdir_in(shm).unwrap();
        let p = dir.path().join("t.bin");
        std::fs::write(&p, vec![7u8; 8192]).unwrap();
        let t = Target::open(&p, true).unwrap();
        if t.direct {
            eprintln!("skip: this tmpfs takes O_DIRECT");
            return;
        }
        assert!(t.buffered_reason.as_deref().unwrap().contains("O_DIRECT"));
        let mut r = t.reader(Arc::new(OwnCounters::new(None))).unwrap();
        assert_eq!(r.check(0, 8192).unwrap(), 8192);
    }

    #[test]
    fn missing_and_wrong_targets_are_clear_errors() {
        let e = Target::open(Path::new("/no/such/disk"), true).unwrap_err();
        assert!(e.is_bad_input());
        assert!(
            e.to_string().contains("no such file or block device"),
            "{e}"
        );
        let dir = tempfile::tempdir().unwrap();
        let e = Target::open(dir.path(), true).unwrap_err();
        assert!(e.to_string().contains("is a directory"), "{e}");
        let e = Target::open(Path::new("/dev/null"), true).unwrap_err();
        assert!(e.to_string().contains("neither a block device"), "{e}");
    }
}
