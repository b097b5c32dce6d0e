//! The column layout fallow reads from and writes to Apache Parquet and
//! Arrow IPC files (`arrow_ipc.rs`, `parquet.rs`), so pandas, polars,
//! pyarrow and DuckDB read the traces fallow writes and fallow reads theirs.
//!
//! | column | types read | written as | meaning |
//! |---|---|---|---|
//! | `arrival_ns` | any integer, `timestamp[*]`, `duration[*]` | uint64 | arrival (issue) time, ns (required) |
//! | `completion_ns` | as `arrival_ns` | uint64 | completion time, same clock (optional) |
//! | `offset_bytes` | any integer | uint64 | byte offset (default 0) |
//! | `size_bytes` | any integer ≤ 2³²−1 | uint32 | size in bytes (default 0) |
//! | `is_write` | bool, or integer 0/1 | bool | direction (default: read) |
//! | `device` | any integer ≤ 2³²−1 | uint32 | device id; the disk number when `host` is present (default 0) |
//! | `host` | string, large string, string view, dictionary of those | string | MSR host name (optional) |
//!
//! These are the names of the Python `fallow.io` mapping (`Trace.from_polars`,
//! `from_pandas`, `to_pandas`) and the columns of `.fbt`. Times written are
//! ns since the first arrival; the schema's key/value metadata keeps what
//! `.fbt`'s header keeps (`fallow.origin_ns`, `fallow.source_format`,
//! `fallow.skipped`, `fallow.reordered`, `fallow.ignored`, `fallow.hosts`),
//! so a trace survives a round trip unchanged. Other columns are ignored;
//! a missing optional column takes its default, as in `from_polars`.

// Without the feature only the refusals and `ColumnarKind` are used.
#![cfg_attr(not(feature = "arrow"), allow(dead_code))]

use super::reader::{sniff, Completions, ReaderEntry, Writer};
use super::{Format, ReadContext, Trace};
use crate::error::{Error, Result};
use std::io::BufRead;

/// Column names (also the `field` of errors).
pub(crate) const ARRIVAL: &str = "arrival_ns";
pub(crate) const COMPLETION: &str = "completion_ns";
pub(crate) const OFFSET: &str = "offset_bytes";
pub(crate) const SIZE: &str = "size_bytes";
pub(crate) const IS_WRITE: &str = "is_write";
pub(crate) const DEVICE: &str = "device";
pub(crate) const HOST: &str = "host";

/// Schema metadata keys.
pub(crate) const META_ORIGIN: &str = "fallow.origin_ns";
pub(crate) const META_SOURCE: &str = "fallow.source_format";
pub(crate) const META_SKIPPED: &str = "fallow.skipped";
pub(crate) const META_REORDERED: &str = "fallow.reordered";
pub(crate) const META_IGNORED: &str = "fallow.ignored";
pub(crate) const META_HOSTS: &str = "fallow.hosts";

/// Rows decoded per batch, and rows per batch written.
pub(crate) const BATCH_ROWS: usize = 1 << 16;

/// How far a file may expand when decoded: at most this many bytes of
/// column data per byte of file (plus [`EXPANSION_SLACK_BYTES`]). Real
/// traces compress 3–10× (zstd on sorted times); a file claiming more is
/// refused before anything that large is allocated.
pub(crate) const MAX_EXPANSION: u64 = 1024;
pub(crate) const EXPANSION_SLACK_BYTES: u64 = 64 << 20;

/// The decoded bytes a file of `file_bytes` may claim.
pub(crate) fn decode_budget_bytes(file_bytes: u64) -> u64 {
    file_bytes
        .saturating_mul(MAX_EXPANSION)
        .saturating_add(EXPANSION_SLACK_BYTES)
}

/// The whole input in memory: both formats need random access (Parquet's
/// footer sits at the end) and are decoded from one buffer.
pub(crate) fn slurp(input: &mut dyn BufRead, ctx: &ReadContext<'_>) -> Result<Vec<u8>> {
    let mut data = Vec::new();
    input.read_to_end(&mut data).map_err(|e| ctx.io(e))?;
    Ok(data)
}

/// A file-level error (not one record's): which file, which part.
pub(crate) fn file_error(
    ctx: &ReadContext<'_>,
    what: &str,
    message: impl std::fmt::Display,
) -> Error {
    Error::Unsupported(format!("{}: {what}: {message}", ctx.path.display()))
}

/// Run a third-party decoder (arrow-rs, parquet) over a user's file so
/// that a panic inside it becomes an error naming the file instead of the
/// end of the process. Our own checks (`arrow_ipc.rs`: every length
/// against the bytes there; the decode budget) come first, but the
/// decoders still assert on some malformed inputs: arrow 60's
/// `Buffer::typed_data` asserts that a buffer's length is a multiple of
/// its type's width, and `ArrayData` validation reaches it with the
/// lengths a file claims (the `arrow` fuzz target found one: a dictionary
/// batch of 128-bit values, `corrupt-dictionary-width.arrows`). Those
/// are upstream bugs; a reader of user files must not die of them. The
/// panic's message goes into the error and is not printed: a panic hook,
/// installed once and chaining to the one before it, stays silent while a
/// guarded decoder runs on this thread.
#[cfg(feature = "arrow")]
fn guarded<T>(
    ctx: &mut ReadContext<'_>,
    what: &str,
    decode: impl FnOnce(&mut ReadContext<'_>) -> Result<T>,
) -> Result<T> {
    use std::cell::Cell;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    thread_local! {
        static GUARDED: Cell<bool> = const { Cell::new(false) };
    }
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let before = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !GUARDED.with(Cell::get) {
                before(info);
            }
        }));
    });
    GUARDED.with(|g| g.set(true));
    // the decoder's state is dropped with the panic; only the error is kept
    let result = catch_unwind(AssertUnwindSafe(|| decode(&mut *ctx)));
    GUARDED.with(|g| g.set(false));
    result.unwrap_or_else(|payload| {
        let why = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_string());
        Err(file_error(
            ctx,
            what,
            format!("malformed (the decoder refused it: {why})"),
        ))
    })
}

#[cfg(not(feature = "arrow"))]
mod disabled {
    use super::*;

    /// Without the `arrow` feature a detected Parquet/Arrow file is refused
    /// by name, so the user knows it is the build, not the file.
    pub(crate) fn refuse(ctx: &ReadContext<'_>, format: Format) -> Error {
        Error::Unsupported(format!(
            "{}: this is {} file, but this fallow was built without the `arrow` \
             cargo feature (rebuild with default features, e.g. `cargo install --path crates/fallow-cli`), \
             or convert it to CSV first",
            ctx.path.display(),
            if format == Format::Parquet {
                "a Parquet"
            } else {
                "an Arrow IPC"
            }
        ))
    }
}

/// The arrow reader's registry entry.
pub(crate) const ARROW: ReaderEntry = ReaderEntry {
    name: "arrow",
    aliases: &["ipc", "feather", "arrows"],
    summary: "Apache Arrow IPC file or stream, Feather v2, in the columns of docs/formats.md",
    code: 13,
    completions: Completions::InFile,
    splittable: false,
    numbers_devices: false,
    detect_rank: 30,
    detect: |h| sniff(arrow_like(h.bytes)),
    read: read_arrow,
    writers: &[
        Writer {
            extensions: &["arrow", "feather", "ipc"],
            write: |trace, out| write_columnar(trace, ColumnarKind::ArrowFile, out),
        },
        Writer {
            extensions: &["arrows"],
            write: |trace, out| write_columnar(trace, ColumnarKind::ArrowStream, out),
        },
    ],
};

/// The parquet reader's registry entry.
pub(crate) const PARQUET: ReaderEntry = ReaderEntry {
    name: "parquet",
    aliases: &["pq"],
    summary: "Apache Parquet in the columns of docs/formats.md",
    code: 14,
    completions: Completions::InFile,
    splittable: false,
    numbers_devices: false,
    detect_rank: 20,
    detect: |h| sniff(h.bytes.starts_with(b"PAR1")),
    read: read_parquet,
    writers: &[Writer {
        extensions: &["parquet", "pq"],
        write: |trace, out| write_columnar(trace, ColumnarKind::Parquet, out),
    }],
};

/// An Arrow IPC file (`ARROW1`) or stream (the continuation marker, then a
/// schema message's length: positive, a multiple of 8, small).
fn arrow_like(head: &[u8]) -> bool {
    if head.starts_with(b"ARROW1") {
        return true;
    }
    head.len() >= 8
        && head[..4] == [0xff; 4]
        && usize::try_from(i32::from_le_bytes([head[4], head[5], head[6], head[7]]))
            .is_ok_and(|n| n > 0 && n % 8 == 0 && n < 1 << 24)
}

/// Read an Arrow IPC file or stream.
pub(crate) fn read_arrow(input: &mut dyn BufRead, ctx: &mut ReadContext<'_>) -> Result<()> {
    #[cfg(feature = "arrow")]
    {
        let data = slurp(input, ctx)?;
        guarded(ctx, "Arrow IPC data", |ctx| {
            super::arrow_ipc::read(data, ctx)
        })
    }
    #[cfg(not(feature = "arrow"))]
    {
        let _ = input;
        Err(disabled::refuse(ctx, Format::Arrow))
    }
}

/// Read a Parquet file.
pub(crate) fn read_parquet(input: &mut dyn BufRead, ctx: &mut ReadContext<'_>) -> Result<()> {
    #[cfg(feature = "arrow")]
    {
        let data = slurp(input, ctx)?;
        guarded(ctx, "Parquet data", |ctx| super::parquet::read(data, ctx))
    }
    #[cfg(not(feature = "arrow"))]
    {
        let _ = input;
        Err(disabled::refuse(ctx, Format::Parquet))
    }
}

/// Whether this build reads and writes Parquet and Arrow IPC.
pub const ENABLED: bool = cfg!(feature = "arrow");

/// A columnar file layout fallow writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnarKind {
    /// Apache Parquet (zstd), `.parquet`.
    Parquet,
    /// Arrow IPC file ("Feather v2"), `.arrow`, `.feather`, `.ipc`.
    ArrowFile,
    /// Arrow IPC stream, `.arrows`.
    ArrowStream,
}

impl ColumnarKind {
    /// The layout an output path's extension asks for, if any.
    pub fn from_path(path: &std::path::Path) -> Option<ColumnarKind> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "parquet" | "pq" => Some(ColumnarKind::Parquet),
            "arrow" | "feather" | "ipc" => Some(ColumnarKind::ArrowFile),
            "arrows" => Some(ColumnarKind::ArrowStream),
            _ => None,
        }
    }
}

/// Write `trace` as a Parquet or Arrow IPC file in the layout above.
pub fn write_columnar(
    trace: &Trace,
    kind: ColumnarKind,
    out: &mut dyn std::io::Write,
) -> Result<()> {
    #[cfg(feature = "arrow")]
    {
        let batches = encode::batches(trace)?;
        match kind {
            ColumnarKind::Parquet => super::parquet::write(&batches, out),
            ColumnarKind::ArrowFile => super::arrow_ipc::write(&batches, false, out),
            ColumnarKind::ArrowStream => super::arrow_ipc::write(&batches, true, out),
        }
    }
    #[cfg(not(feature = "arrow"))]
    {
        let _ = (trace, out);
        Err(Error::Unsupported(format!(
            "cannot write {kind:?}: this fallow was built without the `arrow` cargo feature \
             (rebuild with default features)"
        )))
    }
}

#[cfg(feature = "arrow")]
pub(crate) use encode::{batches as encode_batches, Batches};

#[cfg(feature = "arrow")]
mod encode {
    //! Trace → record batches.
    use super::*;
    use arrow_array::{ArrayRef, BooleanArray, RecordBatch, StringArray, UInt32Array, UInt64Array};
    use arrow_schema::{DataType, Field, Schema, SchemaRef};
    use std::collections::HashMap;
    use std::sync::Arc;

    /// A schema and its batches.
    pub(crate) struct Batches {
        pub schema: SchemaRef,
        pub batches: Vec<RecordBatch>,
    }

    pub(crate) fn batches(trace: &Trace) -> Result<Batches> {
        let r = &trace.report;
        let hosts = &r.hosts;
        let mut fields = vec![Field::new(ARRIVAL, DataType::UInt64, false)];
        if trace.completion_ns.is_some() {
            fields.push(Field::new(COMPLETION, DataType::UInt64, false));
        }
        fields.extend([
            Field::new(OFFSET, DataType::UInt64, false),
            Field::new(SIZE, DataType::UInt32, false),
            Field::new(IS_WRITE, DataType::Boolean, false),
            Field::new(DEVICE, DataType::UInt32, false),
        ]);
        if !hosts.is_empty() {
            fields.push(Field::new(HOST, DataType::Utf8, false));
        }
        // A cache of a cache keeps the original source, as `.fbt` does.
        let source = crate::trace::fallow_bin::original_source(r);
        let mut meta = HashMap::from([
            (META_ORIGIN.to_string(), r.origin_ns.to_string()),
            (META_SKIPPED.to_string(), r.skipped.to_string()),
            (META_REORDERED.to_string(), r.reordered.to_string()),
            (META_IGNORED.to_string(), r.ignored.to_string()),
        ]);
        if let Some(s) = source {
            meta.insert(META_SOURCE.to_string(), s.name().to_string());
        }
        if !hosts.is_empty() {
            let json =
                serde_json::to_string(hosts).map_err(|e| Error::invalid("hosts", e.to_string()))?;
            meta.insert(META_HOSTS.to_string(), json);
        }
        let schema = Arc::new(Schema::new_with_metadata(fields, meta));
        let disk_mask = (1u32 << super::super::MSR_DISK_BITS) - 1;
        let mut batches = Vec::new();
        for start in (0..trace.len()).step_by(BATCH_ROWS) {
            let end = (start + BATCH_ROWS).min(trace.len());
            let rows = start..end;
            let mut cols: Vec<ArrayRef> = vec![Arc::new(UInt64Array::from(
                trace.arrival_ns[rows.clone()].to_vec(),
            ))];
            if let Some(c) = &trace.completion_ns {
                cols.push(Arc::new(UInt64Array::from(c[rows.clone()].to_vec())));
            }
            cols.push(Arc::new(UInt64Array::from(
                trace.offset_bytes[rows.clone()].to_vec(),
            )));
            cols.push(Arc::new(UInt32Array::from(
                trace.size_bytes[rows.clone()].to_vec(),
            )));
            cols.push(Arc::new(BooleanArray::from_iter(
                trace.op[rows.clone()]
                    .iter()
                    .map(|&o| Some(o == super::super::Op::Write)),
            )));
            let devices = &trace.device[rows.clone()];
            if hosts.is_empty() {
                cols.push(Arc::new(UInt32Array::from(devices.to_vec())));
            } else {
                // The disk number and the host's name: what a user of the
                // file sees in the MSR CSV.
                cols.push(Arc::new(UInt32Array::from_iter_values(
                    devices.iter().map(|&d| d & disk_mask),
                )));
                let name = |d: u32| {
                    let i = (d >> super::super::MSR_DISK_BITS) as usize;
                    hosts.get(i).map(String::as_str).ok_or_else(|| {
                        Error::invalid(
                            "device",
                            format!(
                                "device id {d} names MSR host {i}, but the trace has {} hosts",
                                hosts.len()
                            ),
                        )
                    })
                };
                let names = devices
                    .iter()
                    .map(|&d| name(d))
                    .collect::<Result<Vec<_>>>()?;
                cols.push(Arc::new(StringArray::from(names)));
            }
            let batch = RecordBatch::try_new(schema.clone(), cols)
                .map_err(|e| Error::invalid("columns", e.to_string()))?;
            batches.push(batch);
        }
        Ok(Batches { schema, batches })
    }
}

#[cfg(feature = "arrow")]
pub(crate) mod decode {
    //! Record batches → requests, for both readers.
    use super::*;
    use crate::error::Location;
    use crate::trace::{Op, RawRequest, TraceBuilder, MSR_DISK_BITS};
    use arrow_array::cast::AsArray;
    use arrow_array::types::*;
    use arrow_array::{Array, ArrayRef, RecordBatch};
    use arrow_schema::{DataType, Schema, TimeUnit};
    use std::collections::HashMap;

    /// Which of fallow's columns sit where in the file's schema.
    pub(crate) struct Layout {
        arrival: usize,
        completion: Option<usize>,
        offset: Option<usize>,
        size: Option<usize>,
        is_write: Option<usize>,
        device: Option<usize>,
        host: Option<usize>,
        /// Rows decoded so far (the next row's index in the file).
        row: u64,
    }

    fn find(schema: &Schema, name: &str) -> Option<usize> {
        schema.index_of(name).ok()
    }

    /// Check the schema, set up the builder and the report from it.
    pub(crate) fn start(schema: &Schema, ctx: &mut ReadContext<'_>) -> Result<Layout> {
        let Some(arrival) = find(schema, ARRIVAL) else {
            let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
            return Err(file_error(
                ctx,
                "columns",
                format!(
                    "no `{ARRIVAL}` column (columns: {}); fallow reads `{ARRIVAL}` and optionally \
                     `{COMPLETION}`, `{OFFSET}`, `{SIZE}`, `{IS_WRITE}`, `{DEVICE}`, `{HOST}` (docs/formats.md)",
                    crate::trace::lines::escape_controls(&names.join(", "))
                ),
            ));
        };
        let layout = Layout {
            arrival,
            completion: find(schema, COMPLETION),
            offset: find(schema, OFFSET),
            size: find(schema, SIZE),
            is_write: find(schema, IS_WRITE),
            device: find(schema, DEVICE),
            host: find(schema, HOST),
            row: 0,
        };
        // Every column's type is checked once here, so a file of the wrong
        // types fails naming the column before any row is read.
        for (name, idx, kind) in [
            (ARRIVAL, Some(layout.arrival), Kind::Time),
            (COMPLETION, layout.completion, Kind::Time),
            (OFFSET, layout.offset, Kind::Int),
            (SIZE, layout.size, Kind::Int),
            (IS_WRITE, layout.is_write, Kind::Flag),
            (DEVICE, layout.device, Kind::Int),
            (HOST, layout.host, Kind::Text),
        ] {
            if let Some(i) = idx {
                let t = schema.field(i).data_type();
                if !kind.accepts(t) {
                    return Err(file_error(
                        ctx,
                        &format!("column `{name}`"),
                        format!("type {t} is not {}", kind.describe()),
                    ));
                }
            }
        }
        ctx.builder = TraceBuilder::new(layout.completion.is_some());
        let meta = schema.metadata();
        let num = |key: &str| -> Result<u64> {
            match meta.get(key) {
                None => Ok(0),
                Some(v) => v.trim().parse().map_err(|_| {
                    file_error(
                        ctx,
                        &format!("metadata `{key}`"),
                        format!(
                            "`{}` is not a whole number",
                            crate::trace::lines::escape_controls(v)
                        ),
                    )
                }),
            }
        };
        let (origin, skipped, reordered, ignored) = (
            num(META_ORIGIN)?,
            num(META_SKIPPED)?,
            num(META_REORDERED)?,
            num(META_IGNORED)?,
        );
        let source = match meta.get(META_SOURCE) {
            // An unknown name (a newer fallow's format) is only unknown here.
            Some(name) => name.parse::<Format>().ok(),
            None => None,
        };
        if layout.host.is_some() {
            if let Some(json) = meta.get(META_HOSTS) {
                let hosts: Vec<String> = serde_json::from_str(json).map_err(|e| {
                    file_error(
                        ctx,
                        &format!("metadata `{META_HOSTS}`"),
                        format!("not a JSON list of names: {e}"),
                    )
                })?;
                if hosts.len() > MAX_HOSTS {
                    return Err(file_error(
                        ctx,
                        &format!("metadata `{META_HOSTS}`"),
                        format!("{} MSR hosts, at most {MAX_HOSTS}", hosts.len()),
                    ));
                }
                ctx.hosts = hosts.into_iter().map(String::into_bytes).collect();
            }
        }
        let r = &mut ctx.report;
        r.origin_ns = origin;
        r.source_format = source;
        r.skipped = r.skipped.saturating_add(skipped);
        r.reordered = r.reordered.saturating_add(reordered);
        r.ignored = r.ignored.saturating_add(ignored);
        Ok(layout)
    }

    const MAX_HOSTS: usize = 1 << (32 - MSR_DISK_BITS);

    #[derive(Clone, Copy)]
    enum Kind {
        Time,
        Int,
        Flag,
        Text,
    }

    impl Kind {
        fn accepts(self, t: &DataType) -> bool {
            let int = t.is_integer();
            match self {
                Kind::Time => int || matches!(t, DataType::Timestamp(..) | DataType::Duration(_)),
                Kind::Int => int,
                Kind::Flag => int || matches!(t, DataType::Boolean),
                Kind::Text => match t {
                    DataType::Dictionary(k, v) => k.is_integer() && is_text(v),
                    t => is_text(t),
                },
            }
        }
        fn describe(self) -> &'static str {
            match self {
                Kind::Time => "an integer (ns), a timestamp or a duration",
                Kind::Int => "an integer",
                Kind::Flag => "a boolean or an integer 0/1",
                Kind::Text => "a string",
            }
        }
    }

    fn is_text(t: &DataType) -> bool {
        matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
    }

    /// A column's value at a row as an integer (times scaled to ns), or
    /// None where it is null.
    fn int_at(col: &dyn Array, row: usize) -> Option<i128> {
        if col.is_null(row) {
            return None;
        }
        macro_rules! prim {
            ($t:ty, $scale:expr) => {
                Some(col.as_primitive::<$t>().value(row) as i128 * $scale)
            };
        }
        match col.data_type() {
            DataType::Int8 => prim!(Int8Type, 1),
            DataType::Int16 => prim!(Int16Type, 1),
            DataType::Int32 => prim!(Int32Type, 1),
            DataType::Int64 => prim!(Int64Type, 1),
            DataType::UInt8 => prim!(UInt8Type, 1),
            DataType::UInt16 => prim!(UInt16Type, 1),
            DataType::UInt32 => prim!(UInt32Type, 1),
            DataType::UInt64 => prim!(UInt64Type, 1),
            DataType::Boolean => Some(col.as_boolean().value(row) as i128),
            DataType::Timestamp(TimeUnit::Second, _) => prim!(TimestampSecondType, 1_000_000_000),
            DataType::Timestamp(TimeUnit::Millisecond, _) => {
                prim!(TimestampMillisecondType, 1_000_000)
            }
            DataType::Timestamp(TimeUnit::Microsecond, _) => prim!(TimestampMicrosecondType, 1_000),
            DataType::Timestamp(TimeUnit::Nanosecond, _) => prim!(TimestampNanosecondType, 1),
            DataType::Duration(TimeUnit::Second) => prim!(DurationSecondType, 1_000_000_000),
            DataType::Duration(TimeUnit::Millisecond) => prim!(DurationMillisecondType, 1_000_000),
            DataType::Duration(TimeUnit::Microsecond) => prim!(DurationMicrosecondType, 1_000),
            DataType::Duration(TimeUnit::Nanosecond) => prim!(DurationNanosecondType, 1),
            // `start` checked every column's type
            _ => None,
        }
    }

    /// A text column's value at a row (None where null).
    fn text_at(col: &dyn Array, row: usize) -> Option<&str> {
        if col.is_null(row) {
            return None;
        }
        match col.data_type() {
            DataType::Utf8 => Some(col.as_string::<i32>().value(row)),
            DataType::LargeUtf8 => Some(col.as_string::<i64>().value(row)),
            DataType::Utf8View => Some(col.as_string_view().value(row)),
            DataType::Dictionary(..) => {
                let dict = col.as_any_dictionary();
                let key = dict.normalized_keys()[row];
                text_at(dict.values().as_ref(), key)
            }
            _ => None,
        }
    }

    /// One row's value of a column that must be present and in range.
    fn value(
        col: &ArrayRef,
        row: usize,
        name: &'static str,
        max: u64,
    ) -> std::result::Result<u64, (&'static str, String)> {
        match int_at(col.as_ref(), row) {
            None => Err((name, "null".into())),
            Some(v) if v < 0 => Err((name, format!("negative ({v})"))),
            Some(v) if v > max as i128 => Err((name, format!("{v} is over {max}"))),
            Some(v) => Ok(v as u64),
        }
    }

    /// Push every row of `batch` (bad rows are errors or counted skips).
    pub(crate) fn push_batch(
        layout: &mut Layout,
        batch: &RecordBatch,
        ctx: &mut ReadContext<'_>,
    ) -> Result<()> {
        let col = |i: Option<usize>| i.map(|i| batch.column(i).clone());
        let arrival = batch.column(layout.arrival).clone();
        let (completion, offset, size, is_write, device, host) = (
            col(layout.completion),
            col(layout.offset),
            col(layout.size),
            col(layout.is_write),
            col(layout.device),
            col(layout.host),
        );
        // Dictionary keys normalised once per batch, not per row.
        let host_dict: Option<(Vec<usize>, ArrayRef)> = host.as_ref().and_then(|h| {
            matches!(h.data_type(), DataType::Dictionary(..)).then(|| {
                let d = h.as_any_dictionary();
                (d.normalized_keys(), d.values().clone())
            })
        });
        let mut host_index: HashMap<String, u32> = ctx
            .hosts
            .iter()
            .enumerate()
            .map(|(i, h)| (String::from_utf8_lossy(h).into_owned(), i as u32))
            .collect();
        for row in 0..batch.num_rows() {
            let at = Location::Record(layout.row);
            layout.row += 1;
            let req = (|| -> std::result::Result<RawRequest, (&'static str, String)> {
                let opt = |c: &Option<ArrayRef>, name, max| match c {
                    Some(c) => value(c, row, name, max).map(Some),
                    None => Ok(None),
                };
                let arrival_ns = value(&arrival, row, ARRIVAL, u64::MAX)?;
                let completion_ns = opt(&completion, COMPLETION, u64::MAX)?;
                let offset_bytes = opt(&offset, OFFSET, u64::MAX)?.unwrap_or(0);
                let size_bytes = opt(&size, SIZE, u32::MAX as u64)?.unwrap_or(0) as u32;
                let op = match opt(&is_write, IS_WRITE, 1)? {
                    Some(1) => Op::Write,
                    _ => Op::Read,
                };
                let mut dev = opt(&device, DEVICE, u32::MAX as u64)?.unwrap_or(0) as u32;
                if let Some(h) = &host {
                    let name = match &host_dict {
                        Some((keys, values)) if !h.is_null(row) => {
                            text_at(values.as_ref(), keys[row])
                        }
                        Some(_) => None,
                        None => text_at(h.as_ref(), row),
                    }
                    .ok_or((HOST, "null".to_string()))?;
                    if dev >= 1 << MSR_DISK_BITS {
                        return Err((
                            DEVICE,
                            format!(
                                "disk number {dev} of host `{}` is over {}",
                                crate::trace::lines::escape_controls(name),
                                (1u32 << MSR_DISK_BITS) - 1
                            ),
                        ));
                    }
                    let index = match host_index.get(name) {
                        Some(&i) => i,
                        None if host_index.len() < MAX_HOSTS => {
                            let i = host_index.len() as u32;
                            host_index.insert(name.to_string(), i);
                            ctx.hosts.push(name.as_bytes().to_vec());
                            i
                        }
                        None => return Err((HOST, format!("more than {MAX_HOSTS} MSR hosts"))),
                    };
                    dev |= index << MSR_DISK_BITS;
                }
                Ok(RawRequest {
                    arrival_ns,
                    completion_ns,
                    offset_bytes,
                    size_bytes,
                    op,
                    device: dev,
                })
            })();
            match req {
                Ok(req) => ctx.push(at, req)?,
                Err((field, message)) => ctx.bad(at, field, message)?,
            }
        }
        Ok(())
    }
}
