//! Readers on the real files (bundled in `data/`, or in `../shared/traces` where present) and on
//! malformed input.

use arbiter_trace::{ReadOptions, TraceError, TraceFormat, native, read};
use std::io::Write;
use std::path::{Path, PathBuf};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// A file under `../shared/traces`. Tests that read one are ignored unless `build.rs` found it
/// (`cfg(shared_gavel_traces)`), so a missing folder shows up as
/// ignored in the summary rather than as a pass.
#[cfg_attr(not(shared_gavel_traces), allow(dead_code))]
fn shared(path: &str) -> PathBuf {
    repo("../shared/traces").join(path)
}

fn write_temp(name: &str, content: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join(name);
    let mut f = std::fs::File::create(&path).expect("create");
    f.write_all(content.as_bytes()).expect("write");
    (dir, path)
}

fn error_text(path: &Path, format: TraceFormat) -> String {
    match read(path, format, &ReadOptions::default()) {
        Ok(t) => panic!("expected an error, read {} jobs", t.jobs.len()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn philly_csv_has_every_job_with_its_virtual_cluster() {
    let trace = read(
        &repo("data/philly/philly.csv"),
        TraceFormat::Philly,
        &ReadOptions::default(),
    )
    .expect("reads");
    assert_eq!(trace.jobs.len(), 82_247);
    assert_eq!(trace.tenants().len(), 15);
    let single = trace.jobs.iter().filter(|j| j.gpus == 1).count();
    assert_eq!(single, 76_627);
    assert_eq!(
        trace.jobs.iter().filter(|j| j.tenant == "6214e9").count(),
        41_226
    );
    assert_eq!(trace.jobs[0].submit.as_ms(), 0);
    // 2017-09-04 10:30:41 is the first submission.
    assert_eq!(
        trace.origin_unix_s,
        arbiter_trace::philly::parse_timestamp("2017-09-04 10:30:41")
    );
    assert!(trace.jobs.windows(2).all(|w| w[0].submit <= w[1].submit));
}

#[test]
fn muri_times_are_milliseconds_and_work_is_iterations_times_iteration_time() {
    let options = ReadOptions {
        iteration_time_factor: Some(1.015),
        ..ReadOptions::default()
    };
    let trace = read(&repo("data/muri/trace1.csv"), TraceFormat::Muri, &options).expect("reads");
    assert_eq!(trace.jobs.len(), 1_494);
    let j0 = &trace.jobs[0];
    assert_eq!(j0.trace_id, "0");
    assert!((j0.run_time_s - 5_853_661.0 * 490.0 * 1.015 / 1000.0).abs() < 1e-6);
    assert_eq!(j0.restart_overhead.map(|d| d.as_ms()), Some(5_000)); // dqn on 1 GPU: 5 s
    // Stage times in seconds, unscaled; the iteration time scaled like the work; the trace's
    // duration column kept apart (Muri-S ranks new jobs by it).
    let stages = j0.stages.expect("resource_time_0..2");
    assert_eq!(
        (stages.io_s, stages.cpu_s, stages.gpu_s),
        (0.446, 0.008, 0.0)
    );
    assert!((j0.iteration_s.expect("iteration time") - 0.490 * 1.015).abs() < 1e-12);
    assert_eq!(j0.trace_duration_s, Some(2_868_294.0));
    let j1 = trace
        .jobs
        .iter()
        .find(|j| j.trace_id == "1")
        .expect("job 1");
    assert_eq!(j1.submit.as_ms(), 201_694_000);
    assert_eq!(j1.gpus, 8);
}

#[test]
fn tiresias_sample_trace_reads() {
    let trace = read(
        &repo("data/tiresias/60_job.csv"),
        TraceFormat::Tiresias,
        &ReadOptions::default(),
    )
    .expect("reads");
    assert_eq!(trace.jobs.len(), 60);
    assert_eq!(trace.jobs[0].run_time_s, 164.0);
    assert_eq!(trace.jobs[1].submit.as_ms(), 30_000);
    assert_eq!(trace.jobs.iter().filter(|j| j.gpus == 8).count(), 10);
}

#[test]
#[cfg_attr(not(shared_gavel_traces), ignore = "needs ../shared/traces/gavel")]
fn gavel_traces_read_in_both_row_forms() {
    let vc = shared("gavel/scheduler/traces/msr/seed=0/6214e9.trace");
    let table = repo("data/gavel/simulation_throughputs.json");
    let trace = arbiter_trace::gavel::read(&vc, Some(&table)).expect("7-column form reads");
    let sizes = |g| trace.jobs.iter().filter(|j| j.gpus == g).count();
    assert_eq!(
        (sizes(1), sizes(2), sizes(4), sizes(8)),
        (1_928, 27, 32, 13)
    );
    let physical = shared("gavel/scheduler/traces/physical_cluster/small_test.trace");
    let trace = arbiter_trace::gavel::read(&physical, Some(&table)).expect("10-column form reads");
    assert!(!trace.jobs.is_empty());
    assert_eq!(
        trace.jobs[0].model.as_deref(),
        Some("Transformer (batch size 128)")
    );
}

#[test]
fn pollux_workloads_get_speeds_from_the_profiles() {
    let workload = repo("data/pollux/workloads/workload-6.csv");
    let trace = read(&workload, TraceFormat::Pollux, &ReadOptions::default()).expect("reads");
    assert_eq!(trace.jobs.len(), 160);
    assert!(
        trace
            .jobs
            .iter()
            .all(|j| j.run_time_s > 0.0 && j.run_time_s.is_finite() && j.scaling.is_some())
    );
    // Times are the workload's own (Pollux's simulator steps from zero): the first job at 53 s.
    let first = &trace.jobs[0];
    assert_eq!(
        (first.trace_id.as_str(), first.submit.as_ms(), first.gpus),
        ("cifar10-0", 53_000, 6)
    );
    // cifar10, batch 2048 on 6 GPUs packed 4+2: local batch 342, no accumulation (total 2052);
    // step time interpolated in placements.csv's row "24" between local batches 257
    // (0.230765 s) and 363 (0.278169 s); 100 epochs of progress ÷ statistical efficiency at
    // batch 2052 = 3,338.44 step-equivalents (the artifact's functions give the same):
    // 897.30 s.
    let step: f64 = 0.230_765_056_610_107_43
        + (342.0 - 257.0) / (363.0 - 257.0) * (0.278_168_702_125_549_34 - 0.230_765_056_610_107_43);
    assert!((step - 0.268_777_4).abs() < 1e-6);
    assert!(
        (first.run_time_s - 897.298).abs() < 0.01,
        "{}",
        first.run_time_s
    );
    // Elastic from 1 GPU to 2048 / 32 (the smallest local batch measured) = 64.
    assert_eq!(
        first.elastic,
        Some(arbiter_model::GpuRange { min: 1, max: 64 })
    );
    let scaling = first.scaling.as_ref().expect("profile");
    assert_eq!(scaling.speed(&[4, 2]), Some(1.0));
    // Spread over three nodes (2+2+2, row "222") it is slower; packed on 8 GPUs faster.
    let spread = scaling.speed(&[2, 2, 2]).expect("measured");
    assert!(spread < 1.0, "{spread}");
    assert!(scaling.speed(&[4, 4]).expect("measured") > 1.0);
    // Six nodes of one GPU: not measured as a placement; interpolated over (nodes, GPUs, local
    // batch) — scalability.csv has (6 nodes, 6 GPUs) at local batches 257 and 363, so along that
    // edge the value is their linear interpolation at 342.
    let six = scaling.speed(&[1, 1, 1, 1, 1, 1]).expect("interpolated");
    let step6 = 0.216_358_971_595_764_17
        + (342.0 - 257.0) / (363.0 - 257.0) * (0.270_731_067_657_470_7 - 0.216_358_971_595_764_17);
    assert!(
        (six - step / step6).abs() < 1e-9,
        "{six} vs {}",
        step / step6
    );
    // 65 GPUs or nine per node: nothing covers it.
    assert_eq!(scaling.speed(&[9]), None);
    // NCF does not scale out under elastic policies (the artifact caps it at one GPU).
    let ncf = trace
        .jobs
        .iter()
        .find(|j| j.model.as_deref() == Some("ncf"))
        .expect("an ncf job");
    assert_eq!(ncf.elastic.map(|r| r.max), Some(1));
    // ImageNet trains far longer than CIFAR-10.
    let mean = |app: &str| {
        let v: Vec<f64> = trace
            .jobs
            .iter()
            .filter(|j| j.model.as_deref() == Some(app))
            .map(|j| j.run_time_s)
            .collect();
        v.iter().sum::<f64>() / v.len() as f64
    };
    assert!(mean("imagenet") > 10.0 * mean("cifar10"));
}

#[test]
fn a_pollux_workload_with_an_unknown_model_or_batch_names_the_row() {
    let dir = tempfile::tempdir().expect("temp dir");
    let workload = dir.path().join("w.csv");
    std::fs::write(
        &workload,
        "name,time,application,num_replicas,batch_size\nx-0,1,resnet,1,128\n",
    )
    .expect("write");
    let options = ReadOptions {
        profiles: Some(repo("data/pollux/traces")),
        ..ReadOptions::default()
    };
    let err = read(&workload, TraceFormat::Pollux, &options)
        .expect_err("unknown model")
        .to_string();
    assert!(
        err.contains("w.csv:2: application:") && err.contains("unknown Pollux model `resnet`"),
        "{err}"
    );
    std::fs::write(
        &workload,
        "name,time,application,num_replicas,batch_size\nx-0,1,cifar10,1,64\n",
    )
    .expect("write");
    let err = read(&workload, TraceFormat::Pollux, &options)
        .expect_err("batch too small")
        .to_string();
    assert!(
        err.contains("batch_size")
            && err.contains("outside cifar10's validated batch sizes 128..4096"),
        "{err}"
    );
}

#[test]
fn native_format_round_trips() {
    let options = ReadOptions {
        iteration_time_factor: Some(1.015),
        ..ReadOptions::default()
    };
    let original = read(&repo("data/muri/trace3.csv"), TraceFormat::Muri, &options).expect("reads");
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("native.csv");
    native::write(
        std::fs::File::create(&path).expect("create"),
        &original.jobs,
    )
    .expect("writes");
    let back = read(&path, TraceFormat::Native, &ReadOptions::default()).expect("reads back");
    assert_eq!(back.jobs, original.jobs);
    // Chronus' soft deadlines survive the round trip.
    let original = read(
        &repo("data/chronus/trace_job_Philly_MIX2.csv"),
        TraceFormat::Chronus,
        &ReadOptions::default(),
    )
    .expect("reads");
    let path = dir.path().join("chronus-native.csv");
    native::write(
        std::fs::File::create(&path).expect("create"),
        &original.jobs,
    )
    .expect("writes");
    let back = read(&path, TraceFormat::Native, &ReadOptions::default()).expect("reads back");
    assert!(original.jobs.iter().any(|j| j.deadline_options.len() == 4));
    assert_eq!(back.jobs, original.jobs);
}

#[test]
fn malformed_philly_rows_name_file_line_and_field() {
    let (_d, p) = write_temp(
        "bad.csv",
        "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66.0,1,66.0,vc\n2017-13-09 07:01:55,66.0,1,66.0,vc\n",
    );
    let e = error_text(&p, TraceFormat::Philly);
    assert!(
        e.ends_with("bad.csv:3: timestamp: `2017-13-09 07:01:55` is not `YYYY-MM-DD HH:MM:SS`"),
        "{e}"
    );
    let (_d, p) = write_temp(
        "bad.csv",
        "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66.0,0,66.0,vc\n",
    );
    assert!(
        error_text(&p, TraceFormat::Philly)
            .contains("bad.csv:2: num_gpus: `0` must be a whole number of GPUs >= 1")
    );
    let (_d, p) = write_temp(
        "bad.csv",
        "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,-5,1,66.0,vc\n",
    );
    assert!(
        error_text(&p, TraceFormat::Philly)
            .contains("bad.csv:2: duration: `-5` must be a finite number >= 0")
    );
    let (_d, p) = write_temp(
        "bad.csv",
        "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,abc,1,66.0,vc\n",
    );
    assert!(error_text(&p, TraceFormat::Philly).contains("bad.csv:2: duration: `abc`"));
}

#[test]
fn missing_columns_and_short_rows_are_reported() {
    let (_d, p) = write_temp(
        "m.csv",
        "job_id,num_gpu,submit_time,iterations,model_name\n0,1,0,10,dqn\n",
    );
    let e = error_text(&p, TraceFormat::Muri);
    assert!(e.contains("m.csv: missing column `iteration_time`"), "{e}");
    let (_d, p) = write_temp(
        "t.csv",
        "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,1,0\n",
    );
    let e = error_text(&p, TraceFormat::Tiresias);
    assert!(e.contains("t.csv:2: duration: missing value"), "{e}");
    let e = match read(
        Path::new("/nonexistent/x.csv"),
        TraceFormat::Native,
        &ReadOptions::default(),
    ) {
        Err(TraceError::Io { path, .. }) => path.display().to_string(),
        other => panic!("expected an I/O error, got {other:?}"),
    };
    assert_eq!(e, "/nonexistent/x.csv");
}

#[test]
fn malformed_gavel_rows_are_reported() {
    let table = repo("data/gavel/simulation_throughputs.json");
    let (_d, p) = write_temp(
        "g.trace",
        "ResNet-18 (batch size 16)\tcmd\t--n\t1\t100\t0.0\n",
    );
    let e = arbiter_trace::gavel::read(&p, Some(&table))
        .expect_err("6 fields")
        .to_string();
    assert!(
        e.contains("g.trace:1: row: expected 7 or 10 tab-separated fields, found 6"),
        "{e}"
    );
    let (_d, p) = write_temp("g.trace", "No Such Model\tcmd\t--n\t1\t100\t0.0\t1\n");
    let e = arbiter_trace::gavel::read(&p, Some(&table))
        .expect_err("unknown type")
        .to_string();
    assert!(
        e.contains("g.trace:1: job_type: `No Such Model` at scale factor 1 has no V100 throughput"),
        "{e}"
    );
    let (_d, p) = write_temp(
        "g.trace",
        "ResNet-18 (batch size 16)\tcmd\t--n\t1\tmany\t0.0\t1\n",
    );
    let e = arbiter_trace::gavel::read(&p, Some(&table))
        .expect_err("bad steps")
        .to_string();
    assert!(e.contains("g.trace:1: total_steps: `many`"), "{e}");
}

#[test]
fn native_rejects_bad_values() {
    let header = native::COLUMNS.join(",");
    let (_d, p) = write_temp("n.csv", &format!("{header}\nj1,t,,,,0,2,,-1,,,\n"));
    assert!(
        error_text(&p, TraceFormat::Native)
            .contains("n.csv:2: run_time_s: `-1` must be a finite number >= 0")
    );
    let (_d, p) = write_temp("n.csv", &format!("{header}\nj1,t,,,,0,2,,10,,high,\n"));
    assert!(error_text(&p, TraceFormat::Native).contains("n.csv:2: priority: `high`"));
}

#[test]
fn cluster_specs_read_as_racks_of_nodes() {
    let c = arbiter_trace::cluster_spec::read(&repo("data/tiresias/cluster_spec.csv"), "P100")
        .expect("reads");
    assert_eq!((c.nodes.len(), c.total_gpus(), c.rack_count()), (16, 64, 1));
    let c = arbiter_trace::cluster_spec::read(&repo("data/muri/n8g8.csv"), "V100").expect("reads");
    assert_eq!(
        (
            c.nodes.len(),
            c.total_gpus(),
            c.nodes[0].cpus,
            c.nodes[0].memory_gib
        ),
        (8, 64, 92, 520)
    );
    let (_d, p) = write_temp(
        "c.csv",
        "num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n1,8,x,92,520\n",
    );
    let e = arbiter_trace::cluster_spec::read(&p, "V100")
        .expect_err("bad")
        .to_string();
    assert!(e.contains("c.csv:2: num_gpu_p_node: `x`"), "{e}");
}

#[test]
fn side_files_read_vc_sizes_and_the_gittins_prior() {
    let sizes =
        arbiter_trace::philly::read_vc_sizes(&repo("data/philly/philly_vc.csv")).expect("reads");
    assert_eq!(sizes.len(), 11);
    assert_eq!(sizes.iter().map(|(_, n)| n).sum::<u32>(), 352);
    assert_eq!(sizes[0], ("6214e9".to_string(), 64));
    let prior =
        arbiter_trace::tiresias::read_gpu_time_prior(&repo("data/tiresias/yarn-gput10000.csv"))
            .expect("reads");
    assert_eq!(prior.len(), 9_999);
    assert_eq!(prior.iter().copied().fold(f64::INFINITY, f64::min), 121.0);
    let (_d, p) = write_temp("vc.csv", "vc,node num\na,0\n");
    let e = arbiter_trace::philly::read_vc_sizes(&p)
        .expect_err("zero nodes")
        .to_string();
    assert!(e.contains("vc.csv:2: node num: must be >= 1"), "{e}");
}

#[test]
fn gavel_generator_is_seeded_and_follows_its_distributions() {
    use arbiter_trace::generator::GavelWorkload;
    let table = arbiter_trace::gavel::ThroughputTable::read(&repo(
        "data/gavel/simulation_throughputs.json",
    ))
    .expect("reads");
    assert_eq!(table.job_types("v100").len(), 26);
    let w = GavelWorkload {
        jobs_per_hour: Some(2.0),
        jobs: 4000,
        multi_gpu: false,
        priority_weights: false,
        slos: false,
        tenants: 0,
    };
    let a = w.generate(&table, 7).expect("generates");
    assert_eq!(a, w.generate(&table, 7).expect("generates"));
    assert_ne!(a.jobs, w.generate(&table, 8).expect("generates").jobs);
    // Poisson at 2/h: 4000 jobs span about 2000 h.
    let span_h = a.submit_span().as_secs_f64() / 3600.0;
    assert!((1850.0..2150.0).contains(&span_h), "{span_h}");
    // Run times: 80% in [60·10^1.5, 60·10^3], the rest in [60·10^3, 60·10^4].
    let short = a.jobs.iter().filter(|j| j.run_time_s <= 60_000.0).count() as f64 / 4000.0;
    assert!((0.77..0.83).contains(&short), "{short}");
    assert!(
        a.jobs
            .iter()
            .all(|j| (1897.0..=600_000.0).contains(&j.run_time_s) && j.gpus == 1)
    );
    let types: std::collections::BTreeSet<_> =
        a.jobs.iter().filter_map(|j| j.model.clone()).collect();
    assert_eq!(types.len(), 26);
    // Multi-GPU sizes follow 0.70/0.10/0.15/0.05 and only use types measured at that size.
    let m = GavelWorkload {
        multi_gpu: true,
        ..w
    }
    .generate(&table, 1)
    .expect("generates");
    let share = |g| m.jobs.iter().filter(|j| j.gpus == g).count() as f64 / 4000.0;
    assert!((share(1) - 0.70).abs() < 0.03 && (share(8) - 0.05).abs() < 0.02);
    assert!(m.jobs.iter().all(|j| {
        table
            .solo("v100", j.model.as_deref().unwrap_or(""), j.gpus)
            .is_some()
    }));
    // Static workloads arrive at once.
    let s = GavelWorkload {
        jobs_per_hour: None,
        jobs: 50,
        ..w
    }
    .generate(&table, 0)
    .expect("generates");
    assert!(s.jobs.iter().all(|j| j.submit.as_ms() == 0));
}

#[test]
fn generated_slos_are_multiples_of_the_run_time() {
    use arbiter_trace::generator::GavelWorkload;
    let table = arbiter_trace::gavel::ThroughputTable::read(&repo(
        "data/gavel/simulation_throughputs.json",
    ))
    .expect("reads");
    let w = GavelWorkload {
        jobs: 300,
        slos: true,
        ..GavelWorkload::default()
    };
    let t = w.generate(&table, 3).expect("generates");
    for j in &t.jobs {
        let deadline = j.deadline.expect("every job has an SLO").as_secs_f64();
        let factor = (deadline - j.submit.as_secs_f64()) / j.run_time_s;
        assert!(
            [1.2, 2.0, 10.0].iter().any(|f| (factor - f).abs() < 1e-3),
            "{factor}"
        );
    }
}

#[test]
fn crlf_files_report_the_same_line_numbers_as_lf_files() {
    // Regression (issue 9, item 20): the bundled Muri and Tiresias traces are CRLF, and errors in
    // them named the line after the bad one.
    let header = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval";
    for eol in ["\n", "\r\n"] {
        let body = [header, "0,1,0,6,vgg,10,0", "1,1,5,6,vgg,xx,0", ""].join(eol);
        let (_d, p) = write_temp("t.csv", &body);
        let e = error_text(&p, TraceFormat::Tiresias);
        assert!(
            e.ends_with("t.csv:3: duration: `xx`: invalid float literal"),
            "{eol:?}: {e}"
        );
        // A blank line (skipped) before the bad row still counts.
        let body = [
            header,
            "0,1,0,6,vgg,10,0",
            "",
            "1,1,5,6,vgg,10,0",
            "2,0,5,6,vgg,10,0",
            "",
        ]
        .join(eol);
        let (_d, p) = write_temp("t.csv", &body);
        let e = error_text(&p, TraceFormat::Tiresias);
        assert!(e.contains("t.csv:5: num_gpu:"), "{eol:?}: {e}");
        // The line ending never leaks into a value, quoted or not.
        let body = [header, "0,1,0,6,vgg,10,\"0\"", "1,1,5,6,\"vgg\",10,0", ""].join(eol);
        let (_d, p) = write_temp("t.csv", &body);
        let trace = read(&p, TraceFormat::Tiresias, &ReadOptions::default()).expect("reads");
        assert_eq!(trace.jobs[1].model.as_deref(), Some("vgg"), "{eol:?}");
    }
}

#[test]
fn crlf_muri_trace_errors_name_the_right_line() {
    let header = "job_id,num_gpu,submit_time,iterations,model_name,batch_size,duration,interval,iteration_time";
    let body = [
        header,
        "0,1,0,6,vgg16,32,10,0,490",
        "1,1,0,6,vgg16,32,10,0,490",
        "2,1,0,6,vgg16,32,10,0,slow",
        "",
    ]
    .join("\r\n");
    let (_d, p) = write_temp("m.csv", &body);
    let e = error_text(&p, TraceFormat::Muri);
    assert!(
        e.ends_with("m.csv:4: iteration_time: `slow`: invalid float literal"),
        "{e}"
    );
}

#[test]
fn chronus_traces_carry_deadline_options_in_minutes_and_skip_zero_gpu_rows() {
    let (_dir, path) = write_temp(
        "chronus.csv",
        "job_id,user,num_gpu,submit_time,iterations,model_name,duration,interval,expect_time_list,expect_value_list,best_effort,job_type\n\
         5,vc_a,1,10,9936,alexnet,76,5,123-163-193-233,10-8-5-2,0,soft\n\
         6,vc_b,4,12,760,vgg16,100,6,235,10,0,strict\n\
         7,vc_a,0,13,1,alexnet,5,1,20,10,0,strict\n\
         8,vc_c,2,14,1,resnet101,30,1,0,0,1,best\n",
    );
    let trace = read(&path, TraceFormat::Chronus, &ReadOptions::default()).expect("reads");
    assert_eq!(trace.jobs.len(), 3);
    assert_eq!(trace.skipped, vec![(1, "asking for 0 GPUs".to_string())]);
    let soft = &trace.jobs[0];
    // Minutes to seconds; times shifted so the first submission is at 0.
    assert_eq!(
        (
            soft.trace_id.as_str(),
            soft.tenant.as_str(),
            soft.submit.as_ms(),
            soft.run_time_s
        ),
        ("5", "vc_a", 0, 76.0 * 60.0)
    );
    assert_eq!(soft.deadline.map(|d| d.as_ms()), Some(123 * 60_000));
    let options: Vec<(u64, f64)> = soft
        .deadline_options
        .iter()
        .map(|o| (o.deadline.as_ms(), o.value))
        .collect();
    assert_eq!(
        options,
        vec![
            (123 * 60_000, 10.0),
            (163 * 60_000, 8.0),
            (193 * 60_000, 5.0),
            (233 * 60_000, 2.0)
        ]
    );
    // Finishing by the second deadline earns 8 of 10.
    assert_eq!(
        soft.slo_value_at(arbiter_model::SimTime::from_ms(150 * 60_000)),
        Some(0.8)
    );
    // Restart overhead 0.5 x (1 + log2 GPUs) minutes: 30 s on one GPU, 90 s on four.
    assert_eq!(soft.restart_overhead.map(|d| d.as_ms()), Some(30_000));
    let strict = &trace.jobs[1];
    assert_eq!(strict.restart_overhead.map(|d| d.as_ms()), Some(90_000));
    assert_eq!(
        (
            strict.gpus,
            strict.deadline.map(|d| d.as_ms()),
            strict.deadline_options.len()
        ),
        (4, Some((2 + 235) * 60_000), 0)
    );
    let best = &trace.jobs[2];
    assert_eq!(
        (
            best.deadline,
            best.slo_value_at(arbiter_model::SimTime::ZERO)
        ),
        (None, None)
    );
    // Malformed options name the row and field.
    let (_dir, path) = write_temp(
        "bad.csv",
        "job_id,user,num_gpu,submit_time,iterations,model_name,duration,interval,expect_time_list,expect_value_list,best_effort,job_type\n\
         1,vc_a,1,10,1,alexnet,76,5,123-100,10-8,0,soft\n",
    );
    let err = read(&path, TraceFormat::Chronus, &ReadOptions::default())
        .expect_err("bad")
        .to_string();
    assert!(err.contains("bad.csv:2: expect_time_list"), "{err}");
}
