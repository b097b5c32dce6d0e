//! A multi-device trace split by device in one streaming pass (`fallow
//! convert FILE -o DIR --partition-by device`): a Hive-partitioned Parquet
//! dataset, `DIR/device=<name>/part-<n>.parquet`, each file in the columns
//! of `columnar.rs` (the Parquet writer's own schema and properties).
//!
//! Memory is bounded whatever the file's size: each device's requests are
//! buffered up to [`Limits::group_rows`] and written as one row group; all
//! buffers together hold at most [`Limits::buffered_rows`] (past it the
//! largest is written early); at most [`Limits::open_writers`] files are
//! open at once (the least recently used is closed, and that device's next
//! rows start `part-<n+1>.parquet`, as Hive datasets allow).
//!
//! Each file's times are ns since its device's first arrival, with that
//! arrival as `fallow.origin_ns`, so a partition read back is the source's
//! `--device ID` (which rebases the same way). The device's name is the
//! directory's: the file's `device` column holds fallow's numeric id and no
//! `host` column, since an MSR host's name is known only once the pass has
//! read it all, after the rows are written. `fallow.skipped` is 0 in every
//! file: a skipped record's device is unknown (the pass's count is the
//! summary's).

use super::columnar::encode_batches;
use super::{stream_trace, Format, Op, RawRequest, ReadOptions, ReadReport, Trace};
use crate::error::{Error, Location, Result};
use parquet::arrow::ArrowWriter;
use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

/// Devices one pass partitions at most, as `fleet::MAX_DEVICES`
/// (Tencent CBS has 5,584 volumes): a bound on directories and on the
/// per-device state whatever ids a malformed file holds.
pub const MAX_DEVICES: usize = 1 << 16;

/// The partition column, and the directories' key.
pub const PARTITION_KEY: &str = "device";

/// Bounds of one pass's memory and open files.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Rows per row group (a device's buffer is written when it holds this many).
    pub group_rows: usize,
    /// Rows buffered over all devices at most (~48 bytes each).
    pub buffered_rows: usize,
    /// Parquet files open at once at most.
    pub open_writers: usize,
}

impl Default for Limits {
    /// 65,536-row groups, 2²² rows buffered (~200 MB), 64 open files.
    fn default() -> Self {
        Limits {
            group_rows: super::columnar::BATCH_ROWS,
            buffered_rows: 1 << 22,
            open_writers: 64,
        }
    }
}

/// One partition written.
#[derive(Debug, Clone, PartialEq)]
pub struct Partition {
    /// Device id in the trace.
    pub id: u32,
    /// The directory's value: the device's name where the trace names
    /// devices (`hm:0`, `8,16`), else its id; unescaped.
    pub name: String,
    /// The directory, `device=<escaped name>`, relative to the dataset.
    pub dir: String,
    /// Requests written.
    pub requests: u64,
    /// Files written (`part-0.parquet` …).
    pub parts: u32,
}

/// What one pass wrote.
#[derive(Debug, Clone)]
pub struct Partitioned {
    /// Format read.
    pub format: Option<Format>,
    /// Requests read.
    pub requests: u64,
    /// Records skipped as malformed (`--skip-bad`).
    pub skipped: u64,
    /// Partitions by device id.
    pub partitions: Vec<Partition>,
    /// Most rows buffered at once, over all devices (≤ `buffered_rows`).
    pub peak_buffered_rows: usize,
    /// Most files open at once (≤ `open_writers`).
    pub peak_open_files: usize,
}

/// The directory of a partition: `device=` and `name` with every byte
/// outside `A–Z a–z 0–9 . _ -` written `%XX` (upper-case hex of the UTF-8
/// byte), the URI escaping pyarrow's Hive partitioning decodes by default,
/// and a superset of Hive's own escapes (`/`, `:`, `=`, `%` …). No name
/// can make a path separator, `.` or `..`, or clash with another name.
pub fn partition_dir(name: &str) -> String {
    let mut s = format!("{PARTITION_KEY}=");
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

/// The file of part `n`.
pub fn part_file(n: u32) -> String {
    format!("part-{n}.parquet")
}

struct Device {
    origin_ns: u64,
    last_arrival_ns: u64,
    completions: bool,
    rows: Vec<RawRequest>,
    written: u64,
    parts: u32,
    writer: Option<ArrowWriter<File>>,
    last_use: u64,
}

struct Pass<'a> {
    staging: &'a Path,
    source: &'a Path,
    format: Option<Format>,
    limits: Limits,
    devices: HashMap<u32, Device>,
    buffered: usize,
    open: usize,
    clock: u64,
    peak_buffered: usize,
    peak_open: usize,
}

fn io_error(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn staging_dir(staging: &Path, id: u32) -> PathBuf {
    staging.join(format!(".id-{id}"))
}

impl Pass<'_> {
    fn push(&mut self, loc: Location, r: RawRequest) -> Result<()> {
        let n = self.devices.len();
        let group_rows = self.limits.group_rows;
        let d = match self.devices.entry(r.device) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                if n >= MAX_DEVICES {
                    return Err(Error::Record {
                        path: self.source.to_path_buf(),
                        location: loc,
                        field: "device",
                        message: format!(
                            "device {} would be the {}th; one pass partitions at most \
                             {MAX_DEVICES}",
                            r.device,
                            n + 1
                        ),
                    });
                }
                e.insert(Device {
                    origin_ns: r.arrival_ns,
                    last_arrival_ns: r.arrival_ns,
                    completions: r.completion_ns.is_some(),
                    rows: Vec::new(),
                    written: 0,
                    parts: 0,
                    writer: None,
                    last_use: 0,
                })
            }
        };
        if r.arrival_ns < d.last_arrival_ns {
            return Err(Error::Unsupported(format!(
                "{}: {loc}: this request of device {} arrives {} ns before the device's \
                 previous one; --partition-by reads in one pass and needs each device's \
                 requests in arrival order (sort the file first)",
                self.source.display(),
                r.device,
                d.last_arrival_ns - r.arrival_ns
            )));
        }
        if r.completion_ns.is_some() != d.completions {
            return Err(Error::Record {
                path: self.source.to_path_buf(),
                location: loc,
                field: "completion",
                message: format!(
                    "device {} has completion times on some requests and not others",
                    r.device
                ),
            });
        }
        d.last_arrival_ns = r.arrival_ns;
        d.rows.push(r);
        self.buffered += 1;
        if d.rows.len() >= group_rows {
            self.flush(r.device)?;
        } else if self.buffered > self.limits.buffered_rows {
            let largest = self
                .devices
                .iter()
                .max_by_key(|(id, d)| (d.rows.len(), std::cmp::Reverse(**id)))
                .map(|(id, _)| *id)
                .expect("a device holds rows");
            self.flush(largest)?;
        }
        self.peak_buffered = self.peak_buffered.max(self.buffered);
        Ok(())
    }

    /// Write device `id`'s buffer as one row group of its open file.
    fn flush(&mut self, id: u32) -> Result<()> {
        if self.devices[&id].rows.is_empty() {
            return Ok(());
        }
        let open_limit = self.limits.open_writers.max(1);
        let needs_writer = self.devices[&id].writer.is_none();
        if needs_writer && self.open >= open_limit {
            // close the least recently used file; its device's next rows
            // go to a new part
            let lru = self
                .devices
                .iter()
                .filter(|(_, d)| d.writer.is_some())
                .min_by_key(|(_, d)| d.last_use)
                .map(|(i, _)| *i)
                .expect("open writers exist");
            self.close(lru)?;
        }
        self.clock += 1;
        let clock = self.clock;
        let staging = self.staging;
        let format = self.format;
        let d = self.devices.get_mut(&id).expect("flushed devices exist");
        let rows = std::mem::take(&mut d.rows);
        self.buffered -= rows.len();
        let trace = Trace {
            arrival_ns: rows.iter().map(|r| r.arrival_ns - d.origin_ns).collect(),
            completion_ns: d.completions.then(|| {
                rows.iter()
                    .map(|r| r.completion_ns.unwrap_or(r.arrival_ns) - d.origin_ns)
                    .collect()
            }),
            offset_bytes: rows.iter().map(|r| r.offset_bytes).collect(),
            size_bytes: rows.iter().map(|r| r.size_bytes).collect(),
            op: rows.iter().map(|r| r.op).collect::<Vec<Op>>(),
            device: rows.iter().map(|r| r.device).collect(),
            report: ReadReport {
                format,
                origin_ns: d.origin_ns,
                ..ReadReport::default()
            },
        };
        let batches = encode_batches(&trace)?;
        let pq_err = |path: &Path, e: parquet::errors::ParquetError| {
            Error::invalid("Parquet output", format!("{}: {e}", path.display()))
        };
        let dir = staging_dir(staging, id);
        let path = dir.join(part_file(d.parts));
        if d.writer.is_none() {
            std::fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
            let file = File::create_new(&path).map_err(|e| io_error(&path, e))?;
            let props = super::parquet::properties(super::parquet::footer_keys(&batches.schema));
            let w = ArrowWriter::try_new(file, batches.schema.clone(), Some(props))
                .map_err(|e| pq_err(&path, e))?;
            d.writer = Some(w);
            self.open += 1;
            self.peak_open = self.peak_open.max(self.open);
        }
        let w = d.writer.as_mut().expect("opened above");
        for b in &batches.batches {
            w.write(b).map_err(|e| pq_err(&path, e))?;
        }
        // end the row group here, so the writer holds no rows
        w.flush().map_err(|e| pq_err(&path, e))?;
        d.written += rows.len() as u64;
        d.last_use = clock;
        Ok(())
    }

    fn close(&mut self, id: u32) -> Result<()> {
        let d = self.devices.get_mut(&id).expect("closed devices exist");
        if let Some(w) = d.writer.take() {
            let path = staging_dir(self.staging, id).join(part_file(d.parts));
            w.close().map_err(|e| {
                Error::invalid("Parquet output", format!("{}: {e}", path.display()))
            })?;
            d.parts += 1;
            self.open -= 1;
        }
        Ok(())
    }
}

/// Split the trace at `path` by device into `staging`, an existing empty
/// directory, in one streaming pass (see the module's documentation).
/// Files are written under hidden per-id directories and renamed to
/// `device=<name>` once the pass has read every name; on an error the
/// caller removes `staging`.
pub fn partition_by_device(
    path: &Path,
    opts: &ReadOptions,
    staging: &Path,
    limits: Limits,
) -> Result<Partitioned> {
    // every file's metadata names the source, fixed when it is opened
    let format = Some(super::detected_format(path, opts)?);
    let mut pass = Pass {
        staging,
        source: path,
        format,
        limits,
        devices: HashMap::new(),
        buffered: 0,
        open: 0,
        clock: 0,
        peak_buffered: 0,
        peak_open: 0,
    };
    let streamed = {
        let mut sink = |loc: Location, r: RawRequest| pass.push(loc, r);
        stream_trace(path, opts, &mut sink)?
    };
    let mut ids: Vec<u32> = pass.devices.keys().copied().collect();
    ids.sort_unstable();
    let mut partitions = Vec::with_capacity(ids.len());
    for id in ids {
        pass.flush(id)?;
        pass.close(id)?;
        let d = &pass.devices[&id];
        let name = streamed.device_name(id).unwrap_or_else(|| id.to_string());
        let dir = partition_dir(&name);
        let to = staging.join(&dir);
        let from = staging_dir(staging, id);
        std::fs::rename(&from, &to).map_err(|e| io_error(&to, e))?;
        partitions.push(Partition {
            id,
            name,
            dir,
            requests: d.written,
            parts: d.parts,
        });
    }
    Ok(Partitioned {
        format: streamed.report.format,
        requests: streamed.requests,
        skipped: streamed.report.skipped,
        partitions,
        peak_buffered_rows: pass.peak_buffered,
        peak_open_files: pass.peak_open,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::read_trace;

    fn data(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/data/traces")
            .join(name)
    }

    /// Every partition, its parts read back in order and joined, against
    /// the source's `--device ID`: absolute arrivals and completions,
    /// offsets, sizes, ops.
    fn check(path: &Path, opts: &ReadOptions, limits: Limits) -> Partitioned {
        let dir = tempfile::tempdir().unwrap();
        let out = partition_by_device(path, opts, dir.path(), limits).unwrap();
        let whole = read_trace(path, opts).unwrap();
        let devices = whole.devices();
        assert!(
            devices.len() > 1,
            "{}: a multi-device fixture",
            path.display()
        );
        assert_eq!(out.partitions.len(), devices.len());
        assert_eq!(out.requests, whole.len() as u64);
        let mut listed: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        listed.sort();
        let mut dirs: Vec<String> = out.partitions.iter().map(|p| p.dir.clone()).collect();
        dirs.sort();
        assert_eq!(listed, dirs, "only the partitions' directories remain");
        for (p, d) in out.partitions.iter().zip(&devices) {
            assert_eq!(p.id, d.id);
            assert_eq!(p.name, d.name.clone().unwrap_or_else(|| d.id.to_string()));
            let one = whole.select_device(d.id).unwrap();
            let abs = |t: &Trace, v: &[u64]| -> Vec<u64> {
                v.iter().map(|x| x + t.report.origin_ns).collect()
            };
            let (mut arr, mut comp, mut off, mut size, mut ops) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
            let mut has_comp = None;
            for n in 0..p.parts {
                let f = dir.path().join(&p.dir).join(part_file(n));
                let t = read_trace(&f, &ReadOptions::default()).unwrap();
                assert_eq!(t.report.format, Some(Format::Parquet));
                arr.extend(abs(&t, t.arrival_ns()));
                if let Some(c) = t.completion_ns() {
                    comp.extend(abs(&t, c));
                }
                has_comp = Some(t.completion_ns().is_some());
                off.extend_from_slice(&t.offset_bytes);
                size.extend_from_slice(&t.size_bytes);
                ops.extend_from_slice(&t.op);
            }
            assert!(
                !dir.path().join(&p.dir).join(part_file(p.parts)).exists(),
                "no file past the parts counted"
            );
            assert_eq!(p.requests, one.len() as u64);
            assert_eq!(arr, abs(&one, one.arrival_ns()), "{}: arrivals", p.name);
            assert_eq!(has_comp, Some(one.completion_ns().is_some()));
            if let Some(c) = one.completion_ns() {
                assert_eq!(comp, abs(&one, c), "{}: completions", p.name);
            }
            assert_eq!(off, one.offset_bytes, "{}: offsets", p.name);
            assert_eq!(size, one.size_bytes, "{}: sizes", p.name);
            assert_eq!(ops, one.op, "{}: ops", p.name);
        }
        out
    }

    /// small.msr.csv with disk 1 moved to a second host, so devices are
    /// named `hm:0` and `rsrch:1`, names a path must escape.
    fn two_hosts(dir: &Path) -> PathBuf {
        let text = std::fs::read_to_string(data("small.msr.csv")).unwrap();
        assert!(text.contains(",hm,1,"));
        let p = dir.join("two-hosts.msr.csv");
        std::fs::write(&p, text.replace(",hm,1,", ",rsrch,1,")).unwrap();
        p
    }

    /// 600 requests over 5 devices, interleaved, in the Alibaba, Tencent
    /// and two-host MSR layouts (a fixed LCG), large enough for the tiny
    /// bounds below to split devices into several files.
    fn synthetic(dir: &Path) -> Vec<PathBuf> {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move || {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            x >> 33
        };
        let (mut ali, mut ten, mut msr) = (String::new(), String::new(), String::new());
        let (mut us, mut s, mut ticks) = (
            1_577_836_800_000_000u64,
            1_538_352_000u64,
            128_166_372_000_000_000u64,
        );
        for _ in 0..600 {
            let dev = next() % 5;
            let write = next() % 2 == 1;
            let sectors = 1 + next() % 64;
            let off = next() % 1_000_000;
            us += next() % 5_000;
            s += next() % 2;
            ticks += next() % 50_000;
            ali.push_str(&format!(
                "{},{},{},{},{us}\n",
                900 + dev,
                if write { "W" } else { "R" },
                off * 512,
                sectors * 512
            ));
            ten.push_str(&format!(
                "{s},{off},{sectors},{},{}\n",
                u8::from(write),
                40 + dev
            ));
            msr.push_str(&format!(
                "{ticks},{},{},{},{},{},{}\n",
                if dev < 3 { "hm" } else { "rsrch" },
                dev,
                if write { "Write" } else { "Read" },
                off * 512,
                sectors * 512,
                1 + next() % 90_000
            ));
        }
        let mut out = Vec::new();
        for (name, text) in [
            ("fleet.alibaba.csv", ali),
            ("fleet.tencent.csv", ten),
            ("fleet.msr.csv", msr),
        ] {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            out.push(p);
        }
        out
    }

    fn fixtures(dir: &Path) -> Vec<(PathBuf, ReadOptions)> {
        vec![
            (data("small.msr.csv"), ReadOptions::default()),
            (two_hosts(dir), ReadOptions::default()),
            (data("small.alibaba.csv"), ReadOptions::default()),
            (data("small.tencent.csv"), ReadOptions::default()),
        ]
    }

    #[test]
    fn partitions_equal_each_device_of_the_source() {
        let inputs = tempfile::tempdir().unwrap();
        let synthetic = synthetic(inputs.path())
            .into_iter()
            .map(|p| (p, ReadOptions::default()));
        for (path, opts) in fixtures(inputs.path()).into_iter().chain(synthetic) {
            let out = check(&path, &opts, Limits::default());
            // one row group's worth: one file each
            assert!(out.partitions.iter().all(|p| p.parts == 1));
            if path.ends_with("two-hosts.msr.csv") {
                let dirs: Vec<&str> = out.partitions.iter().map(|p| p.dir.as_str()).collect();
                assert_eq!(dirs, ["device=hm%3A0", "device=rsrch%3A1"]);
            }
        }
    }

    #[test]
    fn tiny_bounds_split_into_parts_and_still_equal() {
        // groups of 50 rows, 70 rows buffered, two open files: every bound
        // is hit, and the parts still join to the device
        let tiny = Limits {
            group_rows: 50,
            buffered_rows: 70,
            open_writers: 2,
        };
        let inputs = tempfile::tempdir().unwrap();
        for path in synthetic(inputs.path()) {
            let opts = ReadOptions::default();
            let out = check(&path, &opts, tiny);
            assert!(
                out.partitions.iter().any(|p| p.parts > 1),
                "{}: the bounds split some device",
                path.display()
            );
            assert!(out.peak_buffered_rows <= tiny.buffered_rows);
            assert_eq!(
                out.peak_open_files, tiny.open_writers,
                "the open-file bound is reached, not passed"
            );
            let parts: u32 = out.partitions.iter().map(|p| p.parts).sum();
            assert!(parts as usize > out.partitions.len());
        }
    }

    #[test]
    fn unsafe_names_are_escaped() {
        assert_eq!(partition_dir("hm:0"), "device=hm%3A0");
        assert_eq!(partition_dir("8,16"), "device=8%2C16");
        assert_eq!(partition_dir("a/b=c%"), "device=a%2Fb%3Dc%25");
        assert_eq!(partition_dir(".."), "device=..");
        assert_eq!(partition_dir("nvme0n1"), "device=nvme0n1");
        // é is two UTF-8 bytes
        assert_eq!(partition_dir("é"), "device=%C3%A9");
    }
}
