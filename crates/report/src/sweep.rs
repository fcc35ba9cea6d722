//! Figures and the report of a sweep (`arbiter sweep ... --out DIR [--report DIR]`): average
//! and tail JCT, queueing delay and utilization against the swept key (Gavel's Figure 8) with
//! their spread over seeds, and the JCT CDF at each value.

use crate::chart::{Axis, Band, Format, Line, LineChart};
use crate::{Figure, Mark, Report, ReportError, Section, Table, VERSION, figures, slug};
use arbiter_sim::Summary;
use arbiter_sim::sweep::{Sweep, SweepPoint};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The whole-cluster (`all`) rows of a point per policy, in name order: one per seed (and
/// trace).
fn by_policy(point: &SweepPoint) -> BTreeMap<&'static str, Vec<&Summary>> {
    let mut out: BTreeMap<&'static str, Vec<&Summary>> = BTreeMap::new();
    for r in point.results.iter().filter(|r| r.tenant == "all") {
        out.entry(r.policy.name()).or_default().push(&r.summary);
    }
    out
}

/// Mean, least and most of the finite `values` (none: NaN, which no chart draws).
fn spread(values: impl Iterator<Item = f64>) -> (f64, f64, f64) {
    let (mut n, mut sum, mut lo, mut hi) = (0usize, 0.0, f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite()) {
        (n, sum, lo, hi) = (n + 1, sum + v, lo.min(v), hi.max(v));
    }
    if n == 0 {
        (f64::NAN, f64::NAN, f64::NAN)
    } else {
        (sum / n as f64, lo, hi)
    }
}

/// The most runs (seeds × traces) behind one point of one policy.
fn most_runs(sweep: &Sweep) -> usize {
    sweep
        .points
        .iter()
        .flat_map(|p| by_policy(p).into_values().map(|runs| runs.len()))
        .max()
        .unwrap_or(0)
}

/// A metric against the key per policy: a line through the mean over seeds (and traces) at
/// each point, in x order, and a band from the least to the most where some point has two
/// runs or more.
fn against(sweep: &Sweep, metric: Metric) -> (Vec<Line>, Vec<Band>) {
    let mut curves: BTreeMap<&str, Vec<(f64, f64, f64, f64)>> = BTreeMap::new();
    for point in &sweep.points {
        for (policy, runs) in by_policy(point) {
            let (mean, lo, hi) = spread(runs.iter().map(|s| metric(s)));
            curves
                .entry(policy)
                .or_default()
                .push((point.x, mean, lo, hi));
        }
    }
    for curve in curves.values_mut() {
        curve.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let lines = curves
        .iter()
        .map(|(policy, c)| Line {
            label: policy.to_string(),
            points: c.iter().map(|&(x, mean, _, _)| (x, mean)).collect(),
        })
        .collect();
    let bands = if most_runs(sweep) < 2 {
        Vec::new()
    } else {
        curves
            .values()
            .enumerate()
            .map(|(line, c)| Band {
                line,
                points: c.iter().map(|&(x, _, lo, hi)| (x, lo, hi)).collect(),
            })
            .collect()
    };
    (lines, bands)
}

/// What the lines (and bands) of the metric figures are.
fn drawn(sweep: &Sweep) -> String {
    match most_runs(sweep) {
        0 | 1 => "one run per point".to_string(),
        n => format!("line: mean of {n} runs (seeds × traces), band: min–max"),
    }
}

/// A number of a simulation's summary.
type Metric = fn(&Summary) -> f64;

/// The sweep's figures: the metrics against the key, then one JCT CDF per value.
pub fn figures(sweep: &Sweep) -> Vec<Figure> {
    let caption = format!(
        "{} · {} swept · seeds {} · Arbiter {VERSION}",
        sweep.scenario,
        sweep.key,
        seeds(sweep)
    );
    let metric_caption = format!("{caption} · {}", drawn(sweep));
    let percent = Axis {
        bounds: Some((0.0, 1.0)),
        ..Axis::linear("GPU utilization", Format::Percent)
    };
    let metrics: [(&str, &str, Axis, Metric); 4] = [
        (
            "avg_jct",
            "average JCT",
            Axis::linear("average JCT", Format::Seconds),
            |s| s.avg_jct_s,
        ),
        (
            "p99_jct",
            "99th-percentile JCT",
            Axis::linear("p99 JCT", Format::Seconds),
            |s| s.p99_jct_s,
        ),
        (
            "avg_queue",
            "average queueing delay",
            Axis::linear("average queueing delay", Format::Seconds),
            |s| s.avg_queue_s,
        ),
        ("utilization", "GPU utilization", percent, |s| {
            s.gpu_utilization
        }),
    ];
    let mut out = Vec::new();
    for (id, title, y, metric) in metrics {
        let (lines, bands) = against(sweep, metric);
        let x = Axis::linear(&sweep.key, Format::Number);
        let chart = LineChart {
            title: format!("{}: {title}", sweep.scenario),
            caption: metric_caption.clone(),
            x,
            y,
            lines,
        };
        if chart.has_data() {
            out.push(Figure {
                id: id.to_string(),
                svg: chart.to_svg_with_bands(&bands),
            });
        }
    }
    for p in &sweep.points {
        let chart = LineChart {
            title: format!("JCT CDF at {} = {}", sweep.key, p.value),
            caption: format!("{caption} · JCTs of all seeds pooled"),
            x: Axis::log("job completion time (log)", Format::Seconds),
            y: Axis::fraction("jobs"),
            lines: p
                .jcts_by_policy
                .iter()
                .map(|(label, v)| Line {
                    label: label.clone(),
                    points: figures::cdf(v.iter().copied()),
                })
                .collect(),
        };
        if chart.has_data() {
            out.push(Figure {
                id: format!("jct_cdf_{}", slug(&[&p.value])),
                svg: chart.to_svg(),
            });
        }
    }
    out
}

fn seeds(sweep: &Sweep) -> String {
    let mut seeds: Vec<u64> = sweep
        .points
        .iter()
        .flat_map(|p| p.results.iter().map(|r| r.seed))
        .collect();
    seeds.sort_unstable();
    seeds.dedup();
    seeds
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Writes the figures as SVG files into `dir` (`avg_jct.svg`, `jct_cdf_<value>.svg`, ...);
/// returns them.
pub fn write_figures(sweep: &Sweep, dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
    std::fs::create_dir_all(dir).map_err(|cause| ReportError::Io {
        path: dir.to_path_buf(),
        cause,
    })?;
    figures(sweep)
        .into_iter()
        .map(|f| {
            let path = dir.join(format!("{}.svg", f.id));
            std::fs::write(&path, f.svg).map_err(|cause| ReportError::Io {
                path: path.clone(),
                cause,
            })?;
            Ok(path)
        })
        .collect()
}

/// A cell of the summary: the mean, then the least and most where they differ (joined by
/// no-break characters: a page narrower than the table wraps between cells, not inside one).
fn mean_cell(runs: &[&Summary], metric: Metric, show: fn(f64) -> String) -> (String, Mark) {
    let (mean, lo, hi) = spread(runs.iter().map(|s| metric(s)));
    let text = if runs.len() > 1 && hi > lo {
        format!(
            "{}\u{a0}({}\u{2060}–\u{2060}{})",
            show(mean),
            show(lo),
            show(hi)
        )
    } else {
        show(mean)
    };
    (text, Mark::None)
}

/// One row per value and policy: the mean over its runs (seeds × traces) of the whole-cluster
/// rows, with the min–max beside it.
fn summary_table(sweep: &Sweep) -> Table {
    let secs = |v: f64| format!("{v:.0}");
    let pct = |v: f64| format!("{:.1}%", v * 100.0);
    let head = [
        sweep.key.as_str(),
        "policy",
        "runs",
        "avg JCT s",
        "p99 JCT s",
        "avg queue s",
        "util",
    ];
    let mut rows = Vec::new();
    for point in &sweep.points {
        for (policy, runs) in by_policy(point) {
            rows.push(vec![
                (point.value.clone(), Mark::None),
                (policy.to_string(), Mark::None),
                (runs.len().to_string(), Mark::None),
                mean_cell(&runs, |s| s.avg_jct_s, secs),
                mean_cell(&runs, |s| s.p99_jct_s, secs),
                mean_cell(&runs, |s| s.avg_queue_s, secs),
                mean_cell(&runs, |s| s.gpu_utilization, pct),
            ]);
        }
    }
    Table {
        head: head.iter().map(|h| h.to_string()).collect(),
        rows,
    }
}

/// The table of every simulation.
fn every_simulation(sweep: &Sweep) -> Table {
    let head = [
        "value",
        "trace",
        "tenant",
        "policy",
        "seed",
        "jobs",
        "avg JCT s",
        "p99 JCT s",
        "avg queue s",
        "util",
        "shared",
        "unfinished",
    ];
    let rows = sweep
        .points
        .iter()
        .flat_map(|p| {
            p.results.iter().map(move |r| {
                let s = &r.summary;
                [
                    p.value.clone(),
                    r.trace.clone(),
                    r.tenant.clone(),
                    r.policy.name().to_string(),
                    r.seed.to_string(),
                    s.jobs.to_string(),
                    format!("{:.0}", s.avg_jct_s),
                    format!("{:.0}", s.p99_jct_s),
                    format!("{:.0}", s.avg_queue_s),
                    format!("{:.1}%", s.gpu_utilization * 100.0),
                    format!("{:.1}%", s.shared_gpu_fraction * 100.0),
                    s.unfinished.to_string(),
                ]
                .into_iter()
                .map(|c| (c, Mark::None))
                .collect()
            })
        })
        .collect();
    Table {
        head: head.iter().map(|h| h.to_string()).collect(),
        rows,
    }
}

/// The sweep's report: the summary table, the figures, then every simulation.
pub fn report(sweep: &Sweep) -> Report {
    let mut sections = vec![
        Section::Heading("Summary".into()),
        Section::Text("The mean over each point's runs (seeds × traces) of the whole-cluster rows; in brackets, the least and the most.".into()),
        Section::Table(summary_table(sweep)),
        Section::Heading(format!("Against {}", sweep.key)),
        Section::Text(format!(
            "Each line goes through the mean over seeds (and traces) of the whole-cluster rows; {}.",
            if most_runs(sweep) > 1 { "the band around it spans their minimum to maximum" } else { "one seed: no spread to show" }
        )),
    ];
    let (curves, cdfs): (Vec<Figure>, Vec<Figure>) = figures(sweep)
        .into_iter()
        .partition(|f| !f.id.starts_with("jct_cdf_"));
    sections.extend(curves.into_iter().map(Section::Figure));
    sections.push(Section::Heading("JCT CDF at each value".into()));
    sections.extend(cdfs.into_iter().map(Section::Figure));
    sections.push(Section::Heading("Every simulation".into()));
    sections.push(Section::Table(every_simulation(sweep)));
    Report {
        title: format!("{}: sweep over {}", sweep.scenario, sweep.key),
        facts: vec![
            ("scenario".into(), sweep.scenario.clone()),
            ("swept key".into(), sweep.key.clone()),
            (
                "values".into(),
                sweep
                    .points
                    .iter()
                    .map(|p| p.value.clone())
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            ("seeds".into(), seeds(sweep)),
            ("Arbiter".into(), VERSION.into()),
        ],
        sections,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::first_table_and_figure;
    use arbiter_policy::PolicyKind;
    use arbiter_sim::scenario::ResultRow;

    /// A whole-cluster row of `policy` at `seed` with an average JCT of `hours`.
    fn row(policy: PolicyKind, seed: u64, hours: f64) -> ResultRow {
        ResultRow {
            trace: "t".into(),
            policy,
            tenant: "all".into(),
            seed,
            summary: Summary {
                avg_jct_s: hours * 3_600.0,
                p99_jct_s: 2.0 * hours * 3_600.0,
                gpu_utilization: 0.5,
                ..Summary::default()
            },
            events: 0,
            wall_s: 0.0,
            capacity_gpus: 8,
            stranded_gpu_fraction: 0.0,
            quota_reclaims: None,
            records: Vec::new(),
            warnings: Vec::new(),
            timeline: Vec::new(),
            reclaimed: Vec::new(),
            quota_tree: None,
        }
    }

    /// Two loads (given in decreasing order), fifo at two seeds each: 10 and 14 h, then 20 and 30 h.
    fn sweep(seeds: &[u64]) -> Sweep {
        let point = |x: f64, hours: [f64; 2]| SweepPoint {
            value: x.to_string(),
            x,
            results: seeds
                .iter()
                .map(|&s| row(PolicyKind::Fifo, s, hours[s as usize % 2]))
                .collect(),
            jcts_by_policy: BTreeMap::from([(
                "fifo".to_string(),
                vec![hours[0] * 3_600.0, hours[1] * 3_600.0],
            )]),
        };
        Sweep {
            scenario: "s".into(),
            key: "load".into(),
            points: vec![point(2.0, [20.0, 30.0]), point(1.0, [10.0, 14.0])],
        }
    }

    fn avg_jct(sweep: &Sweep) -> String {
        figures(sweep)
            .into_iter()
            .find(|f| f.id == "avg_jct")
            .expect("avg_jct")
            .svg
    }

    #[test]
    fn several_seeds_draw_a_min_max_band_around_the_mean_in_one_unit() {
        let svg = avg_jct(&sweep(&[0, 1]));
        // The band: upper edge 14 h → 30 h, lower edge back 20 h → 10 h, in x order.
        let (lines, bands) = against(&sweep(&[0, 1]), |s| s.avg_jct_s);
        assert_eq!(
            lines[0].points,
            vec![(1.0, 12.0 * 3_600.0), (2.0, 25.0 * 3_600.0)]
        );
        assert_eq!(
            bands[0].points,
            vec![
                (1.0, 10.0 * 3_600.0, 14.0 * 3_600.0),
                (2.0, 20.0 * 3_600.0, 30.0 * 3_600.0)
            ]
        );
        assert_eq!(svg.matches("fill-opacity").count(), 1, "one band");
        assert!(svg.contains("line: mean of 2 runs") && svg.contains("band: min–max"));
        // Hours on every tick, named once (the axis reaches 30 h: it read `1.04d` at 25 h).
        let y_ticks: Vec<&str> = svg
            .split(r#"text-anchor="end">"#)
            .skip(1)
            .filter_map(|t| t.split('<').next())
            .collect();
        assert_eq!(y_ticks, ["0", "10", "20", "30"]);
        assert!(svg.contains("average JCT (hours)"));
        // One seed: no spread, no band.
        let one = avg_jct(&sweep(&[0]));
        assert!(!one.contains("fill-opacity") && one.contains("one run per point"));
    }

    #[test]
    fn the_summary_table_comes_first_with_the_spread() {
        let html = report(&sweep(&[0, 1])).to_html();
        let (table, figure) = first_table_and_figure(&html);
        assert!(table.is_some() && table < figure, "{table:?} {figure:?}");
        // Load 2: mean 25 h (20–30 h), in seconds.
        assert!(
            html.contains("<td>90000\u{a0}(72000\u{2060}–\u{2060}108000)</td>"),
            "{html}"
        );
        assert!(
            html.find(">Every simulation</h2>") > figure,
            "the table of every run stays last"
        );
    }
}
