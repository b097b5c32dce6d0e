//! The FUSE file system: a root directory holding one file, `disk`, whose
//! bytes are the image's. Every open is `direct_io`, so the kernel's page
//! cache never answers a read: each read and write reaches the server.

use crate::issuers::{Issuers, ISSUERS_FILE_BYTES};
use crate::server::{Op, Server};
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    KernelConfig, LockOwner, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, WriteFlags,
};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// The name of the disk file.
pub const DISK_FILE_NAME: &str = "disk";
/// The power control and counters file: read it for the power state and
/// counters (never wakes the disk), write `standby` to spin the disk down.
pub const POWER_FILE_NAME: &str = "power";
/// The I/O counters in `/sys/block/<dev>/stat` format, current at each read.
pub const STAT_FILE_NAME: &str = "stat";
/// The recent requesters of the disk's requests (pid, comm, cgroup):
/// see [`crate::issuers`].
pub const ISSUERS_FILE_NAME: &str = "issuers";

const DISK_INO: INodeNo = INodeNo(2);
const POWER_INO: INodeNo = INodeNo(3);
const STAT_INO: INodeNo = INodeNo(4);
const ISSUERS_INO: INodeNo = INodeNo(5);
/// Size the small files report: more than their text ever is. Reads are
/// `direct_io`, so a read returns the text's real length and then EOF.
const SMALL_FILE_BYTES: u64 = 4096;
/// Attributes never change behind the kernel's back, but a short TTL keeps
/// a stale size from living long if the image is swapped between mounts.
const TTL: Duration = Duration::from_secs(1);

pub(crate) struct DiskFs {
    pub(crate) image: File,
    pub(crate) size_bytes: u64,
    pub(crate) writable: bool,
    pub(crate) server: Arc<Server>,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) mtime: SystemTime,
    pub(crate) issuers: Issuers,
    pub(crate) snapshots: Snapshots,
}

/// Most small-file snapshots held at once (one per open file; beyond it
/// an open reads the text as it is at each read).
const MAX_SNAPSHOTS: usize = 1024;

/// The text of a small file as it was when it was opened, per open file
/// handle, as procfs's `seq_file` gives it: a reader that takes the text
/// in two reads (`read_to_string` reads again at the end to find EOF)
/// otherwise got the tail of a newer, longer text (a counter that gained
/// a digit: `power: line 19: expected key value, got 6` in a loaded test
/// run).
#[derive(Debug, Default)]
pub(crate) struct Snapshots {
    next_fh: AtomicU64,
    texts: Mutex<HashMap<u64, Arc<[u8]>>>,
}

impl Snapshots {
    /// Keep `text` for a new handle; 0 (no snapshot) when too many are held.
    fn keep(&self, text: String) -> u64 {
        let mut texts = self.texts.lock().unwrap_or_else(|p| p.into_inner());
        if texts.len() >= MAX_SNAPSHOTS {
            return 0;
        }
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed) + 1;
        texts.insert(fh, Arc::from(text.into_bytes()));
        fh
    }

    /// The text kept for `fh`.
    fn get(&self, fh: u64) -> Option<Arc<[u8]>> {
        let texts = self.texts.lock().unwrap_or_else(|p| p.into_inner());
        texts.get(&fh).cloned()
    }

    /// The handle is closed.
    fn drop_handle(&self, fh: u64) {
        let mut texts = self.texts.lock().unwrap_or_else(|p| p.into_inner());
        texts.remove(&fh);
    }
}

impl DiskFs {
    fn attr(&self, ino: INodeNo) -> FileAttr {
        let (kind, perm, size, nlink) = if ino == DISK_INO {
            let perm = if self.writable { 0o644 } else { 0o444 };
            (FileType::RegularFile, perm, self.size_bytes, 1)
        } else if ino == POWER_INO {
            (FileType::RegularFile, 0o644, SMALL_FILE_BYTES, 1)
        } else if ino == STAT_INO {
            (FileType::RegularFile, 0o444, SMALL_FILE_BYTES, 1)
        } else if ino == ISSUERS_INO {
            (FileType::RegularFile, 0o444, ISSUERS_FILE_BYTES, 1)
        } else {
            (FileType::Directory, 0o755, 0, 2)
        };
        FileAttr {
            ino,
            size,
            blocks: size.div_ceil(512),
            atime: self.mtime,
            mtime: self.mtime,
            ctime: self.mtime,
            crtime: self.mtime,
            kind,
            perm,
            nlink,
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            flags: 0,
            blksize: 4096,
        }
    }

    /// The text of a small file now.
    fn small_text(&self, ino: INodeNo) -> String {
        if ino == POWER_INO {
            self.server.power().to_text()
        } else if ino == ISSUERS_INO {
            self.issuers.to_text()
        } else {
            self.server.stats().to_stat_line()
        }
    }

    /// One of the small bookkeeping files (never a request).
    fn is_small(ino: INodeNo) -> bool {
        ino == POWER_INO || ino == STAT_INO || ino == ISSUERS_INO
    }

    /// The part of `[offset, offset + size)` inside the disk, as a length.
    fn clip(&self, offset: u64, size: u64) -> u64 {
        size.min(self.size_bytes.saturating_sub(offset))
    }
}

/// The errno to answer with; an error without one is an I/O error.
fn errno(e: &std::io::Error) -> Errno {
    e.raw_os_error().map_or(Errno::EIO, Errno::from_i32)
}

impl Filesystem for DiskFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Requests of up to 1 MiB unsplit (the kernel's default FUSE limit
        // is 128 KiB): a disk sees a 1 MiB read as one request, and so
        // should the model. The kernel caps this at its own maximum.
        let _ = config.set_max_write(1 << 20);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let ino = match name.to_str() {
            Some(DISK_FILE_NAME) => Some(DISK_INO),
            Some(POWER_FILE_NAME) => Some(POWER_INO),
            Some(STAT_FILE_NAME) => Some(STAT_INO),
            Some(ISSUERS_FILE_NAME) => Some(ISSUERS_INO),
            _ => None,
        };
        if let (true, Some(ino)) = (parent == INodeNo::ROOT, ino) {
            reply.entry(&TTL, &self.attr(ino), Generation(0));
        } else {
            reply.error(Errno::ENOENT);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        if ino == INodeNo::ROOT || Self::is_small(ino) || ino == DISK_INO {
            reply.attr(&TTL, &self.attr(ino));
        } else {
            reply.error(Errno::ENOENT);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<fuser::TimeOrNow>,
        _mtime: Option<fuser::TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        // A disk has a fixed size: truncation (`dd of=` without
        // conv=notrunc, `>`) is refused; touch-style changes are ignored.
        if Self::is_small(ino) {
            // `echo standby > power` truncates first: nothing to truncate
            reply.attr(&TTL, &self.attr(ino));
        } else if size.is_some_and(|s| s != self.size_bytes) {
            reply.error(Errno::EPERM);
        } else {
            reply.attr(&TTL, &self.attr(ino));
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let wants_write = flags.0 & 0o3 != 0; // O_WRONLY or O_RDWR
        if (ino == STAT_INO || ino == ISSUERS_INO) && wants_write {
            return reply.error(Errno::EACCES);
        }
        if Self::is_small(ino) {
            let fh = self.snapshots.keep(self.small_text(ino));
            return reply.opened(FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO);
        }
        if ino != DISK_INO {
            return reply.error(Errno::EISDIR);
        }
        if wants_write && !self.writable {
            return reply.error(Errno::EROFS);
        }
        reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO);
    }

    #[allow(clippy::too_many_arguments)]
    fn read(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        if Self::is_small(ino) {
            // bookkeeping, not a request: never reaches the server's queue;
            // the text as it was at open
            let text = self
                .snapshots
                .get(fh.0)
                .unwrap_or_else(|| Arc::from(self.small_text(ino).into_bytes()));
            let b = &text[..];
            let from = (offset as usize).min(b.len());
            let to = from.saturating_add(size as usize).min(b.len());
            return reply.data(&b[from..to]);
        }
        if ino != DISK_INO {
            return reply.error(Errno::EISDIR);
        }
        let len = self.clip(offset, size as u64);
        if len == 0 {
            return reply.data(&[]); // at or past the end: no media access
        }
        self.issuers.record(req.pid());
        let result = self.server.serve(Op::Read, offset, len as u32, || {
            let mut buf = vec![0u8; len as usize];
            self.image.read_exact_at(&mut buf, offset)?;
            Ok(buf)
        });
        match result {
            Ok(buf) => reply.data(&buf),
            Err(e) => reply.error(errno(&e)),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        if ino == POWER_INO {
            return match std::str::from_utf8(data).map(str::trim) {
                Ok("standby") => {
                    self.server.standby();
                    reply.written(data.len() as u32)
                }
                // anything else is a mistake the writer should hear about
                _ => reply.error(Errno::EINVAL),
            };
        }
        if ino != DISK_INO {
            return reply.error(Errno::EISDIR);
        }
        if !self.writable {
            return reply.error(Errno::EROFS);
        }
        let len = self.clip(offset, data.len() as u64);
        if len == 0 {
            return reply.error(Errno::ENOSPC); // past the end of the disk
        }
        self.issuers.record(req.pid());
        let result = self.server.serve(Op::Write, offset, len as u32, || {
            self.image.write_all_at(&data[..len as usize], offset)
        });
        match result {
            Ok(()) => reply.written(len as u32), // short when it ran off the end
            Err(e) => reply.error(errno(&e)),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.snapshots.drop_handle(fh.0);
        reply.ok();
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // close(2): nothing is buffered here (direct_io), nothing to do
        reply.ok();
    }

    fn fsync(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        if ino != DISK_INO {
            return reply.ok(); // the small files hold nothing to flush
        }
        self.issuers.record(req.pid());
        match self
            .server
            .serve(Op::Flush, 0, 0, || self.image.sync_data())
        {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        if ino != INodeNo::ROOT {
            return reply.error(Errno::ENOTDIR);
        }
        let entries = [
            (INodeNo::ROOT, FileType::Directory, "."),
            (INodeNo::ROOT, FileType::Directory, ".."),
            (DISK_INO, FileType::RegularFile, DISK_FILE_NAME),
            (POWER_INO, FileType::RegularFile, POWER_FILE_NAME),
            (STAT_INO, FileType::RegularFile, STAT_FILE_NAME),
            (ISSUERS_INO, FileType::RegularFile, ISSUERS_FILE_NAME),
        ];
        for (i, (ino, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
            if reply.add(ino, (i + 1) as u64, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let blocks = self.size_bytes.div_ceil(4096);
        reply.statfs(blocks, 0, 0, 2, 0, 4096, 255, 4096);
    }
}

#[cfg(test)]
mod snapshot_tests {
    use super::*;

    #[test]
    fn a_handle_reads_the_text_it_opened_until_closed_and_the_count_is_bounded() {
        let s = Snapshots::default();
        let a = s.keep("spinups 9\n".into());
        let b = s.keep("spinups 10\n".into());
        assert!(a != 0 && b != 0 && a != b);
        assert_eq!(&s.get(a).unwrap()[..], b"spinups 9\n");
        assert_eq!(&s.get(b).unwrap()[..], b"spinups 10\n");
        s.drop_handle(a);
        assert!(s.get(a).is_none());
        assert!(s.get(0).is_none());
        for _ in 1..MAX_SNAPSHOTS {
            assert_ne!(s.keep(String::new()), 0);
        }
        // full: no snapshot (the live text), until a handle is closed
        assert_eq!(s.keep(String::new()), 0);
        s.drop_handle(b);
        assert_ne!(s.keep(String::new()), 0);
    }
}
