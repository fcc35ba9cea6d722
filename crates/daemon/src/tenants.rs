//! Tenants: records, tokens, weights and quotas, and the unix identity each tenant's runs
//! execute as (see `identity.rs` for the model).

use crate::daemon::{Daemon, RequestError, State};
use crate::identity::{allocate_uid, resolve_user, Isolation, UnixIdentity};
use crate::store::Tenant;
use arbiter_policy::PolicyKind;

impl Daemon {
    /// Adds or replaces a tenant.
    ///
    /// A `hierarchical` policy is rebuilt with the new weights (it keeps no state a rebuild
    /// would lose beyond its allocation, which the next round recomputes).
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
        if new && (state.allocated_uids.contains_key(&tenant.name) || state.jobs.iter().any(|j| j.tenant == tenant.name)) {
            return Err(RequestError::Conflict(format!(
                "the name {} belonged to a tenant that was removed; its jobs, logs and checkpoints are still on record, so the name is not reused: choose another",
                tenant.name
            )));
        }
        self.store.put_tenant(&tenant)?;
        state.tenants.insert(tenant.name.clone(), tenant);
        self.rebuild_policy(&mut state);
        Ok(())
    }

    /// The tenant whose token hashes to `hash`.
    pub fn tenant_by_token_hash(&self, hash: &str) -> Option<String> {
        self.lock().tenants.values().find(|t| t.token_sha256 == hash).map(|t| t.name.clone())
    }

    /// A copy of the tenant named `name`.
    pub fn tenant(&self, name: &str) -> Option<Tenant> {
        self.lock().tenants.get(name).cloned()
    }

    /// Removes a tenant (its token stops working at once); `None` if there is no such tenant.
    /// Refused while it has queued, running or stopping jobs; its ended jobs stay on record.
    pub fn remove_tenant(&self, name: &str) -> Result<Option<Tenant>, RequestError> {
        let mut state = self.lock();
        if !state.tenants.contains_key(name) {
            return Ok(None);
        }
        let active = state.jobs.iter().filter(|j| j.tenant == name && !j.state.is_terminal()).count();
        if active > 0 {
            return Err(RequestError::Conflict(format!("tenant {name} has {active} queued or running jobs; cancel them (or wait for them to end) first")));
        }
        // Persisted first, then forgotten.
        self.store.delete_tenant(name)?;
        let removed = state.tenants.remove(name);
        self.rebuild_policy(&mut state);
        Ok(removed)
    }

    /// Rebuilds a `hierarchical` policy with the current tenant weights (it keeps no state a
    /// rebuild would lose beyond its allocation, which the next round recomputes).
    pub(crate) fn rebuild_policy(&self, state: &mut State) {
        if self.settings.policy != PolicyKind::Hierarchical {
            return;
        }
        let config = crate::policy_support::policy_config(&state.tenants, self.settings.round_s, &self.settings.gittins_prior);
        match arbiter_policy::build(self.settings.policy, &config) {
            Ok(policy) => state.policy = Some(policy),
            Err(e) => tracing::warn!("could not rebuild the policy with the new tenant weights: {e}"),
        }
    }

    /// The identity `tenant`'s runs execute as (`None`: the daemon's own), its checkpoint area
    /// made ready (created, owned by that identity, mode 0700). An automatic uid is allocated
    /// once and recorded in the store before it is used.
    pub(crate) fn identity_for(&self, state: &mut State, tenant: &str) -> Result<Option<UnixIdentity>, String> {
        if let Some(identity) = state.identities.get(tenant) {
            return Ok(*identity);
        }
        let identity = match &self.settings.isolation {
            Isolation::Shared { .. } => None,
            Isolation::PerTenant { users, .. } if users.contains_key(tenant) => Some(resolve_user(&users[tenant])?),
            // Slurm runs a job as a named user: `sbatch --uid` refuses a uid without an account
            // (and every node must know it), so an automatic uid cannot be used there.
            Isolation::PerTenant { .. } if !self.executor.capabilities().automatic_uids => {
                return Err(format!("the {} executor runs jobs as existing users only: map tenant {tenant} to a user in tenant_users (an account every node knows)", self.executor.name()));
            }
            Isolation::PerTenant { uid_range, .. } => {
                let uid = match state.allocated_uids.get(tenant) {
                    Some(uid) => *uid,
                    None => {
                        let taken = state.allocated_uids.values().copied().collect();
                        let uid = allocate_uid(*uid_range, &taken).ok_or_else(|| format!("no free uid left in tenant_uid_range {}-{}", uid_range[0], uid_range[1]))?;
                        self.store.put_identity(tenant, uid).map_err(|e| e.to_string())?;
                        tracing::info!(tenant, uid, "allocated an automatic unix identity");
                        state.allocated_uids.insert(tenant.to_string(), uid);
                        uid
                    }
                };
                Some(UnixIdentity { uid, gid: uid })
            }
        };
        self.settings.checkpoint_roots.prepare_tenant(tenant, identity)?;
        state.identities.insert(tenant.to_string(), identity);
        Ok(identity)
    }
}
