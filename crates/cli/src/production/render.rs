//! How the client commands print the daemon's JSON for people: tables and `show` texts. Text a
//! tenant wrote goes through [`printable`] first.

use serde_json::Value;

/// Text a tenant wrote (job names, commands, reasons) made safe for a terminal: what a command
/// may not hold (`arbiter_daemon::security::text`: control characters other than newlines and tabs, line
/// and paragraph separators, direction controls) is shown escaped (`\u{1b}`), so that a name —
/// also one stored before such names were refused — cannot carry escape sequences that rewrite
/// the admin's screen or clipboard, nor reorder or break what is shown.
pub(super) fn printable(text: &str) -> String {
    use arbiter_daemon::security::text::{Text, refused};
    text.chars()
        .map(|c| {
            if c == '\t' || refused(c, Text::Lines).is_some() {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
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
    format!(
        "{text}{}",
        " ".repeat(width.saturating_sub(text.chars().count()))
    )
}

pub(super) fn gpu_list(v: &Value) -> Option<String> {
    v.as_array()
        .map(|g| g.iter().map(Value::to_string).collect::<Vec<_>>().join(","))
}

pub(super) fn number(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub(super) fn quota(v: &Value) -> String {
    if v.is_null() {
        "none".into()
    } else {
        v.to_string()
    }
}

/// The `arbiter jobs` table: `gpus` is how many the job asked for, `on` the GPU indices it holds
/// (marked `*` when another job holds them too); the reason it waits only for queued jobs.
/// The priority classes the caller may use and the reservations not over yet, for `arbiter cluster`.
fn classes_and_reservations(c: &Value, out: &mut String) {
    use std::fmt::Write;
    let classes: Vec<String> = c["priority_classes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|k| {
            let mut text = format!(
                "{} ({}",
                k["name"].as_str().unwrap_or("?"),
                number(&k["value"])
            );
            if k["preemptible"] == false {
                text.push_str(", not preemptible");
            }
            if k["default"] == true {
                text.push_str(", default");
            }
            if let Some(ts) = k["tenants"].as_array() {
                text.push_str(&format!(
                    ", tenants {}",
                    ts.iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join("/")
                ));
            }
            text + ")"
        })
        .collect();
    if !classes.is_empty() {
        let _ = writeln!(out, "priority classes: {}", classes.join(", "));
    }
    for r in c["reservations"].as_array().into_iter().flatten() {
        let _ = write!(out, "reservation {}", reservation_line(r).trim_start());
    }
}

/// One reservation in a line.
pub(super) fn reservation_line(r: &Value) -> String {
    let start = r["start_unix_s"].as_i64().unwrap_or(0);
    let hours = (r["end_unix_s"].as_i64().unwrap_or(start) - start) as f64 / 3600.0;
    let whose = match r["tenant"].as_str() {
        Some(t) => format!("for {t}"),
        None => "maintenance".into(),
    };
    format!(
        "{:>3}  {}  from {} UTC for {hours:.1} h, {whose}: {}\n",
        number(&r["id"]),
        r["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(","),
        utc(start),
        r["reason"].as_str().unwrap_or("")
    )
}

/// Reservations, one a line.
pub(super) fn reservations_table(reservations: &[Value]) -> String {
    if reservations.is_empty() {
        return "no reservations\n".into();
    }
    reservations.iter().map(reservation_line).collect()
}

/// The job list: one line per job, and (unless `expand`) one per job array with its tasks
/// counted by state.
pub(super) fn jobs_table(jobs: &[Value], expand: bool) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>5}  {:<12} {:<16} {:<10} {:>4} {:<8} {:<40} waiting because",
        "id", "tenant", "name", "state", "gpus", "on", "command"
    );
    let mut shared = false;
    let mut arrays_shown = std::collections::BTreeSet::new();
    for job in jobs {
        let array_id = job["array"]["array_id"].as_u64();
        if let (Some(array), false) = (array_id, expand) {
            if arrays_shown.insert(array) {
                let tasks: Vec<&Value> = jobs
                    .iter()
                    .filter(|j| j["array"]["array_id"].as_u64() == Some(array))
                    .collect();
                let _ = writeln!(out, "{}", array_line(array, &tasks).trim_end());
            }
            continue;
        }
        let state = job["state"]["state"].as_str().unwrap_or("");
        let mut on = gpu_list(&job["state"]["gpus"]).unwrap_or_else(|| "-".into());
        if job["shares_gpus_with"]
            .as_array()
            .is_some_and(|s| !s.is_empty())
        {
            on.push('*');
            shared = true;
        }
        let waiting = if state == "queued" {
            job["pending_reason"].as_str().unwrap_or("")
        } else {
            ""
        };
        let id = match (array_id, job["array"]["index"].as_u64()) {
            (Some(array), Some(index)) => format!("{array}_{index}"),
            _ => job["id"].as_u64().unwrap_or(0).to_string(),
        };
        let line = format!(
            "{:>5}  {} {} {} {:>4} {} {} {}",
            id,
            pad(&cut_words(job["tenant"].as_str().unwrap_or(""), 12), 12),
            pad(
                &cut_words(job["request"]["name"].as_str().unwrap_or("-"), 16),
                16
            ),
            pad(state, 10),
            number(&job["request"]["gpus"]),
            pad(&cut_words(&on, 8), 8),
            pad(
                &cut_words(job["request"]["command"].as_str().unwrap_or(""), 40),
                40
            ),
            waiting
        );
        let _ = writeln!(out, "{}", line.trim_end());
    }
    if shared {
        let _ = writeln!(
            out,
            "* shares its GPUs with another job (the policy interleaves them; `arbiter show ID` says which)"
        );
    }
    out
}

/// One line for array `array` (its `tasks` listed): counts by state where the state goes, the
/// first waiting task's reason.
fn array_line(array: u64, tasks: &[&Value]) -> String {
    let Some(first) = tasks.first() else {
        return String::new();
    };
    let mut by_state: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for t in tasks {
        *by_state
            .entry(t["state"]["state"].as_str().unwrap_or("?"))
            .or_insert(0) += 1;
    }
    let order = [
        "running",
        "stopping",
        "queued",
        "succeeded",
        "failed",
        "cancelled",
    ];
    let counts: Vec<String> = order
        .iter()
        .filter_map(|s| by_state.get(s).map(|n| format!("{n} {s}")))
        .collect();
    let waiting = tasks
        .iter()
        .find(|t| t["state"]["state"] == "queued")
        .and_then(|t| t["pending_reason"].as_str())
        .unwrap_or("");
    let of = first["array"]["tasks"]
        .as_u64()
        .unwrap_or(tasks.len() as u64);
    format!(
        "{:>5}  {} {} {} {:>4} {} {} {}",
        format!("{array}_[{of}]"),
        pad(&cut_words(first["tenant"].as_str().unwrap_or(""), 12), 12),
        pad(
            &cut_words(first["request"]["name"].as_str().unwrap_or("-"), 16),
            16
        ),
        counts.join(", "),
        number(&first["request"]["gpus"]),
        pad("-", 8),
        pad(
            &cut_words(first["request"]["command"].as_str().unwrap_or(""), 40),
            40
        ),
        waiting
    )
}

/// Unix seconds as `YYYY-MM-DD HH:MM:SS` UTC.
pub(super) fn utc(unix_s: i64) -> String {
    arbiter_daemon::clock::utc_text(unix_s)
}

/// `arbiter show ID` as text.
pub(super) fn job_text(job: &Value) -> String {
    use std::fmt::Write;
    let r = &job["request"];
    let st = &job["state"];
    let state = st["state"].as_str().unwrap_or("?");
    let mut out = String::new();
    let name = r["name"]
        .as_str()
        .map(|n| format!(" ({n})"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "job {}{name}, tenant {}",
        number(&job["id"]),
        job["tenant"].as_str().unwrap_or("?")
    );
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
        && let Some(reason) = job["pending_reason"].as_str()
    {
        let _ = writeln!(out, "  waiting:    {reason}");
    }
    let _ = writeln!(
        out,
        "  command:    {}",
        r["command"].as_str().unwrap_or("").trim()
    );
    if let Some(dir) = r["working_dir"].as_str() {
        let _ = writeln!(out, "  directory:  {dir}");
    }
    let types = r["gpu_types"]
        .as_array()
        .filter(|t| !t.is_empty())
        .map(|t| {
            format!(
                " of type {}",
                t.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("/")
            )
        })
        .unwrap_or_default();
    let plural = if r["gpus"].as_u64() == Some(1) {
        ""
    } else {
        "s"
    };
    let kind = if r["opportunistic"] == true {
        ", opportunistic (idle GPUs only; yields at once)"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "  asks for:   {} GPU{plural}{types}, priority {}{kind}",
        number(&r["gpus"]),
        number(&r["priority"])
    );
    if let Some(c) = r["priority_class"].as_str() {
        let _ = writeln!(out, "  class:      {c}");
    }
    if let Some(d) = r["dependency"].as_str() {
        let _ = writeln!(out, "  depends on: {d}");
    }
    if let Some(t) = r["job_type"].as_str() {
        let _ = writeln!(out, "  job type:   {t}");
    }
    if let Some(st) = r["iteration_stages"].as_object() {
        let s = |k: &str| {
            st.get(k)
                .and_then(Value::as_f64)
                .map_or_else(|| "?".to_string(), |v| format!("{v}"))
        };
        let _ = writeln!(
            out,
            "  iteration:  I/O {} s, CPU {} s, GPU {} s",
            s("io_s"),
            s("cpu_s"),
            s("gpu_s")
        );
    }
    if let Some(t) = job["submitted_unix_s"].as_i64() {
        let _ = writeln!(out, "  submitted:  {} UTC", utc(t));
    }
    let exit = job["exit_code"]
        .as_i64()
        .map_or_else(|| "-".to_string(), |c| c.to_string());
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
        let total = job["total_steps"]
            .as_u64()
            .map(|t| format!(" of {t}"))
            .unwrap_or_default();
        let rate = p["throughput"]
            .as_f64()
            .map(|t| format!(" at {t:.2} steps/s"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  progress:   {} steps{total}{rate}",
            number(&p["steps"])
        );
    }
    if let Some(history) = job["history"].as_array() {
        let _ = writeln!(out, "  history:");
        for t in history {
            let _ = writeln!(
                out,
                "    {} UTC  {:<10} {}",
                utc(t["at_unix_s"].as_i64().unwrap_or(0)),
                t["to"].as_str().unwrap_or(""),
                t["why"].as_str().unwrap_or("")
            );
        }
    }
    out
}

/// `arbiter cluster` as text. Keys this client does not know are printed as they come, so that
/// what a newer daemon adds (warnings above all) is not hidden.
pub(super) fn cluster_text(c: &Value) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "policy {}, a round every {} s, {} executor",
        c["policy"].as_str().unwrap_or("?"),
        number(&c["round_s"]),
        c["executor"].as_str().unwrap_or("local")
    );
    let groups: Vec<String> = c["gpus"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|g| {
            format!(
                "{}x{}",
                number(&g["count"]),
                g["type"].as_str().unwrap_or("?")
            )
        })
        .collect();
    let total: u64 = c["gpus"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|g| g["count"].as_u64())
        .sum();
    let free = gpu_list(&c["free_gpus"]).unwrap_or_default();
    let free_count = c["free_gpus"].as_array().map_or(0, Vec::len);
    let _ = writeln!(
        out,
        "GPUs: {total} ({}), {free_count} free{}",
        if groups.is_empty() {
            "none".into()
        } else {
            groups.join(", ")
        },
        if free.is_empty() {
            String::new()
        } else {
            format!(": {free}")
        }
    );
    let _ = writeln!(
        out,
        "CPUs: {}, memory: {} GiB; CPU/memory limits {}",
        number(&c["cpus"]),
        number(&c["memory_gib"]),
        c["cpu_memory_limits"].as_str().unwrap_or("?")
    );
    if let Some(nodes) = c["nodes"].as_array().filter(|n| !n.is_empty()) {
        let _ = writeln!(out, "nodes:");
        let _ = writeln!(
            out,
            "  {:<16} {:<8} {:>4} {:>5} {:>7}  {:<8} jobs (GPU ids)",
            "node", "type", "GPUs", "CPUs", "mem GiB", "rack"
        );
        for n in nodes {
            let jobs: Vec<String> = n["jobs"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|j| {
                    let gpus = gpu_list(&j["gpus"]).unwrap_or_default();
                    if j["id"].is_null() {
                        format!("(another tenant's): {gpus}")
                    } else {
                        format!("{}: {gpus}", number(&j["id"]))
                    }
                })
                .collect();
            // A node that takes no new runs (down or drained in Slurm) says so after its name.
            let name = n["name"].as_str().unwrap_or("?");
            let name = if n["takes_new_runs"] == false {
                format!("{name} (no new)")
            } else {
                name.to_string()
            };
            let line = format!(
                "  {} {} {:>4} {:>5} {:>7}  {} {}",
                pad(&cut_words(&name, 16), 16),
                pad(n["gpu_type"].as_str().unwrap_or("?"), 8),
                n["gpu_ids"].as_array().map_or(0, Vec::len),
                number(&n["cpus"]),
                number(&n["memory_gib"]),
                pad(n["rack"].as_str().unwrap_or("?"), 8),
                if jobs.is_empty() {
                    "-".to_string()
                } else {
                    jobs.join("; ")
                }
            );
            let _ = writeln!(out, "{}", line.trim_end());
        }
    }
    let running = c["running"].as_array().map_or(&[][..], Vec::as_slice);
    if running.is_empty() {
        let _ = writeln!(out, "running: none");
    } else {
        let _ = writeln!(out, "running:");
        let _ = writeln!(
            out,
            "  {:>5}  {:<12} {:<16} {:<10} on GPUs",
            "id", "tenant", "name", "state"
        );
        for job in running {
            let gpus = gpu_list(&job["gpus"]).unwrap_or_default();
            if job["id"].is_null() {
                let _ = writeln!(
                    out,
                    "  {:>5}  {:<12} {:<16} {:<10} {gpus}",
                    "-", "(another)", "-", "-"
                );
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
    const SHOWN: [&str; 21] = [
        "policy",
        "executor",
        "nodes",
        "round_s",
        "gpus",
        "free_gpus",
        "cpus",
        "memory_gib",
        "cpu_memory_limits",
        "running",
        "queued",
        "queued_total",
        "tenants_isolated",
        "tenant_isolation",
        "memory_limits",
        "max_processes_per_tenant",
        "process_limit",
        "own_pid_namespaces",
        "process_visibility",
        "priority_classes",
        "reservations",
    ];
    for (key, value) in c
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| !SHOWN.contains(&k.as_str()))
    {
        let shown = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let _ = writeln!(out, "{}: {shown}", key.replace('_', " "));
    }
    classes_and_reservations(c, &mut out);
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
        let _ = writeln!(
            out,
            "  /proc: {}{visibility}",
            warning("own_pid_namespaces")
        );
    }
    if let Some(memory) = c["memory_limits"].as_str() {
        let _ = writeln!(out, "  memory limits: {memory}");
    }
}

/// `arbiter tenants` as a table.
pub(super) fn tenants_table(tenants: &[Value]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<24} {:>8} {:>9}  webhook",
        "tenant", "weight", "GPU quota"
    );
    for t in tenants {
        let hook = if t["webhook"].is_object() {
            webhook_state(&t["webhook"])
        } else {
            "none".to_string()
        };
        let _ = writeln!(
            out,
            "{:<24} {:>8} {:>9}  {hook}",
            t["name"].as_str().unwrap_or(""),
            number(&t["weight"]),
            quota(&t["gpu_quota"])
        );
    }
    out
}

/// A webhook's state in a few words: `active, 12 delivered`, `failing (3 in a row: HTTP 503),
/// 4 waiting`, `DEAD after 10 failures (last: connection refused); set it again to resume`.
pub(super) fn webhook_state(hook: &Value) -> String {
    let n = |key: &str| hook[key].as_u64().unwrap_or(0);
    let error = hook["last_error"].as_str().unwrap_or("?");
    let mut text = match hook["state"].as_str() {
        Some("dead") => format!(
            "DEAD after {} failures (last: {error}); set the webhook again to resume",
            n("consecutive_failures")
        ),
        Some("failing") => format!(
            "failing ({} in a row, last: {error})",
            n("consecutive_failures")
        ),
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
        let _ = writeln!(
            out,
            "nothing learned yet (jobs submitted with --job-type that share GPUs and report progress teach it)"
        );
        return out;
    }
    let _ = writeln!(
        out,
        "{:<32} {:<32} {:>4} {:<8} {:>6} {:>7}",
        "job type", "next to", "GPUs", "GPU type", "speed", "samples"
    );
    for r in rows {
        let me = format!(
            "{}/{}",
            r["tenant"].as_str().unwrap_or("?"),
            r["job_type"].as_str().unwrap_or("?")
        );
        let partner = if r["partner_other_tenant"] == true {
            "another tenant's type".to_string()
        } else {
            format!(
                "{}/{}",
                r["partner_tenant"].as_str().unwrap_or("?"),
                r["partner_job_type"].as_str().unwrap_or("?")
            )
        };
        let speed = r["normalized_speed"]
            .as_f64()
            .map_or_else(|| "?".into(), |v| format!("{v:.2}"));
        let _ = writeln!(
            out,
            "{me:<32} {partner:<32} {:>4} {:<8} {speed:>6} {:>7}",
            number(&r["gpus"]),
            r["gpu_type"].as_str().unwrap_or("?"),
            number(&r["samples"])
        );
    }
    let _ = writeln!(
        out,
        "speed: throughput sharing the GPUs over throughput alone (1 = no slowdown)"
    );
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
            let plural = if s["gpus"].as_array().is_some_and(|g| g.len() == 1) {
                ""
            } else {
                "s"
            };
            match s["id"].as_u64() {
                Some(id) => format!("GPU{plural} {gpus} with job {id}"),
                None => format!("GPU{plural} {gpus} with another tenant's job"),
            }
        })
        .collect();
    (!items.is_empty()).then(|| items.join("; "))
}

/// `arbiter usage` as a table: a row per group, GPU-hours, CPU core-hours, memory GiB-hours.
pub(super) fn usage_table(reply: &Value) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let by: Vec<String> = reply["by"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let rows = reply["rows"].as_array().map_or(&[][..], Vec::as_slice);
    let window = match reply["since_unix_s"].as_i64() {
        Some(s) => format!(
            "since {} {:02}:{:02} UTC",
            arbiter_daemon::records::usage::civil_date(s.div_euclid(86_400)),
            s.rem_euclid(86_400) / 3600,
            s.rem_euclid(3600) / 60
        ),
        None => "since the first recorded run".to_string(),
    };
    if rows.is_empty() {
        let _ = writeln!(out, "no usage {window}");
        return out;
    }
    let keys: Vec<String> = by.iter().map(|b| b.replace('-', "_")).collect();
    let width = |k: &str, name: &str| {
        rows.iter()
            .map(|r| {
                r["key"][k]
                    .as_str()
                    .map_or(0, |v| crate::table::shown(v).chars().count())
            })
            .max()
            .unwrap_or(0)
            .max(name.len())
            .max(1)
    };
    let widths: Vec<usize> = keys
        .iter()
        .zip(&by)
        .map(|(k, name)| width(k, name))
        .collect();
    for (name, w) in by.iter().zip(&widths) {
        let _ = write!(out, "{name:<w$} ");
    }
    let _ = writeln!(
        out,
        "{:>6} {:>7} {:>10} {:>10} {:>12}",
        "runs", "running", "GPU-hours", "CPU-hours", "mem GiB-h"
    );
    let hours = |v: &Value| v.as_f64().unwrap_or(0.0) / 3600.0;
    for r in rows {
        for (k, w) in keys.iter().zip(&widths) {
            let value = r["key"][k.as_str()]
                .as_str()
                .filter(|v| !v.is_empty())
                .map_or_else(|| "-".to_string(), crate::table::shown);
            let pad = " ".repeat(w.saturating_sub(value.chars().count()));
            let _ = write!(out, "{value}{pad} ");
        }
        let _ = writeln!(
            out,
            "{:>6} {:>7} {:>10.2} {:>10.2} {:>12.1}",
            number(&r["runs"]),
            number(&r["running"]),
            hours(&r["gpu_s"]),
            hours(&r["cpu_s"]),
            hours(&r["memory_gib_s"])
        );
    }
    let _ = writeln!(
        out,
        "total {:.2} GPU-hours {window}; runs going on counted up to now",
        hours(&reply["total"]["gpu_s"])
    );
    out
}

/// `arbiter usage --csv`: a header, then a row per group (seconds).
pub(super) fn usage_csv(reply: &Value) -> String {
    let by: Vec<String> = reply["by"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(|s| s.replace('-', "_")))
                .collect()
        })
        .unwrap_or_default();
    let mut out = format!("{},runs,running,gpu_s,cpu_s,memory_gib_s\n", by.join(","));
    for r in reply["rows"].as_array().map_or(&[][..], Vec::as_slice) {
        let keys: Vec<String> = by
            .iter()
            .map(|k| csv_field(r["key"][k.as_str()].as_str().unwrap_or("")))
            .collect();
        out.push_str(&format!(
            "{},{},{},{},{},{}\n",
            keys.join(","),
            number(&r["runs"]),
            number(&r["running"]),
            r["gpu_s"].as_f64().unwrap_or(0.0),
            r["cpu_s"].as_f64().unwrap_or(0.0),
            r["memory_gib_s"].as_f64().unwrap_or(0.0)
        ));
    }
    out
}

/// A CSV field, quoted when it holds a comma, quote or line break; a leading `=`, `+`, `-` or
/// `@` is prefixed with `'` so a spreadsheet does not run it as a formula.
fn csv_field(text: &str) -> String {
    let text = if text.starts_with(['=', '+', '-', '@']) {
        format!("'{text}")
    } else {
        text.to_string()
    };
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text
    }
}
