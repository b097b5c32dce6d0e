//! Series that would be drawn on top of each other (docs/reports.md: no
//! overlapping series without a visual distinction). Lines whose drawn
//! points lie within a pixel of each other show only the top one whatever
//! their dash or marker, so such a group is drawn once, under one label
//! that names every member ("fixed-wait = deadline = oracle"), with one
//! legend entry. Markers of a scatter at the same pixel become one marker
//! whose hover text lists every point; markers near enough to cover each
//! other (a crowd) share one label naming every series among them
//! (docs/reports.md).

use super::layers::Map;
use super::{Chart, Layer, Legend, Marker, Swatch};

/// A line drawn in pixels: its pieces (broken where a point cannot be shown).
pub(super) type Pieces = Vec<Vec<(f64, f64)>>;

/// Two marks closer than this (pixels) cannot be told apart on screen.
pub(super) const TOL_PX: f64 = 1.0;

/// Joins the names of coinciding series in one label.
pub(super) const JOIN: &str = " = ";

/// A line's drawn pieces in pixels: points with a coordinate the axes
/// cannot show (non-finite, non-positive on a log axis) break the line.
pub(super) fn pieces(points: &[(f64, f64)], xm: &Map, ym: &Map) -> Pieces {
    let mut out: Pieces = Vec::new();
    let mut pen_down = false;
    for &(x, y) in points {
        match (xm.px(x), ym.px(y)) {
            (Some(px), Some(py)) => {
                if !pen_down {
                    out.push(Vec::new());
                }
                out.last_mut().expect("pushed").push((px, py));
                pen_down = true;
            }
            _ => pen_down = false,
        }
    }
    out
}

/// Distance from `p` to the segment `a`–`b`.
fn segment_distance(p: (f64, f64), a: (f64, f64), b: (f64, f64)) -> f64 {
    let (dx, dy) = (b.0 - a.0, b.1 - a.1);
    let len2 = dx * dx + dy * dy;
    let t = if len2 > 0.0 {
        (((p.0 - a.0) * dx + (p.1 - a.1) * dy) / len2).clamp(0.0, 1.0)
    } else {
        0.0
    };
    (p.0 - (a.0 + t * dx)).hypot(p.1 - (a.1 + t * dy))
}

/// Every vertex of `a` lies within `tol` of the polyline `b`.
fn covered(a: &[Vec<(f64, f64)>], b: &[Vec<(f64, f64)>], tol: f64) -> bool {
    a.iter().flatten().all(|&p| {
        b.iter().any(|piece| match piece.as_slice() {
            [q] => (p.0 - q.0).hypot(p.1 - q.1) <= tol,
            _ => piece
                .windows(2)
                .any(|w| segment_distance(p, w[0], w[1]) <= tol),
        })
    })
}

/// Two drawn lines coincide: each runs within `tol` of the other along its
/// whole length (every vertex of either is that close to the other line),
/// so neither can be seen apart from the other.
pub(super) fn lines_coincide(a: &[Vec<(f64, f64)>], b: &[Vec<(f64, f64)>], tol: f64) -> bool {
    !a.is_empty() && !b.is_empty() && covered(a, b, tol) && covered(b, a, tol)
}

/// Groups of indices whose pixel positions lie within [`TOL_PX`] of the
/// group's first member (`None`: not drawn, a group of its own).
pub(super) fn point_groups(px: &[Option<(f64, f64)>]) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, p) in px.iter().enumerate() {
        let joined = p.and_then(|p| {
            groups
                .iter_mut()
                .find(|g| px[g[0]].is_some_and(|q| (p.0 - q.0).hypot(p.1 - q.1) <= TOL_PX))
        });
        match joined {
            Some(g) => g.push(i),
            None => groups.push(vec![i]),
        }
    }
    groups
}

/// Centres closer than this (pixels) put two scatter markers in one crowd:
/// more than the largest marker's half-width (a plus, 4.95 px) plus the
/// 1.35 px between a triangle's centre and its bounding box's, so any two
/// markers of which one covers the other's centre are in one.
pub(super) const CROWD_PX: f64 = 8.0;

/// Groups of `centres` (pixels) joined, transitively, when two lie within
/// [`CROWD_PX`] of each other; each group in the order of its members.
pub(super) fn crowds(centres: &[(f64, f64)]) -> Vec<Vec<usize>> {
    let n = centres.len();
    let mut up: Vec<usize> = (0..n).collect();
    fn root(up: &mut [usize], mut i: usize) -> usize {
        while up[i] != i {
            up[i] = up[up[i]];
            i = up[i];
        }
        i
    }
    for a in 0..n {
        for b in a + 1..n {
            let (p, q) = (centres[a], centres[b]);
            if (p.0 - q.0).hypot(p.1 - q.1) <= CROWD_PX {
                let (ra, rb) = (root(&mut up, a), root(&mut up, b));
                up[ra.max(rb)] = ra.min(rb);
            }
        }
    }
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut slot: Vec<Option<usize>> = vec![None; n];
    for i in 0..n {
        let r = root(&mut up, i);
        match slot[r] {
            Some(g) => groups[g].push(i),
            None => {
                slot[r] = Some(groups.len());
                groups.push(vec![i]);
            }
        }
    }
    groups
}

/// Distinct non-empty texts joined with [`JOIN`], in order.
pub(super) fn join_names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for n in names.filter(|n| !n.is_empty()) {
        if !seen.contains(&n) {
            seen.push(n);
        }
    }
    seen.join(JOIN)
}

/// `chart` with its coinciding labelled lines (at the pixel mapping `xm`,
/// `ym`) merged: the first of each group stays, labelled with every
/// member's name, the others go, and their legend entries become one.
/// `None` when no two lines coincide.
pub(super) fn merge_lines(chart: &Chart, xm: &Map, ym: &Map) -> Option<Chart> {
    let lines: Vec<(usize, Pieces)> = chart
        .layers
        .iter()
        .enumerate()
        .filter_map(|(i, l)| match l {
            Layer::Line { points, label, .. } if !label.is_empty() => {
                Some((i, pieces(points, xm, ym)))
            }
            _ => None,
        })
        .collect();
    // each line joins the first group whose first line it coincides with
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (k, (_, px)) in lines.iter().enumerate() {
        match groups
            .iter_mut()
            .find(|g| lines_coincide(&lines[g[0]].1, px, TOL_PX))
        {
            Some(g) => g.push(k),
            None => groups.push(vec![k]),
        }
    }
    if groups.iter().all(|g| g.len() == 1) {
        return None;
    }
    let label_of = |layer: usize| match &chart.layers[layer] {
        Layer::Line { label, .. } => label.as_str(),
        _ => "",
    };
    let mut out = chart.clone();
    let mut drop_layers: Vec<usize> = Vec::new();
    let mut drop_legend: Vec<usize> = Vec::new();
    for g in groups.iter().filter(|g| g.len() > 1) {
        let members: Vec<usize> = g.iter().map(|&k| lines[k].0).collect();
        let names: Vec<&str> = members.iter().map(|&m| label_of(m)).collect();
        let joined = join_names(names.iter().copied());
        let lead = members[0];
        let Layer::Line {
            color,
            dash,
            marker,
            label,
            ..
        } = &mut out.layers[lead]
        else {
            unreachable!("lines are Line layers")
        };
        *label = joined.clone();
        let (color, dash, marker) = (*color, *dash, *marker);
        drop_layers.extend(&members[1..]);
        // the leader's own legend entry, renamed; else the first member's,
        // restyled as the leader's line (which is what is drawn)
        let entries: Vec<usize> = names
            .iter()
            .filter_map(|n| chart.legend.iter().position(|l| l.label == *n))
            .collect();
        let own = chart.legend.iter().position(|l| l.label == names[0]);
        if let Some(&keep) = own.as_ref().or(entries.first()) {
            let e: &mut Legend = &mut out.legend[keep];
            e.label = joined;
            if own.is_none() {
                e.color = color;
                e.swatch = match marker {
                    Marker::None => Swatch::Line(dash),
                    m => Swatch::Marked(dash, m),
                };
            }
            drop_legend.extend(entries.into_iter().filter(|&e| e != keep));
        }
    }
    let keep_index = |drop: &[usize], n: usize| (0..n).map(|i| !drop.contains(&i)).collect();
    let keep: Vec<bool> = keep_index(&drop_layers, out.layers.len());
    let mut it = keep.iter();
    out.layers.retain(|_| *it.next().expect("one flag a layer"));
    let keep: Vec<bool> = keep_index(&drop_legend, out.legend.len());
    let mut it = keep.iter();
    out.legend
        .retain(|_| *it.next().expect("one flag an entry"));
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_within_a_pixel_coincides_and_a_shorter_one_does_not() {
        let a = vec![vec![(0.0, 0.0), (100.0, 0.0), (200.0, 50.0)]];
        // the same path, other vertices, half a pixel off
        let b = vec![vec![
            (0.0, 0.5),
            (50.0, 0.4),
            (100.0, 0.6),
            (150.0, 25.3),
            (200.0, 50.0),
        ]];
        assert!(lines_coincide(&a, &b, TOL_PX));
        // covers only the first half of `a`: visible beyond it
        let c = vec![vec![(0.0, 0.0), (100.0, 0.0)]];
        assert!(!lines_coincide(&a, &c, TOL_PX));
        // 1.5 px apart all along
        let d = vec![vec![(0.0, 1.5), (100.0, 1.5), (200.0, 51.5)]];
        assert!(!lines_coincide(&a, &d, TOL_PX));
    }

    #[test]
    fn points_at_one_pixel_group() {
        let g = point_groups(&[
            Some((10.0, 10.0)),
            None,
            Some((10.6, 10.6)),
            Some((12.0, 10.0)),
        ]);
        assert_eq!(g, vec![vec![0, 2], vec![1], vec![3]]);
        assert_eq!(join_names(["a", "", "b", "a"].into_iter()), "a = b");
    }

    #[test]
    fn crowds_join_transitively_within_eight_pixels() {
        // 0–1 are 7 px apart, 1–2 are 8 px: one crowd through 1; 3 is
        // 8.1 px from 2 and alone; 4 is far from all
        let g = crowds(&[
            (0.0, 0.0),
            (7.0, 0.0),
            (7.0, 8.0),
            (7.0, 16.1),
            (100.0, 100.0),
        ]);
        assert_eq!(g, vec![vec![0, 1, 2], vec![3], vec![4]]);
    }
}
