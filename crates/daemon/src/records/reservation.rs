//! Reservations and maintenance windows (`arbiter reserve`): nodes set aside from a start for a
//! duration, for one tenant or (no tenant) for maintenance. What a reservation means for a job
//! on one of its nodes, as Slurm's `scontrol create reservation` does:
//!
//! | the job | before the start | during the window |
//! |---|---|---|
//! | may use it (the reservation's tenant) | placed freely | placed freely |
//! | may not | placed only if its time limit ends before the start | not placed; a running one is preempted at the start (checkpoint signal, grace) |
//!
//! A job's time limit is its `max_run_time_s`, else the daemon's `default_max_run_time_s`; a job
//! with neither could run past any start, so it is placed on a reserved node only once the
//! window is over.

use serde::{Deserialize, Serialize};

/// One reservation, as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    /// Its id (`arbiter reservations --delete ID`).
    pub id: u32,
    /// The nodes, by name.
    pub nodes: Vec<String>,
    /// When it starts and ends (Unix seconds).
    pub start_unix_s: i64,
    /// When it ends.
    pub end_unix_s: i64,
    /// The tenant it is for; `None`: maintenance (no job runs there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Why (shown to everyone it keeps off the nodes).
    pub reason: String,
}

/// A reservation as asked for (`POST /v1/reservations`).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReservationRequest {
    /// Node names.
    pub nodes: Vec<String>,
    /// Start, Unix seconds.
    pub start_unix_s: i64,
    /// Duration, seconds.
    pub duration_s: u64,
    /// For one tenant; unset: maintenance.
    #[serde(default)]
    pub tenant: Option<String>,
    /// Why.
    pub reason: String,
}

/// Longest reservation taken (a year).
pub const MAX_DURATION_S: u64 = 366 * 86_400;

impl ReservationRequest {
    /// Checks it against the nodes that exist (`known`); each refusal names the field.
    pub fn validate(&self, known: &[String]) -> Result<(), crate::records::job::FieldError> {
        use crate::records::job::FieldError;
        let bad = |field: &'static str, reason: String| Err(FieldError { field, reason });
        if self.nodes.is_empty() {
            return bad("nodes", "names no node".into());
        }
        if let Some(unknown) = self.nodes.iter().find(|n| !known.contains(n)) {
            return bad(
                "nodes",
                format!(
                    "`{}` is not a node of this cluster ({})",
                    unknown.escape_debug(),
                    known.join(", ")
                ),
            );
        }
        if self.duration_s == 0 || self.duration_s > MAX_DURATION_S {
            return bad(
                "duration_s",
                format!("{} s: must be 1 s to a year", self.duration_s),
            );
        }
        if !(0..=253_402_300_799).contains(&self.start_unix_s) {
            return bad(
                "start_unix_s",
                format!("{} is not a plausible Unix time", self.start_unix_s),
            );
        }
        crate::security::text::check("reason", &self.reason, crate::security::text::Text::Line)?;
        if self.reason.trim().is_empty() || self.reason.len() > 256 {
            return bad("reason", "say why, in at most 256 bytes".into());
        }
        Ok(())
    }
}

impl Reservation {
    /// Whether it is in force at `now_s`.
    pub fn active(&self, now_s: i64) -> bool {
        (self.start_unix_s..self.end_unix_s).contains(&now_s)
    }

    /// Whether a job of `tenant` with at most `limit_s` to run (`None`: unbounded) may be placed
    /// on its nodes at `now_s`.
    pub fn admits(&self, tenant: &str, limit_s: Option<u64>, now_s: i64) -> bool {
        if self.tenant.as_deref() == Some(tenant) || now_s >= self.end_unix_s {
            return true;
        }
        if now_s >= self.start_unix_s {
            return false;
        }
        limit_s.is_some_and(|l| {
            now_s.saturating_add(i64::try_from(l).unwrap_or(i64::MAX)) <= self.start_unix_s
        })
    }

    /// Whether a run of `tenant` already on its nodes must stop at `now_s`.
    pub fn evicts(&self, tenant: &str, now_s: i64) -> bool {
        self.active(now_s) && self.tenant.as_deref() != Some(tenant)
    }

    /// What it is, for someone it keeps off its nodes (`viewer`: whose job; another tenant's
    /// reservation does not say whose).
    pub fn describe(&self, viewer: &str) -> String {
        let whose = match self.tenant.as_deref() {
            None => "maintenance".to_string(),
            Some(t) if t == viewer => format!("for tenant {t}"),
            Some(_) => "for another tenant".to_string(),
        };
        let hours = (self.end_unix_s - self.start_unix_s) as f64 / 3600.0;
        format!(
            "reservation {} ({whose}: {}) of {} from {} UTC for {hours:.1} h",
            self.id,
            self.reason,
            self.nodes.join(","),
            crate::clock::utc_text(self.start_unix_s)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(tenant: Option<&str>) -> Reservation {
        Reservation {
            id: 1,
            nodes: vec!["n1".into()],
            start_unix_s: 1_000,
            end_unix_s: 2_000,
            tenant: tenant.map(String::from),
            reason: "driver upgrade".into(),
        }
    }

    #[test]
    fn a_job_is_placed_on_a_reserved_node_only_if_it_ends_before_the_start_or_the_reservation_is_its_tenants()
     {
        let maintenance = window(None);
        assert!(
            maintenance.admits("a", Some(500), 400),
            "ends at 900, before 1000"
        );
        assert!(
            !maintenance.admits("a", Some(700), 400),
            "would run into it"
        );
        assert!(
            !maintenance.admits("a", None, 0),
            "no limit: could run into any window"
        );
        assert!(!maintenance.admits("a", Some(1), 1_500), "in force");
        assert!(maintenance.admits("a", None, 2_000), "over");
        let theirs = window(Some("a"));
        assert!(theirs.admits("a", None, 1_500) && !theirs.admits("b", Some(1), 1_500));
        assert!(
            theirs.evicts("b", 1_000) && !theirs.evicts("a", 1_000) && !theirs.evicts("b", 999)
        );
        assert!(
            theirs.describe("b").contains("for another tenant")
                && !theirs.describe("b").contains("tenant a")
        );
    }

    #[test]
    fn bad_requests_are_refused_naming_the_field() {
        let known = vec!["n1".to_string(), "n2".to_string()];
        let ok = ReservationRequest {
            nodes: vec!["n1".into()],
            start_unix_s: 1_000,
            duration_s: 3_600,
            tenant: None,
            reason: "upgrade".into(),
        };
        assert_eq!(ok.validate(&known), Ok(()));
        for (req, field) in [
            (
                ReservationRequest {
                    nodes: vec![],
                    ..ok.clone()
                },
                "nodes",
            ),
            (
                ReservationRequest {
                    nodes: vec!["n9".into()],
                    ..ok.clone()
                },
                "nodes",
            ),
            (
                ReservationRequest {
                    duration_s: 0,
                    ..ok.clone()
                },
                "duration_s",
            ),
            (
                ReservationRequest {
                    start_unix_s: -5,
                    ..ok.clone()
                },
                "start_unix_s",
            ),
            (
                ReservationRequest {
                    reason: "a\nb".into(),
                    ..ok.clone()
                },
                "reason",
            ),
            (
                ReservationRequest {
                    reason: " ".into(),
                    ..ok.clone()
                },
                "reason",
            ),
        ] {
            assert_eq!(req.validate(&known).map_err(|e| e.field), Err(field));
        }
    }
}
