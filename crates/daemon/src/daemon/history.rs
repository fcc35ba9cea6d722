//! The cluster's history, a page at a time (`GET /v1/history`: what `arbiter history export`
//! writes; [`crate::records::history`] says what a job's entry holds).

use crate::daemon::Daemon;
use crate::records::history::{HistoryPage, page};

impl Daemon {
    /// The jobs after id `after` that ran, submitted at or after `since_unix_s`, at most `limit`,
    /// as the history gives them, with the id to ask after for the next page. Each page is read
    /// under the state's lock; the next one sees the jobs as they are then.
    pub fn history_page(&self, after: Option<u32>, since_unix_s: i64, limit: usize) -> HistoryPage {
        let now = self.now_s();
        let state = self.lock();
        let start = after.map_or(0, |a| a as usize + 1);
        let (jobs, more) = page(state.jobs.iter_from(start), since_unix_s, limit, now);
        let next_after = if more {
            jobs.last().map(|r| r.id)
        } else {
            None
        };
        HistoryPage { jobs, next_after }
    }
}
