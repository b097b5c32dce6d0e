//! SCSI and SAS disks: spun down with START STOP UNIT with the STANDBY
//! power condition (SBC-3 §5.25: POWER CONDITION 3h, what `sg_start
//! --pc=3` sends), from which the drive returns to active by itself on
//! the next media access, unlike a plain STOP (START=0, what `sg_start
//! --stop` and `sdparm --command=stop` send), after which some drives
//! want a START UNIT first. The power condition is read with REQUEST
//! SENSE (what `sg_requests` sends), which a drive answers without
//! leaving it: ASC 5Eh names a low-power condition (SPC-4 Table 50), and
//! 04h/02h a stopped drive.
//!
//! tests/data/spindown/sg_io_reference.strace holds the command blocks
//! those tools sent, recorded with strace, and the tests compare byte for
//! byte. No drive has been spun down by these tests; this machine has no
//! SCSI disk.

use super::actuator::{Actuator, DiskPower};
use crate::error::{Error, Result};
use crate::scrub::sgio::{ioctl, send_in, sense_key, SENSE_BYTES};
use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// START STOP UNIT(6) with POWER CONDITION 3h (STANDBY), IMMED 0.
pub fn start_stop_standby() -> [u8; 6] {
    [0x1b, 0x00, 0x00, 0x00, 0x3 << 4, 0x00]
}

/// REQUEST SENSE(6) for up to 252 bytes of fixed or descriptor sense.
pub fn request_sense() -> [u8; 6] {
    [0x03, 0x00, 0x00, 0x00, 0xfc, 0x00]
}

/// The power condition a REQUEST SENSE answer reports: standby for ASC
/// 5Eh with ASCQ 02h, 04h (standby by timer or command), 09h, 0Ah
/// (standby_y), and for a stopped drive (04h/02h: initializing command
/// required); spinning otherwise (no sense, idle conditions).
pub fn power_of_sense(sense: &[u8]) -> Option<DiskPower> {
    let (_, asc, ascq) = sense_key(sense)?;
    Some(match (asc, ascq) {
        (0x5e, 0x02 | 0x04 | 0x09 | 0x0a) | (0x04, 0x02) => DiskPower::Standby,
        _ => DiskPower::Spinning,
    })
}

/// A SCSI disk through SG_IO.
#[derive(Debug)]
pub struct ScsiActuator {
    path: PathBuf,
    file: File,
}

impl ScsiActuator {
    /// Open `dev` and probe it with REQUEST SENSE; errors say why it
    /// cannot be used.
    pub fn open(dev: &Path) -> Result<ScsiActuator> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(dev)
            .map_err(|e| Error::io(dev, "cannot open for SCSI commands", e))?;
        let mut a = ScsiActuator {
            path: dev.to_path_buf(),
            file,
        };
        a.check()?;
        Ok(a)
    }

    fn refused(&self, what: &str, e: &std::io::Error) -> Error {
        match e.raw_os_error() {
            Some(25 | 22 | 95) => Error::Unsupported(format!(
                "{}: {what}: the device does not take SG_IO ({e})",
                self.path.display()
            )),
            _ => Error::io(
                &self.path,
                format!("{what} (SG_IO)"),
                std::io::Error::other(e.to_string()),
            ),
        }
    }
}

impl Actuator for ScsiActuator {
    fn describe(&self) -> String {
        format!("scsi:{}", self.path.display())
    }

    fn check(&mut self) -> Result<DiskPower> {
        let mut data = [0u8; 252];
        let mut sense = [0u8; SENSE_BYTES];
        let (status, _, _, _, n) = send_in(&self.file, &request_sense(), &mut data, &mut sense)
            .map_err(|e| self.refused("REQUEST SENSE", &e))?;
        if status != 0 {
            return Err(Error::Unsupported(format!(
                "{}: REQUEST SENSE failed: status {status:#04x}",
                self.path.display()
            )));
        }
        // no sense data at all: nothing to report, the drive is ready
        Ok(power_of_sense(&data[..n]).unwrap_or(DiskPower::Spinning))
    }

    fn standby(&mut self) -> Result<()> {
        let mut sense = [0u8; SENSE_BYTES];
        let (status, host, _, n) = ioctl::send(&self.file, &start_stop_standby(), &mut sense)
            .map_err(|e| self.refused("START STOP UNIT", &e))?;
        if status == 0 && host == 0 {
            return Ok(());
        }
        Err(Error::Unsupported(match sense_key(&sense[..n]) {
            Some((key, asc, ascq)) => format!(
                "{}: START STOP UNIT (standby) failed: sense key {key:#x}, ASC/ASCQ {asc:#04x}/{ascq:#04x}",
                self.path.display()
            ),
            None => format!(
                "{}: START STOP UNIT (standby) failed: status {status:#04x}, host {host:#06x}",
                self.path.display()
            ),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spindown::ata::tests::recorded;

    #[test]
    fn the_commands_are_sg3_utils_byte_for_byte() {
        assert_eq!(
            recorded("sg_start --pc=3"),
            vec![start_stop_standby().to_vec()]
        );
        assert_eq!(recorded("sg_requests"), vec![request_sense().to_vec()]);
        // and not the plain STOP (sg_start --stop, sdparm --command=stop)
        assert_ne!(
            recorded("sg_start --stop")[0],
            start_stop_standby().to_vec()
        );
    }

    #[test]
    fn the_power_condition_is_read_from_sense() {
        // fixed sense, NO SENSE, 5E/04: standby condition activated by command
        let mut f = [0u8; 18];
        f[0] = 0x70;
        f[7] = 10;
        f[12] = 0x5e;
        f[13] = 0x04;
        assert_eq!(power_of_sense(&f), Some(DiskPower::Standby));
        f[13] = 0x03; // idle condition activated by command: still spinning
        assert_eq!(power_of_sense(&f), Some(DiskPower::Spinning));
        // descriptor sense, NOT READY 04/02: stopped
        let d = [0x72, 0x02, 0x04, 0x02, 0, 0, 0, 0];
        assert_eq!(power_of_sense(&d), Some(DiskPower::Standby));
        assert_eq!(power_of_sense(&[0u8; 18]), None);
    }

    #[test]
    fn a_device_without_sg_io_is_refused_in_words() {
        let f = tempfile::NamedTempFile::new().unwrap();
        let e = ScsiActuator::open(f.path()).unwrap_err().to_string();
        assert!(
            e.contains("does not take SG_IO") && e.contains("REQUEST SENSE"),
            "{e}"
        );
    }
}
