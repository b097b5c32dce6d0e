//! SCSI VERIFY through `SG_IO`: the drive checks its media itself and no
//! data crosses the bus or pollutes the caches (Practical Scrubbing
//! §III-A: what scrubbers issue). Their §III-A also found that ATA drives
//! answer ATA VERIFY (what libata translates VERIFY to on SATA) from their
//! on-disk cache: on SATA disks reads with `O_DIRECT` are the surer test.
//!
//! Only SCSI (and SATA behind libata's SCSI layer) disks take it; loop,
//! virtio, NVMe and device-mapper devices refuse the ioctl (`ENOTTY`),
//! and [`SgVerifier::probe`] says so in words so the caller can fall back
//! to reads. The one `unsafe` block of the crate is here: the ioctl.

use super::narrow::Verifier;
use std::fs::File;
use std::io;
use std::os::fd::AsFd;

/// `SG_IO` from `<scsi/sg.h>` (an old-style number, not `_IOWR`-encoded).
const SG_IO: rustix::ioctl::Opcode = 0x2285;
const SG_DXFER_NONE: i32 = -1;
pub(crate) const SENSE_BYTES: usize = 32;
const TIMEOUT_MS: u32 = 60_000;

/// `struct sg_io_hdr` from `<scsi/sg.h>`.
#[repr(C)]
#[derive(Debug)]
struct SgIoHdr {
    interface_id: i32,
    dxfer_direction: i32,
    cmd_len: u8,
    mx_sb_len: u8,
    iovec_count: u16,
    dxfer_len: u32,
    dxferp: *mut u8,
    cmdp: *const u8,
    sbp: *mut u8,
    timeout: u32,
    flags: u32,
    pack_id: i32,
    usr_ptr: *mut u8,
    status: u8,
    masked_status: u8,
    msg_status: u8,
    sb_len_wr: u8,
    host_status: u16,
    driver_status: u16,
    resid: i32,
    duration: u32,
    info: u32,
}

#[allow(unsafe_code)]
pub(crate) mod ioctl {
    use super::*;

    /// Send a no-data command and return (SCSI status, host status, driver
    /// status, sense bytes written).
    pub(crate) fn send(
        file: &File,
        cdb: &[u8],
        sense: &mut [u8; SENSE_BYTES],
    ) -> io::Result<(u8, u16, u16, usize)> {
        let mut hdr = SgIoHdr {
            interface_id: i32::from(b'S'),
            dxfer_direction: SG_DXFER_NONE,
            cmd_len: cdb.len() as u8,
            mx_sb_len: SENSE_BYTES as u8,
            iovec_count: 0,
            dxfer_len: 0,
            dxferp: std::ptr::null_mut(),
            cmdp: cdb.as_ptr(),
            sbp: sense.as_mut_ptr(),
            timeout: TIMEOUT_MS,
            flags: 0,
            pack_id: 0,
            usr_ptr: std::ptr::null_mut(),
            status: 0,
            masked_status: 0,
            msg_status: 0,
            sb_len_wr: 0,
            host_status: 0,
            driver_status: 0,
            resid: 0,
            duration: 0,
            info: 0,
        };
        // SAFETY: SG_IO takes a `struct sg_io_hdr *`, which `SgIoHdr`
        // mirrors field for field (`repr(C)`). The command and sense
        // buffers it points to outlive the call (borrowed for its whole
        // duration), `mx_sb_len` is the sense buffer's length, and no data
        // buffer is passed (`SG_DXFER_NONE`, `dxfer_len` 0). The call is
        // synchronous: the kernel keeps no pointer after it returns.
        unsafe {
            let req = rustix::ioctl::Updater::<SG_IO, SgIoHdr>::new(&mut hdr);
            rustix::ioctl::ioctl(file.as_fd(), req)?;
        }
        Ok((
            hdr.status,
            hdr.host_status,
            hdr.driver_status,
            usize::from(hdr.sb_len_wr).min(SENSE_BYTES),
        ))
    }
}

/// Send a command that reads `data` from the device (SG_DXFER_FROM_DEV,
/// REQUEST SENSE) and return (SCSI status, host status, driver status,
/// sense bytes written, data bytes read).
#[allow(unsafe_code)]
pub(crate) fn send_in(
    file: &File,
    cdb: &[u8],
    data: &mut [u8],
    sense: &mut [u8; SENSE_BYTES],
) -> io::Result<(u8, u16, u16, usize, usize)> {
    const SG_DXFER_FROM_DEV: i32 = -3;
    let mut hdr = SgIoHdr {
        interface_id: i32::from(b'S'),
        dxfer_direction: SG_DXFER_FROM_DEV,
        cmd_len: cdb.len() as u8,
        mx_sb_len: SENSE_BYTES as u8,
        iovec_count: 0,
        dxfer_len: data.len() as u32,
        dxferp: data.as_mut_ptr(),
        cmdp: cdb.as_ptr(),
        sbp: sense.as_mut_ptr(),
        timeout: TIMEOUT_MS,
        flags: 0,
        pack_id: 0,
        usr_ptr: std::ptr::null_mut(),
        status: 0,
        masked_status: 0,
        msg_status: 0,
        sb_len_wr: 0,
        host_status: 0,
        driver_status: 0,
        resid: 0,
        duration: 0,
        info: 0,
    };
    // SAFETY: as in `ioctl::send`, with a data buffer: `dxferp` points to
    // `data`, borrowed mutably for the whole synchronous call, and
    // `dxfer_len` is its length, so the kernel writes within it.
    unsafe {
        let req = rustix::ioctl::Updater::<SG_IO, SgIoHdr>::new(&mut hdr);
        rustix::ioctl::ioctl(file.as_fd(), req)?;
    }
    let read = data
        .len()
        .saturating_sub(usize::try_from(hdr.resid.max(0)).unwrap_or(0));
    Ok((
        hdr.status,
        hdr.host_status,
        hdr.driver_status,
        usize::from(hdr.sb_len_wr).min(SENSE_BYTES),
        read,
    ))
}

/// Sense key, ASC and ASCQ from fixed (0x70/0x71) or descriptor
/// (0x72/0x73) sense data.
pub(crate) fn sense_key(sense: &[u8]) -> Option<(u8, u8, u8)> {
    match sense.first().map(|b| b & 0x7f) {
        Some(0x70 | 0x71) if sense.len() >= 14 => Some((sense[2] & 0x0f, sense[12], sense[13])),
        Some(0x72 | 0x73) if sense.len() >= 4 => Some((sense[1] & 0x0f, sense[2], sense[3])),
        _ => None,
    }
}

fn verify16(lba: u64, blocks: u32) -> [u8; 16] {
    let mut c = [0u8; 16];
    c[0] = 0x8f; // VERIFY(16), BYTCHK = 0: the drive checks its ECC, no data sent
    c[2..10].copy_from_slice(&lba.to_be_bytes());
    c[10..14].copy_from_slice(&blocks.to_be_bytes());
    c
}

fn verify10(lba: u32, blocks: u16) -> [u8; 10] {
    let mut c = [0u8; 10];
    c[0] = 0x2f; // VERIFY(10)
    c[2..6].copy_from_slice(&lba.to_be_bytes());
    c[7..9].copy_from_slice(&blocks.to_be_bytes());
    c
}

/// Verifies ranges with SCSI VERIFY.
#[derive(Debug)]
pub struct SgVerifier {
    file: File,
    /// The target's first byte on the whole disk (a partition's start):
    /// SCSI addresses the disk, not the partition.
    start_bytes: u64,
    block_bytes: u64,
    use16: bool,
}

/// What a VERIFY returned.
enum Outcome {
    Good,
    /// The command itself is not supported (ILLEGAL REQUEST, invalid opcode).
    Unsupported,
    Failed(io::Error),
}

impl SgVerifier {
    fn run(&self, lba: u64, blocks: u64) -> io::Result<Outcome> {
        let mut sense = [0u8; SENSE_BYTES];
        let (status, host, driver, n) = if self.use16 {
            ioctl::send(&self.file, &verify16(lba, blocks as u32), &mut sense)?
        } else {
            ioctl::send(&self.file, &verify10(lba as u32, blocks as u16), &mut sense)?
        };
        if status == 0 && host == 0 && driver & 0x0f == 0 {
            return Ok(Outcome::Good);
        }
        let sk = sense_key(&sense[..n]);
        Ok(match sk {
            // ILLEGAL REQUEST, invalid command operation code
            Some((0x5, 0x20, _)) => Outcome::Unsupported,
            Some((key, asc, ascq)) => Outcome::Failed(io::Error::other(format!(
                "SCSI VERIFY failed: sense key {key:#x} ({}), ASC/ASCQ {asc:#04x}/{ascq:#04x}",
                match key {
                    0x3 => "medium error",
                    0x4 => "hardware error",
                    0x5 => "illegal request",
                    0x2 => "not ready",
                    0xb => "aborted command",
                    _ => "see SPC-4",
                }
            ))),
            None => Outcome::Failed(io::Error::other(format!(
                "SCSI VERIFY failed: status {status:#04x}, host {host:#06x}, driver {driver:#06x}"
            ))),
        })
    }

    /// Try VERIFY on the target's first block. `Err` says, in words, why
    /// the device cannot take it (the caller falls back to reads or
    /// refuses).
    pub fn probe(
        file: &File,
        start_bytes: u64,
        block_bytes: u64,
    ) -> std::result::Result<SgVerifier, String> {
        let file = file
            .try_clone()
            .map_err(|e| format!("cannot duplicate the descriptor: {e}"))?;
        let mut v = SgVerifier {
            file,
            start_bytes,
            block_bytes: block_bytes.max(512),
            use16: true,
        };
        let lba = start_bytes / v.block_bytes;
        for use16 in [true, false] {
            v.use16 = use16;
            match v.run(lba, 1) {
                Ok(Outcome::Good) => return Ok(v),
                Ok(Outcome::Unsupported) => continue,
                Ok(Outcome::Failed(e)) => {
                    return Err(format!("the device failed a VERIFY of its first block: {e}"))
                }
                Err(e) => {
                    return Err(match e.raw_os_error() {
                        Some(25) | Some(22) | Some(95) | Some(515) => format!(
                            "the device does not take SCSI commands (SG_IO: {e}); only SCSI and SATA disks do, not loop, virtio, NVMe or device-mapper devices"
                        ),
                        Some(1) | Some(13) => format!(
                            "SG_IO was refused ({e}): SCSI commands need root (CAP_SYS_RAWIO on a partition)"
                        ),
                        _ => format!("SG_IO failed: {e}"),
                    })
                }
            }
        }
        Err("the device does not support SCSI VERIFY (ILLEGAL REQUEST for VERIFY(16) and VERIFY(10))".into())
    }
}

impl Verifier for SgVerifier {
    fn check(&mut self, offset: u64, len: u64) -> io::Result<u64> {
        let first = (self.start_bytes + offset) / self.block_bytes;
        let blocks = len.div_ceil(self.block_bytes);
        let limit = if self.use16 {
            u64::from(u32::MAX)
        } else {
            u64::from(u16::MAX)
        };
        if blocks > limit || (!self.use16 && first + blocks > u64::from(u32::MAX)) {
            return Err(io::Error::other(format!(
                "a VERIFY of {blocks} blocks at {first} does not fit the command"
            )));
        }
        match self.run(first, blocks)? {
            Outcome::Good => Ok(len),
            Outcome::Unsupported => Err(io::Error::other("SCSI VERIFY became unsupported")),
            Outcome::Failed(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_big_endian_as_in_sbc() {
        let c = verify16(0x0102_0304_0506_0708, 0x0a0b_0c0d);
        assert_eq!(c[0], 0x8f);
        assert_eq!(&c[2..10], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&c[10..14], &[0x0a, 0x0b, 0x0c, 0x0d]);
        let c = verify10(0x0102_0304, 0x0506);
        assert_eq!(
            (c[0], &c[2..6], &c[7..9]),
            (0x2f, &[1u8, 2, 3, 4][..], &[5u8, 6][..])
        );
    }

    #[test]
    fn sense_in_both_formats() {
        let mut fixed = [0u8; 18];
        fixed[0] = 0x70;
        fixed[2] = 0x03;
        fixed[12] = 0x11; // unrecovered read error
        fixed[13] = 0x00;
        assert_eq!(sense_key(&fixed), Some((3, 0x11, 0)));
        let desc = [0x72u8, 0x05, 0x20, 0x00];
        assert_eq!(sense_key(&desc), Some((5, 0x20, 0)));
        assert_eq!(sense_key(&[]), None);
        assert_eq!(sense_key(&[0x70, 0, 3]), None);
    }

    #[test]
    fn a_regular_file_is_refused_in_words() {
        let f = tempfile::tempfile().unwrap();
        let e = SgVerifier::probe(&f, 0, 512).unwrap_err();
        assert!(e.contains("does not take SCSI commands"), "{e}");
    }

    #[test]
    fn the_header_has_the_kernels_size() {
        // sizeof(struct sg_io_hdr) is 88 on 64-bit Linux
        #[cfg(target_pointer_width = "64")]
        assert_eq!(std::mem::size_of::<SgIoHdr>(), 88);
    }
}
