//! The report of a trace characterization (`arbiter trace analyze FILE --report DIR`): what the
//! Philly study (ATC'19) and Helios (SC'21) show about a cluster's workload.

use crate::chart::{Axis, BarChart, Bars, Format, Line, LineChart};
use crate::{Figure, Mark, Report, Section, Table, VERSION, figures};
use arbiter_trace::analysis::TraceAnalysis;

/// Tenants drawn in the per-tenant figure (the rest are in the table).
pub const TENANTS_DRAWN: usize = 20;

/// The report of `analysis`, for the trace called `name`.
pub fn report(name: &str, analysis: &TraceAnalysis) -> Report {
    let caption = format!("{name} · {} jobs · Arbiter {VERSION}", analysis.jobs);
    let sizes: Vec<String> = analysis
        .sizes
        .iter()
        .map(|s| format!("{} GPU", s.gpus))
        .collect();
    let mut figures = vec![
        Figure {
            id: "size-shares".into(),
            svg: BarChart {
                title: format!("{name}: jobs and GPU-time by job size"),
                caption: caption.clone(),
                categories: sizes.clone(),
                y: Axis::linear("share", Format::Percent),
                series: vec![
                    Bars::new("jobs", analysis.sizes.iter().map(|s| s.job_share).collect()),
                    Bars::new(
                        "GPU-time",
                        analysis.sizes.iter().map(|s| s.gpu_time_share).collect(),
                    ),
                ],
            }
            .to_svg(),
        },
        Figure {
            id: "duration-cdf".into(),
            svg: LineChart {
                title: format!("{name}: job duration CDF by size"),
                caption: caption.clone(),
                x: Axis::log("duration (log)", Format::Seconds),
                y: Axis::fraction("jobs of the size"),
                lines: analysis
                    .sizes
                    .iter()
                    .zip(&sizes)
                    .map(|(s, label)| Line {
                        label: label.clone(),
                        points: figures::steps(&s.duration_cdf),
                    })
                    .collect(),
            }
            .to_svg(),
        },
        Figure {
            id: "tenant-load".into(),
            svg: BarChart {
                title: format!("{name}: GPU-time by tenant (largest {TENANTS_DRAWN})"),
                caption: caption.clone(),
                categories: analysis
                    .tenants
                    .iter()
                    .take(TENANTS_DRAWN)
                    .map(|t| t.tenant.clone())
                    .collect(),
                y: Axis::linear("share of GPU-time", Format::Percent),
                series: vec![Bars::new(
                    "GPU-time",
                    analysis
                        .tenants
                        .iter()
                        .take(TENANTS_DRAWN)
                        .map(|t| t.gpu_time_share)
                        .collect(),
                )],
            }
            .to_svg(),
        },
    ];
    let arrivals = |id: &str, title: &str, categories: Vec<String>, counts: &[usize]| Figure {
        id: id.into(),
        svg: BarChart {
            title: format!("{name}: {title}"),
            caption: caption.clone(),
            categories,
            y: Axis::linear("jobs submitted", Format::Number),
            series: vec![Bars::new(
                "submissions",
                counts.iter().map(|&c| c as f64).collect(),
            )],
        }
        .to_svg(),
    };
    if let Some(hours) = &analysis.arrivals_by_hour {
        figures.push(arrivals(
            "arrivals-hour",
            "arrivals by hour of day (trace clock)",
            (0..24).map(|h| format!("{h}")).collect(),
            hours,
        ));
    }
    if let Some(days) = &analysis.arrivals_by_weekday {
        let names = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
            .map(String::from)
            .to_vec();
        figures.push(arrivals(
            "arrivals-weekday",
            "arrivals by day of week",
            names,
            days,
        ));
    }
    let size_table = Table {
        head: [
            "size",
            "jobs",
            "share of jobs",
            "GPU-hours",
            "share of GPU-time",
            "p50 duration s",
            "p90 duration s",
        ]
        .map(String::from)
        .to_vec(),
        rows: analysis
            .sizes
            .iter()
            .map(|s| {
                [
                    format!("{} GPU", s.gpus),
                    s.jobs.to_string(),
                    format!("{:.1}%", s.job_share * 100.0),
                    format!("{:.0}", s.gpu_hours),
                    format!("{:.1}%", s.gpu_time_share * 100.0),
                    format!("{:.0}", s.p50_duration_s),
                    format!("{:.0}", s.p90_duration_s),
                ]
                .into_iter()
                .map(|c| (c, Mark::None))
                .collect()
            })
            .collect(),
    };
    let tenant_table = Table {
        head: [
            "tenant",
            "jobs",
            "GPU-hours",
            "share of GPU-time",
            "mean GPUs per job",
        ]
        .map(String::from)
        .to_vec(),
        rows: analysis
            .tenants
            .iter()
            .map(|t| {
                [
                    t.tenant.clone(),
                    t.jobs.to_string(),
                    format!("{:.0}", t.gpu_hours),
                    format!("{:.1}%", t.gpu_time_share * 100.0),
                    format!("{:.2}", t.mean_gpus),
                ]
                .into_iter()
                .map(|c| (c, Mark::None))
                .collect()
            })
            .collect(),
    };
    let mut sections = vec![
        Section::Heading("Job sizes".into()),
        Section::Text(format!(
            "The largest 1% of jobs (by GPU-time) hold {:.1}% of the GPU-time; the largest 10% hold {:.1}%.",
            analysis.top_1pct_gpu_time_share * 100.0,
            analysis.top_10pct_gpu_time_share * 100.0
        )),
        Section::Table(size_table),
    ];
    let mut figures = figures.into_iter();
    sections.extend(figures.by_ref().take(2).map(Section::Figure));
    sections.push(Section::Heading("Tenants".into()));
    sections.extend(figures.by_ref().take(1).map(Section::Figure));
    sections.push(Section::Table(tenant_table));
    let arrivals: Vec<Section> = figures.map(Section::Figure).collect();
    if !arrivals.is_empty() {
        sections.push(Section::Heading("Arrivals".into()));
        sections.extend(arrivals);
    }
    Report {
        title: format!("{name}: trace characterization"),
        facts: vec![
            ("trace".into(), name.into()),
            ("jobs".into(), analysis.jobs.to_string()),
            ("GPU-hours".into(), format!("{:.0}", analysis.gpu_hours)),
            ("tenants".into(), analysis.tenants.len().to_string()),
            ("Arbiter".into(), VERSION.into()),
        ],
        sections,
    }
}

/// The report of a pod list (`trace analyze --format pai-pods --report DIR`): requests by
/// class, final phases per class, and the GPU shares the fractional pods ask for.
pub fn pod_report(name: &str, analysis: &arbiter_trace::pai::PodAnalysis) -> Report {
    let caption = format!("{name} · {} pods · Arbiter {VERSION}", analysis.pods);
    let classes: Vec<String> = analysis.classes.iter().map(|c| c.class.clone()).collect();
    let mut phases: Vec<&String> = analysis.phases.keys().collect();
    phases.sort();
    let figures = [
        Figure {
            id: "pod-classes".into(),
            svg: BarChart {
                title: format!("{name}: pods and GPU demand by request"),
                caption: caption.clone(),
                categories: classes.clone(),
                y: Axis::linear("share", Format::Percent),
                series: vec![
                    Bars::new(
                        "pods",
                        analysis.classes.iter().map(|c| c.pod_share).collect(),
                    ),
                    Bars::new(
                        "GPUs asked for",
                        analysis
                            .classes
                            .iter()
                            .map(|c| c.gpu_demand_share)
                            .collect(),
                    ),
                ],
            }
            .to_svg(),
        },
        Figure {
            id: "pod-phases".into(),
            svg: BarChart {
                title: format!("{name}: final phase by request"),
                caption: caption.clone(),
                categories: classes,
                y: Axis {
                    bounds: Some((0.0, 1.0)),
                    ..Axis::linear("share of the class's pods", Format::Percent)
                },
                series: phases
                    .iter()
                    .map(|phase| {
                        Bars::new(
                            phase.as_str(),
                            analysis
                                .classes
                                .iter()
                                .map(|c| c.phases.get(*phase).copied().unwrap_or(0.0))
                                .collect(),
                        )
                    })
                    .collect(),
            }
            .to_svg(),
        },
        Figure {
            id: "gpu-share-cdf".into(),
            svg: LineChart {
                title: format!("{name}: GPU share asked for by pods sharing a GPU"),
                caption,
                x: Axis {
                    bounds: Some((0.0, 1000.0)),
                    ..Axis::linear("thousandths of a GPU", Format::Number)
                },
                y: Axis::fraction("fractional pods"),
                lines: vec![Line {
                    label: "pods".into(),
                    points: figures::steps(&analysis.fractional_milli_cdf),
                }],
            }
            .to_svg(),
        },
    ];
    let pct = |x: f64| format!("{:.1}%", x * 100.0);
    let table = Table {
        head: std::iter::once("request".to_string())
            .chain(["pods", "share", "GPU demand", "p50 lifetime s"].map(String::from))
            .chain(phases.iter().map(|p| p.to_string()))
            .collect(),
        rows: analysis
            .classes
            .iter()
            .map(|c| {
                [
                    c.class.clone(),
                    c.pods.to_string(),
                    pct(c.pod_share),
                    pct(c.gpu_demand_share),
                    format!("{:.0}", c.p50_lifetime_s),
                ]
                .into_iter()
                .chain(
                    phases
                        .iter()
                        .map(|p| pct(c.phases.get(*p).copied().unwrap_or(0.0))),
                )
                .map(|c| (c, Mark::None))
                .collect()
            })
            .collect(),
    };
    let named = |m: &std::collections::BTreeMap<String, f64>| {
        m.iter()
            .map(|(k, v)| format!("{k} {}", pct(*v)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut sections = vec![
        Section::Heading("Requests".into()),
        Section::Text(format!(
            "{} of the GPU pods ask for a share of one GPU; {} are constrained to GPU types. QoS: {}.",
            pct(analysis.fractional_share_of_gpu_pods),
            pct(analysis.gpu_type_constrained_share),
            named(&analysis.qos)
        )),
        Section::Table(table),
    ];
    sections.extend(figures.into_iter().map(Section::Figure));
    Report {
        title: format!("{name}: pod list characterization"),
        facts: vec![
            ("pod list".into(), name.into()),
            ("pods".into(), analysis.pods.to_string()),
            (
                "GPUs asked for".into(),
                format!("{:.1}", analysis.gpu_demand),
            ),
            ("final phases".into(), named(&analysis.phases)),
            ("Arbiter".into(), VERSION.into()),
        ],
        sections,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{curves, first_table_and_figure, is_staircase};
    use arbiter_trace::analysis::SizeClass;

    #[test]
    fn a_few_jobs_durations_are_drawn_as_steps_after_the_table() {
        // Two 1-GPU jobs, 1 min and 1 h: the CDF is a jump to 50% at 1 min, flat to 1 h, a jump
        // to 100% (it was a ramp from (1 min, 50%) to (1 h, 100%)).
        let size = SizeClass {
            gpus: "1".into(),
            jobs: 2,
            job_share: 1.0,
            gpu_hours: 61.0 / 60.0,
            gpu_time_share: 1.0,
            p50_duration_s: 60.0,
            p90_duration_s: 3_600.0,
            duration_cdf: vec![(60.0, 0.5), (3_600.0, 1.0)],
        };
        let analysis = TraceAnalysis {
            jobs: 2,
            gpu_hours: size.gpu_hours,
            sizes: vec![size],
            tenants: Vec::new(),
            top_1pct_gpu_time_share: 1.0,
            top_10pct_gpu_time_share: 1.0,
            arrivals_by_hour: None,
            arrivals_by_weekday: None,
        };
        let page = report("two.csv", &analysis);
        let cdf = page
            .figures()
            .find(|f| f.id == "duration-cdf")
            .expect("the duration CDF");
        let lines = curves(&cdf.svg);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].len(), 4, "{:?}", lines[0]);
        assert!(is_staircase(&lines[0]), "{:?}", lines[0]);
        let (table, figure) = first_table_and_figure(&page.to_html());
        assert!(table < figure, "the size table comes before the figures");
    }
}
