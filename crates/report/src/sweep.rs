//! Figures and the report of a sweep (`arbiter sweep ... --out DIR [--report DIR]`): average
//! and tail JCT, queueing delay and utilization against the swept key (Gavel's Figure 8), and
//! the JCT CDF at each value.

use crate::chart::{Axis, Format, Line, LineChart};
use crate::{figures, slug, Figure, Mark, Report, ReportError, Section, Table, VERSION};
use arbiter_sim::sweep::Sweep;
use arbiter_sim::Summary;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The mean over seeds (and traces) of a metric of the `all` rows, per policy, per point.
fn mean_metric(sweep: &Sweep, metric: impl Fn(&Summary) -> f64) -> Vec<Line> {
    let mut lines: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for point in &sweep.points {
        let mut by_policy: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for r in point.results.iter().filter(|r| r.tenant == "all") {
            by_policy.entry(r.policy.name()).or_default().push(metric(&r.summary));
        }
        for (policy, v) in by_policy {
            lines.entry(policy.to_string()).or_default().push((point.x, v.iter().sum::<f64>() / v.len() as f64));
        }
    }
    lines.into_iter().map(|(label, points)| Line { label, points }).collect()
}

/// The sweep's figures: the metrics against the key, then one JCT CDF per value.
pub fn figures(sweep: &Sweep) -> Vec<Figure> {
    let caption = format!(
        "{} · {} swept · seeds {} · Arbiter {VERSION}",
        sweep.scenario,
        sweep.key,
        seeds(sweep)
    );
    let against = |title: &str, y: Axis, metric: fn(&Summary) -> f64| LineChart {
        title: format!("{}: {title}", sweep.scenario),
        caption: caption.clone(),
        x: Axis::linear(&sweep.key, Format::Number),
        y,
        lines: mean_metric(sweep, metric),
    };
    let mut charts = vec![
        ("avg_jct".to_string(), against("average JCT", Axis::linear("average JCT", Format::Seconds), |s| s.avg_jct_s)),
        ("p99_jct".to_string(), against("99th-percentile JCT", Axis::linear("p99 JCT", Format::Seconds), |s| s.p99_jct_s)),
        ("avg_queue".to_string(), against("average queueing delay", Axis::linear("average queueing delay", Format::Seconds), |s| s.avg_queue_s)),
        (
            "utilization".to_string(),
            against("GPU utilization", Axis { bounds: Some((0.0, 1.0)), ..Axis::linear("GPU utilization", Format::Percent) }, |s| s.gpu_utilization),
        ),
    ];
    for p in &sweep.points {
        charts.push((
            format!("jct_cdf_{}", slug(&[&p.value])),
            LineChart {
                title: format!("JCT CDF at {} = {}", sweep.key, p.value),
                caption: caption.clone(),
                x: Axis::log("job completion time (log)", Format::Seconds),
                y: Axis::fraction("jobs"),
                lines: p.jcts_by_policy.iter().map(|(label, v)| Line { label: label.clone(), points: figures::cdf(v.iter().copied()) }).collect(),
            },
        ));
    }
    charts.into_iter().filter(|(_, c)| c.has_data()).map(|(id, c)| Figure { id, svg: c.to_svg() }).collect()
}

fn seeds(sweep: &Sweep) -> String {
    let mut seeds: Vec<u64> = sweep.points.iter().flat_map(|p| p.results.iter().map(|r| r.seed)).collect();
    seeds.sort_unstable();
    seeds.dedup();
    seeds.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}

/// Writes the figures as SVG files into `dir` (`avg_jct.svg`, `jct_cdf_<value>.svg`, ...);
/// returns them.
pub fn write_figures(sweep: &Sweep, dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
    std::fs::create_dir_all(dir).map_err(|source| ReportError::Io { path: dir.to_path_buf(), source })?;
    figures(sweep)
        .into_iter()
        .map(|f| {
            let path = dir.join(format!("{}.svg", f.id));
            std::fs::write(&path, f.svg).map_err(|source| ReportError::Io { path: path.clone(), source })?;
            Ok(path)
        })
        .collect()
}

/// The sweep's report: a table of every point and the figures.
pub fn report(sweep: &Sweep) -> Report {
    let head = ["value", "trace", "tenant", "policy", "seed", "jobs", "avg JCT s", "p99 JCT s", "avg queue s", "util", "shared", "unfinished"];
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
    let mut sections = vec![
        Section::Heading(format!("Against {}", sweep.key)),
        Section::Text("Each point is the mean over seeds (and traces) of the whole-cluster rows.".into()),
    ];
    let figures = figures(sweep);
    let (curves, cdfs): (Vec<Figure>, Vec<Figure>) = figures.into_iter().partition(|f| !f.id.starts_with("jct_cdf_"));
    sections.extend(curves.into_iter().map(Section::Figure));
    sections.push(Section::Heading("JCT CDF at each value".into()));
    sections.extend(cdfs.into_iter().map(Section::Figure));
    sections.push(Section::Heading("Every simulation".into()));
    sections.push(Section::Table(Table { head: head.iter().map(|h| h.to_string()).collect(), rows }));
    Report {
        title: format!("{}: sweep over {}", sweep.scenario, sweep.key),
        facts: vec![
            ("scenario".into(), sweep.scenario.clone()),
            ("swept key".into(), sweep.key.clone()),
            ("values".into(), sweep.points.iter().map(|p| p.value.clone()).collect::<Vec<_>>().join(", ")),
            ("seeds".into(), seeds(sweep)),
            ("Arbiter".into(), VERSION.into()),
        ],
        sections,
    }
}
