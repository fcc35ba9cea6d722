use super::*;
use arbiter_model::{Assignment, Cluster, NodeId, Placement, RunState};

#[test]
fn equal_share_divides_each_type_over_the_combinations_and_caps_the_row_at_one() {
    // 2 + 4 GPUs over 3 combinations of one GPU: (2/3, 4/3) sums to 2, scaled to (1/3, 2/3).
    let row = equal_share(&[2.0, 4.0], 3, 1.0);
    assert!(
        (row[0] - 1.0 / 3.0).abs() < 1e-12 && (row[1] - 2.0 / 3.0).abs() < 1e-12,
        "{row:?}"
    );
    // Over-subscribed: 10 combinations of 2 GPUs on 6 GPUs get 0.1 and 0.2 (0.3 of the time).
    let row = equal_share(&[2.0, 4.0], 10, 2.0);
    assert!(
        (row[0] - 0.1).abs() < 1e-12 && (row[1] - 0.2).abs() < 1e-12,
        "{row:?}"
    );
}

fn running(id: u32, gpus: u32, placement: Placement) -> ActiveJob {
    let mut job = ActiveJob::submitted(JobId(id), gpus, SimTime::ZERO, 1e9);
    job.state = RunState::Running {
        placement,
        since: SimTime::ZERO,
        speed: 1.0,
    };
    job
}

fn spread(slots: &[(u32, u32)]) -> Placement {
    Placement {
        slots: slots.iter().map(|&(n, g)| (NodeId(n), g)).collect(),
    }
}

#[test]
fn a_kept_job_moves_to_the_server_the_gang_leaves() {
    // Two servers of 2 GPUs, each with one kept job, and a 2-GPU job spread over both: the job on
    // server 0 moves to the GPU the gang leaves on server 1, and the gang gets server 0.
    let cluster = Cluster::homogeneous(1, 2, 2, 8, 64, "V100").expect("valid");
    let specs: Vec<JobSpec> = [1, 1, 2]
        .iter()
        .enumerate()
        .map(|(i, g)| JobSpec::new(JobId(i as u32), SimTime::ZERO, *g, 1e9))
        .collect();
    let jobs = vec![
        running(0, 1, Placement::single(NodeId(0), 1)),
        running(1, 1, Placement::single(NodeId(1), 1)),
    ];
    let view = SchedulerView {
        cluster: &cluster,
        jobs: &jobs,
        specs: &specs,
        current: None,
    };
    let mut decision = Decision::default();
    decision.run.push(Assignment::exclusive(
        JobId(0),
        Placement::single(NodeId(0), 1),
    ));
    decision.run.push(Assignment::exclusive(
        JobId(1),
        Placement::single(NodeId(1), 1),
    ));
    decision
        .run
        .push(Assignment::exclusive(JobId(2), spread(&[(0, 1), (1, 1)])));
    let moves = defrag::defragment(&view, &mut decision);
    assert_eq!(
        moves,
        defrag::Moves {
            gangs: 1,
            jobs_migrated: 1,
            leases_undone: 1
        }
    );
    assert_eq!(decision.run[2].placement, Placement::single(NodeId(0), 2));
    assert_eq!(decision.run[0].placement, Placement::single(NodeId(1), 1));
    assert_eq!(decision.run[1].placement, Placement::single(NodeId(1), 1));
}

#[test]
fn nothing_moves_when_no_server_can_be_freed() {
    // Three servers of 2 GPUs: a 2-GPU job on server 0, and two 2-GPU jobs each spread over
    // servers 1 and 2. Freeing server 0 needs a server with 2 free GPUs for its job (there are
    // only single GPUs), and servers 1 and 2 hold the other spread job, which is not moved.
    let cluster = Cluster::homogeneous(1, 3, 2, 8, 64, "V100").expect("valid");
    let specs: Vec<JobSpec> = [2, 2, 2, 3]
        .iter()
        .enumerate()
        .map(|(i, g)| JobSpec::new(JobId(i as u32), SimTime::ZERO, *g, 1e9))
        .collect();
    let across = spread(&[(1, 1), (2, 1)]);
    let jobs = vec![
        running(0, 2, Placement::single(NodeId(0), 2)),
        running(1, 2, across.clone()),
        running(2, 2, across.clone()),
    ];
    let view = SchedulerView {
        cluster: &cluster,
        jobs: &jobs,
        specs: &specs,
        current: None,
    };
    let mut decision = Decision::default();
    decision.run.push(Assignment::exclusive(
        JobId(0),
        Placement::single(NodeId(0), 2),
    ));
    decision
        .run
        .push(Assignment::exclusive(JobId(1), across.clone()));
    decision.run.push(Assignment::exclusive(JobId(2), across));
    let before = decision.clone();
    assert_eq!(
        defrag::defragment(&view, &mut decision),
        defrag::Moves::default()
    );
    assert_eq!(decision, before);
    // A 3-GPU job is larger than any server: it stays spread.
    let mut decision = Decision::default();
    decision
        .run
        .push(Assignment::exclusive(JobId(3), spread(&[(0, 2), (1, 1)])));
    let before = decision.clone();
    assert_eq!(
        defrag::defragment(&view, &mut decision),
        defrag::Moves::default()
    );
    assert_eq!(decision, before);
}

#[test]
fn a_pair_moves_as_one() {
    // Two servers of 2 GPUs: a pair sharing one GPU of server 0, a single job on server 1 and a
    // 2-GPU job spread 1 + 1. The cheapest server to free is server 1 (one job to move, against
    // two for the pair); the single job moves to server 0.
    let cluster = Cluster::homogeneous(1, 2, 2, 8, 64, "V100").expect("valid");
    let specs: Vec<JobSpec> = [1, 1, 1, 2]
        .iter()
        .enumerate()
        .map(|(i, g)| JobSpec::new(JobId(i as u32), SimTime::ZERO, *g, 1e9))
        .collect();
    let on0 = Placement::single(NodeId(0), 1);
    let jobs = vec![
        running(0, 1, on0.clone()),
        running(1, 1, on0.clone()),
        running(2, 1, Placement::single(NodeId(1), 1)),
    ];
    let view = SchedulerView {
        cluster: &cluster,
        jobs: &jobs,
        specs: &specs,
        current: None,
    };
    let mut decision = Decision::default();
    let shared = |job: u32, partner: u32| Assignment {
        job: JobId(job),
        placement: on0.clone(),
        colocation: Some(arbiter_model::Colocation {
            partner: JobId(partner),
            speed: 0.7,
        }),
        host: None,
        guest: None,
    };
    decision.run.push(shared(0, 1));
    decision.run.push(shared(1, 0));
    decision.run.push(Assignment::exclusive(
        JobId(2),
        Placement::single(NodeId(1), 1),
    ));
    decision.run.push(Assignment::exclusive(
        JobId(3),
        Placement {
            slots: [(NodeId(0), 1), (NodeId(1), 1)].into_iter().collect(),
        },
    ));
    let moves = defrag::defragment(&view, &mut decision);
    assert_eq!((moves.gangs, moves.jobs_migrated), (1, 1));
    assert_eq!(decision.run[3].placement, Placement::single(NodeId(1), 2));
    assert_eq!(decision.run[2].placement, Placement::single(NodeId(0), 1));
    assert_eq!(decision.run[0].placement, on0);
    assert_eq!(decision.run[1].placement, on0);
}
