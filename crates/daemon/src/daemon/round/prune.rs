//! Pruning the ended jobs each tenant keeps beyond its retention (`records/retention.rs` says how many,
//! how large, how old), at every round.

use crate::daemon::{Daemon, State};
use crate::records::retention::EndedJob;

impl Daemon {
    /// Prunes the ended jobs each tenant keeps beyond its retention (oldest end first). Written
    /// to the store first; if the store refuses, nothing is pruned and the next round tries again.
    pub(crate) fn prune_ended(&self, state: &mut State, now_s: i64) {
        let keep = &self.settings.retention;
        let too_old = |e: &EndedJob| {
            keep.keep_finished_s > 0
                && now_s.saturating_sub(e.ended_unix_s) > keep.keep_finished_s as i64
        };
        // Per tenant, how many of its oldest ended jobs go.
        let mut pruned: Vec<u32> = Vec::new();
        let mut taken: Vec<(String, usize)> = Vec::new();
        for (tenant, ended) in &state.ended {
            let (mut count, mut bytes) = (ended.jobs.len(), ended.bytes);
            let before = pruned.len();
            for e in &ended.jobs {
                if count <= keep.keep_finished_per_tenant
                    && bytes <= keep.keep_finished_bytes_per_tenant
                    && !too_old(e)
                {
                    break;
                }
                pruned.push(e.id);
                count -= 1;
                bytes -= e.bytes;
            }
            if pruned.len() > before {
                taken.push((tenant.clone(), pruned.len() - before));
            }
        }
        if pruned.is_empty() {
            return;
        }
        if let Err(e) = self.store.delete_jobs(&pruned) {
            tracing::warn!(
                "could not prune {} ended jobs (tried again next round): {e}",
                pruned.len()
            );
            return;
        }
        for (tenant, n) in taken {
            if let Some(ended) = state.ended.get_mut(&tenant) {
                for e in ended.jobs.drain(..n) {
                    ended.bytes -= e.bytes;
                }
            }
        }
        state.ended.retain(|_, e| !e.jobs.is_empty());
        for &id in &pruned {
            self.forget_job(state, id);
        }
        tracing::info!(
            jobs = pruned.len(),
            "pruned ended jobs beyond their tenants' retention (keep_finished_*)"
        );
    }

    /// Forgets a pruned job: its record, idempotency key, log file and the policy's view of it.
    fn forget_job(&self, state: &mut State, id: u32) {
        let Some(job) = state.jobs.prune(id as usize) else {
            return;
        };
        if let Some(key) = job.request.client_request_id {
            state.requests.remove(&(job.tenant, key));
        }
        state.specs[id as usize] = crate::records::view::pruned_spec(id);
        let _ = std::fs::remove_file(self.log_path(id));
    }
}
