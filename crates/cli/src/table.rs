//! Plain-text tables for the terminal.

use arbiter_sim::scenario::{Comparison, ResultRow};
use arbiter_sim::Summary;
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

pub fn results_table(name: &str, rows: &[ResultRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "scenario {name}");
    let _ = writeln!(
        s,
        "{:<12} {:<14} {:<8} {:>4} {:>6} {:>13} {:>12} {:>13} {:>12} {:>14} {:>6} {:>7}",
        "trace", "policy", "tenant", "seed", "jobs", "avg JCT s", "p50 JCT s", "p99 JCT s", "avg queue s", "makespan s", "util", "wall s"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:<12} {:<14} {:<8} {:>4} {:>6} {:>13} {:>12} {:>13} {:>12} {:>14} {:>6.3} {:>7.3}",
            r.trace,
            r.policy.name(),
            r.tenant,
            r.seed,
            r.summary.jobs,
            secs(r.summary.avg_jct_s),
            secs(r.summary.p50_jct_s),
            secs(r.summary.p99_jct_s),
            secs(r.summary.avg_queue_s),
            secs(r.summary.makespan_s),
            r.summary.gpu_utilization,
            r.wall_s
        );
    }
    s
}

pub fn comparison_table(rows: &[Comparison]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "published numbers vs ours (mean over seeds)");
    let _ = writeln!(s, "{:<12} {:<8} {:<8} {:<12} {:>14} {:>14} {:>8}  source", "trace", "policy", "tenant", "metric", "published", "ours", "diff");
    for c in rows {
        let ours = c.ours.map(secs).unwrap_or_else(|| "-".into());
        let diff = c.relative_diff.map(|d| format!("{:+.1}%", d * 100.0)).unwrap_or_else(|| "-".into());
        let p = &c.published;
        let _ = writeln!(
            s,
            "{:<12} {:<8} {:<8} {:<12} {:>14} {:>14} {:>8}  {}",
            p.trace,
            p.policy.name(),
            p.tenant,
            p.metric,
            secs(p.value),
            ours,
            diff,
            p.source.clone().unwrap_or_default()
        );
    }
    s
}

pub fn summary_text(s: &Summary) -> String {
    format!(
        "jobs {}  avg JCT {} s  p50 {} s  p95 {} s  p99 {} s  avg queue {} s  makespan {} s  GPU util {:.3}  preemptions/job {:.2}  unfinished {}  failed {}",
        s.jobs,
        secs(s.avg_jct_s),
        secs(s.p50_jct_s),
        secs(s.p95_jct_s),
        secs(s.p99_jct_s),
        secs(s.avg_queue_s),
        secs(s.makespan_s),
        s.gpu_utilization,
        s.preemptions_per_job,
        s.unfinished,
        s.failed
    )
}

pub fn trace_stats(trace: &Trace) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "jobs: {}", trace.jobs.len());
    let _ = writeln!(s, "submit span: {} s", secs(trace.submit_span().as_secs_f64()));
    let mut sizes = std::collections::BTreeMap::<u32, usize>::new();
    let mut tenants = std::collections::BTreeMap::<&str, usize>::new();
    let mut gpu_s = 0.0;
    for j in &trace.jobs {
        *sizes.entry(j.gpus).or_default() += 1;
        *tenants.entry(j.tenant.as_str()).or_default() += 1;
        gpu_s += j.gpu_seconds();
    }
    let _ = writeln!(s, "GPU-hours of work: {:.1}", gpu_s / 3600.0);
    let sizes: Vec<String> = sizes.iter().map(|(g, n)| format!("{g}:{n}")).collect();
    let _ = writeln!(s, "GPUs per job (size:count): {}", sizes.join(" "));
    let tenants: Vec<String> = tenants.iter().map(|(t, n)| format!("{t}:{n}")).collect();
    let _ = write!(s, "tenants (name:jobs): {}", tenants.join(" "));
    s
}

pub fn sweep_table(sweep: &arbiter_sim::sweep::Sweep) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "sweep of {} over {} (mean average JCT over seeds, hours)", sweep.scenario, sweep.key);
    let by_policy = sweep.mean_avg_jct();
    let _ = write!(s, "{:>10}", sweep.key.rsplit('.').next().unwrap_or(&sweep.key));
    for policy in by_policy.keys() {
        let _ = write!(s, " {policy:>22}");
    }
    let _ = writeln!(s);
    for (i, point) in sweep.points.iter().enumerate() {
        let _ = write!(s, "{:>10}", point.value);
        for series in by_policy.values() {
            let v = series.get(i).map(|(_, y)| format!("{:.2}", y / 3600.0)).unwrap_or_else(|| "-".into());
            let _ = write!(s, " {v:>22}");
        }
        let _ = writeln!(s);
    }
    s
}
