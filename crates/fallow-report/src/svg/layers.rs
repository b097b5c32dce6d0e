//! Drawing the layers of a [`Chart`] (lines, bars, rules, bands) once the
//! axes are fixed: the data-to-pixel mapping and one `match` arm per layer.

use super::axis::Scale;
use super::{
    coincide, esc, Chart, Color, Dash, Layer, Marker, Point, ANNOT_CHAR_W, CHAR_W, END_SWATCH, FONT,
};
use std::fmt::Write as _;

/// Height of a line of a point label, pixels.
const LINE_H: f64 = 13.0;

/// A direct label wanted at a line's last point (pixels).
pub(super) struct EndLabel {
    y: f64,
    text: String,
    color: Color,
    dash: Dash,
    marker: Marker,
}

/// Split a direct label into lines of at most `max_chars` characters,
/// breaking after the " = " of merged series' names (or at spaces).
pub(super) fn wrap(text: &str, max_chars: usize) -> Vec<String> {
    let max_chars = max_chars.max(8);
    let words: Vec<&str> = text.split_inclusive(' ').collect();
    let mut lines: Vec<String> = vec![String::new()];
    for w in words {
        let cur = lines.last_mut().expect("one line");
        if !cur.is_empty()
            && cur.trim_end().chars().count() + w.trim_end().chars().count() > max_chars
        {
            lines.push(w.to_string());
        } else {
            cur.push_str(w);
        }
    }
    // a line does not start with "= ": move it to the end of the line before
    for i in 1..lines.len() {
        if let Some(rest) = lines[i].strip_prefix("= ") {
            let rest = rest.to_string();
            lines[i - 1].push('=');
            lines[i] = rest;
        }
    }
    lines
        .into_iter()
        .map(|l| l.trim_end().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// Place the direct labels of lines at `x` (the right margin, `width`
/// pixels wide), each at its line's last height, wrapped to the margin and
/// pushed apart so none overlaps another and kept within the plot's height.
pub(super) fn end_labels(out: &mut String, mut ends: Vec<EndLabel>, ym: &Map, x: f64, width: f64) {
    if ends.is_empty() {
        return;
    }
    const GAP: f64 = 14.0;
    let (top, bottom) = (ym.p1.min(ym.p0), ym.p1.max(ym.p0));
    ends.sort_by(|a, b| a.y.total_cmp(&b.y));
    let max_chars = ((width - END_SWATCH) / ANNOT_CHAR_W).floor().max(0.0) as usize;
    let texts: Vec<Vec<String>> = ends.iter().map(|e| wrap(&e.text, max_chars)).collect();
    let extra = |i: usize| (texts[i].len().max(1) - 1) as f64 * GAP;
    let mut ys: Vec<f64> = ends.iter().map(|e| e.y.clamp(top, bottom)).collect();
    // downwards: each at least GAP below the last line of the one above
    for i in 1..ys.len() {
        ys[i] = ys[i].max(ys[i - 1] + extra(i - 1) + GAP);
    }
    // if that ran past the bottom, push the stack back up (and past the top
    // only when there are more labels than fit)
    let n = ys.len();
    let over = ys[n - 1] + extra(n - 1) - bottom;
    if over > 0.0 {
        ys[n - 1] -= over;
        for i in (0..n - 1).rev() {
            ys[i] = ys[i].min(ys[i + 1] - extra(i) - GAP);
        }
    }
    out.push_str(r#"<g class="end-labels">"#);
    for ((e, y), lines) in ends.iter().zip(ys).zip(&texts) {
        let c = e.color.class();
        let t = esc(&e.text);
        let _ = write!(
            out,
            r#"<g class="end-label"><title>{t}</title><line class="s-{c}" x1="{x:.1}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke-width="2"{}/>{}<text class="annot t-{c}" x="{:.1}" y="{:.1}">"#,
            x + END_SWATCH - 4.0,
            e.dash.attr(),
            e.marker
                .svg(x + (END_SWATCH - 4.0) / 2.0, y, 3.4, e.color, false),
            x + END_SWATCH,
            y + FONT * 0.35,
        );
        for (k, l) in lines.iter().enumerate() {
            let _ = write!(
                out,
                r#"<tspan x="{:.1}" dy="{}">{}</tspan>"#,
                x + END_SWATCH,
                if k == 0 { 0.0 } else { GAP },
                esc(l)
            );
        }
        out.push_str("</text></g>");
    }
    out.push_str("</g>");
}

/// Where markers go along a polyline (pixel pieces): every point when there
/// are few, else about ten evenly spaced places by length, shifted by the
/// shape's place in [`Marker::CYCLE`] so coinciding lines show every shape.
fn marker_positions(pieces: &[Vec<(f64, f64)>], marker: Marker) -> Vec<(f64, f64)> {
    let n: usize = pieces.iter().map(Vec::len).sum();
    if n <= 30 {
        return pieces.iter().flatten().copied().collect();
    }
    let seg_len = |a: (f64, f64), b: (f64, f64)| (b.0 - a.0).hypot(b.1 - a.1);
    let total: f64 = pieces
        .iter()
        .flat_map(|p| p.windows(2).map(|w| seg_len(w[0], w[1])))
        .sum();
    if total <= 0.0 {
        return Vec::new();
    }
    let step = total / 10.0;
    let phase = Marker::CYCLE.iter().position(|&m| m == marker).unwrap_or(0) as f64;
    let mut next = step * (phase + 0.5) / Marker::CYCLE.len() as f64;
    let mut walked = 0.0;
    let mut out = Vec::new();
    for p in pieces {
        for w in p.windows(2) {
            let l = seg_len(w[0], w[1]);
            while next <= walked + l && l > 0.0 {
                let f = (next - walked) / l;
                out.push((
                    w[0].0 + f * (w[1].0 - w[0].0),
                    w[0].1 + f * (w[1].1 - w[0].1),
                ));
                next += step;
            }
            walked += l;
        }
    }
    out
}

/// Mapping from data to pixels along one axis.
#[derive(Debug, Clone, Copy)]
pub(super) struct Map {
    pub scale: Scale,
    pub lo: f64,
    pub hi: f64,
    pub p0: f64,
    pub p1: f64,
}

impl Map {
    fn t(&self, v: f64) -> f64 {
        match self.scale {
            Scale::Linear => v,
            Scale::Log => v.log10(),
        }
    }
    pub fn px(&self, v: f64) -> Option<f64> {
        if !v.is_finite() || (self.scale == Scale::Log && v <= 0.0) {
            return None;
        }
        let (a, b) = (self.t(self.lo), self.t(self.hi));
        let f = (self.t(v) - a) / (b - a);
        Some(self.p0 + f * (self.p1 - self.p0))
    }
    /// Like `px` but clamps to the axis range (for bar bases and bands).
    pub fn px_clamped(&self, v: f64) -> f64 {
        let v = if self.scale == Scale::Log && (v.is_nan() || v <= 0.0) {
            self.lo
        } else {
            v.clamp(self.lo.min(self.hi), self.hi.max(self.lo))
        };
        self.px(v).unwrap_or(self.p0)
    }
}

impl Chart {
    /// Draw one layer: each kind has its own function below.
    pub(super) fn render_layer(
        &self,
        s: &mut String,
        labels: &mut String,
        ends: &mut Vec<EndLabel>,
        keys: &mut Vec<String>,
        l: &Layer,
        (xm, ym): (&Map, &Map),
    ) {
        match l {
            Layer::Line { .. } => self.line(s, ends, l, (xm, ym)),
            Layer::Bars { .. } => self.bars(s, l, (xm, ym)),
            Layer::HRule { .. } => self.hrule(s, labels, l, (xm, ym)),
            Layer::VRule { .. } => self.vrule(s, labels, l, (xm, ym)),
            Layer::Points(_) => self.points(s, labels, keys, l, (xm, ym)),
            Layer::Histogram { .. } => self.histogram(s, l, (xm, ym)),
            Layer::HBand { .. } => self.hband(s, l, (xm, ym)),
        }
    }

    /// A line: its path, markers, and a direct label at its end.
    fn line(&self, s: &mut String, ends: &mut Vec<EndLabel>, l: &Layer, (xm, ym): (&Map, &Map)) {
        let Layer::Line {
            points,
            color,
            dash,
            width,
            marker,
            label,
        } = l
        else {
            return;
        };
        let pieces = coincide::pieces(points, xm, ym);
        let mut d = String::new();
        for piece in &pieces {
            for (k, (px, py)) in piece.iter().enumerate() {
                let _ = write!(d, "{}{px:.1} {py:.1}", if k == 0 { "M" } else { "L" });
            }
        }
        if d.is_empty() {
            return;
        }
        let style = format!("{}|{:?}|{}", color.class(), dash, marker.name());
        s.push_str(r#"<g class="series" data-style=""#);
        s.push_str(&esc(&style));
        s.push_str(r#"">"#);
        if !label.is_empty() {
            let _ = write!(s, "<title>{}</title>", esc(label));
        }
        let _ = write!(
            s,
            r#"<path class="line s-{}" d="{d}" stroke-width="{width}"{}/>"#,
            color.class(),
            dash.attr()
        );
        for (px, py) in marker_positions(&pieces, *marker) {
            s.push_str(&marker.svg(px, py, 3.4, *color, false));
        }
        s.push_str("</g>");
        if !label.is_empty() {
            let last = pieces.last().and_then(|p| p.last()).expect("non-empty");
            ends.push(EndLabel {
                y: last.1,
                text: label.clone(),
                color: *color,
                dash: *dash,
                marker: *marker,
            });
        }
    }

    /// Stacked bars: positive values stacked up from 0, negative ones down.
    fn bars(&self, s: &mut String, l: &Layer, (xm, ym): (&Map, &Map)) {
        let Layer::Bars { x, width, series } = l else {
            return;
        };
        let n = x.len();
        let mut pos = vec![0.0f64; n];
        let mut neg = vec![0.0f64; n];
        for ser in series {
            for i in 0..n {
                let v = ser.values.get(i).copied().unwrap_or(f64::NAN);
                if !v.is_finite() || v == 0.0 {
                    continue;
                }
                let (b0, b1) = if v > 0.0 {
                    let b = (pos[i], pos[i] + v);
                    pos[i] += v;
                    b
                } else {
                    let b = (neg[i] + v, neg[i]);
                    neg[i] += v;
                    b
                };
                let (Some(xa), Some(xb)) = (xm.px(x[i] - width / 2.0), xm.px(x[i] + width / 2.0))
                else {
                    continue;
                };
                let ya = ym.px_clamped(b0);
                let yb = ym.px_clamped(b1);
                let (top, height) = (ya.min(yb), (ya - yb).abs());
                if height < 0.05 {
                    continue;
                }
                let color = ser
                    .colors
                    .get(i)
                    .or(ser.colors.first())
                    .copied()
                    .unwrap_or(Color::C(0));
                let title = ser.titles.get(i).filter(|t| !t.is_empty());
                let _ = write!(
                    s,
                    r#"<rect class="bar f-{}" x="{:.2}" y="{top:.2}" width="{:.2}" height="{height:.2}">"#,
                    color.class(),
                    xa.min(xb),
                    (xb - xa).abs().max(0.5)
                );
                if let Some(t) = title {
                    let _ = write!(s, "<title>{}</title>", esc(t));
                }
                s.push_str("</rect>");
            }
        }
    }

    /// A horizontal rule across the plot, with its label on a box.
    fn hrule(&self, s: &mut String, labels: &mut String, l: &Layer, (xm, ym): (&Map, &Map)) {
        let Layer::HRule {
            y,
            color,
            dash,
            label,
            label_left,
        } = l
        else {
            return;
        };
        if let Some(py) = ym.px(*y) {
            if py < ym.p1 - 0.5 || py > ym.p0 + 0.5 {
                return;
            }
            let _ = write!(
                s,
                r#"<line class="rule s-{}" x1="{:.1}" x2="{:.1}" y1="{py:.1}" y2="{py:.1}"{}/>"#,
                color.class(),
                xm.p0,
                xm.p1,
                dash.attr()
            );
            if !label.is_empty() {
                let (x, anchor) = if *label_left {
                    (xm.p0 + 6.0, "start")
                } else {
                    (xm.p1 - 4.0, "end")
                };
                // a box under the text, so a curve passing behind
                // the label does not run through its letters
                let tw = label.chars().count() as f64 * CHAR_W * 0.92 + 6.0;
                let bx = if *label_left { x - 3.0 } else { x - tw + 3.0 };
                let _ = write!(
                    labels,
                    r#"<rect class="annot-bg" x="{bx:.1}" y="{:.1}" width="{tw:.1}" height="15"/>"#,
                    py - 17.0
                );
                let _ = write!(
                    labels,
                    r#"<text class="annot t-{}" x="{x:.1}" y="{:.1}" text-anchor="{anchor}">{}</text>"#,
                    color.class(),
                    py - 5.0,
                    esc(label)
                );
            }
        }
    }

    /// A vertical rule, its label flipped left near the right edge.
    fn vrule(&self, s: &mut String, labels: &mut String, l: &Layer, (xm, ym): (&Map, &Map)) {
        let Layer::VRule {
            x,
            color,
            dash,
            label,
        } = l
        else {
            return;
        };
        if let Some(px) = xm.px(*x) {
            if px < xm.p0 - 0.5 || px > xm.p1 + 0.5 {
                return;
            }
            let _ = write!(
                s,
                r#"<line class="rule s-{}" x1="{px:.1}" x2="{px:.1}" y1="{:.1}" y2="{:.1}"{}/>"#,
                color.class(),
                ym.p1,
                ym.p0,
                dash.attr()
            );
            if !label.is_empty() {
                // flip the label to the left of the line near the right edge
                let room = xm.p1 - px;
                let need = label.chars().count() as f64 * CHAR_W * 0.92 + 8.0;
                let (tx, anchor) = if room > need {
                    (px + 4.0, "start")
                } else {
                    (px - 4.0, "end")
                };
                let _ = write!(
                    labels,
                    r#"<text class="annot t-{}" x="{tx:.1}" y="{:.1}" text-anchor="{anchor}">{}</text>"#,
                    color.class(),
                    ym.p1 - 5.0,
                    esc(label)
                );
            }
        }
    }

    /// Markers (one per pixel: coinciding points share it) and their labels.
    fn points(
        &self,
        s: &mut String,
        labels: &mut String,
        keys: &mut Vec<String>,
        l: &Layer,
        (xm, ym): (&Map, &Map),
    ) {
        let Layer::Points(points) = l else {
            return;
        };
        // markers at the same pixel would hide each other: one
        // marker (the first's) says what every one of them is
        let at: Vec<Option<(f64, f64)>> =
            points.iter().map(|p| xm.px(p.x).zip(ym.px(p.y))).collect();
        let marks: Vec<(Vec<usize>, (f64, f64))> = coincide::point_groups(&at)
            .into_iter()
            .filter_map(|g| at[g[0]].map(|xy| (g, xy)))
            .collect();
        for (g, (px, py)) in &marks {
            let p = &points[g[0]];
            let shape = match p.marker {
                Marker::None => Marker::Circle,
                m => m,
            };
            let title = g
                .iter()
                .map(|&i| {
                    let q = &points[i];
                    esc(q.title.as_deref().unwrap_or(&q.label))
                })
                .collect::<Vec<_>>()
                .join("\n");
            // the series under this marker, one a line (what the
            // page check names them by)
            let series = coincide::join_names(g.iter().map(|&i| points[i].series_name()))
                .replace(coincide::JOIN, "\n");
            let _ = write!(
                s,
                r#"<g class="point" data-series="{}"><title>{title}</title>{}</g>"#,
                esc(&series).replace('\n', "&#10;"),
                shape.svg(*px, *py, 4.5, p.color, p.hollow)
            );
        }
        self.label_crowds(labels, keys, points, &marks, (xm, ym));
    }

    /// The markers to label together: markers near enough to cover each
    /// other form a crowd, named by one label that lists every series in
    /// it (`true`), else each is labelled on its own (`false`); crowds of
    /// several series first, so they find room.
    fn crowds(
        &self,
        points: &[Point],
        marks: &[(Vec<usize>, (f64, f64))],
    ) -> Vec<(Vec<usize>, bool)> {
        // markers near enough to cover each other: a crowd, named
        // by one label that lists every series in it; crowds of
        // several series are placed first, so they find room
        let centres: Vec<(f64, f64)> = marks.iter().map(|m| m.1).collect();
        // (a crowd of one series, or of series one legend entry
        // names together: each marker labelled on its own)
        let mut crowds: Vec<(Vec<usize>, bool)> = Vec::new();
        for c in coincide::crowds(&centres) {
            let names = coincide::join_names(
                c.iter()
                    .flat_map(|&m| marks[m].0.iter().map(|&i| points[i].series_name())),
            );
            let names: Vec<&str> = names.split(coincide::JOIN).collect();
            // series one legend entry already names together
            // (coinciding lines, merged) need no label of their own
            let in_legend = self.legend.iter().any(|l| {
                let parts: Vec<&str> = l.label.split(coincide::JOIN).collect();
                names.iter().all(|n| parts.contains(n))
            });
            if names.len() > 1 && !in_legend {
                crowds.push((c, true));
            } else {
                crowds.extend(c.into_iter().map(|m| (vec![m], false)));
            }
        }
        crowds.sort_by_key(|(_, several)| !several);
        crowds
    }

    /// Name the markers of a [`Layer::Points`]: markers near enough to
    /// cover each other form a crowd named by one label (or a numbered tag
    /// and the names in the key below the chart where no label fits).
    fn label_crowds(
        &self,
        labels: &mut String,
        keys: &mut Vec<String>,
        points: &[Point],
        marks: &[(Vec<usize>, (f64, f64))],
        (xm, ym): (&Map, &Map),
    ) {
        let crowds = self.crowds(points, marks);
        // label boxes placed so far: (x0, x1, y0, y1) in pixels; a
        // label covers no marker either
        let mut placed: Vec<(f64, f64, f64, f64)> = marks
            .iter()
            .map(|(_, (x, y))| (x - 5.0, x + 5.0, y - 5.0, y + 5.0))
            .collect();
        let free = |placed: &[(f64, f64, f64, f64)], bx: (f64, f64, f64, f64)| {
            bx.0 >= xm.p0.min(xm.p1) - 2.0
                && bx.1 <= xm.p1.max(xm.p0) + 2.0
                && bx.2 >= ym.p1.min(ym.p0) - 2.0
                && bx.3 <= ym.p0.max(ym.p1) + 2.0
                && !placed
                    .iter()
                    .any(|o| bx.0 < o.1 && o.0 < bx.1 && bx.2 < o.3 && o.2 < bx.3)
        };
        let (plot_x0, plot_x1) = (xm.p0.min(xm.p1), xm.p1.max(xm.p0));
        let (plot_y0, plot_y1) = (ym.p1.min(ym.p0), ym.p0.max(ym.p1));
        for (crowd, several) in crowds {
            let members: Vec<&Vec<usize>> = crowd.iter().map(|&m| &marks[m].0).collect();
            let lead = &points[members[0][0]];
            // one item a marker: its points' names, " = " between
            // identical ones; ", " between markers
            // the names in full (the series with the label where
            // they differ)
            let full = members
                .iter()
                .map(|g| {
                    let texts: Vec<String> = g.iter().map(|&i| points[i].crowd_text()).collect();
                    coincide::join_names(texts.iter().map(String::as_str))
                })
                .collect::<Vec<_>>()
                .join(", ");
            let text = if several {
                full.clone()
            } else {
                coincide::join_names(
                    members
                        .iter()
                        .flat_map(|g| g.iter().map(|&i| points[i].label.as_str())),
                )
            };
            if text.is_empty() {
                continue;
            }
            let lines = if several {
                let max_chars = ((plot_x1 - plot_x0) / 2.5 / ANNOT_CHAR_W).floor() as usize;
                wrap(&text, max_chars)
            } else {
                vec![text.clone()]
            };
            let w = lines.iter().map(|l| l.chars().count()).max().unwrap_or(0) as f64
                * if several { ANNOT_CHAR_W } else { CHAR_W * 0.92 };
            let h = LINE_H * lines.len() as f64;
            // the crowd's box, its markers' half-width around the centres
            let xs = crowd.iter().map(|&m| marks[m].1 .0);
            let ys = crowd.iter().map(|&m| marks[m].1 .1);
            let bx0 = xs.clone().fold(f64::INFINITY, f64::min) - 5.0;
            let bx1 = xs.fold(f64::NEG_INFINITY, f64::max) + 5.0;
            let by0 = ys.clone().fold(f64::INFINITY, f64::min) - 5.0;
            let by1 = ys.fold(f64::NEG_INFINITY, f64::max) + 5.0;
            let (cx, cy) = ((bx0 + bx1) / 2.0, (by0 + by1) / 2.0);
            // top-left corners: right, left, above-right,
            // below-right, above, below, above-left, below-left
            // top-left corners and the text's anchor (the side
            // that faces the crowd, so the text starts next to it
            // whatever its real width): right, left, above-right,
            // below-right, above, below, above-left, below-left
            let candidates = [
                (bx1 + 3.0, cy - h / 2.0, "start"),
                (bx0 - 3.0 - w, cy - h / 2.0, "end"),
                (bx1 + 1.0, by0 - 1.0 - h, "start"),
                (bx1 + 1.0, by1 + 1.0, "start"),
                (cx - w / 2.0, by0 - 2.0 - h, "middle"),
                (cx - w / 2.0, by1 + 2.0, "middle"),
                (bx0 - 1.0 - w, by0 - 1.0 - h, "end"),
                (bx0 - 1.0 - w, by1 + 1.0, "end"),
            ];
            let spot = candidates
                .into_iter()
                .find(|&(x0, y0, _)| free(&placed, (x0, x0 + w, y0, y0 + h)));
            match spot {
                Some((x0, y0, anchor)) => {
                    placed.push((x0, x0 + w, y0, y0 + h));
                    let tx = match anchor {
                        "end" => x0 + w,
                        "middle" => x0 + w / 2.0,
                        _ => x0,
                    };
                    annot_lines(labels, lead.color, (tx, y0 + LINE_H - 3.0), anchor, &lines);
                }
                // no room beside it: a numbered tag, and the names
                // in the key below the chart (every marker named)
                None => {
                    let n = keys.len() + 1;
                    let tag = format!("[{n}]");
                    let (tw, th) = (tag.len() as f64 * ANNOT_CHAR_W, LINE_H);
                    // beside the crowd where it covers nothing,
                    // else at its right edge
                    let at = [
                        (bx1 + 2.0, cy - th / 2.0),
                        (bx0 - 2.0 - tw, cy - th / 2.0),
                        (cx - tw / 2.0, by0 - 1.0 - th),
                        (cx - tw / 2.0, by1 + 1.0),
                    ]
                    .into_iter()
                    .find(|&(x0, y0)| free(&placed, (x0, x0 + tw, y0, y0 + th)))
                    .unwrap_or((
                        (bx1 + 2.0).min(plot_x1 - tw),
                        (cy - th / 2.0).clamp(plot_y0, plot_y1 - th),
                    ));
                    placed.push((at.0, at.0 + tw, at.1, at.1 + th));
                    let _ = write!(
                        labels,
                        r#"<text class="annot t-{}" x="{:.1}" y="{:.1}">{tag}</text>"#,
                        lead.color.class(),
                        at.0,
                        at.1 + th - 3.0
                    );
                    keys.push(format!("{tag} {full}"));
                }
            }
        }
    }

    /// Histogram bars between the edges, from the axis base.
    fn histogram(&self, s: &mut String, l: &Layer, (xm, ym): (&Map, &Map)) {
        let Layer::Histogram {
            edges,
            values,
            colors,
            titles,
        } = l
        else {
            return;
        };
        let base = ym.px_clamped(if ym.scale == Scale::Log { ym.lo } else { 0.0 });
        for (i, &v) in values.iter().enumerate() {
            let (Some(&e0), Some(&e1)) = (edges.get(i), edges.get(i + 1)) else {
                break;
            };
            let (Some(xa), Some(xb)) = (xm.px(e0), xm.px(e1)) else {
                continue;
            };
            if !v.is_finite() || (ym.scale == Scale::Log && v <= 0.0) {
                continue;
            }
            let y = ym.px_clamped(v);
            let (x0, bw) = (xa.min(xb), (xb - xa).abs());
            // a hairline gap between neighbours when there is room
            let inset = if bw > 4.0 { 0.5 } else { 0.0 };
            let color = colors
                .get(i)
                .or(colors.first())
                .copied()
                .unwrap_or(Color::C(0));
            let _ = write!(
                s,
                r#"<rect class="bar f-{}" x="{:.2}" y="{:.2}" width="{:.2}" height="{:.2}">"#,
                color.class(),
                x0 + inset,
                y.min(base),
                (bw - 2.0 * inset).max(0.5),
                (base - y).abs()
            );
            if let Some(t) = titles.get(i).filter(|t| !t.is_empty()) {
                let _ = write!(s, "<title>{}</title>", esc(t));
            }
            s.push_str("</rect>");
        }
    }

    /// A horizontal band between two values.
    fn hband(&self, s: &mut String, l: &Layer, (xm, ym): (&Map, &Map)) {
        let Layer::HBand { y0, y1, color } = l else {
            return;
        };
        let a = ym.px_clamped(*y0);
        let b = ym.px_clamped(*y1);
        let _ = write!(
            s,
            r#"<rect class="band f-{}" x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}"/>"#,
            color.class(),
            xm.p0,
            a.min(b),
            xm.p1 - xm.p0,
            (a - b).abs()
        );
    }
}

/// A point label's `<text>` at `(tx, y)` (the first line's baseline), one
/// `<tspan>` a line where it wraps.
fn annot_lines(
    labels: &mut String,
    color: Color,
    (tx, y): (f64, f64),
    anchor: &str,
    lines: &[String],
) {
    let _ = write!(
        labels,
        r#"<text class="annot t-{}" x="{tx:.1}" y="{y:.1}" text-anchor="{anchor}">"#,
        color.class(),
    );
    match lines {
        [one] => labels.push_str(&esc(one)),
        _ => {
            for (k, l) in lines.iter().enumerate() {
                let _ = write!(
                    labels,
                    r#"<tspan x="{tx:.1}" dy="{}">{}</tspan>"#,
                    if k == 0 { 0.0 } else { LINE_H },
                    esc(l)
                );
            }
        }
    }
    labels.push_str("</text>");
}
