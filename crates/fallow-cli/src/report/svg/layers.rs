//! Drawing the layers of a [`Chart`] (lines, bars, rules, bands) once the
//! axes are fixed: the data-to-pixel mapping and one `match` arm per layer.

use super::axis::Scale;
use super::{esc, Chart, Color, Layer, CHAR_W};
use std::fmt::Write as _;

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
    pub(super) fn render_layer(
        &self,
        s: &mut String,
        labels: &mut String,
        l: &Layer,
        xm: &Map,
        ym: &Map,
    ) {
        match l {
            Layer::Line {
                points,
                color,
                dash,
                width,
                markers,
            } => {
                let mut d = String::new();
                let mut pen_down = false;
                let mut dots = String::new();
                for &(x, y) in points {
                    match (xm.px(x), ym.px(y)) {
                        (Some(px), Some(py)) => {
                            let _ =
                                write!(d, "{}{px:.1} {py:.1}", if pen_down { "L" } else { "M" });
                            pen_down = true;
                            if *markers {
                                let _ =
                                    write!(dots, r#"<circle cx="{px:.1}" cy="{py:.1}" r="2.6"/>"#);
                            }
                        }
                        _ => pen_down = false,
                    }
                }
                if !d.is_empty() {
                    let _ = write!(
                        s,
                        r#"<path class="line s-{}" d="{d}" stroke-width="{width}"{}/>"#,
                        color.class(),
                        dash.attr()
                    );
                }
                if !dots.is_empty() {
                    let _ = write!(s, r#"<g class="f-{}">{dots}</g>"#, color.class());
                }
            }
            Layer::Bars { x, width, series } => {
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
                        let (Some(xa), Some(xb)) =
                            (xm.px(x[i] - width / 2.0), xm.px(x[i] + width / 2.0))
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
            Layer::HRule {
                y,
                color,
                dash,
                label,
                label_left,
            } => {
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
            Layer::VRule {
                x,
                color,
                dash,
                label,
            } => {
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
                            ym.p1 + 12.0,
                            esc(label)
                        );
                    }
                }
            }
            Layer::Points(points) => {
                // label boxes placed so far: (x0, x1, y0, y1) in pixels
                let mut placed: Vec<(f64, f64, f64, f64)> = Vec::new();
                for p in points {
                    let (Some(px), Some(py)) = (xm.px(p.x), ym.px(p.y)) else {
                        continue;
                    };
                    let fill = if p.hollow {
                        format!(
                            r#"class="point s-{}" fill="none" stroke-width="2""#,
                            p.color.class()
                        )
                    } else {
                        format!(r#"class="point f-{}""#, p.color.class())
                    };
                    let _ = write!(
                        s,
                        r#"<circle {fill} cx="{px:.1}" cy="{py:.1}" r="4.5"><title>{}</title></circle>"#,
                        esc(&p.label)
                    );
                    if p.label.is_empty() {
                        continue;
                    }
                    let w = p.label.chars().count() as f64 * CHAR_W * 0.92;
                    let h = 13.0;
                    // right, left, above-right, below-right of the marker
                    let candidates = [
                        (px + 8.0, py + 4.0, "start"),
                        (px - 8.0, py + 4.0, "end"),
                        (px + 6.0, py - 9.0, "start"),
                        (px + 6.0, py + 17.0, "start"),
                    ];
                    for (tx, ty, anchor) in candidates {
                        let x0 = if anchor == "start" { tx } else { tx - w };
                        let bx = (x0, x0 + w, ty - h + 3.0, ty + 3.0);
                        let inside = bx.0 >= xm.p0.min(xm.p1) - 2.0
                            && bx.1 <= xm.p1.max(xm.p0) + 2.0
                            && bx.2 >= ym.p1.min(ym.p0) - 2.0
                            && bx.3 <= ym.p0.max(ym.p1) + 2.0;
                        let clash = placed
                            .iter()
                            .any(|o| bx.0 < o.1 && o.0 < bx.1 && bx.2 < o.3 && o.2 < bx.3);
                        if inside && !clash {
                            placed.push(bx);
                            let _ = write!(
                                labels,
                                r#"<text class="annot t-{}" x="{tx:.1}" y="{ty:.1}" text-anchor="{anchor}">{}</text>"#,
                                p.color.class(),
                                esc(&p.label)
                            );
                            break;
                        }
                    }
                }
            }
            Layer::HBand { y0, y1, color } => {
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
    }
}
