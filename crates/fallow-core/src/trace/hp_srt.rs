//! PLACEHOLDER (being written).
use super::ReadContext;
use crate::error::{Error, Result};
use std::io::BufRead;

pub(crate) fn read(_input: &mut dyn BufRead, _ctx: &mut ReadContext<'_>) -> Result<()> {
    Err(Error::Unsupported("hp_srt reader not written yet".into()))
}

pub(crate) fn looks_like(_head: &[u8]) -> bool {
    false
}
