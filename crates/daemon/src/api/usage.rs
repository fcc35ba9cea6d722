//! `GET /v1/usage` (what runs used, like Slurm's `sreport`) and `/metrics`' per-tenant series.
//! A tenant sees its own usage only (`?tenant=` of another is 403); the admin sees everyone's.

use super::{Api, ApiError, query};
use crate::daemon::Daemon;
use crate::records::usage::{GroupBy, parse_since};
use crate::security::auth::Caller;
use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

/// The window `GET /v1/usage` reports when `?since=` is absent.
pub const DEFAULT_SINCE: &str = "7d";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct UsageQuery {
    /// Start of the window: `7d`, `36h`, `90m`, `2w`, a date `YYYY-MM-DD` (UTC), or `all`.
    since: Option<String>,
    /// Groupings, comma-separated: `tenant`, `user`, `gpu-type`, `day`.
    by: Option<String>,
    /// Admin only: one tenant's usage.
    tenant: Option<String>,
}

pub(super) async fn usage(
    State(api): State<Api>,
    headers: HeaderMap,
    q: Result<Query<UsageQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let caller = api.caller(&headers)?;
    let q = query(q)?;
    let tenant = match (&caller, q.tenant) {
        (Caller::Tenant(own), Some(asked)) if asked != *own => {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "a tenant can only see its own usage",
            ));
        }
        (Caller::Tenant(own), _) => Some(own.clone()),
        (Caller::Admin, asked) => asked,
    };
    let now = api.daemon.now_s();
    let since_text = q.since.unwrap_or_else(|| DEFAULT_SINCE.into());
    let since = parse_since(&since_text, now).map_err(|e| ApiError::bad("since", e))?;
    let by = GroupBy::parse_list(q.by.as_deref().unwrap_or("tenant"))
        .map_err(|e| ApiError::bad("by", e))?;
    let names: Vec<&str> = by.iter().map(|g| g.name()).collect::<Vec<_>>();
    let daemon = api.daemon.clone();
    let rows =
        tokio::task::spawn_blocking(move || daemon.usage_report(tenant.as_deref(), by, since))
            .await
            .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
            .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let total = |f: fn(&crate::records::usage::UsageRow) -> f64| rows.iter().map(f).sum::<f64>();
    Ok(Json(json!({
        "since_unix_s": (since != i64::MIN).then_some(since),
        "until_unix_s": now,
        "by": names,
        "rows": rows,
        "total": { "gpu_s": total(|r| r.gpu_s), "cpu_s": total(|r| r.cpu_s), "memory_gib_s": total(|r| r.memory_gib_s) },
    })))
}

/// The per-tenant series of `/metrics`: GPU-seconds by tenant and GPU type since the store
/// began (runs going on counted up to now), a counter.
pub(super) fn tenant_metrics(daemon: &Daemon) -> String {
    let mut out = String::from(
        "# HELP arbiter_tenant_gpu_seconds_total GPU-seconds used by each tenant's runs, by GPU type (runs going on up to now).\n# TYPE arbiter_tenant_gpu_seconds_total counter\n",
    );
    for ((tenant, gpu_type), gpu_s) in daemon.gpu_seconds_by_tenant() {
        out.push_str(&format!(
            "arbiter_tenant_gpu_seconds_total{{tenant=\"{}\",gpu_type=\"{}\"}} {gpu_s}\n",
            label(&tenant),
            label(&gpu_type)
        ));
    }
    out
}

/// A Prometheus label value: backslash, double quote and newline escaped.
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    #[test]
    fn label_values_cannot_break_out_of_their_quotes() {
        assert_eq!(super::label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
