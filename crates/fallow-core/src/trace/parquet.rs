//! Apache Parquet traces (`PAR1` magic at both ends): files written by
//! pandas/pyarrow (snappy by default), polars (zstd by default) and DuckDB,
//! in the column layout of `columnar.rs`. Written with zstd, as polars does.
//!
//! Only fallow's columns are decoded (a projection), a batch at a time.
//! The footer's row count and uncompressed sizes are checked against
//! [`columnar::decode_budget_bytes`] before decoding, so a small file
//! cannot claim billions of rows; the byte ranges are checked by the
//! parquet crate against the file's length. Every page header is read
//! too ([`pages`]) before the parquet crate decodes a page: it sizes its
//! buffers from the header's counts (a 4 KiB file whose dictionary page
//! claimed 800 million values made it allocate 6 GiB; found by
//! `cargo fuzz run parquet`), which the footer does not bound.

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
    let header_data = ::bytes::Bytes::from(data);
    let pq_err_text =
        |ctx: &ReadContext<'_>, m: String| columnar::file_error(ctx, "Parquet page header", m);
    let pq_err = |ctx: &ReadContext<'_>, e: parquet::errors::ParquetError| {
        columnar::file_error(ctx, "Parquet data", e)
    };
    let builder = ParquetRecordBatchReaderBuilder::try_new(header_data.clone())
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
    pages::check(&meta, &header_data, budget).map_err(|m| pq_err_text(ctx, m))?;
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

/// The page headers of every column chunk, read before the parquet crate
/// decodes them (module docs). Thrift compact protocol, as the format's
/// `parquet.thrift` defines `PageHeader`: only the sizes and counts are
/// kept, every other field is skipped.
mod pages {
    use parquet::file::metadata::ParquetMetaData;

    /// Nesting of thrift structs and lists a header may have (a
    /// `PageHeader` has 3: statistics inside a data page header).
    const MAX_DEPTH: u32 = 16;

    /// Refuse a file whose page headers claim more than its chunks hold:
    /// a page's uncompressed size past its chunk's, or past `budget` in
    /// all; a dictionary page's value count past 8 per byte of its page
    /// (a PLAIN dictionary holds at least one bit a value); a data page's
    /// value count past its chunk's. The message names the row group,
    /// column and byte offset.
    pub(super) fn check(meta: &ParquetMetaData, file: &[u8], budget: u64) -> Result<(), String> {
        let mut total_uncompressed = 0u64;
        for (g, group) in meta.row_groups().iter().enumerate() {
            for (c, chunk) in group.columns().iter().enumerate() {
                let (start, len) = chunk.byte_range();
                let end = start.saturating_add(len).min(file.len() as u64) as usize;
                let chunk_uncompressed = u64::try_from(chunk.uncompressed_size()).unwrap_or(0);
                let chunk_values = u64::try_from(chunk.num_values()).unwrap_or(0);
                let mut pos = usize::try_from(start).unwrap_or(usize::MAX);
                let at = |pos: usize, why: String| {
                    format!("row group {g}, column {c}, byte {pos}: {why}")
                };
                // a page's value count sizes the level buffers: bound the
                // chunk's, which bounds each page's (below)
                if chunk_values > budget {
                    return Err(at(
                        pos,
                        format!("a column chunk of {chunk_values} values (more than {budget})"),
                    ));
                }
                while pos < end {
                    let mut r = Reader {
                        data: &file[..end],
                        pos,
                    };
                    let h = header(&mut r).map_err(|e| at(pos, e))?;
                    let compressed = usize::try_from(h.compressed)
                        .map_err(|_| at(pos, format!("compressed size {}", h.compressed)))?;
                    total_uncompressed = total_uncompressed
                        .saturating_add(u64::try_from(h.uncompressed).unwrap_or(u64::MAX));
                    if total_uncompressed > budget {
                        return Err(at(
                            pos,
                            format!("pages of more than {budget} bytes once decompressed in all"),
                        ));
                    }
                    if let Some(why) = problem(&h, chunk_uncompressed, chunk_values) {
                        return Err(at(pos, why));
                    }
                    pos = r.pos.saturating_add(compressed);
                }
            }
        }
        Ok(())
    }

    /// What is wrong with a page header in a chunk of `chunk_uncompressed`
    /// bytes and `chunk_values` values, if anything (the rules of
    /// [`check`]).
    pub(super) fn problem(
        h: &Header,
        chunk_uncompressed: u64,
        chunk_values: u64,
    ) -> Option<String> {
        let uncompressed = u64::try_from(h.uncompressed).unwrap_or(u64::MAX);
        if uncompressed > chunk_uncompressed.max(1) {
            return Some(format!(
                "a page of {uncompressed} bytes once decompressed in a column chunk of {chunk_uncompressed}"
            ));
        }
        if let Some(n) = h.dict_values {
            let n = u64::try_from(n).unwrap_or(u64::MAX);
            if n > uncompressed.saturating_mul(8).saturating_add(8) {
                return Some(format!(
                    "a dictionary of {n} values in {uncompressed} bytes"
                ));
            }
        }
        if let Some(n) = h.data_values {
            let n = u64::try_from(n).unwrap_or(u64::MAX);
            if n > chunk_values {
                return Some(format!(
                    "a page of {n} values in a column chunk of {chunk_values}"
                ));
            }
        }
        None
    }

    /// What a page header says.
    #[derive(Debug, Default, PartialEq)]
    pub(super) struct Header {
        pub uncompressed: i32,
        pub compressed: i32,
        /// A dictionary page's value count.
        pub dict_values: Option<i32>,
        /// A data page's value count (v1 or v2).
        pub data_values: Option<i32>,
    }

    pub(super) struct Reader<'a> {
        pub data: &'a [u8],
        pub pos: usize,
    }

    impl Reader<'_> {
        fn byte(&mut self) -> Result<u8, String> {
            let b = *self
                .data
                .get(self.pos)
                .ok_or_else(|| "the page header runs past its column chunk".to_string())?;
            self.pos += 1;
            Ok(b)
        }

        fn varint(&mut self) -> Result<u64, String> {
            let mut v = 0u64;
            for shift in (0..70).step_by(7) {
                let b = self.byte()?;
                if shift == 63 && b > 1 {
                    break;
                }
                v |= u64::from(b & 0x7f) << shift;
                if b & 0x80 == 0 {
                    return Ok(v);
                }
            }
            Err("a varint longer than 64 bits".into())
        }

        fn zigzag(&mut self) -> Result<i64, String> {
            let v = self.varint()?;
            Ok((v >> 1) as i64 ^ -((v & 1) as i64))
        }

        fn i32(&mut self) -> Result<i32, String> {
            i32::try_from(self.zigzag()?).map_err(|_| "an i32 field out of range".to_string())
        }

        fn skip_bytes(&mut self, n: u64) -> Result<(), String> {
            let n = usize::try_from(n).map_err(|_| "a field longer than the file".to_string())?;
            if self.data.len().saturating_sub(self.pos) < n {
                return Err("a field runs past its column chunk".into());
            }
            self.pos += n;
            Ok(())
        }

        /// Skip one value of compact type `t`.
        fn skip(&mut self, t: u8, depth: u32) -> Result<(), String> {
            if depth > MAX_DEPTH {
                return Err("thrift structures nested too deep".into());
            }
            match t {
                1 | 2 => Ok(()), // booleans in a field header carry the value
                3 => self.skip_bytes(1),
                4..=6 => self.varint().map(drop),
                7 => self.skip_bytes(8),
                8 => {
                    let n = self.varint()?;
                    self.skip_bytes(n)
                }
                9 | 10 => {
                    let h = self.byte()?;
                    let n = match h >> 4 {
                        15 => self.varint()?,
                        n => u64::from(n),
                    };
                    let et = h & 0x0f;
                    for _ in 0..n {
                        self.skip_element(et, depth + 1)?;
                    }
                    Ok(())
                }
                11 => {
                    let n = self.varint()?;
                    if n > 0 {
                        let kv = self.byte()?;
                        for _ in 0..n {
                            self.skip_element(kv >> 4, depth + 1)?;
                            self.skip_element(kv & 0x0f, depth + 1)?;
                        }
                    }
                    Ok(())
                }
                12 => self.strukt(depth + 1, |_, t, r, d| r.skip(t, d)),
                _ => Err(format!("thrift type {t}")),
            }
        }

        /// Skip one element of a list, set or map of compact type `t`: a
        /// boolean there is a byte of its own (in a field header it is the
        /// type itself, which [`Reader::skip`] handles).
        fn skip_element(&mut self, t: u8, depth: u32) -> Result<(), String> {
            if t == 1 || t == 2 {
                self.skip_bytes(1)
            } else {
                self.skip(t, depth)
            }
        }

        /// Read a struct's fields until its stop byte, giving each (id,
        /// type) to `field`, which reads or skips the value.
        fn strukt(
            &mut self,
            depth: u32,
            mut field: impl FnMut(i16, u8, &mut Self, u32) -> Result<(), String>,
        ) -> Result<(), String> {
            if depth > MAX_DEPTH {
                return Err("thrift structures nested too deep".into());
            }
            let mut last = 0i16;
            loop {
                let b = self.byte()?;
                if b == 0 {
                    return Ok(());
                }
                let (delta, t) = (b >> 4, b & 0x0f);
                let id = if delta == 0 {
                    i16::try_from(self.zigzag()?).map_err(|_| "a field id out of range")?
                } else {
                    last.saturating_add(i16::from(delta))
                };
                last = id;
                field(id, t, self, depth)?;
            }
        }
    }

    /// The first i32 field (id 1) of a nested header struct.
    fn first_i32(r: &mut Reader<'_>, t: u8, depth: u32) -> Result<Option<i32>, String> {
        if t != 12 {
            r.skip(t, depth)?;
            return Ok(None);
        }
        let mut n = None;
        r.strukt(depth + 1, |id, t, r, d| {
            if id == 1 && t == 5 {
                n = Some(r.i32()?);
                Ok(())
            } else {
                r.skip(t, d)
            }
        })?;
        Ok(n)
    }

    pub(super) fn header(r: &mut Reader<'_>) -> Result<Header, String> {
        let mut h = Header::default();
        let (mut have_u, mut have_c) = (false, false);
        r.strukt(0, |id, t, r, d| {
            match (id, t) {
                (2, 5) => {
                    h.uncompressed = r.i32()?;
                    have_u = true;
                }
                (3, 5) => {
                    h.compressed = r.i32()?;
                    have_c = true;
                }
                (5 | 8, _) => h.data_values = first_i32(r, t, d)?,
                (7, _) => h.dict_values = first_i32(r, t, d)?,
                _ => r.skip(t, d)?,
            }
            Ok(())
        })?;
        if !(have_u && have_c) {
            return Err("a page header without its sizes".into());
        }
        if h.uncompressed < 0 || h.compressed < 0 {
            return Err(format!(
                "negative page sizes ({} compressed, {} uncompressed)",
                h.compressed, h.uncompressed
            ));
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::pages::{header, problem, Header, Reader};

    fn parse(bytes: &[u8]) -> Result<(Header, usize), String> {
        let mut r = Reader {
            data: bytes,
            pos: 0,
        };
        header(&mut r).map(|h| (h, r.pos))
    }

    /// The header polars wrote for a 5-value dictionary page (the start
    /// of the fuzz fixture's seed): type 2, 40 bytes uncompressed, 41
    /// compressed, a `DictionaryPageHeader` of 5 values; 13 bytes.
    #[test]
    fn a_dictionary_page_header_by_hand() {
        let bytes = [
            0x15, 0x04, 0x15, 0x50, 0x15, 0x52, 0x4c, 0x15, 0x0a, 0x15, 0x00, 0x00, 0x00, 0x28,
        ];
        let (h, len) = parse(&bytes).unwrap();
        assert_eq!(
            h,
            Header {
                uncompressed: 40,
                compressed: 41,
                dict_values: Some(5),
                data_values: None
            }
        );
        assert_eq!(len, 13);
        assert_eq!(problem(&h, 40, 5), None);
        // the same page claiming 800 million values (zigzag varint of
        // 1.6e9): refused, where parquet sized 6 GiB for it
        let mut forged = bytes[..8].to_vec();
        let mut v = 1_600_000_000u64;
        while v >= 0x80 {
            forged.push((v as u8) | 0x80);
            v >>= 7;
        }
        forged.push(v as u8);
        forged.extend_from_slice(&[0x15, 0x00, 0x00, 0x00]);
        let (h, _) = parse(&forged).unwrap();
        assert_eq!(h.dict_values, Some(800_000_000));
        assert_eq!(
            problem(&h, 40, 5).unwrap(),
            "a dictionary of 800000000 values in 40 bytes"
        );
        // a data page (field 5, num_values first) past its chunk's count
        let data = [
            0x15, 0x02, 0x15, 0x50, 0x15, 0x52, 0x2c, 0x15, 0x14, 0x00, 0x00,
        ];
        let (h, _) = parse(&data).unwrap();
        assert_eq!(h.data_values, Some(10));
        assert!(problem(&h, 40, 5).unwrap().contains("a page of 10 values"));
        assert!(problem(&h, 39, 10)
            .unwrap()
            .contains("40 bytes once decompressed"));
    }

    #[test]
    fn malformed_headers_are_errors_not_panics() {
        // the fuzz fixture's second column: field 3 written as a boolean
        let e = parse(&[0x15, 0x04, 0x15, 0x50, 0x11, 0x00]).unwrap_err();
        assert_eq!(e, "a page header without its sizes");
        // cut short, a negative size, nesting without end, a bad type
        assert!(parse(&[0x15, 0x04, 0x15])
            .unwrap_err()
            .contains("runs past"));
        assert!(parse(&[0x15, 0x04, 0x15, 0x01, 0x15, 0x52, 0x00])
            .unwrap_err()
            .contains("negative"));
        let deep: Vec<u8> = std::iter::repeat_n(0x1c, 40).collect();
        assert!(parse(&deep).unwrap_err().contains("nested too deep"));
        assert!(parse(&[0x1f]).unwrap_err().contains("thrift type 15"));
    }

    /// A field the reader does not know is skipped whatever its type,
    /// including a map whose keys are booleans (one byte each, as in a
    /// list): field 9, `map<bool, i32>` of one entry, then the stop byte.
    #[test]
    fn unknown_fields_are_skipped_whole() {
        let bytes = [
            0x15, 0x04, 0x15, 0x50, 0x15, 0x52, 0x6b, 0x01, 0x15, 0x01, 0x02, 0x00,
        ];
        let (h, len) = parse(&bytes).unwrap();
        assert_eq!((h.uncompressed, h.compressed, len), (40, 41, bytes.len()));
        // the same as a list of booleans: one byte each
        let list = [
            0x15, 0x04, 0x15, 0x50, 0x15, 0x52, 0x69, 0x21, 0x01, 0x00, 0x00,
        ];
        let (h, len) = parse(&list).unwrap();
        assert_eq!((h.compressed, len), (41, list.len()));
    }
}
