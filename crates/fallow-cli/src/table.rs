//! Tabular results: a command builds one [`Table`] and prints it aligned on
//! the terminal ([`Table::text`]) or, with `--csv`, as CSV ([`Table::csv`],
//! RFC 4180). The two differ on purpose: the terminal shows rounded figures
//! with units (`12.3 ms`), the CSV exact numbers in base units under
//! column names that carry the unit (`fg_mean_added_delay_s`), so a
//! spreadsheet or pandas reads numbers, not text.

use crate::output::Style;
use clap::Args;
use std::fmt::Write as _;

/// `--csv`, flattened into every command that prints a table.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct CsvArg {
    /// Print the table as CSV (RFC 4180; a header row, numbers in seconds,
    /// bytes and fractions, column names with units) instead of text.
    #[arg(long, conflicts_with = "json")]
    pub csv: bool,
}

/// A column: its terminal heading and its CSV name.
#[derive(Debug, Clone)]
pub struct Column {
    head: String,
    csv: &'static str,
}

impl Column {
    /// A column shown as `head`, named `csv` in CSV output.
    pub fn new(head: impl Into<String>, csv: &'static str) -> Column {
        Column {
            head: head.into(),
            csv,
        }
    }
}

/// One cell: what the terminal shows and what the CSV holds.
#[derive(Debug, Clone, Default)]
pub struct Cell {
    text: String,
    csv: String,
}

impl Cell {
    /// Text, the same in both outputs.
    pub fn text(s: impl Into<String>) -> Cell {
        let s = s.into();
        Cell {
            csv: s.clone(),
            text: s,
        }
    }
    /// A number shown as `text`, exact in the CSV.
    pub fn num(text: impl Into<String>, value: f64) -> Cell {
        Cell {
            text: text.into(),
            csv: csv_number(value),
        }
    }
    /// A whole number shown as `text`, exact in the CSV.
    pub fn int(text: impl Into<String>, value: u64) -> Cell {
        Cell {
            text: text.into(),
            csv: value.to_string(),
        }
    }
    /// Nothing to show: blank on the terminal and in the CSV.
    pub fn empty() -> Cell {
        Cell::default()
    }
    /// The CSV value `csv` shown as `text` (a flag, a name kept apart).
    pub fn both(text: impl Into<String>, csv: impl Into<String>) -> Cell {
        Cell {
            text: text.into(),
            csv: csv.into(),
        }
    }
}

/// Rows of cells under columns.
#[derive(Debug, Clone)]
pub struct Table {
    columns: Vec<Column>,
    rows: Vec<Vec<Cell>>,
}

impl Table {
    /// An empty table with these columns.
    pub fn new(columns: Vec<Column>) -> Table {
        Table {
            columns,
            rows: Vec::new(),
        }
    }

    /// Add a row; a short row is padded with blank cells, a long one is cut
    /// (a programming error, caught by the tests in debug builds).
    pub fn push(&mut self, mut row: Vec<Cell>) {
        debug_assert_eq!(row.len(), self.columns.len(), "row width");
        row.resize(self.columns.len(), Cell::empty());
        self.rows.push(row);
    }

    /// The table aligned for a terminal, indented by `indent` spaces: the
    /// first column left-aligned, the others right-aligned, two spaces
    /// apart, the heading bold. Rows `dim(i)` says are dimmed.
    pub fn text(&self, st: &Style, indent: usize, dim: impl Fn(usize) -> bool) -> String {
        let head: Vec<&str> = self.columns.iter().map(|c| c.head.as_str()).collect();
        let rows: Vec<Vec<&str>> = self
            .rows
            .iter()
            .map(|r| r.iter().map(|c| c.text.as_str()).collect())
            .collect();
        aligned(&head, &rows, st, indent, dim, |_| false)
    }

    /// The table as CSV: a header row of the CSV names, then the rows;
    /// CRLF line ends as RFC 4180 §2 has them.
    pub fn csv(&self) -> String {
        let mut s = String::new();
        let row = |s: &mut String, cells: Vec<&str>| {
            let fields: Vec<String> = cells.into_iter().map(csv_field).collect();
            s.push_str(&fields.join(","));
            s.push_str("\r\n");
        };
        row(&mut s, self.columns.iter().map(|c| c.csv).collect());
        for r in &self.rows {
            row(&mut s, r.iter().map(|c| c.csv.as_str()).collect());
        }
        s
    }
}

/// Rows of text under a heading, aligned for a terminal: the one renderer
/// of the CLI's tables ([`Table::text`], and `fallow energy`'s tables,
/// which have no CSV form). Indented by `indent` spaces, the first column
/// left-aligned, the others right-aligned, two spaces apart, the heading
/// bold; rows `dim(i)` says are dimmed, and a blank line goes before the
/// rows `gap(i)` says start a group.
pub fn aligned(
    head: &[&str],
    rows: &[Vec<&str>],
    st: &Style,
    indent: usize,
    dim: impl Fn(usize) -> bool,
    gap: impl Fn(usize) -> bool,
) -> String {
    let widths: Vec<usize> = (0..head.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain(std::iter::once(head[i].chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[&str]| {
        let mut l = " ".repeat(indent);
        for (i, c) in cells.iter().enumerate() {
            let pad = " ".repeat(widths[i] - c.chars().count());
            if i == 0 {
                let _ = write!(l, "{c}{pad}");
            } else {
                let _ = write!(l, "  {pad}{c}");
            }
        }
        l.trim_end().to_string()
    };
    let mut s = String::new();
    let _ = writeln!(s, "{}", st.bold(&line(head)));
    for (k, r) in rows.iter().enumerate() {
        if gap(k) {
            s.push('\n');
        }
        let l = line(r);
        let _ = writeln!(s, "{}", if dim(k) { st.dim(&l) } else { l });
    }
    s
}

/// A CSV field, quoted when it holds a comma, a quote, a line break or
/// edge spaces (RFC 4180 §2.6–2.7: quotes inside are doubled).
fn csv_field(s: &str) -> String {
    let needs = s.contains([',', '"', '\n', '\r']) || s.starts_with(' ') || s.ends_with(' ');
    if needs {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A number for CSV: the shortest text that reads back as the same `f64`;
/// blank for NaN (no value), `inf`/`-inf` as pandas and Python read them.
fn csv_number(v: f64) -> String {
    if v.is_nan() {
        String::new()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.to_string()
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        let mut t = Table::new(vec![
            Column::new("policy", "policy"),
            Column::new("added delay", "fg_mean_added_delay_s"),
        ]);
        t.push(vec![
            Cell::text("fixed-wait:t=1s,x=2"),
            Cell::num("1.5 ms", 0.0015),
        ]);
        t.push(vec![Cell::text("say \"hi\""), Cell::num("–", f64::NAN)]);
        t.push(vec![Cell::text("a"), Cell::num("∞", f64::INFINITY)]);
        t
    }

    #[test]
    fn csv_quotes_what_rfc4180_requires_and_keeps_numbers_exact() {
        assert_eq!(
            sample().csv(),
            "policy,fg_mean_added_delay_s\r\n\"fixed-wait:t=1s,x=2\",0.0015\r\n\"say \"\"hi\"\"\",\r\na,inf\r\n"
        );
        // numbers read back exactly
        for v in [0.1 + 0.2, 1e-9, 123456789.125, 3.0] {
            assert_eq!(csv_number(v).parse::<f64>().unwrap(), v);
        }
        assert_eq!(csv_field(" x"), "\" x\"");
        assert_eq!(csv_field("a\nb"), "\"a\nb\"");
    }

    #[test]
    fn text_aligns_first_column_left_and_the_rest_right() {
        let st = Style::plain();
        let text = sample().text(&st, 2, |_| false);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "  policy               added delay");
        assert_eq!(lines[1], "  fixed-wait:t=1s,x=2       1.5 ms");
        assert_eq!(lines[3], "  a                              ∞");
        // every value ends in the same column
        let ends: Vec<usize> = lines.iter().map(|l| l.chars().count()).collect();
        assert!(ends.iter().all(|&e| e == ends[0]), "{text}");
    }

    #[test]
    fn groups_are_set_apart_by_a_blank_line() {
        let st = Style::plain();
        let rows = vec![vec!["a", "1"], vec!["", "22"], vec!["b", "3"]];
        let text = aligned(&["p", "v"], &rows, &st, 0, |_| false, |i| i == 2);
        assert_eq!(text, "p   v\na   1\n   22\n\nb   3\n");
    }
}
