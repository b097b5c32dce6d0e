//! Loop devices for the root tests (`scrub`, `run`, `native`, `spindown`):
//! an image file attached with `losetup -f --show`, detached when the
//! guard drops. Attaching fails (with the reason, for the test's `skip:`
//! line) where losetup is missing or no loop device is free.

use super::{path_str, run_tool};
use std::path::Path;

/// An attached loop device; `losetup -d` on drop.
pub struct LoopDev {
    /// `/dev/loopN`.
    pub dev: String,
}

impl LoopDev {
    /// Attach `image`.
    pub fn attach(image: &Path) -> Result<LoopDev, String> {
        run_tool("losetup", &["-f", "--show", path_str(image)]).map(|dev| LoopDev { dev })
    }

    /// Make `image` a sparse file of `len_bytes` and attach it.
    pub fn sparse(image: &Path, len_bytes: u64) -> Result<LoopDev, String> {
        std::fs::File::create(image)
            .and_then(|f| f.set_len(len_bytes))
            .unwrap_or_else(|e| panic!("{}: {e}", image.display()));
        LoopDev::attach(image)
    }

    /// `loopN`, the name under `/sys/block`.
    pub fn name(&self) -> &str {
        self.dev.trim_start_matches("/dev/")
    }
}

impl Drop for LoopDev {
    fn drop(&mut self) {
        let _ = run_tool("losetup", &["-d", &self.dev]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[ignore = "needs root"]
    fn a_sparse_image_is_attached_and_detached() {
        super::super::need_root("a loop device");
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("x.img");
        let lo = match LoopDev::sparse(&img, 1 << 20) {
            Ok(lo) => lo,
            Err(e) => panic!("losetup: {e}"),
        };
        // the kernel's size, in 512-byte sectors: 1 MiB = 2048
        let sectors = std::fs::read_to_string(format!("/sys/block/{}/size", lo.name())).unwrap();
        assert_eq!(sectors.trim(), "2048");
        let dev = lo.dev.clone();
        drop(lo);
        let listed = run_tool("losetup", &["-a"]).unwrap();
        assert!(!listed.contains(&format!("{dev}:")), "{listed}");
    }
}
