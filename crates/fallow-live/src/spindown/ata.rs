//! ATA disks: STANDBY IMMEDIATE (0xE0) and CHECK POWER MODE (0xE5) sent
//! through `SG_IO` as SCSI ATA PASS-THROUGH(16) (SAT-3 §12.2.2), what
//! `hdparm -y` and `hdparm -C` send. CHECK POWER MODE is answered by the
//! drive's electronics and does not spin it up (ACS-3 §7.3; smartmontools
//! 57 is about SMART reads, which do); its answer comes back in the
//! COUNT field, returned in sense data because CK_COND is set.
//!
//! Each is sent with hdparm's bytes (the DEVICE register's LBA bit set)
//! and, when the drive rejects it, hdparm's fallback opcode (ATA-1's 0x94
//! and 0x98): tests/data/spindown/sg_io_reference.strace holds what
//! hdparm sent, recorded with strace, and the tests compare byte for byte.
//! No drive has been spun down by these tests.
//!
//! Only disks behind libata's SCSI translation (SATA on AHCI, USB bridges
//! that pass ATA through) take this. Loop, virtio, NVMe, device-mapper and
//! FUSE-backed devices refuse the ioctl (ENOTTY or EINVAL): [`AtaActuator::open`]
//! probes with CHECK POWER MODE and says so in words. This machine has
//! no ATA disk, so what is tested here is that refusal, the command
//! blocks and the decoding of the drive's answer.

use super::actuator::{Actuator, DiskPower};
use crate::error::{Error, Result};
use crate::scrub::sgio::{ioctl, sense_key, SENSE_BYTES};
use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// ATA command STANDBY IMMEDIATE.
pub const ATA_STANDBY_IMMEDIATE: u8 = 0xe0;
/// ATA command CHECK POWER MODE.
pub const ATA_CHECK_POWER_MODE: u8 = 0xe5;
/// STANDBY IMMEDIATE's opcodes in the order hdparm tries them: ACS's 0xE0,
/// then ATA-1's 0x94 for old drives that abort the first
/// (hdparm's ATA_OP_STANDBYNOW1/2).
pub const STANDBY_OPCODES: [u8; 2] = [ATA_STANDBY_IMMEDIATE, 0x94];
/// CHECK POWER MODE's opcodes, hdparm's order: 0xE5, then ATA-1's 0x98.
pub const CHECK_POWER_OPCODES: [u8; 2] = [ATA_CHECK_POWER_MODE, 0x98];

/// An ATA PASS-THROUGH(16) command block for a non-data ATA command,
/// asking for the ATA registers back (CK_COND).
pub fn pass_through16(command: u8) -> [u8; 16] {
    let mut c = [0u8; 16];
    c[0] = 0x85; // ATA PASS-THROUGH(16)
    c[1] = 3 << 1; // PROTOCOL 3: non-data; EXTEND 0
    c[2] = 0x20; // CK_COND: return the registers in the sense data; no transfer
    c[13] = 0x40; // DEVICE: the LBA bit, as hdparm sets it
    c[14] = command;
    c
}

/// The COUNT register of the ATA status return in sense data: the
/// descriptor format's ATA Status Return descriptor (code 0x09, SAT-3
/// §12.2.2.6) or the fixed format's INFORMATION field (SAT-3 §12.2.2.7:
/// ERROR, STATUS, DEVICE, COUNT in bytes 3 to 6).
pub fn ata_count(sense: &[u8]) -> Option<u8> {
    match sense.first().map(|b| b & 0x7f)? {
        0x72 | 0x73 => {
            let extra = *sense.get(7)? as usize;
            let mut i = 8;
            let end = (8 + extra).min(sense.len());
            while i + 1 < end {
                let (code, len) = (sense[i], sense[i + 1] as usize);
                if code == 0x09 {
                    return sense.get(i + 5).copied();
                }
                i += 2 + len;
            }
            None
        }
        0x70 | 0x71 => sense.get(6).copied(),
        _ => None,
    }
}

/// The power mode from CHECK POWER MODE's COUNT (ACS-3 Table 74):
/// 0x00 standby, 0x01 standby (EPC standby_y), 0x40/0x41 NV cache power
/// modes with the spindle down/up, 0x80 idle, 0x81–0x83 EPC idle_a/b/c,
/// 0xFF active or idle.
pub fn power_of_count(count: u8) -> DiskPower {
    match count {
        0x00 | 0x01 | 0x40 => DiskPower::Standby,
        _ => DiskPower::Spinning,
    }
}

/// An ATA disk through SG_IO.
#[derive(Debug)]
pub struct AtaActuator {
    path: PathBuf,
    file: File,
}

impl AtaActuator {
    /// Open `dev` (a whole disk, `/dev/sdb`) and probe it with CHECK POWER
    /// MODE. Errors say why it cannot be used.
    pub fn open(dev: &Path) -> Result<AtaActuator> {
        // O_NONBLOCK: opening must not wait on a removable medium
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(dev)
            .map_err(|e| Error::io(dev, "cannot open for ATA pass-through", e))?;
        let mut a = AtaActuator {
            path: dev.to_path_buf(),
            file,
        };
        a.check()?;
        Ok(a)
    }

    fn send(&self, command: u8, what: &str) -> Result<Option<u8>> {
        let mut sense = [0u8; SENSE_BYTES];
        let (status, host, driver, n) =
            ioctl::send(&self.file, &pass_through16(command), &mut sense).map_err(|e| {
                match e.raw_os_error() {
                    // ENOTTY, EINVAL, EOPNOTSUPP: no SCSI generic interface
                    Some(25 | 22 | 95) => Error::Unsupported(format!(
                        "{}: {what}: the device does not take SG_IO ATA pass-through ({e}); \
                     only SATA disks behind libata (and USB bridges that pass ATA through) do — \
                     loop, virtio, NVMe, device-mapper and FUSE-backed devices refuse it",
                        self.path.display()
                    )),
                    _ => Error::io(&self.path, format!("{what} (SG_IO)"), e),
                }
            })?;
        let sense = &sense[..n];
        // with CK_COND the good completion is CHECK CONDITION carrying
        // RECOVERED ERROR / ATA PASS-THROUGH INFORMATION AVAILABLE (0x00/0x1D)
        let ok = match sense_key(sense) {
            None => status == 0 && host == 0,
            Some((0x0 | 0x1, 0x00, 0x1d)) => true,
            Some((0x0, 0, 0)) => true,
            Some((0x5, 0x20 | 0x24, _)) => {
                return Err(Error::Unsupported(format!(
                    "{}: {what}: the device rejected ATA PASS-THROUGH (ILLEGAL REQUEST): \
                     not an ATA disk, or a bridge that does not pass ATA commands",
                    self.path.display()
                )))
            }
            Some((key, asc, ascq)) => {
                return Err(Error::Unsupported(format!(
                    "{}: {what} failed: sense key {key:#x}, ASC/ASCQ {asc:#04x}/{ascq:#04x}",
                    self.path.display()
                )))
            }
        };
        if !ok {
            return Err(Error::Unsupported(format!(
                "{}: {what} failed: status {status:#04x}, host {host:#06x}, driver {driver:#06x}",
                self.path.display()
            )));
        }
        Ok(ata_count(sense))
    }
}

impl AtaActuator {
    /// The first opcode, then its fallback when the drive rejects the
    /// first (hdparm's order). A device without SG_IO is not asked twice.
    fn send_either(&self, opcodes: [u8; 2], what: &str) -> Result<Option<u8>> {
        match self.send(opcodes[0], what) {
            Err(Error::Unsupported(m)) if !m.contains("does not take SG_IO") => self.send(
                opcodes[1],
                &format!("{what} ({:#04x}, after {m})", opcodes[1]),
            ),
            r => r,
        }
    }
}

impl Actuator for AtaActuator {
    fn describe(&self) -> String {
        format!("ata:{}", self.path.display())
    }

    fn check(&mut self) -> Result<DiskPower> {
        match self.send_either(CHECK_POWER_OPCODES, "CHECK POWER MODE")? {
            Some(count) => Ok(power_of_count(count)),
            None => Err(Error::Unsupported(format!(
                "{}: CHECK POWER MODE: the answer carried no ATA registers",
                self.path.display()
            ))),
        }
    }

    fn standby(&mut self) -> Result<()> {
        self.send_either(STANDBY_OPCODES, "STANDBY IMMEDIATE")
            .map(|_| ())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn command_blocks_are_sat3_pass_through16() {
        let c = pass_through16(ATA_STANDBY_IMMEDIATE);
        assert_eq!(c[0], 0x85);
        assert_eq!(c[1] >> 1 & 0x0f, 3, "non-data protocol");
        assert_eq!(c[2] & 0x20, 0x20, "CK_COND");
        assert_eq!(c[2] & 0x03, 0, "no transfer length");
        assert_eq!(c[14], 0xe0);
        assert_eq!(pass_through16(ATA_CHECK_POWER_MODE)[14], 0xe5);
    }

    /// The SG_IO command blocks of each `$ TOOL …` block of the recorded
    /// strace output (tests/data/spindown/sg_io_reference.strace).
    pub(crate) fn recorded(tool: &str) -> Vec<Vec<u8>> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/spindown/sg_io_reference.strace"
        );
        let text = std::fs::read_to_string(path).unwrap();
        let mut out = Vec::new();
        let mut inside = false;
        for line in text.lines() {
            if let Some(cmd) = line.strip_prefix("$ ") {
                inside = cmd.starts_with(&format!("{tool} "));
                continue;
            }
            if !inside || !line.contains("SG_IO") {
                continue;
            }
            let cmdp = line
                .split("cmdp=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap();
            out.push(
                cmdp.split("\\x")
                    .skip(1)
                    .map(|h| u8::from_str_radix(h, 16).unwrap())
                    .collect(),
            );
        }
        assert!(!out.is_empty(), "no SG_IO recorded for {tool}");
        out
    }

    #[test]
    fn the_commands_are_hdparms_byte_for_byte_fallbacks_included() {
        // hdparm -y: STANDBY IMMEDIATE 0xE0, then 0x94
        let ours: Vec<Vec<u8>> = STANDBY_OPCODES
            .iter()
            .map(|&o| pass_through16(o).to_vec())
            .collect();
        assert_eq!(recorded("hdparm -y"), ours);
        // hdparm -C: CHECK POWER MODE 0xE5, then 0x98
        let ours: Vec<Vec<u8>> = CHECK_POWER_OPCODES
            .iter()
            .map(|&o| pass_through16(o).to_vec())
            .collect();
        assert_eq!(recorded("hdparm -C"), ours);
    }

    #[test]
    fn count_is_read_from_either_sense_format() {
        // descriptor sense: RECOVERED ERROR, 00/1D, one ATA Status Return
        // descriptor (09h, length 0Ch): extend, error, count(15:8), count(7:0)…
        let mut d = [0u8; 22];
        d[0] = 0x72;
        d[1] = 0x01;
        d[2] = 0x00;
        d[3] = 0x1d;
        d[7] = 14;
        d[8] = 0x09;
        d[9] = 0x0c;
        d[13] = 0x00; // COUNT: standby
        assert_eq!(ata_count(&d), Some(0x00));
        d[13] = 0xff;
        assert_eq!(ata_count(&d), Some(0xff));
        // fixed sense: INFORMATION = ERROR, STATUS, DEVICE, COUNT
        let mut f = [0u8; 18];
        f[0] = 0x70;
        f[2] = 0x01;
        f[6] = 0x80;
        f[12] = 0x00;
        f[13] = 0x1d;
        assert_eq!(ata_count(&f), Some(0x80));
        assert_eq!(ata_count(&[0x00; 8]), None);
        assert_eq!(power_of_count(0x00), DiskPower::Standby);
        assert_eq!(power_of_count(0x80), DiskPower::Spinning);
        assert_eq!(power_of_count(0xff), DiskPower::Spinning);
    }

    #[test]
    fn a_device_without_sg_io_is_refused_in_words() {
        // a regular file refuses the ioctl like a loop device does (ENOTTY)
        let f = tempfile::NamedTempFile::new().unwrap();
        let e = AtaActuator::open(f.path()).unwrap_err().to_string();
        assert!(
            e.contains("does not take SG_IO") && e.contains("CHECK POWER MODE"),
            "{e}"
        );
    }
}
