//! An episode for a learned scheduler (the Gymnasium environment `arbiter.gym.ClusterEnv`): one
//! simulation on a thread of its own, whose policy hands each scheduling point to an agent over
//! a channel and waits for its answer. Plain Rust: the agent can be a Rust test as well as
//! Python.
//!
//! At a scheduling point the agent may try orders ([`Answer::Try`]: what would the GPUs free be
//! after starting these jobs?) before it decides ([`Answer::Decide`]). Only the jobs an order
//! lists start (Decima-style: jobs it leaves out wait), placed as the external protocol places
//! an order; running jobs keep their GPUs. Dropping the [`Episode`] abandons the simulation.

use crate::Error;
use crate::inprocess::{self, TenantCodes};
use crate::scenario::{self, Run};
use arbiter_model::{ActiveJob, Decision, JobSpec, PendingReason, SimTime};
use arbiter_policy::external::{Flowtime, Observation, decide_in_order};
use arbiter_policy::mechanisms::greedy::GreedyOptions;
use arbiter_policy::{Placing, Policy, PolicyConfig, PolicyError, PolicyKind, SchedulerView};
use arbiter_sim::StopFlag;
use arbiter_sim::scenario::Scenario;
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;

/// What the agent answers at a scheduling point.
#[derive(Debug)]
pub enum Answer {
    /// The free GPUs per node, were these jobs started (in this order).
    Try(Vec<u32>),
    /// Start these jobs (in this order) and go on to the next scheduling point.
    Decide(Vec<u32>),
}

/// What the simulation tells the agent.
#[derive(Debug)]
pub enum Point {
    /// A scheduling point: the time, the reward since the last one (−jobs in the system ×
    /// seconds), the job columns ([`inprocess::pack_columns`]), the free GPUs per node.
    View {
        time_s: f64,
        reward: f64,
        columns: Vec<u8>,
        free: Vec<u32>,
        tenants: Vec<String>,
    },
    /// The free GPUs per node after an order tried.
    Free(Vec<u32>),
    /// An order that names a job it may not (the message).
    Refused(String),
    /// The simulation ended: the reward since the last scheduling point.
    End { reward: f64 },
}

/// The policy of an episode: each scheduling point to the agent, its answer back.
struct ChannelPolicy {
    to_agent: Sender<Point>,
    from_agent: Receiver<Answer>,
    options: GreedyOptions,
    tenants: TenantCodes,
    flow: Flowtime,
}

/// The decision that starts only the jobs of `order` (the external protocol's placement, not
/// preemptive), and the free GPUs per node after it.
fn start_only(
    view: &SchedulerView<'_>,
    now: SimTime,
    options: GreedyOptions,
    order: &[u32],
    free: &[u32],
) -> Result<(Decision, Vec<u32>), String> {
    let mut decision =
        decide_in_order(view, now, options, order, false).map_err(|e| e.to_string())?;
    let listed: std::collections::HashSet<u32> = order.iter().copied().collect();
    let running: std::collections::HashSet<u32> = view
        .jobs
        .iter()
        .filter(|j| j.is_running())
        .map(|j| j.id.0)
        .collect();
    let mut free = free.to_vec();
    let mut run = Vec::with_capacity(decision.run.len());
    for assignment in std::mem::take(&mut decision.run) {
        let id = assignment.job.0;
        if running.contains(&id) {
            run.push(assignment);
        } else if listed.contains(&id) {
            for (node, gpus) in &assignment.placement.slots {
                if let Some(f) = free.get_mut(node.index()) {
                    *f = f.saturating_sub(*gpus);
                }
            }
            run.push(assignment);
        } else {
            decision
                .pending
                .push((assignment.job, PendingReason::LowerPriority));
        }
    }
    decision.run = run;
    Ok((decision, free))
}

impl Policy for ChannelPolicy {
    fn name(&self) -> &'static str {
        arbiter_policy::external::DESCRIPTOR.name
    }

    fn schedule(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> Result<Decision, PolicyError> {
        let abandoned = || PolicyError::Config("the episode was abandoned".into());
        let observation = Observation::of(view, now);
        let mut columns = vec![0; inprocess::columns_len(observation.jobs.len())];
        inprocess::pack_columns(&observation, &mut self.tenants, &mut columns);
        let reward = self.flow.point(now, view.jobs.len());
        let tenants = self.tenants.take_new().to_vec();
        let free = observation.free_gpus.clone();
        self.to_agent
            .send(Point::View {
                time_s: observation.time_s,
                reward,
                columns,
                free: free.clone(),
                tenants,
            })
            .map_err(|_| abandoned())?;
        loop {
            let (order, deciding) = match self.from_agent.recv().map_err(|_| abandoned())? {
                Answer::Try(order) => (order, false),
                Answer::Decide(order) => (order, true),
            };
            match start_only(view, now, self.options, &order, &free) {
                Ok((decision, _)) if deciding => return Ok(decision),
                Ok((_, after)) => self
                    .to_agent
                    .send(Point::Free(after))
                    .map_err(|_| abandoned())?,
                Err(message) => self
                    .to_agent
                    .send(Point::Refused(message))
                    .map_err(|_| abandoned())?,
            }
        }
    }

    fn job_finished(&mut self, _spec: &JobSpec, _job: &ActiveJob, now: SimTime) {
        self.flow.finished(now);
    }
}

impl Drop for ChannelPolicy {
    fn drop(&mut self) {
        let reward = self.flow.end().map_or(0.0, |(_, reward)| reward);
        let _ = self.to_agent.send(Point::End { reward });
    }
}

/// A running episode: the simulation's thread and the agent's ends of the channels.
#[derive(Debug)]
pub struct Episode {
    to_sim: Option<Sender<Answer>>,
    /// (In a mutex: the Python side waits for it without the GIL, from any thread.)
    from_sim: Mutex<Receiver<Point>>,
    stop: StopFlag,
    thread: Option<JoinHandle<Result<Run, Error>>>,
}

impl Episode {
    /// Starts `scenario`'s one simulation (its `policies` must be `["external"]`) under an agent.
    pub fn start(scenario: Scenario) -> Episode {
        let (to_agent, from_sim) = channel();
        let (to_sim, from_agent) = channel();
        let ends = Mutex::new(Some((to_agent, from_agent)));
        let stop = StopFlag::new();
        let thread_stop = stop.clone();
        let thread = std::thread::spawn(move || {
            let factory =
                |_: PolicyKind, config: &PolicyConfig| -> Result<Box<dyn Policy>, PolicyError> {
                    let (to_agent, from_agent) =
                        ends.lock().ok().and_then(|mut e| e.take()).ok_or_else(|| {
                            PolicyError::Config("an episode runs one simulation".into())
                        })?;
                    let placing = Placing {
                        strategy: config.placement,
                        keep_placements: config.keep_placements,
                    };
                    Ok(Box::new(ChannelPolicy {
                        to_agent,
                        from_agent,
                        options: GreedyOptions::fit_first(placing),
                        tenants: TenantCodes::default(),
                        flow: Flowtime::default(),
                    }))
                };
            scenario::run_with(scenario, false, &thread_stop, Some(&factory))
        });
        Episode {
            to_sim: Some(to_sim),
            from_sim: Mutex::new(from_sim),
            stop,
            thread: Some(thread),
        }
    }

    /// The next message of the simulation (a scheduling point, or its end).
    pub fn next(&self) -> Option<Point> {
        self.from_sim.lock().ok()?.recv().ok()
    }

    /// Sends the agent's answer; `false` if the simulation is gone.
    pub fn answer(&self, answer: Answer) -> bool {
        self.to_sim.as_ref().is_some_and(|s| s.send(answer).is_ok())
    }

    /// Waits for the simulation to end (after [`Point::End`]): its run, or why it failed.
    pub fn finish(mut self) -> Result<Run, Error> {
        let thread = self
            .thread
            .take()
            .ok_or_else(|| Error::Argument("the episode has no simulation".into()))?;
        thread
            .join()
            .map_err(|_| Error::Argument("the episode's simulation panicked".into()))?
    }
}

impl Drop for Episode {
    /// Abandons the simulation: it stops at its next step, or at once when it waits for an
    /// answer (its channel closes).
    fn drop(&mut self) {
        self.stop.raise();
        self.to_sim = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn floats(bytes: &[u8]) -> Vec<f64> {
        bytes
            .chunks_exact(8)
            .map(|c| f64::from_ne_bytes(c.try_into().expect("8 bytes")))
            .collect()
    }

    fn sixty(policy: &str) -> Scenario {
        let trace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/tiresias/60_job.csv");
        scenario::ad_hoc(&trace, "tiresias", policy, Some("2x4"), 0, "{}", &[]).expect("scenario")
    }

    /// Shortest job first, one pick at a time among the jobs that fit what is left: the
    /// built-in `sjf`'s decisions.
    #[test]
    fn an_agent_starting_the_shortest_fitting_job_one_by_one_decides_as_sjf() {
        let episode = Episode::start(sixty("external"));
        let mut total_reward = 0.0;
        loop {
            match episode.next().expect("a point") {
                Point::View {
                    reward,
                    columns,
                    free,
                    ..
                } => {
                    total_reward += reward;
                    let f = floats(&columns);
                    let n = f.len() / inprocess::COLUMNS.len();
                    let (ids, gpus, running, duration) = (
                        &f[0..n],
                        &f[2 * n..3 * n],
                        &f[4 * n..5 * n],
                        &f[7 * n..8 * n],
                    );
                    let mut waiting: Vec<usize> = (0..n).filter(|&i| running[i] == 0.0).collect();
                    waiting.sort_by(|&a, &b| {
                        duration[a]
                            .total_cmp(&duration[b])
                            .then(ids[a].total_cmp(&ids[b]))
                    });
                    let mut order = Vec::new();
                    let mut left: u32 = free.iter().sum();
                    for i in waiting {
                        if gpus[i] as u32 <= left {
                            order.push(ids[i] as u32);
                            assert!(episode.answer(Answer::Try(order.clone())));
                            let Some(Point::Free(after)) = episode.next() else {
                                panic!("free GPUs")
                            };
                            left = after.iter().sum();
                        }
                    }
                    assert!(episode.answer(Answer::Decide(order)));
                }
                Point::End { reward } => {
                    total_reward += reward;
                    break;
                }
                other => panic!("{other:?}"),
            }
        }
        let ours = episode.finish().expect("runs");
        let sjf = scenario::run(sixty("sjf"), false, &StopFlag::default()).expect("runs");
        assert_eq!(
            ours.rows[0].summary.avg_jct_s,
            sjf.rows[0].summary.avg_jct_s
        );
        let total_jct = sjf.rows[0].summary.avg_jct_s * sjf.rows[0].summary.jobs as f64;
        assert!(
            (-total_reward - total_jct).abs() < 1e-6 * total_jct,
            "return {total_reward} vs Σ JCT {total_jct}"
        );
    }

    #[test]
    fn a_bad_order_is_refused_and_an_abandoned_episode_ends() {
        let episode = Episode::start(sixty("external"));
        assert!(matches!(episode.next(), Some(Point::View { .. })));
        assert!(episode.answer(Answer::Try(vec![123_456])));
        let Some(Point::Refused(message)) = episode.next() else {
            panic!("refused")
        };
        assert!(message.contains("123456"), "{message}");
        drop(episode);
    }
}
