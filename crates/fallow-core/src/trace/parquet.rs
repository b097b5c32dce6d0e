//! Apache Parquet traces (`PAR1` magic at both ends): files written by
//! pandas/pyarrow (snappy by default), polars (zstd by default) and DuckDB,
//! in the column layout of `columnar.rs`. Written with zstd, as polars does.
//!
//! Only fallow's columns are decoded (a projection), a batch at a time.
//! The footer's row count and uncompressed sizes are checked against
//! [`columnar::decode_budget_bytes`] before decoding, so a small file
//! cannot claim billions of rows; the byte ranges are checked by the
//! parquet crate against the file's length.

use super::columnar::{self, decode, Batches};
use super::ReadContext;
use crate::error::{Error, Result};
use arrow_array::RecordBatchReader;
use arrow_schema::Schema;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use std::io::Write;

pub(crate) fn read(data: Vec<u8>, ctx: &mut ReadContext<'_>) -> Result<()> {
    let file_bytes = data.len() as u64;
    let pq_err = |ctx: &ReadContext<'_>, e: parquet::errors::ParquetError| {
        columnar::file_error(ctx, "Parquet data", e)
    };
    let builder = ParquetRecordBatchReaderBuilder::try_new(::bytes::Bytes::from(data))
        .map_err(|e| pq_err(ctx, e))?;
    let meta = builder.metadata().clone();
    let budget = columnar::decode_budget_bytes(file_bytes);
    let rows = meta.file_metadata().num_rows();
    // 8 bytes of time per row at least, once decoded
    if rows < 0 || (rows as u64).saturating_mul(8) > budget {
        return Err(columnar::file_error(
            ctx,
            "Parquet footer",
            format!(
                "claims {rows} rows in {file_bytes} bytes; refused as implausible for a trace \
                 (more than {}× expansion)",
                columnar::MAX_EXPANSION
            ),
        ));
    }
    let uncompressed: u64 = meta
        .row_groups()
        .iter()
        .map(|g| u64::try_from(g.total_byte_size()).unwrap_or(u64::MAX))
        .fold(0, u64::saturating_add);
    if uncompressed > budget {
        return Err(columnar::file_error(
            ctx,
            "Parquet footer",
            format!(
                "claims {uncompressed} bytes of data once decompressed, from {file_bytes}; \
                 refused as implausible for a trace (more than {}× expansion)",
                columnar::MAX_EXPANSION
            ),
        ));
    }
    let full: Schema = builder.schema().as_ref().clone();
    let wanted: Vec<usize> = [
        columnar::ARRIVAL,
        columnar::COMPLETION,
        columnar::OFFSET,
        columnar::SIZE,
        columnar::IS_WRITE,
        columnar::DEVICE,
        columnar::HOST,
    ]
    .iter()
    .filter_map(|name| full.index_of(name).ok())
    .collect();
    if full.index_of(columnar::ARRIVAL).is_err() {
        // `start` says which columns there are and which are needed
        decode::start(&full, ctx)?;
    }
    let mask = ProjectionMask::roots(builder.parquet_schema(), wanted);
    let reader = builder
        .with_projection(mask)
        .with_batch_size(columnar::BATCH_ROWS)
        .build()
        .map_err(|e| pq_err(ctx, e))?;
    // The projection's fields with the file's metadata (origin, hosts …).
    let schema =
        Schema::new_with_metadata(reader.schema().fields().clone(), full.metadata().clone());
    let mut layout = decode::start(&schema, ctx)?;
    for batch in reader {
        let batch = batch.map_err(|e| columnar::file_error(ctx, "Parquet data", e))?;
        decode::push_batch(&mut layout, &batch, ctx)?;
    }
    Ok(())
}

/// The writer's properties: zstd, as polars writes, and fallow's keys.
pub(crate) fn properties(kv: Vec<KeyValue>) -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_key_value_metadata(Some(kv))
        .build()
}

/// fallow's schema keys as plain footer metadata, sorted.
pub(crate) fn footer_keys(schema: &Schema) -> Vec<KeyValue> {
    let mut kv: Vec<KeyValue> = schema
        .metadata()
        .iter()
        .map(|(k, v)| KeyValue::new(k.clone(), v.clone()))
        .collect();
    kv.sort_by(|a, b| a.key.cmp(&b.key));
    kv
}

/// Write record batches as a Parquet file (zstd).
pub(crate) fn write(b: &Batches, out: &mut dyn Write) -> Result<()> {
    let err = |e: parquet::errors::ParquetError| Error::invalid("Parquet output", e.to_string());
    // fallow's keys also as plain footer metadata (the Arrow schema is
    // stored base64-encoded), so tools and `outpath` see them as written.
    let props = properties(footer_keys(&b.schema));
    // The writer wants `Send`; the file is assembled in memory and copied out.
    let mut buf = Vec::new();
    let mut w = ArrowWriter::try_new(&mut buf, b.schema.clone(), Some(props)).map_err(err)?;
    for batch in &b.batches {
        w.write(batch).map_err(err)?;
    }
    w.close().map_err(err)?;
    out.write_all(&buf).map_err(|source| Error::Io {
        path: "<parquet output>".into(),
        source,
    })
}
