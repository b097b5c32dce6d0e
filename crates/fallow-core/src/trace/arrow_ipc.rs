//! Apache Arrow IPC traces: the file format (`ARROW1` magic; pyarrow's
//! `feather.write_feather`, polars' `write_ipc`, DuckDB) and the streaming
//! format (polars' `write_ipc_stream`, pyarrow's `ipc.new_stream`), in the
//! column layout of `columnar.rs`.
//!
//! A file is its magic, a stream of messages and a footer indexing them, so
//! both are read as a stream. Every length the messages claim (metadata,
//! body, each buffer, each buffer's decompressed size) is checked against
//! the bytes there are, and the decompressed sizes against a budget of
//! [`columnar::decode_budget_bytes`], before the arrow decoder allocates or
//! slices anything: the decoder trusts them and would panic or abort.

use super::columnar::{self, decode, Batches};
use super::ReadContext;
use crate::error::{Error, Result};
use arrow_buffer::Buffer;
use arrow_ipc::reader::{FileDecoder, StreamDecoder};
use std::io::Write;
use std::sync::Arc;

/// The file format's magic, at both ends.
pub(crate) const FILE_MAGIC: &[u8; 6] = b"ARROW1";

pub(crate) fn read(data: Vec<u8>, ctx: &mut ReadContext<'_>) -> Result<()> {
    let budget = columnar::decode_budget_bytes(data.len() as u64);
    if data.starts_with(FILE_MAGIC) {
        read_file(data, budget, ctx)
    } else {
        read_stream(data, budget, ctx)
    }
}

fn bad(ctx: &ReadContext<'_>, what: &str, msg: impl std::fmt::Display) -> Error {
    columnar::file_error(ctx, what, msg)
}

fn arrow_err(ctx: &ReadContext<'_>, e: arrow_schema::ArrowError) -> Error {
    bad(ctx, "Arrow IPC data", e)
}

/// The streaming format: messages one after another, the schema first.
fn read_stream(data: Vec<u8>, budget: u64, ctx: &mut ReadContext<'_>) -> Result<()> {
    let stream_end = check_stream(&data, budget)
        .map_err(|(at, msg)| bad(ctx, &format!("Arrow IPC message at byte offset {at}"), msg))?;
    let buffer = Buffer::from_vec(data);
    let mut rest = buffer.slice_with_length(0, stream_end);
    let mut decoder = StreamDecoder::new();
    let mut layout = None;
    while !rest.is_empty() {
        let Some(batch) = decoder.decode(&mut rest).map_err(|e| arrow_err(ctx, e))? else {
            break;
        };
        if layout.is_none() {
            layout = Some(decode::start(&batch.schema(), ctx)?);
        }
        if let Some(l) = layout.as_mut() {
            decode::push_batch(l, &batch, ctx)?;
        }
    }
    decoder.finish().map_err(|e| arrow_err(ctx, e))?;
    // A file of no rows still has its columns checked.
    if let (None, Some(schema)) = (&layout, decoder.schema()) {
        decode::start(&schema, ctx)?;
    }
    Ok(())
}

/// The file format: magic, padding, the messages, a footer indexing them
/// (schema and blocks), the footer's length and the magic again. Read
/// through the footer, as writers align the messages as they like
/// (arrow-rs to 64 bytes).
fn read_file(data: Vec<u8>, mut budget: u64, ctx: &mut ReadContext<'_>) -> Result<()> {
    let n = data.len();
    if n < 8 + 10 || &data[n - 6..] != FILE_MAGIC {
        return Err(bad(
            ctx,
            "Arrow IPC file",
            "truncated (no `ARROW1` magic at the end)",
        ));
    }
    let footer_len = i32::from_le_bytes([data[n - 10], data[n - 9], data[n - 8], data[n - 7]]);
    let footer_start = usize::try_from(footer_len)
        .ok()
        .and_then(|f| (n - 10).checked_sub(f))
        .filter(|&s| s >= 8)
        .ok_or_else(|| {
            bad(
                ctx,
                "Arrow IPC footer",
                format!("length {footer_len} does not fit in {n} bytes"),
            )
        })?;
    let footer = arrow_ipc::root_as_footer(&data[footer_start..n - 10])
        .map_err(|e| bad(ctx, "Arrow IPC footer", e))?;
    let fb_schema = footer
        .schema()
        .ok_or_else(|| bad(ctx, "Arrow IPC footer", "no schema"))?;
    let schema = arrow_ipc::convert::try_fb_to_schema(fb_schema).map_err(|e| arrow_err(ctx, e))?;
    let mut layout = decode::start(&schema, ctx)?;
    let dictionaries: Vec<arrow_ipc::Block> =
        footer.dictionaries().iter().flatten().copied().collect();
    let batches: Vec<arrow_ipc::Block> = footer.recordBatches().iter().flatten().copied().collect();
    // every block checked before any is decoded
    for b in dictionaries.iter().chain(&batches) {
        check_block(&data, footer_start, b, &mut budget)
            .map_err(|(at, msg)| bad(ctx, &format!("Arrow IPC block at byte offset {at}"), msg))?;
    }
    let mut decoder = FileDecoder::new(Arc::new(schema), footer.version());
    let buffer = Buffer::from_vec(data);
    let slice = |b: &arrow_ipc::Block| {
        buffer.slice_with_length(
            b.offset() as usize,
            b.metaDataLength() as usize + b.bodyLength() as usize,
        )
    };
    for b in &dictionaries {
        decoder
            .read_dictionary(b, &slice(b))
            .map_err(|e| arrow_err(ctx, e))?;
    }
    for b in &batches {
        if let Some(batch) = decoder
            .read_record_batch(b, &slice(b))
            .map_err(|e| arrow_err(ctx, e))?
        {
            decode::push_batch(&mut layout, &batch, ctx)?;
        }
    }
    Ok(())
}

/// A message's length prefix at `pos` (the continuation marker, if any,
/// and the metadata length): (prefix bytes, metadata bytes); `None` at
/// the end-of-stream marker.
fn prefix(
    data: &[u8],
    pos: usize,
    end: usize,
) -> std::result::Result<Option<(usize, usize)>, String> {
    let i32_at = |p: usize| -> std::result::Result<i32, String> {
        data.get(p..p + 4)
            .filter(|_| p + 4 <= end)
            .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| format!("truncated: the data ends at byte {end}"))
    };
    let mut at = 4;
    let mut len = i32_at(pos)?;
    if len == -1 {
        len = i32_at(pos + 4)?;
        at = 8;
    }
    if len == 0 {
        return Ok(None);
    }
    let len = usize::try_from(len).map_err(|_| format!("negative metadata length {len}"))?;
    if len > end - pos - at {
        return Err(format!("metadata of {len} bytes, {} left", end - pos - at));
    }
    Ok(Some((at, len)))
}

/// A block of the file's footer: within the messages, its message
/// parseable, its buffers within its body.
fn check_block(
    data: &[u8],
    end: usize,
    b: &arrow_ipc::Block,
    budget: &mut u64,
) -> std::result::Result<(), (usize, String)> {
    let at = usize::try_from(b.offset()).unwrap_or(usize::MAX);
    let (meta, body) = (b.metaDataLength(), b.bodyLength());
    let fits = b.offset() >= 8
        && meta >= 8
        && body >= 0
        && (b.offset() as u64)
            .saturating_add(meta as u64)
            .saturating_add(body as u64)
            <= end as u64;
    if !fits {
        return Err((
            at,
            format!(
                "metadata of {meta} and body of {body} bytes outside the {end} bytes of messages"
            ),
        ));
    }
    let meta = meta as usize;
    let (p, len) = prefix(data, at, at + meta)
        .map_err(|m| (at, m))?
        .ok_or_else(|| (at, "an end-of-stream marker, not a message".to_string()))?;
    let msg = arrow_ipc::root_as_message(&data[at + p..at + p + len])
        .map_err(|e| (at, format!("not an Arrow IPC message: {e}")))?;
    let body_start = at + meta;
    check_buffers(&msg, &data[body_start..body_start + body as usize], budget).map_err(|m| (at, m))
}

/// Walk the messages of a stream, checking every claimed length; where
/// the stream ends (after its end-of-stream marker, or at the end of the
/// data). Errors carry the message's byte offset.
fn check_stream(data: &[u8], mut budget: u64) -> std::result::Result<usize, (usize, String)> {
    let end = data.len();
    let mut pos = 0;
    let mut first = true;
    while pos < end {
        let at = pos;
        let Some((p, len)) = prefix(data, pos, end).map_err(|m| (at, m))? else {
            return Ok(pos
                + if data[pos..].starts_with(&[0xff; 4]) {
                    8
                } else {
                    4
                });
        };
        pos += p;
        let msg = arrow_ipc::root_as_message(&data[pos..pos + len])
            .map_err(|e| (at, format!("not an Arrow IPC message: {e}")))?;
        pos += len;
        let body = usize::try_from(msg.bodyLength())
            .ok()
            .filter(|&b| b <= end - pos)
            .ok_or_else(|| {
                (
                    at,
                    format!("body of {} bytes, {} left", msg.bodyLength(), end - pos),
                )
            })?;
        if first && msg.header_type() != arrow_ipc::MessageHeader::Schema {
            return Err((at, "the first message is not a schema".into()));
        }
        first = false;
        check_buffers(&msg, &data[pos..pos + body], &mut budget).map_err(|m| (at, m))?;
        pos += body;
    }
    Ok(end)
}

/// A record or dictionary batch's buffers lie within its body, and what
/// they decompress to fits the budget.
fn check_buffers(
    msg: &arrow_ipc::Message<'_>,
    body: &[u8],
    budget: &mut u64,
) -> std::result::Result<(), String> {
    let batch = match msg.header_type() {
        arrow_ipc::MessageHeader::RecordBatch => msg.header_as_record_batch(),
        arrow_ipc::MessageHeader::DictionaryBatch => {
            msg.header_as_dictionary_batch().and_then(|d| d.data())
        }
        _ => None,
    };
    let Some(batch) = batch else { return Ok(()) };
    let compressed = batch.compression().is_some();
    for b in batch.buffers().iter().flatten() {
        let (off, blen) = (b.offset(), b.length());
        let fits =
            off >= 0 && blen >= 0 && (off as u64).saturating_add(blen as u64) <= body.len() as u64;
        if !fits {
            return Err(format!(
                "a buffer at {off} of {blen} bytes outside a body of {}",
                body.len()
            ));
        }
        let bytes = &body[off as usize..(off + blen) as usize];
        // A compressed buffer starts with its decompressed length (-1:
        // stored as is); the decoder allocates that much.
        let decoded = match bytes.get(..8) {
            Some(h) if compressed => {
                let mut le = [0u8; 8];
                le.copy_from_slice(h);
                match i64::from_le_bytes(le) {
                    -1 => blen as u64,
                    n => {
                        u64::try_from(n).map_err(|_| format!("negative decompressed length {n}"))?
                    }
                }
            }
            _ => blen as u64,
        };
        *budget = budget.checked_sub(decoded).ok_or_else(|| {
            format!(
                "the data decompresses to more than {}× the file's size; refused as implausible for a trace",
                columnar::MAX_EXPANSION
            )
        })?;
    }
    Ok(())
}

/// Write record batches as an Arrow IPC file, or a stream.
pub(crate) fn write(b: &Batches, stream: bool, out: &mut dyn Write) -> Result<()> {
    let err = |e: arrow_schema::ArrowError| Error::invalid("Arrow IPC output", e.to_string());
    if stream {
        let mut w = arrow_ipc::writer::StreamWriter::try_new(out, &b.schema).map_err(err)?;
        for batch in &b.batches {
            w.write(batch).map_err(err)?;
        }
        w.finish().map_err(err)?;
    } else {
        let mut w = arrow_ipc::writer::FileWriter::try_new(out, &b.schema).map_err(err)?;
        for batch in &b.batches {
            w.write(batch).map_err(err)?;
        }
        w.finish().map_err(err)?;
    }
    Ok(())
}
