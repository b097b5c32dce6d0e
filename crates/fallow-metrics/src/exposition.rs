//! Which text format a scrape gets, chosen from its `Accept` header, and the
//! Prometheus text format 0.0.4 derived from the OpenMetrics text.
//!
//! Prometheus asks for OpenMetrics first and the classic text format as a
//! fallback (`Accept: application/openmetrics-text;version=1.0.0;q=0.5,…,
//! text/plain;version=0.0.4;q=0.3,*/*;q=0.2`); `curl`, `promtool check
//! metrics` and older scrapers send no `Accept` or `*/*` and parse only the
//! classic format, where a counter's `# TYPE` names its `_total` samples
//! and `# UNIT`/`# EOF` do not exist (Prometheus "Exposition formats",
//! text format 0.0.4; OpenMetrics 1.0 §"Counter", §"Overall structure").
//! So the classic format is served unless the scraper prefers OpenMetrics.

/// A text exposition format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text format 0.0.4 (`text/plain; version=0.0.4`).
    Text004,
    /// OpenMetrics text 1.0.0 (`application/openmetrics-text; version=1.0.0`).
    OpenMetrics,
}

impl Format {
    /// The `Content-Type` header value of this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text004 => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    /// The format to answer an `Accept` header with (`None`: no header).
    /// The acceptable media range of highest quality wins; at equal
    /// quality, the classic text format (the one every scraper reads).
    /// Nothing acceptable (or no header) also gets the classic format, as
    /// Prometheus' own client libraries do, rather than a 406 that would
    /// turn a misconfigured scraper into a missing target.
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else {
            return Format::Text004;
        };
        let mut best: Option<(f64, Format)> = None;
        for range in accept.split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("").to_ascii_lowercase();
            let mut q = 1.0_f64;
            let mut version: Option<String> = None;
            for p in parts {
                let Some((k, v)) = p.split_once('=') else {
                    continue;
                };
                let v = v.trim().trim_matches('"');
                match k.trim().to_ascii_lowercase().as_str() {
                    // an unreadable q is treated as absent (1), as browsers do
                    "q" => {
                        q = v
                            .parse::<f64>()
                            .ok()
                            .filter(|q| (0.0..=1.0).contains(q))
                            .unwrap_or(1.0)
                    }
                    "version" => version = Some(v.to_string()),
                    _ => {}
                }
            }
            let format = match (media.as_str(), version.as_deref()) {
                // OpenMetrics 0.0.1 is the draft of 1.0.0 with the same text
                ("application/openmetrics-text", None | Some("1.0.0" | "0.0.1")) => {
                    Format::OpenMetrics
                }
                ("text/plain", None | Some("0.0.4")) | ("text/*" | "*/*", _) => Format::Text004,
                _ => continue,
            };
            if q <= 0.0 {
                continue;
            }
            let better = match best {
                None => true,
                Some((bq, bf)) => q > bq || (q == bq && format == Format::Text004 && bf != format),
            };
            if better {
                best = Some((q, format));
            }
        }
        best.map_or(Format::Text004, |(_, f)| f)
    }
}

/// The Prometheus text format 0.0.4 of an OpenMetrics text: a counter
/// family's `# HELP`/`# TYPE` lines name its `_total` samples, `# UNIT` and
/// `# EOF` are dropped; every other line (gauges, samples, labels, values)
/// is the same in both formats for what `prometheus-client` writes here
/// (no exemplars, no `_created` samples, no info or stateset metrics).
pub fn openmetrics_to_text004(openmetrics: &str) -> String {
    // counter family names, from their TYPE lines
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            counters
                .contains(name)
                .then(|| format!("{prefix}{name}_total {tail}"))
        });
        match renamed {
            Some(l) => out.push_str(l.trim_end()),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_follows_quality_then_prefers_the_classic_format() {
        use Format::*;
        assert_eq!(Format::negotiate(None), Text004);
        assert_eq!(Format::negotiate(Some("*/*")), Text004);
        assert_eq!(Format::negotiate(Some("")), Text004);
        assert_eq!(Format::negotiate(Some("application/json")), Text004);
        // Prometheus 2.x's scrape Accept header
        let prom = "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
        assert_eq!(Format::negotiate(Some(prom)), OpenMetrics);
        // Prometheus configured with scrape_protocols: [PrometheusText0.0.4]
        assert_eq!(
            Format::negotiate(Some("text/plain;version=0.0.4;q=0.3,*/*;q=0.2")),
            Text004
        );
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text")),
            OpenMetrics
        );
        // a version we do not write is not accepted
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text; version=2.0.0")),
            Text004
        );
        // q=0 refuses; equal quality goes to the classic format
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text;q=0, text/plain")),
            Text004
        );
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text, text/plain")),
            Text004
        );
        assert_eq!(
            Format::negotiate(Some(
                "text/plain;q=0.1, Application/OpenMetrics-Text; q=0.9"
            )),
            OpenMetrics
        );
    }

    #[test]
    fn counters_are_named_by_their_samples_and_openmetrics_only_lines_go() {
        let om = "# HELP fallow_bg_bytes Bytes moved.\n# TYPE fallow_bg_bytes counter\n# UNIT fallow_bg_bytes bytes\nfallow_bg_bytes_total 3\n# HELP fallow_state State.\n# TYPE fallow_state gauge\nfallow_state{state=\"busy\"} 1\n# EOF\n";
        let want = "# HELP fallow_bg_bytes_total Bytes moved.\n# TYPE fallow_bg_bytes_total counter\nfallow_bg_bytes_total 3\n# HELP fallow_state State.\n# TYPE fallow_state gauge\nfallow_state{state=\"busy\"} 1\n";
        assert_eq!(openmetrics_to_text004(om), want);
    }
}
