use super::*;
use crate::production::history;
use arbiter_daemon::records::history::HistoryRecord;
use arbiter_daemon::records::job::SubmitRequest;

fn config(text: &str) -> ServeConfig {
    let config: ServeConfig = toml::from_str(text).expect("parses");
    config.validate().expect("valid");
    config
}

fn pair(
    id: &str,
    tenant: &str,
    gpus: u32,
    submit: f64,
    actual: (f64, f64),
    simulated: (f64, f64),
) -> JobPair {
    JobPair {
        trace_id: id.into(),
        tenant: tenant.into(),
        gpus,
        submit_s: submit,
        run_time_s: actual.1 - actual.0,
        actual_start_s: Some(actual.0),
        actual_end_s: Some(actual.1),
        simulated_start_s: Some(simulated.0),
        simulated_end_s: Some(simulated.1),
        simulated_busy_gpu_s: (simulated.1 - simulated.0) * f64::from(gpus),
        simulated_outcome: JobOutcome::Completed,
    }
}

#[test]
fn a_configuration_becomes_a_scenario_of_its_nodes_rounds_and_classes() {
    let c = config(
        "policy = \"las\"\ngpus = \"4xa100,2xv100\"\ncpus = 48\nmemory_gib = 384\nround_s = 20\n[[priority_classes]]\nname = \"high\"\nvalue = 100\n[[priority_classes]]\nname = \"normal\"\nvalue = 0\n",
    );
    let (nodes, described) = nodes_of_config(&c, "arbiter.toml").expect("declared GPUs");
    assert_eq!(
        described,
        "2 nodes: 4 a100 GPUs on 1, 2 v100 GPUs on 1 (gpus = \"4xa100,2xv100\", arbiter.toml)"
    );
    let scenario = scenario_of_config(
        &c,
        &nodes,
        Path::new("/tmp/hist.csv"),
        PolicyKind::Las,
        None,
        &[],
    )
    .expect("a scenario");
    let cluster = scenario
        .clusters_for(&arbiter_trace::Trace::default())
        .expect("a cluster")
        .remove(0)
        .1;
    let daemon = Topology::new(nodes).expect("valid");
    assert_eq!(
        &cluster,
        daemon.cluster(),
        "the simulator's cluster is the daemon's"
    );
    assert_eq!(scenario.simulation.round_s, Some(20.0));
    assert_eq!(
        scenario
            .priority_classes
            .iter()
            .map(|c| (c.name.as_str(), c.value))
            .collect::<Vec<_>>(),
        [("high", 100), ("normal", 0)]
    );
    let policy = scenario
        .policy_config_for(PolicyKind::Vtc)
        .expect("a config");
    assert_eq!(
        (
            policy.rounds.round_s,
            policy.rounds.recompute_interval_s,
            policy.vtc.quantum_s
        ),
        (20.0, 20.0, 20.0)
    );
    // `--set` reaches it, and a bad one names itself.
    let changed = scenario_of_config(
        &c,
        &[],
        Path::new("/tmp/hist.csv"),
        PolicyKind::Las,
        None,
        &["simulation.restart_overhead_s=30".into()],
    );
    assert!(changed.is_ok_and(|s| s.simulation.restart_overhead_s == 30.0));
    let e = scenario_of_config(
        &c,
        &[],
        Path::new("/tmp/hist.csv"),
        PolicyKind::Las,
        None,
        &["simulation.round_s=x".into()],
    )
    .expect_err("bad")
    .to_string();
    assert!(e.contains("--set `simulation.round_s=x`"), "{e}");
    // An external agent is the configuration's.
    let agent =
        config("policy = \"external\"\ngpus = \"4xa100\"\npolicy_cmd = \"python3 agent.py\"\n");
    let external = scenario_of_config(
        &agent,
        &[],
        Path::new("/tmp/hist.csv"),
        PolicyKind::External,
        None,
        &[],
    )
    .expect("a scenario");
    assert_eq!(
        external
            .policy_config_for(PolicyKind::External)
            .expect("a config")
            .external
            .map(|e| e.command),
        Some("python3 agent.py".to_string())
    );
    // Gittins takes the daemon's bundled prior when the configuration names none.
    let gittins = scenario_of_config(
        &c,
        &[],
        Path::new("/tmp/hist.csv"),
        PolicyKind::Gittins,
        None,
        &[],
    )
    .expect("a scenario");
    assert!(
        gittins
            .policy_config_for(PolicyKind::Gittins)
            .expect("a prior")
            .gittins_prior_gpu_s
            .len()
            > 1000
    );
}

#[test]
fn the_daemons_quota_tree_comes_in_from_its_export_and_a_file_without_one_is_named() {
    let c = config("gpus = \"8xa100\"\n");
    let (nodes, _) = nodes_of_config(&c, "arbiter.toml").expect("declared GPUs");
    let dir = tempfile::tempdir().expect("dir");
    let quotas = dir.path().join("quotas.toml");
    // As `arbiter quota export` writes it.
    std::fs::write(
        &quotas,
        "[[quota_groups]]\nname = \"a\"\n\n[quota_groups.gpus.a100]\nguaranteed = 4\n",
    )
    .expect("written");
    let scenario = scenario_of_config(
        &c,
        &nodes,
        Path::new("/tmp/hist.csv"),
        PolicyKind::Fifo,
        Some(&quotas),
        &[],
    )
    .expect("a scenario");
    assert_eq!(
        scenario
            .quota_groups
            .iter()
            .map(|g| (g.name.as_str(), g.gpus["a100"].guaranteed))
            .collect::<Vec<_>>(),
        [("a", 4)]
    );
    std::fs::write(&quotas, "policy = \"las\"\n").expect("written");
    let e = scenario_of_config(
        &c,
        &nodes,
        Path::new("/tmp/hist.csv"),
        PolicyKind::Fifo,
        Some(&quotas),
        &[],
    )
    .expect_err("no tree")
    .to_string();
    assert!(
        e.contains("quotas.toml") && e.contains("[[quota_groups]]"),
        "{e}"
    );
}

#[test]
fn a_configuration_without_gpus_here_says_what_to_give() {
    let c = ServeConfig {
        gpus: "auto".into(),
        ..ServeConfig::default()
    };
    if arbiter_daemon::config::detect_gpus().is_empty() {
        let e = nodes_of_config(&c, "the daemon's default configuration")
            .expect_err("no GPU here")
            .to_string();
        assert!(e.contains("--config") && e.contains("--cluster"), "{e}");
    }
    let (nodes, described) = nodes_x_gpus("2x8", "gpu").expect("valid");
    assert_eq!(
        (nodes.len(), described.as_str()),
        (2, "2 nodes: 16 gpu GPUs on 2 (--cluster 2x8)")
    );
    // Of a configuration's one GPU type, so that jobs that asked for it by name run there.
    let (nodes, described) = nodes_x_gpus("2x4", "a100").expect("valid");
    assert_eq!(one_gpu_type(&nodes).as_deref(), Some("a100"));
    assert!(described.starts_with("2 nodes: 8 a100 GPUs"), "{described}");
    assert!(nodes_x_gpus("2x0", "gpu").is_err() && nodes_x_gpus("eight", "gpu").is_err());
}

#[test]
fn classes_no_longer_configured_count_as_the_default_and_gpu_types_map_by_name() {
    let c =
        config("gpus = \"2xa100,2xv100\"\n[[priority_classes]]\nname = \"normal\"\nvalue = 5\n");
    let mut jobs = vec![
        JobSpec::new(
            arbiter_model::JobId(0),
            arbiter_model::SimTime::ZERO,
            1,
            10.0,
        ),
        JobSpec::new(
            arbiter_model::JobId(1),
            arbiter_model::SimTime::ZERO,
            1,
            10.0,
        ),
    ];
    jobs[0].class.name = Some("gone".into());
    let recorded = vec![
        Recorded {
            gpu_types: vec!["V100".into()],
            ..Recorded::default()
        },
        Recorded::default(),
    ];
    with_config(
        &mut jobs,
        &recorded,
        Some(&c),
        &["a100".into(), "v100".into()],
    )
    .expect("maps");
    assert_eq!(
        (jobs[0].class.name.as_deref(), jobs[0].class.value),
        (Some("normal"), 5)
    );
    assert_eq!(jobs[0].speed_by_gpu_type, [0.0, 1.0]);
    assert!(jobs[1].speed_by_gpu_type.is_empty(), "any type");
}

#[test]
fn the_comparison_groups_by_tenant_and_size_and_leaves_out_what_cannot_be_compared() {
    let mut pairs = vec![
        pair("1", "a", 1, 0.0, (0.0, 100.0), (0.0, 100.0)),
        pair("2", "a", 4, 10.0, (100.0, 200.0), (10.0, 110.0)),
        pair("3", "b", 1, 20.0, (30.0, 60.0), (100.0, 130.0)),
    ];
    let mut running = pair("4", "b", 1, 30.0, (200.0, 0.0), (130.0, 160.0));
    running.actual_end_s = None;
    pairs.push(running);
    let c = compare("hist.csv", "fifo", 0, "1 node", 4, pairs);
    assert_eq!(
        (c.jobs, c.compared, c.left_out.not_ended_at_export),
        (4, 3, 1)
    );
    // JCTs actual: 100, 190, 40; simulated: 100, 100, 110.
    assert_eq!(
        (c.actual.avg_jct_s, c.simulated.avg_jct_s),
        (110.0, 310.0 / 3.0)
    );
    assert_eq!((c.actual.p50_jct_s, c.simulated.p50_jct_s), (100.0, 100.0));
    assert_eq!(
        (c.actual.avg_queue_s, c.simulated.avg_queue_s),
        ((0.0 + 90.0 + 10.0) / 3.0, (0.0 + 0.0 + 80.0) / 3.0)
    );
    // Utilization: (100·1 + 100·4 + 30·1) GPU-s over 4 GPUs × 200 s; simulated over 130 s.
    assert_eq!(c.actual.gpu_utilization, 530.0 / 800.0);
    assert_eq!(c.simulated.gpu_utilization, 530.0 / 520.0);
    assert_eq!(
        c.by_tenant
            .iter()
            .map(|g| (
                g.name.as_str(),
                g.jobs,
                g.actual_avg_queue_s,
                g.simulated_avg_queue_s
            ))
            .collect::<Vec<_>>(),
        [("a", 2, 45.0, 0.0), ("b", 1, 10.0, 80.0)]
    );
    assert_eq!(
        c.by_size
            .iter()
            .map(|g| (g.name.as_str(), g.jobs))
            .collect::<Vec<_>>(),
        [("1", 2), ("2-4", 1)]
    );
    let text = text(&c);
    assert!(
        text.contains("jobs: 3 compared of 4 (1 not ended at export)"),
        "{text}"
    );
    assert!(
        text.contains("avg JCT s")
            && text.contains("-6.1%")
            && text.contains("by tenant (averages):")
            && text.contains("by GPUs (averages):"),
        "{text}"
    );
    // Deterministic: the same comparison prints the same text.
    assert_eq!(text, super::text(&c));
}

/// The first `count` jobs of Muri's trace 1 that fit 16 GPUs, as replay.rs takes them: whole
/// seconds, shortened so that they contend; over two tenants.
fn muri_jobs(count: usize) -> Vec<(String, JobSpec)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/muri/trace1.csv");
    let trace = arbiter_trace::muri::read(&path, 1.0).expect("bundled Muri trace");
    trace
        .jobs
        .into_iter()
        .filter(|j| j.gpus <= 16)
        .take(count)
        .enumerate()
        .map(|(i, mut job)| {
            job.submit = arbiter_model::SimTime::from_ms(job.submit.as_ms() / 1000 * 1000);
            job.run_time_s = (job.run_time_s / 500.0).round().max(1.0);
            (["a", "b"][i % 2].to_string(), job)
        })
        .collect()
}

/// A daemon with `config`'s policy, nodes, rounds, protection and classes, on the fake executor
/// and a virtual clock, runs `jobs`; returns its history, as `GET /v1/history` gives it (pages of
/// 16 jobs).
fn run_on_fake_daemon(
    config: &ServeConfig,
    nodes: &[NodeSpec],
    jobs: &[(String, JobSpec)],
) -> Vec<HistoryRecord> {
    run_on_fake_daemon_with_arrays(config, nodes, jobs, &[])
}

/// [`run_on_fake_daemon`], where the submissions `arrays` names (`(i, "0-7%2")`: job `i` of
/// `jobs`) are job arrays of tasks like it.
fn run_on_fake_daemon_with_arrays(
    config: &ServeConfig,
    nodes: &[NodeSpec],
    jobs: &[(String, JobSpec)],
    arrays: &[(usize, &str)],
) -> Vec<HistoryRecord> {
    let dir = tempfile::tempdir().expect("dir");
    let retention = arbiter_daemon::records::retention::Retention {
        submission_burst: u32::MAX,
        ..Default::default()
    };
    let classes = config.priority_classes().expect("classes");
    let (daemon, fake, clock) = crate::bench_daemon_scale::daemon_settings(
        dir.path(),
        config.policy_kind().expect("policy"),
        nodes.to_vec(),
        retention,
        |s| {
            s.round_s = config.round_s;
            s.min_run_s = config.min_run_s.unwrap_or(config.round_s);
            s.priority_classes = classes;
        },
    )
    .expect("a daemon");
    for tenant in ["a", "b"] {
        daemon
            .put_tenant(arbiter_daemon::records::store::Tenant {
                name: tenant.into(),
                weight: 1.0,
                gpu_quota: None,
                token_sha256: format!("token of {tenant}"),
            })
            .expect("tenant");
    }
    let t0 = arbiter_daemon::clock::Clock::now_ms(clock.as_ref());
    let at = |j: &JobSpec| t0 + j.submit.as_ms();
    let round_ms = (config.round_s * 1000.0) as u64;
    let (mut next, mut now, mut last_tick) = (0, t0, t0);
    loop {
        // The next event, as the daemon's loop meets them: an arrival, a run's end, the policy's
        // wake-up, or the round timer (a round after the last tick).
        let candidates = [
            jobs.get(next).map(|(_, j)| at(j)),
            fake.next_end_ms(),
            daemon.next_wake_ms().filter(|w| *w > now),
        ];
        let Some(t) = candidates.into_iter().flatten().min() else {
            break;
        };
        now = t.min(last_tick + round_ms);
        clock.set(now);
        while let Some((tenant, job)) = jobs
            .get(next)
            .filter(|(_, j)| at(j) == now)
            .map(|(t, j)| (t.as_str(), j))
        {
            let array = arrays.iter().find(|(i, _)| *i == next).map(|(_, a)| *a);
            let request: SubmitRequest = serde_json::from_value(serde_json::json!({
                "command": "train --secret-flag", "gpus": job.gpus, "expected_run_time_s": job.run_time_s as u64, "name": format!("job-{next}"), "array": array,
            }))
            .expect("a request");
            let submitted = daemon.submit(tenant, request).expect("accepted");
            for id in submitted.id..submitted.id + submitted.tasks.unwrap_or(1) {
                fake.set_work(id, job.run_time_s, 0);
            }
            next += 1;
        }
        fake.advance();
        daemon.tick().expect("round");
        last_tick = now;
    }
    let mut history = Vec::new();
    let mut after = None;
    loop {
        let page = daemon.history_page(after, i64::MIN, 16);
        let text = serde_json::to_string(&page).expect("JSON");
        let page: arbiter_daemon::records::history::HistoryPage =
            serde_json::from_str(&text).expect("reads back");
        history.extend(page.jobs);
        match page.next_after {
            Some(next) => after = Some(next),
            None => return history,
        }
    }
}

/// Issue 30 item 4's fidelity check: a history recorded with the fake executor, replayed under
/// the same policy and configuration, gives every job the start and end it had.
fn replays_its_own_history(policy: &str) {
    let c = config(&format!(
        "policy = \"{policy}\"\ngpus = \"16xv100\"\ncpus = 64\nmemory_gib = 512\nround_s = 30\nmin_run_s = 0\n"
    ));
    let (nodes, described) = nodes_of_config(&c, "test").expect("nodes");
    let jobs = muri_jobs(60);
    let recorded = run_on_fake_daemon(&c, &nodes, &jobs);
    let exported = history::export(&recorded);
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("hist.csv");
    let mut file = std::fs::File::create(&path).expect("create");
    exported.write(&mut file).expect("writes");
    let comparison = replay(
        &path,
        &c,
        c.policy_kind().expect("policy"),
        &nodes,
        &described,
        None,
        &[],
    )
    .expect("replays");
    assert_eq!(
        (comparison.jobs, comparison.compared),
        (60, 60),
        "{:?}",
        comparison.left_out
    );
    let waited = comparison
        .pairs
        .iter()
        .filter(|p| p.actual_start_s > Some(p.submit_s))
        .count();
    assert!(
        waited >= 10,
        "only {waited} jobs waited: the history does not contend"
    );
    let whole = |v: Option<f64>| v.map(|s| s.round() as i64);
    let differ: Vec<String> = comparison
        .pairs
        .iter()
        .filter(|p| {
            (whole(p.actual_start_s), whole(p.actual_end_s))
                != (whole(p.simulated_start_s), whole(p.simulated_end_s))
        })
        .map(|p| {
            format!(
                "job {}: actual {:?}-{:?}, simulated {:?}-{:?}",
                p.trace_id,
                p.actual_start_s,
                p.actual_end_s,
                p.simulated_start_s,
                p.simulated_end_s
            )
        })
        .collect();
    assert!(
        differ.is_empty(),
        "{policy}: {} of 60 jobs differ:\n{}",
        differ.len(),
        differ.join("\n")
    );
    assert_eq!(comparison.actual, comparison.simulated, "{policy}");
    assert!(
        !std::fs::read_to_string(&path)
            .expect("read")
            .contains("secret"),
        "no command in the history"
    );
    // The check has teeth: under another policy the same history replays otherwise.
    let other = if policy == "fifo" {
        PolicyKind::Srtf
    } else {
        PolicyKind::Fifo
    };
    let elsewise = replay(&path, &c, other, &nodes, &described, None, &[]).expect("replays");
    assert_ne!(
        elsewise.simulated, comparison.actual,
        "{other} replays {policy}'s history exactly: the comparison cannot tell policies apart"
    );
}

/// Job arrays with a running limit (`%N`) replay as the daemon ran them: the simulator holds
/// their tasks back as the daemon's rounds do. Without the limit in the history (the column
/// emptied) the same replay starts the tasks sooner: the limit is what reproduces them.
#[test]
fn arrays_with_a_running_limit_replay_job_by_job() {
    let c = config(
        "policy = \"fifo\"\ngpus = \"16xv100\"\ncpus = 64\nmemory_gib = 512\nround_s = 30\nmin_run_s = 0\n",
    );
    let (nodes, described) = nodes_of_config(&c, "test").expect("nodes");
    let mut jobs = muri_jobs(30);
    // Two arrays of one-GPU tasks, %2 and %3, on a cluster with room for more at once.
    for i in [3, 11] {
        jobs[i].1.gpus = 1;
    }
    let recorded =
        run_on_fake_daemon_with_arrays(&c, &nodes, &jobs, &[(3, "0-7%2"), (11, "0-5%3")]);
    assert_eq!(recorded.len(), 30 - 2 + 8 + 6, "every task ran");
    let exported = history::export(&recorded);
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("hist.csv");
    exported
        .write(std::fs::File::create(&path).expect("create"))
        .expect("writes");
    let replayed = |path: &std::path::Path| {
        replay(path, &c, PolicyKind::Fifo, &nodes, &described, None, &[]).expect("replays")
    };
    let comparison = replayed(&path);
    assert_eq!(comparison.compared, 42, "{:?}", comparison.left_out);
    let whole = |v: Option<f64>| v.map(|s| s.round() as i64);
    let differ = |c: &Comparison| {
        c.pairs
            .iter()
            .filter(|p| {
                (whole(p.actual_start_s), whole(p.actual_end_s))
                    != (whole(p.simulated_start_s), whole(p.simulated_end_s))
            })
            .count()
    };
    assert_eq!(differ(&comparison), 0, "every job as it ran");
    // The same history without the limits.
    let text = std::fs::read_to_string(&path).expect("read");
    let mut lines = text.lines();
    let header = lines.next().expect("header");
    let limit = header
        .split(',')
        .position(|c| c == "array_max_running")
        .expect("the limit's column");
    let unlimited: Vec<String> = std::iter::once(header.to_string())
        .chain(lines.map(|l| {
            let mut fields: Vec<&str> = l.split(',').collect();
            fields[limit] = "";
            fields.join(",")
        }))
        .collect();
    let without = dir.path().join("unlimited.csv");
    std::fs::write(&without, unlimited.join("\n")).expect("write");
    assert!(
        differ(&replayed(&without)) > 0,
        "the limit changes nothing: the test cannot tell"
    );
}

#[test]
fn fifo_replays_its_own_fake_executor_history_job_by_job() {
    replays_its_own_history("fifo");
}

#[test]
fn srtf_replays_its_own_fake_executor_history_job_by_job() {
    replays_its_own_history("srtf");
}

#[test]
fn las_replays_its_own_fake_executor_history_job_by_job() {
    replays_its_own_history("las");
}

#[test]
fn jobs_left_out_say_why_the_simulation_did_not_end_them() {
    let mut never = pair("2", "a", 1, 1.0, (1.0, 11.0), (0.0, 0.0));
    (never.simulated_start_s, never.simulated_end_s) = (None, None);
    never.simulated_outcome = JobOutcome::DependencyNeverSatisfied;
    let mut too_big = never.clone();
    too_big.simulated_outcome = JobOutcome::Unplaceable;
    let mut waiting = never.clone();
    waiting.simulated_outcome = JobOutcome::Unfinished;
    let ok = pair("1", "a", 1, 0.0, (0.0, 10.0), (0.0, 10.0));
    let c = compare(
        "h",
        "fifo",
        0,
        "1 node",
        4,
        vec![ok, never, too_big, waiting],
    );
    assert_eq!(
        (
            c.left_out.dependency_never_satisfied,
            c.left_out.unplaceable_in_simulation,
            c.left_out.unfinished_in_simulation
        ),
        (1, 1, 1)
    );
    let words = text(&c);
    assert!(
        words.contains("1 with dependencies that never hold")
            && words.contains("1 never placeable on this cluster")
            && words.contains("1 unfinished in the simulation"),
        "{words}"
    );
}
