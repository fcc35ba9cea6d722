//! The report of a scenario run (`arbiter run FILE --report DIR`).

use crate::chart::{Axis, BarChart, Bars, Fill, Format, Line, LineChart};
use crate::figures::{self, TenantShare};
use crate::{gantt, slug, Figure, Mark, Report, Section, Table, VERSION};
use arbiter_sim::scenario::{Comparison, ResultRow, Scenario};
use arbiter_sim::Window;

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

/// A number of seconds for a table.
fn secs(v: f64) -> String {
    format!("{v:.0}")
}

/// The table of every result row.
fn results_table(rows: &[ResultRow]) -> Table {
    let head = [
        "trace", "tenant", "policy", "seed", "jobs", "unfinished", "avg JCT s", "p50 JCT s", "p99 JCT s", "avg queue s", "util",
        "shared", "guest", "preempt/job", "max ρ",
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
                    r.policy.name().to_string(),
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
    let head = ["trace", "policy", "tenant", "metric", "published", "ours", "diff", "tolerance", "verdict", "source"];
    Table {
        head: head.iter().map(|h| h.to_string()).collect(),
        rows: comparisons
            .iter()
            .map(|c| {
                let p = &c.published;
                let (verdict, mark) = match (&c.not_comparable_because, c.relative_diff, p.tolerance) {
                    (Some(because), _, _) => (format!("not comparable: {because}"), Mark::None),
                    (None, None, _) => ("not run".to_string(), Mark::None),
                    (None, Some(_), None) => ("no tolerance given".to_string(), Mark::None),
                    (None, Some(d), Some(t)) if d.abs() <= t + 1e-12 => ("within".to_string(), Mark::Good),
                    (None, Some(_), Some(_)) => ("outside".to_string(), Mark::Bad),
                };
                vec![
                    (p.trace.clone(), Mark::None),
                    (p.policy.name().to_string(), Mark::None),
                    (p.tenant.clone(), Mark::None),
                    (p.metric.clone(), Mark::None),
                    (format!("{:.4}", p.value).trim_end_matches('0').trim_end_matches('.').to_string(), Mark::None),
                    (c.ours.map(|o| format!("{o:.4}").trim_end_matches('0').trim_end_matches('.').to_string()).unwrap_or_else(|| "-".into()), Mark::None),
                    (c.relative_diff.map(|d| format!("{:+.1}%", d * 100.0)).unwrap_or_else(|| "-".into()), mark),
                    (p.tolerance.map(|t| format!("±{:.0}%", t * 100.0)).unwrap_or_else(|| "-".into()), Mark::None),
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
fn first_seed_groups<'a, K: PartialEq>(rows: &'a [ResultRow], key: impl Fn(&'a ResultRow) -> K) -> Vec<Group<'a, K>> {
    let timelines = rows.iter().any(|r| !r.timeline.is_empty());
    let drawn = |r: &&ResultRow| if timelines { !r.timeline.is_empty() } else { !r.records.is_empty() };
    let mut out: Vec<Group<K>> = Vec::new();
    for r in rows.iter().filter(drawn) {
        let k = key(r);
        match out.iter_mut().find(|g| g.key == k) {
            Some(g) if g.seed == r.seed => g.rows.push(r),
            Some(_) => {}
            None => out.push(Group { key: k, seed: r.seed, rows: vec![r] }),
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
        if self.tenant() == "all" { self.trace().to_string() } else { format!("{} / {}", self.trace(), self.tenant()) }
    }
}

/// The figures of one group.
fn group_figures(group: &TraceGroup, scenario: &Scenario, window: Window) -> Vec<Figure> {
    let name = group.name();
    let caption = format!("{} · {} · seed {} · Arbiter {VERSION}", scenario.name, name, group.seed);
    let id = |what: &str| slug(&[group.trace(), group.tenant(), what]);
    let line_chart = |title: &str, x: Axis, y: Axis, lines: Vec<Line>| LineChart { title: format!("{name}: {title}"), caption: caption.clone(), x, y, lines };
    let per_policy = |points: &dyn Fn(&ResultRow) -> Vec<(f64, f64)>| -> Vec<Line> {
        group.rows.iter().map(|r| Line { label: r.policy.name().to_string(), points: points(r) }).collect()
    };
    let mut out = Vec::new();
    let mut push = |id: String, chart: LineChart| {
        if chart.has_data() {
            out.push(Figure { id, svg: chart.to_svg() });
        }
    };
    push(
        id("jct-cdf"),
        line_chart(
            "JCT CDF",
            Axis::log("job completion time (log)", Format::Seconds),
            Axis::fraction("jobs"),
            per_policy(&|r| figures::cdf(figures::jcts(&r.records, window))),
        ),
    );
    push(
        id("queue-cdf"),
        line_chart(
            "queueing delay CDF",
            Axis::log("queueing delay (log; under 1 s drawn at 1 s)", Format::Seconds),
            Axis::fraction("jobs"),
            per_policy(&|r| figures::cdf(figures::queueing_delays(&r.records, window).into_iter().map(|d| d.max(MIN_DELAY_S)))),
        ),
    );
    /// A series over `[from, to]` of one simulation.
    type OverTime<'a> = &'a dyn Fn(&ResultRow, f64, f64) -> Vec<(f64, f64)>;
    let over_time = |series: OverTime| {
        per_policy(&|r| match figures::span(&r.records, &r.timeline) {
            Some((from, to)) if !r.timeline.is_empty() => series(r, from, to).into_iter().map(|(t, v)| (t - from, v)).collect(),
            _ => Vec::new(),
        })
    };
    // Each GPU counted once however many jobs run on it; what sharing adds is drawn beside, not
    // inside: a second line per policy that shared GPUs, the GPUs with more than one job.
    let mut utilization = over_time(&|r, from, to| figures::utilization(&r.timeline, r.capacity_gpus, from, to));
    let shared = over_time(&|r, from, to| {
        if r.summary.shared_gpu_fraction > 0.0 { figures::shared_utilization(&r.timeline, r.capacity_gpus, from, to) } else { Vec::new() }
    });
    utilization.extend(shared.into_iter().filter(|l| !l.points.is_empty()).map(|l| Line { label: format!("{} shared", l.label), ..l }));
    push(
        id("utilization"),
        line_chart(
            "GPU utilization over time",
            Axis::linear("time since the first submission", Format::Seconds),
            // From the data, not fixed at 100%: an engine that over-counts shows it.
            Axis::linear("GPUs in use (each once; shared: more than one job)", Format::Percent),
            utilization,
        ),
    );
    push(
        id("queue-length"),
        line_chart(
            "jobs waiting over time",
            Axis::linear("time since the first submission", Format::Seconds),
            Axis::linear("jobs waiting (mean per bin)", Format::Number),
            over_time(&|r, from, to| figures::queue_length(&r.records, &r.timeline, from, to)),
        ),
    );
    push(
        id("ftf-rho"),
        line_chart(
            "finish-time fairness ρ (Themis) CDF",
            Axis::log("ρ = JCT / time on a fair 1/N share (log; > 1 is unfair)", Format::Number),
            Axis::fraction("jobs"),
            per_policy(&|r| {
                figures::cdf(arbiter_sim::metrics::ftf_rhos(&r.records, window, r.capacity_gpus).into_iter().map(|(_, rho)| rho))
            }),
        ),
    );
    let weights = &scenario.policy.tenant_weights;
    let tenants: std::collections::BTreeSet<&str> = group.rows.first().map(|r| r.records.iter().map(|j| j.tenant.as_str()).collect()).unwrap_or_default();
    if tenants.len() < 2 {
        return out;
    }
    let shares: Vec<(String, Vec<TenantShare>)> =
        group.rows.iter().map(|r| (r.policy.name().to_string(), figures::tenant_shares(&r.records, &r.timeline, r.capacity_gpus, weights))).collect();
    if group.rows.iter().all(|r| !r.timeline.is_empty()) {
        let tenants: Vec<String> = shares[0].1.iter().map(|s| s.tenant.clone()).collect();
        // Each policy's received bars next to its own entitlement (demand, and so the fair
        // share, depends on how long the policy kept a tenant's jobs in the system).
        // One hue per policy: what it got solid, its fair share a light bar of that hue beside it.
        let mut series: Vec<Bars> = Vec::new();
        for (p, (policy, s)) in shares.iter().enumerate() {
            let got = Bars::new(format!("{policy} got, Jain {:.3}", figures::jain_index(s)), s.iter().map(|t| t.received).collect());
            series.push(Bars { hue: Some(p), ..got });
            let fair = Bars::new(format!("{policy} fair share"), s.iter().map(|t| t.entitled).collect());
            series.push(Bars { hue: Some(p), fill: Fill::Light, ..fair });
        }
        let chart = BarChart {
            title: format!("{name}: GPU time received (solid) vs fair share (light)"),
            caption: caption.clone(),
            categories: tenants,
            y: Axis::linear("share of the cluster's GPU time", Format::Percent),
            series,
        };
        out.push(Figure { id: id("tenant-share"), svg: chart.to_svg() });
    }
    out
}

/// Lines a by-size figure may have before it is left out (one per trace × policy).
pub const MAX_SIZE_LINES: usize = 10;

/// Queueing delay by job size (the Philly study's Figure of delay per size class): for each
/// size class, the delay CDF of every (trace, policy) at its first seed, pooled over tenants;
/// and a table of the median and p90. Left out where more than [`MAX_SIZE_LINES`] lines would
/// crowd each chart.
fn delay_by_size(rows: &[ResultRow], scenario: &Scenario, window: Window) -> Vec<Section> {
    // (trace, policy) → the first seed's simulations (one per tenant with per-tenant clusters).
    let lines = first_seed_groups(rows, |r| (r.trace.as_str(), r.policy.name()));
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
    let seeds: Vec<String> = lines.iter().map(|g| g.seed.to_string()).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
    let caption = format!("{} · seed {} · Arbiter {VERSION}", scenario.name, seeds.join(","));
    let mut sections = vec![
        Section::Heading("Queueing delay by job size".into()),
        Section::Text(format!(
            "Queueing delay (first start − submission) of the measured jobs by GPUs requested, as the Philly study (ATC'19) shows it; delays under {MIN_DELAY_S} s are drawn at {MIN_DELAY_S} s."
        )),
    ];
    let mut table = Table {
        head: ["size", "run", "jobs", "p50 delay s", "p90 delay s", "mean delay s"].map(String::from).to_vec(),
        rows: Vec::new(),
    };
    for (class, lo, hi) in arbiter_trace::analysis::SIZE_CLASSES {
        let mut chart_lines = Vec::new();
        for Group { key, rows: group, .. } in &lines {
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
            chart_lines.push(Line { label: label(*key), points: figures::cdf(delays.iter().map(|d| d.max(MIN_DELAY_S))) });
        }
        let chart = LineChart {
            title: format!("queueing delay of {class}-GPU jobs"),
            caption: caption.clone(),
            x: Axis::log("queueing delay (log)", Format::Seconds),
            y: Axis::fraction("jobs of the size"),
            lines: chart_lines,
        };
        if chart.has_data() {
            sections.push(Section::Figure(Figure { id: slug(&["delay-by-size", &class.replace('>', "gt")]), svg: chart.to_svg() }));
        }
    }
    sections.push(Section::Table(table));
    sections
}

/// The whole run report.
pub fn report(input: &RunInput) -> Report {
    let scenario = input.scenario;
    let window = scenario.window;
    let mut facts = vec![("scenario".to_string(), scenario.name.clone()), ("file".to_string(), scenario.file.display().to_string())];
    if let Some(d) = &scenario.description {
        facts.push(("description".into(), d.clone()));
    }
    facts.push(("seeds".into(), scenario.run_seeds().iter().map(u64::to_string).collect::<Vec<_>>().join(", ")));
    if !scenario.input_changes.overrides.is_empty() {
        facts.push(("overrides".into(), scenario.input_changes.overrides.join(" ")));
    }
    if window != Window::default() {
        facts.push(("measured jobs".into(), format!("ids {:?} to {:?}", window.first_job, window.last_job)));
    }
    facts.push(("Arbiter".into(), VERSION.into()));
    let mut sections = Vec::new();
    if !input.comparisons.is_empty() {
        sections.push(Section::Heading("Published vs ours".into()));
        sections.push(Section::Text("Our number is the mean over seeds; green: within the scenario's tolerance, red: outside.".into()));
        sections.push(Section::Table(published_table(input.comparisons)));
    }
    sections.extend(delay_by_size(input.rows, scenario, window));
    let groups = groups(input.rows);
    if groups.is_empty() {
        sections.push(Section::Text("No simulation kept its per-job records; there is nothing to draw.".into()));
    }
    let figure_lists: Vec<(String, Vec<Figure>)> = {
        use rayon::prelude::*;
        groups
            .par_iter()
            .map(|g| {
                (g.name(), group_figures(g, scenario, window))
            })
            .collect()
    };
    for (name, figures) in figure_lists {
        sections.push(Section::Heading(name));
        sections.extend(figures.into_iter().map(Section::Figure));
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
            let title = format!("{} under {}: jobs on GPUs", first.trace(), r.policy.name());
            let caption = format!("{} · seed {} · Arbiter {VERSION}", scenario.name, first.seed);
            sections.push(Section::Figure(Figure {
                id: slug(&[first.trace(), first.tenant(), "gantt", r.policy.name()]),
                svg: gantt::to_svg(&title, &caption, &bars, &labels),
            }));
        }
    }
    // The table of every number last: the figures are what a reader came for.
    sections.push(Section::Heading("Every result".into()));
    sections.push(Section::Table(results_table(input.rows)));
    Report { title: format!("{}: simulation report", scenario.name), facts, sections }
}
