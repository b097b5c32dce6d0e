//! The FUSE mount: a read-only mirror of the source directory whose file
//! reads go through [`Overlay::read`]. Directory listings, attributes and
//! symbolic links come from the source (the kernel's inode and dentry
//! caches usually hold them; only data reads are routed). Files are opened
//! with `direct_io`, so every read reaches the overlay and the source's own
//! page cache is the only copy in memory.

use crate::error::{Error, Result};
use crate::overlay::Overlay;
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    MountOption, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEntry, ReplyOpen,
    ReplyStatfs, Request,
};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{File, Metadata};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

thread_local! {
    /// Whether this FUSE thread asked for a short slice yet.
    static SHORT_SLICE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// How long the kernel may cache attributes and entries.
const TTL: Duration = Duration::from_secs(1);

#[derive(Debug, Default)]
struct Inodes {
    by_ino: HashMap<u64, PathBuf>,
    by_path: HashMap<PathBuf, u64>,
    next: u64,
}

impl Inodes {
    fn new() -> Inodes {
        let mut t = Inodes {
            next: 2,
            ..Inodes::default()
        };
        t.by_ino.insert(1, PathBuf::new());
        t.by_path.insert(PathBuf::new(), 1);
        t
    }

    fn ino_of(&mut self, rel: &Path) -> u64 {
        if let Some(i) = self.by_path.get(rel) {
            return *i;
        }
        let i = self.next;
        self.next += 1;
        self.by_ino.insert(i, rel.to_path_buf());
        self.by_path.insert(rel.to_path_buf(), i);
        i
    }
}

/// The FUSE file system over an [`Overlay`].
pub struct OverlayFs {
    overlay: Arc<Overlay>,
    rt: tokio::runtime::Handle,
    inodes: Mutex<Inodes>,
    open: Mutex<HashMap<u64, (Arc<File>, PathBuf)>>,
    next_fh: AtomicU64,
}

impl std::fmt::Debug for OverlayFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OverlayFs")
            .field("source", &self.overlay.source())
            .finish()
    }
}

fn errno(e: &std::io::Error) -> Errno {
    Errno::from_i32(e.raw_os_error().unwrap_or(libc::EIO))
}

fn kind_of(m: &Metadata) -> FileType {
    let t = m.file_type();
    if t.is_dir() {
        FileType::Directory
    } else if t.is_symlink() {
        FileType::Symlink
    } else if t.is_fifo() {
        FileType::NamedPipe
    } else if t.is_socket() {
        FileType::Socket
    } else if t.is_char_device() {
        FileType::CharDevice
    } else if t.is_block_device() {
        FileType::BlockDevice
    } else {
        FileType::RegularFile
    }
}

fn time(secs: i64, nsecs: i64) -> SystemTime {
    if secs >= 0 {
        UNIX_EPOCH + Duration::new(secs as u64, nsecs as u32)
    } else {
        UNIX_EPOCH
    }
}

fn attr_of(ino: u64, m: &Metadata) -> FileAttr {
    FileAttr {
        ino: INodeNo(ino),
        size: m.size(),
        blocks: m.blocks(),
        atime: time(m.atime(), m.atime_nsec()),
        mtime: time(m.mtime(), m.mtime_nsec()),
        ctime: time(m.ctime(), m.ctime_nsec()),
        crtime: time(m.ctime(), m.ctime_nsec()),
        kind: kind_of(m),
        perm: (m.mode() & 0o7777) as u16,
        nlink: m.nlink() as u32,
        uid: m.uid(),
        gid: m.gid(),
        rdev: m.rdev() as u32,
        blksize: m.blksize() as u32,
        flags: 0,
    }
}

impl OverlayFs {
    /// A file system serving `overlay`, running reads on `rt`.
    pub fn new(overlay: Arc<Overlay>, rt: tokio::runtime::Handle) -> OverlayFs {
        OverlayFs {
            overlay,
            rt,
            inodes: Mutex::new(Inodes::new()),
            open: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
        }
    }

    fn rel(&self, ino: INodeNo) -> Option<PathBuf> {
        self.inodes
            .lock()
            .expect("inode lock")
            .by_ino
            .get(&ino.0)
            .cloned()
    }

    fn full(&self, rel: &Path) -> PathBuf {
        self.overlay.source().join(rel)
    }
}

impl Filesystem for OverlayFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let Some(dir) = self.rel(parent) else {
            return reply.error(Errno::ENOENT);
        };
        let rel = dir.join(name);
        match std::fs::symlink_metadata(self.full(&rel)) {
            Ok(m) => {
                let ino = self.inodes.lock().expect("inode lock").ino_of(&rel);
                reply.entry(&TTL, &attr_of(ino, &m), Generation(0));
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let Some(rel) = self.rel(ino) else {
            return reply.error(Errno::ENOENT);
        };
        match std::fs::symlink_metadata(self.full(&rel)) {
            Ok(m) => reply.attr(&TTL, &attr_of(ino.0, &m)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let Some(rel) = self.rel(ino) else {
            return reply.error(Errno::ENOENT);
        };
        match std::fs::read_link(self.full(&rel)) {
            Ok(t) => reply.data(t.as_os_str().as_encoded_bytes()),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if flags.0 & libc::O_ACCMODE != libc::O_RDONLY {
            return reply.error(Errno::EROFS);
        }
        let Some(rel) = self.rel(ino) else {
            return reply.error(Errno::ENOENT);
        };
        match File::open(self.full(&rel)) {
            Ok(f) => {
                let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
                self.open
                    .lock()
                    .expect("open lock")
                    .insert(fh, (Arc::new(f), rel));
                reply.opened(FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO);
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        SHORT_SLICE.with(|asked| {
            if !asked.get() {
                // fuser's threads are its own: ask on the first read each
                // serves (see `sys::request_short_slice`)
                let _ = crate::sys::request_short_slice(crate::sys::READ_PATH_SLICE_NS);
                asked.set(true);
            }
        });
        let Some((file, rel)) = self.open.lock().expect("open lock").get(&fh.0).cloned() else {
            return reply.error(Errno::EBADF);
        };
        let overlay = self.overlay.clone();
        // the read may wait for peers or a spin-up: answer from the
        // runtime, so other requests keep flowing meanwhile
        self.rt.spawn(async move {
            match overlay.read(file, &rel, offset, size).await {
                Ok((data, _)) => reply.data(&data),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: fuser::ReplyEmpty,
    ) {
        self.open.lock().expect("open lock").remove(&fh.0);
        reply.ok();
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let Some(rel) = self.rel(ino) else {
            return reply.error(Errno::ENOENT);
        };
        let rd = match std::fs::read_dir(self.full(&rel)) {
            Ok(rd) => rd,
            Err(e) => return reply.error(errno(&e)),
        };
        let mut names: Vec<(PathBuf, FileType)> = rd
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let m = std::fs::symlink_metadata(e.path()).ok()?;
                Some((rel.join(e.file_name()), kind_of(&m)))
            })
            .collect();
        names.sort_by(|a, b| a.0.cmp(&b.0));
        let parent = rel.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut entries = vec![
            (ino.0, FileType::Directory, std::ffi::OsString::from(".")),
            (
                self.inodes.lock().expect("inode lock").ino_of(&parent),
                FileType::Directory,
                "..".into(),
            ),
        ];
        {
            let mut inodes = self.inodes.lock().expect("inode lock");
            for (p, kind) in names {
                let name = p.file_name().map(|n| n.to_os_string()).unwrap_or_default();
                entries.push((inodes.ino_of(&p), kind, name));
            }
        }
        for (i, (ino, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(ino), (i + 1) as u64, kind, &name) {
                break;
            }
        }
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match rustix::fs::statvfs(self.overlay.source()) {
            Ok(s) => reply.statfs(
                s.f_blocks,
                s.f_bfree,
                s.f_bavail,
                s.f_files,
                s.f_ffree,
                s.f_bsize as u32,
                s.f_namemax as u32,
                s.f_frsize as u32,
            ),
            Err(e) => reply.error(Errno::from_i32(e.raw_os_error())),
        }
    }
}

/// Mount `overlay` read-only at `mountpoint`; unmounted when the session
/// is dropped.
pub fn mount(
    overlay: Arc<Overlay>,
    rt: tokio::runtime::Handle,
    mountpoint: &Path,
) -> Result<fuser::BackgroundSession> {
    if !mountpoint.is_dir() {
        return Err(Error::invalid(
            "--mountpoint",
            format!("{}: not a directory", mountpoint.display()),
        ));
    }
    let mut cfg = fuser::Config::default();
    cfg.mount_options = vec![
        MountOption::RO,
        MountOption::FSName("fallow-peer".into()),
        MountOption::Subtype("fallow".into()),
        MountOption::DefaultPermissions,
    ];
    cfg.n_threads = Some(2);
    fuser::spawn_mount(OverlayFs::new(overlay, rt), mountpoint, &cfg).map_err(|e| Error::Mount {
        mountpoint: mountpoint.to_path_buf(),
        message: e.to_string(),
    })
}
