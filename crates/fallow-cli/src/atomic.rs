//! Atomic file output: write to a temporary file in the destination's
//! directory, fsync it, rename it over the destination, fsync the directory.
//! A crash or a failed write never leaves a truncated report or cache behind;
//! readers see either the old file or the complete new one.

use anyhow::{Context, Result};
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Write `path` atomically with the bytes `write` produces.
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> Result<()>,
) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .with_context(|| format!("{}: not a file name", path.display()))?;
    if path.is_dir() {
        return Err(crate::BadInput(format!("{}: is a directory", path.display())).into());
    }
    let (tmp_path, file) = create_temp(&dir, &name.to_string_lossy())?;
    let result = (|| -> Result<()> {
        let mut out = BufWriter::with_capacity(1 << 20, file);
        write(&mut out)?;
        let file = out
            .into_inner()
            .map_err(|e| e.into_error())
            .with_context(|| format!("{}: write failed", tmp_path.display()))?;
        file.sync_all()
            .with_context(|| format!("{}: fsync failed", tmp_path.display()))?;
        drop(file);
        fs::rename(&tmp_path, path).with_context(|| {
            format!(
                "cannot move {} into place as {}",
                tmp_path.display(),
                path.display()
            )
        })?;
        // Make the rename itself durable. Not every platform can open a
        // directory for syncing; the data is safe either way.
        if let Ok(d) = File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp_path);
    }
    result
}

/// A new, exclusively created temporary file next to the destination.
fn create_temp(dir: &Path, name: &str) -> Result<(PathBuf, File)> {
    let pid = std::process::id();
    let mut last_err = None;
    for attempt in 0..100u32 {
        let tmp = dir.join(format!(".{name}.{pid}.{attempt}.tmp"));
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last_err = Some(e),
            Err(e) => {
                return Err(e).with_context(|| format!("cannot create a file in {}", dir.display()))
            }
        }
    }
    Err(last_err.expect("at least one attempt"))
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.txt");
        write_atomically(&p, |w| Ok(w.write_all(b"one")?)).unwrap();
        write_atomically(&p, |w| Ok(w.write_all(b"two")?)).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "two");
        // a failing writer leaves the old file and no temporary behind
        let err = write_atomically(&p, |w| {
            w.write_all(b"partial")?;
            anyhow::bail!("boom")
        });
        assert!(err.is_err());
        assert_eq!(fs::read_to_string(&p).unwrap(), "two");
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
    }
}
