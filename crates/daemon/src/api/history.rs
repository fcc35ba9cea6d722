//! `GET /v1/history` (admin only): the jobs that ran, as a replay needs them and without anything
//! a tenant would mind in a shared file (`records::history`), a page at a time. `arbiter history
//! export` reads it into a native trace for `arbiter whatif`.

use super::{Api, ApiError, query};
use crate::records::history::HistoryPage;
use crate::records::usage::parse_since;
use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use serde::Deserialize;

/// Jobs per page unless `?limit=` says otherwise, and the most it may say (an entry is a few
/// hundred bytes: a page of the most is a few tens of megabytes).
pub const DEFAULT_HISTORY_PAGE: usize = 10_000;
/// See [`DEFAULT_HISTORY_PAGE`].
pub const MAX_HISTORY_PAGE: usize = 100_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HistoryQuery {
    /// Only jobs submitted since: `30d`, `36h`, a date `YYYY-MM-DD` (UTC), or `all` (default).
    since: Option<String>,
    /// The page after this job id (`next_after` of the previous page).
    after: Option<u32>,
    /// Jobs per page.
    limit: Option<usize>,
}

pub(super) async fn history(
    State(api): State<Api>,
    headers: HeaderMap,
    q: Result<Query<HistoryQuery>, QueryRejection>,
) -> Result<Json<HistoryPage>, ApiError> {
    api.admin(&headers)?;
    let q = query(q)?;
    let since = match q.since.as_deref() {
        None => i64::MIN,
        Some(text) => {
            parse_since(text, api.daemon.now_s()).map_err(|e| ApiError::bad("since", e))?
        }
    };
    let limit = match q.limit {
        None => DEFAULT_HISTORY_PAGE,
        Some(n) if (1..=MAX_HISTORY_PAGE).contains(&n) => n,
        Some(n) => {
            return Err(ApiError::bad(
                "limit",
                format!("{n} is not in 1..={MAX_HISTORY_PAGE}"),
            ));
        }
    };
    Ok(Json(api.daemon.history_page(q.after, since, limit)))
}
