//! The parallel text reader against the sequential one: a file split into
//! chunks read on several threads must give the same columns, the same
//! report (reordered and skipped counts, the first skip examples) and the
//! same error (the first in the file, at its absolute line). The files are
//! generated, a few MB at most; the size threshold and the chunk size are
//! lowered through `read_trace_tuned` so small files are split into many
//! chunks.

use fallow_core::trace::{read_trace_tuned, Parallelism, ReadOptions};
use fallow_core::{Error, Trace};
use std::path::{Path, PathBuf};

/// A generated file in the temporary directory, removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, text: &str) -> Self {
        let path =
            std::env::temp_dir().join(format!("fallow-it-parallel-{}-{name}", std::process::id()));
        std::fs::write(&path, text).unwrap();
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A small deterministic generator (64-bit LCG), so no test depends on a
/// random-number crate's stream.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % below
    }
}

/// `n` MSR records after a header, arrivals increasing by 0..=2000 ticks,
/// with what the reader must take in its stride scattered through: comments,
/// blank lines, CRLF line ends, and records only the general parser accepts
/// (lower-case type, blanks around numbers).
fn msr_text(n: usize, seed: u64) -> Vec<String> {
    let mut rng = Lcg(seed);
    let hosts = ["usr", "proj", "hm", "a-rather-long-hostname"];
    let mut ticks = 128_166_372_000_000_000u64;
    let mut lines = vec!["Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime".to_string()];
    for i in 0..n {
        ticks += rng.next(2001);
        let host = hosts[rng.next(4) as usize];
        let disk = rng.next(3);
        let op = if rng.next(3) == 0 { "Write" } else { "Read" };
        let offset = rng.next(1 << 28) * 4096;
        let size = 512 << rng.next(8);
        let resp = rng.next(100_000);
        let line = match i % 997 {
            13 => format!(
                "{ticks},{host},{disk},{},{offset},{size},{resp}",
                op.to_lowercase()
            ),
            101 => format!("{ticks}, {host}, {disk}, {op}, {offset}, {size}, {resp}"),
            _ => format!("{ticks},{host},{disk},{op},{offset},{size},{resp}"),
        };
        lines.push(line);
        match i % 1499 {
            7 => lines.push("# a comment".into()),
            8 => lines.push(String::new()),
            _ => {}
        }
    }
    lines
}

/// Join lines with `\n`, some with `\r\n`, with a final newline or not.
fn join(lines: &[String], final_newline: bool) -> String {
    let mut text = String::new();
    for (i, l) in lines.iter().enumerate() {
        text.push_str(l);
        if i + 1 < lines.len() || final_newline {
            text.push_str(if i % 211 == 5 { "\r\n" } else { "\n" });
        }
    }
    text
}

fn split(threads: usize, chunk_bytes: u64) -> Parallelism {
    Parallelism {
        threads,
        min_file_bytes: 0,
        chunk_bytes,
    }
}

fn read(path: &Path, opts: &ReadOptions, par: Parallelism) -> Result<Trace, Error> {
    read_trace_tuned(path, opts, &mut |_| {}, par)
}

fn opts(skip_bad: bool) -> ReadOptions {
    ReadOptions {
        skip_bad,
        ..Default::default()
    }
}

/// Column by column and the whole report.
fn assert_same(par: &Trace, seq: &Trace, what: &str) {
    assert_eq!(par.len(), seq.len(), "{what}: length");
    assert_eq!(par.arrival_ns(), seq.arrival_ns(), "{what}: arrival_ns");
    assert_eq!(
        par.completion_ns(),
        seq.completion_ns(),
        "{what}: completion_ns"
    );
    assert_eq!(
        par.offset_bytes(),
        seq.offset_bytes(),
        "{what}: offset_bytes"
    );
    assert_eq!(par.size_bytes(), seq.size_bytes(), "{what}: size_bytes");
    assert_eq!(par.op(), seq.op(), "{what}: op");
    assert_eq!(par.device(), seq.device(), "{what}: device");
    assert_eq!(
        format!("{:?}", par.report()),
        format!("{:?}", seq.report()),
        "{what}: report"
    );
}

/// Read `path` sequentially and split every way in `splits`; all must agree.
fn assert_split_reads_agree(path: &Path, opts: &ReadOptions, size: u64) -> Result<Trace, Error> {
    let seq = read(path, opts, Parallelism::sequential());
    for par in [
        split(2, size / 2),
        split(2, 64 << 10),
        split(3, 50_000),
        split(4, 4096),
        split(8, size),
    ] {
        let what = format!("{par:?}");
        match (&seq, read(path, opts, par)) {
            (Ok(seq), Ok(par)) => assert_same(&par, seq, &what),
            (Err(seq), Err(par)) => assert_eq!(par.to_string(), seq.to_string(), "{what}"),
            (seq, par) => panic!(
                "{what}: sequential {:?}, parallel {:?}",
                seq.as_ref().map(Trace::len),
                par.map(|t| t.len())
            ),
        }
    }
    seq
}

#[test]
fn msr_split_into_chunks_reads_as_sequentially() {
    let lines = msr_text(60_000, 1);
    for final_newline in [true, false] {
        let text = join(&lines, final_newline);
        let f = TempFile::new(&format!("msr-{final_newline}"), &text);
        let t = assert_split_reads_agree(&f.0, &opts(false), text.len() as u64).unwrap();
        // header, 40 comment and 40 blank lines are not records
        assert_eq!(t.len(), 60_000);
        assert!(text.len() > 3_000_000, "{}", text.len());
        assert_eq!(t.report().reordered, 0);
        // Four hosts (and ` usr` etc. from the lines with blanks) of three
        // disks each: chunks meet the hosts in other orders than the file
        // and renumber them into the file's (the report and the device
        // column are compared with the sequential read above).
        let names: Vec<String> = t.devices().into_iter().filter_map(|d| d.name).collect();
        assert!(names.len() >= 12, "{names:?}");
        for want in ["usr:0", "hm:1", "proj:2", "a-rather-long-hostname:0"] {
            assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
        }
    }
}

/// Arrivals out of order within and across chunks: a record in a later
/// chunk earlier than the latest arrival of the chunks before counts as
/// reordered, as it does when read sequentially.
#[test]
fn shuffled_msr_counts_the_same_reordered_records() {
    let mut lines = msr_text(40_000, 2);
    let mut rng = Lcg(9);
    // Swap random pairs, near (within a chunk) and far (across chunks).
    for _ in 0..3000 {
        let i = 1 + rng.next(lines.len() as u64 - 1) as usize;
        let reach = if rng.next(2) == 0 { 20 } else { 20_000 };
        let j = (i + rng.next(reach) as usize).min(lines.len() - 1);
        lines.swap(i, j);
    }
    let text = join(&lines, true);
    let f = TempFile::new("shuffled", &text);
    let t = assert_split_reads_agree(&f.0, &opts(false), text.len() as u64).unwrap();
    assert!(t.report().reordered > 1000, "{}", t.report().reordered);
    assert!(t.arrival_ns().windows(2).all(|w| w[0] <= w[1]));
}

/// An error planted in the third of four chunks, and another further on:
/// the first is reported, at its line in the file.
#[test]
fn an_error_in_the_third_chunk_is_reported_at_its_absolute_line() {
    let mut lines = msr_text(40_000, 3);
    let text = join(&lines, true);
    let size = text.len();
    // Chunks of a quarter of the file (4 chunks, 2 threads): the line at 60 %
    // of the bytes is well inside the third chunk.
    let line_at = |fraction: f64| {
        text[..(size as f64 * fraction) as usize]
            .matches('\n')
            .count()
    };
    let (first, second) = (line_at(0.6), line_at(0.9));
    lines[first] = lines[first]
        .replacen(",Read,", ",Erase,", 1)
        .replacen(",Write,", ",Erase,", 1);
    lines[second] = "garbage".into();
    let text = join(&lines, true);
    let f = TempFile::new("error", &text);
    let par = split(2, size as u64 / 4);
    let seq_err = read(&f.0, &opts(false), Parallelism::sequential()).unwrap_err();
    let par_err = read(&f.0, &opts(false), par).unwrap_err();
    assert_eq!(par_err.to_string(), seq_err.to_string());
    // lines[k] is line k + 1 of the file
    let msg = par_err.to_string();
    assert!(
        msg.contains(&format!(": line {}: field `type`", first + 1)),
        "{msg}"
    );
    assert!(msg.contains("`Erase` is neither Read nor Write"), "{msg}");
    assert_split_reads_agree(&f.0, &opts(false), size as u64).unwrap_err();

    // Only the later error: reported at its own line.
    lines[first] = lines[first].replace(",Erase,", ",Read,");
    let text = join(&lines, true);
    let f = TempFile::new("error-late", &text);
    let msg = read(&f.0, &opts(false), par).unwrap_err().to_string();
    assert!(msg.contains(&format!(": line {}: ", second + 1)), "{msg}");
    assert_split_reads_agree(&f.0, &opts(false), size as u64).unwrap_err();
}

/// With `skip_bad`, bad records all over the file: the same count and the
/// same first five examples, which come from several chunks.
#[test]
fn skipped_records_and_their_examples_are_those_of_a_sequential_read() {
    let mut lines = msr_text(40_000, 4);
    let bad: Vec<usize> = (1..=12).map(|k| k * 3_300).collect();
    for &k in &bad {
        lines[k] = format!(
            "{},h,0,Read,-5,4096,1",
            128_166_372_000_000_000u64 + k as u64
        );
    }
    let text = join(&lines, true);
    let f = TempFile::new("skip", &text);
    let t = assert_split_reads_agree(&f.0, &opts(true), text.len() as u64).unwrap();
    let r = t.report();
    assert_eq!(r.skipped, 12);
    assert_eq!(r.skip_examples.len(), 5);
    for (example, &k) in r.skip_examples.iter().zip(&bad) {
        assert!(
            example.contains(&format!(": line {}: field `offset`", k + 1)),
            "{example}"
        );
    }
    // The first five bad lines lie in different chunks of 64 KiB.
    let par = read(&f.0, &opts(true), split(2, 64 << 10)).unwrap();
    assert_eq!(par.report().skip_examples, r.skip_examples);
}

#[test]
fn nothing_but_bad_records_is_the_same_empty_trace_error() {
    let text = "1,h,0,Read,x,1,1\n".repeat(20_000);
    let f = TempFile::new("all-bad", &text);
    let err = assert_split_reads_agree(&f.0, &opts(true), text.len() as u64).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("no requests in trace (20000 malformed records skipped; first:"),
        "{msg}"
    );
    assert!(msg.contains(": line 1: field `offset`"), "{msg}");
}

#[test]
fn spc_and_plain_split_into_chunks_read_as_sequentially() {
    let mut rng = Lcg(5);
    let mut spc = String::new();
    let mut plain = String::from("# time dev offset size op\n");
    let mut t_us = 0u64;
    for i in 0..30_000 {
        t_us += rng.next(3000);
        let (asu, lba, size) = (rng.next(4), rng.next(1 << 30), 512 * (1 + rng.next(64)));
        let op = ["r", "w", "R", "W"][rng.next(4) as usize];
        spc.push_str(&format!(
            "{asu},{lba},{size},{op},{}.{:06}\n",
            t_us / 1_000_000,
            t_us % 1_000_000
        ));
        let sep = if i % 2 == 0 { " " } else { "," };
        plain.push_str(&format!(
            "{}.{:03}{sep}{asu}{sep}{}{sep}{size}{sep}{}\n",
            t_us / 1000,
            t_us % 1000,
            lba * 512,
            i % 2
        ));
    }
    for (name, text) in [("trace.spc", &spc), ("trace.txt", &plain)] {
        let f = TempFile::new(name, text);
        let t = assert_split_reads_agree(&f.0, &opts(false), text.len() as u64).unwrap();
        assert_eq!(t.len(), 30_000, "{name}");
    }
}

/// Progress is reported from the calling thread while the chunks are read,
/// never backwards, and ends at the file's size.
#[test]
fn progress_advances_to_the_file_size() {
    let text = join(&msr_text(20_000, 6), true);
    let f = TempFile::new("progress", &text);
    for par in [Parallelism::sequential(), split(2, 4096)] {
        let mut seen = Vec::new();
        read_trace_tuned(&f.0, &opts(false), &mut |n| seen.push(n), par).unwrap();
        assert!(!seen.is_empty(), "{par:?}");
        assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{par:?}: {seen:?}");
        assert_eq!(seen.last(), Some(&(text.len() as u64)), "{par:?}");
    }
}
