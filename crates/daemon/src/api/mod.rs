//! The HTTP/JSON API under `/v1` (axum), `/metrics` (Prometheus text) and
//! `/v1/openapi.json`.
//!
//! Errors are JSON `{"error": "...", "field": "..."}` with 400 (bad input or query parameter,
//! naming it), 401 (no or unknown token; the `Bearer` scheme in any case), 403 (another tenant's
//! job, or admin only), 404, 409 (job ended, tenant exists or still has jobs), 413 (body over the
//! limit), 500 (store failure), 503 (the store cannot take writes now; nothing was changed).
//!
//! Connections are served by [`serve_connections`] with a header timeout, an idle timeout and a
//! connection limit; logs are streamed from their files, at most [`MAX_LOG_RESPONSE_BYTES`] a
//! response.

use crate::daemon::{Daemon, RequestError};
use crate::records::holders::GpuHolders;
use crate::records::job::{JobRecord, JobState, SubmitRequest};
use crate::records::progress::ProgressReport;
use crate::records::store::Tenant;
use crate::security::auth::{Caller, sha256_hex};
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use axum::{Json, Router};
use http_body::{Frame, SizeHint};
use serde::Deserialize;
use serde_json::{Value, json};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncSeekExt, ReadBuf};

pub mod client;
mod dashboard;
pub mod history;
mod limits;
mod logs;
mod openapi;
mod quotas;
mod reservations;
mod server;
mod tenants;
mod usage;
mod webhooks;

pub use dashboard::page_weight_bytes;
pub use limits::TenantLimits;
use logs::job_logs;
use openapi::openapi;
pub use openapi::openapi_document;
pub use server::{ConnectionLimits, serve_connections};
use tenants::{add_tenant, list_tenants, remove_tenant, rotate_tenant_token, update_tenant};

/// Shared by every handler.
#[derive(Clone)]
pub struct Api {
    /// The daemon.
    pub daemon: Daemon,
    /// SHA-256 of the admin token.
    pub admin_token_sha256: String,
    /// Serializes tenant changes, so that "add refuses an existing tenant" holds between two
    /// concurrent `add`s of the same name.
    tenant_changes: Arc<tokio::sync::Mutex<()>>,
    /// Each tenant's connections and requests in flight (`limits.rs`).
    shares: Arc<limits::TenantShares>,
    /// SHA-256 of the scrape token (`metrics_token_file`), which reads `/metrics` whole.
    metrics_token_sha256: Option<String>,
}

/// The job states `?state=` accepts.
pub const JOB_STATES: [&str; 6] = [
    "queued",
    "running",
    "stopping",
    "succeeded",
    "failed",
    "cancelled",
];

/// Responses of `GET /v1/jobs/{id}/logs` are at most this long unless `?max_bytes=` asks for less.
pub const MAX_LOG_RESPONSE_BYTES: u64 = 16 * 1024 * 1024;

/// An API error response.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
    field: Option<&'static str>,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            field: None,
        }
    }

    /// 400 naming `field`; the message starts with the field's name.
    fn bad(field: &'static str, reason: impl std::fmt::Display) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: format!("{field}: {reason}"),
            field: Some(field),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({ "error": self.message });
        if let Some(f) = self.field {
            body["field"] = json!(f);
        }
        (self.status, Json(body)).into_response()
    }
}

impl From<RequestError> for ApiError {
    fn from(e: RequestError) -> Self {
        match e {
            RequestError::NotFound(_) => ApiError::new(StatusCode::NOT_FOUND, e.to_string()),
            RequestError::Forbidden(_) => ApiError::new(StatusCode::FORBIDDEN, e.to_string()),
            RequestError::Ended(_) => ApiError::new(StatusCode::CONFLICT, e.to_string()),
            RequestError::Invalid(f) => ApiError {
                status: StatusCode::BAD_REQUEST,
                message: f.to_string(),
                field: Some(f.field),
            },
            RequestError::Store(s) => {
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, s.to_string())
            }
            RequestError::Unavailable(_) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
            }
            RequestError::Conflict(_) => ApiError::new(StatusCode::CONFLICT, e.to_string()),
            RequestError::WrongJobToken(_) => ApiError::new(StatusCode::FORBIDDEN, e.to_string()),
            RequestError::TooMany(_) => ApiError::new(StatusCode::TOO_MANY_REQUESTS, e.to_string()),
        }
    }
}

fn json_body<T>(body: Result<Json<T>, JsonRejection>) -> Result<T, ApiError> {
    body.map(|Json(v)| v).map_err(|rejection| {
        // serde's message names the field (`unknown field `gpu`, expected ...`, `invalid type:
        // ... for key `gpus``). (Bodies over the limit never get here: see `router`.)
        ApiError::new(StatusCode::BAD_REQUEST, rejection.body_text())
    })
}

/// The token of an `Authorization: Bearer <token>` header. The scheme is matched without regard
/// to case (RFC 7235: `bearer`, `BEARER` and `Bearer` are the same scheme).
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get("authorization")?.to_str().ok()?.trim_start();
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

impl Api {
    /// The API of `daemon`, whose admin token hashes to `admin_token_sha256`.
    pub fn new(daemon: Daemon, admin_token_sha256: String) -> Self {
        Api {
            daemon,
            admin_token_sha256,
            tenant_changes: Arc::default(),
            shares: Arc::new(limits::TenantShares::new(TenantLimits::default())),
            metrics_token_sha256: None,
        }
    }

    /// This API with per-tenant limits `limits` (default: [`TenantLimits::default`]).
    pub fn with_tenant_limits(mut self, limits: TenantLimits) -> Self {
        self.shares = Arc::new(limits::TenantShares::new(limits));
        self
    }

    /// This API with a scrape token for `/metrics` (its SHA-256): it reads the per-tenant series
    /// as the admin token does, and nothing else.
    pub fn with_metrics_token_sha256(mut self, sha256: String) -> Self {
        self.metrics_token_sha256 = Some(sha256);
        self
    }

    fn caller(&self, headers: &HeaderMap) -> Result<Caller, ApiError> {
        let token = bearer_token(headers).ok_or_else(|| {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "missing `Authorization: Bearer <token>`",
            )
        })?;
        let hash = sha256_hex(token);
        if hash == self.admin_token_sha256 {
            return Ok(Caller::Admin);
        }
        self.daemon
            .tenant_by_token_hash(&hash)
            .map(Caller::Tenant)
            .ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "unknown token"))
    }

    fn admin(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        match self.caller(headers)? {
            Caller::Admin => Ok(()),
            Caller::Tenant(_) => Err(ApiError::new(StatusCode::FORBIDDEN, "admin only")),
        }
    }
}

/// The router. Every request must be handled — its body read included — within
/// `request_timeout` (408 beyond): a client trickling a body one byte at a time cannot hold a
/// connection for longer than that. A streamed response (a log) is not cut by it.
///
/// The body is read whole (up to `max_request_bytes`) before any handler runs, even by routes
/// that ignore it (`cancel`) or refuse the caller first: a body left unread makes hyper close
/// the keep-alive connection after the response without saying so, and the client's next
/// request on it fails with a broken pipe.
pub fn router(api: Api, max_request_bytes: usize, request_timeout: std::time::Duration) -> Router {
    let deadline = move |request: axum::extract::Request, next: axum::middleware::Next| async move {
        let handled = async {
            let (parts, body) = request.into_parts();
            match axum::body::to_bytes(body, max_request_bytes).await {
                Ok(bytes) => {
                    next.run(axum::extract::Request::from_parts(parts, Body::from(bytes)))
                        .await
                }
                Err(_) => body_refused(max_request_bytes),
            }
        };
        let mut response = match tokio::time::timeout(request_timeout, handled).await {
            Ok(response) => response,
            Err(_) => ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request took longer than {} s (request_timeout_s)",
                    request_timeout.as_secs_f64()
                ),
            )
            .into_response(),
        };
        // Answers carry one caller's data (and logs and error texts echo tenants' text): never
        // cached, never sniffed into another type.
        let headers = response.headers_mut();
        headers
            .entry(axum::http::header::CACHE_CONTROL)
            .or_insert(axum::http::HeaderValue::from_static("no-store"));
        headers
            .entry(axum::http::header::X_CONTENT_TYPE_OPTIONS)
            .or_insert(axum::http::HeaderValue::from_static("nosniff"));
        headers
            .entry(axum::http::header::VARY)
            .or_insert(axum::http::HeaderValue::from_static("Authorization"));
        response
    };
    Router::new()
        .route("/v1/jobs", post(submit).get(list_jobs))
        .route("/v1/jobs/{id}", get(show_job))
        .route("/v1/jobs/{id}/cancel", post(cancel_job))
        .route("/v1/jobs/{id}/logs", get(job_logs))
        .route("/v1/jobs/{id}/progress", post(report_progress))
        .route("/v1/cluster", get(cluster))
        .route(
            "/v1/reservations",
            get(reservations::list).post(reservations::add),
        )
        .route(
            "/v1/reservations/{id}",
            axum::routing::delete(reservations::delete),
        )
        .route("/v1/quotas", get(quotas::show))
        .route(
            "/v1/quotas/{name}",
            axum::routing::put(quotas::set).delete(quotas::delete),
        )
        .route("/v1/pairs", get(pairs))
        .route("/v1/history", get(history::history))
        .route("/v1/usage", get(usage::usage))
        .route("/v1/tenants", get(list_tenants).post(add_tenant))
        .route(
            "/v1/tenants/{name}",
            patch(update_tenant).delete(remove_tenant),
        )
        .route("/v1/tenants/{name}/token", post(rotate_tenant_token))
        .route("/v1/openapi.json", get(openapi))
        .route("/metrics", get(metrics))
        .route("/", get(dashboard::page))
        .route("/dashboard/app.js", get(dashboard::script))
        .route("/dashboard/app.css", get(dashboard::style))
        .route("/dashboard/icon.svg", get(dashboard::icon))
        .route("/v1/dashboard", get(dashboard::snapshot))
        // The body limit is the one `deadline` enforces while reading every body (413), not
        // axum's per-extractor one.
        .layer(DefaultBodyLimit::disable())
        .layer(axum::middleware::from_fn_with_state(
            api.clone(),
            limits::tenant_shares,
        ))
        .layer(axum::middleware::from_fn(deadline))
        .with_state(api)
}

/// A body over `max_request_bytes` (or one the client broke off): 413, and the connection is
/// closed — the rest of the body is still on it — with a header that says so.
fn body_refused(max_request_bytes: usize) -> Response {
    let mut response = ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, format!("the request body is over {max_request_bytes} bytes (max_request_bytes) or was not sent whole")).into_response();
    response.headers_mut().insert(
        axum::http::header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    response
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SubmitQuery {
    /// Admin only: submit on behalf of this tenant.
    tenant: Option<String>,
}

/// A query string that does not parse (`?tail_bytes=x`) is a 400 naming the parameter, in the
/// same JSON shape as every other error.
fn query<T>(q: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    q.map(|Query(v)| v)
        .map_err(|rejection| ApiError::new(StatusCode::BAD_REQUEST, rejection.body_text()))
}

/// Checks an admin's `?tenant=`: a tenant that exists, or `admin` (the admin's own jobs); with
/// `or_has_jobs`, also a removed tenant that still has jobs on record.
fn known_tenant(api: &Api, tenant: &str, or_has_jobs: bool) -> Result<(), ApiError> {
    let known = tenant == "admin"
        || api.daemon.with_state(|s| {
            s.tenants.contains_key(tenant)
                || (or_has_jobs && s.jobs.iter().any(|j| j.tenant == tenant))
        });
    if known {
        Ok(())
    } else {
        Err(ApiError::bad(
            "tenant",
            format!("unknown tenant `{tenant}` (`arbiter tenants` lists them)"),
        ))
    }
}

async fn submit(
    State(api): State<Api>,
    headers: HeaderMap,
    q: Result<Query<SubmitQuery>, QueryRejection>,
    body: Result<Json<SubmitRequest>, JsonRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let caller = api.caller(&headers)?;
    let q = query(q)?;
    let mut request = json_body(body)?;
    // The `Idempotency-Key` header is another way to give `client_request_id`.
    if let Some(value) = headers.get("idempotency-key") {
        let key = value
            .to_str()
            .map_err(|_| {
                ApiError::bad(
                    "client_request_id",
                    "the Idempotency-Key header is not visible ASCII",
                )
            })?
            .trim()
            .to_string();
        match &request.client_request_id {
            Some(given) if *given != key => {
                return Err(ApiError::bad(
                    "client_request_id",
                    format!("`{given}` differs from the Idempotency-Key header `{key}`"),
                ));
            }
            _ => request.client_request_id = Some(key),
        }
    }
    let tenant = match (&caller, q.tenant) {
        (Caller::Tenant(t), Some(asked)) if asked != *t => {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "a tenant can only submit its own jobs",
            ));
        }
        (Caller::Tenant(t), _) => t.clone(),
        (Caller::Admin, Some(t)) => {
            known_tenant(&api, &t, false)?;
            t
        }
        (Caller::Admin, None) => "admin".to_string(),
    };
    let submitted = tokio::task::spawn_blocking(move || api.daemon.submit(&tenant, request))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))??;
    let mut body = json!({ "id": submitted.id });
    if let Some(tasks) = submitted.tasks {
        body["array_tasks"] = json!(tasks);
    }
    if submitted.duplicate {
        body["duplicate"] = json!(true);
        Ok((StatusCode::OK, Json(body)))
    } else {
        Ok((StatusCode::CREATED, Json(body)))
    }
}

/// A job as the API shows it (no token hash), with `shares_gpus_with`: the other jobs holding
/// GPUs it holds (a co-locating policy put them there), as `viewer` (`None`: the admin) may see
/// them — by id when they are its own tenant's, else only as shared GPUs. `executed_s` is as of
/// `now_unix_s`, the run going on included (the record counts ended runs only).
fn job_json(job: &JobRecord, holders: &GpuHolders, viewer: Option<&str>, now_unix_s: i64) -> Value {
    let mut v = serde_json::to_value(job).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        o.remove("token_sha256");
        o.remove("measurements");
        o.insert(
            "executed_s".into(),
            Value::from(job.executed_s_at(now_unix_s)),
        );
        o.insert(
            "shares_gpus_with".into(),
            serde_json::to_value(holders.shared_with(job, viewer)).unwrap_or(Value::Null),
        );
    }
    v
}

/// Who holds the GPUs `jobs` hold now (read only when one of them holds any).
fn holders_for(api: &Api, jobs: &[&JobRecord]) -> GpuHolders {
    let gpus: std::collections::BTreeSet<u32> = jobs
        .iter()
        .filter_map(|j| j.state.gpus())
        .flatten()
        .copied()
        .collect();
    if gpus.is_empty() {
        GpuHolders::default()
    } else {
        api.daemon
            .with_state(|s| GpuHolders::of_gpus(&s.jobs, &gpus))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    state: Option<String>,
    tenant: Option<String>,
    limit: Option<usize>,
    after: Option<u32>,
}

/// Jobs per page of `GET /v1/jobs` unless `?limit=` says otherwise, and the most it may say.
pub const DEFAULT_JOBS_PAGE: usize = 1000;
/// See [`DEFAULT_JOBS_PAGE`].
pub const MAX_JOBS_PAGE: usize = 10_000;
/// A page of `GET /v1/jobs` holds at most about this much JSON, whatever `?limit=` says (at
/// least one job): `next_after` then names the rest.
pub const MAX_JOBS_PAGE_BYTES: u64 = 4 << 20;

async fn list_jobs(
    State(api): State<Api>,
    headers: HeaderMap,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let caller = api.caller(&headers)?;
    let q = query(q)?;
    if let Some(state) = q.state.as_deref()
        && !JOB_STATES.contains(&state)
    {
        return Err(ApiError::bad(
            "state",
            format!("unknown state `{state}`; one of {}", JOB_STATES.join(", ")),
        ));
    }
    let tenant = match &caller {
        Caller::Tenant(t) => {
            if q.tenant.as_ref().is_some_and(|asked| asked != t) {
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    "a tenant can only list its own jobs",
                ));
            }
            Some(t.clone())
        }
        Caller::Admin => {
            if let Some(t) = &q.tenant {
                known_tenant(&api, t, true)?;
            }
            q.tenant.clone()
        }
    };
    let limit = match q.limit {
        None => DEFAULT_JOBS_PAGE,
        Some(n) if (1..=MAX_JOBS_PAGE).contains(&n) => n,
        Some(n) => {
            return Err(ApiError::bad(
                "limit",
                format!("{n} is not in 1..={MAX_JOBS_PAGE}"),
            ));
        }
    };
    let (jobs, more) = api.daemon.jobs_page(
        tenant.as_deref(),
        q.state.as_deref(),
        q.after,
        limit,
        MAX_JOBS_PAGE_BYTES,
    );
    let next_after = if more {
        jobs.last().map(|j| j.id)
    } else {
        None
    };
    let holders = holders_for(&api, &jobs.iter().collect::<Vec<_>>());
    let viewer = caller.tenant();
    let now = api.daemon.now_s();
    Ok(Json(
        json!({ "jobs": jobs.iter().map(|j| job_json(j, &holders, viewer, now)).collect::<Vec<_>>(), "next_after": next_after }),
    ))
}

async fn show_job(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let caller = api.caller(&headers)?;
    let id = api.daemon.job_ref(&id)?;
    let job = api.daemon.job(id, caller.tenant())?;
    let holders = holders_for(&api, &[&job]);
    Ok(Json(job_json(
        &job,
        &holders,
        caller.tenant(),
        api.daemon.now_s(),
    )))
}

/// Cancels a job; an array's id (`12`, not `12_0`) cancels every task of the array, as
/// `scancel` does.
async fn cancel_job(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(text): Path<String>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let caller = api.caller(&headers)?;
    let tenant = caller.tenant().map(str::to_string);
    let id = api.daemon.job_ref(&text)?;
    let whole_array = !text.contains('_') && api.daemon.is_array(id);
    let tasks = tokio::task::spawn_blocking(move || {
        if whole_array {
            api.daemon.cancel_array(id, tenant.as_deref()).map(Some)
        } else {
            api.daemon.cancel(id, tenant.as_deref()).map(|()| None)
        }
    })
    .await
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))??;
    let mut body = json!({ "id": id, "cancelling": true });
    if let Some(n) = tasks {
        body["array_tasks_cancelled"] = json!(n);
    }
    Ok((StatusCode::ACCEPTED, Json(body)))
}

async fn report_progress(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(id): Path<u32>,
    body: Result<Json<ProgressReport>, JsonRejection>,
) -> Result<StatusCode, ApiError> {
    let token = bearer_token(&headers)
        .ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "missing the job token"))?
        .to_string();
    let report = json_body(body)?;
    report.validate().map_err(|f| ApiError {
        status: StatusCode::BAD_REQUEST,
        message: f.to_string(),
        field: Some(f.field),
    })?;
    tokio::task::spawn_blocking(move || api.daemon.report_progress(id, &token, report))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))??;
    Ok(StatusCode::NO_CONTENT)
}

/// The cluster. The admin sees every running job; a tenant sees its own running jobs in full and
/// the others' only as the GPUs they hold (no id, name or tenant), and counts only its own queued
/// jobs (`queued`) next to the total (`queued_total`).
async fn cluster(State(api): State<Api>, headers: HeaderMap) -> Result<Json<Value>, ApiError> {
    let caller = api.caller(&headers)?;
    let settings = api.daemon.settings.clone();
    let free = api.daemon.free_gpus();
    let viewer = caller.tenant().map(str::to_string);
    let unavailable = api.daemon.unavailable_nodes();
    let (policy, running, queued, queued_total, nodes) = api.daemon.with_state(|s| {
        let mine = |tenant: &str| viewer.as_deref().is_none_or(|v| v == tenant);
        let nodes = dashboard::node_views(s, viewer.as_deref(), &unavailable);
        // The caller's own jobs, then other tenants' ordered by their GPUs (not by id, which
        // their place among the caller's would tell).
        let holding = s.jobs.iter().filter(|j| j.state.gpus().is_some());
        let mut running: Vec<Value> = holding
            .clone()
            .filter(|j| mine(&j.tenant))
            .map(|j| json!({ "id": j.id, "tenant": j.tenant, "name": j.request.name, "state": j.state.name(), "gpus": j.state.gpus() }))
            .collect();
        let mut others: Vec<&[u32]> = holding.filter(|j| !mine(&j.tenant)).filter_map(|j| j.state.gpus()).collect();
        others.sort();
        running.extend(others.into_iter().map(|gpus| json!({ "gpus": gpus, "other_tenant": true })));
        let queued_jobs = s.jobs.iter().filter(|j| matches!(j.state, JobState::Queued));
        let queued = queued_jobs.clone().filter(|j| mine(&j.tenant)).count();
        (s.policy_name(), running, queued, queued_jobs.count(), nodes)
    });
    Ok(Json(json!({
        "policy": policy,
        "executor": api.daemon.executor_name(),
        "round_s": settings.round_s,
        "nodes": nodes,
        "gpus": settings.gpus.iter().map(|(t, n)| json!({ "type": t, "count": n })).collect::<Vec<_>>(),
        "free_gpus": free,
        "cpus": settings.cpus,
        "memory_gib": settings.memory_gib,
        "cpu_memory_limits": settings.containment.cpu_memory_limits(),
        "memory_limits": settings.containment.memory.describe(),
        "tenants_isolated": settings.isolation.is_isolated(),
        "tenant_isolation": settings.isolation.describe(),
        "max_processes_per_tenant": settings.max_processes_per_tenant,
        "process_limit": settings.containment.processes.describe(settings.isolation.is_isolated()),
        "own_pid_namespaces": settings.containment.visibility.own_namespace(),
        "process_visibility": settings.containment.visibility.describe(),
        "store": match api.daemon.store_degraded() { None => "ok".to_string(), Some(why) => format!("read-only: {why}") },
        "running": running,
        "queued": queued,
        "queued_total": queued_total,
        "priority_classes": class_views(&settings.priority_classes, viewer.as_deref()),
        "reservations": api.daemon.reservations().iter().map(|r| reservations::view(r, viewer.as_deref())).collect::<Vec<_>>(),
    })))
}

/// The priority classes the caller may use (a tenant: those granted to it, without the lists
/// of tenants, which would name other tenants; the admin: all, with them), highest first.
fn class_views(classes: &crate::config::PriorityClasses, viewer: Option<&str>) -> Vec<Value> {
    let default = classes.job_class(None).name;
    let mut views: Vec<(i32, Value)> = classes
        .all()
        .iter()
        .filter(|c| viewer.is_none_or(|v| c.tenants.as_ref().is_none_or(|ts| ts.iter().any(|t| t == v))))
        .map(|c| {
            let mut view = json!({ "name": c.name, "value": c.value, "preemptible": c.preemptible, "default": default.as_deref() == Some(c.name.as_str()) });
            if viewer.is_none() {
                view["tenants"] = json!(c.tenants);
            }
            (c.value, view)
        })
        .collect();
    views.sort_by_key(|(value, _)| std::cmp::Reverse(*value));
    views.into_iter().map(|(_, v)| v).collect()
}

/// The learned co-location table (`records/pairs.rs`): the admin sees every entry; a tenant the
/// entries of its own job types, a partner of another tenant only as `partner_other_tenant`.
async fn pairs(State(api): State<Api>, headers: HeaderMap) -> Result<Json<Value>, ApiError> {
    let caller = api.caller(&headers)?;
    Ok(Json(json!({
        "pairs": api.daemon.pair_rows(caller.tenant()),
        "settle_s": crate::records::pairs::SETTLE_S,
        "policy": api.daemon.settings.policy.name(),
    })))
}

/// `/metrics`: counts for anyone (no token: jobs by state, GPUs, rounds — nothing that names a
/// tenant or a job); with the admin token or the scrape token (`metrics_token_file`) also the
/// per-tenant series. Any other token is refused rather than answered with less: a scraper
/// misconfigured with a tenant's token should fail loudly, not quietly lose series.
async fn metrics(State(api): State<Api>, headers: HeaderMap) -> Response {
    let private = match bearer_token(&headers) {
        None => false,
        Some(token) => {
            let hash = sha256_hex(token);
            if hash == api.admin_token_sha256 || api.metrics_token_sha256.as_ref() == Some(&hash) {
                true
            } else if api.daemon.tenant_by_token_hash(&hash).is_some() {
                return ApiError::new(StatusCode::FORBIDDEN, "a tenant token cannot read /metrics' per-tenant series (the admin or the scrape token can; without a token /metrics shows counts only)").into_response();
            } else {
                return ApiError::new(StatusCode::UNAUTHORIZED, "unknown token").into_response();
            }
        }
    };
    let tenant_series = if private {
        usage::tenant_metrics(&api.daemon)
    } else {
        String::new()
    };
    let text = api.daemon.with_state(|s| {
        let mut by_state = std::collections::BTreeMap::new();
        for job in &s.jobs {
            *by_state.entry(job.state.name()).or_insert(0u64) += 1;
        }
        let mut out = String::new();
        out.push_str("# HELP arbiter_jobs Jobs by state.\n# TYPE arbiter_jobs gauge\n");
        for state in ["queued", "running", "stopping", "succeeded", "failed", "cancelled"] {
            out.push_str(&format!("arbiter_jobs{{state=\"{state}\"}} {}\n", by_state.get(state).copied().unwrap_or(0)));
        }
        let c = &s.counters;
        out.push_str(&format!("# TYPE arbiter_submissions_total counter\narbiter_submissions_total {}\n", c.submitted));
        out.push_str(&format!("# TYPE arbiter_runs_started_total counter\narbiter_runs_started_total {}\n", c.runs_started));
        out.push_str(&format!("# TYPE arbiter_preemptions_total counter\narbiter_preemptions_total {}\n", c.preemptions));
        out.push_str(&format!("# TYPE arbiter_rounds_total counter\narbiter_rounds_total {}\n", c.rounds));
        out.push_str(&format!("# HELP arbiter_fallback_rounds_total Rounds the policy (or its agent) could not decide, decided by policy_fallback.\n# TYPE arbiter_fallback_rounds_total counter\narbiter_fallback_rounds_total {}\n", c.fallback_rounds));
        out.push_str(&format!("# HELP arbiter_rounds_by_changes_total Rounds the policy, offered the present, decided by changes (only what starts).\n# TYPE arbiter_rounds_by_changes_total counter\narbiter_rounds_by_changes_total {}\n", c.rounds_by_changes));
        out.push_str(&format!("# HELP arbiter_round_seconds_total Wall time spent in scheduling rounds.\n# TYPE arbiter_round_seconds_total counter\narbiter_round_seconds_total {}\n", c.round_us_sum as f64 / 1e6));
        out.push_str(&format!(
            "# HELP arbiter_submit_to_start_seconds Submission to first start.\n# TYPE arbiter_submit_to_start_seconds summary\narbiter_submit_to_start_seconds_sum {}\narbiter_submit_to_start_seconds_count {}\n",
            c.start_latency_ms_sum as f64 / 1000.0,
            c.start_latency_count
        ));
        out
    });
    let free = api.daemon.free_gpus().len();
    let total: u32 = api.daemon.settings.gpus.iter().map(|(_, n)| n).sum();
    let degraded = u8::from(api.daemon.store_degraded().is_some());
    let text = format!(
        "{text}# TYPE arbiter_gpus gauge\narbiter_gpus{{state=\"free\"}} {free}\narbiter_gpus{{state=\"total\"}} {total}\n# HELP arbiter_store_degraded 1 while the store refuses writes (an I/O error such as a full disk); the API answers 503 to changes.\n# TYPE arbiter_store_degraded gauge\narbiter_store_degraded {degraded}\n{tenant_series}"
    );
    ([("content-type", "text/plain; version=0.0.4")], text).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_scheme_is_matched_without_regard_to_case() {
        for value in ["Bearer abc", "bearer abc", "BEARER  abc ", " bEaReR abc"] {
            let mut headers = HeaderMap::new();
            headers.insert("authorization", value.parse().expect("header"));
            assert_eq!(bearer_token(&headers), Some("abc"), "{value:?}");
        }
        for value in ["Basic abc", "Bearer", "Bearer ", "Bearerabc"] {
            let mut headers = HeaderMap::new();
            headers.insert("authorization", value.parse().expect("header"));
            assert_eq!(bearer_token(&headers), None, "{value:?}");
        }
    }
}
