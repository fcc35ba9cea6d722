//! A flag a caller raises to stop simulations early: the Python bindings raise it on Ctrl-C.
//! The engine looks at it at every step of virtual time, the scenario runner before each
//! simulation; a stopped simulation ends with [`crate::SimError::Stopped`] and gives no result.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Shared by whoever may stop and the simulations it stops; clones see the same flag. The
/// default flag is never raised.
#[derive(Clone, Debug, Default)]
pub struct StopFlag(Option<Arc<AtomicBool>>);

impl StopFlag {
    /// A flag that [`StopFlag::raise`] can raise.
    pub fn new() -> Self {
        StopFlag(Some(Arc::new(AtomicBool::new(false))))
    }

    /// Asks every simulation holding a clone of this flag to stop.
    pub fn raise(&self) {
        if let Some(flag) = &self.0 {
            flag.store(true, Ordering::Relaxed);
        }
    }

    /// Whether the flag was raised.
    pub fn is_raised(&self) -> bool {
        self.0
            .as_ref()
            .is_some_and(|flag| flag.load(Ordering::Relaxed))
    }
}

/// Not a setting: two configurations that differ only in their flags are the same settings.
impl PartialEq for StopFlag {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_flag_and_the_default_is_never_raised() {
        let flag = StopFlag::new();
        let clone = flag.clone();
        assert!(!clone.is_raised());
        flag.raise();
        assert!(clone.is_raised());
        let never = StopFlag::default();
        never.raise();
        assert!(!never.is_raised());
    }

    #[test]
    fn a_raised_flag_stops_a_simulation_at_its_first_step() {
        use arbiter_model::{Cluster, JobId, JobSpec, SimTime};
        let cluster = Cluster::homogeneous(1, 1, 4, 64, 512, "GPU").expect("cluster");
        let jobs = vec![JobSpec::new(JobId(0), SimTime::ZERO, 1, 100.0)];
        let fifo = || {
            arbiter_policy::build(
                arbiter_policy::PolicyKind::Fifo,
                &arbiter_policy::PolicyConfig::default(),
            )
            .expect("fifo")
        };
        let stop = StopFlag::new();
        let config = crate::SimConfig {
            stop: stop.clone(),
            ..crate::SimConfig::default()
        };
        assert!(crate::simulate(&cluster, &jobs, fifo().as_mut(), &config).is_ok());
        stop.raise();
        let stopped = crate::simulate(&cluster, &jobs, fifo().as_mut(), &config);
        assert!(
            matches!(stopped, Err(crate::SimError::Stopped(_))),
            "{stopped:?}"
        );
    }
}
