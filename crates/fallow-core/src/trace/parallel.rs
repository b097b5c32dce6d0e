//! Reading a large uncompressed text trace on several threads.
//!
//! MSR, SPC and plain records are independent lines, so such a file can be
//! cut into byte ranges at line ends, each range read by the format's
//! ordinary reader into a builder of its own, and the builders joined in
//! file order. Nothing a caller can see changes: the columns, the report
//! (reordered and skipped counts, the first skip examples) and the error of
//! a bad record (the first in the file, at its absolute line) are those of
//! a sequential read. Only the time differs.
//!
//! Not split: gzip (a stream cannot be entered in the middle), blkparse (an
//! issue and its completion are on different lines), the binary formats
//! (already cheap to read), and files below [`Parallelism::min_file_bytes`],
//! where starting threads costs more than it saves.
//!
//! The file is cut into more ranges than threads (about
//! [`Parallelism::chunk_bytes`] each) and the threads take the next range as
//! they free up, so one thread slowed by a busy core does not hold up the
//! whole read.

use super::MSR_DISK_BITS;
use super::{
    lines_in, read_format, Format, ReadContext, ReadOptions, Trace, TraceBuilder, SKIP_EXAMPLES,
};
use crate::error::{Error, Location, Result};
use std::fs::File;
use std::io::{BufReader, Read};
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{
    AtomicU64, AtomicUsize, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread::Thread;
use std::time::Duration;

/// How [`read_trace_tuned`](super::read_trace_tuned) may split a file
/// between threads. Not a stable interface: the defaults come from
/// [`Parallelism::from_env`]; tests set the fields to force the parallel
/// reader onto small files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parallelism {
    /// Threads reading at once (1: read sequentially).
    pub threads: usize,
    /// Files smaller than this are read sequentially.
    pub min_file_bytes: u64,
    /// Bytes per range handed to a thread (the last ranges may be shorter).
    pub chunk_bytes: u64,
}

impl Parallelism {
    /// Default [`Parallelism::min_file_bytes`]: 32 MiB, about 0.1 s of
    /// sequential reading.
    pub const MIN_FILE_BYTES: u64 = 32 << 20;
    /// Default [`Parallelism::chunk_bytes`]: 16 MiB.
    pub const CHUNK_BYTES: u64 = 16 << 20;

    /// Most reader threads per core: more only add memory and switching.
    pub const MAX_THREADS_PER_CORE: usize = 4;

    /// `FALLOW_THREADS` threads if that is set, else one per core
    /// ([`std::thread::available_parallelism`]); never more than
    /// [`Parallelism::MAX_THREADS_PER_CORE`] per core. A value that is not a
    /// positive integer or is absurd (see [`threads_from_env`]) falls back
    /// to the default here; [`Parallelism::try_from_env`] reports it.
    pub fn from_env() -> Self {
        Self::try_from_env().unwrap_or_else(|_| Self::with_threads(cores()))
    }

    /// [`Parallelism::from_env`], refusing a bad `FALLOW_THREADS`.
    pub fn try_from_env() -> Result<Self> {
        let threads = threads_from_env()?.unwrap_or_else(cores);
        Ok(Self::with_threads(
            threads.min(cores().saturating_mul(Self::MAX_THREADS_PER_CORE)),
        ))
    }

    fn with_threads(threads: usize) -> Self {
        Parallelism {
            threads,
            min_file_bytes: Self::MIN_FILE_BYTES,
            chunk_bytes: Self::CHUNK_BYTES,
        }
    }

    /// One thread: the sequential reader, whatever the file.
    pub fn sequential() -> Self {
        Self::with_threads(1)
    }

    /// Whether a plain file of `size` bytes is to be split.
    pub(crate) fn splits(&self, size: u64) -> bool {
        POSITIONED_READS && self.threads > 1 && size > 0 && size >= self.min_file_bytes
    }
}

/// Cores of this machine (1 if unknown).
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Most threads `FALLOW_THREADS` may ask for, whatever the machine.
pub const MAX_THREADS: usize = 1024;

/// The thread count in `FALLOW_THREADS`: `None` when unset or blank, an
/// error naming the variable when it is not an integer in
/// 1..=[`MAX_THREADS`] (a typo must not start 100 000 threads, nor be
/// silently ignored).
pub fn threads_from_env() -> Result<Option<usize>> {
    parse_threads(std::env::var_os("FALLOW_THREADS").as_deref())
}

fn parse_threads(raw: Option<&std::ffi::OsStr>) -> Result<Option<usize>> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let text = raw.to_string_lossy();
    let t = text.trim();
    if t.is_empty() {
        return Ok(None);
    }
    match t.parse::<u64>() {
        Ok(n @ 1..) if n <= MAX_THREADS as u64 => Ok(Some(n as usize)),
        _ => Err(Error::invalid(
            "FALLOW_THREADS",
            format!(
                "`{}` is not a thread count from 1 to {MAX_THREADS} (this machine has {} cores)",
                super::lines::show(t.as_bytes()),
                cores()
            ),
        )),
    }
}

/// A file to read in parallel and what is known of it.
pub(crate) struct Job<'a> {
    pub file: &'a File,
    /// Its size in bytes.
    pub size: u64,
    pub path: &'a Path,
    pub opts: &'a ReadOptions,
    pub format: Format,
    /// Average line length of its head, to size the columns.
    pub bytes_per_line: u64,
}

/// Read `job` on `par.threads` threads, calling `progress(bytes_read)` from
/// this thread while they work.
pub(crate) fn read(
    job: &Job<'_>,
    par: Parallelism,
    progress: &mut dyn FnMut(u64),
) -> Result<Trace> {
    let ranges = cut(job.file, job.size, par).map_err(|source| Error::Io {
        path: job.path.to_path_buf(),
        source,
    })?;
    let shared = Shared {
        next: AtomicUsize::new(0),
        failed: AtomicUsize::new(usize::MAX),
        bytes_read: AtomicU64::new(0),
        done: Mutex::new((0..ranges.len()).map(|_| None).collect()),
        joined: Mutex::new(Joined {
            all: ReadContext::new(job.path, job.opts, job.format),
            next: 0,
            lines_before: 0,
            error: None,
        }),
        spare: Mutex::new(Vec::new()),
    };
    let threads = par.threads.min(ranges.len());
    let running = AtomicUsize::new(threads);
    let this = std::thread::current();
    std::thread::scope(|s| {
        // A thread the system refuses is not an error: the others take
        // its ranges (and with none at all, this thread reads them).
        let workers: Vec<_> = (0..threads)
            .filter_map(|_| {
                let spawned = std::thread::Builder::new().spawn_scoped(s, || {
                    let _wake = Finished {
                        running: &running,
                        waiting: &this,
                    };
                    work(job, &ranges, &shared);
                });
                if spawned.is_err() {
                    running.fetch_sub(1, Release);
                }
                spawned.ok()
            })
            .collect();
        if workers.is_empty() {
            work(job, &ranges, &shared);
        }
        // The progress callback need not be `Send`: call it from here.
        while running.load(Acquire) > 0 {
            progress(shared.bytes_read.load(Relaxed));
            std::thread::park_timeout(Duration::from_millis(20));
        }
        for w in workers {
            w.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
        }
    });
    progress(shared.bytes_read.load(Relaxed));
    shared.join_ready(&mut lock(&shared.joined));
    let joined = shared
        .joined
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    match joined.error {
        Some(e) => Err(e),
        None => joined.all.finish(),
    }
}

/// Counts a worker out and wakes the waiting thread when the worker ends,
/// also when it panics (the panic is passed on by the join).
struct Finished<'a> {
    running: &'a AtomicUsize,
    waiting: &'a Thread,
}

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        self.running.fetch_sub(1, Release);
        self.waiting.unpark();
    }
}

/// What the threads share.
struct Shared<'a> {
    /// The next chunk to read.
    next: AtomicUsize,
    /// The lowest chunk that failed: later chunks need not be read, since
    /// the error reported is the first in the file.
    failed: AtomicUsize,
    /// Bytes read so far, for progress.
    bytes_read: AtomicU64,
    /// Chunks read and not yet joined, by index.
    done: Mutex<Vec<Option<Result<ReadContext<'a>>>>>,
    /// The chunks joined so far.
    joined: Mutex<Joined<'a>>,
    /// Builders of joined chunks, emptied but with their memory: reading
    /// the next chunk into one saves the page faults of fresh memory.
    spare: Mutex<Vec<TraceBuilder>>,
}

/// One thread's work: read chunks until none is left, and join those that
/// are ready, so joining overlaps with reading.
fn work<'a>(job: &Job<'a>, ranges: &[Range<u64>], shared: &Shared<'a>) {
    loop {
        let i = shared.next.fetch_add(1, Relaxed);
        if i >= ranges.len() || shared.failed.load(Relaxed) < i {
            return;
        }
        let span = Span {
            file: job.file,
            pos: ranges[i].start,
            end: ranges[i].end,
            chunk: i,
            bytes_read: &shared.bytes_read,
            failed: &shared.failed,
        };
        let spare = lock(&shared.spare).pop();
        let r = read_chunk(job, i, span, spare);
        if r.is_err() {
            shared.failed.fetch_min(i, Relaxed);
        }
        lock(&shared.done)[i] = Some(r);
        // If another thread is joining, it will take this chunk too when it
        // is next; else whoever finishes last (or `read`) will.
        if let Ok(mut joined) = shared.joined.try_lock() {
            shared.join_ready(&mut joined);
        }
    }
}

impl<'a> Shared<'a> {
    /// Join the chunks that are next in file order and read.
    fn join_ready(&self, joined: &mut Joined<'a>) {
        loop {
            let chunk = match lock(&self.done).get_mut(joined.next).and_then(Option::take) {
                Some(chunk) => chunk,
                None => return,
            };
            if let Some(builder) = joined.join(chunk) {
                lock(&self.spare).push(builder);
            }
        }
    }
}

/// The chunks joined so far: what a sequential read of them would have
/// produced.
struct Joined<'a> {
    all: ReadContext<'a>,
    /// The next chunk to join.
    next: usize,
    /// Lines in the chunks joined.
    lines_before: u64,
    /// The first error in the file, once met: nothing is joined after it.
    error: Option<Error>,
}

impl<'a> Joined<'a> {
    /// Join the next chunk, returning its emptied builder for reuse.
    fn join(&mut self, chunk: Result<ReadContext<'a>>) -> Option<TraceBuilder> {
        self.next += 1;
        if self.error.is_some() {
            return None;
        }
        let mut chunk = match chunk {
            Ok(chunk) => chunk,
            Err(e) => {
                self.error = Some(shift_line(e, self.lines_before));
                return None;
            }
        };
        // The chunk numbered MSR hosts by their first appearance in it;
        // renumber them by their first appearance in the file.
        let mut renumber = Vec::with_capacity(chunk.hosts.len());
        for host in std::mem::take(&mut chunk.hosts) {
            let index = match self.all.hosts.iter().position(|h| *h == host) {
                Some(i) => i,
                None => {
                    self.all.hosts.push(host);
                    self.all.hosts.len() - 1
                }
            };
            renumber.push(index as u32);
        }
        if renumber.len() > 1 << (32 - MSR_DISK_BITS)
            || self.all.hosts.len() > 1 << (32 - MSR_DISK_BITS)
        {
            self.error = Some(Error::Record {
                path: self.all.path.to_path_buf(),
                location: Location::Line(self.lines_before + 1),
                field: "hostname",
                message: format!(
                    "more than {} hosts in one file",
                    1u32 << (32 - MSR_DISK_BITS)
                ),
            });
            return None;
        }
        if renumber.iter().enumerate().any(|(i, &r)| r != i as u32) {
            let mask = (1u32 << MSR_DISK_BITS) - 1;
            chunk.builder.map_devices(|d| {
                let host = renumber
                    .get((d >> MSR_DISK_BITS) as usize)
                    .copied()
                    .unwrap_or(0);
                host << MSR_DISK_BITS | (d & mask)
            });
        }
        self.all.builder.append(&mut chunk.builder);
        self.all.report.skipped = self.all.report.skipped.saturating_add(chunk.report.skipped);
        self.all.report.ignored = self.all.report.ignored.saturating_add(chunk.report.ignored);
        for (reason, n) in &chunk.report.ignored_by_reason {
            let all = self.all.report.ignored_by_reason.entry(reason).or_default();
            *all = all.saturating_add(*n);
        }
        for e in chunk.skip_errors {
            if self.all.skip_errors.len() < SKIP_EXAMPLES {
                self.all.skip_errors.push(shift_line(e, self.lines_before));
            }
        }
        // Every chunk but the last ends with a newline, so its lines are
        // exactly the newlines before the next chunk.
        self.lines_before += chunk.lines;
        Some(chunk.builder)
    }
}

/// A lock, whether or not a thread panicked holding it (the panic is
/// passed on when the threads are joined).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Read chunk `i` into a context of its own, into `spare`'s memory if
/// given: line numbers relative to the chunk, columns sized from the
/// chunk's length (chunk 0's from the whole file's, since the others are
/// appended to it).
fn read_chunk<'a>(
    job: &Job<'a>,
    i: usize,
    span: Span<'_>,
    spare: Option<TraceBuilder>,
) -> Result<ReadContext<'a>> {
    let mut ctx = ReadContext::new(job.path, job.opts, job.format);
    if let Some(spare) = spare {
        ctx.builder = spare;
    }
    ctx.at_file_start = span.pos == 0;
    let bytes = if i == 0 {
        job.size
    } else {
        span.end - span.pos
    };
    ctx.builder.reserve(lines_in(bytes, job.bytes_per_line));
    let mut input = BufReader::with_capacity(1 << 17, span);
    read_format(job.format, &mut input, &mut ctx)?;
    Ok(ctx)
}

/// `e` with its line number counted from the start of the file rather than
/// of a chunk after `lines_before` lines.
fn shift_line(e: Error, lines_before: u64) -> Error {
    match e {
        Error::Record {
            path,
            location: Location::Line(n),
            field,
            message,
        } => Error::Record {
            path,
            location: Location::Line(n + lines_before),
            field,
            message,
        },
        e => e,
    }
}

/// Byte ranges of about `par.chunk_bytes` (at least one per thread), each
/// starting at the start of a line.
fn cut(file: &File, size: u64, par: Parallelism) -> std::io::Result<Vec<Range<u64>>> {
    let chunks = size
        .div_ceil(par.chunk_bytes.max(1))
        .max(par.threads as u64)
        .max(1);
    let mut starts = vec![0];
    let mut buf = vec![0; 1 << 16];
    for k in 1..chunks {
        let target = (u128::from(size) * u128::from(k) / u128::from(chunks)) as u64;
        let last = *starts.last().unwrap_or(&0);
        match next_line_start(file, target.max(last), size, &mut buf)? {
            Some(p) if p > last && p < size => starts.push(p),
            Some(_) => {}
            None => break,
        }
    }
    let mut ranges: Vec<Range<u64>> = starts.windows(2).map(|w| w[0]..w[1]).collect();
    ranges.push(*starts.last().unwrap_or(&0)..size);
    Ok(ranges)
}

/// The offset just after the first newline at or after `from`, if any.
fn next_line_start(
    file: &File,
    mut from: u64,
    size: u64,
    buf: &mut [u8],
) -> std::io::Result<Option<u64>> {
    while from < size {
        let n = read_at(file, buf, from)?;
        if n == 0 {
            break;
        }
        if let Some(i) = memchr::memchr(b'\n', &buf[..n]) {
            return Ok(Some(from + i as u64 + 1));
        }
        from += n as u64;
    }
    Ok(None)
}

/// One chunk of the file as a reader: positioned reads, so threads share
/// the file without sharing a cursor. It stops early (with an error that is
/// never reported) once an earlier chunk has failed.
struct Span<'a> {
    file: &'a File,
    pos: u64,
    end: u64,
    chunk: usize,
    bytes_read: &'a AtomicU64,
    failed: &'a AtomicUsize,
}

impl Read for Span<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.failed.load(Relaxed) < self.chunk {
            return Err(std::io::Error::other("an earlier chunk failed"));
        }
        let want = (self.end - self.pos).min(buf.len() as u64) as usize;
        if want == 0 {
            return Ok(0);
        }
        let n = read_at(self.file, &mut buf[..want], self.pos)?;
        self.pos += n as u64;
        self.bytes_read.fetch_add(n as u64, Relaxed);
        Ok(n)
    }
}

/// Whether this platform has positioned reads; without them files are
/// read sequentially.
const POSITIONED_READS: bool = cfg!(any(unix, windows));

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

#[cfg(windows)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(file, buf, offset)
}

#[cfg(not(any(unix, windows)))]
fn read_at(_: &File, _: &mut [u8], _: u64) -> std::io::Result<usize> {
    Err(std::io::ErrorKind::Unsupported.into())
}

#[cfg(test)]
mod tests {
    #[test]
    fn fallow_threads_is_bounded_and_checked() {
        let p = |v: &str| parse_threads(Some(std::ffi::OsStr::new(v)));
        assert_eq!(p("4").unwrap(), Some(4));
        assert_eq!(p(" 1024 ").unwrap(), Some(1024));
        assert_eq!(p("").unwrap(), None);
        assert_eq!(parse_threads(None).unwrap(), None);
        for bad in ["0", "100000", "-3", "x", "18446744073709551616", "2\u{1b}"] {
            let e = p(bad).unwrap_err().to_string();
            assert!(
                e.contains("FALLOW_THREADS") && e.contains("1 to 1024"),
                "{e}"
            );
            assert!(!e.contains('\u{1b}'), "{e}");
        }
        // Whatever the variable says, no more than four threads per core.
        let most = cores() * Parallelism::MAX_THREADS_PER_CORE;
        assert!(Parallelism::from_env().threads <= most);
    }

    use super::*;
    use crate::trace::read_trace_tuned;
    use std::path::PathBuf;

    /// `bytes` in a file named `name` in a directory of its own, removed
    /// with the directory when it is dropped (tests run side by side and
    /// two of them cut the same text: a shared directory made them remove
    /// each other's file).
    fn temp_file(name: &str, bytes: &[u8]) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        (dir, path)
    }

    fn split(threads: usize, chunk_bytes: u64) -> Parallelism {
        Parallelism {
            threads,
            min_file_bytes: 0,
            chunk_bytes,
        }
    }

    fn msr(lines: usize) -> String {
        (0..lines)
            .map(|i| format!("{},host{},0,Read,{},4096,7\n", 1000 + i, i % 13, i * 4096))
            .collect()
    }

    fn ranges_of(text: &[u8], par: Parallelism) -> Vec<Range<u64>> {
        let (_dir, path) = temp_file("cut", text);
        cut(&File::open(&path).unwrap(), text.len() as u64, par).unwrap()
    }

    #[test]
    fn cuts_at_line_starts_into_chunks_of_about_the_size_asked() {
        let text = msr(2000);
        let ranges = ranges_of(text.as_bytes(), split(2, 4096));
        let want = text.len().div_ceil(4096);
        assert!(
            ranges.len() + 1 >= want && ranges.len() <= want,
            "{}",
            ranges.len()
        );
        assert_eq!(ranges[0].start, 0);
        assert_eq!(ranges.last().unwrap().end, text.len() as u64);
        for w in ranges.windows(2) {
            assert_eq!(w[0].end, w[1].start);
            assert!(w[0].start < w[0].end);
            assert_eq!(text.as_bytes()[w[1].start as usize - 1], b'\n');
        }
    }

    #[test]
    fn at_least_one_chunk_per_thread_and_one_for_a_single_line() {
        let text = msr(100);
        assert_eq!(ranges_of(text.as_bytes(), split(4, 1 << 30)).len(), 4);
        let one_line = b"1,h,0,Read,0,512,1".repeat(100);
        assert_eq!(
            ranges_of(&one_line, split(4, 64)),
            vec![0..one_line.len() as u64]
        );
    }

    /// Only line 1 of the file may be the `Timestamp,...` header: the same
    /// text opening a later chunk is a malformed record, as it is when the
    /// file is read sequentially.
    #[test]
    fn a_header_opening_a_later_chunk_is_not_skipped_as_a_header() {
        let par = split(2, 4096);
        let mut text = msr(2000).into_bytes();
        let start = ranges_of(&text, par)[2].start as usize;
        let len = text[start..].iter().position(|&b| b == b'\n').unwrap();
        let mut header = b"Timestamp".to_vec();
        header.resize(len, b'x');
        text[start..start + len].copy_from_slice(&header);
        let line = text[..start].iter().filter(|&&b| b == b'\n').count() + 1;
        let (_dir, path) = temp_file("late-header", &text);
        for skip_bad in [false, true] {
            let opts = ReadOptions {
                skip_bad,
                ..Default::default()
            };
            let read = |par| read_trace_tuned(&path, &opts, &mut |_| {}, par);
            let (seq, par) = (read(Parallelism::sequential()), read(par));
            match (seq, par) {
                (Ok(seq), Ok(par)) if skip_bad => {
                    assert_eq!(par.len(), 1999);
                    assert_eq!(par.report().skipped, 1);
                    assert_eq!(par.report().skip_examples, seq.report().skip_examples);
                    assert!(par.report().skip_examples[0].contains(&format!("line {line}:")));
                }
                (Err(seq), Err(par)) if !skip_bad => {
                    assert_eq!(par.to_string(), seq.to_string());
                    assert!(par.to_string().contains(&format!("line {line}:")), "{par}");
                }
                (seq, par) => panic!(
                    "skip_bad={skip_bad}: {:?} vs {:?}",
                    seq.map(|t| t.len()),
                    par.map(|t| t.len())
                ),
            }
        }
    }
}
