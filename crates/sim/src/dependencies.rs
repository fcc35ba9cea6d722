//! Job dependencies in a simulation (a native trace's `dependency` column, Slurm's syntax over
//! trace ids: pipelines such as preprocess → train → evaluate). A job whose dependencies do not
//! hold yet has arrived but is not offered to the policy; it joins the queue when they hold
//! (its JCT still counts from its submission, as a user sees it) and ends as
//! [`JobOutcome::DependencyNeverSatisfied`](crate::JobOutcome) when they never can, by the
//! rules the daemon follows (`arbiter_model::dependency`).

use arbiter_model::{DependedOn, DependencyKind, JobId, JobSpec, Verdict};
use std::collections::BTreeMap;

/// One job's dependencies, on job indices (`None`: a trace id not in the workload, which can
/// never hold).
#[derive(Clone, Debug)]
struct Resolved {
    on: Vec<(DependencyKind, Option<u32>)>,
    /// With `singleton`: the earlier jobs of its tenant with its name.
    earlier_same_name: Vec<u32>,
}

/// The jobs waiting on dependencies, and what each waits on.
#[derive(Debug, Default)]
pub(crate) struct Dependents {
    /// Per job id, for jobs with dependencies.
    resolved: BTreeMap<u32, Resolved>,
    /// Arrived jobs whose dependencies have not held yet, in arrival order.
    blocked: Vec<JobId>,
}

impl Dependents {
    /// The dependencies of `specs`, resolved to job indices by trace id.
    pub(crate) fn new(specs: &[JobSpec]) -> Self {
        if specs.iter().all(|s| s.dependency.is_none()) {
            return Dependents::default();
        }
        let by_trace_id: BTreeMap<&str, u32> = specs
            .iter()
            .map(|s| (s.trace_id.as_str(), s.id.0))
            .collect();
        let mut by_name: BTreeMap<(&str, &str), Vec<u32>> = BTreeMap::new();
        let mut resolved = BTreeMap::new();
        for spec in specs {
            let earlier = spec
                .name
                .as_deref()
                .map(|n| by_name.entry((spec.tenant.as_str(), n)).or_default());
            if let Some(deps) = &spec.dependency {
                let on = deps
                    .on
                    .iter()
                    .map(|d| (d.kind, by_trace_id.get(d.on.as_str()).copied()))
                    .collect();
                let earlier_same_name = if deps.singleton {
                    earlier.as_ref().map(|e| e.to_vec()).unwrap_or_default()
                } else {
                    Vec::new()
                };
                resolved.insert(
                    spec.id.0,
                    Resolved {
                        on,
                        earlier_same_name,
                    },
                );
            }
            if let Some(e) = earlier {
                e.push(spec.id.0);
            }
        }
        Dependents {
            resolved,
            blocked: Vec::new(),
        }
    }

    /// Whether job `id` has dependencies (it waits for them at its arrival).
    pub(crate) fn has(&self, id: JobId) -> bool {
        self.resolved.contains_key(&id.0)
    }

    /// Job `id` arrived and waits for its dependencies.
    pub(crate) fn block(&mut self, id: JobId) {
        self.blocked.push(id);
    }

    /// Whether some job waits on dependencies.
    pub(crate) fn any_blocked(&self) -> bool {
        !self.blocked.is_empty()
    }

    /// The blocked jobs whose dependencies hold now and those that never can, taken out of the
    /// blocked list; `stand` says where a job stands, `ended` whether it has ended.
    pub(crate) fn settle(
        &mut self,
        stand: impl Fn(u32) -> DependedOn,
        ended: impl Fn(u32) -> bool,
    ) -> (Vec<JobId>, Vec<JobId>) {
        let (mut free, mut never) = (Vec::new(), Vec::new());
        let resolved = &self.resolved;
        self.blocked.retain(|&id| {
            let Some(r) = resolved.get(&id.0) else {
                return false;
            };
            let mut verdict = Verdict::Satisfied;
            for &(kind, on) in &r.on {
                let v = on.map_or(Verdict::Never, |j| kind.verdict(stand(j)));
                match v {
                    Verdict::Never => {
                        verdict = Verdict::Never;
                        break;
                    }
                    Verdict::Waiting => verdict = Verdict::Waiting,
                    Verdict::Satisfied => {}
                }
            }
            if verdict == Verdict::Satisfied && r.earlier_same_name.iter().any(|&e| !ended(e)) {
                verdict = Verdict::Waiting;
            }
            match verdict {
                Verdict::Satisfied => free.push(id),
                Verdict::Never => never.push(id),
                Verdict::Waiting => return true,
            }
            false
        });
        (free, never)
    }
}
