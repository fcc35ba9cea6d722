//! Plain-text tables for the terminal.

use arbiter_sim::Summary;
use arbiter_sim::scenario::{Comparison, ResultRow};
use arbiter_trace::Trace;
use std::fmt::Write;

/// Formats seconds with thousands separators.
pub fn secs(v: f64) -> String {
    let whole = v.round() as i64;
    let digits = whole.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    if whole < 0 { format!("-{out}") } else { out }
}

/// How a column is aligned.
#[derive(Clone, Copy)]
pub(crate) enum Align {
    Left,
    Right,
}

/// Renders rows under headers, each column as wide as its widest cell (so long policy names or
/// numbers never push later columns out of line), one space apart, without trailing spaces.
/// Cells are shown as [`shown`] makes them: control characters escaped, long ones cut.
pub(crate) fn render(headers: &[(&str, Align)], rows: &[Vec<String>]) -> String {
    let header: Vec<String> = headers.iter().map(|(h, _)| h.to_string()).collect();
    let cells: Vec<Vec<String>> = std::iter::once(&header)
        .chain(rows)
        .map(|row| row.iter().map(|c| shown(c)).collect())
        .collect();
    let mut widths: Vec<usize> = vec![0; headers.len()];
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut s = String::new();
    for row in &cells {
        let mut line = String::new();
        for (i, ((cell, (_, align)), &width)) in row.iter().zip(headers).zip(&widths).enumerate() {
            if i > 0 {
                line.push(' ');
            }
            // (Padded by hand: `format!`'s width stops at 65,535.)
            let pad = " ".repeat(width - cell.chars().count());
            match align {
                Align::Left => {
                    line.push_str(cell);
                    line.push_str(&pad);
                }
                Align::Right => {
                    line.push_str(&pad);
                    line.push_str(cell);
                }
            }
        }
        let _ = writeln!(s, "{}", line.trim_end());
    }
    s
}

/// The most characters a cell shows; longer ones end in `…`.
const CELL_CHARS: usize = 64;

/// A cell as a terminal may print it: control characters escaped (a name from a trace or a
/// tenant is not to move the cursor or ring the bell), cut to [`CELL_CHARS`].
pub(crate) fn shown(cell: &str) -> String {
    let mut escaped = String::with_capacity(cell.len());
    for c in cell.chars() {
        if c.is_control() {
            escaped.extend(c.escape_default());
        } else {
            escaped.push(c);
        }
    }
    if escaped.chars().count() <= CELL_CHARS {
        return escaped;
    }
    let mut cut: String = escaped.chars().take(CELL_CHARS - 1).collect();
    cut.push('…');
    cut
}

pub fn results_table(name: &str, rows: &[ResultRow]) -> String {
    use Align::{Left, Right};
    // Finish-time fairness (Themis' max ρ and share of jobs with ρ > 1) is shown when a policy
    // of that family ran; it is in every row's JSON.
    let fairness = rows.iter().any(|r| r.policy.descriptor().fairness_columns);
    let mut headers = vec![
        ("trace", Left),
        ("policy", Left),
        ("tenant", Left),
        ("seed", Right),
        ("jobs", Right),
        ("unfinished", Right),
        ("failed", Right),
        ("unplaceable", Right),
        ("avg JCT s", Right),
        ("p50 JCT s", Right),
        ("p99 JCT s", Right),
        ("avg queue s", Right),
        ("makespan s", Right),
        ("util", Right),
        ("wall s", Right),
    ];
    // Deadline columns when jobs have SLOs: first deadlines met, share of SLO value earned,
    // best-effort jobs' average JCT.
    let slos = rows.iter().any(|r| r.summary.deadlines_met.is_some());
    // Beside `util` when some policy shared GPUs: the share of the busy GPU time with more than
    // one job on a GPU, and the guests' own GPU time (on the scale of `util`) when some ran.
    let shared = rows.iter().any(|r| r.summary.shared_gpu_fraction > 0.0);
    let guests = rows.iter().any(|r| r.summary.guest_gpu_fraction > 0.0);
    if slos {
        headers.splice(
            14..14,
            [
                ("ddl met", Right),
                ("ddl value", Right),
                ("BE JCT s", Right),
            ],
        );
    }
    if fairness {
        headers.splice(14..14, [("max rho", Right), ("rho>1", Right)]);
    }
    // (Inserted last: right after `util`.)
    if guests {
        headers.insert(14, ("guest", Right));
    }
    if shared || guests {
        headers.insert(14, ("shared", Right));
    }
    // Under a quota tree (only then, so that other scenarios' tables stay as they were): the
    // running jobs it reclaimed for their owners' guaranteed quota, before `wall s`.
    let quotas = rows.iter().any(|r| r.quota_reclaims.is_some());
    if quotas {
        headers.insert(headers.len() - 1, ("reclaims", Right));
    }
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut cells = vec![
                r.trace.clone(),
                r.policy.name().to_string(),
                r.tenant.clone(),
                r.seed.to_string(),
                r.summary.jobs.to_string(),
                r.summary.unfinished.to_string(),
                r.summary.failed.to_string(),
                r.summary.unplaceable.to_string(),
                secs(r.summary.avg_jct_s),
                secs(r.summary.p50_jct_s),
                secs(r.summary.p99_jct_s),
                secs(r.summary.avg_queue_s),
                secs(r.summary.makespan_s),
                fixed(r.summary.gpu_utilization, 3),
                fixed(r.wall_s, 3),
            ];
            if slos {
                let pct = |v: Option<f64>| {
                    v.map_or("-".to_string(), |v| format!("{}%", fixed(100.0 * v, 1)))
                };
                cells.splice(
                    14..14,
                    [
                        pct(r.summary.deadlines_met),
                        pct(r.summary.deadline_value),
                        r.summary
                            .best_effort_avg_jct_s
                            .map_or("-".to_string(), secs),
                    ],
                );
            }
            if fairness {
                cells.splice(
                    14..14,
                    [
                        fixed(r.summary.max_ftf_rho, 2),
                        format!("{}%", fixed(100.0 * r.summary.ftf_unfair_fraction, 1)),
                    ],
                );
            }
            if guests {
                cells.insert(14, fixed(r.summary.guest_gpu_fraction, 3));
            }
            if shared || guests {
                cells.insert(14, fixed(r.summary.shared_gpu_fraction, 3));
            }
            if quotas {
                let reclaims = r.quota_reclaims.map_or("-".to_string(), |n| n.to_string());
                cells.insert(cells.len() - 1, reclaims);
            }
            cells
        })
        .collect();
    format!("scenario {name}\n{}", render(&headers, &cells))
}

/// `v` with `decimals` decimals, never as a negative zero (`-0.000`).
pub fn fixed(v: f64, decimals: usize) -> String {
    let text = format!("{v:.decimals$}");
    if text.starts_with('-') && text[1..].chars().all(|c| c == '0' || c == '.') {
        text[1..].to_string()
    } else {
        text
    }
}

/// Whether a comparison is within its tolerance, in words that need no colour (the HTML report
/// marks the same rows green and red): `+173.4%` and `+0.0%` must not look alike.
fn verdict(c: &Comparison) -> String {
    let tolerance = c
        .published
        .tolerance
        .map(|t| format!("±{}%", fixed(t * 100.0, 0)));
    match (c.within_tolerance, tolerance) {
        (Some(true), Some(t)) => format!("✓ within {t}"),
        (Some(false), Some(t)) => format!("✗ outside {t}"),
        _ if c.not_comparable_because.is_some() => "n/c".into(),
        _ if c.ours.is_none() => "not run".into(),
        _ => "no tolerance".into(),
    }
}

pub fn comparison_table(rows: &[Comparison]) -> String {
    use Align::{Left, Right};
    let headers = [
        ("trace", Left),
        ("policy", Left),
        ("tenant", Left),
        ("metric", Left),
        ("published", Right),
        ("ours", Right),
        ("diff", Right),
        ("verdict", Left),
        ("source", Left),
    ];
    let mut notes: Vec<String> = Vec::new();
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|c| {
            let diff = match (&c.not_comparable_because, c.relative_diff) {
                (Some(because), _) => {
                    if !notes.contains(because) {
                        notes.push(because.clone());
                    }
                    "n/c".to_string()
                }
                (None, Some(d)) => format!("{:+.1}%", d * 100.0),
                (None, None) => "-".into(),
            };
            let p = &c.published;
            vec![
                p.trace.clone(),
                p.policy.name().to_string(),
                p.tenant.clone(),
                p.metric.clone(),
                secs(p.value),
                c.ours.map(secs).unwrap_or_else(|| "-".into()),
                diff,
                verdict(c),
                p.source.clone().unwrap_or_default(),
            ]
        })
        .collect();
    let mut s = format!(
        "published numbers vs ours (mean over seeds)\n{}",
        render(&headers, &cells)
    );
    for note in notes {
        let _ = writeln!(s, "n/c: not comparable: {note}");
    }
    if let Some(counts) = verdict_counts(rows) {
        let _ = writeln!(s, "{counts}");
    }
    s
}

/// The verdicts counted (`12 within their tolerance, 1 outside (✗), 33 not run`), so that one
/// row outside among dozens is not missed; `None` where no row has a tolerance to judge by.
fn verdict_counts(rows: &[Comparison]) -> Option<String> {
    const KINDS: [&str; 5] = [
        "within their tolerance",
        "outside (✗)",
        "without a tolerance",
        "not comparable",
        "not run",
    ];
    let mut counts = [0usize; KINDS.len()];
    for c in rows {
        let kind = match c.within_tolerance {
            Some(true) => 0,
            Some(false) => 1,
            None if c.not_comparable_because.is_some() => 3,
            None if c.ours.is_none() => 4,
            None => 2,
        };
        counts[kind] += 1;
    }
    (counts[0] + counts[1] > 0).then(|| {
        KINDS
            .iter()
            .zip(counts)
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("{n} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    })
}

pub fn summary_text(s: &Summary) -> String {
    format!(
        "jobs {}  avg JCT {} s  p50 {} s  p95 {} s  p99 {} s  avg queue {} s  makespan {} s  GPU util {} (shared {}, guests {})  preemptions/job {}  unfinished {}  failed {}  unplaceable {}",
        s.jobs,
        secs(s.avg_jct_s),
        secs(s.p50_jct_s),
        secs(s.p95_jct_s),
        secs(s.p99_jct_s),
        secs(s.avg_queue_s),
        secs(s.makespan_s),
        fixed(s.gpu_utilization, 3),
        fixed(s.shared_gpu_fraction, 3),
        fixed(s.guest_gpu_fraction, 3),
        fixed(s.preemptions_per_job, 2),
        s.unfinished,
        s.failed,
        s.unplaceable
    )
}

pub fn trace_stats(trace: &Trace) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "jobs: {}", trace.jobs.len());
    for (rows, why) in &trace.skipped {
        let _ = writeln!(s, "skipped: {rows} rows {why}");
    }
    let slo = trace.jobs.iter().filter(|j| j.deadline.is_some()).count();
    if slo > 0 {
        let soft = trace
            .jobs
            .iter()
            .filter(|j| !j.deadline_options.is_empty())
            .count();
        let _ = writeln!(
            s,
            "with a deadline: {slo} ({soft} with several options), best effort: {}",
            trace.jobs.len() - slo
        );
    }
    let _ = writeln!(
        s,
        "submit span: {} s",
        secs(trace.submit_span().as_secs_f64())
    );
    let mut sizes = std::collections::BTreeMap::<u32, usize>::new();
    let mut tenants = std::collections::BTreeMap::<&str, usize>::new();
    let mut gpu_s = 0.0;
    for j in &trace.jobs {
        *sizes.entry(j.gpus).or_default() += 1;
        *tenants.entry(j.tenant.as_str()).or_default() += 1;
        gpu_s += j.gpu_seconds();
    }
    let _ = writeln!(s, "GPU-hours of work: {}", fixed(gpu_s / 3600.0, 1));
    let sizes: Vec<String> = sizes.iter().map(|(g, n)| format!("{g}:{n}")).collect();
    let _ = writeln!(s, "GPUs per job (size:count): {}", sizes.join(" "));
    let tenants: Vec<String> = tenants.iter().map(|(t, n)| format!("{t}:{n}")).collect();
    let _ = write!(s, "tenants (name:jobs): {}", tenants.join(" "));
    s
}

/// `arbiter trace analyze`: the Philly study's and Helios' views of a trace.
pub fn trace_analysis(a: &arbiter_trace::analysis::TraceAnalysis) -> String {
    let pct = |x: f64| format!("{:.1}%", 100.0 * x);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "jobs: {}, GPU-hours of work: {}",
        a.jobs,
        fixed(a.gpu_hours, 1)
    );
    let _ = writeln!(
        s,
        "GPU-time in the largest 1% of jobs: {}, in the largest 10%: {}",
        pct(a.top_1pct_gpu_time_share),
        pct(a.top_10pct_gpu_time_share)
    );
    let _ = writeln!(
        s,
        "\n{:<5} {:>8} {:>7} {:>12} {:>9} {:>12} {:>12}",
        "GPUs", "jobs", "share", "GPU-hours", "share", "p50 dur s", "p90 dur s"
    );
    for c in &a.sizes {
        let _ = writeln!(
            s,
            "{:<5} {:>8} {:>7} {:>12} {:>9} {:>12} {:>12}",
            c.gpus,
            c.jobs,
            pct(c.job_share),
            fixed(c.gpu_hours, 1),
            pct(c.gpu_time_share),
            secs(c.p50_duration_s),
            secs(c.p90_duration_s)
        );
    }
    let _ = writeln!(
        s,
        "\n{:<16} {:>8} {:>12} {:>9} {:>9}",
        "tenant", "jobs", "GPU-hours", "share", "mean GPUs"
    );
    for t in &a.tenants {
        let _ = writeln!(
            s,
            "{:<16} {:>8} {:>12} {:>9} {:>9.2}",
            t.tenant,
            t.jobs,
            fixed(t.gpu_hours, 1),
            pct(t.gpu_time_share),
            t.mean_gpus
        );
    }
    match (&a.arrivals_by_hour, &a.arrivals_by_weekday) {
        (Some(hours), Some(days)) => {
            let hours: Vec<String> = hours
                .iter()
                .enumerate()
                .map(|(h, n)| format!("{h:02}:{n}"))
                .collect();
            let _ = writeln!(
                s,
                "\narrivals by hour of day (trace clock): {}",
                hours.join(" ")
            );
            let names = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
            let days: Vec<String> = names
                .iter()
                .zip(days)
                .map(|(d, n)| format!("{d}:{n}"))
                .collect();
            let _ = write!(s, "arrivals by day of week: {}", days.join(" "));
        }
        _ => {
            let _ = write!(
                s,
                "\narrivals by hour and day: not available (the trace has no timestamps)"
            );
        }
    }
    s
}

/// A pod list characterized (`trace analyze --format pai-pods`).
pub fn pod_analysis(a: &arbiter_trace::pai::PodAnalysis) -> String {
    let pct = |x: f64| format!("{:.1}%", 100.0 * x);
    let named = |m: &std::collections::BTreeMap<String, f64>| {
        m.iter()
            .map(|(k, v)| format!("{k} {}", pct(*v)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "pods: {}, GPUs asked for: {} (a share of a GPU counted as its fraction)",
        a.pods,
        fixed(a.gpu_demand, 1)
    );
    let _ = writeln!(
        s,
        "GPU pods asking for a share of one GPU: {}; constrained to GPU types: {}",
        pct(a.fractional_share_of_gpu_pods),
        pct(a.gpu_type_constrained_share)
    );
    let _ = writeln!(s, "final phase: {}", named(&a.phases));
    let _ = writeln!(s, "QoS: {}", named(&a.qos));
    let _ = writeln!(
        s,
        "\n{:<9} {:>7} {:>7} {:>11} {:>13}  final phase",
        "request", "pods", "share", "GPU demand", "p50 life s"
    );
    for c in &a.classes {
        let _ = writeln!(
            s,
            "{:<9} {:>7} {:>7} {:>11} {:>13}  {}",
            c.class,
            c.pods,
            pct(c.pod_share),
            pct(c.gpu_demand_share),
            secs(c.p50_lifetime_s),
            named(&c.phases)
        );
    }
    s.trim_end().to_string()
}

pub fn sweep_table(sweep: &arbiter_sim::sweep::Sweep) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "sweep of {} over {} (mean average JCT over seeds, hours)",
        sweep.scenario, sweep.key
    );
    let by_policy = sweep.mean_avg_jct();
    let key = sweep.key.rsplit('.').next().unwrap_or(&sweep.key);
    let mut headers = vec![(key, Align::Right)];
    headers.extend(by_policy.keys().map(|p| (p.as_str(), Align::Right)));
    let cells: Vec<Vec<String>> = sweep
        .points
        .iter()
        .enumerate()
        .map(|(i, point)| {
            let mut row = vec![point.value.clone()];
            row.extend(by_policy.values().map(|series| {
                series
                    .get(i)
                    .map(|(_, y)| fixed(y / 3600.0, 2))
                    .unwrap_or_else(|| "-".into())
            }));
            row
        })
        .collect();
    s.push_str(&render(&headers, &cells));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_from_hostile_names_neither_panic_nor_reach_the_terminal_raw() {
        // A 65,536-character tenant panicked `format!`'s width; an ESC or a bell went out raw.
        let long = "T".repeat(70_000);
        let rows = vec![
            vec![long, "1".to_string()],
            vec!["ev\u{1b}[31mil\u{7}\u{8}x".to_string(), "2".to_string()],
        ];
        let text = render(&[("tenant", Align::Left), ("jobs", Align::Right)], &rows);
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[1].chars().count(),
            CELL_CHARS + 1 + 4,
            "cut to the cell width"
        );
        assert!(lines[1].contains('…'));
        assert!(
            lines[2].starts_with("ev\\u{1b}[31mil\\u{7}\\u{8}x"),
            "{}",
            lines[2]
        );
    }

    #[test]
    fn table_columns_fit_long_policy_names() {
        // Regression (issue 9, item 25): fixed-width columns misaligned long policy names.
        let rows = vec![
            vec![
                "a".to_string(),
                "max-min-fairness-packed".to_string(),
                "1,234".to_string(),
            ],
            vec!["bb".to_string(), "las".to_string(), "5".to_string()],
        ];
        let text = render(
            &[
                ("trace", Align::Left),
                ("policy", Align::Left),
                ("avg JCT s", Align::Right),
            ],
            &rows,
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "trace policy                  avg JCT s");
        assert_eq!(lines[1], "a     max-min-fairness-packed     1,234");
        assert_eq!(lines[2], "bb    las                             5");
    }

    #[test]
    fn each_published_row_says_whether_ours_is_within_its_tolerance() {
        let published = |value: f64, tolerance: Option<f64>| arbiter_sim::scenario::Published {
            trace: "trace3".into(),
            policy: arbiter_policy::PolicyKind::Srtf,
            tenant: "all".into(),
            metric: "avg_jct_s".into(),
            value,
            source: None,
            tolerance,
        };
        let row = |p: arbiter_sim::scenario::Published, ours: Option<f64>| {
            let relative_diff = ours.map(|o| (o - p.value) / p.value);
            let within_tolerance =
                arbiter_sim::scenario::within_tolerance(relative_diff, p.tolerance);
            Comparison {
                published: p,
                ours,
                relative_diff,
                comparable: true,
                not_comparable_because: None,
                within_tolerance,
            }
        };
        let rows = [
            row(published(100.0, Some(0.05)), Some(100.0)),
            row(published(100.0, Some(0.05)), Some(273.4)),
            row(published(100.0, None), Some(273.4)),
            row(published(100.0, Some(0.05)), None),
        ];
        let text = comparison_table(&rows);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[1].contains("verdict"), "{text}");
        assert!(
            lines[2].contains("+0.0%") && lines[2].contains("✓ within ±5%"),
            "{text}"
        );
        assert!(
            lines[3].contains("+173.4%") && lines[3].contains("✗ outside ±5%"),
            "{text}"
        );
        assert!(
            lines[4].contains("+173.4%") && lines[4].contains("no tolerance"),
            "{text}"
        );
        assert!(lines[5].contains("not run"), "{text}");
        assert!(
            text.ends_with(
                "1 within their tolerance, 1 outside (✗), 1 without a tolerance, 1 not run\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn reclaims_are_a_column_only_under_a_quota_tree() {
        let row = |tenant: &str, reclaims: Option<u64>| ResultRow {
            trace: "t".into(),
            policy: arbiter_policy::PolicyKind::Fifo,
            tenant: tenant.into(),
            seed: 0,
            summary: Summary::default(),
            events: 0,
            wall_s: 0.0,
            capacity_gpus: 8,
            stranded_gpu_fraction: 0.0,
            quota_reclaims: reclaims,
            records: Vec::new(),
            warnings: Vec::new(),
            timeline: Vec::new(),
            reclaimed: Vec::new(),
            quota_tree: None,
        };
        let plain = results_table("s", &[row("all", None)]);
        assert!(!plain.contains("reclaims"), "{plain}");
        assert_eq!(
            plain.lines().nth(1),
            Some(
                "trace policy tenant seed jobs unfinished failed unplaceable avg JCT s p50 JCT s p99 JCT s avg queue s makespan s  util wall s"
            )
        );
        let table = results_table("s", &[row("all", Some(12)), row("none", None)]);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[1].ends_with(" util reclaims wall s"), "{table}");
        let before_wall = |l: &str| l.split_whitespace().rev().nth(1).map(str::to_string);
        assert_eq!(before_wall(lines[2]).as_deref(), Some("12"), "{table}");
        assert_eq!(
            before_wall(lines[3]).as_deref(),
            Some("-"),
            "a row without a tree: {table}"
        );
    }

    #[test]
    fn negative_zero_prints_as_zero() {
        assert_eq!(fixed(-0.0, 2), "0.00");
        assert_eq!(fixed(-0.0001, 3), "0.000");
        assert_eq!(fixed(-0.5, 1), "-0.5");
        assert_eq!(secs(-0.0), "0");
        assert_eq!(secs(-1234.0), "-1,234");
    }
}
