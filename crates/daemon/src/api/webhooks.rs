//! Tenants' webhooks in `PATCH /v1/tenants/{name}` (admin only): set (checked: scheme, host,
//! credentials, addresses — `security::webhook`), secret rotated, removed; and how each receiver
//! fares, in `GET /v1/tenants`.
//!
//! Only the admin sets a webhook, for any tenant: it makes the daemon send requests from its place
//! in the network, which is the admin's to grant. A tenant cannot set or read one (403 on every
//! tenant route), and its events go only to its own webhook.

use super::*;
use crate::records::outbox::WebhookTarget;
use crate::security::webhook::{self, Secret};

/// `url` if a webhook may point there: checked as written, then its host resolved (off the
/// async threads) and every address checked. 400 naming `webhook` otherwise.
pub(super) async fn checked_url(api: &Api, url: &str) -> Result<String, ApiError> {
    let (_, policy) = api.daemon.webhooks.settings();
    let parsed = webhook::check_url(url, &policy, cfg!(feature = "webhook-tls"))
        .map_err(|e| ApiError::bad("webhook", e))?;
    if let Some(url::Host::Domain(host)) = parsed.host() {
        let (host, port) = (
            host.to_string(),
            parsed.port_or_known_default().unwrap_or(80),
        );
        tokio::task::spawn_blocking(move || webhook::resolve_allowed(&policy, &host, port))
            .await
            .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
            .map_err(|e| ApiError::bad("webhook", e))?;
    }
    Ok(parsed.to_string())
}

/// Applies a webhook change to `name`: `webhook` `Some(Some(url))` sets it (a secret is made
/// the first time), `Some(None)` removes it; `rotate` makes a new secret. Returns the secret when
/// a new one was made (to show it once).
pub(super) async fn change(
    api: &Api,
    name: &str,
    webhook: Option<Option<String>>,
    rotate: bool,
) -> Result<Option<String>, ApiError> {
    if webhook.is_none() && !rotate {
        return Ok(None);
    }
    let current = api.daemon.webhook(name).map(|(target, _, _)| target);
    let (target, new_secret) = match (webhook, current) {
        (Some(None), _) if rotate => {
            return Err(ApiError::bad(
                "rotate_webhook_secret",
                "cannot rotate the secret of a webhook being removed",
            ));
        }
        (Some(None), _) => (None, None),
        (None, None) => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                format!("tenant {name} has no webhook: set one with `webhook` first"),
            ));
        }
        (url, current) => {
            let url = url
                .flatten()
                .or_else(|| current.as_ref().map(|c| c.url.clone()))
                .unwrap_or_default();
            let keep = current
                .as_ref()
                .filter(|_| !rotate)
                .map(|c| c.secret.clone());
            let secret = keep.clone().unwrap_or_else(Secret::generate);
            let shown = keep.is_none().then(|| secret.expose().to_string());
            let generation = current.map_or(1, |c| c.generation + 1);
            (
                Some(WebhookTarget {
                    url,
                    secret,
                    generation,
                }),
                shown,
            )
        }
    };
    let daemon = api.daemon.clone();
    let tenant = name.to_string();
    tokio::task::spawn_blocking(move || daemon.set_webhook(&tenant, target))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))??;
    Ok(new_secret)
}

/// `name`'s webhook as the admin sees it (never its secret); `null` without one.
pub(super) fn status_json(api: &Api, name: &str) -> Value {
    let Some((target, health, pending)) = api.daemon.webhook(name) else {
        return Value::Null;
    };
    let state = match (health.dead_since_unix_s, health.consecutive_failures) {
        (Some(_), _) => "dead",
        (None, 0) => "active",
        (None, _) => "failing",
    };
    json!({
        "url": target.url,
        "state": state,
        "pending": pending,
        "delivered": health.delivered,
        "dropped": health.dropped,
        "consecutive_failures": health.consecutive_failures,
        "last_error": health.last_error,
        "last_error_unix_s": health.last_error_unix_s,
        "last_delivered_unix_s": health.last_delivered_unix_s,
        "dead_since_unix_s": health.dead_since_unix_s,
    })
}
