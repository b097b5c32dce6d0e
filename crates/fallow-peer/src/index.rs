//! The whitelist: the application directories a node indexes, each file's
//! [`Manifest`], and the one function that turns a path a peer asks for
//! into a file it may read.
//!
//! Files are named on the wire as `ROOT/relative/path`, where `ROOT` is the
//! root's name (`usr/bin` for `/usr/bin` by default, or a name given as
//! `app=/srv/app`), so machines that keep the same application in
//! different places still agree on names. Only regular files found while
//! walking a root are indexed: symbolic links are not followed (a link's
//! target is indexed where it lives, if inside a root), and a request is
//! served only for a name in the index, opened beneath its root with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV)` and
//! checked to be the same inode, size and modification time as when it
//! was hashed.
//!
//! Authorisation: each root directory is opened once, when it is given
//! ([`Root::parse`]), and every walk and every open happens beneath that
//! held descriptor — replacing the directory by a link later changes
//! nothing. Nothing crosses a mount point (`RESOLVE_NO_XDEV`: a bind mount
//! inside a root is skipped). A file is indexed and served only if an
//! unprivileged local user ("others") could open it along its whole path:
//! the root and every directory below it down to the file grant search
//! (`o+x`) and the file grants read (`o+r`), checked on the descriptors of
//! a component-by-component walk at indexing and again at every open
//! ([`open_for_others`]), so a `0644` file in a `0700` directory is not
//! served. The root's own ancestors are the operator's choice and are not
//! checked. Hard links are served like any file: a link names the same
//! inode, whose mode is checked, so a link to a private file is refused
//! for that file's mode, and a link to a world-readable file gives out
//! only what every local user can read already.
//!
//! Never blocking: what is not a regular file (a FIFO, a socket, a device
//! swapped in for an indexed file) is recognised by `fstat` of an `O_PATH`
//! descriptor before anything opens it, and the read open itself is
//! `O_NONBLOCK`, so neither the residency scan nor an answer can wait on
//! one.

use crate::error::{Error, Result};
use crate::manifest::{check_chunk_bytes, Manifest};
use std::collections::BTreeMap;
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// An indexed application directory.
#[derive(Debug, Clone)]
pub struct Root {
    /// Its name on the wire.
    pub name: String,
    /// The directory, canonical.
    pub dir: PathBuf,
    /// The directory, opened once when given: every walk and open
    /// resolves beneath it.
    fd: Arc<OwnedFd>,
}

impl PartialEq for Root {
    fn eq(&self, other: &Root) -> bool {
        self.name == other.name && self.dir == other.dir
    }
}

impl Eq for Root {}

impl Root {
    /// Parse `[NAME=]DIR`: the directory must exist; the default name is
    /// its canonical path without the leading `/`.
    pub fn parse(spec: &str) -> Result<Root> {
        let (name, dir) = match spec.split_once('=') {
            Some((n, d)) => (Some(n.trim().to_string()), d),
            None => (None, spec),
        };
        let dir = std::fs::canonicalize(dir).map_err(|e| Error::io(dir, e))?;
        if !dir.is_dir() {
            return Err(Error::invalid(
                "--dir",
                format!("{}: not a directory", dir.display()),
            ));
        }
        let name = match name {
            Some(n) => n,
            None => dir
                .to_str()
                .ok_or_else(|| Error::invalid("--dir", format!("{}: not UTF-8", dir.display())))?
                .trim_start_matches('/')
                .to_string(),
        };
        let name = name.trim_matches('/').to_string();
        if name.is_empty() || check_wire(&name).is_err() {
            return Err(Error::invalid(
                "--dir",
                format!("`{spec}`: the root name must be a relative path without `.` or `..` (name it: NAME=DIR)"),
            ));
        }
        use rustix::fs::{open, Mode, OFlags};
        let fd = open(
            &dir,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Error::io(&dir, e.into()))?;
        Ok(Root {
            name,
            dir,
            fd: Arc::new(fd),
        })
    }
}

/// What identifies a file's contents without reading them: when any of
/// these changes, its manifest is stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// Device id.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// Size, bytes.
    pub size_bytes: u64,
    /// Modification time, ns since the epoch.
    pub mtime_ns: i128,
}

impl Stamp {
    /// The stamp of file metadata.
    pub fn of(m: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: m.dev(),
            ino: m.ino(),
            size_bytes: m.size(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        }
    }
}

/// One indexed file.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Name on the wire: `ROOT/relative/path`.
    pub wire: String,
    /// Index of its root in [`Index::roots`].
    pub root: usize,
    /// Path relative to the root.
    pub rel: PathBuf,
    /// Its absolute path.
    pub path: PathBuf,
    /// Its contents' manifest.
    pub manifest: Manifest,
    /// Metadata when it was hashed.
    pub stamp: Stamp,
}

/// Why a request for a path is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Not a plain relative name (`..`, `.`, an absolute path, an empty
    /// component, a NUL byte, too long).
    #[error("refused: bad path `{0}` (names are ROOT/relative/path without `.` or `..`)")]
    BadPath(String),
    /// A well-formed name that is not in the whitelist.
    #[error("refused: `{0}` is not an indexed file")]
    NotIndexed(String),
    /// The file changed since it was indexed (or is no longer beneath its
    /// root as a regular file).
    #[error("refused: `{0}` changed since it was indexed")]
    Changed(String),
}

/// The longest wire name accepted, bytes.
pub const MAX_WIRE_BYTES: usize = 4096;

/// Check that `wire` is a plain relative name: components that are not
/// empty, `.` or `..`, no NUL, not absolute.
pub fn check_wire(wire: &str) -> Result<(), Refusal> {
    let bad = || Refusal::BadPath(wire.chars().take(200).collect());
    if wire.is_empty()
        || wire.len() > MAX_WIRE_BYTES
        || wire.contains('\0')
        || wire.starts_with('/')
    {
        return Err(bad());
    }
    if wire
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(bad());
    }
    Ok(())
}

/// Files that could not be indexed, with the reason.
#[derive(Debug, Clone, Default)]
pub struct Skipped {
    /// Unreadable files and directories, with the OS error.
    pub unreadable: Vec<(PathBuf, String)>,
    /// Names that are not UTF-8 (they cannot be named on the wire).
    pub not_utf8: u64,
    /// Symbolic links, devices, sockets and FIFOs.
    pub not_regular: u64,
    /// Regular files others could not open: no `o+r`, or a directory on
    /// the path (the root included) without `o+x` (never served).
    pub not_world_readable: u64,
    /// Directories that are mount points (never crossed).
    pub mount_points: u64,
}

/// The whitelist of one node.
#[derive(Debug, Clone, Default)]
pub struct Index {
    /// The roots, in the order given.
    pub roots: Vec<Root>,
    /// Chunk size of every manifest.
    pub chunk_bytes: u32,
    files: BTreeMap<String, Entry>,
    /// What the last walk could not index.
    pub skipped: Skipped,
}

impl Index {
    /// Walk the roots and hash every regular file. Files whose [`Stamp`]
    /// matches their entry in `previous` keep its manifest (a rescan reads
    /// only what changed). Two roots with the same name are an error.
    pub fn build(roots: &[Root], chunk_bytes: u32, previous: Option<&Index>) -> Result<Index> {
        check_chunk_bytes(chunk_bytes)?;
        for (i, r) in roots.iter().enumerate() {
            if roots[..i].iter().any(|o| o.name == r.name) {
                return Err(Error::invalid(
                    "--dir",
                    format!("two roots are named `{}`: name them (NAME=DIR)", r.name),
                ));
            }
        }
        let mut index = Index {
            roots: roots.to_vec(),
            chunk_bytes,
            ..Index::default()
        };
        let reuse = previous.filter(|p| p.chunk_bytes == chunk_bytes);
        for (ri, root) in roots.iter().enumerate() {
            let mut stack = vec![PathBuf::new()];
            while let Some(rel_dir) = stack.pop() {
                let dir = root.dir.join(&rel_dir);
                let names = match list_beneath(root, &rel_dir) {
                    Ok(n) => n,
                    Err(e) if rel_dir.as_os_str().is_empty() => return Err(Error::io(&dir, e)),
                    Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
                        index.skipped.mount_points += 1;
                        continue;
                    }
                    Err(e) => {
                        index.skipped.unreadable.push((dir, e.to_string()));
                        continue;
                    }
                };
                for (name, kind) in names {
                    let rel = rel_dir.join(&name);
                    let path = root.dir.join(&rel);
                    match kind {
                        Kind::Dir => {
                            stack.push(rel);
                            continue;
                        }
                        Kind::Other => {
                            index.skipped.not_regular += 1;
                            continue;
                        }
                        Kind::File => {}
                    }
                    let Some(rel_str) = rel.to_str() else {
                        index.skipped.not_utf8 += 1;
                        continue;
                    };
                    let wire = format!("{}/{}", root.name, rel_str);
                    if check_wire(&wire).is_err() {
                        index.skipped.not_utf8 += 1;
                        continue;
                    }
                    let f = match open_for_others(root, &rel) {
                        Ok(f) => f,
                        Err(Denied::NotRegular) => {
                            index.skipped.not_regular += 1;
                            continue;
                        }
                        Err(Denied::NotForOthers) => {
                            index.skipped.not_world_readable += 1;
                            continue;
                        }
                        Err(Denied::Io(e)) => {
                            index.skipped.unreadable.push((path, e.to_string()));
                            continue;
                        }
                    };
                    let meta = match f.metadata() {
                        Ok(m) => m,
                        Err(e) => {
                            index.skipped.unreadable.push((path, e.to_string()));
                            continue;
                        }
                    };
                    let stamp = Stamp::of(&meta);
                    let manifest = match reuse.and_then(|p| p.files.get(&wire)) {
                        Some(old) if old.stamp == stamp => old.manifest.clone(),
                        _ => match Manifest::from_reader(
                            std::io::BufReader::with_capacity(1 << 20, f),
                            chunk_bytes,
                        ) {
                            Ok(m) => m,
                            Err(e) => {
                                index.skipped.unreadable.push((path, e.to_string()));
                                continue;
                            }
                        },
                    };
                    index.files.insert(
                        wire.clone(),
                        Entry {
                            wire,
                            root: ri,
                            rel,
                            path,
                            manifest,
                            stamp,
                        },
                    );
                }
            }
        }
        Ok(index)
    }

    /// Every indexed file, by wire name.
    pub fn files(&self) -> impl Iterator<Item = &Entry> {
        self.files.values()
    }

    /// The indexed files whose wire name sorts after `wire`, in order.
    pub fn files_after<'a>(&'a self, wire: &str) -> impl Iterator<Item = &'a Entry> + 'a {
        use std::ops::Bound::{Excluded, Unbounded};
        self.files
            .range::<str, _>((Excluded(wire), Unbounded))
            .map(|(_, e)| e)
    }

    /// Number of indexed files.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// True when nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Total size of the indexed files, bytes.
    pub fn bytes(&self) -> u64 {
        self.files.values().map(|e| e.manifest.size_bytes).sum()
    }

    /// The entry named `wire`, if indexed.
    pub fn get(&self, wire: &str) -> Option<&Entry> {
        self.files.get(wire)
    }

    /// The wire name of a file given by its path relative to root `root`.
    pub fn wire_of(&self, root: usize, rel: &Path) -> Option<String> {
        let r = self.roots.get(root)?;
        let rel = rel.to_str()?;
        Some(format!("{}/{}", r.name, rel))
    }

    /// The entry a peer may read for `wire`, or why not.
    pub fn resolve(&self, wire: &str) -> Result<&Entry, Refusal> {
        check_wire(wire)?;
        self.files
            .get(wire)
            .ok_or_else(|| Refusal::NotIndexed(wire.to_string()))
    }

    /// Open an entry for the residency scan, which only decides what to
    /// advertise: beneath its root in one `openat2` without following any
    /// link, never blocking and never opening what is not a regular file
    /// (the `O_PATH` probe of [`open_for_others`]), and only if it is still
    /// the file that was hashed. The path's permissions were checked when
    /// it was indexed and are checked again when it is served
    /// ([`Index::open`]); skipping the walk keeps the scan's cost per file
    /// close to two opens, whatever the depth.
    pub fn open_for_scan(&self, e: &Entry) -> Option<File> {
        use rustix::fs::{fstat, openat2, FileType, Mode, OFlags};
        let root = &self.roots[e.root];
        if e.rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_)))
        {
            return None;
        }
        let base = OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let probe = openat2(
            root.fd.as_fd(),
            &e.rel,
            OFlags::PATH | base,
            Mode::empty(),
            beneath(),
        )
        .ok()?;
        let st = fstat(&probe).ok()?;
        let same = |st: &rustix::fs::Stat| {
            FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
                && st.st_dev == e.stamp.dev
                && st.st_ino == e.stamp.ino
        };
        if !same(&st) {
            return None;
        }
        let fd = openat2(
            root.fd.as_fd(),
            &e.rel,
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | base,
            Mode::empty(),
            beneath(),
        )
        .ok()?;
        let f = File::from(fd);
        let meta = f.metadata().ok()?;
        (meta.is_file() && Stamp::of(&meta) == e.stamp).then_some(f)
    }

    /// Open an entry for serving: beneath its root without following any
    /// symbolic link, only if others could open it along its path
    /// ([`open_for_others`]), and only if it is still the file that was
    /// hashed.
    pub fn open(&self, e: &Entry) -> Result<File, Refusal> {
        let changed = || Refusal::Changed(e.wire.clone());
        let root = &self.roots[e.root];
        let f = open_for_others(root, &e.rel).map_err(|_| changed())?;
        let meta = f.metadata().map_err(|_| changed())?;
        if Stamp::of(&meta) != e.stamp {
            return Err(changed());
        }
        Ok(f)
    }
}

enum Kind {
    Dir,
    File,
    Other,
}

/// The entries of directory `rel` beneath `root` (without `.` and `..`),
/// sorted by name, with their kind as the directory lists it (a symbolic
/// link is `Other`, whatever it points to).
fn list_beneath(root: &Root, rel: &Path) -> std::io::Result<Vec<(std::ffi::OsString, Kind)>> {
    use rustix::fs::{openat2, Dir, FileType, Mode, OFlags};
    use std::os::unix::ffi::OsStrExt;
    let rel = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    let fd = openat2(
        root.fd.as_fd(),
        rel,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
        beneath(),
    )?;
    let mut out = Vec::new();
    for ent in Dir::read_from(&fd)? {
        let ent = ent?;
        let name = ent.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let kind = match ent.file_type() {
            FileType::Directory => Kind::Dir,
            FileType::RegularFile => Kind::File,
            FileType::Unknown => {
                // some file systems do not fill d_type: ask
                match rustix::fs::statat(
                    &fd,
                    ent.file_name(),
                    rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
                ) {
                    Ok(st) => match FileType::from_raw_mode(st.st_mode) {
                        FileType::Directory => Kind::Dir,
                        FileType::RegularFile => Kind::File,
                        _ => Kind::Other,
                    },
                    Err(_) => Kind::Other,
                }
            }
            _ => Kind::Other,
        };
        out.push((std::ffi::OsStr::from_bytes(name).to_os_string(), kind));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

fn beneath() -> rustix::fs::ResolveFlags {
    use rustix::fs::ResolveFlags;
    ResolveFlags::BENEATH
        | ResolveFlags::NO_SYMLINKS
        | ResolveFlags::NO_MAGICLINKS
        | ResolveFlags::NO_XDEV
}

/// Why a file beneath a root may not be given out.
#[derive(Debug)]
enum Denied {
    /// The name could not be opened (gone, a link, a mount crossing, …).
    Io(std::io::Error),
    /// Not a regular file: a FIFO, socket, device, directory or link.
    NotRegular,
    /// "Others" could not open it: a directory on its path (the root
    /// included) lacks `o+x`, or the file lacks `o+r`.
    NotForOthers,
}

impl From<rustix::io::Errno> for Denied {
    fn from(e: rustix::io::Errno) -> Denied {
        Denied::Io(e.into())
    }
}

/// Search permission for others (`o+x`) on a directory.
const OTHERS_SEARCH: u32 = 0o001;
/// Read permission for others (`o+r`) on a file.
const OTHERS_READ: u32 = 0o004;

/// Open `rel` for reading beneath the root's held descriptor, only if an
/// unprivileged local user ("others") could open it along its whole path,
/// and only if it is a regular file — without ever blocking.
///
/// The walk goes one component at a time from the root's descriptor, each
/// directory opened `O_PATH | O_NOFOLLOW | O_DIRECTORY` by `openat2`
/// (`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV`, Linux 5.6;
/// older kernels serve nothing) and `fstat`ed: the root and every directory
/// below it must grant others search (`o+x`), so a `0644` file in a `0700`
/// or `0710` directory is refused, as it is to `nobody`. Checking the held
/// descriptors, not path names, means a directory swapped mid-walk cannot
/// lend its permissions to another.
///
/// The file itself is first opened `O_PATH | O_NOFOLLOW` (no open of the
/// object happens: a FIFO or device is not opened) and `fstat`ed: it must
/// be a regular file granting `o+r`. Only then is it opened for reading,
/// `O_NONBLOCK | O_NOFOLLOW | O_NOCTTY`, so a FIFO or device swapped in
/// between the two opens is opened without waiting for a writer, and the
/// second `fstat` must show the same regular inode. Reads from a regular
/// file ignore `O_NONBLOCK`.
fn open_for_others(root: &Root, rel: &Path) -> Result<File, Denied> {
    use rustix::fs::{fstat, openat2, FileType, Mode, OFlags};
    let names: Vec<&std::ffi::OsStr> = rel
        .components()
        .map(|c| match c {
            Component::Normal(n) => Ok(n),
            _ => Err(Denied::Io(std::io::ErrorKind::InvalidInput.into())),
        })
        .collect::<Result<_, _>>()?;
    let Some((file_name, dirs)) = names.split_last() else {
        return Err(Denied::Io(std::io::ErrorKind::InvalidInput.into()));
    };
    let searchable = |st: &rustix::fs::Stat| {
        FileType::from_raw_mode(st.st_mode) == FileType::Directory
            && st.st_mode & OTHERS_SEARCH != 0
    };
    if !searchable(&fstat(root.fd.as_fd())?) {
        return Err(Denied::NotForOthers);
    }
    let path_flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut held: Option<OwnedFd> = None;
    for d in dirs {
        let at = held.as_ref().map_or(root.fd.as_fd(), |f| f.as_fd());
        let fd = openat2(
            at,
            *d,
            path_flags | OFlags::DIRECTORY,
            Mode::empty(),
            beneath(),
        )?;
        if !searchable(&fstat(&fd)?) {
            return Err(Denied::NotForOthers);
        }
        held = Some(fd);
    }
    let at = held.as_ref().map_or(root.fd.as_fd(), |f| f.as_fd());
    let probe = openat2(at, *file_name, path_flags, Mode::empty(), beneath())?;
    let st = fstat(&probe)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(Denied::NotRegular);
    }
    if st.st_mode & OTHERS_READ == 0 {
        return Err(Denied::NotForOthers);
    }
    let fd = openat2(
        at,
        *file_name,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOFOLLOW | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
        beneath(),
    )?;
    let again = fstat(&fd)?;
    if FileType::from_raw_mode(again.st_mode) != FileType::RegularFile
        || again.st_dev != st.st_dev
        || again.st_ino != st.st_ino
    {
        return Err(Denied::NotRegular);
    }
    if again.st_mode & OTHERS_READ == 0 {
        return Err(Denied::NotForOthers);
    }
    Ok(File::from(fd))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> (tempfile::TempDir, Root) {
        let t = tempfile::tempdir().unwrap();
        let app = t.path().join("app");
        std::fs::create_dir_all(app.join("lib")).unwrap();
        std::fs::write(app.join("bin"), vec![7u8; 10_000]).unwrap();
        std::fs::write(app.join("lib/a.so"), b"hello").unwrap();
        std::fs::write(t.path().join("secret"), b"outside").unwrap();
        std::os::unix::fs::symlink(t.path().join("secret"), app.join("escape")).unwrap();
        std::os::unix::fs::symlink("../secret", app.join("lib/up")).unwrap();
        let root = Root::parse(&format!("app={}", app.display())).unwrap();
        (t, root)
    }

    #[test]
    fn walks_regular_files_and_skips_links() {
        let (_t, root) = tree();
        let idx = Index::build(&[root], 4096, None).unwrap();
        let names: Vec<&str> = idx.files().map(|e| e.wire.as_str()).collect();
        assert_eq!(names, ["app/bin", "app/lib/a.so"]);
        assert_eq!(idx.skipped.not_regular, 2);
        assert_eq!(idx.bytes(), 10_005);
        let e = idx.get("app/bin").unwrap();
        assert_eq!(e.manifest.chunk_count(), 3);
        assert_eq!(e.manifest, Manifest::of_file(&e.path, 4096).unwrap());
    }

    #[test]
    fn refuses_escapes_and_unindexed_names() {
        let (t, root) = tree();
        let idx = Index::build(&[root], 4096, None).unwrap();
        for bad in [
            "../etc/passwd",
            "app/../secret",
            "app/lib/../../secret",
            "/etc/passwd",
            "app//bin",
            "app/./bin",
            "",
            "app/bin\0",
        ] {
            assert!(
                matches!(idx.resolve(bad), Err(Refusal::BadPath(_))),
                "{bad:?}"
            );
        }
        for missing in ["app/escape", "app/lib/up", "app/nope", "etc/passwd", "app"] {
            assert!(
                matches!(idx.resolve(missing), Err(Refusal::NotIndexed(_))),
                "{missing}"
            );
        }
        let e = idx.resolve("app/lib/a.so").unwrap();
        assert!(idx.open(e).is_ok());
        // replace an indexed file by a link to a file outside the root:
        // the name is still indexed, but opening refuses to follow it
        let p = t.path().join("app/lib/a.so");
        std::fs::remove_file(&p).unwrap();
        std::os::unix::fs::symlink(t.path().join("secret"), &p).unwrap();
        assert_eq!(
            idx.open(idx.resolve("app/lib/a.so").unwrap()).unwrap_err(),
            Refusal::Changed("app/lib/a.so".into())
        );
    }

    #[test]
    fn changed_files_are_refused_and_rehashed_on_rescan() {
        let (t, root) = tree();
        let idx = Index::build(std::slice::from_ref(&root), 4096, None).unwrap();
        std::fs::write(t.path().join("app/bin"), vec![8u8; 10_001]).unwrap();
        let e = idx.resolve("app/bin").unwrap();
        assert!(matches!(idx.open(e), Err(Refusal::Changed(_))));
        let again = Index::build(&[root], 4096, Some(&idx)).unwrap();
        let e2 = again.get("app/bin").unwrap();
        assert_eq!(e2.manifest.size_bytes, 10_001);
        assert_ne!(e2.manifest.root, e.manifest.root);
        // the untouched file kept its manifest
        assert_eq!(
            again.get("app/lib/a.so").unwrap().manifest,
            idx.get("app/lib/a.so").unwrap().manifest
        );
    }

    #[test]
    fn private_files_swapped_roots_and_mounts_are_not_served() {
        use std::os::unix::fs::PermissionsExt;
        let (t, root) = tree();
        let app = t.path().join("app");
        std::fs::write(app.join("private"), b"0600 secret").unwrap();
        std::fs::set_permissions(app.join("private"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        let idx = Index::build(std::slice::from_ref(&root), 4096, None).unwrap();
        assert!(matches!(
            idx.resolve("app/private"),
            Err(Refusal::NotIndexed(_))
        ));
        assert_eq!(idx.skipped.not_world_readable, 1);
        // a file made private after indexing is refused when served
        std::fs::set_permissions(app.join("bin"), std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(matches!(
            idx.open(idx.resolve("app/bin").unwrap()),
            Err(Refusal::Changed(_))
        ));
        std::fs::set_permissions(app.join("bin"), std::fs::Permissions::from_mode(0o644)).unwrap();
        // the whitelisted directory is replaced by a link to another tree:
        // the held descriptor still names the original directory
        let other = t.path().join("other");
        std::fs::create_dir(&other).unwrap();
        std::fs::write(other.join("shadow"), b"not whitelisted").unwrap();
        std::fs::rename(&app, t.path().join("app.moved")).unwrap();
        std::os::unix::fs::symlink(&other, &app).unwrap();
        let again = Index::build(std::slice::from_ref(&root), 4096, Some(&idx)).unwrap();
        let names: Vec<&str> = again.files().map(|e| e.wire.as_str()).collect();
        assert_eq!(
            names,
            ["app/bin", "app/lib/a.so"],
            "the swap is not followed"
        );
        assert!(again.open(again.get("app/bin").unwrap()).is_ok());
        // a bind mount inside a root is not crossed (needs root)
        std::fs::remove_file(&app).unwrap();
        std::fs::rename(t.path().join("app.moved"), &app).unwrap();
        std::fs::create_dir(app.join("mnt")).unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["--bind"])
            .arg(&other)
            .arg(app.join("mnt"))
            .status()
            .is_ok_and(|s| s.success());
        if !mounted {
            eprintln!("skip: bind mount part (mount --bind failed: not root?)");
            return;
        }
        let crossed = Index::build(std::slice::from_ref(&root), 4096, None);
        let _ = std::process::Command::new("umount")
            .arg(app.join("mnt"))
            .status();
        let crossed = crossed.unwrap();
        assert!(
            crossed.get("app/mnt/shadow").is_none(),
            "bind mount crossed"
        );
        assert_eq!(crossed.skipped.mount_points, 1);
    }

    /// A tree of directories with the modes of the layouts; the
    /// files "others" can open, worked out by hand from the modes.
    fn layouts() -> (tempfile::TempDir, PathBuf, Vec<&'static str>) {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        // the temp dir is 0700: let others reach the root
        std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
        let app = t.path().join("app");
        for (dir, mode) in [
            ("", 0o755),
            ("open", 0o755),
            ("open/deep", 0o700),
            ("priv", 0o700),
            ("search", 0o711),
            ("search/sub", 0o755),
            ("group", 0o750),
            ("noread", 0o733),
        ] {
            std::fs::create_dir_all(app.join(dir)).unwrap();
            std::fs::set_permissions(app.join(dir), std::fs::Permissions::from_mode(mode)).unwrap();
        }
        for (file, mode) in [
            ("top", 0o644),
            ("open/f", 0o644),
            ("open/private", 0o600),
            ("open/other_only", 0o604),
            ("open/deep/f", 0o644),
            ("priv/inner.txt", 0o644),
            ("search/f", 0o644),
            ("search/sub/f", 0o644),
            ("group/f", 0o644),
            ("noread/f", 0o644),
        ] {
            std::fs::write(app.join(file), file.as_bytes()).unwrap();
            std::fs::set_permissions(app.join(file), std::fs::Permissions::from_mode(mode))
                .unwrap();
        }
        // o+r on the file and o+x on every directory from the root down:
        // 0711 lets others through without listing, 0733 too; 0700 and 0750
        // stop them
        let served = vec![
            "app/noread/f",
            "app/open/f",
            "app/open/other_only",
            "app/search/f",
            "app/search/sub/f",
            "app/top",
        ];
        (t, app, served)
    }

    #[test]
    fn only_files_others_could_open_along_their_path_are_served() {
        use std::os::unix::fs::PermissionsExt;
        let (_t, app, served) = layouts();
        let root = Root::parse(&format!("app={}", app.display())).unwrap();
        let idx = Index::build(std::slice::from_ref(&root), 4096, None).unwrap();
        let names: Vec<&str> = idx.files().map(|e| e.wire.as_str()).collect();
        assert_eq!(names, served);
        assert_eq!(idx.skipped.not_world_readable, 4);
        // checked again at open, beneath the held descriptors: a directory
        // closed after indexing stops serving, opened again serves
        let e = idx.resolve("app/search/sub/f").unwrap();
        assert!(idx.open(e).is_ok());
        std::fs::set_permissions(app.join("search"), std::fs::Permissions::from_mode(0o710))
            .unwrap();
        assert_eq!(
            idx.open(e).unwrap_err(),
            Refusal::Changed("app/search/sub/f".into())
        );
        std::fs::set_permissions(app.join("search"), std::fs::Permissions::from_mode(0o711))
            .unwrap();
        assert!(idx.open(e).is_ok());
        // the root itself counts: a 0700 root serves nothing
        std::fs::set_permissions(&app, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(idx.open(idx.resolve("app/top").unwrap()).is_err());
        let none = Index::build(&[root], 4096, None).unwrap();
        assert!(none.is_empty(), "{:?}", none.files().collect::<Vec<_>>());
    }

    #[test]
    #[ignore = "needs root"]
    fn served_files_are_exactly_what_nobody_can_read() {
        let (_t, app, _) = layouts();
        let root = Root::parse(&format!("app={}", app.display())).unwrap();
        let idx = Index::build(&[root], 4096, None).unwrap();
        let mut files = Vec::new();
        let mut stack = vec![app.clone()];
        while let Some(d) = stack.pop() {
            for ent in std::fs::read_dir(&d).unwrap() {
                let p = ent.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    files.push(p);
                }
            }
        }
        assert_eq!(files.len(), 10);
        for p in files {
            // the independent value: whether user nobody can read it
            let Ok(out) = std::process::Command::new("runuser")
                .args(["-u", "nobody", "--", "cat"])
                .arg(&p)
                .output()
            else {
                eprintln!("skip: runuser is missing");
                return;
            };
            let wire = format!("app/{}", p.strip_prefix(&app).unwrap().display());
            let nobody_reads = out.status.success();
            if nobody_reads {
                assert_eq!(out.stdout, &wire.as_bytes()[4..]);
            }
            let served = idx.resolve(&wire).is_ok_and(|e| idx.open(e).is_ok());
            assert_eq!(served, nobody_reads, "{wire}");
        }
    }

    /// Runs `f` on a thread and fails if it takes more than 5 s: a blocking
    /// open of a FIFO would never return.
    fn within_5s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(std::time::Duration::from_secs(5))
            .expect("blocked on a special file")
    }

    #[test]
    fn fifos_sockets_and_devices_swapped_in_are_refused_without_blocking() {
        let (t, root) = tree();
        let idx = Arc::new(Index::build(std::slice::from_ref(&root), 4096, None).unwrap());
        let p = t.path().join("app/lib/a.so");
        let moved = t.path().join("a.so.orig");
        std::fs::rename(&p, &moved).unwrap();
        let fifo = |p: &Path| {
            rustix::fs::mknodat(
                rustix::fs::CWD,
                p,
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::from_raw_mode(0o644),
                0,
            )
        };
        // a FIFO: opening it for reading would wait for a writer forever
        fifo(&p).unwrap();
        let i = idx.clone();
        let got = within_5s(move || i.open(i.get("app/lib/a.so").unwrap()).map(|_| ()));
        assert_eq!(got, Err(Refusal::Changed("app/lib/a.so".into())));
        // nor does the residency scan's open
        let i = idx.clone();
        assert!(within_5s(move || i
            .open_for_scan(i.get("app/lib/a.so").unwrap())
            .is_none()));
        // and a rescan with the FIFO in place finishes, skipping it
        let r = root.clone();
        let again = within_5s(move || Index::build(&[r], 4096, None).unwrap());
        assert!(again.get("app/lib/a.so").is_none());
        assert!(
            again.get("app/bin").is_some(),
            "the others are still indexed"
        );
        std::fs::remove_file(&p).unwrap();
        // a unix socket
        let _sock = std::os::unix::net::UnixListener::bind(&p).unwrap();
        let i = idx.clone();
        let got = within_5s(move || i.open(i.get("app/lib/a.so").unwrap()).map(|_| ()));
        assert_eq!(got, Err(Refusal::Changed("app/lib/a.so".into())));
        std::fs::remove_file(&p).unwrap();
        // a character device (1,3 is what /dev/null is), made in the temp dir
        let dev = rustix::fs::mknodat(
            rustix::fs::CWD,
            &p,
            rustix::fs::FileType::CharacterDevice,
            rustix::fs::Mode::from_raw_mode(0o644),
            rustix::fs::makedev(1, 3),
        );
        if dev.is_ok() {
            let i = idx.clone();
            let got = within_5s(move || i.open(i.get("app/lib/a.so").unwrap()).map(|_| ()));
            assert_eq!(got, Err(Refusal::Changed("app/lib/a.so".into())));
            let i = idx.clone();
            assert!(within_5s(move || i
                .open_for_scan(i.get("app/lib/a.so").unwrap())
                .is_none()));
            let d = open_for_others(&root, Path::new("lib/a.so"));
            assert!(matches!(d, Err(Denied::NotRegular)), "{d:?}");
            std::fs::remove_file(&p).unwrap();
        } else {
            eprintln!("skip: device node part (mknod needs CAP_MKNOD)");
        }
        // the file back: served and scanned again
        std::fs::rename(&moved, &p).unwrap();
        assert!(idx.open(idx.get("app/lib/a.so").unwrap()).is_ok());
        assert!(idx
            .open_for_scan(idx.get("app/lib/a.so").unwrap())
            .is_some());
    }

    #[test]
    fn root_names_and_errors() {
        let t = tempfile::tempdir().unwrap();
        let r = Root::parse(t.path().to_str().unwrap()).unwrap();
        assert_eq!(
            r.name,
            std::fs::canonicalize(t.path()).unwrap().to_str().unwrap()[1..]
        );
        let e = Root::parse("/no/such/dir/x").unwrap_err();
        assert!(
            e.is_bad_input() && e.to_string().contains("/no/such/dir/x"),
            "{e}"
        );
        let e = Root::parse(&format!("..={}", t.path().display())).unwrap_err();
        assert!(e.to_string().contains("root name"), "{e}");
        let dup = [r.clone(), r];
        let e = Index::build(&dup, 4096, None).unwrap_err();
        assert!(e.to_string().contains("two roots"), "{e}");
    }
}
