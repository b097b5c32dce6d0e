//! Property tests: no input makes a reader panic. Random bytes, random
//! trace-like text, and mutations of the valid fixtures (truncation, byte
//! flips, swapped fields, inserted and deleted bytes) go through
//! `read_from` with every forced format and with detection, skipping bad
//! records or not. Any result is fine; a record error must say where.
//! The cargo-fuzz targets in `fuzz/` run the same entry points for longer.

use super::fixture;
use fallow_core::trace::{read_from, Format, ReadOptions};
use fallow_core::Error;
use proptest::prelude::*;
use std::path::Path;

const SAMPLES: [&str; 15] = [
    "small.biosnoop",
    "small-q.biosnoop",
    "small.bpftrace",
    "takeoverjp-nvme.blktrace.0",
    "small.iolog",
    "small-v2.iolog",
    "small_clat.1.log",
    "small.trace",
    "small.spc",
    "small.blkparse",
    "small.srt",
    "small.vscsi",
    "small.fallow",
    "bad_field.trace",
    "truncated.srt",
];

fn samples() -> Vec<Vec<u8>> {
    SAMPLES
        .iter()
        .map(|n| std::fs::read(fixture(n)).unwrap())
        .collect()
}

/// Read `data` every way there is; panics only if a reader does.
fn read_every_way(data: &[u8]) {
    let formats = std::iter::once(None).chain(Format::all().map(Some));
    for format in formats {
        for skip_bad in [false, true] {
            let opts = ReadOptions {
                format,
                skip_bad,
                ..Default::default()
            };
            if let Err(e @ Error::Record { .. }) =
                read_from(&mut &data[..], Path::new("fuzz"), &opts)
            {
                let msg = e.to_string();
                assert!(
                    msg.contains("line ") || msg.contains("byte offset "),
                    "record error without a location: {msg}"
                );
                assert!(
                    msg.contains("field `"),
                    "record error without a field: {msg}"
                );
            }
        }
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    Truncate(usize),
    Flip(usize, u8),
    Set(usize, u8),
    SwapWords(usize, usize, usize),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
    SwapTokens(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), 1u8..=255).prop_map(|(p, m)| Mutation::Flip(p, m)),
        (
            any::<usize>(),
            prop_oneof![
                Just(0u8),
                Just(0xFF),
                Just(b'-'),
                Just(b'.'),
                Just(b'\n'),
                Just(0x0C),
                any::<u8>()
            ]
        )
            .prop_map(|(p, b)| Mutation::Set(p, b)),
        (
            any::<usize>(),
            any::<usize>(),
            prop_oneof![Just(4usize), Just(8)]
        )
            .prop_map(|(a, b, w)| Mutation::SwapWords(a, b, w)),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(p, v)| Mutation::Insert(p, v)),
        (any::<usize>(), 1usize..40).prop_map(|(p, n)| Mutation::Delete(p, n)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::SwapTokens(a, b)),
    ]
}

fn apply(data: &mut Vec<u8>, m: &Mutation) {
    let len = data.len().max(1);
    match m {
        Mutation::Truncate(p) => data.truncate(p % len),
        Mutation::Flip(p, mask) => {
            if let Some(b) = data.get_mut(p % len) {
                *b ^= mask;
            }
        }
        Mutation::Set(p, v) => {
            if let Some(b) = data.get_mut(p % len) {
                *b = *v;
            }
        }
        Mutation::SwapWords(a, b, w) => {
            let words = data.len() / w;
            if words >= 2 {
                let (i, j) = (a % words * w, b % words * w);
                for k in 0..*w {
                    data.swap(i + k, j + k);
                }
            }
        }
        Mutation::Insert(p, v) => {
            let at = p % (data.len() + 1);
            data.splice(at..at, v.iter().copied());
        }
        Mutation::Delete(p, n) => {
            let at = p % len;
            let end = (at + n).min(data.len());
            if at < end {
                data.drain(at..end);
            }
        }
        Mutation::SwapTokens(a, b) => {
            // Swap two whitespace/comma separated tokens of the text.
            let text = String::from_utf8_lossy(data).into_owned();
            let mut tokens: Vec<&str> = text.split_inclusive([' ', ',', '\n']).collect();
            if tokens.len() >= 2 {
                let (i, j) = (a % tokens.len(), b % tokens.len());
                tokens.swap(i, j);
                *data = tokens.concat().into_bytes();
            }
        }
    }
}

/// Text made of the characters trace formats use.
fn tracey_text() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop::sample::select(b"0123456789012345.,,  \t\n\n-+eErRwWDCQ[]#xFFS".to_vec()),
        0..400,
    )
}

proptest! {
    // 256 cases each by default; PROPTEST_CASES=100000 for a long run.

    #[test]
    fn random_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..600)) {
        read_every_way(&data);
    }

    #[test]
    fn random_text_never_panics(data in tracey_text()) {
        read_every_way(&data);
    }

    #[test]
    fn mutated_fixtures_never_panic(
        which in 0..SAMPLES.len(),
        muts in prop::collection::vec(mutation(), 1..5),
    ) {
        let mut data = samples()[which].clone();
        for m in &muts {
            apply(&mut data, m);
        }
        read_every_way(&data);
    }
}
