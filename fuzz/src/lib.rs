//! What every fuzz target does: read the input as one format (or with
//! detection), both failing on and skipping bad records. Reading may fail,
//! never panic. A trace that reads must survive a round trip through
//! fallow's binary cache unchanged.

use fallow_core::trace::{read_from, write_fallow_bin, Format, ReadOptions};
use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::path::Path;

/// The largest single allocation a target may make: libFuzzer's default
/// `-malloc_limit_mb` (its `-rss_limit_mb`, 2048 MB). A larger one from an
/// input of at most 4 KiB is a size taken from the input and not bounded.
pub const MALLOC_LIMIT_BYTES: usize = 2048 << 20;

/// The system allocator, with libFuzzer's malloc limit checked here.
/// libFuzzer checks that limit in a sanitizer's malloc hooks, and the loop's
/// build has no sanitizer (`-s none`: fuzz/README.md, "The sanitizer"), so
/// without this an unbounded `Vec::with_capacity(n)` whose pages are never
/// touched would pass unseen. Over the limit it aborts, which libFuzzer
/// reports as a crash with the input saved.
pub struct BoundedAlloc;

/// Abort over [`MALLOC_LIMIT_BYTES`].
#[inline]
fn check(bytes: usize) {
    if bytes > MALLOC_LIMIT_BYTES {
        over_the_limit(bytes)
    }
}

#[cold]
fn over_the_limit(bytes: usize) -> ! {
    // no allocation here: stderr is unbuffered and the numbers format in place
    let _ = writeln!(
        std::io::stderr(),
        "==fallow-fuzz== malloc({bytes}) over the malloc limit ({MALLOC_LIMIT_BYTES} bytes): a size from the input is not bounded"
    );
    std::process::abort()
}

// SAFETY: every call goes to `System` unchanged once the size is checked.
unsafe impl GlobalAlloc for BoundedAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        check(new_size);
        System.realloc(ptr, layout, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOCATOR: BoundedAlloc = BoundedAlloc;

/// Read `data` as `format` (`None`: detect it) and check the round trip.
pub fn read_as(format: Option<Format>, data: &[u8]) {
    for skip_bad in [false, true] {
        let opts = ReadOptions {
            format,
            skip_bad,
            ..Default::default()
        };
        let Ok(t) = read_from(&mut &data[..], Path::new("fuzz"), &opts) else {
            continue;
        };
        let mut bin = Vec::new();
        write_fallow_bin(&t, &mut bin).expect("writing to memory cannot fail");
        let back = read_from(
            &mut &bin[..],
            Path::new("fuzz.fallow"),
            &ReadOptions::default(),
        )
        .expect("a written trace reads back");
        assert_eq!(back.arrival_ns(), t.arrival_ns());
        assert_eq!(back.completion_ns(), t.completion_ns());
        assert_eq!(back.offset_bytes(), t.offset_bytes());
        assert_eq!(back.size_bytes(), t.size_bytes());
        assert_eq!(back.op(), t.op());
        assert_eq!(back.device(), t.device());
        assert_eq!(back.report().origin_ns, t.report().origin_ns);
        // MSR host names too (`hm:0` and `rsrch:0` stay two named devices)
        assert_eq!(back.report().hosts, t.report().hosts);
    }
}
