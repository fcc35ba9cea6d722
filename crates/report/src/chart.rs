//! Line and bar charts written as SVG by hand.
//!
//! Why not plotters (used before): its SVG backend draws one element per data point with
//! full-precision coordinates (a 80,000-job CDF was ~420 KB), puts the legend inside the plot
//! where it covers curves, and has no log-scale duration ticks. These charts take thinned data,
//! keep the legend outside the plot, draw each series with its own colour, dash pattern and
//! marker (so identical series stay visible and the legend says which are identical), carry
//! tooltips (`<title>`) for the HTML page, and stay a few kilobytes each.

use std::fmt::Write as _;

/// How an axis maps values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// Linear.
    Linear,
    /// Base-10 logarithmic (values ≤ 0 are not drawn).
    Log,
}

/// How tick labels read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Plain numbers (`1.5k`, `2M`).
    Number,
    /// Durations given in seconds (`30s`, `10m`, `2h`, `3d`).
    Seconds,
    /// Fractions shown as percentages (`0.4` → `40%`).
    Percent,
}

/// One axis.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// What it shows, with its unit.
    pub label: String,
    /// Mapping.
    pub scale: Scale,
    /// Tick labels.
    pub format: Format,
    /// Fixed bounds (`None`: from the data; linear axes start at 0 unless the data goes below).
    pub bounds: Option<(f64, f64)>,
}

impl Axis {
    /// A linear axis from the data.
    pub fn linear(label: &str, format: Format) -> Self {
        Axis { label: label.to_string(), scale: Scale::Linear, format, bounds: None }
    }

    /// A logarithmic axis from the data.
    pub fn log(label: &str, format: Format) -> Self {
        Axis { label: label.to_string(), scale: Scale::Log, format, bounds: None }
    }

    /// The 0–1 axis of a CDF, in percent.
    pub fn fraction(label: &str) -> Self {
        Axis { label: label.to_string(), scale: Scale::Linear, format: Format::Percent, bounds: Some((0.0, 1.0)) }
    }
}

/// One series of a line chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    /// Legend label.
    pub label: String,
    /// Points in x order.
    pub points: Vec<(f64, f64)>,
}

/// A line chart.
#[derive(Clone, Debug, PartialEq)]
pub struct LineChart {
    /// Title.
    pub title: String,
    /// Small print under the plot: scenario, seed, Arbiter version.
    pub caption: String,
    /// Horizontal axis.
    pub x: Axis,
    /// Vertical axis.
    pub y: Axis,
    /// Series.
    pub lines: Vec<Line>,
}

/// One series of a bar chart: one value per category.
#[derive(Clone, Debug, PartialEq)]
pub struct Bars {
    /// Legend label.
    pub label: String,
    /// Values, one per category.
    pub values: Vec<f64>,
}

/// A grouped bar chart.
#[derive(Clone, Debug, PartialEq)]
pub struct BarChart {
    /// Title.
    pub title: String,
    /// Small print under the plot.
    pub caption: String,
    /// Category names, left to right.
    pub categories: Vec<String>,
    /// Vertical axis (linear; starts at 0).
    pub y: Axis,
    /// Series, drawn side by side in each category.
    pub series: Vec<Bars>,
}

/// Okabe–Ito colours (distinguishable with the common colour-vision deficiencies), then grays.
pub const COLORS: [&str; 10] =
    ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000", "#999999", "#7F3C8D"];
const DASHES: [&str; 4] = ["", "7 3", "2 3", "9 3 2 3"];
const WIDTH: f64 = 880.0;
const HEIGHT: f64 = 460.0;
const LEFT: f64 = 78.0;
const TOP: f64 = 44.0;
const RIGHT: f64 = WIDTH - 220.0;
const BOTTOM: f64 = HEIGHT - 74.0;
/// Markers per line: enough to tell lines apart, few enough to stay small.
const MARKERS: usize = 8;

/// Escapes text for SVG/HTML.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// A number with at most `digits` significant decimals and no trailing zeros.
fn short(value: f64) -> String {
    let text = if value.abs() >= 100.0 || value == value.round() {
        format!("{value:.0}")
    } else if value.abs() >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    };
    if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.').to_string() } else { text }
}

/// `value` in the first unit whose threshold it reaches: `(threshold, size, suffix)`, largest
/// first; below them all, as is with `plain`.
fn in_units(value: f64, units: &[(f64, f64, &str)], plain: &str) -> String {
    match units.iter().find(|(threshold, _, _)| value.abs() >= *threshold) {
        Some((_, size, suffix)) => format!("{}{suffix}", short(value / size)),
        None => format!("{}{plain}", short(value)),
    }
}

/// A tick label.
pub fn label(value: f64, format: Format) -> String {
    match format {
        Format::Number => in_units(value, &[(1e6, 1e6, "M"), (1e4, 1e3, "k")], ""),
        Format::Percent => format!("{}%", short(value * 100.0)),
        Format::Seconds => in_units(value, &[(86_400.0, 86_400.0, "d"), (3_600.0, 3_600.0, "h"), (60.0, 60.0, "m")], "s"),
    }
}

/// `1, 2 or 5 × 10^k` nearest above `raw`.
fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let magnitude = 10f64.powf(raw.log10().floor());
    let f = raw / magnitude;
    // (A hair over a step, e.g. 100.00001% / 5, is that step: floating-point noise must not
    // double the axis.)
    let f = f * (1.0 - 1e-6);
    magnitude * if f <= 1.0 { 1.0 } else if f <= 2.0 { 2.0 } else if f <= 5.0 { 5.0 } else { 10.0 }
}

/// Ticks over `[lo, hi]` and the (possibly widened) range they cover.
fn ticks(lo: f64, hi: f64, scale: Scale, format: Format) -> (Vec<f64>, f64, f64) {
    match scale {
        Scale::Log => {
            let candidates: Vec<f64> = if format == Format::Seconds {
                let mut c = vec![0.001, 0.01, 0.1, 1.0, 10.0, 60.0, 600.0, 3_600.0, 21_600.0, 86_400.0, 864_000.0];
                c.extend((0..4).map(|k| 8_640_000.0 * 10f64.powi(k)));
                c
            } else {
                (-6..=12).map(|k| 10f64.powi(k)).collect()
            };
            let lo_t = candidates.iter().copied().rfind(|&t| t <= lo).unwrap_or(lo);
            let hi_t = candidates.iter().copied().find(|&t| t >= hi).unwrap_or(hi);
            let ticks = candidates.into_iter().filter(|&t| t >= lo_t && t <= hi_t).collect();
            (ticks, lo_t, hi_t)
        }
        Scale::Linear => {
            let unit = match format {
                Format::Seconds => [86_400.0, 3_600.0, 60.0, 1.0].into_iter().find(|u| (hi - lo) / u >= 2.0).unwrap_or(1.0),
                _ => 1.0,
            };
            let step = nice_step((hi - lo) / unit / 5.0) * unit;
            let first = (lo / step + 1e-6).floor() * step;
            let last = (hi / step - 1e-6).ceil() * step;
            let n = ((last - first) / step).round() as usize;
            let ticks = (0..=n.min(50)).map(|i| first + i as f64 * step).collect();
            (ticks, first, last)
        }
    }
}

/// Maps data to pixels along one axis.
struct Mapping {
    scale: Scale,
    lo: f64,
    hi: f64,
    from_px: f64,
    to_px: f64,
}

impl Mapping {
    fn at(&self, v: f64) -> f64 {
        let (v, lo, hi) = match self.scale {
            Scale::Linear => (v, self.lo, self.hi),
            Scale::Log => (v.max(f64::MIN_POSITIVE).log10(), self.lo.log10(), self.hi.log10()),
        };
        let t = if hi > lo { (v - lo) / (hi - lo) } else { 0.5 };
        self.from_px + t * (self.to_px - self.from_px)
    }
}

/// The data range along one axis, over the values `scale` can show.
fn data_range(values: impl Iterator<Item = f64>, axis: &Axis) -> (f64, f64) {
    if let Some(bounds) = axis.bounds {
        return bounds;
    }
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite() && (axis.scale == Scale::Linear || *v > 0.0)) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return if axis.scale == Scale::Log { (1.0, 10.0) } else { (0.0, 1.0) };
    }
    if axis.scale == Scale::Linear {
        lo = lo.min(0.0);
    }
    if hi <= lo {
        hi = if axis.scale == Scale::Log { lo * 10.0 } else { lo + 1.0 };
    }
    (lo, hi)
}

fn header(out: &mut String, title: &str) {
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" font-family="DejaVu Sans, Verdana, sans-serif" font-size="12"><rect width="100%" height="100%" fill="white"/><text x="{LEFT}" y="24" font-size="15" font-weight="bold">{}</text>"#,
        escape(title)
    );
}

fn footer(out: &mut String, caption: &str) {
    let _ = write!(out, r##"<text x="{LEFT}" y="{}" font-size="10" fill="#666">{}</text></svg>"##, HEIGHT - 8.0, escape(caption));
}

/// Horizontal grid lines with their tick labels.
fn y_grid(out: &mut String, y: &Axis, ym: &Mapping, ticks: &[f64]) {
    for &t in ticks {
        let py = ym.at(t);
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" y1="{py:.1}" x2="{RIGHT}" y2="{py:.1}" stroke="#e4e4e4"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT - 6.0,
            py + 4.0,
            label(t, y.format)
        );
    }
}

/// The plot's border and the vertical axis' name.
fn plot_box(out: &mut String, y: &Axis) {
    let _ = write!(
        out,
        r##"<rect x="{LEFT}" y="{TOP}" width="{}" height="{}" fill="none" stroke="#444"/><text transform="translate(18 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"##,
        RIGHT - LEFT,
        BOTTOM - TOP,
        (TOP + BOTTOM) / 2.0,
        escape(&y.label)
    );
}

/// Axes, grid and tick labels.
fn frame(out: &mut String, x: &Axis, y: &Axis, xm: &Mapping, ym: &Mapping, x_ticks: &[f64], y_ticks: &[f64]) {
    y_grid(out, y, ym, y_ticks);
    for &t in x_ticks {
        let px = xm.at(t);
        let _ = write!(
            out,
            r##"<line x1="{px:.1}" y1="{TOP}" x2="{px:.1}" y2="{BOTTOM}" stroke="#e4e4e4"/><text x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            BOTTOM + 16.0,
            label(t, x.format)
        );
    }
    let _ = write!(out, r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#, (LEFT + RIGHT) / 2.0, BOTTOM + 36.0, escape(&x.label));
    plot_box(out, y);
}

/// A marker of shape `index` centred at (x, y).
fn marker(out: &mut String, index: usize, x: f64, y: f64, color: &str, tooltip: &str) {
    let tip = format!("<title>{}</title>", escape(tooltip));
    let _ = match index % 4 {
        0 => write!(out, r#"<circle cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{color}">{tip}</circle>"#),
        1 => write!(out, r#"<rect x="{:.1}" y="{:.1}" width="7" height="7" fill="{color}">{tip}</rect>"#, x - 3.5, y - 3.5),
        2 => write!(out, r#"<path d="M{x:.1} {:.1}l4 7h-8z" fill="{color}">{tip}</path>"#, y - 4.5),
        _ => write!(out, r#"<path d="M{x:.1} {:.1}l4 4l-4 4l-4 -4z" fill="{color}">{tip}</path>"#, y - 4.0),
    };
}

/// The legend entry of series `index` (its row too): swatch and label, a line with its marker
/// for line charts, a box for bars.
fn legend_entry(out: &mut String, index: usize, text: &str, line: bool) {
    let (x, y) = (RIGHT + 14.0, TOP + 8.0 + index as f64 * 20.0);
    let color = COLORS[index % COLORS.len()];
    if line {
        let dash = DASHES[index % DASHES.len()];
        let _ = write!(out, r#"<line x1="{x}" y1="{y}" x2="{}" y2="{y}" stroke="{color}" stroke-width="2" stroke-dasharray="{dash}"/>"#, x + 26.0);
        marker(out, index, x + 13.0, y, color, text);
    } else {
        let _ = write!(out, r#"<rect x="{x}" y="{}" width="18" height="10" fill="{color}"/>"#, y - 5.0);
    }
    let shown: String = if text.chars().count() > 28 { text.chars().take(27).chain(['…']).collect() } else { text.to_string() };
    let _ = write!(out, r#"<text x="{}" y="{:.1}">{}<title>{}</title></text>"#, x + 32.0, y + 4.0, escape(&shown), escape(text));
}

impl LineChart {
    /// Legend labels, with `(= other)` where a series draws exactly over an earlier one.
    fn legend_labels(&self) -> Vec<String> {
        self.lines
            .iter()
            .enumerate()
            .map(|(i, line)| match self.lines[..i].iter().find(|other| other.points == line.points && !line.points.is_empty()) {
                Some(same) => format!("{} (= {})", line.label, same.label),
                None => line.label.clone(),
            })
            .collect()
    }

    /// Whether any series has a point to draw.
    pub fn has_data(&self) -> bool {
        self.lines.iter().any(|l| !l.points.is_empty())
    }

    /// The chart as a standalone SVG document.
    pub fn to_svg(&self) -> String {
        let mut out = String::with_capacity(4096 + self.lines.iter().map(|l| l.points.len() * 16).sum::<usize>());
        header(&mut out, &self.title);
        let all = || self.lines.iter().flat_map(|l| l.points.iter());
        let (x_lo, x_hi) = data_range(all().map(|p| p.0), &self.x);
        let (y_lo, y_hi) = data_range(all().map(|p| p.1), &self.y);
        let (x_ticks, x_lo, x_hi) = ticks(x_lo, x_hi, self.x.scale, self.x.format);
        let (y_ticks, y_lo, y_hi) = ticks(y_lo, y_hi, self.y.scale, self.y.format);
        let xm = Mapping { scale: self.x.scale, lo: x_lo, hi: x_hi, from_px: LEFT, to_px: RIGHT };
        let ym = Mapping { scale: self.y.scale, lo: y_lo, hi: y_hi, from_px: BOTTOM, to_px: TOP };
        frame(&mut out, &self.x, &self.y, &xm, &ym, &x_ticks, &y_ticks);
        let labels = self.legend_labels();
        let drawable = |p: &&(f64, f64)| {
            p.0.is_finite() && p.1.is_finite() && (self.x.scale == Scale::Linear || p.0 > 0.0) && (self.y.scale == Scale::Linear || p.1 > 0.0)
        };
        for (i, line) in self.lines.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let points: Vec<(f64, f64)> = line.points.iter().filter(drawable).map(|&(x, y)| (xm.at(x), ym.at(y))).collect();
            if points.is_empty() {
                continue;
            }
            let mut d = String::with_capacity(points.len() * 14);
            for (k, (px, py)) in points.iter().enumerate() {
                let _ = write!(d, "{}{px:.1} {py:.1}", if k == 0 { "M" } else { "L" });
            }
            let _ = write!(
                out,
                r#"<path d="{d}" fill="none" stroke="{color}" stroke-width="2" stroke-dasharray="{}"><title>{}</title></path>"#,
                DASHES[i % DASHES.len()],
                escape(&labels[i])
            );
            // Markers staggered per series, so that series drawn over each other stay visible.
            let data: Vec<&(f64, f64)> = line.points.iter().filter(drawable).collect();
            let n = points.len();
            for m in 0..MARKERS.min(n) {
                let k = ((m as f64 + (i as f64 * 0.37) % 1.0) * n as f64 / MARKERS.min(n) as f64) as usize;
                let k = k.min(n - 1);
                let tip = format!("{}: {}, {}", labels[i], label(data[k].0, self.x.format), label(data[k].1, self.y.format));
                marker(&mut out, i, points[k].0, points[k].1, color, &tip);
            }
        }
        for (i, text) in labels.iter().enumerate() {
            legend_entry(&mut out, i, text, true);
        }
        footer(&mut out, &self.caption);
        out
    }
}

impl BarChart {
    /// Whether any bar has a value.
    pub fn has_data(&self) -> bool {
        !self.categories.is_empty() && self.series.iter().any(|s| !s.values.is_empty())
    }

    /// The chart as a standalone SVG document.
    pub fn to_svg(&self) -> String {
        let mut out = String::with_capacity(8192);
        header(&mut out, &self.title);
        let (y_lo, y_hi) = data_range(self.series.iter().flat_map(|s| s.values.iter().copied()), &self.y);
        let (y_ticks, y_lo, y_hi) = ticks(y_lo, y_hi, Scale::Linear, self.y.format);
        let ym = Mapping { scale: Scale::Linear, lo: y_lo, hi: y_hi, from_px: BOTTOM, to_px: TOP };
        y_grid(&mut out, &self.y, &ym, &y_ticks);
        let groups = self.categories.len().max(1) as f64;
        let group_px = (RIGHT - LEFT) / groups;
        let bar_px = group_px * 0.8 / self.series.len().max(1) as f64;
        // Category labels thin out when they would overlap.
        let every = ((self.categories.len() as f64 * 42.0 / (RIGHT - LEFT)).ceil() as usize).max(1);
        for (c, name) in self.categories.iter().enumerate() {
            let gx = LEFT + c as f64 * group_px + group_px * 0.1;
            for (s, series) in self.series.iter().enumerate() {
                let Some(&v) = series.values.get(c).filter(|v| v.is_finite()) else { continue };
                let (top, base) = (ym.at(v.max(y_lo)), ym.at(0f64.max(y_lo)));
                let _ = write!(
                    out,
                    r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{}: {}, {}</title></rect>"#,
                    gx + s as f64 * bar_px,
                    top.min(base),
                    (bar_px - 1.0).max(0.5),
                    (base - top).abs(),
                    COLORS[s % COLORS.len()],
                    escape(&series.label),
                    escape(name),
                    label(v, self.y.format)
                );
            }
            if c % every == 0 {
                let shown: String = name.chars().take(12).collect();
                let _ = write!(
                    out,
                    r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                    LEFT + (c as f64 + 0.5) * group_px,
                    BOTTOM + 16.0,
                    escape(&shown)
                );
            }
        }
        plot_box(&mut out, &self.y);
        for (i, s) in self.series.iter().enumerate() {
            legend_entry(&mut out, i, &s.label, false);
        }
        footer(&mut out, &self.caption);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_labels_read_as_durations_and_percentages() {
        assert_eq!(label(30.0, Format::Seconds), "30s");
        assert_eq!(label(600.0, Format::Seconds), "10m");
        assert_eq!(label(5_400.0, Format::Seconds), "1.5h");
        assert_eq!(label(864_000.0, Format::Seconds), "10d");
        assert_eq!(label(0.25, Format::Percent), "25%");
        assert_eq!(label(15_000.0, Format::Number), "15k");
        assert_eq!(label(2.5e6, Format::Number), "2.5M");
        assert_eq!(label(0.126, Format::Number), "0.13");
    }

    #[test]
    fn log_duration_ticks_fall_on_human_units() {
        let (t, lo, hi) = ticks(45.0, 20_000.0, Scale::Log, Format::Seconds);
        assert_eq!(t, vec![10.0, 60.0, 600.0, 3_600.0, 21_600.0]);
        assert_eq!((lo, hi), (10.0, 21_600.0));
        let (t, lo, hi) = ticks(0.0, 0.93, Scale::Linear, Format::Number);
        assert_eq!((t.len(), lo, hi), (6, 0.0, 1.0));
        let (_, _, hi) = ticks(0.0, 1.000_000_1, Scale::Linear, Format::Percent);
        assert_eq!(hi, 1.0);
    }

    #[test]
    fn identical_series_are_named_in_the_legend_and_text_is_escaped() {
        let chart = LineChart {
            title: "a <b> & c".into(),
            caption: "scenario x".into(),
            x: Axis::log("JCT", Format::Seconds),
            y: Axis::fraction("jobs"),
            lines: vec![
                Line { label: "fifo".into(), points: vec![(10.0, 0.5), (100.0, 1.0)] },
                Line { label: "srtf".into(), points: vec![(10.0, 0.5), (100.0, 1.0)] },
                Line { label: "las".into(), points: vec![(0.0, 0.1), (20.0, 1.0)] },
            ],
        };
        let svg = chart.to_svg();
        assert!(svg.contains("srtf (= fifo)") && !svg.contains("las (="));
        assert!(svg.contains("a &lt;b&gt; &amp; c") && !svg.contains("<b>"));
        // Three series drawn, the log axis dropping the zero of the third.
        let curves = svg.split("<path").skip(1).filter(|p| p.split('>').next().is_some_and(|tag| tag.contains("fill=\"none\""))).count();
        assert_eq!(curves, 3);
        assert!(svg.len() < 20_000, "{} bytes", svg.len());
    }

    #[test]
    fn bars_have_one_rect_per_value() {
        let chart = BarChart {
            title: "t".into(),
            caption: String::new(),
            categories: vec!["a".into(), "b".into()],
            y: Axis::linear("share", Format::Percent),
            series: vec![Bars { label: "x".into(), values: vec![0.2, 0.8] }, Bars { label: "y".into(), values: vec![0.5, 0.5] }],
        };
        let svg = chart.to_svg();
        assert_eq!(svg.matches("<rect x=").count(), 4 + 2 + 1, "bars, legend swatches, frame");
    }
}
