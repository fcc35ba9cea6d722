//! Line and bar charts written as SVG by hand.
//!
//! Why not plotters (used before): its SVG backend draws one element per data point with
//! full-precision coordinates (a 80,000-job CDF was ~420 KB), puts the legend inside the plot
//! where it covers curves, and has no log-scale duration ticks. These charts take thinned data,
//! keep the legend outside the plot, draw each series with its own colour (a colour-blind-safe
//! palette, by order), dash pattern and marker (so identical series stay visible and the legend
//! says which are identical), read every linear axis in one unit (never `10h, 20h, 1.25d`),
//! carry tooltips (`<title>`) for the HTML page, and stay a few kilobytes each.

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
    /// Durations given in seconds: one unit per linear axis (seconds, minutes, hours or days,
    /// named in the axis label); on a log axis each tick in its own whole unit (`10s`, `1min`,
    /// `6h`, `10d`), as no one unit reads across decades.
    Seconds,
    /// Fractions shown as percentages (`0.4` → `40%`).
    Percent,
}

/// One axis.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// What it shows (a linear duration axis gets its unit appended).
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
        Axis {
            label: label.to_string(),
            scale: Scale::Linear,
            format,
            bounds: None,
        }
    }

    /// A logarithmic axis from the data.
    pub fn log(label: &str, format: Format) -> Self {
        Axis {
            label: label.to_string(),
            scale: Scale::Log,
            format,
            bounds: None,
        }
    }

    /// The 0–1 axis of a CDF, in percent.
    pub fn fraction(label: &str) -> Self {
        Axis {
            label: label.to_string(),
            scale: Scale::Linear,
            format: Format::Percent,
            bounds: Some((0.0, 1.0)),
        }
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

/// A band behind one line of a [`LineChart`]: the spread (e.g. min–max over seeds) around the
/// line's mean, in the line's colour, translucent.
#[derive(Clone, Debug, PartialEq)]
pub struct Band {
    /// The line's index in [`LineChart::lines`].
    pub line: usize,
    /// `(x, low, high)` in x order.
    pub points: Vec<(f64, f64, f64)>,
}

/// How a bar is filled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fill {
    /// The full colour.
    #[default]
    Solid,
    /// A light tint of the colour, outlined in it: the second of a pair (a policy's fair share
    /// beside what it got) keeps the pair's hue and still reads as the other member.
    Light,
}

/// One series of a bar chart: one value per category.
#[derive(Clone, Debug, PartialEq)]
pub struct Bars {
    /// Legend label.
    pub label: String,
    /// Values, one per category.
    pub values: Vec<f64>,
    /// Index into [`COLORS`]; `None`: the series' position (colours by order).
    pub hue: Option<usize>,
    /// Solid or light.
    pub fill: Fill,
}

impl Bars {
    /// A solid series coloured by its position.
    pub fn new(label: impl Into<String>, values: Vec<f64>) -> Self {
        Bars {
            label: label.into(),
            values,
            hue: None,
            fill: Fill::Solid,
        }
    }
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

/// Okabe–Ito colours (told apart with the common colour-vision deficiencies), assigned by
/// order; yellow, faint on white, comes last but for a gray.
pub const COLORS: [&str; 9] = [
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442",
    "#999999",
];
pub(crate) const DASHES: [&str; 4] = ["", "7 3", "2 3", "9 3 2 3"];
pub(crate) const WIDTH: f64 = 880.0;
const HEIGHT: f64 = 460.0;
pub(crate) const LEFT: f64 = 78.0;
pub(crate) const TOP: f64 = 44.0;
pub(crate) const RIGHT: f64 = WIDTH - 220.0;
/// Below the plot: tick labels, the axis title and the caption.
pub(crate) const BELOW: f64 = 74.0;
const BOTTOM: f64 = HEIGHT - BELOW;
/// The plot area of a single chart.
const PLOT: Rect = Rect {
    left: LEFT,
    top: TOP,
    right: RIGHT,
    bottom: BOTTOM,
};
/// Markers per line: enough to tell lines apart, few enough to stay small.
const MARKERS: usize = 8;
/// How much white a light fill mixes in.
const LIGHT: f64 = 0.6;
/// The opacity of a spread band: the line stays readable over it, overlapping bands show.
const BAND_OPACITY: f64 = 0.18;

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

/// `color` (`#rrggbb`) mixed with white: `amount` 0 keeps it, 1 is white. Anything else than
/// `#rrggbb` reads as black.
pub fn tint(color: &str, amount: f64) -> String {
    let amount = if amount.is_finite() {
        amount.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let channel = |i: usize| {
        let c = color
            .get(i..i + 2)
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .unwrap_or(0) as f64;
        (c + (255.0 - c) * amount).round() as u8
    };
    format!("#{:02X}{:02X}{:02X}", channel(1), channel(3), channel(5))
}

/// A number with at most two decimals (fewer for larger numbers) and no trailing zeros.
fn short(value: f64) -> String {
    let text = if value.abs() >= 100.0 || value == value.round() {
        format!("{value:.0}")
    } else if value.abs() >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    };
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    };
    // `-0` from a value a hair below zero.
    if text == "-0" { "0".into() } else { text }
}

/// `value` in the first unit whose threshold it reaches: `(threshold, size, suffix)`, largest
/// first; below them all, as is with `plain`.
fn in_units(value: f64, units: &[(f64, f64, &str)], plain: &str) -> String {
    match units
        .iter()
        .find(|(threshold, _, _)| value.abs() >= *threshold)
    {
        Some((_, size, suffix)) => format!("{}{suffix}", short(value / size)),
        None => format!("{}{plain}", short(value)),
    }
}

/// One value's label in its own unit (log-axis ticks, tooltips).
pub fn label(value: f64, format: Format) -> String {
    match format {
        Format::Number => in_units(value, &[(1e6, 1e6, "M"), (1e4, 1e3, "k")], ""),
        Format::Percent => format!("{}%", short(value * 100.0)),
        Format::Seconds => in_units(
            value,
            &[
                (86_400.0, 86_400.0, "d"),
                (3_600.0, 3_600.0, "h"),
                (60.0, 60.0, "min"),
            ],
            "s",
        ),
    }
}

/// The units a linear duration axis may read in, largest first: `(seconds, name)`.
const DURATION_UNITS: [(f64, &str); 4] = [
    (86_400.0, "days"),
    (3_600.0, "hours"),
    (60.0, "minutes"),
    (1.0, "seconds"),
];

/// The one unit of a linear duration axis over `[lo, hi]` seconds: the largest that the range
/// spans at least twice (0–30 h reads in hours, 0–3 d in days).
pub fn duration_unit(lo: f64, hi: f64) -> (f64, &'static str) {
    DURATION_UNITS
        .into_iter()
        .find(|(size, _)| (hi - lo) / size >= 2.0)
        .unwrap_or(DURATION_UNITS[3])
}

/// The labels of `ticks` on `axis` and the axis title. A linear axis reads in one unit chosen
/// from its data range `[lo, hi]`: durations in seconds, minutes, hours or days (the unit in
/// the title, plain numbers on the ticks), numbers in ones, thousands or millions (`k`, `M` on
/// every tick). A log axis labels each tick in its own unit (see [`Format::Seconds`]).
pub fn tick_labels(axis: &Axis, ticks: &[f64], lo: f64, hi: f64) -> (Vec<String>, String) {
    let each = |text: &dyn Fn(f64) -> String| ticks.iter().map(|&t| text(t)).collect();
    match (axis.scale, axis.format) {
        (Scale::Linear, Format::Seconds) => {
            let (size, name) = duration_unit(lo, hi);
            (
                each(&|t| short(t / size)),
                format!("{} ({name})", axis.label),
            )
        }
        (Scale::Linear, Format::Number) => {
            let top = ticks.iter().fold(0.0f64, |m, t| m.max(t.abs()));
            let (size, suffix) = if top >= 1e6 {
                (1e6, "M")
            } else if top >= 1e4 {
                (1e3, "k")
            } else {
                (1.0, "")
            };
            let text = |t: f64| match short(t / size) {
                zero if zero == "0" => zero,
                n => format!("{n}{suffix}"),
            };
            (each(&text), axis.label.clone())
        }
        _ => (each(&|t| label(t, axis.format)), axis.label.clone()),
    }
}

/// About 8 ticks (a wide axis) over `[0, span]` seconds that stay inside it (a chart that
/// cannot widen its axis), their labels in one unit, and the unit's name.
pub(crate) fn duration_ticks(span: f64) -> (Vec<f64>, Vec<String>, &'static str) {
    let (ticks, _, _) = ticks(0.0, span, Scale::Linear, Format::Seconds, 8.0);
    let ticks: Vec<f64> = ticks
        .into_iter()
        .filter(|&t| t <= span * (1.0 + 1e-9))
        .collect();
    let (size, name) = duration_unit(0.0, span);
    let labels = ticks.iter().map(|&t| short(t / size)).collect();
    (ticks, labels, name)
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
    magnitude
        * if f <= 1.0 {
            1.0
        } else if f <= 2.0 {
            2.0
        } else if f <= 5.0 {
            5.0
        } else {
            10.0
        }
}

/// About `count` ticks over `[lo, hi]` and the (possibly widened) range they cover.
fn ticks(lo: f64, hi: f64, scale: Scale, format: Format, count: f64) -> (Vec<f64>, f64, f64) {
    match scale {
        Scale::Log => {
            let candidates: Vec<f64> = if format == Format::Seconds {
                let mut c = vec![
                    0.001, 0.01, 0.1, 1.0, 10.0, 60.0, 600.0, 3_600.0, 21_600.0, 86_400.0,
                    864_000.0,
                ];
                c.extend((0..4).map(|k| 8_640_000.0 * 10f64.powi(k)));
                c
            } else {
                (-6..=12).map(|k| 10f64.powi(k)).collect()
            };
            let lo_t = candidates.iter().copied().rfind(|&t| t <= lo).unwrap_or(lo);
            let hi_t = candidates.iter().copied().find(|&t| t >= hi).unwrap_or(hi);
            let ticks = candidates
                .into_iter()
                .filter(|&t| t >= lo_t && t <= hi_t)
                .collect();
            (ticks, lo_t, hi_t)
        }
        Scale::Linear => {
            // Steps are nice numbers of the unit the labels will read in (5 h, not 18,000 s).
            let unit = if format == Format::Seconds {
                duration_unit(lo, hi).0
            } else {
                1.0
            };
            let step = nice_step((hi - lo) / unit / count.max(1.0)) * unit;
            let first = (lo / step + 1e-6).floor() * step;
            let last = (hi / step - 1e-6).ceil() * step;
            let n = ((last - first) / step).round() as usize;
            let ticks = (0..=n.min(50)).map(|i| first + i as f64 * step).collect();
            (ticks, first, last)
        }
    }
}

/// Maps data to pixels along one axis.
pub(crate) struct Mapping {
    scale: Scale,
    lo: f64,
    hi: f64,
    from_px: f64,
    to_px: f64,
}

impl Mapping {
    pub(crate) fn at(&self, v: f64) -> f64 {
        let (v, lo, hi) = match self.scale {
            Scale::Linear => (v, self.lo, self.hi),
            Scale::Log => (
                v.max(f64::MIN_POSITIVE).log10(),
                self.lo.log10(),
                self.hi.log10(),
            ),
        };
        let t = if hi > lo { (v - lo) / (hi - lo) } else { 0.5 };
        self.from_px + t * (self.to_px - self.from_px)
    }
}

/// An axis laid out: its ticks with their labels, its title (with the unit), its mapping.
pub(crate) struct Laid {
    ticks: Vec<f64>,
    labels: Vec<String>,
    pub(crate) title: String,
    pub(crate) map: Mapping,
}

/// Lays `axis` out over the data range `range` between two pixel positions, with about `count`
/// ticks. The unit is chosen from the data range, not the widened one: 0–47.9 h widened to 50 h
/// still reads in hours.
pub(crate) fn lay_out(
    axis: &Axis,
    range: (f64, f64),
    from_px: f64,
    to_px: f64,
    count: f64,
) -> Laid {
    let (ticks, lo, hi) = ticks(range.0, range.1, axis.scale, axis.format, count);
    let (labels, title) = tick_labels(axis, &ticks, range.0, range.1);
    Laid {
        ticks,
        labels,
        title,
        map: Mapping {
            scale: axis.scale,
            lo,
            hi,
            from_px,
            to_px,
        },
    }
}

/// The data range along one axis, over the values `scale` can show.
pub(crate) fn data_range(values: impl Iterator<Item = f64>, axis: &Axis) -> (f64, f64) {
    if let Some(bounds) = axis.bounds {
        return bounds;
    }
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite() && (axis.scale == Scale::Linear || *v > 0.0)) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return if axis.scale == Scale::Log {
            (1.0, 10.0)
        } else {
            (0.0, 1.0)
        };
    }
    if axis.scale == Scale::Linear {
        lo = lo.min(0.0);
    }
    if hi <= lo {
        hi = if axis.scale == Scale::Log {
            lo * 10.0
        } else {
            lo + 1.0
        };
    }
    (lo, hi)
}

/// Whether a point has a place on these scales (finite; positive on a log axis).
pub(crate) fn drawable(x: f64, y: f64, x_scale: Scale, y_scale: Scale) -> bool {
    x.is_finite()
        && y.is_finite()
        && (x_scale == Scale::Linear || x > 0.0)
        && (y_scale == Scale::Linear || y > 0.0)
}

/// A plot area in pixels.
#[derive(Clone, Copy)]
pub(crate) struct Rect {
    pub(crate) left: f64,
    pub(crate) top: f64,
    pub(crate) right: f64,
    pub(crate) bottom: f64,
}

pub(crate) fn header(out: &mut String, title: &str, height: f64) {
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" font-family="DejaVu Sans, Verdana, sans-serif" font-size="12"><rect width="100%" height="100%" fill="white"/><text x="{LEFT}" y="24" font-size="15" font-weight="bold">{}</text>"#,
        escape(title)
    );
}

pub(crate) fn footer(out: &mut String, caption: &str, height: f64) {
    let _ = write!(
        out,
        r##"<text x="{LEFT}" y="{}" font-size="10" fill="#666">{}</text></svg>"##,
        height - 8.0,
        escape(caption)
    );
}

/// Horizontal grid lines with their tick labels.
pub(crate) fn y_grid(out: &mut String, r: Rect, y: &Laid) {
    for (&t, text) in y.ticks.iter().zip(&y.labels) {
        let py = y.map.at(t);
        let _ = write!(
            out,
            r##"<line x1="{}" y1="{py:.1}" x2="{}" y2="{py:.1}" stroke="#e4e4e4"/><text x="{:.1}" y="{:.1}" text-anchor="end">{text}</text>"##,
            r.left,
            r.right,
            r.left - 6.0,
            py + 4.0,
        );
    }
}

/// Vertical grid lines, with their tick labels under the plot where `labelled`.
pub(crate) fn x_grid(out: &mut String, r: Rect, x: &Laid, labelled: bool) {
    for (&t, text) in x.ticks.iter().zip(&x.labels) {
        let px = x.map.at(t);
        let _ = write!(
            out,
            r##"<line x1="{px:.1}" y1="{}" x2="{px:.1}" y2="{}" stroke="#e4e4e4"/>"##,
            r.top, r.bottom
        );
        if labelled {
            let _ = write!(
                out,
                r#"<text x="{px:.1}" y="{:.1}" text-anchor="middle">{text}</text>"#,
                r.bottom + 16.0
            );
        }
    }
}

/// The plot's border.
pub(crate) fn plot_box(out: &mut String, r: Rect) {
    let _ = write!(
        out,
        r##"<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#444"/>"##,
        r.left,
        r.top,
        r.right - r.left,
        r.bottom - r.top
    );
}

/// The axes' titles: the horizontal one (if any) under `r`, the vertical one centred on
/// `y_middle`.
pub(crate) fn axis_titles(out: &mut String, r: Rect, x_title: &str, y_title: &str, y_middle: f64) {
    if !x_title.is_empty() {
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            (r.left + r.right) / 2.0,
            r.bottom + 36.0,
            escape(x_title)
        );
    }
    let _ = write!(
        out,
        r#"<text transform="translate(18 {y_middle:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        escape(y_title)
    );
}

/// Grid, tick labels, border and axis titles of a single plot.
fn frame(out: &mut String, r: Rect, x: &Laid, y: &Laid) {
    y_grid(out, r, y);
    x_grid(out, r, x, true);
    plot_box(out, r);
    axis_titles(out, r, &x.title, &y.title, (r.top + r.bottom) / 2.0);
}

/// A path's `d` through pixel points.
pub(crate) fn path_d(points: impl IntoIterator<Item = (f64, f64)>) -> String {
    let mut d = String::new();
    for (k, (px, py)) in points.into_iter().enumerate() {
        let _ = write!(d, "{}{px:.1} {py:.1}", if k == 0 { "M" } else { "L" });
    }
    d
}

/// A marker of shape `index` centred at (x, y).
fn marker(out: &mut String, index: usize, x: f64, y: f64, color: &str, tooltip: &str) {
    let tip = format!("<title>{}</title>", escape(tooltip));
    let _ = match index % 4 {
        0 => write!(
            out,
            r#"<circle cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{color}">{tip}</circle>"#
        ),
        1 => write!(
            out,
            r#"<rect x="{:.1}" y="{:.1}" width="7" height="7" fill="{color}">{tip}</rect>"#,
            x - 3.5,
            y - 3.5
        ),
        2 => write!(
            out,
            r#"<path d="M{x:.1} {:.1}l4 7h-8z" fill="{color}">{tip}</path>"#,
            y - 4.5
        ),
        _ => write!(
            out,
            r#"<path d="M{x:.1} {:.1}l4 4l-4 4l-4 -4z" fill="{color}">{tip}</path>"#,
            y - 4.0
        ),
    };
}

/// A legend entry's text at (x, y) after a 32-pixel swatch, cut to what the margin holds (the
/// whole text in its tooltip).
pub(crate) fn legend_text(out: &mut String, x: f64, y: f64, text: &str) {
    let shown: String = if text.chars().count() > 28 {
        text.chars().take(27).chain(['…']).collect()
    } else {
        text.to_string()
    };
    let _ = write!(
        out,
        r#"<text x="{}" y="{:.1}">{}<title>{}</title></text>"#,
        x + 32.0,
        y + 4.0,
        escape(&shown),
        escape(text)
    );
}

/// Where legend row `row` of a single plot goes.
fn legend_at(row: usize) -> (f64, f64) {
    (RIGHT + 14.0, TOP + 8.0 + row as f64 * 20.0)
}

/// The legend entry of line `style` (colour, dash, marker) at (x, y).
pub(crate) fn legend_line(out: &mut String, (x, y): (f64, f64), style: usize, text: &str) {
    let color = COLORS[style % COLORS.len()];
    let dash = DASHES[style % DASHES.len()];
    let _ = write!(
        out,
        r#"<line x1="{x}" y1="{y}" x2="{}" y2="{y}" stroke="{color}" stroke-width="2" stroke-dasharray="{dash}"/>"#,
        x + 26.0
    );
    marker(out, style, x + 13.0, y, color, text);
    legend_text(out, x, y, text);
}

/// A bar's `fill` and `stroke` attributes.
fn bar_paint(color: &str, fill: Fill) -> String {
    match fill {
        Fill::Solid => format!(r#"fill="{color}""#),
        Fill::Light => format!(
            r#"fill="{}" stroke="{color}" stroke-width="1.5""#,
            tint(color, LIGHT)
        ),
    }
}

impl LineChart {
    /// Legend labels, with `(= other)` where a series draws exactly over an earlier one.
    fn legend_labels(&self) -> Vec<String> {
        self.lines
            .iter()
            .enumerate()
            .map(|(i, line)| {
                match self.lines[..i]
                    .iter()
                    .find(|other| other.points == line.points && !line.points.is_empty())
                {
                    Some(same) => format!("{} (= {})", line.label, same.label),
                    None => line.label.clone(),
                }
            })
            .collect()
    }

    /// Whether any series has a point to draw.
    pub fn has_data(&self) -> bool {
        self.lines.iter().any(|l| !l.points.is_empty())
    }

    /// The chart as a standalone SVG document.
    pub fn to_svg(&self) -> String {
        self.to_svg_with_bands(&[])
    }

    /// The chart with `bands` behind their lines (a band of a line that does not exist is left
    /// out); the vertical axis covers the bands too.
    pub fn to_svg_with_bands(&self, bands: &[Band]) -> String {
        let bands: Vec<&Band> = bands.iter().filter(|b| b.line < self.lines.len()).collect();
        let mut out = String::with_capacity(
            4096 + self
                .lines
                .iter()
                .map(|l| l.points.len() * 16)
                .sum::<usize>(),
        );
        header(&mut out, &self.title, HEIGHT);
        let spread = || {
            bands
                .iter()
                .flat_map(|b| b.points.iter().flat_map(|&(x, lo, hi)| [(x, lo), (x, hi)]))
        };
        let all = || {
            self.lines
                .iter()
                .flat_map(|l| l.points.iter().copied())
                .chain(spread())
        };
        let x = lay_out(
            &self.x,
            data_range(all().map(|p| p.0), &self.x),
            LEFT,
            RIGHT,
            5.0,
        );
        let y = lay_out(
            &self.y,
            data_range(all().map(|p| p.1), &self.y),
            BOTTOM,
            TOP,
            5.0,
        );
        frame(&mut out, PLOT, &x, &y);
        let labels = self.legend_labels();
        for band in bands {
            self.band(&mut out, band, &labels[band.line], (&x.map, &y.map));
        }
        for (i, line) in self.lines.iter().enumerate() {
            self.line(&mut out, i, &line.points, &labels[i], (&x.map, &y.map));
        }
        for (i, text) in labels.iter().enumerate() {
            legend_line(&mut out, legend_at(i), i, text);
        }
        footer(&mut out, &self.caption, HEIGHT);
        out
    }

    /// Series `i` as a path with its markers, staggered per series so that series drawn over
    /// each other stay visible.
    fn line(
        &self,
        out: &mut String,
        i: usize,
        data: &[(f64, f64)],
        name: &str,
        (xm, ym): (&Mapping, &Mapping),
    ) {
        let data: Vec<(f64, f64)> = data
            .iter()
            .copied()
            .filter(|&(x, y)| drawable(x, y, self.x.scale, self.y.scale))
            .collect();
        let n = data.len();
        if n == 0 {
            return;
        }
        let color = COLORS[i % COLORS.len()];
        let points: Vec<(f64, f64)> = data.iter().map(|&(x, y)| (xm.at(x), ym.at(y))).collect();
        let _ = write!(
            out,
            r#"<path d="{}" fill="none" stroke="{color}" stroke-width="2" stroke-dasharray="{}"><title>{}</title></path>"#,
            path_d(points.iter().copied()),
            DASHES[i % DASHES.len()],
            escape(name)
        );
        for m in 0..MARKERS.min(n) {
            let k =
                ((m as f64 + (i as f64 * 0.37) % 1.0) * n as f64 / MARKERS.min(n) as f64) as usize;
            let k = k.min(n - 1);
            let tip = format!(
                "{name}: {}, {}",
                label(data[k].0, self.x.format),
                label(data[k].1, self.y.format)
            );
            marker(out, i, points[k].0, points[k].1, color, &tip);
        }
    }

    /// A band as a translucent area in its line's colour (one point: a bar from low to high).
    fn band(&self, out: &mut String, band: &Band, name: &str, (xm, ym): (&Mapping, &Mapping)) {
        let (xs, ys) = (self.x.scale, self.y.scale);
        let kept: Vec<(f64, f64, f64)> = band
            .points
            .iter()
            .copied()
            .filter(|&(x, lo, hi)| drawable(x, lo, xs, ys) && drawable(x, hi, xs, ys))
            .collect();
        let color = COLORS[band.line % COLORS.len()];
        let tip = format!("<title>{} (spread)</title>", escape(name));
        match kept.as_slice() {
            [] => {}
            [(x, lo, hi)] => {
                let _ = write!(
                    out,
                    r#"<line x1="{0:.1}" y1="{1:.1}" x2="{0:.1}" y2="{2:.1}" stroke="{color}" stroke-width="8" stroke-opacity="{BAND_OPACITY}">{tip}</line>"#,
                    xm.at(*x),
                    ym.at(*lo),
                    ym.at(*hi)
                );
            }
            _ => {
                let upper = kept.iter().map(|&(x, _, hi)| (xm.at(x), ym.at(hi)));
                let lower = kept.iter().rev().map(|&(x, lo, _)| (xm.at(x), ym.at(lo)));
                let _ = write!(
                    out,
                    r#"<path d="{}Z" fill="{color}" fill-opacity="{BAND_OPACITY}" stroke="none">{tip}</path>"#,
                    path_d(upper.chain(lower))
                );
            }
        }
    }
}

impl BarChart {
    /// Whether any bar has a value.
    pub fn has_data(&self) -> bool {
        !self.categories.is_empty() && self.series.iter().any(|s| !s.values.is_empty())
    }

    /// Series `s`'s colour: its hue, or its position.
    fn color(&self, s: usize) -> &'static str {
        let hue = self.series.get(s).and_then(|b| b.hue).unwrap_or(s);
        COLORS[hue % COLORS.len()]
    }

    /// The chart as a standalone SVG document.
    pub fn to_svg(&self) -> String {
        let mut out = String::with_capacity(8192);
        header(&mut out, &self.title, HEIGHT);
        let y_axis = Axis {
            scale: Scale::Linear,
            ..self.y.clone()
        };
        let y = lay_out(
            &y_axis,
            data_range(
                self.series.iter().flat_map(|s| s.values.iter().copied()),
                &y_axis,
            ),
            BOTTOM,
            TOP,
            5.0,
        );
        y_grid(&mut out, PLOT, &y);
        let groups = self.categories.len().max(1) as f64;
        let group_px = (RIGHT - LEFT) / groups;
        let bar_px = group_px * 0.8 / self.series.len().max(1) as f64;
        // Category labels thin out when they would overlap.
        let every = ((self.categories.len() as f64 * 42.0 / (RIGHT - LEFT)).ceil() as usize).max(1);
        for (c, name) in self.categories.iter().enumerate() {
            let gx = LEFT + c as f64 * group_px + group_px * 0.1;
            for (s, series) in self.series.iter().enumerate() {
                let Some(&v) = series.values.get(c).filter(|v| v.is_finite()) else {
                    continue;
                };
                let (top, base) = (y.map.at(v.max(y.map.lo)), y.map.at(0f64.max(y.map.lo)));
                let _ = write!(
                    out,
                    r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" {}><title>{}: {}, {}</title></rect>"#,
                    gx + s as f64 * bar_px,
                    top.min(base),
                    (bar_px - 1.0).max(0.5),
                    (base - top).abs(),
                    bar_paint(self.color(s), series.fill),
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
        plot_box(&mut out, PLOT);
        axis_titles(&mut out, PLOT, "", &y.title, (TOP + BOTTOM) / 2.0);
        for (i, s) in self.series.iter().enumerate() {
            let (x, at) = legend_at(i);
            let _ = write!(
                out,
                r#"<rect x="{x}" y="{}" width="18" height="10" {}/>"#,
                at - 5.0,
                bar_paint(self.color(i), s.fill)
            );
            legend_text(&mut out, x, at, &s.label);
        }
        footer(&mut out, &self.caption, HEIGHT);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts of the `<text ...>` elements whose tag contains `attribute`.
    fn texts<'a>(svg: &'a str, attribute: &str) -> Vec<&'a str> {
        svg.split("<text ")
            .skip(1)
            .filter(|t| {
                t.split('>')
                    .next()
                    .is_some_and(|tag| tag.contains(attribute))
            })
            .filter_map(|t| t.split('>').nth(1)?.split('<').next())
            .collect()
    }

    #[test]
    fn tick_labels_read_as_durations_and_percentages() {
        assert_eq!(label(30.0, Format::Seconds), "30s");
        assert_eq!(label(600.0, Format::Seconds), "10min");
        assert_eq!(label(5_400.0, Format::Seconds), "1.5h");
        assert_eq!(label(864_000.0, Format::Seconds), "10d");
        assert_eq!(label(0.25, Format::Percent), "25%");
        assert_eq!(label(15_000.0, Format::Number), "15k");
        assert_eq!(label(2.5e6, Format::Number), "2.5M");
        assert_eq!(label(0.126, Format::Number), "0.13");
    }

    #[test]
    fn log_duration_ticks_fall_on_human_units() {
        let (t, lo, hi) = ticks(45.0, 20_000.0, Scale::Log, Format::Seconds, 5.0);
        assert_eq!(t, vec![10.0, 60.0, 600.0, 3_600.0, 21_600.0]);
        assert_eq!((lo, hi), (10.0, 21_600.0));
        let (t, lo, hi) = ticks(0.0, 0.93, Scale::Linear, Format::Number, 5.0);
        assert_eq!((t.len(), lo, hi), (6, 0.0, 1.0));
        let (_, _, hi) = ticks(0.0, 1.000_000_1, Scale::Linear, Format::Percent, 5.0);
        assert_eq!(hi, 1.0);
    }

    #[test]
    fn a_linear_axis_reads_in_one_unit_chosen_from_its_range() {
        // The sweep's average JCT, 0 to 24.4 h: ticks every 5 h up to 25 h used to read
        // `0s, 5h, ..., 20h, 1.04d`; now all hours, the unit in the axis title.
        let axis = Axis::linear("average JCT", Format::Seconds);
        let (t, lo, hi) = ticks(0.0, 24.4 * 3_600.0, Scale::Linear, Format::Seconds, 5.0);
        let (labels, title) = tick_labels(&axis, &t, 0.0, 24.4 * 3_600.0);
        assert_eq!(labels, ["0", "5", "10", "15", "20", "25"]);
        assert_eq!(
            (title.as_str(), lo, hi),
            ("average JCT (hours)", 0.0, 25.0 * 3_600.0)
        );
        // The unit follows the data range, not the widened one: 0–47.9 h (axis to 50 h) in hours.
        let (t, _, _) = ticks(0.0, 47.9 * 3_600.0, Scale::Linear, Format::Seconds, 5.0);
        assert_eq!(
            tick_labels(&axis, &t, 0.0, 47.9 * 3_600.0).1,
            "average JCT (hours)"
        );
        assert_eq!(duration_unit(0.0, 3.0 * 86_400.0), (86_400.0, "days"));
        assert_eq!(duration_unit(0.0, 90.0), (1.0, "seconds"));
        assert_eq!(duration_unit(f64::NAN, 1.0), (1.0, "seconds"));
        // Counts: `k` on every tick or on none (not `5000, 10k`).
        let (t, _, _) = ticks(0.0, 14_000.0, Scale::Linear, Format::Number, 5.0);
        let (labels, _) = tick_labels(&Axis::linear("jobs", Format::Number), &t, 0.0, 14_000.0);
        assert_eq!(labels, ["0", "5k", "10k", "15k"]);
    }

    #[test]
    fn every_y_tick_of_a_duration_chart_shares_its_unit() {
        let chart = LineChart {
            title: "avg".into(),
            caption: String::new(),
            x: Axis::linear("load", Format::Number),
            y: Axis::linear("average JCT", Format::Seconds),
            lines: vec![Line {
                label: "fifo".into(),
                points: vec![(1.0, 60_000.0), (2.0, 87_840.0)],
            }],
        };
        let svg = chart.to_svg();
        let y_ticks = texts(&svg, "text-anchor=\"end\"");
        assert!(
            y_ticks.len() >= 3 && y_ticks.iter().all(|t| t.parse::<f64>().is_ok()),
            "{y_ticks:?}"
        );
        assert!(svg.contains("average JCT (hours)"));
    }

    #[test]
    fn a_band_is_drawn_behind_its_line_and_widens_the_axis() {
        let chart = LineChart {
            title: "t".into(),
            caption: String::new(),
            x: Axis::linear("load", Format::Number),
            y: Axis::linear("JCT", Format::Seconds),
            lines: vec![Line {
                label: "fifo".into(),
                points: vec![(1.0, 100.0), (2.0, 110.0)],
            }],
        };
        let bands = [
            Band {
                line: 0,
                points: vec![(1.0, 90.0, 130.0), (2.0, 100.0, 260.0)],
            },
            Band {
                line: 7,
                points: vec![(1.0, 0.0, 1e9)],
            },
        ];
        let svg = chart.to_svg_with_bands(&bands);
        let band = svg.find("fill-opacity").expect("a band");
        assert!(
            band < svg
                .find("fill=\"none\" stroke=\"#0072B2\"")
                .expect("the line"),
            "the band is under the line"
        );
        assert!(svg.contains(&format!("fill=\"{}\" fill-opacity", COLORS[0])));
        // The axis reaches the band's 260 s (a tick at 300 s), not only the line's 110 s; the
        // band of a line that does not exist is left out.
        assert!(
            texts(&svg, "text-anchor=\"end\"").contains(&"5"),
            "{:?}",
            texts(&svg, "text-anchor=\"end\"")
        );
        assert_eq!(svg.matches("fill-opacity").count(), 1);
        // One point: a bar from low to high.
        let one = LineChart {
            lines: vec![Line {
                label: "fifo".into(),
                points: vec![(1.0, 100.0)],
            }],
            ..chart
        };
        assert!(
            one.to_svg_with_bands(&[Band {
                line: 0,
                points: vec![(1.0, 90.0, 130.0)]
            }])
            .contains("stroke-opacity")
        );
    }

    #[test]
    fn identical_series_are_named_in_the_legend_and_text_is_escaped() {
        let chart = LineChart {
            title: "a <b> & c".into(),
            caption: "scenario x".into(),
            x: Axis::log("JCT", Format::Seconds),
            y: Axis::fraction("jobs"),
            lines: vec![
                Line {
                    label: "fifo".into(),
                    points: vec![(10.0, 0.5), (100.0, 1.0)],
                },
                Line {
                    label: "srtf".into(),
                    points: vec![(10.0, 0.5), (100.0, 1.0)],
                },
                Line {
                    label: "las".into(),
                    points: vec![(0.0, 0.1), (20.0, 1.0)],
                },
            ],
        };
        let svg = chart.to_svg();
        assert!(svg.contains("srtf (= fifo)") && !svg.contains("las (="));
        assert!(svg.contains("a &lt;b&gt; &amp; c") && !svg.contains("<b>"));
        // Three series drawn, the log axis dropping the zero of the third.
        let curves = svg
            .split("<path")
            .skip(1)
            .filter(|p| {
                p.split('>')
                    .next()
                    .is_some_and(|tag| tag.contains("fill=\"none\""))
            })
            .count();
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
            series: vec![
                Bars::new("x", vec![0.2, 0.8]),
                Bars::new("y", vec![0.5, 0.5]),
            ],
        };
        let svg = chart.to_svg();
        assert_eq!(
            svg.matches("<rect x=").count(),
            4 + 2 + 1,
            "bars, legend swatches, frame"
        );
    }

    #[test]
    fn a_pair_of_bars_shares_its_hue_light_beside_solid() {
        let pair = |hue, fill| Bars {
            hue: Some(hue),
            fill,
            ..Bars::new("p", vec![0.5])
        };
        let chart = BarChart {
            title: "t".into(),
            caption: String::new(),
            categories: vec!["a".into()],
            y: Axis::linear("share", Format::Percent),
            series: vec![
                pair(0, Fill::Solid),
                pair(0, Fill::Light),
                pair(1, Fill::Solid),
                pair(1, Fill::Light),
            ],
        };
        let svg = chart.to_svg();
        let light = tint(COLORS[0], LIGHT);
        // Bar and legend swatch each: the solid one in the hue, the light one a tint outlined in it.
        assert_eq!(
            svg.matches(&format!(r#"fill="{}">"#, COLORS[0])).count()
                + svg.matches(&format!(r#"fill="{}"/>"#, COLORS[0])).count(),
            2
        );
        assert_eq!(
            svg.matches(&format!(r#"fill="{light}" stroke="{}""#, COLORS[0]))
                .count(),
            2
        );
        assert!(svg.contains(&format!(r#"stroke="{}""#, COLORS[1])));
        assert_eq!(tint("#0072B2", 0.0), "#0072B2");
        assert_eq!(tint("#0072B2", 1.0), "#FFFFFF");
        assert_eq!(tint("oops", 0.5), "#808080");
    }
}
