//! The report of a scenario run (`arbiter run FILE --report DIR`).

use crate::chart::{Axis, BarChart, Bars, Fill, Format, Line, LineChart, label};
use crate::figures::{self, TenantShare};
use crate::panels::{Marks, Panel, SmallMultiples};
use crate::{Figure, Mark, Report, Section, Table, VERSION, gantt, slug};
use arbiter_policy::PolicyKind;
use arbiter_sim::Window;
use arbiter_sim::scenario::{Comparison, ResultRow, Scenario};

/// Queueing delays under this are drawn at it on the log axis (a job that started at once has
/// no place on a log scale).
pub const MIN_DELAY_S: f64 = 1.0;

/// What a run report is made of.
pub struct RunInput<'a> {
    /// The scenario that ran (name, file, seeds, window, tenant weights).
    pub scenario: &'a Scenario,
    /// Its result rows, with records (and timelines where recorded).
    pub rows: &'a [ResultRow],
    /// Published numbers next to ours.
    pub comparisons: &'a [Comparison],
}

/// How the report names each policy: its kind's name, unless renamed. The Python bindings run a
/// policy written in Python as the kind `external`, and the report names it as the results do
/// (its class's name, or its `name`).
#[derive(Clone, Copy, Debug, Default)]
pub struct PolicyNames<'a> {
    /// Kinds named otherwise, with their names.
    pub renamed: &'a [(PolicyKind, &'a str)],
}

impl<'a> PolicyNames<'a> {
    /// The name of `kind` in the report.
    pub fn of(&self, kind: PolicyKind) -> &'a str {
        self.renamed
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(kind.name(), |(_, name)| name)
    }
}

/// A number of seconds for a table.
fn secs(v: f64) -> String {
    format!("{v:.0}")
}

/// The table of every result row.
fn results_table(rows: &[ResultRow], names: PolicyNames<'_>) -> Table {
    let head = [
        "trace",
        "tenant",
        "policy",
        "seed",
        "jobs",
        "unfinished",
        "avg JCT s",
        "p50 JCT s",
        "p99 JCT s",
        "avg queue s",
        "util",
        "shared",
        "guest",
        "preempt/job",
        "max ρ",
    ];
    Table {
        head: head.iter().map(|h| h.to_string()).collect(),
        rows: rows
            .iter()
            .map(|r| {
                let s = &r.summary;
                [
                    r.trace.clone(),
                    r.tenant.clone(),
                    names.of(r.policy).to_string(),
                    r.seed.to_string(),
                    s.jobs.to_string(),
                    s.unfinished.to_string(),
                    secs(s.avg_jct_s),
                    secs(s.p50_jct_s),
                    secs(s.p99_jct_s),
                    secs(s.avg_queue_s),
                    format!("{:.1}%", s.gpu_utilization * 100.0),
                    format!("{:.1}%", s.shared_gpu_fraction * 100.0),
                    format!("{:.1}%", s.guest_gpu_fraction * 100.0),
                    format!("{:.2}", s.preemptions_per_job),
                    format!("{:.2}", s.max_ftf_rho),
                ]
                .into_iter()
                .map(|c| (c, Mark::None))
                .collect()
            })
            .collect(),
    }
}

/// Published vs ours, each row marked within (green) or outside (red) its tolerance.
pub fn published_table(comparisons: &[Comparison]) -> Table {
    published_table_named(comparisons, PolicyNames::default())
}

/// [`published_table`], naming policies with `names`.
fn published_table_named(comparisons: &[Comparison], names: PolicyNames<'_>) -> Table {
    let head = [
        "trace",
        "policy",
        "tenant",
        "metric",
        "published",
        "ours",
        "diff",
        "tolerance",
        "verdict",
        "source",
    ];
    Table {
        head: head.iter().map(|h| h.to_string()).collect(),
        rows: comparisons
            .iter()
            .map(|c| {
                let p = &c.published;
                let (verdict, mark) =
                    match (&c.not_comparable_because, c.relative_diff, p.tolerance) {
                        (Some(because), _, _) => (format!("not comparable: {because}"), Mark::None),
                        (None, None, _) => ("not run".to_string(), Mark::None),
                        (None, Some(_), None) => ("no tolerance given".to_string(), Mark::None),
                        (None, Some(d), Some(t)) if d.abs() <= t + 1e-12 => {
                            ("within".to_string(), Mark::Good)
                        }
                        (None, Some(_), Some(_)) => ("outside".to_string(), Mark::Bad),
                    };
                vec![
                    (p.trace.clone(), Mark::None),
                    (names.of(p.policy).to_string(), Mark::None),
                    (p.tenant.clone(), Mark::None),
                    (p.metric.clone(), Mark::None),
                    (
                        format!("{:.4}", p.value)
                            .trim_end_matches('0')
                            .trim_end_matches('.')
                            .to_string(),
                        Mark::None,
                    ),
                    (
                        c.ours
                            .map(|o| {
                                format!("{o:.4}")
                                    .trim_end_matches('0')
                                    .trim_end_matches('.')
                                    .to_string()
                            })
                            .unwrap_or_else(|| "-".into()),
                        Mark::None,
                    ),
                    (
                        c.relative_diff
                            .map(|d| format!("{:+.1}%", d * 100.0))
                            .unwrap_or_else(|| "-".into()),
                        mark,
                    ),
                    (
                        p.tolerance
                            .map(|t| format!("±{:.0}%", t * 100.0))
                            .unwrap_or_else(|| "-".into()),
                        Mark::None,
                    ),
                    (verdict, mark),
                    (p.source.clone().unwrap_or_default(), Mark::None),
                ]
            })
            .collect(),
    }
}

/// Rows sharing a key, at the first seed the key has, in row order.
struct Group<'a, K> {
    key: K,
    seed: u64,
    rows: Vec<&'a ResultRow>,
}

/// The simulations to draw — rows with a timeline (or, where none was recorded, with records)
/// — grouped by `key`, each group at its key's first seed.
fn first_seed_groups<'a, K: PartialEq>(
    rows: &'a [ResultRow],
    key: impl Fn(&'a ResultRow) -> K,
) -> Vec<Group<'a, K>> {
    let timelines = rows.iter().any(|r| !r.timeline.is_empty());
    let drawn = |r: &&ResultRow| {
        if timelines {
            !r.timeline.is_empty()
        } else {
            !r.records.is_empty()
        }
    };
    let mut out: Vec<Group<K>> = Vec::new();
    for r in rows.iter().filter(drawn) {
        let k = key(r);
        match out.iter_mut().find(|g| g.key == k) {
            Some(g) if g.seed == r.seed => g.rows.push(r),
            Some(_) => {}
            None => out.push(Group {
                key: k,
                seed: r.seed,
                rows: vec![r],
            }),
        }
    }
    out
}

/// One figure group per (trace, tenant).
type TraceGroup<'a> = Group<'a, (&'a str, &'a str)>;

fn groups(rows: &[ResultRow]) -> Vec<TraceGroup<'_>> {
    first_seed_groups(rows, |r| (r.trace.as_str(), r.tenant.as_str()))
}

impl TraceGroup<'_> {
    fn trace(&self) -> &str {
        self.key.0
    }

    fn tenant(&self) -> &str {
        self.key.1
    }

    /// `trace`, or `trace / tenant` for a tenant's own cluster.
    fn name(&self) -> String {
        if self.tenant() == "all" {
            self.trace().to_string()
        } else {
            format!("{} / {}", self.trace(), self.tenant())
        }
    }
}

impl TraceGroup<'_> {
    /// A figure id of this group.
    fn id(&self, what: &str) -> String {
        slug(&[self.trace(), self.tenant(), what])
    }
}

/// The figures of one group.
fn group_figures(
    group: &TraceGroup,
    scenario: &Scenario,
    window: Window,
    names: PolicyNames<'_>,
) -> Vec<Figure> {
    let caption = format!(
        "{} · {} · seed {} · Arbiter {VERSION}",
        scenario.name,
        group.name(),
        group.seed
    );
    let mut out = cdf_figures(group, &caption, window, names);
    out.extend(over_time_figures(group, &caption, names));
    out.extend(tenant_share_figure(
        group,
        &caption,
        &scenario.policy.config.tenant_weights,
        names,
    ));
    out
}

/// What a CDF is drawn of, per simulation.
type Sample = fn(&ResultRow, Window) -> Vec<f64>;

/// The CDFs of one group, a step line per policy: JCT, queueing delay, finish-time fairness.
fn cdf_figures(
    group: &TraceGroup,
    caption: &str,
    window: Window,
    names: PolicyNames<'_>,
) -> Vec<Figure> {
    let charts: [(&str, &str, Axis, Sample); 3] = [
        (
            "jct-cdf",
            "JCT CDF",
            Axis::log("job completion time (log)", Format::Seconds),
            |r, w| figures::jcts(&r.records, w),
        ),
        (
            "queue-cdf",
            "queueing delay CDF",
            Axis::log(
                "queueing delay (log; under 1 s drawn at 1 s)",
                Format::Seconds,
            ),
            |r, w| {
                figures::queueing_delays(&r.records, w)
                    .into_iter()
                    .map(|d| d.max(MIN_DELAY_S))
                    .collect()
            },
        ),
        (
            "ftf-rho",
            "finish-time fairness ρ (Themis) CDF",
            Axis::log(
                "ρ = JCT / time on a fair 1/N share (log; > 1 is unfair)",
                Format::Number,
            ),
            |r, w| {
                arbiter_sim::metrics::ftf_rhos(&r.records, w, r.capacity_gpus)
                    .into_iter()
                    .map(|(_, rho)| rho)
                    .collect()
            },
        ),
    ];
    let mut out = Vec::new();
    for (id, title, x, sample) in charts {
        let lines = group
            .rows
            .iter()
            .map(|r| Line {
                label: names.of(r.policy).to_string(),
                points: figures::cdf(sample(r, window)),
            })
            .collect();
        let chart = LineChart {
            title: format!("{}: {title}", group.name()),
            caption: caption.to_string(),
            x,
            y: Axis::fraction("jobs"),
            lines,
        };
        if chart.has_data() {
            out.push(Figure {
                id: group.id(id),
                svg: chart.to_svg(),
            });
        }
    }
    out
}

/// A simulation's series over `[from, to]`.
type OverTime<'a> = &'a dyn Fn(&ResultRow, f64, f64) -> Vec<Line>;

/// Utilization and jobs waiting over time, one panel per policy over shared axes (drawn over
/// each other, several policies' 400 noisy bins were an unreadable tangle). Each GPU counts once
/// however many jobs run on it; what sharing adds is a second, dashed series in the panels of
/// the policies that shared GPUs.
fn over_time_figures(group: &TraceGroup, caption: &str, names: PolicyNames<'_>) -> Vec<Figure> {
    // Every row gets its panel (empty without a timeline), so that panel i has policy i's colour.
    let panels = |series: OverTime| -> Vec<Panel> {
        group
            .rows
            .iter()
            .map(|r| {
                let span =
                    figures::span(&r.records, &r.timeline).filter(|_| !r.timeline.is_empty());
                let lines = span.map_or_else(Vec::new, |(from, to)| {
                    series(r, from, to)
                        .into_iter()
                        .map(|l| Line {
                            points: l.points.into_iter().map(|(t, v)| (t - from, v)).collect(),
                            ..l
                        })
                        .collect()
                });
                Panel {
                    label: names.of(r.policy).to_string(),
                    lines,
                    marks: None,
                }
            })
            .collect()
    };
    let utilization = panels(&|r, from, to| {
        let mut lines = vec![Line {
            label: "GPUs in use".into(),
            points: figures::utilization(&r.timeline, r.capacity_gpus, from, to),
        }];
        if r.summary.shared_gpu_fraction > 0.0 {
            lines.push(Line {
                label: "shared (> 1 job)".into(),
                points: figures::shared_utilization(&r.timeline, r.capacity_gpus, from, to),
            });
        }
        lines
    });
    let waiting = panels(&|r, from, to| {
        vec![Line {
            label: "jobs waiting".into(),
            points: figures::queue_length(&r.records, &r.timeline, from, to),
        }]
    });
    let caption = format!("{} · {caption}", bins_stated(group));
    let charts = [
        // The vertical scale from the data, not fixed at 100%: an engine that over-counts shows it.
        (
            "utilization",
            "GPU utilization over time",
            Axis::linear("GPUs in use (each GPU once)", Format::Percent),
            utilization,
        ),
        (
            "queue-length",
            "jobs waiting over time",
            Axis::linear("jobs waiting", Format::Number),
            waiting,
        ),
    ];
    let x = Axis::linear("time since the first submission", Format::Seconds);
    let mut out = Vec::new();
    for (id, title, y, panels) in charts {
        let chart = SmallMultiples {
            title: format!("{}: {title}", group.name()),
            caption: caption.clone(),
            x: x.clone(),
            y,
            panels,
        };
        if chart.has_data() {
            out.push(Figure {
                id: group.id(id),
                svg: chart.to_svg(),
            });
        }
    }
    out
}

/// What a point over time is: the mean over one of [`figures::TIME_BINS`] bins of its run,
/// with the bins' length (runs differ in length, so a range where they do).
fn bins_stated(group: &TraceGroup) -> String {
    let widths: Vec<f64> = group
        .rows
        .iter()
        .filter(|r| !r.timeline.is_empty())
        .filter_map(|r| figures::span(&r.records, &r.timeline))
        .map(|(from, to)| (to - from) / figures::TIME_BINS as f64)
        .collect();
    let (lo, hi) = widths.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &w| {
        (lo.min(w), hi.max(w))
    });
    let length = match (label(lo, Format::Seconds), label(hi, Format::Seconds)) {
        _ if widths.is_empty() => String::new(),
        (a, b) if a == b => format!(" of {a}"),
        (a, b) => format!(" of {a}–{b}"),
    };
    format!(
        "each point: the mean over a bin{length} (1/{} of the run)",
        figures::TIME_BINS
    )
}

/// GPU time received against the fair share per tenant, each policy in its own hue: what it
/// got solid, its fair share (which depends on how long the policy kept each tenant's jobs in
/// the system) a light bar of the same hue beside it. Left out for a single tenant, or where a
/// simulation kept no timeline.
fn tenant_share_figure(
    group: &TraceGroup,
    caption: &str,
    weights: &std::collections::BTreeMap<String, f64>,
    names: PolicyNames<'_>,
) -> Option<Figure> {
    let tenants: std::collections::BTreeSet<&str> = group
        .rows
        .first()?
        .records
        .iter()
        .map(|j| j.tenant.as_str())
        .collect();
    if tenants.len() < 2 || group.rows.iter().any(|r| r.timeline.is_empty()) {
        return None;
    }
    let shares: Vec<Vec<TenantShare>> = group
        .rows
        .iter()
        .map(|r| figures::tenant_shares(&r.records, &r.timeline, r.capacity_gpus, weights))
        .collect();
    let mut series = Vec::with_capacity(shares.len() * 2);
    for (p, (r, s)) in group.rows.iter().zip(&shares).enumerate() {
        let policy = names.of(r.policy);
        let got = Bars::new(
            format!("{policy} got, Jain {:.3}", figures::jain_index(s)),
            s.iter().map(|t| t.received).collect(),
        );
        series.push(Bars {
            hue: Some(p),
            ..got
        });
        let fair = Bars::new(
            format!("{policy} fair share"),
            s.iter().map(|t| t.entitled).collect(),
        );
        series.push(Bars {
            hue: Some(p),
            fill: Fill::Light,
            ..fair
        });
    }
    let chart = BarChart {
        title: format!(
            "{}: GPU time received (solid) vs fair share (light)",
            group.name()
        ),
        caption: caption.to_string(),
        categories: shares[0].iter().map(|s| s.tenant.clone()).collect(),
        y: Axis::linear("share of the cluster's GPU time", Format::Percent),
        series,
    };
    Some(Figure {
        id: group.id("tenant-share"),
        svg: chart.to_svg(),
    })
}

/// Under a quota tree, what each tenant (leaf of the tree) got over time: a table of its
/// guaranteed quota and limit against the GPUs it held and borrowed on average and at most, and
/// its reclaims; then, per policy, a panel per leaf with the GPUs held (solid, over its area),
/// the guaranteed quota (dashed), the GPUs held beyond it (borrowed, dotted) and ticks on the
/// bottom edge where its jobs were reclaimed. Nothing for a simulation without a quota tree or a
/// timeline.
fn quota_sections(group: &TraceGroup, caption: &str, names: PolicyNames<'_>) -> Vec<Section> {
    let runs: Vec<(
        &ResultRow,
        &arbiter_sim::QuotaLayout,
        f64,
        Vec<figures::QuotaUse>,
    )> = group
        .rows
        .iter()
        .copied()
        .filter(|r| !r.timeline.is_empty())
        .filter_map(|r| {
            let layout = r.quota_tree.as_deref()?;
            let (from, to) = figures::span(&r.records, &r.timeline)?;
            let uses = figures::quota_use(layout, &r.records, &r.timeline, &r.reclaimed, from, to);
            Some((r, layout, from, uses))
        })
        .collect();
    if runs.is_empty() {
        return Vec::new();
    }
    let mut table = Table {
        head: [
            "tenant",
            "policy",
            "guaranteed",
            "limit",
            "avg held",
            "avg borrowed",
            "peak held",
            "peak borrowed",
            "reclaims",
            "GPUs reclaimed",
        ]
        .map(String::from)
        .to_vec(),
        rows: Vec::new(),
    };
    for (leaf, _) in runs[0].1.leaves.iter().enumerate() {
        for (r, layout, _, uses) in &runs {
            let (Some(l), Some(u)) = (layout.leaves.get(leaf), uses.get(leaf)) else {
                continue;
            };
            table.rows.push(
                [
                    l.path.clone(),
                    names.of(r.policy).to_string(),
                    by_dim(&layout.dims, l.guaranteed.iter().map(|g| Some(*g))),
                    by_dim(&layout.dims, l.limit.iter().copied()),
                    format!("{:.1}", u.mean_held),
                    format!("{:.1}", u.mean_borrowed),
                    u.peak_held.to_string(),
                    u.peak_borrowed.to_string(),
                    u.reclaims.len().to_string(),
                    u.reclaims.iter().map(|(_, g)| g).sum::<u32>().to_string(),
                ]
                .into_iter()
                .map(|c| (c, Mark::None))
                .collect(),
            );
        }
    }
    let mut sections = vec![
        Section::Text(format!(
            "Quota tree of {}: each tenant (leaf of the tree) against its guaranteed quota. GPUs count as the quota counts them — every GPU of a running job's placement, a guest's none; borrowed: held beyond the guaranteed quota (per GPU type, summed); a reclaim: a running job preempted so that an owner's jobs get its guaranteed quota back. Averages over the run, from the first submission to the last finish.",
            group.name()
        )),
        Section::Table(table),
    ];
    let caption = format!("{} · {caption}", bins_stated(group));
    for (r, layout, from, uses) in &runs {
        let any_reclaim = uses.iter().any(|u| !u.reclaims.is_empty());
        let panels = layout
            .leaves
            .iter()
            .zip(uses)
            .map(|(l, u)| {
                let shift = |points: &[(f64, f64)]| -> Vec<(f64, f64)> {
                    points.iter().map(|&(t, v)| (t - from, v)).collect()
                };
                let guaranteed = f64::from(l.guaranteed.iter().sum::<u32>());
                Panel {
                    label: l.name.clone(),
                    lines: vec![
                        Line {
                            label: "GPUs held".into(),
                            points: shift(&u.held),
                        },
                        Line {
                            label: format!("guaranteed ({guaranteed})"),
                            points: u
                                .held
                                .iter()
                                .map(|&(t, _)| (t - from, guaranteed))
                                .collect(),
                        },
                        Line {
                            label: "borrowed".into(),
                            points: shift(&u.borrowed),
                        },
                    ],
                    marks: any_reclaim.then(|| Marks {
                        label: format!("reclaimed ({})", u.reclaims.len()),
                        at: u.reclaims.iter().map(|(t, _)| t - from).collect(),
                    }),
                }
            })
            .collect();
        let chart = SmallMultiples {
            title: format!(
                "{} under {}: GPUs held vs guaranteed quota, borrowed, reclaims",
                group.name(),
                names.of(r.policy)
            ),
            caption: caption.clone(),
            x: Axis::linear("time since the first submission", Format::Seconds),
            y: Axis::linear("GPUs", Format::Number),
            panels,
        };
        if chart.has_data() {
            sections.push(Section::Figure(Figure {
                id: group.id(&format!("quota-{}", names.of(r.policy))),
                svg: chart.to_svg(),
            }));
        }
    }
    sections
}

/// Numbers per quota dimension: the one number for a tree that counts every GPU together,
/// else `a100 8 · v100 4`; `None` reads `none` (no limit).
fn by_dim(dims: &[String], values: impl Iterator<Item = Option<u32>>) -> String {
    let values: Vec<String> = values
        .map(|v| v.map_or("none".to_string(), |v| v.to_string()))
        .collect();
    if dims.len() == 1 {
        return values.into_iter().next().unwrap_or_default();
    }
    dims.iter()
        .zip(values)
        .map(|(d, v)| format!("{d} {v}"))
        .collect::<Vec<_>>()
        .join(" · ")
}

/// Lines a by-size figure may have before it is left out (one per trace × policy).
pub const MAX_SIZE_LINES: usize = 10;

/// Queueing delay by job size (the Philly study's Figure of delay per size class): for each
/// size class, the delay CDF of every (trace, policy) at its first seed, pooled over tenants;
/// and a table of the median and p90. Left out where more than [`MAX_SIZE_LINES`] lines would
/// crowd each chart.
fn delay_by_size(
    rows: &[ResultRow],
    scenario: &Scenario,
    window: Window,
    names: PolicyNames<'_>,
) -> Vec<Section> {
    // (trace, policy) → the first seed's simulations (one per tenant with per-tenant clusters).
    let lines = first_seed_groups(rows, |r| (r.trace.as_str(), names.of(r.policy)));
    if lines.is_empty() || lines.len() > MAX_SIZE_LINES {
        return Vec::new();
    }
    let one_policy = lines.iter().all(|g| g.key.1 == lines[0].key.1);
    let one_trace = lines.iter().all(|g| g.key.0 == lines[0].key.0);
    let label = |(trace, policy): (&str, &str)| match (one_trace, one_policy) {
        (_, true) => trace.to_string(),
        (true, false) => policy.to_string(),
        _ => format!("{trace} · {policy}"),
    };
    let seeds: Vec<String> = lines
        .iter()
        .map(|g| g.seed.to_string())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let caption = format!(
        "{} · seed {} · Arbiter {VERSION}",
        scenario.name,
        seeds.join(",")
    );
    let mut sections = vec![
        Section::Heading("Queueing delay by job size".into()),
        Section::Text(format!(
            "Queueing delay (first start − submission) of the measured jobs by GPUs requested, as the Philly study (ATC'19) shows it; delays under {MIN_DELAY_S} s are drawn at {MIN_DELAY_S} s."
        )),
    ];
    let mut table = Table {
        head: [
            "size",
            "run",
            "jobs",
            "p50 delay s",
            "p90 delay s",
            "mean delay s",
        ]
        .map(String::from)
        .to_vec(),
        rows: Vec::new(),
    };
    for (class, lo, hi) in arbiter_trace::analysis::SIZE_CLASSES {
        let mut chart_lines = Vec::new();
        for Group {
            key, rows: group, ..
        } in &lines
        {
            let mut delays: Vec<f64> = group
                .iter()
                .flat_map(|r| r.records.iter())
                .filter(|r| window.contains(r.job) && (lo..=hi).contains(&r.gpus))
                .filter_map(arbiter_sim::JobRecord::queue_s)
                .collect();
            delays.sort_by(f64::total_cmp);
            if delays.is_empty() {
                continue;
            }
            let mean = delays.iter().sum::<f64>() / delays.len() as f64;
            table.rows.push(
                [
                    format!("{class} GPU"),
                    label(*key),
                    delays.len().to_string(),
                    secs(arbiter_sim::metrics::percentile(&delays, 0.5)),
                    secs(arbiter_sim::metrics::percentile(&delays, 0.9)),
                    secs(mean),
                ]
                .into_iter()
                .map(|c| (c, Mark::None))
                .collect(),
            );
            chart_lines.push(Line {
                label: label(*key),
                points: figures::cdf(delays.iter().map(|d| d.max(MIN_DELAY_S))),
            });
        }
        let chart = LineChart {
            title: format!("queueing delay of {class}-GPU jobs"),
            caption: caption.clone(),
            x: Axis::log("queueing delay (log)", Format::Seconds),
            y: Axis::fraction("jobs of the size"),
            lines: chart_lines,
        };
        if chart.has_data() {
            sections.push(Section::Figure(Figure {
                id: slug(&["delay-by-size", &class.replace('>', "gt")]),
                svg: chart.to_svg(),
            }));
        }
    }
    sections.push(Section::Table(table));
    sections
}

/// The whole run report.
pub fn report(input: &RunInput) -> Report {
    report_named(input, PolicyNames::default())
}

/// The whole run report, naming policies with `names`.
pub fn report_named(input: &RunInput, names: PolicyNames<'_>) -> Report {
    let scenario = input.scenario;
    let window = scenario.window;
    let mut facts = vec![
        ("scenario".to_string(), scenario.name.clone()),
        ("file".to_string(), scenario.file.display().to_string()),
    ];
    if let Some(d) = &scenario.description {
        facts.push(("description".into(), d.clone()));
    }
    facts.push((
        "seeds".into(),
        scenario
            .run_seeds()
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    ));
    if !scenario.input_changes.overrides.is_empty() {
        facts.push((
            "overrides".into(),
            scenario.input_changes.overrides.join(" "),
        ));
    }
    if window != Window::default() {
        facts.push((
            "measured jobs".into(),
            format!("ids {:?} to {:?}", window.first_job, window.last_job),
        ));
    }
    facts.push(("Arbiter".into(), VERSION.into()));
    // The summary table first: the numbers a reader compares, then the figures that explain them.
    let mut sections = vec![
        Section::Heading("Summary".into()),
        Section::Table(results_table(input.rows, names)),
    ];
    if !input.comparisons.is_empty() {
        sections.push(Section::Heading("Published vs ours".into()));
        sections.push(Section::Text("Our number is the mean over seeds; green: within the scenario's tolerance, red: outside.".into()));
        sections.push(Section::Table(published_table_named(
            input.comparisons,
            names,
        )));
    }
    sections.extend(delay_by_size(input.rows, scenario, window, names));
    let groups = groups(input.rows);
    if groups.is_empty() {
        sections.push(Section::Text(
            "No simulation kept its per-job records; there is nothing to draw.".into(),
        ));
    }
    let figure_lists: Vec<(String, Vec<Figure>, Vec<Section>)> = {
        use rayon::prelude::*;
        groups
            .par_iter()
            .map(|g| {
                let caption = format!(
                    "{} · {} · seed {} · Arbiter {VERSION}",
                    scenario.name,
                    g.name(),
                    g.seed
                );
                (
                    g.name(),
                    group_figures(g, scenario, window, names),
                    quota_sections(g, &caption, names),
                )
            })
            .collect()
    };
    for (name, figures, quota) in figure_lists {
        sections.push(Section::Heading(name));
        sections.extend(figures.into_iter().map(Section::Figure));
        sections.extend(quota);
    }
    if let Some(first) = groups.first() {
        sections.push(Section::Heading(format!("Gantt: {}", first.trace())));
        sections.push(Section::Text(format!(
            "The first {} measured jobs of {} under each policy (seed {}): GPU rows by node, one colour per job.",
            gantt::GANTT_JOBS,
            first.trace(),
            first.seed
        )));
        for r in &first.rows {
            if r.timeline.is_empty() {
                continue;
            }
            let (bars, labels) = gantt::bars(&r.timeline, |j| window.contains(j));
            let title = format!(
                "{} under {}: jobs on GPUs",
                first.trace(),
                names.of(r.policy)
            );
            let caption = format!(
                "{} · seed {} · Arbiter {VERSION}",
                scenario.name, first.seed
            );
            sections.push(Section::Figure(Figure {
                id: slug(&[first.trace(), first.tenant(), "gantt", names.of(r.policy)]),
                svg: gantt::to_svg(&title, &caption, &bars, &labels),
            }));
        }
    }
    Report {
        title: format!("{}: simulation report", scenario.name),
        facts,
        sections,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chart::{COLORS, tint};
    use crate::test_support::{curves, first_table_and_figure, is_staircase, record, segment};
    use arbiter_policy::PolicyKind;
    use arbiter_sim::Summary;

    /// A scenario as if it were `scenarios/t.toml` of this repository (nothing is read).
    fn scenario() -> Scenario {
        let text = "name = \"t\"\npolicies = [\"fifo\", \"srtf\"]\n[[trace]]\nname = \"hand\"\nformat = \"tiresias\"\npath = \"../data/tiresias/60_job.csv\"\n";
        Scenario::parse(
            text,
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/t.toml"),
            &[],
        )
        .expect("scenario")
    }

    /// Two tenants' 4-GPU jobs on 4 GPUs, one after the other, under `policy`.
    fn row(policy: PolicyKind) -> ResultRow {
        ResultRow {
            trace: "hand".into(),
            policy,
            tenant: "all".into(),
            seed: 0,
            summary: Summary::default(),
            events: 0,
            wall_s: 0.0,
            capacity_gpus: 4,
            stranded_gpu_fraction: 0.0,
            quota_reclaims: None,
            reclaimed: Vec::new(),
            quota_tree: None,
            records: vec![
                record(0, "a", 0.0, 0.0, 100.0, 4),
                record(1, "b", 0.0, 100.0, 200.0, 4),
                record(2, "b", 50.0, 200.0, 230.0, 2),
            ],
            warnings: Vec::new(),
            timeline: vec![
                segment(0, 0.0, 100.0, 4),
                segment(1, 100.0, 200.0, 4),
                segment(2, 200.0, 230.0, 2),
            ],
        }
    }

    fn page() -> Report {
        let (scenario, rows) = (scenario(), [row(PolicyKind::Fifo), row(PolicyKind::Srtf)]);
        report(&RunInput {
            scenario: &scenario,
            rows: &rows,
            comparisons: &[],
        })
    }

    fn figure(report: &Report, id: &str) -> String {
        report
            .figures()
            .find(|f| f.id == id)
            .unwrap_or_else(|| panic!("{id}"))
            .svg
            .clone()
    }

    #[test]
    fn a_renamed_policy_carries_its_name_everywhere_the_kind_would_show() {
        let (scenario, rows) = (
            scenario(),
            [row(PolicyKind::Fifo), row(PolicyKind::External)],
        );
        let input = RunInput {
            scenario: &scenario,
            rows: &rows,
            comparisons: &[],
        };
        let renamed = [(PolicyKind::External, "PythonSRTF")];
        let report = report_named(&input, PolicyNames { renamed: &renamed });
        let html = report.to_html();
        assert!(!html.contains("external"), "the kind's name is nowhere");
        assert!(
            html.contains("<td>PythonSRTF</td>") || html.contains(">PythonSRTF<"),
            "in the summary table"
        );
        assert!(
            figure(&report, "hand-all-jct-cdf").contains("PythonSRTF"),
            "in the CDFs' legend"
        );
        assert!(
            figure(&report, "hand-all-utilization").contains("PythonSRTF"),
            "in the panels' labels"
        );
        assert!(
            report
                .figures()
                .any(|f| f.id == "hand-all-gantt-pythonsrtf" || f.id.contains("gantt-python")),
            "its Gantt chart"
        );
        // Unrenamed, the kind's name.
        assert!(
            report_named(&input, PolicyNames::default())
                .to_html()
                .contains("external")
        );
    }

    #[test]
    fn the_summary_table_comes_before_the_figures() {
        let html = page().to_html();
        let (table, figure) = first_table_and_figure(&html);
        assert!(table.is_some() && table < figure, "{table:?} {figure:?}");
        assert!(
            html.find("avg JCT s") < figure,
            "the first table is the results'"
        );
    }

    #[test]
    fn each_policy_has_one_hue_for_what_it_got_and_its_fair_share() {
        let svg = figure(&page(), "hand-all-tenant-share");
        // The paint of each bar, by its tooltip's series.
        let paint = |series: &str| -> Vec<String> {
            svg.split("<rect ")
                .filter(|r| r.contains(&format!("\"><title>{series}")))
                .map(|r| {
                    r.split(['>', '/'])
                        .next()
                        .unwrap_or("")
                        .split("height=")
                        .nth(1)
                        .unwrap_or("")
                        .to_string()
                })
                .collect()
        };
        for (i, policy) in ["fifo", "srtf"].into_iter().enumerate() {
            let (hue, light) = (COLORS[i], tint(COLORS[i], 0.6));
            let got = paint(&format!("{policy} got"));
            let fair = paint(&format!("{policy} fair share"));
            assert_eq!(got.len(), 2, "a bar per tenant: {got:?}");
            assert!(
                got.iter().all(|p| p.ends_with(&format!("fill=\"{hue}\""))),
                "{got:?}"
            );
            assert!(
                fair.iter().all(|p| p.ends_with(&format!(
                    "fill=\"{light}\" stroke=\"{hue}\" stroke-width=\"1.5\""
                ))),
                "{fair:?}"
            );
        }
        assert!(svg.contains("received (solid) vs fair share (light)"));
    }

    #[test]
    fn a_run_under_a_quota_tree_shows_each_tenant_against_its_quota_with_its_reclaims() {
        use arbiter_sim::{QuotaLayout, QuotaLeaf, QuotaReclaim};
        let leaf = |name: &str, guaranteed: u32| QuotaLeaf {
            name: name.into(),
            path: name.into(),
            guaranteed: vec![guaranteed],
            limit: vec![None],
            tenants: vec![name.into()],
        };
        let quota = |mut r: ResultRow| {
            r.quota_reclaims = Some(1);
            r.reclaimed = vec![QuotaReclaim {
                job: 1,
                at_s: 150.0,
            }];
            r.quota_tree = Some(std::sync::Arc::new(QuotaLayout {
                dims: vec!["all".into()],
                dim_of_node: vec![0],
                leaves: vec![leaf("a", 1), leaf("b", 3)],
            }));
            r
        };
        let scenario = scenario();
        let rows = [quota(row(PolicyKind::Fifo)), quota(row(PolicyKind::Srtf))];
        let report = report(&RunInput {
            scenario: &scenario,
            rows: &rows,
            comparisons: &[],
        });
        let html = report.to_html();
        assert!(html.contains("Quota tree of hand"), "its section");
        // b held 4 GPUs for 100–200 s and 2 for 200–230 s of the 230 s: (400 + 60) / 230 = 2.0
        // on average, 1 of them above its 3 guaranteed for 100 s: 0.4; one reclaim of 4 GPUs.
        assert!(
            html.contains("<td>b</td><td>fifo</td><td>3</td><td>none</td><td>2.0</td><td>0.4</td><td>4</td><td>1</td><td>1</td><td>4</td>"),
            "{}",
            &html[html.find("Quota tree of hand").unwrap_or(0)..][..2_000]
        );
        for policy in ["fifo", "srtf"] {
            let svg = figure(&report, &format!("hand-all-quota-{policy}"));
            assert!(svg.contains(&format!(
                "hand under {policy}: GPUs held vs guaranteed quota"
            )));
            assert!(
                svg.contains("guaranteed (3)") && svg.contains("reclaimed (1)"),
                "{svg}"
            );
            // One panel per tenant, b's reclaim a tick on its panel's bottom edge.
            assert_eq!(svg.matches(r##"fill="none" stroke="#444""##).count(), 2);
            assert_eq!(svg.matches("v-9").count(), 1, "one tick");
        }
        // Without a quota tree, no such section.
        assert!(!page().to_html().contains("Quota tree of"));
    }

    #[test]
    fn utilization_over_time_is_one_panel_per_policy_and_cdfs_are_steps() {
        let report = page();
        for id in ["hand-all-utilization", "hand-all-queue-length"] {
            let svg = figure(&report, id);
            assert_eq!(
                svg.matches(r##"fill="none" stroke="#444""##).count(),
                2,
                "{id}: a panel per policy"
            );
            assert!(
                svg.contains("time since the first submission (minutes)")
                    && svg.contains("each point: the mean over a bin of"),
                "{id}: unit and bins stated"
            );
        }
        for id in ["hand-all-jct-cdf", "hand-all-queue-cdf", "hand-all-ftf-rho"] {
            let lines = curves(&figure(&report, id));
            assert_eq!(lines.len(), 2, "{id}");
            assert!(
                lines.iter().all(|l| l.len() >= 2 && is_staircase(l)),
                "{id}: {lines:?}"
            );
        }
    }
}
