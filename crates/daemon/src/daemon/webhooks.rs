//! Delivering webhook events: a task of its own, apart from the scheduling loop.
//!
//! ```text
//!   outbox (store) ──► dispatch: per tenant with events waiting, due, none in flight:
//!        ▲               its oldest event ──► POST on a blocking thread (timeout) ──► outcome
//!        └──────────────────────────────── 2xx: removed │ else: retried after 1, 2, 4 ... s ◄┘
//! ```
//!
//! A round only writes events into the outbox in the transaction it writes anyway
//! (`records/outbox.rs`); it never waits for a receiver. Each tenant's events go out one at a
//! time, oldest first, so a receiver sees a job's changes in order; tenants do not wait for each
//! other. A receiver that fails `max_failures` times in a row is declared dead (its events are
//! dropped and counted; `arbiter tenants` says so with the last error) until the admin sets its
//! webhook again.

use crate::config::WebhookConfig;
use crate::daemon::Daemon;
use crate::records::outbox::WebhookTarget;
use crate::security::webhook::{self, AddressPolicy};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

/// Deliveries in flight at once, over all tenants (each tenant has at most one).
const MAX_IN_FLIGHT: usize = 32;

/// Longest error text kept for `arbiter tenants`.
const MAX_ERROR_CHARS: usize = 300;

/// The dispatcher's settings and what is in flight.
#[derive(Debug, Default)]
pub struct Webhooks {
    settings: Mutex<(WebhookConfig, AddressPolicy)>,
    flight: Mutex<Flight>,
}

#[derive(Debug, Default)]
struct Flight {
    /// Tenants with a delivery under way.
    busy: BTreeSet<String>,
    /// Tenants whose last delivery failed: not tried again before this (Unix ms).
    retry_at_ms: BTreeMap<String, u64>,
}

impl Webhooks {
    /// The settings in force.
    pub fn settings(&self) -> (WebhookConfig, AddressPolicy) {
        self.settings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// Wait before attempt `failures + 1`: `initial · 2^(failures-1)`, at most `max`.
pub fn backoff(config: &WebhookConfig, failures: u32) -> Duration {
    let factor = 2f64.powi(failures.saturating_sub(1).min(30) as i32);
    Duration::from_secs_f64((config.retry_initial_s * factor).min(config.retry_max_s))
}

impl Daemon {
    /// Sets how webhooks are delivered and which addresses they may reach (before
    /// [`Daemon::run_webhooks`]).
    pub fn configure_webhooks(&self, config: WebhookConfig, policy: AddressPolicy) {
        self.store
            .configure_outbox(config.queue_per_tenant, config.max_failures);
        *self
            .webhooks
            .settings
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = (config, policy);
    }

    /// Delivers webhook events until the process ends.
    pub async fn run_webhooks(self) {
        let wake = self.store.outbox_wake();
        loop {
            let next_ms = self.dispatch_webhooks();
            let wait = next_ms.map_or(Duration::from_secs(60), |at| {
                Duration::from_millis(at.saturating_sub(self.now_ms()).max(10))
            });
            tokio::select! {
                _ = wake.notified() => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Starts a delivery for every tenant that has events waiting, none in flight and no retry
    /// pending; returns when the earliest pending retry is due (Unix ms).
    fn dispatch_webhooks(&self) -> Option<u64> {
        let now = self.now_ms();
        let mut next = None::<u64>;
        for tenant in self.store.webhooks_due() {
            let mut flight = self
                .webhooks
                .flight
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if flight.busy.contains(&tenant) || flight.busy.len() >= MAX_IN_FLIGHT {
                continue;
            }
            if let Some(&at) = flight.retry_at_ms.get(&tenant).filter(|at| **at > now) {
                next = Some(next.map_or(at, |n| n.min(at)));
                continue;
            }
            let head = match self.store.webhook_head(&tenant) {
                Ok(Some(head)) => head,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(tenant = %tenant, "webhook outbox unreadable: {e}");
                    continue;
                }
            };
            let Some((target, _, _)) = self.store.webhook(&tenant) else {
                continue;
            };
            flight.busy.insert(tenant.clone());
            drop(flight);
            tokio::spawn(self.clone().deliver(tenant, target, head));
        }
        next
    }

    /// Sends one event and records how it went.
    async fn deliver(self, tenant: String, target: WebhookTarget, (key, body): (String, String)) {
        let (config, policy) = self.webhooks.settings();
        let sent_at = self.now_s();
        let generation = target.generation;
        let post = {
            let config = config.clone();
            move || post(&config, &policy, &target, &body, sent_at)
        };
        let outcome = match tokio::task::spawn_blocking(post).await {
            Ok(outcome) => outcome,
            Err(e) => Err(format!("delivery task failed: {e}")),
        };
        let failed = outcome.as_ref().err().cloned();
        let health = self
            .store
            .webhook_outcome(&tenant, &key, generation, outcome, self.now_s());
        let mut flight = self
            .webhooks
            .flight
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        flight.busy.remove(&tenant);
        match (failed, health) {
            (None, _) => {
                flight.retry_at_ms.remove(&tenant);
            }
            (Some(error), Ok(Some(health))) if health.dead_since_unix_s.is_some() => {
                flight.retry_at_ms.remove(&tenant);
                tracing::error!(tenant = %tenant, failures = health.consecutive_failures, "webhook receiver declared dead, its waiting events dropped; set the webhook again (`arbiter tenants update {tenant} --webhook URL`) to resume: {error}");
            }
            (Some(error), Ok(Some(health))) => {
                let wait = backoff(&config, health.consecutive_failures);
                flight
                    .retry_at_ms
                    .insert(tenant.clone(), self.now_ms() + wait.as_millis() as u64);
                tracing::warn!(tenant = %tenant, failures = health.consecutive_failures, retry_in_s = wait.as_secs_f64(), "webhook delivery failed: {error}");
            }
            (Some(_), Ok(None)) => {}
            (_, Err(e)) => {
                tracing::warn!(tenant = %tenant, "could not record a webhook delivery's outcome (it will be sent again): {e}")
            }
        }
        drop(flight);
        self.store.outbox_wake().notify_one();
    }
}

impl Daemon {
    /// `tenant`'s webhook, its receiver's health and the events waiting for it.
    pub fn webhook(
        &self,
        tenant: &str,
    ) -> Option<(WebhookTarget, crate::records::outbox::Health, usize)> {
        self.store.webhook(tenant)
    }

    /// Sets or (with `None`) removes `tenant`'s webhook; refused (404) for a tenant that does not
    /// exist. Checked by the caller (`security::webhook::check_url`).
    pub fn set_webhook(
        &self,
        tenant: &str,
        target: Option<WebhookTarget>,
    ) -> Result<(), crate::daemon::RequestError> {
        // Under the state lock: a tenant being removed cannot get a webhook back meanwhile.
        let state = self.lock();
        if !state.tenants.contains_key(tenant) {
            return Err(crate::daemon::RequestError::Conflict(format!(
                "tenant {tenant} does not exist"
            )));
        }
        self.store.set_webhook(tenant, target)?;
        drop(state);
        // A new webhook is tried at once, not after the old one's backoff.
        self.webhooks
            .flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retry_at_ms
            .remove(tenant);
        Ok(())
    }
}

/// POSTs `body` to `target` (blocking, within the configured timeout): `Ok` on a 2xx answer.
/// Connects only to addresses the policy allows (checked here, at every delivery, on what the
/// name resolves to now), follows no redirect, uses no proxy.
fn post(
    config: &WebhookConfig,
    policy: &AddressPolicy,
    target: &WebhookTarget,
    body: &str,
    sent_at_unix_s: i64,
) -> Result<(), String> {
    let url = webhook::check_url(&target.url, policy, cfg!(feature = "webhook-tls"))
        .map_err(|e| format!("webhook URL refused: {e}"))?;
    let agent_config = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs_f64(config.timeout_s)))
        .max_redirects(0)
        .http_status_as_error(false)
        .proxy(None)
        .user_agent(concat!("arbiter-webhooks/", env!("CARGO_PKG_VERSION")))
        .build();
    let agent = ureq::Agent::with_parts(
        agent_config,
        ureq::unversioned::transport::DefaultConnector::default(),
        CheckedResolver {
            policy: policy.clone(),
        },
    );
    let event: serde_json::Value =
        serde_json::from_str(body).map_err(|e| format!("stored event unreadable: {e}"))?;
    let response = agent
        .post(url.as_str())
        .header("content-type", "application/json")
        .header(
            webhook::SIGNATURE_HEADER,
            &webhook::signature_header(&target.secret, sent_at_unix_s, body.as_bytes()),
        )
        .header(
            "Arbiter-Webhook-Id",
            event["id"].as_str().unwrap_or_default(),
        )
        .header("Arbiter-Event", event["event"].as_str().unwrap_or_default())
        .send(body)
        .map_err(|e| shown(&e.to_string()))?;
    let status = response.status();
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("HTTP {}", status.as_u16()))
    }
}

/// An error as kept for the admin: one line of printable text, bounded.
fn shown(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control())
        .take(MAX_ERROR_CHARS)
        .collect()
}

/// Resolves a webhook's host and keeps the addresses the policy allows; none allowed is an error.
#[derive(Debug)]
struct CheckedResolver {
    policy: AddressPolicy,
}

impl ureq::unversioned::resolver::Resolver for CheckedResolver {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        _config: &ureq::config::Config,
        _timeout: ureq::unversioned::transport::NextTimeout,
    ) -> Result<ureq::unversioned::resolver::ResolvedSocketAddrs, ureq::Error> {
        let refused = |why: String| {
            ureq::Error::Io(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                why,
            ))
        };
        let host = uri.host().ok_or_else(|| refused("no host".into()))?;
        // `[::1]` as written in a URL; the resolver wants it bare.
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let port = uri
            .port_u16()
            .unwrap_or(if uri.scheme_str() == Some("https") {
                443
            } else {
                80
            });
        let allowed = webhook::resolve_allowed(&self.policy, host, port).map_err(refused)?;
        let mut out = self.empty();
        for addr in allowed.into_iter().take(16) {
            out.push(addr);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_exponentially_up_to_the_maximum() {
        let config = WebhookConfig {
            retry_initial_s: 1.0,
            retry_max_s: 300.0,
            ..WebhookConfig::default()
        };
        let waits: Vec<u64> = (1..=11).map(|f| backoff(&config, f).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        assert_eq!(backoff(&config, u32::MAX).as_secs(), 300, "no overflow");
    }

    #[test]
    fn errors_kept_for_the_admin_are_one_bounded_line() {
        assert_eq!(shown("a\nb\u{1b}[31mc"), "ab[31mc");
        assert_eq!(shown(&"x".repeat(1_000)).len(), MAX_ERROR_CHARS);
    }
}
