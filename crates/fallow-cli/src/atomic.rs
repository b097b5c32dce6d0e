//! File outputs of the CLI: the `--overwrite` flag, the check every output
//! path passes before any work starts ([`fallow_core::outpath`]: never an
//! input, a device node, a FIFO, a directory, or an existing file fallow
//! does not recognise as its own), and the atomic write itself (temporary
//! file, fsync, rename, fsync of the directory), so a crash or a failed
//! write never leaves a truncated report or cache behind.

use anyhow::{Context, Result};
use clap::Args;
use fallow_core::outpath::{self, OutputGuard, OutputKind};
use std::io::Write;
use std::path::Path;

/// The help heading of every flag that names an output file: `--help`
/// lists them together, and the outputs test (tests/integration/outputs.rs)
/// finds every one through it and runs it against an input, a FIFO, a
/// device node and a foreign file. A new output flag carries it.
pub const OUTPUT_FILES: &str = "Output files";

/// `--overwrite`, flattened into every command that writes files.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct OverwriteArg {
    /// Replace an existing output file even if fallow does not recognise it
    /// as its own (an HTML/JSON report it wrote, a checkpoint, a converted
    /// trace). Inputs of the command, device nodes, FIFOs and directories
    /// are refused regardless.
    #[arg(long)]
    pub overwrite: bool,
}

impl OverwriteArg {
    /// A guard over `inputs` (paths that do not exist are left out).
    pub fn guard<'a>(self, inputs: impl IntoIterator<Item = &'a Path>) -> OutputGuard {
        let mut g = OutputGuard::new(self.overwrite);
        for p in inputs {
            g.add_input(p);
        }
        g
    }
}

/// Check `path` as output `kind` of `flag` (see [`fallow_core::outpath`]).
pub fn check(guard: &OutputGuard, path: &Path, kind: OutputKind, flag: &str) -> Result<()> {
    guard.check(path, kind, flag)?;
    Ok(())
}

/// Write `path` atomically with the bytes `write` produces. Callers check
/// the path with [`check`] first, before any work.
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> Result<()>,
) -> Result<()> {
    let mut failure = None;
    let result = outpath::write_atomically(path, |w| {
        write(w).map_err(|e| {
            let io = std::io::Error::other(e.to_string());
            failure = Some(e);
            io
        })
    });
    match (result, failure) {
        (Ok(()), _) => Ok(()),
        (Err(_), Some(e)) => Err(e.context(format!("cannot write {}", path.display()))),
        (Err(e), None) => Err(e).with_context(|| format!("cannot write {}", path.display())),
    }
}

/// The result of a library's atomic write of `path` (a page of
/// `fallow_report`), its error naming the file as [`write_atomically`]'s do.
pub fn written(path: &Path, result: std::io::Result<()>) -> Result<()> {
    result.with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

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
        assert!(err.unwrap_err().chain().any(|c| c.to_string() == "boom"));
        assert_eq!(fs::read_to_string(&p).unwrap(), "two");
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
    }
}
