//! How a scrub verifies (`--verify-cmd`): a value the settings hold and
//! the scrub session acts on, so it sits below both.

/// How the scrub verifies (`--verify-cmd`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VerifyMode {
    /// Reads, never SCSI VERIFY.
    Off,
    /// SCSI VERIFY where the device takes it, reads otherwise.
    Auto,
    /// SCSI VERIFY or nothing.
    Required,
}
