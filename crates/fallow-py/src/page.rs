//! `html=` and `overwrite=`: where a function writes its HTML page
//! (`fallow_report`, the CLI's `--html` page byte for byte). The path is
//! checked before any work, as the CLI checks `--html`: never one of the
//! inputs, a device node or a FIFO, nor a file fallow did not write unless
//! `overwrite=True`.

use crate::errors::Result;
use fallow_core::outpath::{OutputGuard, OutputKind};
use std::path::{Path, PathBuf};

/// A page to write, its path checked; or none asked for.
pub(crate) struct Page(Option<PathBuf>);

impl Page {
    /// Check `html` (if given) against `inputs` (paths that do not exist,
    /// such as an in-memory trace's empty path, are left out).
    pub(crate) fn checked<'a>(
        html: Option<PathBuf>,
        overwrite: bool,
        inputs: impl IntoIterator<Item = &'a Path>,
    ) -> Result<Page> {
        if let Some(p) = &html {
            let mut guard = OutputGuard::new(overwrite);
            for i in inputs {
                guard.add_input(i);
            }
            guard.check(p, OutputKind::HtmlReport, "html")?;
        }
        Ok(Page(html))
    }

    /// Write the page with `write` (one of `fallow_report`'s writers) if
    /// one was asked for; a failure names the file.
    pub(crate) fn write(
        &self,
        write: impl FnOnce(&Path) -> std::io::Result<()>,
    ) -> fallow_core::Result<()> {
        match &self.0 {
            Some(path) => write(path).map_err(|source| fallow_core::Error::Io {
                path: path.clone(),
                source,
            }),
            None => Ok(()),
        }
    }
}
