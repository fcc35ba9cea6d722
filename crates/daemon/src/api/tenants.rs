//! `/v1/tenants`: add, list, update, rotate a token, remove (admin only).

use super::*;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TenantRequest {
    name: String,
    #[serde(default = "one")]
    weight: f64,
    #[serde(default)]
    gpu_quota: Option<u32>,
    /// The quota group it belongs to (`arbiter tenants add team-a --parent ml-org`).
    #[serde(default)]
    parent: Option<String>,
}

pub(super) fn one() -> f64 {
    1.0
}

/// A tenant name: 1-64 of `[A-Za-z0-9_-]`, not `admin`. It is shown to others (the admin's
/// terminal, the dashboard), so it passes the check of every such text first, which names a
/// refused character escaped; the stricter rule below would refuse it too, quoting nothing.
pub(super) fn check_tenant_name(name: &str) -> Result<(), ApiError> {
    crate::security::text::check("name", name, crate::security::text::Text::Line)
        .map_err(|e| ApiError::bad(e.field, e.reason))?;
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid || name == "admin" {
        return Err(ApiError::bad("name", "1-64 of [A-Za-z0-9_-], not `admin`"));
    }
    Ok(())
}

pub(super) fn check_weight(weight: f64) -> Result<(), ApiError> {
    if !(weight.is_finite() && weight > 0.0) {
        return Err(ApiError::bad("weight", "must be > 0"));
    }
    Ok(())
}

pub(super) fn tenant_json(t: &Tenant) -> Value {
    json!({ "name": t.name, "weight": t.weight, "gpu_quota": t.gpu_quota })
}

pub(super) fn no_tenant(name: &str) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, format!("no tenant `{name}`"))
}

/// Writes a tenant through the daemon (which persists it first and rebuilds a hierarchical
/// policy with the new weights).
pub(super) async fn write_tenant(api: &Api, tenant: Tenant) -> Result<(), ApiError> {
    let daemon = api.daemon.clone();
    tokio::task::spawn_blocking(move || daemon.put_tenant(tenant))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))??;
    Ok(())
}

/// `POST /v1/tenants`: creates a tenant and returns its token, once. An existing tenant is not
/// replaced (409): `PATCH /v1/tenants/{name}` changes one, `POST /v1/tenants/{name}/token`
/// gives it a new token.
pub(super) async fn add_tenant(
    State(api): State<Api>,
    headers: HeaderMap,
    body: Result<Json<TenantRequest>, JsonRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    api.admin(&headers)?;
    let request = json_body(body)?;
    check_tenant_name(&request.name)?;
    check_weight(request.weight)?;
    let _serial = api.tenant_changes.lock().await;
    if api.daemon.tenant(&request.name).is_some() {
        let name = &request.name;
        return Err(RequestError::Conflict(format!("tenant {name} exists; use `arbiter tenants update {name}` or `arbiter tenants rotate-token {name}`")).into());
    }
    if let Some(parent) = &request.parent {
        check_tenant_name(parent)
            .map_err(|_| ApiError::bad("parent", "1-64 of [A-Za-z0-9_-], not `admin`"))?;
        // Its place in the quota tree first: a parent that is no group refuses the whole request.
        let mut group = api
            .daemon
            .with_state(|s| {
                s.quota_groups
                    .iter()
                    .find(|g| g.name == request.name)
                    .cloned()
            })
            .unwrap_or_else(|| arbiter_policy::quotas::QuotaGroup {
                name: request.name.clone(),
                parent: None,
                over_quota_weight: 1.0,
                gpus: Default::default(),
            });
        group.parent = Some(parent.clone());
        let daemon = api.daemon.clone();
        tokio::task::spawn_blocking(move || daemon.set_quota_group(group))
            .await
            .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))??;
    }
    let token = crate::security::auth::new_token();
    let tenant = Tenant {
        name: request.name.clone(),
        weight: request.weight,
        gpu_quota: request.gpu_quota,
        token_sha256: sha256_hex(&token),
    };
    write_tenant(&api, tenant).await?;
    tracing::info!(tenant = %request.name, weight = request.weight, gpu_quota = ?request.gpu_quota, "tenant added");
    // The token is shown once, here; only its hash is kept.
    Ok((
        StatusCode::CREATED,
        Json(json!({ "name": request.name, "token": token })),
    ))
}

/// Deserializes a field that is present (`null` included) as `Some`.
pub(super) fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TenantUpdate {
    #[serde(default)]
    weight: Option<f64>,
    /// Absent: unchanged; `null`: no quota; N: at most N GPUs.
    #[serde(default, deserialize_with = "present")]
    gpu_quota: Option<Option<u32>>,
    /// Absent: unchanged; `null`: no webhook; a URL: job state changes are POSTed there.
    #[serde(default, deserialize_with = "present")]
    webhook: Option<Option<String>>,
    /// A new webhook secret (shown once), the old one no longer signs.
    #[serde(default)]
    rotate_webhook_secret: bool,
}

/// `PATCH /v1/tenants/{name}`: changes a tenant's weight and/or GPU quota, keeping its token.
pub(super) async fn update_tenant(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: Result<Json<TenantUpdate>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    api.admin(&headers)?;
    let update = json_body(body)?;
    if update.weight.is_none()
        && update.gpu_quota.is_none()
        && update.webhook.is_none()
        && !update.rotate_webhook_secret
    {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "nothing to change: give `weight`, `gpu_quota`, `webhook` or `rotate_webhook_secret`",
        ));
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
    // Checked (and its host resolved) before anything changes: a bad URL changes nothing.
    let webhook = match &update.webhook {
        Some(Some(url)) => Some(Some(super::webhooks::checked_url(&api, url).await?)),
        Some(None) => Some(None),
        None => None,
    };
    let mut shown = tenant_json(&tenant);
    let new_quota = tenant.gpu_quota;
    if update.weight.is_some() || update.gpu_quota.is_some() {
        write_tenant(&api, tenant).await?;
    }
    if let Some(secret) =
        super::webhooks::change(&api, &name, webhook, update.rotate_webhook_secret).await?
    {
        // Shown once, here; the daemon signs with it and never shows it again.
        shown["webhook_secret"] = json!(secret);
    }
    shown["webhook"] = super::webhooks::status_json(&api, &name);
    tracing::info!(tenant = %name, weight = ?update.weight, gpu_quota = ?update.gpu_quota, webhook_changed = update.webhook.is_some() || update.rotate_webhook_secret, "tenant updated");
    // Queued jobs the new quota can never allow are held, not refused: say which.
    let held: Vec<u32> = new_quota
        .map(|q| api.daemon.queued_over_quota(&name, q))
        .unwrap_or_default();
    shown["held_by_quota"] = json!(held);
    Ok(Json(shown))
}

/// `POST /v1/tenants/{name}/token`: a new token for the tenant, shown once; the old one stops
/// working at once.
pub(super) async fn rotate_tenant_token(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    api.admin(&headers)?;
    let _serial = api.tenant_changes.lock().await;
    let mut tenant = api.daemon.tenant(&name).ok_or_else(|| no_tenant(&name))?;
    let token = crate::security::auth::new_token();
    tenant.token_sha256 = sha256_hex(&token);
    write_tenant(&api, tenant).await?;
    tracing::info!(tenant = %name, "tenant token rotated");
    Ok(Json(json!({ "name": name, "token": token })))
}

/// `DELETE /v1/tenants/{name}`: removes a tenant (its token stops working). Refused (409) while
/// it has queued or running jobs; its ended jobs stay on record.
pub(super) async fn remove_tenant(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
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

pub(super) async fn list_tenants(
    State(api): State<Api>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    api.admin(&headers)?;
    let mut tenants = api
        .daemon
        .with_state(|s| s.tenants.values().map(tenant_json).collect::<Vec<_>>());
    for t in &mut tenants {
        let name = t["name"].as_str().unwrap_or_default().to_string();
        t["webhook"] = super::webhooks::status_json(&api, &name);
    }
    Ok(Json(json!({ "tenants": tenants })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_names_are_plain_and_a_refused_character_is_named_escaped() {
        assert!(check_tenant_name("team-a_2").is_ok());
        for bad in ["", "admin", "a b", "é", &"x".repeat(65)] {
            assert_eq!(
                check_tenant_name(bad).map_err(|e| e.field),
                Err(Some("name")),
                "{bad:?}"
            );
        }
        for c in ['\u{2028}', '\u{202e}', '\u{200b}', '\u{1b}'] {
            let e = check_tenant_name(&format!("team{c}a")).expect_err("refused");
            assert_eq!(
                e.message,
                format!(
                    "name: contains the {} {}",
                    crate::security::text::refused(c, crate::security::text::Text::Line)
                        .unwrap_or_default(),
                    c.escape_unicode()
                )
            );
        }
    }
}
