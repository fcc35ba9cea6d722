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

use crate::auth::{sha256_hex, Caller};
use crate::daemon::{Daemon, RequestError};
use crate::job::{JobRecord, SubmitRequest};
use crate::store::Tenant;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use http_body::{Frame, SizeHint};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncSeekExt, ReadBuf};

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
}

/// The job states `?state=` accepts.
pub const JOB_STATES: [&str; 6] = ["queued", "running", "stopping", "succeeded", "failed", "cancelled"];

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
        ApiError { status, message: message.into(), field: None }
    }

    /// 400 naming `field`; the message starts with the field's name.
    fn bad(field: &'static str, reason: impl std::fmt::Display) -> Self {
        ApiError { status: StatusCode::BAD_REQUEST, message: format!("{field}: {reason}"), field: Some(field) }
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
            RequestError::Unavailable(_) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
            RequestError::Conflict(_) => ApiError::new(StatusCode::CONFLICT, e.to_string()),
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
        Api { daemon, admin_token_sha256, tenant_changes: Arc::default() }
    }

    fn caller(&self, headers: &HeaderMap) -> Result<Caller, ApiError> {
        let token = bearer_token(headers).ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "missing `Authorization: Bearer <token>`"))?;
        let hash = sha256_hex(token);
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
        .route("/v1/tenants", get(list_tenants).post(add_tenant))
        .route("/v1/tenants/{name}", patch(update_tenant).delete(remove_tenant))
        .route("/v1/tenants/{name}/token", post(rotate_tenant_token))
        .route("/v1/openapi.json", get(openapi))
        .route("/metrics", get(metrics))
        .layer(DefaultBodyLimit::max(max_request_bytes))
        .with_state(api)
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
    q.map(|Query(v)| v).map_err(|rejection| ApiError::new(StatusCode::BAD_REQUEST, rejection.body_text()))
}

/// Checks an admin's `?tenant=`: a tenant that exists, or `admin` (the admin's own jobs); with
/// `or_has_jobs`, also a removed tenant that still has jobs on record.
fn known_tenant(api: &Api, tenant: &str, or_has_jobs: bool) -> Result<(), ApiError> {
    let known = tenant == "admin" || api.daemon.with_state(|s| s.tenants.contains_key(tenant) || (or_has_jobs && s.jobs.iter().any(|j| j.tenant == tenant)));
    if known { Ok(()) } else { Err(ApiError::bad("tenant", format!("unknown tenant `{tenant}` (`arbiter tenants` lists them)"))) }
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
        let key = value.to_str().map_err(|_| ApiError::bad("client_request_id", "the Idempotency-Key header is not visible ASCII"))?.trim().to_string();
        match &request.client_request_id {
            Some(given) if *given != key => return Err(ApiError::bad("client_request_id", format!("`{given}` differs from the Idempotency-Key header `{key}`"))),
            _ => request.client_request_id = Some(key),
        }
    }
    let tenant = match (&caller, q.tenant) {
        (Caller::Tenant(t), Some(asked)) if asked != *t => return Err(ApiError::new(StatusCode::FORBIDDEN, "a tenant can only submit its own jobs")),
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
    if submitted.duplicate {
        Ok((StatusCode::OK, Json(json!({ "id": submitted.id, "duplicate": true }))))
    } else {
        Ok((StatusCode::CREATED, Json(json!({ "id": submitted.id }))))
    }
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
#[serde(deny_unknown_fields)]
struct ListQuery {
    state: Option<String>,
    tenant: Option<String>,
}

async fn list_jobs(State(api): State<Api>, headers: HeaderMap, q: Result<Query<ListQuery>, QueryRejection>) -> Result<Json<Value>, ApiError> {
    let caller = api.caller(&headers)?;
    let q = query(q)?;
    if let Some(state) = q.state.as_deref()
        && !JOB_STATES.contains(&state) {
            return Err(ApiError::bad("state", format!("unknown state `{state}`; one of {}", JOB_STATES.join(", "))));
        }
    let tenant = match &caller {
        Caller::Tenant(t) => {
            if q.tenant.as_ref().is_some_and(|asked| asked != t) {
                return Err(ApiError::new(StatusCode::FORBIDDEN, "a tenant can only list its own jobs"));
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
#[serde(deny_unknown_fields)]
struct LogQuery {
    /// Only the last N bytes.
    tail_bytes: Option<u64>,
    /// Start at this byte (to page through a log longer than one response).
    offset: Option<u64>,
    /// At most this many bytes (default and most: [`MAX_LOG_RESPONSE_BYTES`]).
    max_bytes: Option<u64>,
}

/// A job's output, streamed from its log file: never read into memory, at most
/// [`MAX_LOG_RESPONSE_BYTES`] per response. Headers say which part of how much was sent:
/// `x-arbiter-log-size` (the whole file), `x-arbiter-log-start` (first byte sent) and
/// `x-arbiter-log-truncated: true` when bytes inside the window asked for were left out by the cap.
async fn job_logs(State(api): State<Api>, headers: HeaderMap, Path(id): Path<u32>, q: Result<Query<LogQuery>, QueryRejection>) -> Result<Response, ApiError> {
    let caller = api.caller(&headers)?;
    let q = query(q)?;
    api.daemon.job(id, caller.tenant())?;
    let cap = match q.max_bytes {
        None => MAX_LOG_RESPONSE_BYTES,
        Some(n) if (1..=MAX_LOG_RESPONSE_BYTES).contains(&n) => n,
        Some(n) => return Err(ApiError::bad("max_bytes", format!("{n} is not in 1..={MAX_LOG_RESPONSE_BYTES}"))),
    };
    if q.tail_bytes.is_some() && q.offset.is_some() {
        return Err(ApiError::bad("tail_bytes", "give tail_bytes or offset, not both"));
    }
    let path = api.daemon.log_path(id);
    // No log yet (the job has not run): an empty one.
    let (file, size) = match tokio::fs::File::open(&path).await {
        Ok(file) => {
            let size = file.metadata().await.map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("log of job {id}: {e}")))?.len();
            (Some(file), size)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (None, 0),
        Err(e) => return Err(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("log of job {id}: {e}"))),
    };
    let (start, end, truncated) = log_window(size, q.tail_bytes, q.offset, cap);
    let body = match file {
        Some(mut file) if end > start => {
            file.seek(std::io::SeekFrom::Start(start)).await.map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("log of job {id}: {e}")))?;
            Body::new(FileWindow { file, remaining: end - start, buf: vec![0; 64 * 1024].into_boxed_slice() })
        }
        _ => Body::empty(),
    };
    let headers = [
        ("content-type", "text/plain; charset=utf-8".to_string()),
        ("x-arbiter-log-size", size.to_string()),
        ("x-arbiter-log-start", start.to_string()),
        ("x-arbiter-log-truncated", truncated.to_string()),
    ];
    Ok((headers, body).into_response())
}

/// The byte range `[start, end)` of a log of `size` bytes to send, and whether the cap left out
/// bytes the caller asked for: the last `tail` bytes, or from `offset` to the end; at most `cap`.
fn log_window(size: u64, tail: Option<u64>, offset: Option<u64>, cap: u64) -> (u64, u64, bool) {
    match tail {
        Some(tail) => {
            let wanted = tail.min(size);
            (size - wanted.min(cap), size, wanted > cap)
        }
        None => {
            let start = offset.unwrap_or(0).min(size);
            let end = size.min(start.saturating_add(cap));
            (start, end, end < size)
        }
    }
}

/// `remaining` bytes of a file from where it is positioned, read in chunks as the client takes
/// them.
struct FileWindow {
    file: tokio::fs::File,
    remaining: u64,
    buf: Box<[u8]>,
}

impl HttpBody for FileWindow {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = self.get_mut();
        if this.remaining == 0 {
            return Poll::Ready(None);
        }
        let want = usize::try_from(this.remaining).unwrap_or(usize::MAX).min(this.buf.len());
        let mut read = ReadBuf::new(&mut this.buf[..want]);
        match Pin::new(&mut this.file).poll_read(cx, &mut read) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e))),
            Poll::Ready(Ok(())) if read.filled().is_empty() => {
                this.remaining = 0;
                Poll::Ready(Some(Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the log shrank while it was being sent"))))
            }
            Poll::Ready(Ok(())) => {
                let chunk = Bytes::copy_from_slice(read.filled());
                this.remaining -= chunk.len() as u64;
                Poll::Ready(Some(Ok(Frame::data(chunk))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
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
    let token = bearer_token(&headers).ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "missing the job token"))?.to_string();
    let report = json_body(body)?;
    if report.throughput.is_some_and(|t| !t.is_finite() || t < 0.0) {
        return Err(ApiError { status: StatusCode::BAD_REQUEST, message: "throughput: must be finite and >= 0".into(), field: Some("throughput") });
    }
    tokio::task::spawn_blocking(move || api.daemon.report_progress(id, &token, report.steps, report.throughput, report.total_steps))
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
    let (policy, running, queued, queued_total) = api.daemon.with_state(|s| {
        let mine = |tenant: &str| viewer.as_deref().is_none_or(|v| v == tenant);
        let running = s
            .jobs
            .iter()
            .filter(|j| j.state.gpus().is_some())
            .map(|j| {
                if mine(&j.tenant) {
                    json!({ "id": j.id, "tenant": j.tenant, "name": j.request.name, "state": j.state.name(), "gpus": j.state.gpus() })
                } else {
                    json!({ "gpus": j.state.gpus(), "other_tenant": true })
                }
            })
            .collect::<Vec<_>>();
        let queued_jobs = s.jobs.iter().filter(|j| j.state.name() == "queued");
        let queued = queued_jobs.clone().filter(|j| mine(&j.tenant)).count();
        (s.policy_name(), running, queued, queued_jobs.count())
    });
    Ok(Json(json!({
        "policy": policy,
        "round_s": settings.round_s,
        "gpus": settings.gpus.iter().map(|(t, n)| json!({ "type": t, "count": n })).collect::<Vec<_>>(),
        "free_gpus": free,
        "cpus": settings.cpus,
        "memory_gib": settings.memory_gib,
        "cpu_memory_limits": if settings.cgroups.is_some() { "enforced with cgroup v2" } else { "not enforced: cgroup v2 is not writable here" },
        "tenants_isolated": settings.isolation.is_isolated(),
        "tenant_isolation": settings.isolation.describe(),
        "store": match api.daemon.store_degraded() { None => "ok".to_string(), Some(why) => format!("read-only: {why}") },
        "running": running,
        "queued": queued,
        "queued_total": queued_total,
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

/// A tenant name: 1-64 of `[A-Za-z0-9_-]`, not `admin`.
fn check_tenant_name(name: &str) -> Result<(), ApiError> {
    let valid = !name.is_empty() && name.len() <= 64 && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid || name == "admin" {
        return Err(ApiError::bad("name", "1-64 of [A-Za-z0-9_-], not `admin`"));
    }
    Ok(())
}

fn check_weight(weight: f64) -> Result<(), ApiError> {
    if !(weight.is_finite() && weight > 0.0) {
        return Err(ApiError::bad("weight", "must be > 0"));
    }
    Ok(())
}

fn tenant_json(t: &Tenant) -> Value {
    json!({ "name": t.name, "weight": t.weight, "gpu_quota": t.gpu_quota })
}

fn no_tenant(name: &str) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, format!("no tenant `{name}`"))
}

/// Writes a tenant through the daemon (which persists it first and rebuilds a hierarchical
/// policy with the new weights).
async fn write_tenant(api: &Api, tenant: Tenant) -> Result<(), ApiError> {
    let daemon = api.daemon.clone();
    tokio::task::spawn_blocking(move || daemon.put_tenant(tenant))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))??;
    Ok(())
}

/// `POST /v1/tenants`: creates a tenant and returns its token, once. An existing tenant is not
/// replaced (409): `PATCH /v1/tenants/{name}` changes one, `POST /v1/tenants/{name}/token`
/// gives it a new token.
async fn add_tenant(State(api): State<Api>, headers: HeaderMap, body: Result<Json<TenantRequest>, JsonRejection>) -> Result<(StatusCode, Json<Value>), ApiError> {
    api.admin(&headers)?;
    let request = json_body(body)?;
    check_tenant_name(&request.name)?;
    check_weight(request.weight)?;
    let _serial = api.tenant_changes.lock().await;
    if api.daemon.tenant(&request.name).is_some() {
        let name = &request.name;
        return Err(RequestError::Conflict(format!("tenant {name} exists; use `arbiter tenants update {name}` or `arbiter tenants rotate-token {name}`")).into());
    }
    let token = crate::auth::new_token();
    let tenant = Tenant { name: request.name.clone(), weight: request.weight, gpu_quota: request.gpu_quota, token_sha256: sha256_hex(&token) };
    write_tenant(&api, tenant).await?;
    tracing::info!(tenant = %request.name, weight = request.weight, gpu_quota = ?request.gpu_quota, "tenant added");
    // The token is shown once, here; only its hash is kept.
    Ok((StatusCode::CREATED, Json(json!({ "name": request.name, "token": token }))))
}

/// Deserializes a field that is present (`null` included) as `Some`.
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TenantUpdate {
    #[serde(default)]
    weight: Option<f64>,
    /// Absent: unchanged; `null`: no quota; N: at most N GPUs.
    #[serde(default, deserialize_with = "present")]
    gpu_quota: Option<Option<u32>>,
}

/// `PATCH /v1/tenants/{name}`: changes a tenant's weight and/or GPU quota, keeping its token.
async fn update_tenant(State(api): State<Api>, headers: HeaderMap, Path(name): Path<String>, body: Result<Json<TenantUpdate>, JsonRejection>) -> Result<Json<Value>, ApiError> {
    api.admin(&headers)?;
    let update = json_body(body)?;
    if update.weight.is_none() && update.gpu_quota.is_none() {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "nothing to change: give `weight` and/or `gpu_quota`"));
    }
    if let Some(w) = update.weight {
        check_weight(w)?;
    }
    let _serial = api.tenant_changes.lock().await;
    // Only these fields change; whatever else the record holds is kept.
    let mut tenant = api.daemon.tenant(&name).ok_or_else(|| no_tenant(&name))?;
    if let Some(w) = update.weight {
        tenant.weight = w;
    }
    if let Some(q) = update.gpu_quota {
        tenant.gpu_quota = q;
    }
    let shown = tenant_json(&tenant);
    write_tenant(&api, tenant).await?;
    tracing::info!(tenant = %name, weight = ?update.weight, gpu_quota = ?update.gpu_quota, "tenant updated");
    Ok(Json(shown))
}

/// `POST /v1/tenants/{name}/token`: a new token for the tenant, shown once; the old one stops
/// working at once.
async fn rotate_tenant_token(State(api): State<Api>, headers: HeaderMap, Path(name): Path<String>) -> Result<Json<Value>, ApiError> {
    api.admin(&headers)?;
    let _serial = api.tenant_changes.lock().await;
    let mut tenant = api.daemon.tenant(&name).ok_or_else(|| no_tenant(&name))?;
    let token = crate::auth::new_token();
    tenant.token_sha256 = sha256_hex(&token);
    write_tenant(&api, tenant).await?;
    tracing::info!(tenant = %name, "tenant token rotated");
    Ok(Json(json!({ "name": name, "token": token })))
}

/// `DELETE /v1/tenants/{name}`: removes a tenant (its token stops working). Refused (409) while
/// it has queued or running jobs; its ended jobs stay on record.
async fn remove_tenant(State(api): State<Api>, headers: HeaderMap, Path(name): Path<String>) -> Result<Json<Value>, ApiError> {
    api.admin(&headers)?;
    let _serial = api.tenant_changes.lock().await;
    let daemon = api.daemon.clone();
    let asked = name.clone();
    let removed = tokio::task::spawn_blocking(move || daemon.remove_tenant(&asked))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))??;
    if removed.is_none() {
        return Err(no_tenant(&name));
    }
    tracing::info!(tenant = %name, "tenant removed");
    Ok(Json(json!({ "name": name, "removed": true })))
}

async fn list_tenants(State(api): State<Api>, headers: HeaderMap) -> Result<Json<Value>, ApiError> {
    api.admin(&headers)?;
    let tenants = api.daemon.with_state(|s| s.tenants.values().map(tenant_json).collect::<Vec<_>>());
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
    let degraded = u8::from(api.daemon.store_degraded().is_some());
    let text = format!(
        "{text}# TYPE arbiter_gpus gauge\narbiter_gpus{{state=\"free\"}} {free}\narbiter_gpus{{state=\"total\"}} {total}\n# HELP arbiter_store_degraded 1 while the store refuses writes (an I/O error such as a full disk); the API answers 503 to changes.\n# TYPE arbiter_store_degraded gauge\narbiter_store_degraded {degraded}\n"
    );
    ([("content-type", "text/plain; version=0.0.4")], text).into_response()
}

async fn openapi() -> Json<Value> {
    Json(openapi_document())
}

/// The OpenAPI 3.1 description of the API (written by hand next to the handlers above).
pub fn openapi_document() -> Value {
    let bearer = json!([{ "bearer": [] }]);
    let id = json!({ "name": "id", "in": "path", "required": true, "schema": { "type": "integer" } });
    let name = json!({ "name": "name", "in": "path", "required": true, "schema": { "type": "string" } });
    let query = |name: &str, schema: Value, description: &str| json!({ "name": name, "in": "query", "required": false, "schema": schema, "description": description });
    let tenant_param = query("tenant", json!({ "type": "string" }), "admin only: this tenant (400 if unknown)");
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
                        "name": { "type": "string" },
                        "client_request_id": { "type": "string", "description": "idempotency key (or the Idempotency-Key header): a repeat by the same tenant returns the first job" },
                        "min_run_time_s": { "type": "integer", "description": "seconds a started run is protected from preemption (default: the daemon's min_run_s)" }
                    }
                },
                "Tenant": { "type": "object", "properties": { "name": { "type": "string" }, "weight": { "type": "number" }, "gpu_quota": { "type": ["integer", "null"] } } },
                "Error": { "type": "object", "properties": { "error": { "type": "string" }, "field": { "type": "string" } } }
            }
        },
        "paths": {
            "/v1/jobs": {
                "post": { "summary": "Submit a job (admin: ?tenant=NAME)", "security": bearer,
                    "parameters": [tenant_param, { "name": "Idempotency-Key", "in": "header", "required": false, "schema": { "type": "string" }, "description": "same as client_request_id (400 if both are given and differ)" }],
                    "requestBody": { "content": { "application/json": { "schema": { "$ref": "#/components/schemas/SubmitRequest" } } } },
                    "responses": {
                        "201": { "description": "{\"id\": N}" }, "200": { "description": "{\"id\": N, \"duplicate\": true}: the idempotency key was seen; nothing new created" },
                        "400": { "description": "invalid; names the field" }, "401": { "description": "no token" }, "403": { "description": "?tenant= another tenant" },
                        "409": { "description": "idempotency key reused with a different request" }, "413": { "description": "too large" },
                        "503": { "description": "the store cannot take writes now (a full disk); nothing was changed" } } },
                "get": { "summary": "List jobs", "security": bearer,
                    "parameters": [query("state", json!({ "type": "string", "enum": JOB_STATES }), "only jobs in this state (400 if unknown)"), tenant_param],
                    "responses": { "200": { "description": "{\"jobs\": [...]}" }, "400": { "description": "unknown state or tenant; names the parameter" } } }
            },
            "/v1/jobs/{id}": { "get": { "summary": "One job: state, GPUs, progress, history, pending reason", "security": bearer, "parameters": [id], "responses": { "200": { "description": "the job" }, "403": { "description": "another tenant's" }, "404": { "description": "no such job" } } } },
            "/v1/jobs/{id}/cancel": { "post": { "summary": "Cancel (checkpoint signal, then SIGKILL after grace_s)", "security": bearer, "parameters": [id], "responses": { "202": { "description": "cancelling" }, "409": { "description": "already ended" } } } },
            "/v1/jobs/{id}/logs": { "get": {
                "summary": "stdout+stderr, streamed; at most 16 MiB (max_bytes) per response",
                "security": bearer,
                "parameters": [id,
                    query("tail_bytes", json!({ "type": "integer", "minimum": 0 }), "only the last N bytes"),
                    query("offset", json!({ "type": "integer", "minimum": 0 }), "start at this byte (not with tail_bytes)"),
                    query("max_bytes", json!({ "type": "integer", "minimum": 1, "maximum": MAX_LOG_RESPONSE_BYTES, "default": MAX_LOG_RESPONSE_BYTES }), "at most this many bytes")],
                "responses": { "200": { "description": "text/plain",
                    "headers": {
                        "x-arbiter-log-size": { "schema": { "type": "integer" }, "description": "bytes in the whole log" },
                        "x-arbiter-log-start": { "schema": { "type": "integer" }, "description": "offset of the first byte sent" },
                        "x-arbiter-log-truncated": { "schema": { "type": "boolean" }, "description": "true when the cap left out bytes that were asked for" } } },
                    "400": { "description": "bad parameter; names it" } } } },
            "/v1/jobs/{id}/progress": { "post": { "summary": "The job reports progress with its own token (ARBITER_JOB_TOKEN)", "parameters": [id], "responses": { "204": { "description": "recorded" } } } },
            "/v1/cluster": { "get": { "summary": "GPUs, free GPUs, running jobs, policy. A tenant sees other tenants' running jobs only as the GPUs they hold ({\"gpus\": [...], \"other_tenant\": true}); `queued` counts its own, `queued_total` all", "security": bearer, "responses": { "200": { "description": "cluster state" } } } },
            "/v1/tenants": {
                "get": { "summary": "Tenants (admin)", "security": bearer, "responses": { "200": { "description": "{\"tenants\": [Tenant...]}" } } },
                "post": { "summary": "Create a tenant; returns its token once (admin)", "security": bearer,
                    "requestBody": { "content": { "application/json": { "schema": { "type": "object", "required": ["name"], "additionalProperties": false,
                        "properties": { "name": { "type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$" }, "weight": { "type": "number", "default": 1 }, "gpu_quota": { "type": ["integer", "null"] } } } } } },
                    "responses": { "201": { "description": "{\"name\", \"token\"}" }, "400": { "description": "bad name or weight" }, "409": { "description": "the tenant exists: use PATCH /v1/tenants/{name} or POST /v1/tenants/{name}/token" } } }
            },
            "/v1/tenants/{name}": {
                "patch": { "summary": "Change a tenant's weight and/or GPU quota (null: none); its token stays (admin)", "security": bearer, "parameters": [name],
                    "requestBody": { "content": { "application/json": { "schema": { "type": "object", "additionalProperties": false,
                        "properties": { "weight": { "type": "number" }, "gpu_quota": { "type": ["integer", "null"] } } } } } },
                    "responses": { "200": { "description": "the tenant", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Tenant" } } } }, "400": { "description": "bad value or nothing to change" }, "404": { "description": "no such tenant" } } },
                "delete": { "summary": "Remove a tenant; its token stops working, its ended jobs stay on record (admin)", "security": bearer, "parameters": [name],
                    "responses": { "200": { "description": "{\"name\", \"removed\": true}" }, "404": { "description": "no such tenant" }, "409": { "description": "it has queued or running jobs" } } }
            },
            "/v1/tenants/{name}/token": {
                "post": { "summary": "A new token for the tenant, shown once; the old one stops working at once (admin)", "security": bearer, "parameters": [name],
                    "responses": { "200": { "description": "{\"name\", \"token\"}" }, "404": { "description": "no such tenant" } } }
            },
            "/metrics": { "get": { "summary": "Prometheus metrics", "responses": { "200": { "description": "text" } } } }
        }
    })
}

/// Limits on the HTTP connections (`header_timeout_s`, `idle_timeout_s` and `max_connections` in
/// the config file).
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// A request's headers must be complete this long after the connection opened or the previous
    /// response was sent (so a client sending nothing, or headers a byte at a time, or an idle
    /// keep-alive connection, is closed after it).
    pub header_timeout: std::time::Duration,
    /// A connection on which no byte moves either way for this long (a stalled upload, a client
    /// that stopped reading its response) is closed.
    pub idle_timeout: std::time::Duration,
    /// Most connections open at once; more are answered 503 and closed.
    pub max_connections: usize,
    /// On shutdown, how long requests in flight may take to finish.
    pub drain: std::time::Duration,
}

/// What a connection over the limit gets before it is closed.
const TOO_MANY_CONNECTIONS: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: 53\r\n\r\n{\"error\":\"too many connections; retry in a second\"}\r\n";

/// Serves `router` on `listener` (HTTP/1.1) within `limits` until `shutdown` completes; then
/// stops accepting, lets requests in flight finish (at most `limits.drain`), and returns what
/// `shutdown` gave.
pub async fn serve_connections<T>(listener: tokio::net::TcpListener, router: Router, limits: ConnectionLimits, shutdown: impl Future<Output = T>) -> T {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let permits = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(limits.header_timeout);
    let mut rejected: u64 = 0;
    tokio::pin!(shutdown);
    let reason = loop {
        let (stream, peer) = tokio::select! {
            reason = &mut shutdown => break reason,
            accepted = listener.accept() => match accepted {
                Ok(connection) => connection,
                Err(e) => {
                    // Out of file descriptors and the like: wait a moment rather than spin.
                    tracing::warn!("accepting a connection failed: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            // Best effort: the answer fits in the socket's buffer, and the client is not waited for.
            let _ = stream.try_write(TOO_MANY_CONNECTIONS);
            rejected += 1;
            if rejected.is_power_of_two() {
                tracing::warn!(%peer, "refused a connection: {} already open (max_connections); {rejected} refused so far", limits.max_connections);
            }
            continue;
        };
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(IdleTimeout::new(stream, limits.idle_timeout));
        let connection = graceful.watch(http.serve_connection(io, hyper_util::service::TowerToHyperService::new(router.clone())));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(%peer, "connection ended: {e}");
            }
            drop(permit);
        });
    };
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(limits.drain) => tracing::warn!("requests still in flight after {:?}; closing their connections", limits.drain),
    }
    reason
}

/// A stream that fails with `TimedOut` when a read or write has waited `timeout` since the last
/// byte moved either way.
struct IdleTimeout<S> {
    inner: S,
    timeout: std::time::Duration,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl<S> IdleTimeout<S> {
    fn new(inner: S, timeout: std::time::Duration) -> Self {
        IdleTimeout { inner, timeout, deadline: Box::pin(tokio::time::sleep(timeout)) }
    }

    /// After a read or write: resets the deadline when bytes moved; when the operation waits,
    /// turns it into an error once the deadline has passed.
    fn check<T>(&mut self, cx: &mut Context<'_>, result: Poll<std::io::Result<T>>, moved: impl FnOnce(&T) -> bool) -> Poll<std::io::Result<T>> {
        match result {
            Poll::Ready(Ok(value)) => {
                if moved(&value) {
                    let next = tokio::time::Instant::now() + self.timeout;
                    self.deadline.as_mut().reset(next);
                }
                Poll::Ready(Ok(value))
            }
            Poll::Pending => match self.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "connection idle past idle_timeout_s"))),
                Poll::Pending => Poll::Pending,
            },
            other => other,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for IdleTimeout<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let result = Pin::new(&mut this.inner).poll_read(cx, buf);
        let moved = buf.filled().len() > before;
        this.check(cx, result, |_| moved)
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for IdleTimeout<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.check(cx, result, |n| *n > 0)
    }

    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[std::io::IoSlice<'_>]) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.check(cx, result, |n| *n > 0)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_flush(cx);
        this.check(cx, result, |_| false)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
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

    #[test]
    fn log_windows_are_capped_and_tails_are_exact() {
        // (size, tail, offset, cap) -> (start, end, truncated)
        assert_eq!(log_window(100, None, None, 1000), (0, 100, false));
        assert_eq!(log_window(100, None, None, 40), (0, 40, true));
        assert_eq!(log_window(100, Some(4), None, 40), (96, 100, false));
        assert_eq!(log_window(100, Some(60), None, 40), (60, 100, true));
        assert_eq!(log_window(100, Some(500), None, 1000), (0, 100, false));
        assert_eq!(log_window(100, None, Some(90), 40), (90, 100, false));
        assert_eq!(log_window(100, None, Some(500), 40), (100, 100, false));
        assert_eq!(log_window(0, Some(4), None, 40), (0, 0, false));
    }
}
