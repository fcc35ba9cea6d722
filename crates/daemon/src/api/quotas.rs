//! `/v1/quotas`: the quota tree. The admin sets and deletes groups; every caller may read it —
//! a tenant sees its own node and its parents' totals, never a sibling's.

use super::{Api, ApiError, json_body, tenants::check_tenant_name};
use arbiter_policy::quotas::{GpuQuota, QuotaGroup};
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// A group as `PUT /v1/quotas/{name}` takes it: the whole group, replacing what was there.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GroupBody {
    #[serde(default)]
    parent: Option<String>,
    #[serde(default = "super::tenants::one")]
    over_quota_weight: f64,
    #[serde(default)]
    gpus: BTreeMap<String, GpuQuota>,
}

pub(super) async fn show(
    State(api): State<Api>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let caller = api.caller(&headers)?;
    let viewer = caller.tenant().map(str::to_string);
    let daemon = api.daemon.clone();
    let view = tokio::task::spawn_blocking(move || daemon.quota_view(viewer.as_deref()))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    Ok(Json(view))
}

pub(super) async fn set(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: Result<Json<GroupBody>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    api.admin(&headers)?;
    let body = json_body(body)?;
    check_tenant_name(&name)?;
    if let Some(parent) = &body.parent {
        check_tenant_name(parent)
            .map_err(|_| ApiError::bad("parent", "1-64 of [A-Za-z0-9_-], not `admin`"))?;
    }
    if !(body.over_quota_weight.is_finite() && body.over_quota_weight > 0.0) {
        return Err(ApiError::bad("over_quota_weight", "a positive number"));
    }
    let group = QuotaGroup {
        name,
        parent: body.parent,
        over_quota_weight: body.over_quota_weight,
        gpus: body.gpus,
    };
    let daemon = api.daemon.clone();
    let set = tokio::task::spawn_blocking(move || daemon.set_quota_group(group))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))??;
    Ok(Json(json!(set)))
}

pub(super) async fn delete(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    api.admin(&headers)?;
    let daemon = api.daemon.clone();
    let gone = name.clone();
    tokio::task::spawn_blocking(move || daemon.delete_quota_group(&gone))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))??;
    Ok(Json(json!({ "name": name, "deleted": true })))
}
