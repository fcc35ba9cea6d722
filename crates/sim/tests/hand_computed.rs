//! Every policy on tiny hand-made workloads whose JCTs are worked out by hand in the comments.

use arbiter_model::{
    ActiveJob, Cluster, JobId, JobSpec, NodeId, PendingReason, Placement, RunState, SimTime,
};
use arbiter_policy::SchedulerView;
use arbiter_policy::{PolicyConfig, PolicyKind, build};
use arbiter_sim::{OverheadModel, SimConfig, SimOutput, simulate};

fn job(id: u32, submit_s: u64, gpus: u32, run_s: f64) -> JobSpec {
    JobSpec::new(JobId(id), SimTime::from_ms(submit_s * 1000), gpus, run_s)
}

fn run(kind: PolicyKind, cluster: &Cluster, jobs: &[JobSpec], config: &PolicyConfig) -> SimOutput {
    let mut policy = build(kind, config).expect("policy builds");
    let sim = SimConfig {
        overhead: OverheadModel::None,
        ..SimConfig::default()
    };
    simulate(cluster, jobs, policy.as_mut(), &sim).expect("simulation runs")
}

fn jcts(out: &SimOutput) -> Vec<f64> {
    out.records
        .iter()
        .map(|r| r.jct_s().expect("finished"))
        .collect()
}

/// One node with 2 GPUs. J0: t=0, 1 GPU, 10 s. J1: t=0, 2 GPUs, 5 s (a gang that must wait).
/// J2: t=1, 1 GPU, 2 s.
fn three_jobs() -> (Cluster, Vec<JobSpec>) {
    let cluster = Cluster::homogeneous(1, 1, 2, 8, 64, "V100").expect("valid");
    (
        cluster,
        vec![job(0, 0, 1, 10.0), job(1, 0, 2, 5.0), job(2, 1, 1, 2.0)],
    )
}

#[test]
fn fifo_blocks_behind_the_waiting_gang() {
    // J0 runs 0–10. J1 needs both GPUs: waits until 10, runs 10–15. J2 is behind J1 (strict
    // FIFO), runs 15–17. JCTs 10, 15, 16.
    let (cluster, jobs) = three_jobs();
    let out = run(PolicyKind::Fifo, &cluster, &jobs, &PolicyConfig::default());
    assert_eq!(jcts(&out), vec![10.0, 15.0, 16.0]);
    assert_eq!(
        out.records[1].last_wait_reason,
        Some(PendingReason::InsufficientGpus)
    );
}

#[test]
fn fifo_backfill_lets_a_short_job_pass_without_delaying_the_head() {
    // J1's reservation is at t=10 (when J0 ends). J2 (1–3) ends before that: backfilled.
    // JCTs 10, 15, 2.
    let (cluster, jobs) = three_jobs();
    let out = run(
        PolicyKind::FifoBackfill,
        &cluster,
        &jobs,
        &PolicyConfig::default(),
    );
    assert_eq!(jcts(&out), vec![10.0, 15.0, 2.0]);
}

#[test]
fn fifo_backfill_refuses_a_job_that_would_delay_the_reservation() {
    // Same, but J2 runs 20 s: starting it at t=1 would hold a GPU past t=10 and delay J1.
    // So J1 runs 10–15 and J2 15–35. JCTs 10, 15, 34.
    let (cluster, mut jobs) = three_jobs();
    jobs[2].run_time_s = 20.0;
    let out = run(
        PolicyKind::FifoBackfill,
        &cluster,
        &jobs,
        &PolicyConfig::default(),
    );
    assert_eq!(jcts(&out), vec![10.0, 15.0, 34.0]);

    // The decision at t=1 itself says why J2 waits.
    let mut running = ActiveJob::submitted(JobId(0), 1, SimTime::ZERO, 10.0);
    running.state = RunState::Running {
        placement: Placement::single(NodeId(0), 1),
        since: SimTime::ZERO,
        speed: 1.0,
    };
    let active = vec![
        running,
        ActiveJob::submitted(JobId(1), 2, SimTime::ZERO, 5.0),
        ActiveJob::submitted(JobId(2), 1, SimTime::from_ms(1000), 20.0),
    ];
    let view = SchedulerView {
        cluster: &cluster,
        jobs: &active,
        specs: &jobs,
        current: None,
    };
    let mut policy = build(PolicyKind::FifoBackfill, &PolicyConfig::default()).expect("builds");
    let decision = policy
        .schedule(&view, SimTime::from_ms(1000))
        .expect("decides");
    assert_eq!(decision.run.len(), 1);
    assert!(
        decision
            .pending
            .contains(&(JobId(1), PendingReason::InsufficientGpus))
    );
    assert!(
        decision
            .pending
            .contains(&(JobId(2), PendingReason::WouldDelayReservation))
    );
}

#[test]
fn sjf_runs_the_shortest_waiting_job_first_without_preempting() {
    // t=0: J1 (5 s) before J0 (10 s): J1 takes both GPUs, 0–5. At 5, J2 (2 s) and J0 start
    // side by side: J2 5–7, J0 5–15. JCTs 15, 5, 6.
    let (cluster, jobs) = three_jobs();
    let out = run(PolicyKind::Sjf, &cluster, &jobs, &PolicyConfig::default());
    assert_eq!(jcts(&out), vec![15.0, 5.0, 6.0]);
}

#[test]
fn srtf_preempts_for_shorter_remaining_time() {
    // t=0: J1 (5) runs. t=1: order J2 (2), J1 (4 left), J0 (10): J2 takes a GPU, J1 no longer
    // fits and is preempted, J0 takes the other GPU. t=3: J2 done; J1 (4) before J0 (8 left):
    // J1 takes both GPUs (J0 preempted), 3–7. J0 runs 7–15. JCTs 15, 7, 2.
    let (cluster, jobs) = three_jobs();
    let out = run(PolicyKind::Srtf, &cluster, &jobs, &PolicyConfig::default());
    assert_eq!(jcts(&out), vec![15.0, 7.0, 2.0]);
    assert_eq!(out.records[1].preemptions, 1);
    assert_eq!(out.records[0].preemptions, 1);
}

#[test]
fn srsf_weighs_remaining_time_by_gpus() {
    // J0: 1 GPU × 10 s = 10 GPU-s; J1: 2 GPUs × 6 s = 12 GPU-s; both at t=0 on 2 GPUs.
    // SRSF runs J0 first (10 < 12), J1 can't fit beside it: J0 0–10, J1 10–16. JCTs 10, 16.
    // (SRTF would run J1 first: 6 < 10.)
    let cluster = Cluster::homogeneous(1, 1, 2, 8, 64, "V100").expect("valid");
    let jobs = vec![job(0, 0, 1, 10.0), job(1, 0, 2, 6.0)];
    let out = run(PolicyKind::Srsf, &cluster, &jobs, &PolicyConfig::default());
    assert_eq!(jcts(&out), vec![10.0, 16.0]);
    let out = run(PolicyKind::Srtf, &cluster, &jobs, &PolicyConfig::default());
    assert_eq!(jcts(&out), vec![16.0, 6.0]);
}

#[test]
fn las_demotes_by_attained_gpu_service_and_lets_newcomers_in() {
    // One GPU, one queue limit of 4 GPU-s. J0 (t=0, 10 s) runs; at t=4 it is demoted to Q1.
    // J1 arrives at t=2 (3 s): in Q0 it outranks nothing running in Q0 ahead of it? J0 is
    // still in Q0 at t=2 and running, and running jobs keep precedence inside a queue, so J1
    // waits. At t=4 J0 drops to Q1: J1 (Q0) preempts it, runs 4–7. J0 resumes 7–13.
    // JCTs: J0 13, J1 5.
    let cluster = Cluster::homogeneous(1, 1, 1, 8, 64, "V100").expect("valid");
    let jobs = vec![job(0, 0, 1, 10.0), job(1, 2, 1, 3.0)];
    let mut config = PolicyConfig::default();
    config.las.queue_limits_gpu_s = vec![4.0];
    config.las.queues = 2;
    let out = run(PolicyKind::Las, &cluster, &jobs, &config);
    assert_eq!(jcts(&out), vec![13.0, 5.0]);
    assert_eq!(out.records[0].preemptions, 1);
}

#[test]
fn dlas_gpu_scans_a_demoted_job_behind_the_jobs_already_waiting_in_its_new_queue() {
    // One GPU, one limit of 4 GPU-s. J0 (t=0, 10 s) runs; at t=4 it drops to Q1 and J1 (t=1,
    // 10 s, Q0) runs; at t=8 J1 drops to Q1 too. Muri's list: Q1 = [J0 (waiting), J1], so J0
    // runs 8-14 and J1 14-20: JCTs 14 and 19. Tiresias' `las` keeps the running J1 ahead of the
    // waiting J0 inside Q1: J1 runs 8-14, J0 14-20: JCTs 20 and 13.
    let cluster = Cluster::homogeneous(1, 1, 1, 8, 64, "V100").expect("valid");
    let jobs = vec![job(0, 0, 1, 10.0), job(1, 1, 1, 10.0)];
    let mut config = PolicyConfig::default();
    config.las.queue_limits_gpu_s = vec![4.0];
    config.las.queues = 2;
    assert_eq!(
        jcts(&run(PolicyKind::DlasGpu, &cluster, &jobs, &config)),
        vec![14.0, 19.0]
    );
    assert_eq!(
        jcts(&run(PolicyKind::Las, &cluster, &jobs, &config)),
        vec![20.0, 13.0]
    );
}

#[test]
fn dlas_gpu_demotes_on_its_timers_and_queues_the_demoted_job_last() {
    // One GPU, limits 4 and 100 (three queues). J0 (t=0, 10 s) runs to t=4, drops to Q1 and is
    // preempted by J1 (t=1, 3 s, Q0), which runs 4-7. J2 (t=5, 20 s) waits in Q0 behind the
    // running J1, then runs 7-11, when its timer demotes it to the tail of Q1, behind J0: J0
    // runs 11-17, J2 17-33. JCTs: J0 17, J1 6, J2 28.
    let cluster = Cluster::homogeneous(1, 1, 1, 8, 64, "V100").expect("valid");
    let jobs = vec![job(0, 0, 1, 10.0), job(1, 1, 1, 3.0), job(2, 5, 1, 20.0)];
    let mut config = PolicyConfig::default();
    config.las.queue_limits_gpu_s = vec![4.0, 100.0];
    config.las.queues = 3;
    assert_eq!(
        jcts(&run(PolicyKind::DlasGpu, &cluster, &jobs, &config)),
        vec![17.0, 6.0, 28.0]
    );
}

#[test]
fn las_counts_service_in_two_dimensions() {
    // Two GPUs, limit 4 GPU-s. J0: 2 GPUs, 10 s, t=0 — it crosses 4 GPU-s after 2 s (not 4).
    // J1: 1 GPU, 1 s, t=1 — waits (J0 holds both GPUs, still Q0 and running) until t=2, when
    // J0 is demoted and J1 preempts it: J1 2–3. J0 resumes 3–11. JCTs 11, 2.
    let cluster = Cluster::homogeneous(1, 1, 2, 8, 64, "V100").expect("valid");
    let jobs = vec![job(0, 0, 2, 10.0), job(1, 1, 1, 1.0)];
    let mut config = PolicyConfig::default();
    config.las.queue_limits_gpu_s = vec![4.0];
    config.las.queues = 2;
    let out = run(PolicyKind::Las, &cluster, &jobs, &config);
    assert_eq!(jcts(&out), vec![11.0, 2.0]);
}

#[test]
fn las_starvation_guard_promotes_a_long_waiting_job() {
    // One GPU, limit 4 GPU-s. J0 (t=0, 6 s) runs 0–4 and drops to Q1. J1 (t=1, 3 s) waited
    // behind the running J0 inside Q0 and runs 4–7. J2, J3 (t=6, 3 s each) enter Q0.
    // Without the guard: J2 7–10, J3 10–13, J0 13–15.
    // With factor 0.25: J0 (executed 4 s) is promoted back to Q0 after waiting 1 s, at t=5,
    // ahead of J2 and J3: J0 7–9, J2 9–12, J3 12–15.
    let cluster = Cluster::homogeneous(1, 1, 1, 8, 64, "V100").expect("valid");
    let jobs = vec![
        job(0, 0, 1, 6.0),
        job(1, 1, 1, 3.0),
        job(2, 6, 1, 3.0),
        job(3, 6, 1, 3.0),
    ];
    let mut config = PolicyConfig::default();
    config.las.queue_limits_gpu_s = vec![4.0];
    config.las.queues = 2;
    let without = run(PolicyKind::Las, &cluster, &jobs, &config);
    let finish = |o: &SimOutput| {
        o.records
            .iter()
            .map(|r| r.finish_s.expect("finished"))
            .collect::<Vec<_>>()
    };
    assert_eq!(finish(&without), vec![15.0, 7.0, 10.0, 13.0]);
    config.las.starvation_factor = 0.25;
    let with = run(PolicyKind::Las, &cluster, &jobs, &config);
    assert_eq!(finish(&with), vec![9.0, 7.0, 12.0, 15.0]);
}

#[test]
fn gittins_prefers_jobs_likely_to_finish_soon() {
    // Prior: most jobs are 2 GPU-s, a few 100. A job that has attained 3 GPU-s is therefore
    // likely long; a fresh job likely short. One GPU: J0 (t=0, 50 s) runs alone until J1
    // arrives at t=3 (2 s); Gittins ranks J1 higher (fresh) and preempts J0: J1 3–5.
    let cluster = Cluster::homogeneous(1, 1, 1, 8, 64, "V100").expect("valid");
    let jobs = vec![job(0, 0, 1, 50.0), job(1, 3, 1, 2.0)];
    let config = PolicyConfig {
        gittins_prior_gpu_s: vec![2.0, 2.0, 2.0, 2.0, 100.0],
        gittins: arbiter_policy::tiresias::gittins::GittinsParams {
            prior: None,
            delta_gpu_s: 2.0,
        },
        las: arbiter_policy::tiresias::las::LasConfig {
            queue_limits_gpu_s: vec![],
            queues: 1,
            starvation_factor: 0.0,
        },
        ..PolicyConfig::default()
    };
    let out = run(PolicyKind::Gittins, &cluster, &jobs, &config);
    assert_eq!(jcts(&out), vec![52.0, 2.0]);
}

#[test]
fn qssf_learns_durations_from_finished_jobs_of_the_same_tenant() {
    // Tenant "short" finishes a 1 s job first, tenant "long" a 100 s job. Later both tenants
    // submit again at t=200 while a blocker holds the only GPU; QSSF must run the "short"
    // tenant's job first although it was submitted later (same timestamp, higher id).
    let cluster = Cluster::homogeneous(1, 1, 1, 8, 64, "V100").expect("valid");
    let mut jobs = vec![
        job(0, 0, 1, 1.0),
        job(1, 1, 1, 100.0),
        job(2, 150, 1, 60.0),
        job(3, 160, 1, 100.0),
        job(4, 160, 1, 1.0),
    ];
    for (j, t) in jobs.iter_mut().zip(["short", "long", "x", "long", "short"]) {
        j.tenant = t.to_string().into();
    }
    let out = run(PolicyKind::Qssf, &cluster, &jobs, &PolicyConfig::default());
    // Blocker J2 runs 150–210. Then J4 (predicted 1 s) 210–211, J3 211–311.
    assert_eq!(out.records[4].finish_s, Some(211.0));
    assert_eq!(out.records[3].finish_s, Some(311.0));
    let fifo = run(PolicyKind::Fifo, &cluster, &jobs, &PolicyConfig::default());
    assert_eq!(fifo.records[3].finish_s, Some(310.0));
}

#[test]
fn restart_overhead_is_charged_on_every_start() {
    // With 3 s overhead, the SRTF example's J1 starts twice (t=0 and t=3): it runs 0–1 making
    // no progress (overhead 3 s not yet paid), is preempted, restarts at 3 and finishes at
    // 3 + 3 + 5 = 11.
    let (cluster, jobs) = three_jobs();
    let mut policy = build(PolicyKind::Srtf, &PolicyConfig::default()).expect("builds");
    let sim = SimConfig {
        overhead: OverheadModel::OnRestart,
        restart_overhead_s: 3.0,
        ..SimConfig::default()
    };
    let out = simulate(&cluster, &jobs, policy.as_mut(), &sim).expect("runs");
    // J2: starts at 1, finishes 1 + 3 + 2 = 6.
    assert_eq!(out.records[2].finish_s, Some(6.0));
    assert!(out.records[1].finish_s.expect("finished") >= 11.0);
}

#[test]
fn a_job_larger_than_the_cluster_is_reported_unplaceable_not_hung() {
    // Regression (issue 9, item 21): such jobs used to vanish into `unfinished`, which the
    // results table did not show.
    let cluster = Cluster::homogeneous(1, 1, 2, 8, 64, "V100").expect("valid");
    let jobs = vec![job(0, 0, 4, 1.0), job(1, 0, 1, 1.0)];
    for kind in [
        PolicyKind::Fifo,
        PolicyKind::FifoBackfill,
        PolicyKind::Srtf,
        PolicyKind::Las,
    ] {
        let out = run(kind, &cluster, &jobs, &PolicyConfig::default());
        assert_eq!(
            out.records[0].outcome,
            arbiter_sim::JobOutcome::Unplaceable,
            "{kind}"
        );
        assert_eq!(out.records[1].finish_s, Some(1.0), "{kind}");
        let summary = arbiter_sim::Summary::compute(
            &out.records,
            arbiter_sim::Window::default(),
            out.capacity_gpus,
        );
        assert_eq!(
            (summary.jobs, summary.unfinished, summary.unplaceable),
            (1, 0, 1),
            "{kind}"
        );
    }
}

#[test]
fn unplaceable_jobs_do_not_hold_a_stop_when_done_window_open() {
    // Job 0 can never run; the window (jobs 0..=1) ends when job 1 finishes, before job 2.
    let cluster = Cluster::homogeneous(1, 1, 2, 8, 64, "V100").expect("valid");
    let jobs = vec![job(0, 0, 4, 1.0), job(1, 0, 1, 1.0), job(2, 5, 1, 1.0)];
    let window = arbiter_sim::Window {
        first_job: Some(0),
        last_job: Some(1),
        stop_when_done: true,
    };
    let sim = SimConfig {
        stop_when_finished: Some(window),
        ..SimConfig::default()
    };
    let mut policy = build(PolicyKind::Fifo, &PolicyConfig::default()).expect("builds");
    let out = simulate(&cluster, &jobs, policy.as_mut(), &sim).expect("runs");
    assert_eq!(out.records[1].finish_s, Some(1.0));
    assert_eq!(
        out.records[2].outcome,
        arbiter_sim::JobOutcome::Unfinished,
        "stopped before job 2 arrived"
    );
    assert_eq!(out.records[0].outcome, arbiter_sim::JobOutcome::Unplaceable);
}

#[test]
fn malformed_jobs_are_refused_up_front() {
    let cluster = Cluster::homogeneous(1, 1, 2, 8, 64, "V100").expect("valid");
    let mut policy = build(PolicyKind::Fifo, &PolicyConfig::default()).expect("builds");
    for bad in [
        job(0, 0, 0, 1.0),
        job(0, 0, 1, f64::NAN),
        job(0, 0, 1, -1.0),
    ] {
        let err = simulate(&cluster, &[bad], policy.as_mut(), &SimConfig::default())
            .expect_err("refused");
        assert!(err.to_string().contains("job0"), "{err}");
    }
    let unsorted = vec![job(0, 5, 1, 1.0), job(1, 0, 1, 1.0)];
    assert!(simulate(&cluster, &unsorted, policy.as_mut(), &SimConfig::default()).is_err());
}

#[test]
fn failures_are_retried_then_given_up() {
    use arbiter_sim::{FailureConfig, JobOutcome};
    let cluster = Cluster::homogeneous(1, 1, 2, 8, 64, "V100").expect("valid");
    let jobs = vec![job(0, 0, 1, 100.0), job(1, 0, 1, 100.0)];
    let mut policy = build(PolicyKind::Fifo, &PolicyConfig::default()).expect("builds");
    // Every attempt fails: after the first attempt and two retries, each job is given up.
    let always = SimConfig {
        overhead: OverheadModel::None,
        failures: Some(FailureConfig {
            probability_per_attempt: 1.0,
            max_retries: 2,
        }),
        seed: 7,
        ..SimConfig::default()
    };
    let out = simulate(&cluster, &jobs, policy.as_mut(), &always).expect("runs");
    for r in &out.records {
        assert_eq!((r.outcome, r.failures), (JobOutcome::Failed, 3));
        assert!(r.finish_s.expect("ended") < 300.0);
    }
    // Half of the attempts fail: jobs that complete redid the lost work, so they held their GPU
    // at least as long as their run time.
    let half = SimConfig {
        failures: Some(FailureConfig {
            probability_per_attempt: 0.5,
            max_retries: 10,
        }),
        ..always
    };
    let out = simulate(&cluster, &jobs, policy.as_mut(), &half).expect("runs");
    for r in out
        .records
        .iter()
        .filter(|r| r.outcome == JobOutcome::Completed)
    {
        assert!(r.executed_s >= 100.0 - 1e-6);
        if r.failures > 0 {
            assert!(r.executed_s > 100.0);
        }
    }
}

#[test]
fn jobs_run_at_their_speed_on_each_gpu_type() {
    use arbiter_model::{GpuTypeId, Node, RackId};
    // Node 0 has a K80 (type 0), node 1 a V100 (type 1). A job 4× slower on the K80 placed
    // there takes 4× its reference run time.
    let node = |id: u32, t: u8| Node {
        id: NodeId(id),
        name: format!("n{id}"),
        rack: RackId(0),
        gpu_type: GpuTypeId(t),
        gpus: 1,
        cpus: 8,
        memory_gib: 64,
    };
    let cluster = Cluster::new(
        vec!["K80".into(), "V100".into()],
        vec![node(0, 0), node(1, 1)],
    )
    .expect("valid");
    let mut jobs = vec![job(0, 0, 1, 100.0), job(1, 0, 1, 100.0)];
    for j in &mut jobs {
        j.speed_by_gpu_type = vec![0.25, 1.0];
    }
    let out = run(PolicyKind::Fifo, &cluster, &jobs, &PolicyConfig::default());
    // First fit: job 0 on node 0 (K80, 400 s), job 1 on node 1 (V100, 100 s).
    assert_eq!(jcts(&out), vec![400.0, 100.0]);
    // Cost: 400 s of a K80 at $0.135/h and 100 s of a V100 at $0.74/h.
    assert!((out.records[0].cost_usd - 400.0 / 3600.0 * 0.135).abs() < 1e-12);
    assert!((out.records[1].cost_usd - 100.0 / 3600.0 * 0.74).abs() < 1e-12);
    // A job that cannot run on K80s waits for the V100.
    jobs[0].speed_by_gpu_type = vec![0.0, 1.0];
    let out = run(PolicyKind::Fifo, &cluster, &jobs, &PolicyConfig::default());
    assert_eq!(jcts(&out), vec![100.0, 400.0]);
}

/// A scripted policy for the space-sharing tests: while both jobs are active they share GPU 0
/// (job 0 at half speed, job 1 at a quarter); a job left alone gets the GPU to itself.
struct ShareWhileBoth;

impl arbiter_policy::Policy for ShareWhileBoth {
    fn name(&self) -> &'static str {
        "share-while-both"
    }

    fn schedule(
        &mut self,
        view: &SchedulerView<'_>,
        _now: SimTime,
    ) -> Result<arbiter_model::Decision, arbiter_policy::PolicyError> {
        use arbiter_model::{Assignment, Colocation, Decision};
        let gpu = Placement::single(NodeId(0), 1);
        let mut decision = Decision::default();
        match view.jobs {
            [a, b] => {
                let speed = |id: JobId| if id == JobId(0) { 0.5 } else { 0.25 };
                for (me, other) in [(a.id, b.id), (b.id, a.id)] {
                    decision.run.push(Assignment {
                        job: me,
                        placement: gpu.clone(),
                        colocation: Some(Colocation {
                            partner: other,
                            speed: speed(me),
                        }),
                        host: None,
                        guest: None,
                    });
                }
            }
            [only] => decision.run.push(Assignment::exclusive(only.id, gpu)),
            _ => {}
        }
        Ok(decision)
    }
}

#[test]
fn co_located_jobs_share_one_gpu_at_their_shared_speeds() {
    // One GPU; two 100 s jobs share it: job 0 at 0.5 finishes at 200 s, when job 1 (at 0.25)
    // has done 50 s of work; alone from then on at full speed it finishes at 250 s.
    let cluster = Cluster::homogeneous(1, 1, 1, 8, 64, "V100").expect("valid");
    let jobs = vec![job(0, 0, 1, 100.0), job(1, 0, 1, 100.0)];
    let sim = SimConfig {
        overhead: OverheadModel::None,
        ..SimConfig::default()
    };
    let out = simulate(&cluster, &jobs, &mut ShareWhileBoth, &sim).expect("simulation runs");
    assert_eq!(jcts(&out), vec![200.0, 250.0]);
    // The shared GPU counts once: half of it to each job while shared.
    assert_eq!(out.records[0].gpu_s_allocated, 100.0);
    assert_eq!(out.records[1].gpu_s_allocated, 150.0);
    assert_eq!(
        (out.records[0].colocated_s, out.records[1].colocated_s),
        (200.0, 200.0)
    );
    assert_eq!(
        out.records[1].preemptions + out.records[1].migrations,
        0,
        "keeping its GPU is not a restart"
    );
}

#[test]
fn co_location_must_be_mutual_and_on_the_same_gpus() {
    struct OneSided;
    impl arbiter_policy::Policy for OneSided {
        fn name(&self) -> &'static str {
            "one-sided"
        }
        fn schedule(
            &mut self,
            view: &SchedulerView<'_>,
            _now: SimTime,
        ) -> Result<arbiter_model::Decision, arbiter_policy::PolicyError> {
            use arbiter_model::{Assignment, Colocation, Decision};
            let gpu = Placement::single(NodeId(0), 1);
            let mut decision = Decision::default();
            decision.run.push(Assignment {
                job: view.jobs[0].id,
                placement: gpu.clone(),
                colocation: Some(Colocation {
                    partner: JobId(1),
                    speed: 0.5,
                }),
                host: None,
                guest: None,
            });
            decision.run.push(Assignment::exclusive(JobId(1), gpu));
            Ok(decision)
        }
    }
    let cluster = Cluster::homogeneous(1, 1, 1, 8, 64, "V100").expect("valid");
    let jobs = vec![job(0, 0, 1, 100.0), job(1, 0, 1, 100.0)];
    let err = simulate(&cluster, &jobs, &mut OneSided, &SimConfig::default()).expect_err("refused");
    assert!(err.to_string().contains("do not form one group"), "{err}");
}

/// A scripted policy interleaving every active job on GPU 0 as one group (Muri-style), each at
/// the group's speed: alone 1, two 0.75, three 0.5.
struct OneGroup;

impl arbiter_policy::Policy for OneGroup {
    fn name(&self) -> &'static str {
        "one-group"
    }

    fn schedule(
        &mut self,
        view: &SchedulerView<'_>,
        _now: SimTime,
    ) -> Result<arbiter_model::Decision, arbiter_policy::PolicyError> {
        use arbiter_model::{Assignment, Colocation, Decision};
        let gpu = Placement::single(NodeId(0), 1);
        let mut ids: Vec<JobId> = view.jobs.iter().map(|j| j.id).collect();
        ids.sort();
        let speed = [1.0, 1.0, 0.75, 0.5][ids.len().min(3)];
        let mut decision = Decision::default();
        for (i, &id) in ids.iter().enumerate() {
            let colocation = (ids.len() > 1).then(|| Colocation {
                partner: ids[(i + 1) % ids.len()],
                speed,
            });
            decision.run.push(Assignment {
                job: id,
                placement: gpu.clone(),
                colocation,
                host: None,
                guest: None,
            });
        }
        Ok(decision)
    }
}

#[test]
fn a_group_of_three_shares_one_gpu_and_the_rest_keeps_it_when_one_leaves() {
    // One GPU; A (10 s of work), B and C (30 s) interleave at 0.5 each: A ends at 20 s, when B and
    // C have 20 s left and go on as a pair at 0.75: 26.667 s more, ending at 46.667 s. GPU time:
    // a third each for 20 s, then half each: A 6.667, B and C 6.667 + 13.333 = 20.
    let cluster = Cluster::homogeneous(1, 1, 1, 8, 64, "V100").expect("valid");
    let jobs = vec![job(0, 0, 1, 10.0), job(1, 0, 1, 30.0), job(2, 0, 1, 30.0)];
    let sim = SimConfig {
        overhead: OverheadModel::None,
        ..SimConfig::default()
    };
    let out = simulate(&cluster, &jobs, &mut OneGroup, &sim).expect("simulation runs");
    let j = jcts(&out);
    assert_eq!(j[0], 20.0);
    assert!((j[1] - 46.667).abs() < 0.002 && j[1] == j[2], "{j:?}");
    assert!(
        (out.records[0].gpu_s_allocated - 20.0 / 3.0).abs() < 1e-6,
        "{}",
        out.records[0].gpu_s_allocated
    );
    assert!(
        (out.records[1].gpu_s_allocated - 20.0).abs() < 0.01,
        "{}",
        out.records[1].gpu_s_allocated
    );
    assert_eq!(
        out.records[1].preemptions + out.records[1].migrations,
        0,
        "staying on the GPU is not a restart"
    );
}

#[test]
fn under_per_event_overhead_a_group_member_pays_the_whole_groups_overhead() {
    // Muri's model: one GPU; A (30 s of work, 2 s overhead) and B (30 s, 3 s) interleave at 0.5
    // each from t=0; C arrives at t=10 (a scheduling point) and waits. Each pays the pair's 5 s:
    // by t=10 each is credited (10 - 5) x 0.5 = 2.5 s (not (10 - 2) x 0.5 = 4 for A), and 27.5 s
    // left at 0.5 ends both at 10 + 55 = 65 s (the end itself is predicted without overhead).
    struct PairFirstTwo;
    impl arbiter_policy::Policy for PairFirstTwo {
        fn name(&self) -> &'static str {
            "pair-first-two"
        }
        fn schedule(
            &mut self,
            view: &SchedulerView<'_>,
            _now: SimTime,
        ) -> Result<arbiter_model::Decision, arbiter_policy::PolicyError> {
            use arbiter_model::{Assignment, Colocation, Decision};
            let gpu = Placement::single(NodeId(0), 1);
            let mut ids: Vec<JobId> = view.jobs.iter().map(|j| j.id).collect();
            ids.sort();
            ids.truncate(2);
            let mut decision = Decision::default();
            for (i, &id) in ids.iter().enumerate() {
                let colocation = (ids.len() > 1).then(|| Colocation {
                    partner: ids[(i + 1) % ids.len()],
                    speed: 0.5,
                });
                decision.run.push(Assignment {
                    job: id,
                    placement: gpu.clone(),
                    colocation,
                    host: None,
                    guest: None,
                });
            }
            Ok(decision)
        }
    }
    let cluster = Cluster::homogeneous(1, 1, 1, 8, 64, "V100").expect("valid");
    let with_overhead = |id: u32, submit_s: u64, run_s: f64, overhead_s: u64| JobSpec {
        restart_overhead: Some(arbiter_model::SimDuration::from_secs(overhead_s)),
        ..job(id, submit_s, 1, run_s)
    };
    let jobs = [
        with_overhead(0, 0, 30.0, 2),
        with_overhead(1, 0, 30.0, 3),
        with_overhead(2, 10, 100.0, 1),
    ];
    let sim = SimConfig {
        overhead: OverheadModel::PerEvent,
        ..SimConfig::default()
    };
    let out = simulate(&cluster, &jobs, &mut PairFirstTwo, &sim).expect("runs");
    assert_eq!(
        (out.records[0].jct_s(), out.records[1].jct_s()),
        (Some(65.0), Some(65.0))
    );
}

/// One GPU. J0: t=0, 100 s, deadline 1000 s. J1: t=10, 20 s, deadline 50 s (soft: 60 s more
/// worth half). J2: t=20, 10 s, no deadline. EDF: J1 preempts J0 at 10 and ends at 30 (meets its
/// first deadline); J0 resumes and ends at 120 (met); J2, best effort, waits for both: 130.
#[test]
fn edf_runs_the_earliest_deadline_first_and_best_effort_last() {
    let cluster = Cluster::homogeneous(1, 1, 1, 8, 64, "V100").expect("valid");
    let mut jobs = vec![
        job(0, 0, 1, 100.0),
        job(1, 10, 1, 20.0),
        job(2, 20, 1, 10.0),
    ];
    jobs[0].deadline = Some(SimTime::from_ms(1_000_000));
    jobs[1].deadline = Some(SimTime::from_ms(50_000));
    jobs[1].deadline_options = vec![
        arbiter_model::DeadlineOption {
            deadline: SimTime::from_ms(50_000),
            value: 10.0,
        },
        arbiter_model::DeadlineOption {
            deadline: SimTime::from_ms(110_000),
            value: 5.0,
        },
    ];
    let out = run(PolicyKind::Edf, &cluster, &jobs, &PolicyConfig::default());
    assert_eq!(jcts(&out), vec![120.0, 20.0, 110.0]);
    assert_eq!(out.records[0].preemptions, 1);
    let summary = arbiter_sim::Summary::compute(&out.records, arbiter_sim::Window::default(), 1);
    assert_eq!(summary.deadlines_met, Some(1.0));
    assert_eq!(summary.deadline_value, Some(1.0));
    assert_eq!(summary.best_effort_avg_jct_s, Some(110.0));
    // Under FIFO J1 ends at 120: its second deadline (110 s) is missed too — nothing earned;
    // J0 meets its deadline: half the SLO value on average.
    let out = run(PolicyKind::Fifo, &cluster, &jobs, &PolicyConfig::default());
    let summary = arbiter_sim::Summary::compute(&out.records, arbiter_sim::Window::default(), 1);
    assert_eq!(summary.deadline_value, Some(0.5));
    assert_eq!(summary.deadlines_met, Some(0.5));
}

#[test]
fn the_timeline_records_every_stint_and_changes_no_result() {
    // SRTF on one GPU: J0 (10 s) runs 0–2, is preempted by J1 (2 s, 2–4), resumes 4–12.
    let cluster = Cluster::homogeneous(1, 1, 1, 8, 64, "V100").expect("valid");
    let jobs = vec![job(0, 0, 1, 10.0), job(1, 2, 1, 2.0)];
    let mut policy = build(PolicyKind::Srtf, &PolicyConfig::default()).expect("policy builds");
    let sim = SimConfig {
        overhead: OverheadModel::None,
        ..SimConfig::default()
    };
    let plain = simulate(&cluster, &jobs, policy.as_mut(), &sim).expect("runs");
    let mut policy = build(PolicyKind::Srtf, &PolicyConfig::default()).expect("policy builds");
    let recorded = simulate(
        &cluster,
        &jobs,
        policy.as_mut(),
        &SimConfig {
            record_timeline: true,
            ..sim
        },
    )
    .expect("runs");
    assert_eq!(plain.records, recorded.records);
    assert!(plain.timeline.is_empty());
    for r in &recorded.records {
        let mut own: Vec<_> = recorded
            .timeline
            .iter()
            .filter(|s| s.job == r.job)
            .collect();
        own.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
        // The segments add up to the job's GPU time, start at its first start, end at its finish,
        // and never overlap.
        let allocated: f64 = own.iter().map(|s| s.allocated_gpu_s()).sum();
        assert!(
            (allocated - r.gpu_s_allocated).abs() < 1e-6,
            "job {}: {allocated} vs {}",
            r.job,
            r.gpu_s_allocated
        );
        assert_eq!(own.first().map(|s| s.start_s), r.first_start_s);
        assert_eq!(own.last().map(|s| s.end_s), r.finish_s);
        assert!(own.windows(2).all(|w| w[0].end_s <= w[1].start_s));
        let executed: f64 = own.iter().map(|s| s.end_s - s.start_s).sum();
        assert!((executed - r.executed_s).abs() < 1e-6);
    }
    let stints: Vec<(u32, f64, f64)> = recorded
        .timeline
        .iter()
        .map(|s| (s.job, s.start_s, s.end_s))
        .collect();
    assert_eq!(stints, vec![(0, 0.0, 2.0), (1, 2.0, 4.0), (0, 4.0, 12.0)]);
}

#[test]
fn rounds_skip_an_idle_gap_on_their_own_grid() {
    // Rounds every 30 s; J0 at t=0 runs 10 s, J1 arrives 10⁹ s later. The rounds between see
    // nothing and are skipped (a loop turn each made this take ≈ 1.3 s); the next falls on the
    // same 30-s grid at or after J1's arrival: J1 is started by its arrival's own event, at
    // once, as before.
    let cluster = Cluster::homogeneous(1, 1, 2, 8, 64, "V100").expect("valid");
    let gap_s = 1_000_000_000;
    let jobs = vec![job(0, 0, 1, 10.0), job(1, gap_s, 1, 10.0)];
    let mut policy = build(PolicyKind::Fifo, &PolicyConfig::default()).expect("builds");
    let sim = SimConfig {
        overhead: OverheadModel::None,
        round_s: Some(30.0),
        ..SimConfig::default()
    };
    let out = simulate(&cluster, &jobs, policy.as_mut(), &sim).expect("runs");
    assert_eq!(jcts(&out), vec![10.0, 10.0]);
    assert!(out.stats.events < 20, "{} events", out.stats.events);
}
