//! How the client commands print the daemon's JSON for people: tables and `show` texts. Text a
//! tenant wrote goes through [`printable`] first.

use serde_json::Value;

/// Text a tenant wrote (job names, commands, reasons) made safe for a terminal: what a command
/// may not hold (`arbiter_daemon::security::text`: control characters other than newlines and tabs, line
/// and paragraph separators, direction controls) is shown escaped (`\u{1b}`), so that a name —
/// also one stored before such names were refused — cannot carry escape sequences that rewrite
/// the admin's screen or clipboard, nor reorder or break what is shown.
pub(super) fn printable(text: &str) -> String {
    use arbiter_daemon::security::text::{refused, Text};
    text.chars().map(|c| if c == '\t' || refused(c, Text::Lines).is_some() { c.escape_unicode().to_string() } else { c.to_string() }).collect()
}

/// `text` on one line, at most `width` characters: cut at a word boundary, with `…`.
pub(super) fn cut_words(text: &str, width: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= width {
        return flat;
    }
    let mut out = String::new();
    for word in flat.split(' ') {
        let extra = word.chars().count() + usize::from(!out.is_empty());
        if out.chars().count() + extra > width - 1 {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    if out.is_empty() {
        // One word longer than the column: no boundary to cut at.
        out = flat.chars().take(width - 1).collect();
    }
    out.push('…');
    out
}

/// Pads `text` (already at most `width` characters) to `width` characters.
pub(super) fn pad(text: &str, width: usize) -> String {
    format!("{text}{}", " ".repeat(width.saturating_sub(text.chars().count())))
}

pub(super) fn gpu_list(v: &Value) -> Option<String> {
    v.as_array().map(|g| g.iter().map(Value::to_string).collect::<Vec<_>>().join(","))
}

pub(super) fn number(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub(super) fn quota(v: &Value) -> String {
    if v.is_null() { "none".into() } else { v.to_string() }
}

/// The `arbiter jobs` table: `gpus` is how many the job asked for, `on` the GPU indices it holds
/// (marked `*` when another job holds them too); the reason it waits only for queued jobs.
pub(super) fn jobs_table(jobs: &[Value]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "{:>5}  {:<12} {:<16} {:<10} {:>4} {:<8} {:<40} waiting because", "id", "tenant", "name", "state", "gpus", "on", "command");
    let mut shared = false;
    for job in jobs {
        let state = job["state"]["state"].as_str().unwrap_or("");
        let mut on = gpu_list(&job["state"]["gpus"]).unwrap_or_else(|| "-".into());
        if job["shares_gpus_with"].as_array().is_some_and(|s| !s.is_empty()) {
            on.push('*');
            shared = true;
        }
        let waiting = if state == "queued" { job["pending_reason"].as_str().unwrap_or("") } else { "" };
        let line = format!(
            "{:>5}  {} {} {} {:>4} {} {} {}",
            job["id"].as_u64().unwrap_or(0),
            pad(&cut_words(job["tenant"].as_str().unwrap_or(""), 12), 12),
            pad(&cut_words(job["request"]["name"].as_str().unwrap_or("-"), 16), 16),
            pad(state, 10),
            number(&job["request"]["gpus"]),
            pad(&cut_words(&on, 8), 8),
            pad(&cut_words(job["request"]["command"].as_str().unwrap_or(""), 40), 40),
            waiting
        );
        let _ = writeln!(out, "{}", line.trim_end());
    }
    if shared {
        let _ = writeln!(out, "* shares its GPUs with another job (the policy interleaves them; `arbiter show ID` says which)");
    }
    out
}

/// Unix seconds as `YYYY-MM-DD HH:MM:SS` UTC.
pub(super) fn utc(unix_s: i64) -> String {
    // Howard Hinnant's civil_from_days.
    let (days, secs) = (unix_s.div_euclid(86_400), unix_s.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}", secs / 3600, secs % 3600 / 60, secs % 60)
}

/// `arbiter show ID` as text.
pub(super) fn job_text(job: &Value) -> String {
    use std::fmt::Write;
    let r = &job["request"];
    let st = &job["state"];
    let state = st["state"].as_str().unwrap_or("?");
    let mut out = String::new();
    let name = r["name"].as_str().map(|n| format!(" ({n})")).unwrap_or_default();
    let _ = writeln!(out, "job {}{name}, tenant {}", number(&job["id"]), job["tenant"].as_str().unwrap_or("?"));
    let mut state_line = state.to_string();
    if let Some(gpus) = gpu_list(&st["gpus"]) {
        let _ = write!(state_line, " on GPUs {gpus}");
    }
    if let Some(pid) = st["pid"].as_u64().filter(|p| *p > 0) {
        let _ = write!(state_line, ", process group {pid}");
    }
    if let Some(t) = st["started_unix_s"].as_i64() {
        let _ = write!(state_line, ", since {} UTC", utc(t));
    }
    if let Some(reason) = st["reason"].as_str() {
        let _ = write!(state_line, " ({reason})");
    }
    let _ = writeln!(out, "  state:      {state_line}");
    if let Some(shares) = sharing_text(&job["shares_gpus_with"]) {
        let _ = writeln!(out, "  shares:     {shares} (the policy interleaves them)");
    }
    if state == "queued"
        && let Some(reason) = job["pending_reason"].as_str() {
            let _ = writeln!(out, "  waiting:    {reason}");
        }
    let _ = writeln!(out, "  command:    {}", r["command"].as_str().unwrap_or("").trim());
    if let Some(dir) = r["working_dir"].as_str() {
        let _ = writeln!(out, "  directory:  {dir}");
    }
    let types = r["gpu_types"].as_array().filter(|t| !t.is_empty()).map(|t| format!(" of type {}", t.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("/"))).unwrap_or_default();
    let plural = if r["gpus"].as_u64() == Some(1) { "" } else { "s" };
    let kind = if r["opportunistic"] == true { ", opportunistic (idle GPUs only; yields at once)" } else { "" };
    let _ = writeln!(out, "  asks for:   {} GPU{plural}{types}, priority {}{kind}", number(&r["gpus"]), number(&r["priority"]));
    if let Some(t) = r["job_type"].as_str() {
        let _ = writeln!(out, "  job type:   {t}");
    }
    if let Some(st) = r["iteration_stages"].as_object() {
        let s = |k: &str| st.get(k).and_then(Value::as_f64).map_or_else(|| "?".to_string(), |v| format!("{v}"));
        let _ = writeln!(out, "  iteration:  I/O {} s, CPU {} s, GPU {} s", s("io_s"), s("cpu_s"), s("gpu_s"));
    }
    if let Some(t) = job["submitted_unix_s"].as_i64() {
        let _ = writeln!(out, "  submitted:  {} UTC", utc(t));
    }
    let exit = job["exit_code"].as_i64().map_or_else(|| "-".to_string(), |c| c.to_string());
    let _ = writeln!(
        out,
        "  runs:       {} (failures {} of {} allowed retries, preemptions {}), {:.0} s on GPUs, last exit code {exit}",
        number(&job["runs"]),
        number(&job["failures"]),
        number(&r["max_retries"]),
        number(&job["preemptions"]),
        job["executed_s"].as_f64().unwrap_or(0.0)
    );
    if job["progress"].is_object() {
        let p = &job["progress"];
        let total = job["total_steps"].as_u64().map(|t| format!(" of {t}")).unwrap_or_default();
        let rate = p["throughput"].as_f64().map(|t| format!(" at {t:.2} steps/s")).unwrap_or_default();
        let _ = writeln!(out, "  progress:   {} steps{total}{rate}", number(&p["steps"]));
    }
    if let Some(history) = job["history"].as_array() {
        let _ = writeln!(out, "  history:");
        for t in history {
            let _ = writeln!(out, "    {} UTC  {:<10} {}", utc(t["at_unix_s"].as_i64().unwrap_or(0)), t["to"].as_str().unwrap_or(""), t["why"].as_str().unwrap_or(""));
        }
    }
    out
}

/// `arbiter cluster` as text. Keys this client does not know are printed as they come, so that
/// what a newer daemon adds (warnings above all) is not hidden.
pub(super) fn cluster_text(c: &Value) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "policy {}, a round every {} s, {} executor", c["policy"].as_str().unwrap_or("?"), number(&c["round_s"]), c["executor"].as_str().unwrap_or("local"));
    let groups: Vec<String> = c["gpus"].as_array().into_iter().flatten().map(|g| format!("{}x{}", number(&g["count"]), g["type"].as_str().unwrap_or("?"))).collect();
    let total: u64 = c["gpus"].as_array().into_iter().flatten().filter_map(|g| g["count"].as_u64()).sum();
    let free = gpu_list(&c["free_gpus"]).unwrap_or_default();
    let free_count = c["free_gpus"].as_array().map_or(0, Vec::len);
    let _ = writeln!(
        out,
        "GPUs: {total} ({}), {free_count} free{}",
        if groups.is_empty() { "none".into() } else { groups.join(", ") },
        if free.is_empty() { String::new() } else { format!(": {free}") }
    );
    let _ = writeln!(out, "CPUs: {}, memory: {} GiB; CPU/memory limits {}", number(&c["cpus"]), number(&c["memory_gib"]), c["cpu_memory_limits"].as_str().unwrap_or("?"));
    if let Some(nodes) = c["nodes"].as_array().filter(|n| !n.is_empty()) {
        let _ = writeln!(out, "nodes:");
        let _ = writeln!(out, "  {:<16} {:<8} {:>4} {:>5} {:>7}  {:<8} jobs (GPU ids)", "node", "type", "GPUs", "CPUs", "mem GiB", "rack");
        for n in nodes {
            let jobs: Vec<String> = n["jobs"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|j| {
                    let gpus = gpu_list(&j["gpus"]).unwrap_or_default();
                    if j["id"].is_null() { format!("(another tenant's): {gpus}") } else { format!("{}: {gpus}", number(&j["id"])) }
                })
                .collect();
            // A node that takes no new runs (down or drained in Slurm) says so after its name.
            let name = n["name"].as_str().unwrap_or("?");
            let name = if n["takes_new_runs"] == false { format!("{name} (no new)") } else { name.to_string() };
            let line = format!(
                "  {} {} {:>4} {:>5} {:>7}  {} {}",
                pad(&cut_words(&name, 16), 16),
                pad(n["gpu_type"].as_str().unwrap_or("?"), 8),
                n["gpu_ids"].as_array().map_or(0, Vec::len),
                number(&n["cpus"]),
                number(&n["memory_gib"]),
                pad(n["rack"].as_str().unwrap_or("?"), 8),
                if jobs.is_empty() { "-".to_string() } else { jobs.join("; ") }
            );
            let _ = writeln!(out, "{}", line.trim_end());
        }
    }
    let running = c["running"].as_array().map_or(&[][..], Vec::as_slice);
    if running.is_empty() {
        let _ = writeln!(out, "running: none");
    } else {
        let _ = writeln!(out, "running:");
        let _ = writeln!(out, "  {:>5}  {:<12} {:<16} {:<10} on GPUs", "id", "tenant", "name", "state");
        for job in running {
            let gpus = gpu_list(&job["gpus"]).unwrap_or_default();
            if job["id"].is_null() {
                let _ = writeln!(out, "  {:>5}  {:<12} {:<16} {:<10} {gpus}", "-", "(another)", "-", "-");
            } else {
                let line = format!(
                    "  {:>5}  {} {} {} {gpus}",
                    number(&job["id"]),
                    pad(&cut_words(job["tenant"].as_str().unwrap_or(""), 12), 12),
                    pad(&cut_words(job["name"].as_str().unwrap_or("-"), 16), 16),
                    pad(job["state"].as_str().unwrap_or("running"), 10)
                );
                let _ = writeln!(out, "{line}");
            }
        }
    }
    match (c["queued"].as_u64(), c["queued_total"].as_u64()) {
        (Some(mine), Some(total)) if mine != total => {
            let _ = writeln!(out, "queued: {mine} of yours, {total} in all");
        }
        (Some(n), _) => {
            let _ = writeln!(out, "queued: {n}");
        }
        _ => {}
    }
    isolation_text(&mut out, c);
    const SHOWN: [&str; 19] = [
        "policy", "executor", "nodes", "round_s", "gpus", "free_gpus", "cpus", "memory_gib", "cpu_memory_limits", "running", "queued", "queued_total",
        "tenants_isolated", "tenant_isolation", "memory_limits", "max_processes_per_tenant", "process_limit", "own_pid_namespaces", "process_visibility",
    ];
    for (key, value) in c.as_object().into_iter().flatten().filter(|(k, _)| !SHOWN.contains(&k.as_str())) {
        let shown = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let _ = writeln!(out, "{}: {shown}", key.replace('_', " "));
    }
    out
}

/// The isolation part of `arbiter cluster`: how tenants are kept apart and what confines their
/// runs (a daemon older than these keys says only the first line).
fn isolation_text(out: &mut String, c: &Value) {
    use std::fmt::Write;
    let warning = |flag: &str| if c[flag] == false { "WARNING: " } else { "" };
    if let Some(isolation) = c["tenant_isolation"].as_str() {
        let _ = writeln!(out, "tenants: {}{isolation}", warning("tenants_isolated"));
    }
    if let Some(limit) = c["process_limit"].as_str() {
        let _ = writeln!(out, "  processes: {limit}");
    }
    if let Some(visibility) = c["process_visibility"].as_str() {
        let _ = writeln!(out, "  /proc: {}{visibility}", warning("own_pid_namespaces"));
    }
    if let Some(memory) = c["memory_limits"].as_str() {
        let _ = writeln!(out, "  memory limits: {memory}");
    }
}

/// `arbiter tenants` as a table.
pub(super) fn tenants_table(tenants: &[Value]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "{:<24} {:>8} {:>9}  webhook", "tenant", "weight", "GPU quota");
    for t in tenants {
        let hook = if t["webhook"].is_object() { webhook_state(&t["webhook"]) } else { "none".to_string() };
        let _ = writeln!(out, "{:<24} {:>8} {:>9}  {hook}", t["name"].as_str().unwrap_or(""), number(&t["weight"]), quota(&t["gpu_quota"]));
    }
    out
}

/// A webhook's state in a few words: `active, 12 delivered`, `failing (3 in a row: HTTP 503),
/// 4 waiting`, `DEAD after 10 failures (last: connection refused); set it again to resume`.
pub(super) fn webhook_state(hook: &Value) -> String {
    let n = |key: &str| hook[key].as_u64().unwrap_or(0);
    let error = hook["last_error"].as_str().unwrap_or("?");
    let mut text = match hook["state"].as_str() {
        Some("dead") => format!("DEAD after {} failures (last: {error}); set the webhook again to resume", n("consecutive_failures")),
        Some("failing") => format!("failing ({} in a row, last: {error})", n("consecutive_failures")),
        _ => "active".to_string(),
    };
    text.push_str(&format!(", {} delivered", n("delivered")));
    if n("pending") > 0 {
        text.push_str(&format!(", {} waiting", n("pending")));
    }
    if n("dropped") > 0 {
        text.push_str(&format!(", {} dropped", n("dropped")));
    }
    text
}

/// The learned co-location table (`GET /v1/pairs`): one line per job type and partner type.
pub(super) fn pairs_table(rows: &[Value]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    if rows.is_empty() {
        let _ = writeln!(out, "nothing learned yet (jobs submitted with --job-type that share GPUs and report progress teach it)");
        return out;
    }
    let _ = writeln!(out, "{:<32} {:<32} {:>4} {:<8} {:>6} {:>7}", "job type", "next to", "GPUs", "GPU type", "speed", "samples");
    for r in rows {
        let me = format!("{}/{}", r["tenant"].as_str().unwrap_or("?"), r["job_type"].as_str().unwrap_or("?"));
        let partner = if r["partner_other_tenant"] == true {
            "another tenant's type".to_string()
        } else {
            format!("{}/{}", r["partner_tenant"].as_str().unwrap_or("?"), r["partner_job_type"].as_str().unwrap_or("?"))
        };
        let speed = r["normalized_speed"].as_f64().map_or_else(|| "?".into(), |v| format!("{v:.2}"));
        let _ = writeln!(out, "{me:<32} {partner:<32} {:>4} {:<8} {speed:>6} {:>7}", number(&r["gpus"]), r["gpu_type"].as_str().unwrap_or("?"), number(&r["samples"]));
    }
    let _ = writeln!(out, "speed: throughput sharing the GPUs over throughput alone (1 = no slowdown)");
    out
}

/// The other jobs on a running job's GPUs (`shares_gpus_with`), as `GPUs 0 with job 7; GPUs 1
/// with another tenant's job`; `None` when it shares none.
pub(super) fn sharing_text(shares: &Value) -> Option<String> {
    let items: Vec<String> = shares
        .as_array()?
        .iter()
        .map(|s| {
            let gpus = gpu_list(&s["gpus"]).unwrap_or_default();
            let plural = if s["gpus"].as_array().is_some_and(|g| g.len() == 1) { "" } else { "s" };
            match s["id"].as_u64() {
                Some(id) => format!("GPU{plural} {gpus} with job {id}"),
                None => format!("GPU{plural} {gpus} with another tenant's job"),
            }
        })
        .collect();
    (!items.is_empty()).then(|| items.join("; "))
}
