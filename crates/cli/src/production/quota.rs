//! `arbiter quota`: the quota tree — shown (a tenant sees its own path), set and deleted by the
//! admin, exported as `[[quota_groups]]` for scenario files.

use super::Output;
use anyhow::{Context, Result, bail};
use arbiter_daemon::api::client::Client;
use clap::Subcommand;
use serde_json::{Value, json};
use std::fmt::Write;

/// `arbiter quota ...`.
#[derive(Subcommand, Debug)]
pub enum QuotaCommand {
    /// The tree: each group's guaranteed quota, limits, GPUs held and borrowed now, fair share,
    /// and (yours; the admin sees all) the jobs that borrow — reclaimable.
    Show,
    /// Set a group's quota for one GPU type, or its parent or weight (admin); creates the group.
    /// The tree is checked whole: children's guaranteed quotas above their parent's are refused
    /// with the numbers.
    ///
    /// Example: `arbiter quota set team-a --parent ml-org --gpu-type a100 --guaranteed 8
    /// --borrowing-limit 4 --lending-limit 2`.
    Set {
        /// Group or tenant name (a tenant's jobs count in the group of its name).
        name: String,
        /// The group it belongs to.
        #[arg(long, conflicts_with = "no_parent")]
        parent: Option<String>,
        /// Put it directly under the cluster.
        #[arg(long)]
        no_parent: bool,
        /// The GPU type these numbers are for (`arbiter cluster` lists them), or `all` for every
        /// GPU whatever its type (then the whole tree must use `all`).
        #[arg(long, default_value = "all")]
        gpu_type: String,
        /// GPUs guaranteed: borrowers are reclaimed when its jobs wait for them.
        #[arg(long)]
        guaranteed: Option<u32>,
        /// Most GPUs above guaranteed it may borrow from others' idle quota (default: no limit).
        #[arg(long, conflicts_with = "no_borrowing_limit")]
        borrowing_limit: Option<u32>,
        /// Remove the borrowing limit.
        #[arg(long)]
        no_borrowing_limit: bool,
        /// Most of its idle guaranteed GPUs others may borrow (default: all).
        #[arg(long, conflicts_with = "no_lending_limit")]
        lending_limit: Option<u32>,
        /// Remove the lending limit.
        #[arg(long)]
        no_lending_limit: bool,
        /// Its share of GPUs beyond every guaranteed quota, against its siblings (default 1).
        #[arg(long)]
        weight: Option<f64>,
    },
    /// Delete a group (admin); refused while groups name it as parent.
    Delete {
        /// Group name.
        name: String,
    },
    /// Print the tree as `[[quota_groups]]` TOML (admin), for a scenario file or `arbiter whatif`.
    Export,
}

/// Runs `arbiter quota ...`.
pub(super) fn quota(client: &Client, action: QuotaCommand, out: Output) -> Result<()> {
    match action {
        QuotaCommand::Show => out.show(&client.get("/v1/quotas")?, tree_text),
        QuotaCommand::Delete { name } => out
            .show(&client.delete(&format!("/v1/quotas/{name}"))?, |_| {
                format!("deleted quota group {name}\n")
            }),
        QuotaCommand::Export => {
            let reply = client.get("/v1/quotas")?;
            crate::out!("{}", export_toml(&reply)?);
            Ok(())
        }
        QuotaCommand::Set {
            name,
            parent,
            no_parent,
            gpu_type,
            guaranteed,
            borrowing_limit,
            no_borrowing_limit,
            lending_limit,
            no_lending_limit,
            weight,
        } => {
            let reply = client.get("/v1/quotas")?;
            let mut group = reply["definitions"]
                .as_array()
                .and_then(|d| d.iter().find(|g| g["name"] == name.as_str()).cloned())
                .unwrap_or_else(|| json!({ "name": name, "gpus": {} }));
            if parent.is_some() || no_parent {
                group["parent"] = json!(parent);
            }
            if let Some(w) = weight {
                group["over_quota_weight"] = json!(w);
            }
            let touches_type = guaranteed.is_some()
                || borrowing_limit.is_some()
                || no_borrowing_limit
                || lending_limit.is_some()
                || no_lending_limit;
            if touches_type {
                let entry = &mut group["gpus"][gpu_type.as_str()];
                if entry.is_null() {
                    *entry = json!({ "guaranteed": 0 });
                }
                if let Some(g) = guaranteed {
                    entry["guaranteed"] = json!(g);
                }
                set_or_clear(
                    entry,
                    "borrowing_limit",
                    borrowing_limit,
                    no_borrowing_limit,
                );
                set_or_clear(entry, "lending_limit", lending_limit, no_lending_limit);
            } else if parent.is_none() && !no_parent && weight.is_none() {
                bail!(
                    "nothing to set: give --guaranteed, --borrowing-limit, --lending-limit, --parent or --weight"
                );
            }
            let body = json!({ "parent": group["parent"], "over_quota_weight": group.get("over_quota_weight").cloned().unwrap_or(json!(1.0)), "gpus": group["gpus"] });
            out.show(&client.put(&format!("/v1/quotas/{name}"), &body)?, |g| {
                format!("quota group {name} set: {}\n", group_line(g))
            })
        }
    }
}

fn set_or_clear(entry: &mut Value, key: &str, value: Option<u32>, clear: bool) {
    if let Some(v) = value {
        entry[key] = json!(v);
    } else if clear && let Some(map) = entry.as_object_mut() {
        map.remove(key);
    }
}

/// A stored group in one line: its parent, weight and quotas.
fn group_line(g: &Value) -> String {
    let mut line = format!("parent {}", g["parent"].as_str().unwrap_or("(cluster)"));
    if let Some(w) = g["over_quota_weight"].as_f64().filter(|w| *w != 1.0) {
        let _ = write!(line, ", weight {w}");
    }
    for (t, q) in g["gpus"].as_object().into_iter().flatten() {
        let _ = write!(
            line,
            ", {t}: {} guaranteed",
            q["guaranteed"].as_u64().unwrap_or(0)
        );
        if let Some(b) = q["borrowing_limit"].as_u64() {
            let _ = write!(line, ", borrows at most {b}");
        }
        if let Some(l) = q["lending_limit"].as_u64() {
            let _ = write!(line, ", lends at most {l}");
        }
    }
    line
}

/// The tree as a table, children indented under their parents.
fn tree_text(reply: &Value) -> String {
    let mut out = String::new();
    if let Some(e) = reply["error"].as_str() {
        let _ = writeln!(out, "NOT ENFORCED: {e}");
    }
    let groups = reply["groups"].as_array().cloned().unwrap_or_default();
    if groups.is_empty() {
        out.push_str("no quota tree: every tenant shares the cluster under the policy alone (`arbiter quota set --help`)\n");
        return out;
    }
    let _ = writeln!(
        out,
        "{:<28} {:<6} {:>10} {:>7} {:>6} {:>6} {:>9} {:>7}  borrowing jobs",
        "group", "gpus", "guaranteed", "limit", "lends", "held", "borrowed", "share"
    );
    let depth = |g: &Value| {
        let mut d = 0;
        let mut parent = g["parent"].as_str().map(str::to_string);
        while let Some(p) = parent {
            d += 1;
            parent = groups
                .iter()
                .find(|x| x["name"] == p.as_str())
                .and_then(|x| x["parent"].as_str().map(str::to_string));
        }
        d
    };
    for g in &groups {
        let name = format!(
            "{}{}",
            "  ".repeat(depth(g)),
            g["name"].as_str().unwrap_or("")
        );
        for (t, q) in g["gpus"].as_object().into_iter().flatten() {
            let num = |k: &str| q[k].as_u64().map_or("-".to_string(), |v| v.to_string());
            let limit = q["borrowing_limit"].as_u64().map_or("-".to_string(), |b| {
                (b + q["guaranteed"].as_u64().unwrap_or(0)).to_string()
            });
            let jobs: Vec<String> = g["borrowing_jobs"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_u64)
                .map(|j| j.to_string())
                .collect();
            let share = q["fair_share"]
                .as_f64()
                .map_or("-".to_string(), |s| format!("{s:.1}"));
            let _ = writeln!(
                out,
                "{name:<28} {t:<6} {:>10} {limit:>7} {:>6} {:>6} {:>9} {share:>7}  {}",
                num("guaranteed"),
                num("lending_limit"),
                num("held"),
                num("borrowed"),
                jobs.join(",")
            );
        }
    }
    out
}

/// The stored groups as `[[quota_groups]]` TOML.
fn export_toml(reply: &Value) -> Result<String> {
    let groups: Vec<arbiter_policy::quotas::QuotaGroup> =
        serde_json::from_value(reply["definitions"].clone())
            .context("the daemon's quota groups (admin only)")?;
    #[derive(serde::Serialize)]
    struct File {
        quota_groups: Vec<arbiter_policy::quotas::QuotaGroup>,
    }
    toml::to_string(&File {
        quota_groups: groups,
    })
    .context("writing TOML")
}
