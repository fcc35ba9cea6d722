//! Policies written in Python, in-process: what a scheduling point hands them and how their
//! answer comes back, as plain Rust (`py.rs` calls into Python with it). The features are the
//! external protocol's ([`Observation`]), as columns NumPy reads without a copy per job.
//!
//! Two ways to hand them over. A Python policy's view computes each column only when the policy
//! reads it ([`write_column`], one pass over the jobs, straight into the bytes NumPy wraps, in
//! the column's own dtype), so a policy that reads two columns of a thousand-job queue pays for
//! two. The Gymnasium environment, whose observation is every feature, packs them all at once
//! ([`pack_columns`]).

use arbiter_model::{Assignment, Decision, JobId, NodeId, Placement, SimTime};
use arbiter_policy::SchedulerView;
use arbiter_policy::external::Observation;
use std::collections::HashMap;

/// The job columns, in the order [`pack_columns`] writes them and [`Column::ALL`] numbers them
/// (`python/arbiter/_policy.py` reads them in this order).
pub const COLUMNS: [&str; 9] = [
    "id",
    "tenant",
    "gpus",
    "submit_s",
    "running",
    "executed_s",
    "attained_gpu_s",
    "duration_s",
    "remaining_s",
];

/// One job column of a Python policy's view, numbered as [`COLUMNS`] names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Column {
    /// Job ids (int64).
    Id,
    /// Tenant codes (int64, see [`TenantCodes`]).
    Tenant,
    /// GPUs asked for (int64).
    Gpus,
    /// Submission time, seconds (float64).
    SubmitS,
    /// Whether it holds GPUs (bool, one byte).
    Running,
    /// Seconds run (float64).
    ExecutedS,
    /// GPU-seconds had (float64).
    AttainedGpuS,
    /// Run time in the trace, seconds (float64, oracle).
    DurationS,
    /// Seconds of work left (float64, oracle).
    RemainingS,
}

impl Column {
    /// Every column, in [`COLUMNS`] order.
    pub const ALL: [Column; 9] = [
        Column::Id,
        Column::Tenant,
        Column::Gpus,
        Column::SubmitS,
        Column::Running,
        Column::ExecutedS,
        Column::AttainedGpuS,
        Column::DurationS,
        Column::RemainingS,
    ];

    /// The column numbered `index` in [`COLUMNS`].
    pub fn from_index(index: usize) -> Option<Column> {
        Column::ALL.get(index).copied()
    }

    /// Bytes per job: 1 for `running` (NumPy's bool), 8 for the rest (int64 or float64).
    pub fn width(self) -> usize {
        if self == Column::Running { 1 } else { 8 }
    }
}

/// Writes `column` of the jobs of `view` at `now` into `out` (`column.width()` bytes per job,
/// native byte order; the same values as [`Observation::of`]), coding tenants with `tenants`.
pub fn write_column(
    view: &SchedulerView<'_>,
    now: SimTime,
    column: Column,
    tenants: &mut TenantCodes,
    out: &mut [u8],
) {
    fn each<T: Copy>(
        view: &SchedulerView<'_>,
        out: &mut [u8],
        bytes: impl Fn(T) -> [u8; 8],
        mut value: impl FnMut(&arbiter_model::ActiveJob) -> T,
    ) {
        for (slot, job) in out.chunks_exact_mut(8).zip(view.jobs) {
            slot.copy_from_slice(&bytes(value(job)));
        }
    }
    let int = |v: i64| v.to_ne_bytes();
    let float = |v: f64| v.to_ne_bytes();
    match column {
        Column::Id => each(view, out, int, |j| i64::from(j.id.0)),
        Column::Tenant => each(view, out, int, |j| {
            tenants.code(j.id.0, &view.spec(j).tenant) as i64
        }),
        Column::Gpus => each(view, out, int, |j| i64::from(j.gpus)),
        Column::SubmitS => each(view, out, float, |j| j.submit.as_ms() as f64 / 1000.0),
        Column::Running => {
            for (slot, job) in out.iter_mut().zip(view.jobs) {
                *slot = u8::from(job.is_running());
            }
        }
        Column::ExecutedS => each(view, out, float, |j| j.executed_s_at(now)),
        Column::AttainedGpuS => each(view, out, float, |j| j.attained_gpu_s_at(now)),
        Column::DurationS => each(view, out, float, |j| view.spec(j).run_time_s),
        Column::RemainingS => each(view, out, float, |j| j.remaining_s_at(now)),
    }
}

/// Free GPUs per node as int64 bytes (native byte order): from the occupancy the engine keeps
/// when it offers one (a read per node), else from every running job's placement, as
/// [`Observation::of`] counts them.
pub fn free_gpus(view: &SchedulerView<'_>) -> Vec<u8> {
    let free: Vec<u32> = match view.current {
        Some(current) => (0..view.cluster.nodes.len())
            .map(|i| current.free.free_on(NodeId(i as u32)))
            .collect(),
        None => {
            let mut free: Vec<u32> = view.cluster.nodes.iter().map(|n| n.gpus).collect();
            for (node, gpus) in view
                .jobs
                .iter()
                .filter_map(|j| j.placement())
                .flat_map(|p| &p.slots)
            {
                if let Some(f) = free.get_mut(node.index()) {
                    *f = f.saturating_sub(*gpus);
                }
            }
            free
        }
    };
    free.iter()
        .flat_map(|&f| i64::from(f).to_ne_bytes())
        .collect()
}

/// Tenants as small integers, in the order first seen, for the `tenant` column.
#[derive(Debug, Default)]
pub struct TenantCodes {
    codes: HashMap<String, usize>,
    names: Vec<String>,
    /// Each job's code by id, once known (a job's tenant never changes): no hashing per job.
    by_job: Vec<Option<usize>>,
    /// How many of `names` the Python side already has.
    sent: usize,
}

impl TenantCodes {
    fn code(&mut self, job: u32, tenant: &str) -> usize {
        if let Some(&Some(code)) = self.by_job.get(job as usize) {
            return code;
        }
        let code = match self.codes.get(tenant) {
            Some(&code) => code,
            None => {
                let code = self.names.len();
                self.codes.insert(tenant.to_string(), code);
                self.names.push(tenant.to_string());
                code
            }
        };
        if self.by_job.len() <= job as usize {
            self.by_job.resize(job as usize + 1, None);
        }
        self.by_job[job as usize] = Some(code);
        code
    }

    /// The tenants seen since the last call, in code order.
    pub fn take_new(&mut self) -> &[String] {
        let new = &self.names[self.sent..];
        self.sent = self.names.len();
        new
    }
}

/// The bytes [`pack_columns`] writes for `jobs` jobs.
pub fn columns_len(jobs: usize) -> usize {
    8 * COLUMNS.len() * jobs
}

/// Writes the job columns of `observation` into `out` ([`columns_len`] bytes; float64, native
/// byte order, one column after another in [`COLUMNS`] order), coding tenants with `tenants`:
/// one pass over the jobs, straight into the buffer Python reads.
pub fn pack_columns(observation: &Observation<'_>, tenants: &mut TenantCodes, out: &mut [u8]) {
    let n = observation.jobs.len();
    let mut put = |column: usize, row: usize, value: f64| {
        let at = 8 * (column * n + row);
        if let Some(slot) = out.get_mut(at..at + 8) {
            slot.copy_from_slice(&value.to_ne_bytes());
        }
    };
    for (i, job) in observation.jobs.iter().enumerate() {
        put(0, i, f64::from(job.id));
        put(1, i, tenants.code(job.id, job.tenant) as f64);
        put(2, i, f64::from(job.gpus));
        put(3, i, job.submit_s);
        put(4, i, if job.running { 1.0 } else { 0.0 });
        put(5, i, job.executed_s);
        put(6, i, job.attained_gpu_s);
        put(7, i, job.duration_s);
        put(8, i, job.remaining_s);
    }
}

/// The int64 words (native byte order) of `bytes`; a trailing partial word is ignored.
fn words(bytes: &[u8]) -> impl Iterator<Item = i64> + '_ {
    bytes.chunks_exact(8).map(|chunk| {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        i64::from_ne_bytes(word)
    })
}

/// An order of job ids from int64 bytes (native byte order) into `order` (cleared first, its
/// memory reused from one decision to the next); an id no job can have is the error, as the id.
pub fn unpack_order(bytes: &[u8], order: &mut Vec<u32>) -> Result<(), i64> {
    order.clear();
    for id in words(bytes) {
        order.push(u32::try_from(id).map_err(|_| id)?);
    }
    Ok(())
}

/// Placements a Python policy answered that name what cannot exist. (What can exist but does
/// not fit — a job not active, GPUs over capacity, a wrong gang size, a node twice — is the
/// planner's to find, as for any policy.)
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlacementsError {
    /// A job id no job can have.
    #[error("its decision names job {0}, which is not waiting or running")]
    UnknownJob(i64),
    /// A node the cluster does not have.
    #[error(
        "job {job}: its placement names node {node}, which the cluster does not have (nodes 0 to {last})"
    )]
    UnknownNode {
        /// The job.
        job: u32,
        /// The node asked for.
        node: i64,
        /// The cluster's last node.
        last: usize,
    },
    /// A GPU count below one.
    #[error(
        "job {job}: its placement gives node {node} {gpus} GPUs (at least 1 on each node it names)"
    )]
    BadGpus {
        /// The job.
        job: u32,
        /// The node.
        node: u32,
        /// The GPUs asked for.
        gpus: i64,
    },
    /// Words that are not `job, k, node, gpus, ... (k pairs)` (`_policy.py` writes them).
    #[error(
        "internal error (please report it): a decision's placements end in the middle of job {0}"
    )]
    Truncated(i64),
}

/// A Python policy's placements from int64 words (native byte order): per job, its id, the
/// number k of nodes it runs on, then k (node, GPUs) pairs; on a cluster of `nodes` nodes. Each
/// job runs alone on its GPUs, in the order given (the order the planner checks them in).
pub fn unpack_placements(bytes: &[u8], nodes: usize) -> Result<Vec<Assignment>, PlacementsError> {
    let mut words = words(bytes);
    let mut run = Vec::new();
    while let Some(id) = words.next() {
        let job = u32::try_from(id).map_err(|_| PlacementsError::UnknownJob(id))?;
        let slots = words.next().ok_or(PlacementsError::Truncated(id))?;
        let mut placement = Placement::default();
        for _ in 0..slots {
            let (Some(node), Some(gpus)) = (words.next(), words.next()) else {
                return Err(PlacementsError::Truncated(id));
            };
            let node = u32::try_from(node)
                .ok()
                .filter(|&n| (n as usize) < nodes)
                .ok_or(PlacementsError::UnknownNode {
                    job,
                    node,
                    last: nodes.saturating_sub(1),
                })?;
            let gpus = u32::try_from(gpus)
                .ok()
                .filter(|&g| g > 0)
                .ok_or(PlacementsError::BadGpus { job, node, gpus })?;
            placement.slots.push((NodeId(node), gpus));
        }
        run.push(Assignment::exclusive(JobId(job), placement));
    }
    Ok(run)
}

/// Running jobs that `run` gives the GPUs they hold, listed in another node order, get their
/// placement as held: they are kept, not migrated (the planner compares placements slot by slot).
pub fn match_held(view: &SchedulerView<'_>, run: &mut [Assignment]) {
    let held: HashMap<JobId, &Placement> = view
        .jobs
        .iter()
        .filter_map(|j| Some((j.id, j.placement()?)))
        .collect();
    for a in run {
        if let Some(&placement) = held.get(&a.job)
            && *placement != a.placement
            && placement.slots.len() == a.placement.slots.len()
            && placement
                .slots
                .iter()
                .all(|slot| a.placement.slots.contains(slot))
        {
            a.placement = placement.clone();
        }
    }
}

/// Running jobs' placements: `(job, [(node, GPUs)])`.
pub type HeldPlacements = Vec<(u32, Vec<(u32, u32)>)>;

/// The placement of every running job of `view`, in view order.
pub fn held_placements(view: &SchedulerView<'_>) -> HeldPlacements {
    view.jobs
        .iter()
        .filter_map(|j| {
            Some((
                j.id.0,
                j.placement()?
                    .slots
                    .iter()
                    .map(|&(n, g)| (n.0, g))
                    .collect(),
            ))
        })
        .collect()
}

/// A decision of placements: `run` starts (or keeps) those jobs; with `preempt`, running jobs
/// it leaves out stop, else they keep their GPUs (a decision by changes).
pub fn placements_decision(run: Vec<Assignment>, preempt: bool) -> Decision {
    Decision {
        run,
        keep_unlisted: !preempt,
        ..Decision::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbiter_model::{ActiveJob, Cluster, JobSpec, Occupancy, RunState};
    use arbiter_policy::external::JobFeatures;

    fn floats(bytes: &[u8]) -> Vec<f64> {
        bytes
            .chunks_exact(8)
            .map(|c| f64::from_ne_bytes(c.try_into().expect("8 bytes")))
            .collect()
    }

    #[test]
    fn columns_come_one_after_another_with_tenants_coded_in_order_seen() {
        let job = |id, tenant| JobFeatures {
            id,
            tenant,
            gpus: 2,
            submit_s: 1.5,
            running: id == 7,
            executed_s: 3.0,
            attained_gpu_s: 6.0,
            duration_s: 10.0,
            remaining_s: 7.0,
        };
        let observation = Observation {
            time_s: 4.5,
            free_gpus: vec![3, 0],
            jobs: vec![job(7, "b"), job(9, "a"), job(11, "b")],
        };
        let mut tenants = TenantCodes::default();
        let mut packed = vec![0; columns_len(3)];
        pack_columns(&observation, &mut tenants, &mut packed);
        let columns = floats(&packed);
        assert_eq!(columns.len(), 3 * COLUMNS.len());
        assert_eq!(&columns[0..3], &[7.0, 9.0, 11.0]);
        assert_eq!(&columns[3..6], &[0.0, 1.0, 0.0]);
        assert_eq!(&columns[12..15], &[1.0, 0.0, 0.0]);
        assert_eq!(&columns[24..27], &[7.0, 7.0, 7.0]);
        assert_eq!(tenants.take_new(), ["b", "a"]);
        assert!(tenants.take_new().is_empty());
    }

    #[test]
    fn an_order_is_ids_and_an_impossible_id_is_named() {
        let mut order = vec![9, 9, 9, 9];
        assert_eq!(unpack_order(&words_of(&[3, 1, 2]), &mut order), Ok(()));
        assert_eq!(order, [3, 1, 2]);
        assert_eq!(unpack_order(&words_of(&[3, -1]), &mut order), Err(-1));
        assert_eq!(
            unpack_order(&words_of(&[1 << 40]), &mut order),
            Err(1 << 40)
        );
    }

    fn words_of(words: &[i64]) -> Vec<u8> {
        words.iter().flat_map(|i| i.to_ne_bytes()).collect()
    }

    /// Two nodes of 4 GPUs; jobs 0 (2 GPUs, running on node 1 since t=10 s), 1 (1 GPU,
    /// waiting), 2 (4 GPUs, waiting, another tenant): the view at t=50 s, without and with the
    /// engine's occupancy.
    struct Fixture {
        cluster: Cluster,
        specs: Vec<JobSpec>,
        jobs: Vec<ActiveJob>,
        occupancy: Occupancy,
        queued: Vec<u32>,
    }

    impl Fixture {
        fn new() -> Self {
            let cluster = Cluster::homogeneous(1, 2, 4, 32, 128, "V100").expect("cluster");
            let spec = |id, submit_s: u64, gpus, run_time_s, tenant: &str| JobSpec {
                tenant: tenant.into(),
                ..JobSpec::new(
                    JobId(id),
                    SimTime::from_ms(submit_s * 1000),
                    gpus,
                    run_time_s,
                )
            };
            let specs = vec![
                spec(0, 5, 2, 100.0, "a"),
                spec(1, 7, 1, 30.0, "b"),
                spec(2, 9, 4, 60.0, "a"),
            ];
            let mut jobs: Vec<ActiveJob> = specs
                .iter()
                .map(|s| ActiveJob::submitted(s.id, s.gpus, s.submit, s.run_time_s))
                .collect();
            let placement = Placement::single(NodeId(1), 2);
            jobs[0].state = RunState::Running {
                placement: placement.clone(),
                since: SimTime::from_ms(10_000),
                speed: 1.0,
            };
            jobs[0].accounted_at = SimTime::from_ms(10_000);
            let mut occupancy = Occupancy::new(&cluster);
            occupancy.allocate(&placement).expect("fits");
            // The view's order is no order: not by id.
            jobs.swap(0, 2);
            Fixture {
                cluster,
                specs,
                jobs,
                occupancy,
                queued: vec![0, 1],
            }
        }

        fn view(&self, current: bool) -> SchedulerView<'_> {
            let current = current.then_some(arbiter_policy::Current {
                free: &self.occupancy,
                queued: &self.queued,
                positions: None,
            });
            SchedulerView {
                cluster: &self.cluster,
                jobs: &self.jobs,
                specs: &self.specs,
                current,
            }
        }
    }

    #[test]
    fn each_column_has_the_observations_values_in_its_dtype() {
        let fixture = Fixture::new();
        let view = fixture.view(true);
        let now = SimTime::from_ms(50_000);
        let observation = Observation::of(&view, now);
        let mut tenants = TenantCodes::default();
        let column = |c: Column, tenants: &mut TenantCodes| {
            let mut out = vec![0xAA; c.width() * view.jobs.len()];
            write_column(&view, now, c, tenants, &mut out);
            out
        };
        let ints = |bytes: Vec<u8>| {
            bytes
                .chunks_exact(8)
                .map(|c| i64::from_ne_bytes(c.try_into().expect("8 bytes")))
                .collect::<Vec<i64>>()
        };
        let job = &observation.jobs;
        assert_eq!(
            ints(column(Column::Id, &mut tenants)),
            job.iter().map(|j| i64::from(j.id)).collect::<Vec<_>>()
        );
        assert_eq!(
            ints(column(Column::Gpus, &mut tenants)),
            job.iter().map(|j| i64::from(j.gpus)).collect::<Vec<_>>()
        );
        assert_eq!(
            column(Column::Running, &mut tenants),
            job.iter().map(|j| u8::from(j.running)).collect::<Vec<_>>()
        );
        // Tenants coded in the order met: job 2 ("a") comes first in this view.
        assert_eq!(ints(column(Column::Tenant, &mut tenants)), [0, 1, 0]);
        assert_eq!(tenants.take_new(), ["a", "b"]);
        let floats = [
            (
                Column::SubmitS,
                job.iter().map(|j| j.submit_s).collect::<Vec<_>>(),
            ),
            (
                Column::ExecutedS,
                job.iter().map(|j| j.executed_s).collect(),
            ),
            (
                Column::AttainedGpuS,
                job.iter().map(|j| j.attained_gpu_s).collect(),
            ),
            (
                Column::DurationS,
                job.iter().map(|j| j.duration_s).collect(),
            ),
            (
                Column::RemainingS,
                job.iter().map(|j| j.remaining_s).collect(),
            ),
        ];
        for (c, expected) in floats {
            let got: Vec<f64> = column(c, &mut tenants)
                .chunks_exact(8)
                .map(|b| f64::from_ne_bytes(b.try_into().expect("8 bytes")))
                .collect();
            assert_eq!(got, expected, "{c:?}");
        }
        // The running job has run 40 s on 2 GPUs.
        assert_eq!(job[2].executed_s, 40.0);
        assert_eq!(job[2].attained_gpu_s, 80.0);
        assert_eq!(Column::ALL.len(), COLUMNS.len());
        assert_eq!(Column::from_index(4), Some(Column::Running));
        assert_eq!(Column::from_index(9), None);
    }

    #[test]
    fn free_gpus_are_the_same_from_the_occupancy_and_from_the_placements() {
        let fixture = Fixture::new();
        let expected = words_of(&[4, 2]);
        assert_eq!(free_gpus(&fixture.view(true)), expected);
        assert_eq!(free_gpus(&fixture.view(false)), expected);
        assert_eq!(held_placements(&fixture.view(false)), [(0, vec![(1, 2)])]);
    }

    #[test]
    fn placements_are_read_per_job_and_what_cannot_exist_is_named() {
        let run =
            unpack_placements(&words_of(&[1, 1, 0, 1, 2, 2, 0, 2, 1, 2]), 2).expect("placements");
        assert_eq!(run.len(), 2);
        assert_eq!(
            (run[0].job, run[0].placement.to_string()),
            (JobId(1), Placement::single(NodeId(0), 1).to_string())
        );
        assert_eq!(
            run[1].placement.slots.as_slice(),
            [(NodeId(0), 2), (NodeId(1), 2)]
        );
        assert_eq!(
            unpack_placements(&words_of(&[-3, 0]), 2),
            Err(PlacementsError::UnknownJob(-3))
        );
        let unknown = unpack_placements(&words_of(&[1, 1, 2, 1]), 2).expect_err("node 2");
        assert_eq!(
            unknown.to_string(),
            "job 1: its placement names node 2, which the cluster does not have (nodes 0 to 1)"
        );
        assert_eq!(
            unpack_placements(&words_of(&[1, 1, 0, 0]), 2),
            Err(PlacementsError::BadGpus {
                job: 1,
                node: 0,
                gpus: 0
            })
        );
        assert_eq!(
            unpack_placements(&words_of(&[1, 2, 0, 1]), 2),
            Err(PlacementsError::Truncated(1))
        );
        let decision = placements_decision(run, false);
        assert!(decision.keep_unlisted && decision.pending.is_empty());
        assert!(!placements_decision(Vec::new(), true).keep_unlisted);
    }

    #[test]
    fn a_running_job_given_its_own_gpus_in_another_order_keeps_them() {
        let mut fixture = Fixture::new();
        let held = Placement {
            slots: [(NodeId(1), 1), (NodeId(0), 1)].into_iter().collect(),
        };
        fixture.jobs[2].state = RunState::Running {
            placement: held.clone(),
            since: SimTime::ZERO,
            speed: 1.0,
        };
        let mut run =
            unpack_placements(&words_of(&[0, 2, 0, 1, 1, 1, 1, 1, 0, 1]), 2).expect("placements");
        match_held(&fixture.view(false), &mut run);
        assert_eq!(run[0].placement, held);
        // Not the job's GPUs: left as answered (the planner decides what it means).
        assert_eq!(run[1].placement, Placement::single(NodeId(0), 1));
    }
}
