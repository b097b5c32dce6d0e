//! What spins a disk down and reads its power state: one [`Actuator`]
//! per kind of disk, one file each ([`super::emu`] for the emulated disk
//! of `fallow emulate-disk`, [`super::ata`] for ATA disks through SG_IO).
//! Reading the state must never wake a sleeping disk (smartmontools 57:
//! a SMART query spins many drives up); both actuators only ask what the
//! drive answers from its electronics.

use crate::error::Result;

/// A disk's power state as its actuator reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskPower {
    /// Spinning (active or idle).
    Spinning,
    /// Spun down (ATA standby; the emulator's standby or spinning down).
    Standby,
    /// Spinning up.
    SpinningUp,
}

impl DiskPower {
    /// `spinning`, `standby`, `spinning-up`.
    pub fn name(self) -> &'static str {
        match self {
            DiskPower::Spinning => "spinning",
            DiskPower::Standby => "standby",
            DiskPower::SpinningUp => "spinning-up",
        }
    }
}

/// Spins a disk down and reads its power state without waking it.
pub trait Actuator: Send {
    /// What it is, for messages: `ata:/dev/sdb`, `emulated:/mnt/emu/power`.
    fn describe(&self) -> String;

    /// The power state now; never wakes the disk.
    fn check(&mut self) -> Result<DiskPower>;

    /// Spin the disk down now (STANDBY IMMEDIATE).
    fn standby(&mut self) -> Result<()>;
}
