//! The dashboard: a page at `/` (HTML, script and styles embedded in the binary, nothing
//! fetched from elsewhere) that signs in with a token kept in the browser's session storage and
//! polls `GET /v1/dashboard`, one snapshot of what the caller may see — the same rules as the
//! rest of the API: a tenant sees its own jobs in full and other tenants' only as the GPUs they
//! hold; the admin sees everything.
//!
//! The page is served with a strict Content-Security-Policy (scripts and styles from this
//! origin only, no inline script, no framing): a job name is a tenant's text, shown to the admin,
//! and the script only ever sets it as text.

use super::{Api, ApiError};
use crate::daemon::State as DaemonState;
use crate::records::job::{JobRecord, JobState};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::collections::BTreeSet;

const PAGE: &str = include_str!("../../assets/dashboard/index.html");
const SCRIPT: &str = include_str!("../../assets/dashboard/app.js");
const STYLE: &str = include_str!("../../assets/dashboard/app.css");
const ICON: &str = include_str!("../../assets/dashboard/icon.svg");

/// Queued jobs a snapshot lists (oldest first); `queued_total` counts them all.
pub const QUEUE_ROWS: usize = 200;
/// Recent transitions a snapshot lists.
pub const EVENT_ROWS: usize = 50;
/// Transitions looked at per job for the recent events (its latest ones).
const EVENTS_PER_JOB: usize = 4;

/// Tenants' colours: the Okabe–Ito palette, told apart with every common colour-vision
/// deficiency. Blue and orange first, the pair most tenants (two) get. A hash of the name gave
/// `team-a` and `team-b` the same purple; a tenant's place in the order cannot collide with the
/// next one's. Past eight tenants the colours come round again.
pub const TENANT_PALETTE: [&str; 8] = [
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#F0E442", "#000000",
];

/// Each tenant's colour by its place among `names` (in the order given: the tenants' sorted
/// names, so a colour stays put while the tenants do).
pub fn tenant_colors<'a>(
    names: impl IntoIterator<Item = &'a str>,
) -> serde_json::Map<String, Value> {
    names
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            (
                name.to_string(),
                Value::from(TENANT_PALETTE[i % TENANT_PALETTE.len()]),
            )
        })
        .collect()
}

/// Why the dashboard shows no fair share from weights: `None` where `policy` splits GPUs by the
/// tenants' weights, else a sentence saying it does not (a share from weights under `las` —
/// which ignores them — reads as a promise the scheduler does not keep).
pub fn weights_note(policy: arbiter_policy::PolicyKind) -> Option<String> {
    (!policy.uses_tenant_weights()).then(|| {
        let using: Vec<&str> = arbiter_policy::PolicyKind::ALL
            .iter()
            .filter(|k| k.uses_tenant_weights())
            .map(|k| k.name())
            .collect();
        format!(
            "the policy ({policy}) does not use weights; only {} split GPUs by them",
            using.join(" and ")
        )
    })
}

/// The page's security headers: its own origin only, nothing inline, not framed, no referrer.
fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// `GET /`: the dashboard page.
pub(super) async fn page() -> Response {
    asset(PAGE, "text/html; charset=utf-8")
}

/// `GET /dashboard/app.js`.
pub(super) async fn script() -> Response {
    asset(SCRIPT, "text/javascript; charset=utf-8")
}

/// `GET /dashboard/app.css`.
pub(super) async fn style() -> Response {
    asset(STYLE, "text/css; charset=utf-8")
}

/// `GET /dashboard/icon.svg` (named by the page, so the browser asks for no `/favicon.ico`).
pub(super) async fn icon() -> Response {
    asset(ICON, "image/svg+xml")
}

/// The bytes the page loads (page, script, styles): its weight before any data.
pub fn page_weight_bytes() -> usize {
    PAGE.len() + SCRIPT.len() + STYLE.len() + ICON.len()
}

/// Every node with its GPUs and who holds each: the viewer's own jobs by id, name and tenant,
/// others' only as GPUs held (`other_tenant`). Shared by `/v1/cluster` and `/v1/dashboard`.
pub(super) fn node_views(
    s: &DaemonState,
    viewer: Option<&str>,
    unavailable: &BTreeSet<String>,
) -> Vec<Value> {
    let mine = |tenant: &str| viewer.is_none_or(|v| v == tenant);
    let topology = s.topology();
    // Per node, the jobs holding GPUs there (in id order) and their GPUs on it: one pass over
    // the jobs, not one per node.
    let mut on_node: Vec<Vec<(&JobRecord, Vec<u32>)>> = vec![Vec::new(); topology.nodes().len()];
    for j in &s.jobs {
        let Some(gpus) = j.state.gpus() else { continue };
        for &g in gpus {
            let Some(node) = topology.node_of(g).and_then(|n| on_node.get_mut(n.index())) else {
                continue;
            };
            match node.last_mut() {
                Some((last, here)) if last.id == j.id => here.push(g),
                _ => node.push((j, vec![g])),
            }
        }
    }
    topology
        .nodes()
        .iter()
        .zip(on_node)
        .enumerate()
        .map(|(i, (n, holders))| {
            let ids = topology.gpus_of(arbiter_model::NodeId(i as u32));
            // The viewer's own jobs by id, then other tenants' ordered by their GPUs: listing them
            // among the viewer's in id order would tell their ids' range.
            let (mut held, mut hidden): (Vec<Value>, Vec<(Vec<u32>, Value)>) = (Vec::new(), Vec::new());
            for (j, here) in holders {
                if mine(&j.tenant) {
                    held.push(json!({ "id": j.id, "tenant": j.tenant, "name": j.request.name, "gpus": here }));
                } else {
                    hidden.push((here.clone(), json!({ "gpus": here, "other_tenant": true })));
                }
            }
            hidden.sort_by(|a, b| a.0.cmp(&b.0));
            held.extend(hidden.into_iter().map(|(_, v)| v));
            json!({ "name": n.name, "gpu_type": n.gpu_type, "gpu_ids": ids.collect::<Vec<_>>(), "devices": n.devices, "cpus": n.cpus, "memory_gib": n.memory_gib, "rack": n.rack, "takes_new_runs": !unavailable.contains(&n.name), "jobs": held })
        })
        .collect()
}

/// A queued job as the queue table shows it.
fn queued_view(j: &JobRecord) -> Value {
    json!({
        "id": j.id,
        "tenant": j.tenant,
        "name": j.request.name,
        "gpus": j.request.gpus,
        "priority": j.request.priority,
        "priority_class": j.request.priority_class,
        "submitted_unix_s": j.submitted_unix_s,
        "pending_reason": j.pending_reason,
        "preemptions": j.preemptions,
    })
}

/// `GET /v1/dashboard`: one snapshot for the page.
pub(super) async fn snapshot(
    State(api): State<Api>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let caller = api.caller(&headers)?;
    let viewer = caller.tenant().map(str::to_string);
    let unavailable = api.daemon.unavailable_nodes();
    let (executor, round_s) = (api.daemon.executor_name(), api.daemon.settings.round_s);
    let weights_note = weights_note(api.daemon.settings.policy);
    let reservations: Vec<Value> = api
        .daemon
        .reservations()
        .iter()
        .map(|r| super::reservations::view(r, viewer.as_deref()))
        .collect();
    // GPU-hours each tenant has used since the store began (the viewer's own only: rows are
    // filtered to it below, as the metrics' per-tenant series are the admin's).
    let mut gpu_hours: std::collections::BTreeMap<String, f64> = std::collections::BTreeMap::new();
    for ((tenant, _), seconds) in api.daemon.gpu_seconds_by_tenant() {
        *gpu_hours.entry(tenant).or_insert(0.0) += seconds / 3600.0;
    }
    // The quota tree as the viewer may see it (its own path; the admin all of it). Taken before
    // the state below: `quota_view` locks it itself.
    let quotas = quota_section(&api.daemon.quota_view(viewer.as_deref()), viewer.is_none());
    let snapshot = api.daemon.with_state(|s| {
        let viewer = viewer.as_deref();
        let mine = |tenant: &str| viewer.is_none_or(|v| v == tenant);
        let nodes = node_views(s, viewer, &unavailable);
        let queued: Vec<&JobRecord> = s.jobs.iter().filter(|j| matches!(j.state, JobState::Queued)).collect();
        let queue: Vec<Value> = queued.iter().filter(|j| mine(&j.tenant)).take(QUEUE_ROWS).map(|j| queued_view(j)).collect();
        let visible_queued = queued.iter().filter(|j| mine(&j.tenant)).count();
        // Per tenant: GPUs held, jobs queued, weight, quota. A tenant sees its own line and
        // the cluster's totals, not the other tenants'.
        let mut usage: std::collections::BTreeMap<&str, (u32, usize)> = std::collections::BTreeMap::new();
        for j in &s.jobs {
            let entry = usage.entry(j.tenant.as_str()).or_default();
            entry.0 += j.state.gpus().map_or(0, |g| g.len() as u32);
            entry.1 += usize::from(matches!(j.state, JobState::Queued));
        }
        let total_weight: f64 = s.tenants.values().map(|t| t.weight).sum();
        // Colours by the order of the tenants the viewer may see (then the tenants of jobs it
        // sees that are not on the list: `admin`, a removed tenant's): a tenant sees its own
        // colour only, so its colour tells nothing of how many tenants sort before it.
        let mut colored: Vec<&str> = s.tenants.keys().map(String::as_str).filter(|t| mine(t)).collect();
        colored.extend(usage.keys().copied().filter(|t| mine(t) && !s.tenants.contains_key(*t)));
        let colors = tenant_colors(colored);
        let tenants: Vec<Value> = s
            .tenants
            .values()
            .filter(|t| mine(&t.name))
            .map(|t| {
                let (gpus, queued) = usage.get(t.name.as_str()).copied().unwrap_or_default();
                // The share is the admin's to see: to a tenant it would tell the other tenants'
                // total weight, which only the admin may list. And only where the policy uses
                // weights at all.
                let share = (viewer.is_none() && total_weight > 0.0 && weights_note.is_none()).then(|| t.weight / total_weight);
                let used = gpu_hours.get(&t.name).copied().unwrap_or(0.0);
                json!({ "name": t.name, "gpus_held": gpus, "queued": queued, "weight": t.weight, "share": share, "gpu_quota": t.gpu_quota, "gpu_hours": used, "color": colors.get(&t.name) })
            })
            .collect();
        // Recent events: the latest transitions of the jobs the viewer may see, newest first.
        let mut events: Vec<(i64, u32, &str, &str, &str)> = s
            .jobs
            .iter()
            .filter(|j| mine(&j.tenant))
            .flat_map(|j| j.history.iter().rev().take(EVENTS_PER_JOB).map(move |t| (t.at_unix_s, j.id, j.tenant.as_str(), t.to.name(), t.why.as_str())))
            .collect();
        let keep = EVENT_ROWS.min(events.len());
        if keep > 0 && events.len() > keep {
            events.select_nth_unstable_by(keep - 1, |a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
            events.truncate(keep);
        }
        events.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
        let events: Vec<Value> = events.into_iter().map(|(at, id, tenant, to, why)| json!({ "at_unix_s": at, "job": id, "tenant": tenant, "to": to, "why": why })).collect();
        let gpus_total = s.topology().total_gpus();
        let gpus_held: u32 = usage.values().map(|(g, _)| g).sum();
        json!({
            "viewer": viewer.map_or_else(|| "admin".to_string(), |t| format!("tenant {t}")),
            "policy": s.policy_name(),
            "executor": executor,
            "round_s": round_s,
            "nodes": nodes,
            "queue": queue,
            "queued_visible": visible_queued,
            "queued_total": queued.len(),
            "tenants": tenants,
            "tenant_colors": colors,
            "weights_used": weights_note.is_none(),
            "weights_note": weights_note,
            "events": events,
            "gpus_total": gpus_total,
            "gpus_held": gpus_held,
            "reservations": reservations,
            "quotas": quotas,
        })
    });
    Ok(Json(snapshot))
}

/// The quota section of a snapshot, from [`Daemon::quota_view`](crate::daemon::Daemon::quota_view)
/// (which keeps to what the viewer may see: a tenant its own path — its group and the groups
/// above it, their totals — the admin every node): `None` where there is no tree to show. The
/// groups come in tree order, each under its parent, with its `depth` (0: under the cluster).
///
/// Where the tree is not enforced, the admin sees why and the groups as defined (no use); a
/// tenant only that it is not — the reason names groups, its siblings' among them. How many jobs
/// the last round reclaimed, all tenants' together, is the admin's too.
pub fn quota_section(view: &Value, admin: bool) -> Option<Value> {
    let enforced = view["enforced"].as_bool().unwrap_or(false);
    let error = view["error"].as_str();
    let definitions = view["definitions"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let (groups, gpu_types): (Vec<Value>, Vec<Value>) = if enforced {
        let groups = view["groups"].as_array().cloned().unwrap_or_default();
        let types = view["gpu_types"].as_array().cloned().unwrap_or_default();
        (groups, types)
    } else if admin {
        defined_groups(definitions)
    } else {
        (Vec::new(), Vec::new())
    };
    if !enforced && error.is_none() && groups.is_empty() {
        return None;
    }
    let error = error.map(|e| {
        if admin {
            e.to_string()
        } else {
            "the quota tree does not fit the cluster (the admin is told why)".to_string()
        }
    });
    Some(json!({
        "enforced": enforced,
        "error": error,
        "gpu_types": gpu_types,
        "groups": in_tree_order(groups),
        "scope": if admin { "all" } else { "own path" },
        "reclaimed_last_round": if admin { view["reclaimed_last_round"].clone() } else { Value::Null },
    }))
}

/// Groups as the admin defined them (`QuotaGroup`s), shaped as the view's nodes with no use:
/// what the page shows of a tree that is not enforced. With the GPU types they name, sorted.
fn defined_groups(definitions: &[Value]) -> (Vec<Value>, Vec<Value>) {
    let parents: BTreeSet<&str> = definitions
        .iter()
        .filter_map(|g| g["parent"].as_str())
        .collect();
    let mut types: BTreeSet<String> = BTreeSet::new();
    let groups = definitions
        .iter()
        .map(|g| {
            let mut gpus = serde_json::Map::new();
            for (name, q) in g["gpus"].as_object().into_iter().flatten() {
                types.insert(name.clone());
                gpus.insert(name.clone(), json!({
                    "guaranteed": q["guaranteed"].as_u64().unwrap_or(0),
                    "borrowing_limit": q["borrowing_limit"], "lending_limit": q["lending_limit"],
                    "held": null, "borrowed": null, "fair_share": null,
                }));
            }
            let name = g["name"].as_str().unwrap_or_default();
            json!({
                "name": name, "parent": g["parent"],
                "over_quota_weight": g.get("over_quota_weight").cloned().unwrap_or(json!(1.0)),
                "gpus": gpus, "leaf": !parents.contains(name), "borrowing_jobs": [],
            })
        })
        .collect();
    (groups, types.into_iter().map(Value::from).collect())
}

/// `groups` (each naming its `parent`, or none under the cluster) ordered depth first, each
/// right under its parent and its siblings in the order given, with its `depth`. A group whose
/// parent is not among them counts as under the cluster; none is lost or shown twice.
fn in_tree_order(groups: Vec<Value>) -> Vec<Value> {
    let names: BTreeSet<String> = groups
        .iter()
        .filter_map(|g| g["name"].as_str().map(str::to_string))
        .collect();
    let parent_of = |g: &Value| {
        g["parent"]
            .as_str()
            .filter(|p| names.contains(*p) && Some(*p) != g["name"].as_str())
            .map(str::to_string)
    };
    let mut children: std::collections::BTreeMap<Option<String>, Vec<usize>> =
        std::collections::BTreeMap::new();
    for (i, g) in groups.iter().enumerate() {
        children.entry(parent_of(g)).or_default().push(i);
    }
    let mut placed = vec![false; groups.len()];
    let mut order: Vec<(usize, usize)> = Vec::with_capacity(groups.len());
    // Depth first from the groups under the cluster; then any left (a cycle) at the top.
    let mut starts: Vec<usize> = children.get(&None).cloned().unwrap_or_default();
    starts.extend(0..groups.len());
    for start in starts {
        let mut stack = vec![(start, 0)];
        while let Some((i, depth)) = stack.pop() {
            if std::mem::replace(&mut placed[i], true) {
                continue;
            }
            order.push((i, depth));
            let name = groups[i]["name"].as_str().map(str::to_string);
            if let Some(kids) = name.and_then(|n| children.get(&Some(n))) {
                stack.extend(kids.iter().rev().map(|&k| (k, depth + 1)));
            }
        }
    }
    let mut groups: Vec<Option<Value>> = groups.into_iter().map(Some).collect();
    order
        .into_iter()
        .filter_map(|(i, depth)| {
            let mut g = groups[i].take()?;
            if let Some(fields) = g.as_object_mut() {
                fields.insert("depth".to_string(), Value::from(depth));
            }
            Some(g)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbiter_policy::PolicyKind;

    #[test]
    fn tenants_get_distinct_palette_colours_in_their_order() {
        // Issue 33: a hash of the names gave team-a and team-b the same purple.
        let colors = tenant_colors(["team-a", "team-b"]);
        let (a, b) = (
            colors["team-a"].as_str().expect("a colour"),
            colors["team-b"].as_str().expect("a colour"),
        );
        assert_ne!(a, b);
        assert!(TENANT_PALETTE.contains(&a) && TENANT_PALETTE.contains(&b));
        // Every tenant of a palette's worth is told apart.
        let names: Vec<String> = (0..TENANT_PALETTE.len()).map(|i| format!("t{i}")).collect();
        let colors = tenant_colors(names.iter().map(String::as_str));
        let distinct: BTreeSet<&str> = colors.values().filter_map(Value::as_str).collect();
        assert_eq!(distinct.len(), TENANT_PALETTE.len());
    }

    #[test]
    fn fair_shares_are_noted_as_unused_where_the_policy_ignores_weights() {
        assert_eq!(weights_note(PolicyKind::Hierarchical), None);
        assert_eq!(weights_note(PolicyKind::Vtc), None);
        let note = weights_note(PolicyKind::Las).expect("las ignores weights");
        assert!(
            note.starts_with("the policy (las) does not use weights"),
            "{note}"
        );
    }

    fn node(name: &str, parent: Option<&str>, guaranteed: u32, held: u32) -> Value {
        json!({ "name": name, "parent": parent, "over_quota_weight": 1.0, "leaf": true, "borrowing_jobs": [],
            "gpus": { "a100": { "guaranteed": guaranteed, "borrowing_limit": null, "lending_limit": null,
                "held": held, "borrowed": held.saturating_sub(guaranteed), "fair_share": 1.5 } } })
    }

    fn names_and_depths(section: &Value) -> Vec<(String, u64)> {
        section["groups"]
            .as_array()
            .expect("groups")
            .iter()
            .map(|g| {
                (
                    g["name"].as_str().expect("a name").to_string(),
                    g["depth"].as_u64().expect("a depth"),
                )
            })
            .collect()
    }

    #[test]
    fn no_tree_shows_nothing() {
        let none = json!({ "enforced": false, "error": null, "groups": [], "definitions": [] });
        assert_eq!(quota_section(&none, true), None);
        assert_eq!(quota_section(&none, false), None);
    }

    #[test]
    fn groups_come_each_under_its_parent_with_its_depth() {
        // The tree's index order (parents first, not each right under its own) ...
        let view = json!({ "enforced": true, "error": null, "gpu_types": ["a100"], "reclaimed_last_round": 1,
            "groups": [node("org", None, 4, 3), node("b", None, 2, 1), node("team-a", Some("org"), 2, 3),
                node("team-c", Some("org"), 2, 0), node("sub", Some("team-a"), 1, 1), node("(other tenants)", None, 0, 0)],
            "definitions": [] });
        let section = quota_section(&view, true).expect("a tree");
        // ... shown depth first.
        assert_eq!(
            names_and_depths(&section),
            [
                ("org", 0),
                ("team-a", 1),
                ("sub", 2),
                ("team-c", 1),
                ("b", 0),
                ("(other tenants)", 0)
            ]
            .map(|(n, d)| (n.to_string(), d))
        );
        assert_eq!(section["groups"][1]["gpus"]["a100"]["borrowed"], 1);
        assert_eq!(section["reclaimed_last_round"], 1);
        assert_eq!(section["scope"], "all");
        // A parent not shown, or a loop, loses no group and shows none twice.
        let odd = in_tree_order(vec![
            node("x", Some("y"), 0, 0),
            node("y", Some("x"), 0, 0),
            node("z", Some("gone"), 0, 0),
            node("self", Some("self"), 0, 0),
        ]);
        let mut seen: Vec<&str> = odd.iter().filter_map(|g| g["name"].as_str()).collect();
        seen.sort_unstable();
        assert_eq!(seen, ["self", "x", "y", "z"]);
    }

    #[test]
    fn a_tenant_is_not_told_why_a_tree_is_not_enforced_nor_the_clusters_reclaims() {
        // The reason names groups: a sibling's among them.
        let error = "quota group `team-a`: unknown GPU type `h100`";
        let admin_view = json!({ "enforced": false, "error": error, "groups": [],
            "definitions": [{ "name": "org", "gpus": { "a100": { "guaranteed": 4, "borrowing_limit": 2 } } },
                { "name": "team-a", "parent": "org", "over_quota_weight": 2.0, "gpus": { "h100": { "guaranteed": 2 } } }] });
        let admin = quota_section(&admin_view, true).expect("the admin's");
        assert_eq!(admin["error"], error);
        assert_eq!(admin["enforced"], false);
        assert_eq!(admin["gpu_types"], json!(["a100", "h100"]));
        assert_eq!(
            names_and_depths(&admin),
            [("org".to_string(), 0), ("team-a".to_string(), 1)]
        );
        assert_eq!(admin["groups"][0]["leaf"], false);
        assert_eq!(admin["groups"][0]["gpus"]["a100"]["borrowing_limit"], 2);
        assert!(admin["groups"][0]["gpus"]["a100"]["held"].is_null());
        assert_eq!(admin["groups"][1]["over_quota_weight"], 2.0);

        let tenant_view =
            json!({ "enforced": false, "error": error, "groups": [], "definitions": [] });
        let tenant = quota_section(&tenant_view, false).expect("the tenant is told");
        let text = tenant.to_string();
        assert!(!text.contains("team-a") && !text.contains("h100"), "{text}");
        assert_eq!(tenant["groups"], json!([]));
        let enforced = json!({ "enforced": true, "error": null, "gpu_types": ["a100"], "reclaimed_last_round": 3,
            "groups": [node("b", None, 2, 1)], "definitions": [] });
        let tenant = quota_section(&enforced, false).expect("its path");
        assert!(tenant["reclaimed_last_round"].is_null());
        assert_eq!(tenant["scope"], "own path");
    }
}
