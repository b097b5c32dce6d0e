//! PLACEHOLDER (being written).
use super::{ReadContext, Trace};
use crate::error::{Error, Result};
use std::io::BufRead;

pub(crate) const MAGIC: &[u8] = b"FALLOWT\x01";

pub(crate) fn read(_input: &mut dyn BufRead, _ctx: &mut ReadContext<'_>) -> Result<()> {
    Err(Error::Unsupported("fallow reader not written yet".into()))
}

/// Write a trace in fallow's binary column format.
pub fn write_fallow_bin(_trace: &Trace, _out: &mut dyn std::io::Write) -> Result<()> {
    Err(Error::Unsupported("not written yet".into()))
}
