//! A small SVG plotting module: one [`Chart`] type with linear or log axes
//! and layers (lines, bars, reference rules, shaded bands). Output is a
//! string of inline SVG whose colours and fonts come from the page's CSS
//! (classes `s-cN` / `f-cN` for stroke / fill of palette colour N), so the
//! report restyles every plot, dark mode included, from one stylesheet.
//!
//! Written here rather than pulled in as a dependency because the report
//! must be one self-contained file and the plots need only a few kinds of
//! marks; everything is in a fixed `viewBox`, so plots scale with the page.

mod axis;
mod coincide;
mod layers;

pub use axis::{Scale, Unit};

use axis::{linear_ticks, log_ticks, time_unit_for, Tick};
use layers::Map;
use std::fmt::Write as _;

/// A palette colour (index into the page's `--c0`… variables) or the muted grey.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Color {
    /// Palette colour N (0–5).
    C(u8),
    /// Grey for references and de-emphasised marks.
    Muted,
}

impl Color {
    fn class(self) -> String {
        match self {
            Color::C(n) => format!("c{n}"),
            Color::Muted => "muted".into(),
        }
    }
}

/// Line dash pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dash {
    /// Solid.
    Solid,
    /// Dashed.
    Dashed,
    /// Dotted.
    Dotted,
    /// Long dash, short dash.
    LongShort,
}

impl Dash {
    fn attr(self) -> &'static str {
        match self {
            Dash::Solid => "",
            Dash::Dashed => r#" stroke-dasharray="6 4""#,
            Dash::Dotted => r#" stroke-dasharray="2 3""#,
            Dash::LongShort => r#" stroke-dasharray="9 3 2 3""#,
        }
    }
}

/// Marker shape drawn on a line or at a point, so series that share a
/// colour (or a reader who cannot tell colours apart) still differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    /// No marker.
    None,
    /// A disc.
    Circle,
    /// A square.
    Square,
    /// A triangle pointing up.
    Triangle,
    /// A diamond.
    Diamond,
    /// A triangle pointing down.
    TriangleDown,
    /// A diagonal cross.
    Cross,
    /// A plus sign.
    Plus,
}

impl Marker {
    /// The shapes in the order series take them.
    pub const CYCLE: [Marker; 7] = [
        Marker::Circle,
        Marker::Square,
        Marker::Triangle,
        Marker::Diamond,
        Marker::TriangleDown,
        Marker::Cross,
        Marker::Plus,
    ];

    /// The shape's name (its CSS class is `mk-NAME`).
    pub fn name(self) -> &'static str {
        match self {
            Marker::None => "none",
            Marker::Circle => "circle",
            Marker::Square => "square",
            Marker::Triangle => "triangle",
            Marker::Diamond => "diamond",
            Marker::TriangleDown => "triangle-down",
            Marker::Cross => "cross",
            Marker::Plus => "plus",
        }
    }

    /// SVG for the shape centred at (x, y) with radius `r`; `class` colours
    /// it (`f-c0`, or `s-c0` with `fill="none"` for outlines). Crosses and
    /// plus signs are strokes, always.
    pub(crate) fn svg(self, x: f64, y: f64, r: f64, color: Color, hollow: bool) -> String {
        let c = color.class();
        let paint = if hollow {
            format!(
                r#"class="mk mk-{} s-{c}" fill="none" stroke-width="1.8""#,
                self.name()
            )
        } else {
            format!(r#"class="mk mk-{} f-{c}""#, self.name())
        };
        let stroke = format!(
            r#"class="mk mk-{} s-{c}" fill="none" stroke-width="2""#,
            self.name()
        );
        match self {
            Marker::None => String::new(),
            Marker::Circle => format!(r#"<circle {paint} cx="{x:.1}" cy="{y:.1}" r="{r:.1}"/>"#),
            Marker::Square => {
                let a = r * 0.88;
                format!(
                    r#"<rect {paint} x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}"/>"#,
                    x - a,
                    y - a,
                    2.0 * a,
                    2.0 * a
                )
            }
            Marker::Triangle | Marker::TriangleDown => {
                let s = if self == Marker::Triangle { 1.0 } else { -1.0 };
                let a = r * 1.2;
                format!(
                    r#"<path {paint} d="M{x:.1} {:.1}L{:.1} {:.1}L{:.1} {:.1}Z"/>"#,
                    y - s * a,
                    x + a * 0.87,
                    y + s * a * 0.5,
                    x - a * 0.87,
                    y + s * a * 0.5
                )
            }
            Marker::Diamond => {
                let a = r * 1.25;
                format!(
                    r#"<path {paint} d="M{x:.1} {:.1}L{:.1} {y:.1}L{x:.1} {:.1}L{:.1} {y:.1}Z"/>"#,
                    y - a,
                    x + a,
                    y + a,
                    x - a
                )
            }
            Marker::Cross => {
                let a = r * 0.9;
                format!(
                    r#"<path {stroke} d="M{:.1} {:.1}L{:.1} {:.1}M{:.1} {:.1}L{:.1} {:.1}"/>"#,
                    x - a,
                    y - a,
                    x + a,
                    y + a,
                    x - a,
                    y + a,
                    x + a,
                    y - a
                )
            }
            Marker::Plus => {
                let a = r * 1.1;
                format!(
                    r#"<path {stroke} d="M{:.1} {y:.1}L{:.1} {y:.1}M{x:.1} {:.1}L{x:.1} {:.1}"/>"#,
                    x - a,
                    x + a,
                    y - a,
                    y + a
                )
            }
        }
    }
}

/// The style of the i-th of several series: colour, dash and marker all
/// change from one series to the next (6 colours, 4 dashes, 7 shapes), so
/// no two of the first 84 share all three and neighbours differ in each.
pub fn series_style(i: usize) -> (Color, Dash, Marker) {
    let dash = [Dash::Solid, Dash::Dashed, Dash::Dotted, Dash::LongShort][i % 4];
    (Color::C((i % 6) as u8), dash, Marker::CYCLE[i % 7])
}

/// One axis.
#[derive(Debug, Clone)]
pub struct Axis {
    /// Label under (x) or beside (y) the axis.
    pub label: String,
    /// Linear or log.
    pub scale: Scale,
    /// Unit of the values, for tick labels.
    pub unit: Unit,
    /// Fixed range; `None` = from the data, expanded to ticks.
    pub range: Option<(f64, f64)>,
    /// Custom ticks (categorical axes); `None` = automatic.
    pub ticks: Option<Vec<(f64, String)>>,
}

impl Axis {
    /// An automatic axis.
    pub fn new(label: impl Into<String>, scale: Scale, unit: Unit) -> Axis {
        Axis {
            label: label.into(),
            scale,
            unit,
            range: None,
            ticks: None,
        }
    }
    /// With a fixed range.
    pub fn range(mut self, lo: f64, hi: f64) -> Axis {
        self.range = Some((lo, hi));
        self
    }
    /// Categorical: labels at 0, 1, 2, … (every `every`-th labelled).
    pub fn categories(mut self, labels: &[String], every: usize) -> Axis {
        let every = every.max(1);
        self.ticks = Some(
            labels
                .iter()
                .enumerate()
                .map(|(i, l)| {
                    let label = if i % every == 0 {
                        l.clone()
                    } else {
                        String::new()
                    };
                    (i as f64, label)
                })
                .collect(),
        );
        self.range = Some((-0.5, labels.len() as f64 - 0.5));
        self
    }
}

/// One stacked segment series of a bar layer.
#[derive(Debug, Clone)]
pub struct BarSeries {
    /// Heights (stacked on the series before).
    pub values: Vec<f64>,
    /// Colour of each bar (one per value, or one for all).
    pub colors: Vec<Color>,
    /// Hover text of each bar (may be empty).
    pub titles: Vec<String>,
}

/// Something drawn in the plot area.
#[derive(Debug, Clone)]
pub enum Layer {
    /// A polyline; points with a non-finite coordinate (or non-positive on a
    /// log axis) break the line.
    Line {
        /// (x, y) points in data units.
        points: Vec<(f64, f64)>,
        /// Colour.
        color: Color,
        /// Dash pattern.
        dash: Dash,
        /// Stroke width.
        width: f64,
        /// Marker at each point (up to 30 points) or at about ten evenly
        /// spaced places along the line (more), staggered by shape so the
        /// markers of coinciding lines do not cover each other.
        marker: Marker,
        /// The series' name: its hover text, and (non-empty) a direct label
        /// beside the line's last point, in the right margin.
        label: String,
    },
    /// Bars centred at `x` of width `width` (data units); series stack.
    Bars {
        /// Bar centres.
        x: Vec<f64>,
        /// Bar width, data units.
        width: f64,
        /// Stacked series, bottom first.
        series: Vec<BarSeries>,
    },
    /// A horizontal reference line across the plot.
    HRule {
        /// Height, data units.
        y: f64,
        /// Colour.
        color: Color,
        /// Dash.
        dash: Dash,
        /// Label above the line.
        label: String,
        /// Put the label at the left end instead of the right.
        label_left: bool,
    },
    /// A vertical reference line.
    VRule {
        /// Position, data units.
        x: f64,
        /// Colour.
        color: Color,
        /// Dash.
        dash: Dash,
        /// Label at the top, right of the line.
        label: String,
    },
    /// Labelled markers (a scatter plot), one per point; labels that would
    /// overlap an earlier one move to the other side or are left to the
    /// marker's hover text.
    Points(Vec<Point>),
    /// Histogram bars from `edges[i]` to `edges[i + 1]` (data units, so a
    /// bar is as wide as its bin on either scale) of height `values[i]`.
    Histogram {
        /// Bin edges, one more than values, increasing.
        edges: Vec<f64>,
        /// Bar heights.
        values: Vec<f64>,
        /// Colour of each bar (one per value, or one for all).
        colors: Vec<Color>,
        /// Hover text of each bar (may be empty).
        titles: Vec<String>,
    },
    /// A shaded horizontal band between two heights.
    HBand {
        /// Bottom, data units.
        y0: f64,
        /// Top, data units.
        y1: f64,
        /// Colour.
        color: Color,
    },
}

/// One marker of a [`Layer::Points`].
#[derive(Debug, Clone)]
pub struct Point {
    /// Position, data units.
    pub x: f64,
    /// Position, data units.
    pub y: f64,
    /// Text beside the marker (and its hover text).
    pub label: String,
    /// Colour.
    pub color: Color,
    /// An outline instead of a filled shape (reference points).
    pub hollow: bool,
    /// Shape.
    pub marker: Marker,
    /// Hover text, when it should say more than the label.
    pub title: Option<String>,
    /// The series it belongs to, when the label does not name it (a
    /// Pareto front's knob value); empty: the label is its name.
    pub series: String,
}

impl Point {
    /// What names the point's series.
    fn series_name(&self) -> &str {
        if self.series.is_empty() {
            &self.label
        } else {
            &self.series
        }
    }

    /// Its text in a label shared with other points: the series and the
    /// label when they differ.
    fn crowd_text(&self) -> String {
        match (self.series.is_empty(), self.label.is_empty()) {
            (true, _) => self.label.clone(),
            (false, true) => self.series.clone(),
            (false, false) => format!("{} {}", self.series, self.label),
        }
    }
}

/// A legend entry.
#[derive(Debug, Clone)]
pub struct Legend {
    /// Text.
    pub label: String,
    /// Colour.
    pub color: Color,
    /// Line (with dash) or box swatch.
    pub swatch: Swatch,
}

/// Legend swatch shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Swatch {
    /// A short line.
    Line(Dash),
    /// A short line with a marker in its middle.
    Marked(Dash, Marker),
    /// A filled square.
    Box,
}

/// A chart: axes, layers and a legend, rendered to inline SVG.
#[derive(Debug, Clone)]
pub struct Chart {
    /// Width of the viewBox (the SVG scales to its container).
    pub width: f64,
    /// Height of the viewBox.
    pub height: f64,
    /// X axis.
    pub x: Axis,
    /// Y axis.
    pub y: Axis,
    /// Layers, drawn in order.
    pub layers: Vec<Layer>,
    /// Legend entries, shown above the plot area.
    pub legend: Vec<Legend>,
    /// Accessible description (the SVG's `<title>`).
    pub title: String,
    /// Labelled lines that do not coincide are shifted sideways by this
    /// much (x data units) from one to the next, centred on their true x,
    /// so markers of equal values on categorical axes sit side by side.
    pub dodge: f64,
    /// Height (pixels) below the axis label for the key of crowded
    /// scatter markers whose label found no room beside them.
    foot: f64,
}

/// A legend entry's place: (entry, x, y of its first row's centre, its text's lines).
type LegendSlot = (usize, f64, f64, Vec<String>);

/// Where everything goes: axis ranges, ticks, margins and the data-to-pixel maps.
struct Layout {
    xticks: Vec<Tick>,
    yticks: Vec<Tick>,
    xlabel: String,
    ylabel: String,
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
    legend: Vec<LegendSlot>,
    rotate: bool,
    xm: Map,
    ym: Map,
}

const FONT: f64 = 12.0;
const CHAR_W: f64 = 6.7; // average glyph width at FONT, for margins
/// Widest average glyph of the bold, outlined direct labels (`.annot`, 11.5 px
/// semibold with a 3 px halo): measured in headless Chromium with DejaVu Sans.
const ANNOT_CHAR_W: f64 = 7.8;
/// Height of the band above the plot area that holds vertical rules' labels.
const RULE_LABEL_H: f64 = 16.0;
/// Line height of the key of crowded markers below a chart.
const KEY_LINE_H: f64 = 15.0;
/// Width of the line-and-marker swatch before a direct end label.
const END_SWATCH: f64 = 22.0;

impl Chart {
    /// A chart of the default size (560 × 320).
    pub fn new(title: impl Into<String>, x: Axis, y: Axis) -> Chart {
        Chart {
            width: 560.0,
            height: 320.0,
            x,
            y,
            layers: Vec::new(),
            legend: Vec::new(),
            title: title.into(),
            dodge: 0.0,
            foot: 0.0,
        }
    }

    /// Shift non-coinciding labelled lines apart by `dodge` x units (see [`Chart::dodge`]).
    pub fn dodge(mut self, dodge: f64) -> Chart {
        self.dodge = dodge;
        self
    }

    /// The labelled lines moved sideways by [`Chart::dodge`].
    fn dodged(mut self) -> Chart {
        let n = self
            .layers
            .iter()
            .filter(|l| matches!(l, Layer::Line { label, .. } if !label.is_empty()))
            .count();
        if self.dodge == 0.0 || n < 2 {
            return self;
        }
        let mut k = 0usize;
        for l in &mut self.layers {
            if let Layer::Line { points, label, .. } = l {
                if label.is_empty() {
                    continue;
                }
                let shift = (k as f64 - (n as f64 - 1.0) / 2.0) * self.dodge;
                points.iter_mut().for_each(|p| p.0 += shift);
                k += 1;
            }
        }
        self
    }

    /// A wide chart (1100 × 300) for time series.
    pub fn wide(mut self) -> Chart {
        self.width = 1100.0;
        self.height = 300.0;
        self
    }

    /// Add a layer.
    pub fn layer(mut self, l: Layer) -> Chart {
        self.layers.push(l);
        self
    }

    /// Add a legend entry.
    pub fn legend(mut self, label: impl Into<String>, color: Color, swatch: Swatch) -> Chart {
        self.legend.push(Legend {
            label: label.into(),
            color,
            swatch,
        });
        self
    }

    /// Data extent along x (`true`) or y (`false`), honouring log scales.
    fn extent(&self, along_x: bool) -> Option<(f64, f64)> {
        let axis = if along_x { &self.x } else { &self.y };
        let log = axis.scale == Scale::Log;
        let mut lo = f64::INFINITY;
        let mut hi = f64::NEG_INFINITY;
        let mut see = |v: f64| {
            if v.is_finite() && (!log || v > 0.0) {
                lo = lo.min(v);
                hi = hi.max(v);
            }
        };
        for l in &self.layers {
            match l {
                Layer::Line { points, .. } => {
                    for &(x, y) in points {
                        see(if along_x { x } else { y });
                    }
                }
                Layer::Bars { x, width, series } => {
                    if along_x {
                        for &c in x {
                            see(c - width / 2.0);
                            see(c + width / 2.0);
                        }
                    } else {
                        let n = x.len();
                        let mut top = vec![0.0f64; n];
                        let mut bottom = vec![0.0f64; n];
                        for s in series {
                            for (i, &v) in s.values.iter().enumerate().take(n) {
                                if v.is_finite() {
                                    if v >= 0.0 {
                                        top[i] += v;
                                    } else {
                                        bottom[i] += v;
                                    }
                                }
                            }
                        }
                        for i in 0..n {
                            see(top[i]);
                            if !log {
                                see(bottom[i]);
                                see(0.0);
                            }
                        }
                    }
                }
                Layer::Points(points) => {
                    for p in points {
                        see(if along_x { p.x } else { p.y });
                    }
                }
                Layer::Histogram { edges, values, .. } => {
                    if along_x {
                        edges.iter().for_each(|&e| see(e));
                    } else {
                        values.iter().for_each(|&v| see(v));
                        if !log {
                            see(0.0);
                        }
                    }
                }
                Layer::HRule { y, .. } if !along_x => see(*y),
                Layer::VRule { x, .. } if along_x => see(*x),
                Layer::HBand { y0, y1, .. } if !along_x => {
                    see(*y0);
                    see(*y1);
                }
                _ => {}
            }
        }
        (lo <= hi).then_some((lo, hi))
    }

    /// Range, ticks and label (with the display unit of linear time axes) of one axis.
    fn resolve(&self, along_x: bool, target: usize) -> (f64, f64, Vec<Tick>, String) {
        let axis = if along_x { &self.x } else { &self.y };
        let data = axis.range.or_else(|| self.extent(along_x));
        let (lo, hi) = data.unwrap_or(match axis.scale {
            Scale::Linear => (0.0, 1.0),
            Scale::Log => (1.0, 10.0),
        });
        let (mut lo2, mut hi2, mut ticks) = match axis.scale {
            Scale::Linear => linear_ticks(lo, hi, axis.unit, target),
            Scale::Log => log_ticks(lo, hi, axis.unit),
        };
        if let Some((flo, fhi)) = axis.range {
            // a fixed range wins over tick expansion; drop ticks outside it
            lo2 = flo;
            hi2 = fhi;
            let (a, b) = (flo.min(fhi), flo.max(fhi));
            let eps = (b - a).abs() * 1e-9;
            ticks.retain(|t| t.value >= a - eps && t.value <= b + eps);
        }
        if let Some(custom) = &axis.ticks {
            ticks = custom
                .iter()
                .map(|(v, l)| Tick {
                    value: *v,
                    label: l.clone(),
                    major: false,
                })
                .collect();
        }
        // the same unit linear_ticks chose, from the range before expansion
        let label = Self::axis_label(axis, lo, hi);
        (lo2, hi2, ticks, label)
    }

    /// The axis label, with the display unit of linear time axes appended.
    fn axis_label(axis: &Axis, lo: f64, hi: f64) -> String {
        if axis.unit == Unit::Seconds && axis.scale == Scale::Linear && axis.ticks.is_none() {
            let (_, u) = time_unit_for(lo.abs().max(hi.abs()));
            format!("{} ({u})", axis.label)
        } else if axis.unit == Unit::Hours && axis.ticks.is_none() {
            format!("{} (h)", axis.label)
        } else {
            axis.label.clone()
        }
    }

    /// Render to an `<svg>` element. `id` must be unique in the page (clip
    /// path). Labelled lines that would coincide on screen are drawn once,
    /// under one label naming them all (see `coincide`).
    pub fn render(&self, id: &str) -> String {
        let first = self.layout();
        let merged = coincide::merge_lines(self, &first.xm, &first.ym);
        let chart = merged.unwrap_or_else(|| self.clone()).dodged();
        let lay = chart.layout();
        let (svg, keys) = chart.draw(id, lay);
        if keys.is_empty() {
            return svg;
        }
        // crowded markers named in a key below the chart: the same plot
        // area (height and bottom margin grow alike), so the same crowds
        let mut c = chart;
        let max_chars = ((c.width - 20.0) / CHAR_W).floor() as usize;
        let lines: usize = keys.iter().map(|k| layers::wrap(k, max_chars).len()).sum();
        c.foot = KEY_LINE_H * lines as f64 + 6.0;
        c.height += c.foot;
        let lay = c.layout();
        c.draw(id, lay).0
    }

    /// Axis ranges, ticks, margins and pixel maps for the chart as it is.
    fn layout(&self) -> Layout {
        let (ylo, yhi, yticks, ylabel) = self.resolve(false, 5);
        let (xlo, xhi, xticks, xlabel) =
            self.resolve(true, if self.width > 800.0 { 10 } else { 6 });
        let widest = yticks
            .iter()
            .map(|t| t.label.chars().count())
            .max()
            .unwrap_or(1) as f64;
        let left = 30.0 + widest * CHAR_W;
        // direct labels at line ends sit in a right margin wide enough for
        // the longest (at most a third of the chart)
        let end_label_w = self
            .layers
            .iter()
            .filter_map(|l| match l {
                Layer::Line { label, .. } if !label.is_empty() => Some(label.chars().count()),
                _ => None,
            })
            .max()
            .map(|n| (END_SWATCH + 10.0 + n as f64 * ANNOT_CHAR_W).min(self.width / 3.0));
        let right = 18.0 + end_label_w.unwrap_or(0.0);
        let legend = self.legend_layout(left, self.width - right);
        let legend_h = legend
            .iter()
            .map(|(_, _, y, lines)| y + 14.0 * lines.len() as f64)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
            .unwrap_or(8.0);
        // labels of vertical rules go above the plot area, where no curve runs
        let rule_labels = self
            .layers
            .iter()
            .any(|l| matches!(l, Layer::VRule { label, .. } if !label.is_empty()));
        let top = legend_h + 6.0 + if rule_labels { RULE_LABEL_H } else { 0.0 };
        // crowded category labels are turned 40° instead of being dropped
        let widest_x = xticks
            .iter()
            .map(|t| t.label.chars().count())
            .max()
            .unwrap_or(0) as f64
            * CHAR_W;
        let rotate = self.x.ticks.is_some() && {
            let spacing = (self.width - right - left) / (xhi - xlo).abs().max(1.0);
            widest_x + 6.0 > spacing
        };
        let bottom = self.foot
            + if rotate {
                36.0 + widest_x * 0.643 + FONT * 0.766
            } else {
                50.0
            };
        let (w, h) = (self.width, self.height);
        let xm = Map {
            scale: self.x.scale,
            lo: xlo,
            hi: xhi,
            p0: left,
            p1: w - right,
        };
        let ym = Map {
            scale: self.y.scale,
            lo: ylo,
            hi: yhi,
            p0: h - bottom,
            p1: top,
        };
        Layout {
            xticks,
            yticks,
            xlabel,
            ylabel,
            left,
            right,
            top,
            bottom,
            legend,
            rotate,
            xm,
            ym,
        }
    }

    /// Draw with a layout from [`Chart::layout`]; also the keys of crowded
    /// markers whose labels found no room (drawn in the foot, if it has
    /// room: see [`Chart::render`]).
    fn draw(&self, id: &str, lay: Layout) -> (String, Vec<String>) {
        let Layout {
            xticks,
            yticks,
            xlabel,
            ylabel,
            left,
            right,
            top,
            bottom,
            legend,
            rotate,
            xm,
            ym,
        } = lay;
        let (w, h) = (self.width, self.height);
        let mut s = String::with_capacity(16 << 10);
        let _ = write!(
            s,
            r#"<svg class="chart" viewBox="0 0 {w} {h}" role="img" aria-label="{t}" xmlns="http://www.w3.org/2000/svg"><title>{t}</title>"#,
            t = esc(&self.title)
        );
        let _ = write!(
            s,
            r#"<defs><clipPath id="{id}-clip"><rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}"/></clipPath></defs>"#,
            left,
            top - 1.0,
            (w - right - left).max(0.0),
            (h - bottom - top + 2.0).max(0.0)
        );
        self.draw_grid(
            &mut s,
            (xticks.as_slice(), yticks.as_slice()),
            (&xm, &ym),
            (left, right, top, bottom),
        );

        // data
        let _ = write!(s, r#"<g clip-path="url(#{id}-clip)">"#);
        let mut labels = String::new();
        let mut ends = Vec::new();
        let mut keys = Vec::new();
        for l in &self.layers {
            self.render_layer(&mut s, &mut labels, &mut ends, &mut keys, l, (&xm, &ym));
        }
        s.push_str("</g>");
        layers::end_labels(&mut labels, ends, &ym, w - right + 6.0, right - 12.0);
        let has_data = self.layers.iter().any(|l| match l {
            Layer::Line { points, .. } => points.iter().any(|p| p.0.is_finite() && p.1.is_finite()),
            Layer::Bars { series, .. } => series
                .iter()
                .any(|s| s.values.iter().any(|v| v.is_finite() && *v != 0.0)),
            Layer::Points(points) => points.iter().any(|p| p.x.is_finite() && p.y.is_finite()),
            Layer::Histogram { values, .. } => values.iter().any(|v| v.is_finite() && *v != 0.0),
            _ => false,
        });
        if !has_data {
            let _ = write!(
                s,
                r#"<text class="note" x="{:.1}" y="{:.1}" text-anchor="middle">no data</text>"#,
                (left + w - right) / 2.0,
                (top + h - bottom) / 2.0
            );
        }

        let ticks = (xticks.as_slice(), yticks.as_slice());
        self.draw_axes(
            &mut s,
            ticks,
            (&xm, &ym),
            (left, right, top, bottom),
            rotate,
        );
        let _ = write!(
            s,
            r#"<text class="label" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            (left + w - right) / 2.0,
            h - self.foot - 10.0,
            esc(&xlabel)
        );
        if self.foot > 0.0 {
            let max_chars = ((w - 20.0) / CHAR_W).floor() as usize;
            let mut y = h - self.foot + KEY_LINE_H;
            for k in &keys {
                let _ = write!(s, r#"<text class="key tick" x="10" y="{y:.1}">"#);
                for (i, line) in layers::wrap(k, max_chars).iter().enumerate() {
                    let _ = write!(
                        s,
                        r#"<tspan x="10" dy="{}">{}</tspan>"#,
                        if i == 0 { 0.0 } else { KEY_LINE_H },
                        esc(line)
                    );
                    y += KEY_LINE_H;
                }
                s.push_str("</text>");
            }
        }
        let _ = write!(
            s,
            r#"<text class="label" transform="translate(14 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
            (top + h - bottom) / 2.0,
            esc(&ylabel)
        );
        s.push_str(&labels);
        self.render_legend(&mut s, &legend);
        s.push_str("</svg>");
        (s, keys)
    }

    /// The grid: a line at each major or labelled y tick, and at each
    /// major x tick unless the x axis has ticks of its own.
    fn draw_grid(
        &self,
        s: &mut String,
        (xticks, yticks): (&[Tick], &[Tick]),
        (xm, ym): (&Map, &Map),
        (left, right, top, bottom): (f64, f64, f64, f64),
    ) {
        let (w, h) = (self.width, self.height);
        s.push_str(r#"<g class="grid">"#);
        for t in yticks.iter().filter(|t| t.major || !t.label.is_empty()) {
            if let Some(y) = ym.px(t.value) {
                let _ = write!(
                    s,
                    r#"<line x1="{left:.1}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}"/>"#,
                    w - right
                );
            }
        }
        if self.x.ticks.is_none() {
            for t in xticks.iter().filter(|t| t.major) {
                if let Some(x) = xm.px(t.value) {
                    let _ = write!(
                        s,
                        r#"<line x1="{x:.1}" x2="{x:.1}" y1="{top:.1}" y2="{:.1}"/>"#,
                        h - bottom
                    );
                }
            }
        }
        s.push_str("</g>");
    }

    /// The axes, their ticks and the tick labels (an x label that would
    /// overlap the one before is left out).
    fn draw_axes(
        &self,
        s: &mut String,
        (xticks, yticks): (&[Tick], &[Tick]),
        (xm, ym): (&Map, &Map),
        (left, right, top, bottom): (f64, f64, f64, f64),
        rotate: bool,
    ) {
        let (w, h) = (self.width, self.height);
        let _ = write!(
            s,
            r#"<g class="axis"><line x1="{left:.1}" x2="{left:.1}" y1="{top:.1}" y2="{:.1}"/><line x1="{left:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}"/>"#,
            h - bottom,
            w - right,
            h - bottom,
            h - bottom
        );
        for t in yticks {
            let Some(y) = ym.px(t.value) else { continue };
            let len = if t.major || !t.label.is_empty() {
                5.0
            } else {
                3.0
            };
            let _ = write!(
                s,
                r#"<line x1="{:.1}" x2="{left:.1}" y1="{y:.1}" y2="{y:.1}"/>"#,
                left - len
            );
            if !t.label.is_empty() {
                let _ = write!(
                    s,
                    r#"<text class="tick" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                    left - 8.0,
                    y + FONT * 0.35,
                    esc(&t.label)
                );
            }
        }
        // x tick labels: skip any that would overlap the previous one
        let mut last_end = f64::NEG_INFINITY;
        for t in xticks {
            let Some(x) = xm.px(t.value) else { continue };
            let len = if t.major || !t.label.is_empty() {
                5.0
            } else {
                3.0
            };
            let _ = write!(
                s,
                r#"<line x1="{x:.1}" x2="{x:.1}" y1="{:.1}" y2="{:.1}"/>"#,
                h - bottom,
                h - bottom + len
            );
            if !t.label.is_empty() && rotate {
                if x < last_end + FONT * 1.2 {
                    continue;
                }
                last_end = x;
                let _ = write!(
                    s,
                    r#"<text class="tick" transform="translate({:.1} {:.1}) rotate(-40)" text-anchor="end">{}</text>"#,
                    x + FONT * 0.3,
                    h - bottom + 10.0,
                    esc(&t.label)
                );
            } else if !t.label.is_empty() {
                let half = t.label.chars().count() as f64 * CHAR_W / 2.0;
                // a label at either end of the axis stays inside the chart
                // (CHAR_W is an average: digits and "%" run up to 30 % wider)
                let reach = half * 1.3 + 2.0;
                let x = x.clamp(reach, (w - reach).max(reach));
                if x - half < last_end + 4.0 {
                    continue;
                }
                last_end = x + half;
                let _ = write!(
                    s,
                    r#"<text class="tick" x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                    h - bottom + 8.0 + FONT,
                    esc(&t.label)
                );
            }
        }
        s.push_str("</g>");
    }

    /// Where each legend entry goes: (entry, x, y of its row's centre,
    /// its text's lines). One right-aligned row when it fits; otherwise rows
    /// filled from the left edge, as many as needed; an entry wider than
    /// the chart (the names of several coinciding series) wraps.
    fn legend_layout(&self, left: f64, right_edge: f64) -> Vec<LegendSlot> {
        let max_chars = ((right_edge - left - 42.0) / CHAR_W).floor().max(0.0) as usize;
        let texts: Vec<Vec<String>> = self
            .legend
            .iter()
            .map(|l| layers::wrap(&l.label, max_chars))
            .collect();
        let widths: Vec<f64> = texts
            .iter()
            .map(|t| {
                let n = t.iter().map(|l| l.chars().count()).max().unwrap_or(0);
                26.0 + n as f64 * CHAR_W + 16.0
            })
            .collect();
        let total: f64 = widths.iter().sum();
        let mut out = Vec::with_capacity(widths.len());
        if total < right_edge - left && texts.iter().all(|t| t.len() <= 1) {
            let mut x = right_edge - total;
            for (i, w) in widths.iter().enumerate() {
                out.push((i, x, 14.0, texts[i].clone()));
                x += w;
            }
            return out;
        }
        // rows: an entry of k lines makes its row 14 px taller per extra line
        let (mut x, mut y, mut row_extra) = (left, 14.0, 0.0f64);
        for (i, w) in widths.iter().enumerate() {
            if x > left && x + w > right_edge {
                x = left;
                y += 20.0 + row_extra;
                row_extra = 0.0;
            }
            row_extra = row_extra.max(14.0 * (texts[i].len().max(1) - 1) as f64);
            out.push((i, x, y, texts[i].clone()));
            x += w;
        }
        out
    }

    fn render_legend(&self, s: &mut String, layout: &[LegendSlot]) {
        if layout.is_empty() {
            return;
        }
        s.push_str(r#"<g class="legend">"#);
        for (i, x, y, lines) in layout {
            let (x, y) = (*x, *y);
            let l = &self.legend[*i];
            match l.swatch {
                Swatch::Marked(d, m) => {
                    let _ = write!(
                        s,
                        r#"<line class="s-{}" x1="{x:.1}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke-width="2.5"{}/>{}"#,
                        l.color.class(),
                        x + 20.0,
                        d.attr(),
                        m.svg(x + 10.0, y, 3.6, l.color, false)
                    );
                }
                Swatch::Line(d) => {
                    let _ = write!(
                        s,
                        r#"<line class="s-{}" x1="{x:.1}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke-width="2.5"{}/>"#,
                        l.color.class(),
                        x + 20.0,
                        d.attr()
                    );
                }
                Swatch::Box => {
                    let _ = write!(
                        s,
                        r#"<rect class="f-{}" x="{:.1}" y="{:.1}" width="12" height="12" rx="2"/>"#,
                        l.color.class(),
                        x + 4.0,
                        y - 6.0
                    );
                }
            }
            let _ = write!(
                s,
                r#"<text class="tick" x="{:.1}" y="{:.1}">"#,
                x + 26.0,
                y + FONT * 0.35
            );
            for (k, line) in lines.iter().enumerate() {
                let _ = write!(
                    s,
                    r#"<tspan x="{:.1}" dy="{}">{}</tspan>"#,
                    x + 26.0,
                    if k == 0 { 0.0 } else { 14.0 },
                    esc(line)
                );
            }
            s.push_str("</text>");
        }
        s.push_str("</g>");
    }
}

/// Escape text for XML/HTML content and attributes.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_lines_bars_and_rules() {
        let c = Chart::new(
            "t <&>",
            Axis::new("x", Scale::Log, Unit::Seconds),
            Axis::new("y", Scale::Linear, Unit::Fraction).range(0.0, 1.0),
        )
        .layer(Layer::Line {
            points: vec![(0.001, 0.1), (0.0, 0.5), (0.1, 0.9), (1.0, f64::NAN)],
            color: Color::C(0),
            dash: Dash::Solid,
            width: 2.0,
            marker: Marker::None,
            label: String::new(),
        })
        .layer(Layer::VRule {
            x: 0.01,
            color: Color::Muted,
            dash: Dash::Dashed,
            label: "mean".into(),
        })
        .legend("cdf", Color::C(0), Swatch::Line(Dash::Solid));
        let s = c.render("p1");
        assert!(s.starts_with("<svg"));
        assert!(s.ends_with("</svg>"));
        assert!(s.contains("t &lt;&amp;&gt;"));
        assert!(s.contains("1 ms") && s.contains("100 ms"));
        // x = 0 cannot sit on a log axis and y = NaN nowhere: the path
        // restarts after the gap and has no segment joining across it
        let d = s.split(" d=\"").nth(1).unwrap().split('"').next().unwrap();
        assert_eq!(d.matches('M').count(), 2, "{d}");
        assert_eq!(d.matches('L').count(), 0, "{d}");
        assert!(s.contains("mean"));
    }

    #[test]
    fn categorical_stacked_bars() {
        let labels: Vec<String> = (1..=3).map(|i| i.to_string()).collect();
        let c = Chart::new(
            "bars",
            Axis::new("lag", Scale::Linear, Unit::Number).categories(&labels, 1),
            Axis::new("p", Scale::Linear, Unit::Fraction).range(0.0, 1.0),
        )
        .layer(Layer::Bars {
            x: vec![0.0, 1.0, 2.0],
            width: 0.7,
            series: vec![
                BarSeries {
                    values: vec![0.5, 0.6, 0.7],
                    colors: vec![Color::C(0)],
                    titles: vec!["a".into(), "b".into(), "c".into()],
                },
                BarSeries {
                    values: vec![0.5, 0.4, 0.3],
                    colors: vec![Color::C(1)],
                    titles: vec![],
                },
            ],
        });
        let s = c.render("p2");
        assert_eq!(s.matches("<rect class=\"bar").count(), 6);
        assert!(s.contains("<title>b</title>"));
    }

    #[test]
    fn labelled_points_and_a_legend_of_several_rows() {
        let pts = |x: f64, y: f64, label: &str| Point {
            x,
            y,
            label: label.into(),
            color: Color::C(1),
            hollow: label == "ref",
            marker: Marker::Circle,
            title: None,
            series: String::new(),
        };
        let mut c = Chart::new(
            "scatter",
            Axis::new("x", Scale::Linear, Unit::Number),
            Axis::new("y", Scale::Linear, Unit::Fraction),
        )
        .layer(Layer::Points(vec![
            pts(1.0, 0.1, "a"),
            pts(1.0, 0.1, "b"), // same place: one marker says both
            pts(2.0, 0.2, "ref"),
        ]));
        for i in 0..12 {
            c = c.legend(
                format!("a rather long legend entry {i}"),
                Color::C(0),
                Swatch::Line(Dash::Solid),
            );
        }
        let s = c.render("p4");
        assert_eq!(s.matches("<circle").count(), 2);
        assert!(
            s.contains(r#"fill="none""#),
            "the reference is an open ring"
        );
        // every point keeps its name as hover text; coinciding ones share
        // one marker, labelled with both names
        assert!(s.contains("<title>a\nb</title>"));
        assert!(s.contains("<title>ref</title>"));
        assert!(s.contains(">a = b</text>"));
        assert!(s.contains(r#"data-series="a&#10;b""#));
        // 12 entries of ~230 px cannot share one 560 px row: several rows
        let legend = s.split(r#"<g class="legend">"#).nth(1).unwrap();
        let ys: std::collections::BTreeSet<String> = legend
            .split("y1=\"")
            .skip(1)
            .map(|t| t.split('"').next().unwrap().to_string())
            .collect();
        assert!(ys.len() >= 3, "{ys:?}");
    }

    #[test]
    fn markers_that_cover_each_other_share_one_label_or_a_key() {
        let pt = |x: f64, label: &str| Point {
            x,
            y: 0.5,
            label: label.into(),
            color: Color::C(0),
            hollow: false,
            marker: Marker::Circle,
            title: None,
            series: String::new(),
        };
        let chart = |points| {
            Chart::new(
                "crowd",
                Axis::new("x", Scale::Linear, Unit::Number).range(0.0, 10.0),
                Axis::new("y", Scale::Linear, Unit::Fraction).range(0.0, 1.0),
            )
            .layer(Layer::Points(points))
        };
        // 0.1 x units is about 5 px on this axis: two markers, one label
        let s = chart(vec![pt(5.0, "p"), pt(5.1, "q"), pt(9.0, "far")]).render("c1");
        assert_eq!(s.matches("<circle").count(), 3);
        assert!(s.contains(">p, q</text>"), "{s}");
        assert!(s.contains(">far</text>"), "{s}");
        assert!(!s.contains(r#"class="key"#), "{s}");
        // a crowd (markers 2.4 px apart) whose names take more lines than
        // the plot is high: a tag beside it and
        // its names in a key below the chart, which grows to hold it
        let names: Vec<String> = (0..60).map(|i| format!("policy-{i:02}")).collect();
        let crowd = names
            .iter()
            .enumerate()
            .map(|(i, n)| pt(5.0 + 0.05 * i as f64, n))
            .collect();
        let s = chart(crowd).render("c2");
        assert!(s.contains(">[1]</text>"), "{s}");
        assert!(s.contains(r#"<text class="key tick""#), "{s}");
        assert!(!s.contains(r#"viewBox="0 0 560 320""#), "{s}");
    }

    #[test]
    fn coinciding_lines_are_drawn_once_under_every_name() {
        let line = |label: &str, dy: f64, i: usize| {
            let (color, dash, marker) = series_style(i);
            Layer::Line {
                points: (0..50)
                    .map(|k| (k as f64, (k as f64 / 7.0).sin() + dy))
                    .collect(),
                color,
                dash,
                width: 2.0,
                marker,
                label: label.into(),
            }
        };
        let mut c = Chart::new(
            "lines",
            Axis::new("x", Scale::Linear, Unit::Number),
            Axis::new("y", Scale::Linear, Unit::Number).range(-2.0, 2.0),
        );
        // b is a above by a 1e-4 of the 4-unit range (0.03 px of ~240),
        // c by 0.5 (30 px): a and b coincide on screen, c does not
        for (i, (label, dy)) in [("a", 0.0), ("b", 1e-4), ("c", 0.5)]
            .into_iter()
            .enumerate()
        {
            let (color, dash, marker) = series_style(i);
            c = c
                .layer(line(label, dy, i))
                .legend(label, color, Swatch::Marked(dash, marker));
        }
        let s = c.render("p5");
        assert_eq!(s.matches("<g class=\"series\"").count(), 2, "{s}");
        assert!(s.contains("<title>a = b</title>"));
        assert!(s.contains("<g class=\"end-label\"><title>a = b</title>"));
        assert!(s.contains("<g class=\"end-label\"><title>c</title>"));
        // one legend entry for the pair, one for c
        let legend = s.split(r#"<g class="legend">"#).nth(1).unwrap();
        assert_eq!(legend.matches("<text").count(), 2, "{legend}");
        assert!(legend.contains(">a = b</tspan>"));
        // dodged apart: the two drawn lines start a quarter unit either side of 0
        let c = c.dodge(0.5);
        let s = c.render("p6");
        let starts: Vec<f64> = s
            .split("<path class=\"line ")
            .skip(1)
            .map(|p| {
                let d = p.split(" d=\"M").nth(1).unwrap();
                d.split(' ').next().unwrap().parse().unwrap()
            })
            .collect();
        assert_eq!(starts.len(), 2);
        assert!(starts[1] > starts[0] + 1.0, "{starts:?}");
    }

    #[test]
    fn empty_chart_says_no_data() {
        let c = Chart::new(
            "empty",
            Axis::new("x", Scale::Log, Unit::Seconds),
            Axis::new("y", Scale::Log, Unit::Seconds),
        );
        assert!(c.render("p3").contains("no data"));
    }
}
