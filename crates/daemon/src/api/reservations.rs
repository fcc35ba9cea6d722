//! `/v1/reservations`: the admin adds and deletes reservations and maintenance windows; every
//! caller may list them (a tenant sees another tenant's reservation as "another tenant").

use super::{Api, ApiError, json_body};
use crate::records::reservation::{Reservation, ReservationRequest};
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

/// A reservation as `viewer` may see it (`None`: the admin, who sees whose it is).
pub(super) fn view(r: &Reservation, viewer: Option<&str>) -> Value {
    let tenant = match (&r.tenant, viewer) {
        (None, _) => json!(null),
        (Some(t), None) => json!(t),
        (Some(t), Some(v)) if t == v => json!(t),
        (Some(_), Some(_)) => json!("another tenant"),
    };
    json!({
        "id": r.id, "nodes": r.nodes, "start_unix_s": r.start_unix_s, "end_unix_s": r.end_unix_s,
        "tenant": tenant, "maintenance": r.tenant.is_none(), "reason": r.reason,
    })
}

pub(super) async fn list(
    State(api): State<Api>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let caller = api.caller(&headers)?;
    let all = api.daemon.reservations();
    Ok(Json(
        json!({ "reservations": all.iter().map(|r| view(r, caller.tenant())).collect::<Vec<_>>() }),
    ))
}

pub(super) async fn add(
    State(api): State<Api>,
    headers: HeaderMap,
    body: Result<Json<ReservationRequest>, JsonRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    api.admin(&headers)?;
    let request = json_body(body)?;
    let added = tokio::task::spawn_blocking(move || api.daemon.add_reservation(request))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))??;
    Ok((StatusCode::CREATED, Json(view(&added, None))))
}

pub(super) async fn delete(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(id): Path<u32>,
) -> Result<Json<Value>, ApiError> {
    api.admin(&headers)?;
    tokio::task::spawn_blocking(move || api.daemon.delete_reservation(id))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))??;
    Ok(Json(json!({ "id": id, "deleted": true })))
}
