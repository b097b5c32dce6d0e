//! Accumulates requests column by column and sorts them by arrival once at
//! the end (only when the input was out of order, which is then reported).

use super::{Op, ReadReport, Trace};
use crate::error::Result;

/// One request as a reader produces it: absolute times in the source's clock, ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawRequest {
    /// Arrival (enqueue/issue) time, ns since the source's epoch.
    pub arrival_ns: u64,
    /// Completion time on the same clock, if known.
    pub completion_ns: Option<u64>,
    /// Byte offset on the device.
    pub offset_bytes: u64,
    /// Size in bytes.
    pub size_bytes: u32,
    /// Direction.
    pub op: Op,
    /// Device id.
    pub device: u32,
}

/// Column accumulator behind every reader.
#[derive(Debug)]
pub struct TraceBuilder {
    arrival_ns: Vec<u64>,
    completion_ns: Option<Vec<u64>>,
    offset_bytes: Vec<u64>,
    size_bytes: Vec<u32>,
    op: Vec<Op>,
    device: Vec<u32>,
    max_arrival_ns: u64,
    reordered: u64,
}

impl TraceBuilder {
    /// A builder for traces with (or without) completion times.
    pub fn new(has_completion: bool) -> Self {
        TraceBuilder {
            arrival_ns: Vec::new(),
            completion_ns: has_completion.then(Vec::new),
            offset_bytes: Vec::new(),
            size_bytes: Vec::new(),
            op: Vec::new(),
            device: Vec::new(),
            max_arrival_ns: 0,
            reordered: 0,
        }
    }

    /// Number of requests pushed so far.
    pub fn len(&self) -> usize {
        self.arrival_ns.len()
    }

    /// True before the first push.
    pub fn is_empty(&self) -> bool {
        self.arrival_ns.is_empty()
    }

    /// Whether this builder keeps completion times.
    pub fn has_completion(&self) -> bool {
        self.completion_ns.is_some()
    }

    /// Make room for `additional` more requests in every column, so a reader
    /// that can estimate the count (from a file's size) fills the columns
    /// without regrowing them. Best effort: if the memory cannot be had up
    /// front, the columns grow as usual.
    pub fn reserve(&mut self, additional: usize) {
        fn room<T>(v: &mut Vec<T>, n: usize) {
            // `try_reserve`: an overestimate must not abort the process.
            let _ = v.try_reserve(n);
        }
        room(&mut self.arrival_ns, additional);
        if let Some(c) = &mut self.completion_ns {
            room(c, additional);
        }
        room(&mut self.offset_bytes, additional);
        room(&mut self.size_bytes, additional);
        room(&mut self.op, additional);
        room(&mut self.device, additional);
    }

    /// Move the requests of `other`, which were read after this builder's,
    /// to the end of this one, as if they had been pushed here one by one: a
    /// request of `other` that arrives before the latest arrival so far
    /// counts as reordered, exactly as in a sequential read. Like
    /// [`Vec::append`], `other` is left empty with its capacity, ready for
    /// reuse.
    ///
    /// # Panics
    ///
    /// If one builder keeps completion times and the other does not.
    pub fn append(&mut self, other: &mut TraceBuilder) {
        assert_eq!(
            self.has_completion(),
            other.has_completion(),
            "appending builders with and without completion times"
        );
        // `other` counted a request as reordered when it arrived before the
        // latest arrival *within other*. Pushed here, the requests that
        // arrived before our latest arrival count too, until other's own
        // running maximum passes ours; from then on the counts agree. In a
        // sorted file that is the first request, so this loop is short.
        let mut extra = 0;
        let mut running = 0;
        for &a in &other.arrival_ns {
            if running >= self.max_arrival_ns {
                break;
            }
            if a < self.max_arrival_ns && a >= running {
                extra += 1;
            }
            running = running.max(a);
        }
        self.reordered += other.reordered + extra;
        self.max_arrival_ns = self.max_arrival_ns.max(other.max_arrival_ns);
        other.reordered = 0;
        other.max_arrival_ns = 0;
        if self.is_empty() && self.arrival_ns.capacity() <= other.arrival_ns.capacity() {
            // Take the columns (and their room) rather than copy them.
            std::mem::swap(&mut self.arrival_ns, &mut other.arrival_ns);
            std::mem::swap(&mut self.completion_ns, &mut other.completion_ns);
            std::mem::swap(&mut self.offset_bytes, &mut other.offset_bytes);
            std::mem::swap(&mut self.size_bytes, &mut other.size_bytes);
            std::mem::swap(&mut self.op, &mut other.op);
            std::mem::swap(&mut self.device, &mut other.device);
            return;
        }
        self.arrival_ns.append(&mut other.arrival_ns);
        if let (Some(c), Some(o)) = (&mut self.completion_ns, &mut other.completion_ns) {
            c.append(o);
        }
        self.offset_bytes.append(&mut other.offset_bytes);
        self.size_bytes.append(&mut other.size_bytes);
        self.op.append(&mut other.op);
        self.device.append(&mut other.device);
    }

    /// Rewrite every device id with `f` (the parallel reader renumbering a
    /// chunk's MSR hosts into the whole file's numbering).
    pub(crate) fn map_devices(&mut self, f: impl Fn(u32) -> u32) {
        self.device.iter_mut().for_each(|d| *d = f(*d));
    }

    /// Whether [`TraceBuilder::push`] would take `r`: `(field, message)`
    /// when it would refuse it.
    pub(crate) fn check(&self, r: &RawRequest) -> std::result::Result<(), (&'static str, String)> {
        match (self.completion_ns.is_some(), r.completion_ns) {
            (true, Some(c)) if c < r.arrival_ns => Err((
                "completion",
                format!("completes {} ns before it arrives", r.arrival_ns - c),
            )),
            (true, None) => Err(("completion", "missing completion time".into())),
            _ => Ok(()),
        }
    }

    /// Add a request. An inconsistent one is refused with `(field, message)`
    /// so the reader can say where it was.
    pub fn push(&mut self, r: RawRequest) -> std::result::Result<(), (&'static str, String)> {
        match (&mut self.completion_ns, r.completion_ns) {
            (Some(col), Some(c)) => {
                if c < r.arrival_ns {
                    return Err((
                        "completion",
                        format!("completes {} ns before it arrives", r.arrival_ns - c),
                    ));
                }
                col.push(c);
            }
            (Some(_), None) => {
                return Err(("completion", "missing completion time".into()));
            }
            (None, _) => {}
        }
        if r.arrival_ns < self.max_arrival_ns {
            self.reordered += 1;
        } else {
            self.max_arrival_ns = r.arrival_ns;
        }
        self.arrival_ns.push(r.arrival_ns);
        self.offset_bytes.push(r.offset_bytes);
        self.size_bytes.push(r.size_bytes);
        self.op.push(r.op);
        self.device.push(r.device);
        Ok(())
    }

    /// A builder holding whole columns at once: fallow's own binary format
    /// stores columns, not rows, so building row by row would copy twice.
    /// The caller has checked every row as [`TraceBuilder::push`] would;
    /// out-of-order arrivals are counted here the same way.
    pub(crate) fn from_columns(t: Trace) -> Self {
        let mut max_arrival_ns = 0;
        let mut reordered = 0;
        for &a in &t.arrival_ns {
            if a < max_arrival_ns {
                reordered += 1;
            } else {
                max_arrival_ns = a;
            }
        }
        TraceBuilder {
            arrival_ns: t.arrival_ns,
            completion_ns: t.completion_ns,
            offset_bytes: t.offset_bytes,
            size_bytes: t.size_bytes,
            op: t.op,
            device: t.device,
            max_arrival_ns,
            reordered,
        }
    }

    /// Sort by arrival if needed, rebase times to the first arrival, and build.
    pub fn finish(self, mut report: ReadReport) -> Result<Trace> {
        let mut t = Trace {
            arrival_ns: self.arrival_ns,
            completion_ns: self.completion_ns,
            offset_bytes: self.offset_bytes,
            size_bytes: self.size_bytes,
            op: self.op,
            device: self.device,
            report: ReadReport::default(),
        };
        if self.reordered > 0 {
            let mut idx: Vec<usize> = (0..t.len()).collect();
            // Stable: requests with equal arrivals keep their file order.
            idx.sort_by_key(|&i| t.arrival_ns[i]);
            t = t.take(&idx);
        }
        let origin = t.arrival_ns.first().copied().unwrap_or(0);
        for a in &mut t.arrival_ns {
            *a -= origin;
        }
        if let Some(c) = &mut t.completion_ns {
            for x in c.iter_mut() {
                *x -= origin;
            }
        }
        report.reordered = report.reordered.saturating_add(self.reordered);
        // Added, not set: a reader of already rebased columns (fallow's own
        // format) passes the source's origin in the report.
        report.origin_ns = report.origin_ns.saturating_add(origin);
        t.report = report;
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(a: u64, c: Option<u64>) -> RawRequest {
        RawRequest {
            arrival_ns: a,
            completion_ns: c,
            offset_bytes: a,
            size_bytes: 512,
            op: Op::Read,
            device: 0,
        }
    }

    #[test]
    fn sorts_out_of_order_and_rebases() {
        let mut b = TraceBuilder::new(true);
        for (a, c) in [(100, 110), (90, 95), (120, 130), (105, 106)] {
            b.push(req(a, Some(c))).unwrap();
        }
        let t = b.finish(ReadReport::default()).unwrap();
        assert_eq!(t.arrival_ns(), &[0, 10, 15, 30]);
        assert_eq!(t.completion_ns().unwrap(), &[5, 20, 16, 40]);
        // offsets travel with their rows
        assert_eq!(t.offset_bytes(), &[90, 100, 105, 120]);
        assert_eq!(t.report().reordered, 2);
        assert_eq!(t.report().origin_ns, 90);
    }

    fn built(arrivals: &[u64]) -> TraceBuilder {
        let mut b = TraceBuilder::new(true);
        for &a in arrivals {
            b.push(req(a, Some(a + 1))).unwrap();
        }
        b
    }

    #[test]
    fn append_counts_reordered_across_the_seam() {
        // Pushed one by one, 7, 3 and 11 arrive before a request already
        // seen (10, 10 and 12): three reordered. Within the second part only
        // 3 and 11 are; 7 is late only with respect to the first part.
        let mut a = built(&[5, 10]);
        let mut b = built(&[7, 3, 12, 11]);
        assert_eq!(b.reordered, 2);
        a.append(&mut b);
        assert_eq!(a.reordered, 3);
        assert_eq!(a.arrival_ns, [5, 10, 7, 3, 12, 11]);
        assert_eq!(a.completion_ns.as_deref(), Some(&[6, 11, 8, 4, 13, 12][..]));
        assert!(b.is_empty());
        assert_eq!((b.reordered, b.max_arrival_ns), (0, 0));
        let t = a.finish(ReadReport::default()).unwrap();
        assert_eq!(t.arrival_ns(), &[0, 2, 4, 7, 8, 9]);
        assert_eq!(t.report().reordered, 3);
    }

    #[test]
    fn append_at_any_seam_equals_pushing() {
        let mut x: u64 = 3;
        let arrivals: Vec<u64> = (0..200u64)
            .map(|i| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                // mostly increasing, with jumps back of up to 40
                (i * 10 + 500).saturating_sub((x >> 58) * 10 * u64::from(x & 1 == 0))
            })
            .collect();
        let whole = built(&arrivals);
        assert!(whole.reordered > 20, "{}", whole.reordered);
        for seam in 0..=arrivals.len() {
            let mut a = built(&arrivals[..seam]);
            a.append(&mut built(&arrivals[seam..]));
            assert_eq!(a.reordered, whole.reordered, "seam {seam}");
            assert_eq!(a.max_arrival_ns, whole.max_arrival_ns);
            assert_eq!(a.arrival_ns, whole.arrival_ns);
        }
        // three parts, and a reused (emptied) builder
        let mut a = built(&arrivals[..50]);
        let mut b = built(&arrivals[50..120]);
        a.append(&mut b);
        for &v in &arrivals[120..] {
            b.push(req(v, Some(v + 1))).unwrap();
        }
        a.append(&mut b);
        assert_eq!(a.reordered, whole.reordered);
        assert_eq!(a.arrival_ns, whole.arrival_ns);
    }

    #[test]
    fn refuses_completion_before_arrival() {
        let mut b = TraceBuilder::new(true);
        let (field, msg) = b.push(req(100, Some(99))).unwrap_err();
        assert_eq!(field, "completion");
        assert!(msg.contains("1 ns before"), "{msg}");
    }
}
