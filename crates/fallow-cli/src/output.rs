//! The terminal summary of a characterisation, and writing to stdout
//! without panicking when the reader goes away (`fallow analyze | head`).

use crate::human::{count, counted, num, pct, requests, secs};
use fallow_core::analyze::{Analysis, Finding};
use fallow_core::Characterization;
pub use fallow_report::describe::{describe_input, describe_model, Source};
use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::path::Path;

const WIDTH: usize = 100;

/// `--color`: 0 auto, 1 always, 2 never (set once, before a command runs).
static COLOR: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Apply `--color` to everything [`Style::for_stdout`] styles.
pub fn set_color(choice: clap::ColorChoice) {
    let v = match choice {
        clap::ColorChoice::Auto => 0,
        clap::ColorChoice::Always => 1,
        clap::ColorChoice::Never => 2,
    };
    COLOR.store(v, std::sync::atomic::Ordering::Relaxed);
}

/// Bold on a terminal that wants colour, plain otherwise.
pub struct Style {
    color: bool,
}

impl Style {
    /// Styling for stdout: `--color always|never` decides; `auto` (the
    /// default) styles only a terminal without `NO_COLOR`.
    pub fn for_stdout() -> Style {
        let color = match COLOR.load(std::sync::atomic::Ordering::Relaxed) {
            1 => true,
            2 => false,
            _ => std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        };
        Style { color }
    }
    /// No styling, whatever `--color` says.
    #[cfg(test)]
    pub fn plain() -> Style {
        Style { color: false }
    }
    /// Bold text.
    pub fn bold(&self, s: &str) -> String {
        if self.color {
            format!("\x1b[1m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    /// Dimmed text.
    pub fn dim(&self, s: &str) -> String {
        if self.color {
            format!("\x1b[2m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
}

/// Print an analysis — the summary, or with `json` the report as JSON —
/// and write its HTML page to `html` if asked (with the demo's `decision`
/// first when there is one). `fallow analyze` and `fallow demo` show the
/// core's [`Analysis`] through it.
pub fn present(
    a: &Analysis,
    json: bool,
    html: Option<&Path>,
    source: Option<&Source>,
    decision: Option<&fallow_report::decision::Decision>,
) -> anyhow::Result<()> {
    let (c, f) = (&a.characterization, &a.findings);
    if let Some(path) = html {
        let written = fallow_report::analysis::write(path, c, f, source, decision);
        crate::atomic::written(path, written)?;
    }
    if json {
        print(&json_text(a)?)?;
        if let Some(path) = html {
            eprintln!("fallow: wrote the HTML report to {}", path.display());
        }
    } else {
        let mut text = summary(c, f, source);
        if let Some(path) = html {
            text.push_str(&format!("\nHTML report: {}\n", path.display()));
        }
        print(&text)?;
    }
    Ok(())
}

/// The summary printed by `fallow analyze` and `fallow demo`.
pub fn summary(c: &Characterization, findings: &[Finding], source: Option<&Source>) -> String {
    let st = Style::for_stdout();
    let t = &c.trace;
    let mut s = String::new();
    match source {
        Some(src) => {
            let _ = writeln!(s, "{}", st.bold(&src.title));
            for line in wrap(&src.detail, WIDTH - 2) {
                let _ = writeln!(s, "  {line}");
            }
        }
        None => {
            let _ = writeln!(s, "{}", st.bold(&t.path));
        }
    }
    let _ = writeln!(s, "  {}", st.dim(&describe_input(c)));
    let _ = writeln!(
        s,
        "  {} ({}, {}) over {}; utilisation {}",
        counted(t.requests, "request", "requests"),
        counted(t.reads, "read", "reads"),
        counted(t.writes, "write", "writes"),
        secs(t.span_s),
        pct(c.utilization)
    );
    if t.skipped > 0 {
        let _ = writeln!(
            s,
            "  {} skipped",
            counted(t.skipped, "malformed record", "malformed records")
        );
    }
    let _ = writeln!(s);

    let i = &c.idle;
    let b = &c.busy;
    let left: Vec<(&str, String)> = vec![
        ("count", count(i.count)),
        ("total", secs(i.total_s)),
        ("mean", secs(i.mean_s)),
        ("CV", num(i.cv)),
        ("p50", secs(i.p50_s)),
        ("p90", secs(i.p90_s)),
        ("p99", secs(i.p99_s)),
        ("max", secs(i.max_s)),
    ];
    let right: Vec<(&str, String)> = vec![
        ("count", count(b.count)),
        (
            "mean",
            format!(
                "{} = {} requests",
                secs(b.mean_s),
                num(b.clusters.mean_requests)
            ),
        ),
        ("p90", secs(b.p90_s)),
        (
            "longest",
            format!("{} = {}", secs(b.max_s), requests(b.clusters.max_requests)),
        ),
        (
            "Threshold",
            // what the rule is, not what it selects: the 90th percentile
            // of lengths in requests marks as long every period at least
            // that long, often more than 10 % of them (`long` says how many)
            format!(
                "{} ({})",
                requests(b.clusters.threshold_requests),
                match b.clusters.threshold_rule {
                    fallow_core::stats::ThresholdRule::P90 => "90th percentile",
                    fallow_core::stats::ThresholdRule::TopDecile => "top decile",
                }
            ),
        ),
        (
            "long",
            format!("{} of busy periods", pct(b.clusters.long_fraction)),
        ),
        (
            "CWS",
            if b.clusters.cws_reached {
                format!("{} (Σ P_lag ≥ 0.8)", b.clusters.cws)
            } else {
                format!("{} (capped: Σ P_lag < 0.8)", b.clusters.cws)
            },
        ),
    ];
    let col = 44;
    let _ = writeln!(
        s,
        "{}{}",
        pad(&st.bold("Idle intervals"), "Idle intervals", col),
        st.bold("Busy periods")
    );
    for k in 0..left.len().max(right.len()) {
        let l = left
            .get(k)
            .map(|(key, v)| format!("  {key:<10} {v}"))
            .unwrap_or_default();
        let r = right
            .get(k)
            .map(|(key, v)| format!("  {key:<10} {v}"))
            .unwrap_or_default();
        let _ = writeln!(s, "{}{}", pad(&l, &l, col), r.trim_end());
    }
    if !findings.is_empty() {
        let _ = writeln!(s);
        let _ = writeln!(s, "{}", st.bold("Findings"));
        for f in findings {
            for (k, line) in wrap(&f.text, WIDTH - 4).iter().enumerate() {
                let bullet = if k == 0 { "  • " } else { "    " };
                let _ = writeln!(s, "{bullet}{line}");
            }
        }
    }
    s
}

/// `styled` padded to `width` columns, measuring the unstyled `plain` text.
pub fn pad(styled: &str, plain: &str, width: usize) -> String {
    let n = plain.chars().count();
    format!("{styled}{}", " ".repeat(width.saturating_sub(n).max(1)))
}

/// Greedy word wrap.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut cur = String::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    lines
}

/// An object of a `--json` document with `"schema_version"`
/// ([`fallow_core::JSON_SCHEMA_VERSION`]) as its first key, its own keys
/// after it in their order.
#[derive(serde::Serialize)]
struct Versioned<'a, T: serde::Serialize> {
    schema_version: u32,
    #[serde(flatten)]
    doc: &'a T,
}

/// `doc` (a struct or map) as pretty JSON text with a final newline, for
/// `--json`, carrying `"schema_version"` first.
pub fn json_text<T: serde::Serialize>(doc: &T) -> anyhow::Result<String> {
    let mut text = serde_json::to_string_pretty(&Versioned {
        schema_version: fallow_core::JSON_SCHEMA_VERSION,
        doc,
    })?;
    text.push('\n');
    Ok(text)
}

/// A list for `--json` as pretty JSON text with a final newline, each
/// object carrying `"schema_version"` first (the document stays a list, as
/// readers of it expect).
pub fn json_list_text<T: serde::Serialize>(items: &[T]) -> anyhow::Result<String> {
    let list: Vec<Versioned<'_, T>> = items
        .iter()
        .map(|doc| Versioned {
            schema_version: fallow_core::JSON_SCHEMA_VERSION,
            doc,
        })
        .collect();
    let mut text = serde_json::to_string_pretty(&list)?;
    text.push('\n');
    Ok(text)
}

/// `doc` as one compact JSON line (no newline) carrying `"schema_version"`
/// first: the JSON-lines logs and progress events fallow writes.
pub fn json_line<T: serde::Serialize>(doc: &T) -> serde_json::Result<String> {
    serde_json::to_string(&Versioned {
        schema_version: fallow_core::JSON_SCHEMA_VERSION,
        doc,
    })
}

/// Write to stdout; a closed pipe surfaces as an error [`is_broken_pipe`] recognises.
pub fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// True when `err` is stdout's reader having gone away: not worth a message.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_words() {
        assert_eq!(wrap("aa bb cc dd", 5), vec!["aa bb", "cc dd"]);
        assert_eq!(wrap("", 5), Vec::<String>::new());
        assert_eq!(wrap("longword x", 3), vec!["longword", "x"]);
    }
}
