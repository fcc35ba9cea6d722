//! The HTTP/JSON API under `/v1` (axum), `/metrics` (Prometheus text) and
//! `/v1/openapi.json`.
//!
//! Errors are JSON `{"error": "...", "field": "..."}` with 400 (bad input, naming the field),
//! 401 (no or unknown token), 403 (another tenant's job, or admin only), 404, 409 (job ended),
//! 413 (body over the limit), 500 (store failure).

use crate::auth::{sha256_hex, Caller};
use crate::daemon::{Daemon, RequestError};
use crate::job::{JobRecord, SubmitRequest};
use crate::store::Tenant;
use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};

/// Shared by every handler.
#[derive(Clone)]
pub struct Api {
    /// The daemon.
    pub daemon: Daemon,
    /// SHA-256 of the admin token.
    pub admin_token_sha256: String,
}

/// An API error response.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
    field: Option<&'static str>,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError { status, message: message.into(), field: None }
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
            RequestError::Invalid(f) => ApiError { status: StatusCode::BAD_REQUEST, message: f.to_string(), field: Some(f.field) },
            RequestError::Store(s) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, s.to_string()),
        }
    }
}

fn json_body<T>(body: Result<Json<T>, JsonRejection>) -> Result<T, ApiError> {
    body.map(|Json(v)| v).map_err(|rejection| {
        let status = if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE { StatusCode::PAYLOAD_TOO_LARGE } else { StatusCode::BAD_REQUEST };
        // serde's message names the field (`unknown field `gpu`, expected ...`, `invalid type:
        // ... for key `gpus``).
        ApiError::new(status, rejection.body_text())
    })
}

impl Api {
    fn caller(&self, headers: &HeaderMap) -> Result<Caller, ApiError> {
        let token = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "missing `Authorization: Bearer <token>`"))?;
        let hash = sha256_hex(token.trim());
        if hash == self.admin_token_sha256 {
            return Ok(Caller::Admin);
        }
        self.daemon.tenant_by_token_hash(&hash).map(Caller::Tenant).ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "unknown token"))
    }

    fn admin(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        match self.caller(headers)? {
            Caller::Admin => Ok(()),
            Caller::Tenant(_) => Err(ApiError::new(StatusCode::FORBIDDEN, "admin only")),
        }
    }
}

/// The router.
pub fn router(api: Api, max_request_bytes: usize) -> Router {
    Router::new()
        .route("/v1/jobs", post(submit).get(list_jobs))
        .route("/v1/jobs/{id}", get(show_job))
        .route("/v1/jobs/{id}/cancel", post(cancel_job))
        .route("/v1/jobs/{id}/logs", get(job_logs))
        .route("/v1/jobs/{id}/progress", post(report_progress))
        .route("/v1/cluster", get(cluster))
        .route("/v1/tenants", get(list_tenants).post(put_tenant))
        .route("/v1/openapi.json", get(openapi))
        .route("/metrics", get(metrics))
        .layer(DefaultBodyLimit::max(max_request_bytes))
        .with_state(api)
}

#[derive(Deserialize)]
struct SubmitQuery {
    /// Admin only: submit on behalf of this tenant.
    tenant: Option<String>,
}

async fn submit(State(api): State<Api>, headers: HeaderMap, Query(q): Query<SubmitQuery>, body: Result<Json<SubmitRequest>, JsonRejection>) -> Result<(StatusCode, Json<Value>), ApiError> {
    let caller = api.caller(&headers)?;
    let request = json_body(body)?;
    let tenant = match (&caller, q.tenant) {
        (Caller::Tenant(t), _) => t.clone(),
        (Caller::Admin, Some(t)) => t,
        (Caller::Admin, None) => "admin".to_string(),
    };
    let (id, _token) = tokio::task::spawn_blocking(move || api.daemon.submit(&tenant, request))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))??;
    Ok((StatusCode::CREATED, Json(json!({ "id": id }))))
}

/// A job as the API shows it (no token hash).
fn job_json(job: &JobRecord) -> Value {
    let mut v = serde_json::to_value(job).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        o.remove("token_sha256");
    }
    v
}

#[derive(Deserialize)]
struct ListQuery {
    state: Option<String>,
    tenant: Option<String>,
}

async fn list_jobs(State(api): State<Api>, headers: HeaderMap, Query(q): Query<ListQuery>) -> Result<Json<Value>, ApiError> {
    let caller = api.caller(&headers)?;
    let tenant = match &caller {
        Caller::Tenant(t) => {
            if q.tenant.as_ref().is_some_and(|asked| asked != t) {
                return Err(ApiError::new(StatusCode::FORBIDDEN, "a tenant can only list its own jobs"));
            }
            Some(t.clone())
        }
        Caller::Admin => q.tenant.clone(),
    };
    let jobs = api.daemon.jobs(tenant.as_deref(), q.state.as_deref());
    Ok(Json(json!({ "jobs": jobs.iter().map(job_json).collect::<Vec<_>>() })))
}

async fn show_job(State(api): State<Api>, headers: HeaderMap, Path(id): Path<u32>) -> Result<Json<Value>, ApiError> {
    let caller = api.caller(&headers)?;
    Ok(Json(job_json(&api.daemon.job(id, caller.tenant())?)))
}

async fn cancel_job(State(api): State<Api>, headers: HeaderMap, Path(id): Path<u32>) -> Result<(StatusCode, Json<Value>), ApiError> {
    let caller = api.caller(&headers)?;
    let tenant = caller.tenant().map(str::to_string);
    tokio::task::spawn_blocking(move || api.daemon.cancel(id, tenant.as_deref()))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))??;
    Ok((StatusCode::ACCEPTED, Json(json!({ "id": id, "cancelling": true }))))
}

#[derive(Deserialize)]
struct LogQuery {
    /// Only the last N bytes.
    tail_bytes: Option<u64>,
}

async fn job_logs(State(api): State<Api>, headers: HeaderMap, Path(id): Path<u32>, Query(q): Query<LogQuery>) -> Result<Response, ApiError> {
    let caller = api.caller(&headers)?;
    api.daemon.job(id, caller.tenant())?;
    let path = api.daemon.log_path(id);
    let bytes = tokio::fs::read(&path).await.unwrap_or_default();
    let start = q.tail_bytes.map_or(0, |n| bytes.len().saturating_sub(n as usize));
    Ok(([("content-type", "text/plain; charset=utf-8")], bytes[start..].to_vec()).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProgressReport {
    steps: u64,
    #[serde(default)]
    throughput: Option<f64>,
    #[serde(default)]
    total_steps: Option<u64>,
}

async fn report_progress(State(api): State<Api>, headers: HeaderMap, Path(id): Path<u32>, body: Result<Json<ProgressReport>, JsonRejection>) -> Result<StatusCode, ApiError> {
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "missing the job token"))?
        .trim()
        .to_string();
    let report = json_body(body)?;
    if report.throughput.is_some_and(|t| !t.is_finite() || t < 0.0) {
        return Err(ApiError { status: StatusCode::BAD_REQUEST, message: "throughput: must be finite and >= 0".into(), field: Some("throughput") });
    }
    tokio::task::spawn_blocking(move || api.daemon.report_progress(id, &token, report.steps, report.throughput, report.total_steps))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))??;
    Ok(StatusCode::NO_CONTENT)
}

async fn cluster(State(api): State<Api>, headers: HeaderMap) -> Result<Json<Value>, ApiError> {
    api.caller(&headers)?;
    let settings = api.daemon.settings.clone();
    let free = api.daemon.free_gpus();
    let (policy, running, queued) = api.daemon.with_state(|s| {
        let running = s.jobs.iter().filter(|j| j.state.gpus().is_some()).map(|j| json!({ "id": j.id, "tenant": j.tenant, "gpus": j.state.gpus() })).collect::<Vec<_>>();
        let queued = s.jobs.iter().filter(|j| j.state.name() == "queued").count();
        (s.policy_name(), running, queued)
    });
    Ok(Json(json!({
        "policy": policy,
        "round_s": settings.round_s,
        "gpus": settings.gpus.iter().map(|(t, n)| json!({ "type": t, "count": n })).collect::<Vec<_>>(),
        "free_gpus": free,
        "cpus": settings.cpus,
        "memory_gib": settings.memory_gib,
        "cpu_memory_limits": if settings.cgroups.is_some() { "enforced with cgroup v2" } else { "not enforced: cgroup v2 is not writable here" },
        "running": running,
        "queued": queued,
    })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TenantRequest {
    name: String,
    #[serde(default = "one")]
    weight: f64,
    #[serde(default)]
    gpu_quota: Option<u32>,
}

fn one() -> f64 {
    1.0
}

async fn put_tenant(State(api): State<Api>, headers: HeaderMap, body: Result<Json<TenantRequest>, JsonRejection>) -> Result<(StatusCode, Json<Value>), ApiError> {
    api.admin(&headers)?;
    let request = json_body(body)?;
    let valid_name = !request.name.is_empty() && request.name.len() <= 64 && request.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid_name || request.name == "admin" {
        return Err(ApiError { status: StatusCode::BAD_REQUEST, message: "name: 1-64 of [A-Za-z0-9_-], not `admin`".into(), field: Some("name") });
    }
    if !(request.weight.is_finite() && request.weight > 0.0) {
        return Err(ApiError { status: StatusCode::BAD_REQUEST, message: "weight: must be > 0".into(), field: Some("weight") });
    }
    let token = crate::auth::new_token();
    let tenant = Tenant { name: request.name.clone(), weight: request.weight, gpu_quota: request.gpu_quota, token_sha256: sha256_hex(&token) };
    tokio::task::spawn_blocking(move || api.daemon.put_tenant(tenant))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))??;
    // The token is shown once, here; only its hash is kept.
    Ok((StatusCode::CREATED, Json(json!({ "name": request.name, "token": token }))))
}

async fn list_tenants(State(api): State<Api>, headers: HeaderMap) -> Result<Json<Value>, ApiError> {
    api.admin(&headers)?;
    let tenants = api.daemon.with_state(|s| s.tenants.values().map(|t| json!({ "name": t.name, "weight": t.weight, "gpu_quota": t.gpu_quota })).collect::<Vec<_>>());
    Ok(Json(json!({ "tenants": tenants })))
}

async fn metrics(State(api): State<Api>) -> Response {
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
        out.push_str(&format!(
            "# HELP arbiter_submit_to_start_seconds Submission to first start.\n# TYPE arbiter_submit_to_start_seconds summary\narbiter_submit_to_start_seconds_sum {}\narbiter_submit_to_start_seconds_count {}\n",
            c.start_latency_ms_sum as f64 / 1000.0,
            c.start_latency_count
        ));
        out
    });
    let free = api.daemon.free_gpus().len();
    let total: u32 = api.daemon.settings.gpus.iter().map(|(_, n)| n).sum();
    let text = format!("{text}# TYPE arbiter_gpus gauge\narbiter_gpus{{state=\"free\"}} {free}\narbiter_gpus{{state=\"total\"}} {total}\n");
    ([("content-type", "text/plain; version=0.0.4")], text).into_response()
}

async fn openapi() -> Json<Value> {
    Json(openapi_document())
}

/// The OpenAPI 3.1 description of the API (written by hand next to the handlers above).
pub fn openapi_document() -> Value {
    let bearer = json!([{ "bearer": [] }]);
    let id = json!({ "name": "id", "in": "path", "required": true, "schema": { "type": "integer" } });
    json!({
        "openapi": "3.1.0",
        "info": { "title": "Arbiter", "version": env!("CARGO_PKG_VERSION"), "description": "GPU cluster scheduler daemon. Errors: {\"error\": ..., \"field\": ...}." },
        "components": {
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
            "schemas": {
                "SubmitRequest": {
                    "type": "object", "required": ["command"], "additionalProperties": false,
                    "properties": {
                        "command": { "type": "string" }, "working_dir": { "type": "string" },
                        "env": { "type": "object", "additionalProperties": { "type": "string" } },
                        "gpus": { "type": "integer", "minimum": 1, "default": 1 },
                        "gpu_types": { "type": "array", "items": { "type": "string" } },
                        "cpus": { "type": "integer" }, "memory_gib": { "type": "integer" },
                        "priority": { "type": "integer" }, "deadline_unix_s": { "type": "integer" },
                        "max_run_time_s": { "type": "integer" }, "expected_run_time_s": { "type": "integer" },
                        "checkpoint_dir": { "type": "string" }, "checkpoint_signal": { "type": "string", "default": "TERM" },
                        "grace_s": { "type": "integer", "default": 30 }, "max_retries": { "type": "integer", "default": 2 },
                        "name": { "type": "string" }
                    }
                },
                "Error": { "type": "object", "properties": { "error": { "type": "string" }, "field": { "type": "string" } } }
            }
        },
        "paths": {
            "/v1/jobs": {
                "post": { "summary": "Submit a job (admin: ?tenant=NAME)", "security": bearer,
                    "requestBody": { "content": { "application/json": { "schema": { "$ref": "#/components/schemas/SubmitRequest" } } } },
                    "responses": { "201": { "description": "{\"id\": N}" }, "400": { "description": "invalid; names the field" }, "401": { "description": "no token" }, "413": { "description": "too large" } } },
                "get": { "summary": "List jobs (?state=queued|running|..., admin: ?tenant=)", "security": bearer, "responses": { "200": { "description": "{\"jobs\": [...]}" } } }
            },
            "/v1/jobs/{id}": { "get": { "summary": "One job: state, GPUs, progress, history, pending reason", "security": bearer, "parameters": [id], "responses": { "200": { "description": "the job" }, "403": { "description": "another tenant's" }, "404": { "description": "no such job" } } } },
            "/v1/jobs/{id}/cancel": { "post": { "summary": "Cancel (checkpoint signal, then SIGKILL after grace_s)", "security": bearer, "parameters": [id], "responses": { "202": { "description": "cancelling" }, "409": { "description": "already ended" } } } },
            "/v1/jobs/{id}/logs": { "get": { "summary": "stdout+stderr (?tail_bytes=N)", "security": bearer, "parameters": [id], "responses": { "200": { "description": "text/plain" } } } },
            "/v1/jobs/{id}/progress": { "post": { "summary": "The job reports progress with its own token (ARBITER_JOB_TOKEN)", "parameters": [id], "responses": { "204": { "description": "recorded" } } } },
            "/v1/cluster": { "get": { "summary": "GPUs, free GPUs, running jobs, policy", "security": bearer, "responses": { "200": { "description": "cluster state" } } } },
            "/v1/tenants": {
                "get": { "summary": "Tenants (admin)", "security": bearer, "responses": { "200": { "description": "{\"tenants\": [...]}" } } },
                "post": { "summary": "Create or replace a tenant; returns its token once (admin)", "security": bearer, "responses": { "201": { "description": "{\"name\", \"token\"}" } } }
            },
            "/metrics": { "get": { "summary": "Prometheus metrics", "responses": { "200": { "description": "text" } } } }
        }
    })
}
