//! Small multiples: one panel per policy, stacked over one shared time axis with one shared
//! vertical scale. Series over time (utilization, jobs waiting: hundreds of noisy bins per
//! policy) drawn over each other in one plot were an unreadable tangle; side by side, each
//! reads on its own and the shared scales keep them comparable.

use crate::chart::{
    Axis, BELOW, COLORS, DASHES, LEFT, Laid, Line, RIGHT, Rect, TOP, axis_titles, data_range,
    drawable, escape, footer, header, lay_out, legend_text, path_d, plot_box, tint, x_grid, y_grid,
};
use std::fmt::Write as _;

/// One panel: one policy's series, all in the panel's colour.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Panel {
    /// Its name (the policy), shown beside it in its colour.
    pub label: String,
    /// Its series: the first a solid line over a light area, the others dashed over it.
    pub lines: Vec<Line>,
    /// Events drawn as ticks rising from the panel's bottom edge (a quota tree's reclaims).
    pub marks: Option<Marks>,
}

/// Moments marked in a panel.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Marks {
    /// What they are, in the legend.
    pub label: String,
    /// Where, on the horizontal axis.
    pub at: Vec<f64>,
}

/// How tall a mark's tick is.
const MARK_TICK: f64 = 9.0;

/// Panels stacked under one another, one colour each by order (the policy's colour in the
/// report's other figures).
#[derive(Clone, Debug, PartialEq)]
pub struct SmallMultiples {
    /// Title.
    pub title: String,
    /// Small print under the plot: scenario, seed, smoothing, Arbiter version.
    pub caption: String,
    /// The shared horizontal axis (labelled under the last panel).
    pub x: Axis,
    /// The vertical axis, the same in every panel.
    pub y: Axis,
    /// Panels, top to bottom.
    pub panels: Vec<Panel>,
}

/// All panels' height together while each stays at least [`MIN_PANEL`] tall: one panel is as
/// tall as a single chart's plot.
const PANELS_HEIGHT: f64 = 342.0;
/// The smallest panel: room for its name and three legend rows.
const MIN_PANEL: f64 = 96.0;
/// Between panels: room for one panel's bottom tick label above the next one's top label.
const GAP: f64 = 20.0;
/// How much white the area under a panel's first series mixes in.
const AREA_TINT: f64 = 0.75;

impl SmallMultiples {
    /// Whether any panel has a point to draw.
    pub fn has_data(&self) -> bool {
        self.panels
            .iter()
            .any(|p| p.lines.iter().any(|l| !l.points.is_empty()))
    }

    /// The height of each panel.
    fn panel_height(&self) -> f64 {
        let n = self.panels.len().max(1) as f64;
        ((PANELS_HEIGHT - GAP * (n - 1.0)) / n).max(MIN_PANEL)
    }

    /// The chart as a standalone SVG document.
    pub fn to_svg(&self) -> String {
        let points = self
            .panels
            .iter()
            .flat_map(|p| p.lines.iter())
            .map(|l| l.points.len())
            .sum::<usize>();
        let mut out = String::with_capacity(4096 + points * 28);
        let (n, panel) = (self.panels.len().max(1), self.panel_height());
        let height = TOP + n as f64 * (panel + GAP) - GAP + BELOW;
        header(&mut out, &self.title, height);
        let all = || {
            self.panels
                .iter()
                .flat_map(|p| p.lines.iter().flat_map(|l| l.points.iter().copied()))
        };
        let x = lay_out(
            &self.x,
            data_range(all().map(|p| p.0), &self.x),
            LEFT,
            RIGHT,
            5.0,
        );
        let y_range = data_range(all().map(|p| p.1), &self.y);
        // Small panels keep to a few y ticks (0, 50%, 100%) so that their labels do not touch.
        let y_ticks = if panel >= 200.0 { 5.0 } else { 2.0 };
        let mut last = Rect {
            left: LEFT,
            top: TOP,
            right: RIGHT,
            bottom: TOP + panel,
        };
        for (i, p) in self.panels.iter().enumerate() {
            let top = TOP + i as f64 * (panel + GAP);
            last = Rect {
                left: LEFT,
                top,
                right: RIGHT,
                bottom: top + panel,
            };
            let y = lay_out(&self.y, y_range, last.bottom, last.top, y_ticks);
            y_grid(&mut out, last, &y);
            x_grid(&mut out, last, &x, i + 1 == self.panels.len());
            self.panel(&mut out, i, p, last, (&x, &y));
            plot_box(&mut out, last);
        }
        let y_title = lay_out(&self.y, y_range, 0.0, 1.0, y_ticks).title;
        axis_titles(
            &mut out,
            last,
            &x.title,
            &y_title,
            (TOP + last.bottom) / 2.0,
        );
        footer(&mut out, &self.caption, height);
        out
    }

    /// Panel `i`'s series, then its legend beside it: its name, its series' styles.
    fn panel(&self, out: &mut String, i: usize, panel: &Panel, r: Rect, (x, y): (&Laid, &Laid)) {
        let color = COLORS[i % COLORS.len()];
        for (k, line) in panel.lines.iter().enumerate() {
            let points: Vec<(f64, f64)> = line
                .points
                .iter()
                .filter(|&&(a, b)| drawable(a, b, self.x.scale, self.y.scale))
                .map(|&(a, b)| (x.map.at(a), y.map.at(b)))
                .collect();
            let (Some(first), Some(end)) = (points.first(), points.last()) else {
                continue;
            };
            let d = path_d(points.iter().copied());
            if k == 0 {
                let _ = write!(
                    out,
                    r#"<path d="{d}L{:.1} {:.1}L{:.1} {:.1}Z" fill="{}" stroke="none"/>"#,
                    end.0,
                    r.bottom,
                    first.0,
                    r.bottom,
                    tint(color, AREA_TINT)
                );
            }
            let _ = write!(
                out,
                r#"<path d="{d}" fill="none" stroke="{color}" stroke-width="1.5" stroke-dasharray="{}"><title>{}: {}</title></path>"#,
                DASHES[k % DASHES.len()],
                escape(&panel.label),
                escape(&line.label)
            );
        }
        let left = RIGHT + 14.0;
        let name: String = panel.label.chars().take(24).collect();
        let _ = write!(
            out,
            r#"<text x="{left}" y="{:.1}" font-weight="bold" fill="{color}">{}</text>"#,
            r.top + 14.0,
            escape(&name)
        );
        for (k, line) in panel
            .lines
            .iter()
            .enumerate()
            .filter(|(_, l)| !l.points.is_empty())
        {
            let at = r.top + 32.0 + k as f64 * 18.0;
            if at > r.bottom {
                break;
            }
            let _ = write!(
                out,
                r#"<line x1="{left}" y1="{at}" x2="{}" y2="{at}" stroke="{color}" stroke-width="2" stroke-dasharray="{}"/>"#,
                left + 26.0,
                DASHES[k % DASHES.len()]
            );
            legend_text(out, left, at, &line.label);
        }
        if let Some(marks) = &panel.marks {
            self.marks(out, marks, color, r, x);
            let at = r.top + 32.0 + panel.lines.len() as f64 * 18.0;
            if at <= r.bottom {
                let _ = write!(
                    out,
                    r#"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{color}" stroke-width="1.5"/>"#,
                    left + 13.0,
                    at + MARK_TICK / 2.0,
                    left + 13.0,
                    at - MARK_TICK / 2.0,
                );
                legend_text(out, left, at, &marks.label);
            }
        }
    }

    /// A panel's marks: one tick per distinct tenth of a pixel, as one path.
    fn marks(&self, out: &mut String, marks: &Marks, color: &str, r: Rect, x: &Laid) {
        let mut at: Vec<f64> = marks
            .at
            .iter()
            .filter(|&&a| drawable(a, 1.0, self.x.scale, crate::chart::Scale::Linear))
            .map(|&a| (x.map.at(a) * 10.0).round() / 10.0)
            .filter(|px| (r.left..=r.right).contains(px))
            .collect();
        at.sort_by(f64::total_cmp);
        at.dedup();
        if at.is_empty() {
            return;
        }
        let mut d = String::with_capacity(at.len() * 16);
        for px in at {
            let _ = write!(d, "M{px:.1} {:.1}v-{MARK_TICK}", r.bottom);
        }
        let _ = write!(
            out,
            r#"<path d="{d}" fill="none" stroke="{color}" stroke-width="1.5"><title>{}</title></path>"#,
            escape(&marks.label)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chart::Format;

    fn chart(panels: usize) -> SmallMultiples {
        let series = |level: f64| (0..=10).map(|t| (f64::from(t) * 3_600.0, level)).collect();
        SmallMultiples {
            title: "utilization".into(),
            caption: "bins".into(),
            x: Axis::linear("time", Format::Seconds),
            y: Axis::linear("GPUs in use", Format::Percent),
            panels: (0..panels)
                .map(|i| Panel {
                    label: format!("policy{i}"),
                    lines: vec![
                        Line {
                            label: "in use".into(),
                            points: series(0.5 + 0.1 * i as f64),
                        },
                        Line {
                            label: "shared".into(),
                            points: series(0.2),
                        },
                    ],
                    marks: None,
                })
                .collect(),
        }
    }

    #[test]
    fn one_panel_per_policy_over_shared_axes() {
        let svg = chart(3).to_svg();
        // A frame per panel, each in its own colour, both series of each in that colour.
        assert_eq!(svg.matches(r##"fill="none" stroke="#444""##).count(), 3);
        for (i, color) in COLORS.iter().enumerate().take(3) {
            assert_eq!(
                svg.matches(&format!(r#"fill="none" stroke="{color}""#))
                    .count(),
                2,
                "panel {i}"
            );
            assert!(svg.contains(&format!(r#"fill="{color}">policy{i}</text>"#)));
        }
        // The time axis is labelled once, under the last panel, in one unit.
        assert_eq!(svg.matches(">time (hours)<").count(), 1);
        assert_eq!(svg.matches(r#"text-anchor="middle">10</text>"#).count(), 1);
        // The same vertical scale in every panel: each shows 0 and 100%.
        assert_eq!(svg.matches(">100%<").count(), 3);
    }

    #[test]
    fn many_panels_keep_a_readable_height_and_nothing_is_drawn_for_no_data() {
        let tall = chart(8).to_svg();
        let height: f64 = tall
            .split("height=\"")
            .nth(1)
            .and_then(|h| h.split('"').next())
            .and_then(|h| h.parse().ok())
            .expect("height");
        assert!(height >= TOP + 8.0 * MIN_PANEL + BELOW, "{height}");
        let empty = SmallMultiples {
            panels: vec![Panel {
                label: "x".into(),
                lines: vec![],
                marks: None,
            }],
            ..chart(0)
        };
        assert!(!empty.has_data() && empty.to_svg().ends_with("</svg>"));
        assert!(!chart(0).has_data() && chart(0).to_svg().ends_with("</svg>"));
    }
}
