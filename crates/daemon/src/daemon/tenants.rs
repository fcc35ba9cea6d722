//! Tenants: records, tokens, weights and quotas, and the unix identity each tenant's runs
//! execute as (see `security/identity.rs` for the model).

use crate::daemon::{Daemon, RequestError, State};
use crate::records::store::{ADMIN_TENANT, Tenant};
use crate::security::identity::{Isolation, UnixIdentity, allocate_uid, resolve_user};
use arbiter_policy::PolicyKind;

/// Why a tenant's jobs cannot run as its identity.
#[derive(Debug, thiserror::Error)]
pub(crate) enum IdentityError {
    /// No such tenant (removed, or never added).
    #[error("tenant {0} does not exist (it was removed)")]
    NoSuchTenant(String),
    /// The configuration maps the tenant to no identity the executor can use: fixed by the admin.
    #[error("{0}")]
    NotMapped(String),
    /// The identity cannot be had now (no free uid, the store or the checkpoint area failed).
    #[error("{0}")]
    Unavailable(String),
}

impl From<IdentityError> for RequestError {
    fn from(e: IdentityError) -> Self {
        match e {
            IdentityError::NoSuchTenant(_) | IdentityError::NotMapped(_) => {
                RequestError::Conflict(e.to_string())
            }
            IdentityError::Unavailable(reason) => RequestError::Unavailable(reason),
        }
    }
}

impl Daemon {
    /// Adds or replaces a tenant.
    ///
    /// A policy that uses tenant weights gets the new ones (see `rebuild_policy`).
    pub fn put_tenant(&self, tenant: Tenant) -> Result<(), RequestError> {
        let mut state = self.lock();
        let new = !state.tenants.contains_key(&tenant.name);
        if new && !state.tenants.is_empty() && !self.settings.isolation.allows_many_tenants() {
            return Err(RequestError::Conflict(format!(
                "refusing a second tenant: {}. Run the daemon as root (each tenant then runs as its own uid), or set allow_shared_identity = true to accept that",
                self.settings.isolation.describe()
            )));
        }
        // A removed tenant's name is not handed out again: its jobs (with their environments),
        // logs, checkpoint area and uid are keyed by that name and would pass to the newcomer.
        if new
            && (state.allocated_uids.contains_key(&tenant.name)
                || state.jobs.iter().any(|j| j.tenant == tenant.name))
        {
            return Err(RequestError::Conflict(format!(
                "the name {} belonged to a tenant that was removed; its jobs, logs and checkpoints are still on record, so the name is not reused: choose another",
                tenant.name
            )));
        }
        self.store.put_tenant(&tenant)?;
        state.tenants.insert(tenant.name.clone(), tenant);
        self.rebuild_policy(&mut state);
        drop(state);
        // A raised quota or a new weight may start jobs now, not at the next timed round.
        self.wake.notify_one();
        Ok(())
    }

    /// The tenant whose token hashes to `hash`.
    pub fn tenant_by_token_hash(&self, hash: &str) -> Option<String> {
        self.lock()
            .tenants
            .values()
            .find(|t| t.token_sha256 == hash)
            .map(|t| t.name.clone())
    }

    /// A copy of the tenant named `name`.
    pub fn tenant(&self, name: &str) -> Option<Tenant> {
        self.lock().tenants.get(name).cloned()
    }

    /// The ids of `name`'s queued jobs that ask for more GPUs than `quota`: held until it is
    /// raised (said when an admin lowers a quota under them).
    pub fn queued_over_quota(&self, name: &str, quota: u32) -> Vec<u32> {
        let state = self.lock();
        state
            .jobs
            .iter()
            .filter(|j| {
                j.tenant == name
                    && !j.request.opportunistic
                    && matches!(j.state, crate::records::job::JobState::Queued)
                    && j.request.gpus > quota
            })
            .map(|j| j.id)
            .collect()
    }

    /// Removes a tenant (its token stops working at once); `None` if there is no such tenant.
    /// Refused while it has queued, running or stopping jobs; its ended jobs stay on record.
    pub fn remove_tenant(&self, name: &str) -> Result<Option<Tenant>, RequestError> {
        let mut state = self.lock();
        if !state.tenants.contains_key(name) {
            return Ok(None);
        }
        let active = state
            .jobs
            .iter()
            .filter(|j| j.tenant == name && !j.state.is_terminal())
            .count();
        if active > 0 {
            return Err(RequestError::Conflict(format!(
                "tenant {name} has {active} queued or running jobs; cancel them (or wait for them to end) first"
            )));
        }
        // Persisted first, then forgotten.
        self.store.delete_tenant(name)?;
        let removed = state.tenants.remove(name);
        state.identities.remove(name);
        // Whatever its uid still runs (a process that outlived its run) is killed at the next
        // search of the process table: a removed tenant's uid runs nothing.
        state.ended_tenants.insert(name.to_string());
        state.run_ended_since_check = true;
        self.rebuild_policy(&mut state);
        Ok(removed)
    }

    /// Gives a policy that uses tenant weights the current ones: `hierarchical` is rebuilt (it
    /// keeps no state a rebuild would lose beyond its allocation, which the next round
    /// recomputes), `vtc` is told them (a rebuild would lose its counters).
    pub(crate) fn rebuild_policy(&self, state: &mut State) {
        if !self.settings.policy.uses_tenant_weights() {
            return;
        }
        if self.settings.policy != PolicyKind::Hierarchical {
            // It keeps counts a rebuild would lose (VTC's counters): told the weights instead.
            let weights = crate::daemon::policy_support::tenant_weights(&state.tenants);
            if let Some(Err(e)) = state
                .policy
                .as_mut()
                .map(|p| p.set_tenant_weights(&weights))
            {
                tracing::warn!("the policy refused the new tenant weights: {e}");
            }
            return;
        }
        let config = crate::daemon::policy_support::policy_config(
            &state.tenants,
            self.settings.round_s,
            &self.settings.gittins_prior,
        );
        let tree = crate::daemon::quotas::bind(&state.quota_groups, state.topology.cluster()).0;
        match crate::daemon::policy_support::build_policy(
            self.settings.policy,
            &config,
            &self.settings.priority_classes,
            tree,
        ) {
            Ok(policy) => state.policy = Some(policy),
            Err(e) => {
                tracing::warn!("could not rebuild the policy with the new tenant weights: {e}")
            }
        }
    }

    /// The identity `tenant`'s runs execute as (`None`: the daemon's own), its checkpoint area
    /// made ready (created, owned by that identity, mode 0700). An automatic uid is allocated
    /// once and recorded in the store before it is used.
    pub(crate) fn identity_for(
        &self,
        state: &mut State,
        tenant: &str,
    ) -> Result<Option<UnixIdentity>, IdentityError> {
        // A removed tenant's uid runs nothing (its jobs were all over when it was removed, and
        // submissions check the tenant under the same lock; this holds whatever is on record).
        if tenant != ADMIN_TENANT && !state.tenants.contains_key(tenant) {
            return Err(IdentityError::NoSuchTenant(tenant.to_string()));
        }
        if let Some(identity) = state.identities.get(tenant) {
            return Ok(*identity);
        }
        let identity = match &self.settings.isolation {
            Isolation::Shared { .. } => None,
            Isolation::PerTenant { users, .. } if users.contains_key(tenant) => {
                Some(resolve_user(&users[tenant]).map_err(IdentityError::Unavailable)?)
            }
            // Slurm runs a job as a named user: `sbatch --uid` refuses a uid without an account
            // (and every node must know it), so an automatic uid cannot be used there.
            Isolation::PerTenant { .. } if !self.executor.capabilities().automatic_uids => {
                return Err(IdentityError::NotMapped(format!(
                    "the {} executor runs jobs as existing users only: tenant {tenant} has no user; add `{tenant} = \"<user>\"` to tenant_users in the daemon's config (an account every node knows) and restart it",
                    self.executor.name()
                )));
            }
            Isolation::PerTenant { uid_range, .. } => {
                let uid = match state.allocated_uids.get(tenant) {
                    Some(uid) => *uid,
                    None => {
                        let taken = state.allocated_uids.values().copied().collect();
                        let uid = allocate_uid(*uid_range, &taken).ok_or_else(|| {
                            IdentityError::Unavailable(format!(
                                "no free uid left in tenant_uid_range {}-{}",
                                uid_range[0], uid_range[1]
                            ))
                        })?;
                        self.store
                            .put_identity(tenant, uid)
                            .map_err(|e| IdentityError::Unavailable(e.to_string()))?;
                        tracing::info!(tenant, uid, "allocated an automatic unix identity");
                        state.allocated_uids.insert(tenant.to_string(), uid);
                        uid
                    }
                };
                Some(UnixIdentity { uid, gid: uid })
            }
        };
        self.settings
            .checkpoint_roots
            .prepare_tenant(tenant, identity)
            .map_err(IdentityError::Unavailable)?;
        state.identities.insert(tenant.to_string(), identity);
        Ok(identity)
    }
}
