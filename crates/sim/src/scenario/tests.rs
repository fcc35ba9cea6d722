use super::*;

const BASE: &str = "name = \"t\"\npolicies = [\"fifo\"]\n[[trace]]\nname = \"sixty\"\nformat = \"tiresias\"\npath = \"../data/tiresias/60_job.csv\"\n";

/// A scenario parsed as if it were `scenarios/t.toml` of this repository (so that
/// `../data/...` resolves).
fn load_text(text: &str, overrides: &[&str]) -> Result<Scenario, ScenarioError> {
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/t.toml");
    Scenario::parse(text, &path, &overrides)
}

fn load_error(overrides: &[&str]) -> String {
    match load_text(BASE, overrides) {
        Ok(_) => panic!("{overrides:?} should be refused"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn set_errors_name_the_override_not_the_file() {
    let e = load_error(&["seeds=[1]", "simulation.round_s=abc"]);
    assert_eq!(
        e,
        "--set `simulation.round_s=abc`: invalid type: string \"abc\", expected f64 in `simulation.round_s`"
    );
    let e = load_error(&["trace.0.max_jobs=-1"]);
    assert!(
        e.starts_with("--set `trace.0.max_jobs=-1`: invalid value: integer `-1`"),
        "{e}"
    );
    // The file alone is broken (no `policies`): an override is blamed only for its own key.
    let no_policies = BASE.replace("policies = [\"fifo\"]\n", "");
    let e = load_text(&no_policies, &["policies=[\"las\"]", "cluster.racks=x"])
        .expect_err("bad racks")
        .to_string();
    assert!(
        e.starts_with("--set `cluster.racks=x`: invalid type: string \"x\", expected u32"),
        "{e}"
    );
    let e = load_text(&no_policies, &["seeds=[1]"])
        .expect_err("no policies")
        .to_string();
    assert!(e.ends_with("t.toml: missing field `policies`"), "{e}");
}

#[test]
fn set_with_malformed_toml_is_refused() {
    let e = load_error(&["trace.0.max_jobs=[0,1"]);
    assert!(
        e.starts_with("--set `trace.0.max_jobs=[0,1`: `[0,1` is not a valid TOML value"),
        "{e}"
    );
}

#[test]
fn set_bare_word_for_a_list_suggests_the_list() {
    let e = load_error(&["policies=las"]);
    assert!(
        e.ends_with("expected a sequence in `policies`; did you mean --set 'policies=[\"las\"]'?"),
        "{e}"
    );
    let e = load_error(&["policies=las,fifo"]);
    assert!(
        e.ends_with("did you mean --set 'policies=[\"las\", \"fifo\"]'?"),
        "{e}"
    );
}

#[test]
fn invalid_simulation_settings_are_refused_at_load_and_said_once() {
    let e = load_error(&["simulation.round_s=-5"]);
    assert_eq!(
        e,
        "--set `simulation.round_s=-5`: simulation.round_s must be > 0, got -5"
    );
    let in_file = format!("{BASE}[simulation]\nround_s = -5.0\n");
    let e = load_text(&in_file, &[])
        .expect_err("negative round")
        .to_string();
    assert!(
        e.ends_with("t.toml: simulation.round_s must be > 0, got -5"),
        "{e}"
    );
    assert_eq!(e.matches("must be > 0").count(), 1, "{e}");
}

#[test]
fn published_numbers_are_not_comparable_when_a_set_changed_the_input() {
    let text = format!(
        "{BASE}[[published]]\ntrace = \"sixty\"\npolicy = \"fifo\"\nmetric = \"avg_jct_s\"\nvalue = 100.0\n"
    );
    let rows = |scenario: &Scenario| scenario.run(&|_, _| {}, &|| 0.0).expect("runs");
    let same = load_text(
        &text,
        &["policies=[\"fifo\"]", "name=renamed", "trace.0.name=sixty"],
    )
    .expect("loads");
    let c = &same.compare(&rows(&same))[0];
    assert!(
        c.comparable && c.relative_diff.is_some() && c.not_comparable_because.is_none(),
        "{c:?}"
    );
    // Another trace added beside it leaves this one comparable; a changed cluster does not.
    let two = format!(
        "{text}[[trace]]\nname = \"other\"\nformat = \"tiresias\"\npath = \"../data/tiresias/60_job.csv\"\n"
    );
    let one = load_text(&two, &["trace.1.max_jobs=5"]).expect("loads");
    assert!(one.compare(&rows(&one))[0].comparable);
    let smaller = load_text(&two, &["cluster.nodes_per_rack=4"]).expect("loads");
    assert!(!smaller.compare(&rows(&smaller))[0].comparable);
    let fewer = load_text(&text, &["trace.0.max_jobs=10"]).expect("loads");
    let c = &fewer.compare(&rows(&fewer))[0];
    assert!(
        !c.comparable && c.ours.is_some() && c.relative_diff.is_none(),
        "{c:?}"
    );
    assert_eq!(
        c.not_comparable_because.as_deref(),
        Some("--set trace.0.max_jobs=10 changed the input")
    );
    let json = serde_json::to_value(c).expect("serializes");
    assert_eq!(json["comparable"], serde_json::json!(false));
}

#[test]
fn a_trace_that_cannot_be_read_is_refused_saying_where_its_path_led_and_why() {
    // Issue 33: `path = "data/x.csv"` in `scenarios/a.toml` is `scenarios/data/x.csv`.
    let text = BASE.replace("../data/tiresias/60_job.csv", "data/tiresias/60_job.csv");
    let scenario = load_text(&text, &[]).expect("loads");
    let e = scenario.load_traces(None).expect_err("no such file");
    let shown = e.to_string();
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    assert_eq!(
        shown,
        format!(
            "{}: cannot read trace.0.path `data/tiresias/60_job.csv` at {} (a relative path resolves against the scenario file's folder, {}, not the current directory)",
            base.join("t.toml").display(),
            base.join("data/tiresias/60_job.csv").display(),
            base.display()
        )
    );
    // What the OS said follows as the cause.
    assert!(
        std::error::Error::source(&e).is_some_and(|s| s.to_string().contains("No such file")),
        "{e:?}"
    );
    // An absolute path needs no word on folders.
    let absolute = load_text(
        &BASE.replace("../data/tiresias/60_job.csv", "/nonexistent/60_job.csv"),
        &[],
    )
    .expect("loads");
    let shown = absolute
        .load_traces(None)
        .expect_err("no such file")
        .to_string();
    assert!(
        shown.ends_with(
            "cannot read trace.0.path `/nonexistent/60_job.csv` at /nonexistent/60_job.csv"
        ),
        "{shown}"
    );
}

#[test]
fn each_published_number_says_whether_ours_is_within_its_tolerance() {
    let run = load_text(BASE, &[]).expect("loads");
    let ours = run.run(&|_, _| {}, &|| 0.0).expect("runs");
    let avg = ours[0].summary.avg_jct_s;
    // Ours exactly, ours 2.734 times over (+173.4%), and one without a tolerance.
    let published = |value: f64, tolerance: &str| {
        format!(
            "[[published]]\ntrace = \"sixty\"\npolicy = \"fifo\"\nmetric = \"avg_jct_s\"\nvalue = {value}\n{tolerance}"
        )
    };
    let text = format!(
        "{BASE}{}{}{}",
        published(avg, "tolerance = 0.05\n"),
        published(avg / 2.734, "tolerance = 0.05\n"),
        published(avg, "")
    );
    let scenario = load_text(&text, &[]).expect("loads");
    let c = scenario.compare(&ours);
    assert_eq!(
        c.iter().map(|c| c.within_tolerance).collect::<Vec<_>>(),
        [Some(true), Some(false), None]
    );
    let json = serde_json::to_value(&c).expect("serializes");
    assert_eq!(
        (
            json[0]["within_tolerance"].clone(),
            json[1]["within_tolerance"].clone()
        ),
        (serde_json::json!(true), serde_json::json!(false))
    );
    assert!(
        runner::within_tolerance(Some(-0.05), Some(0.05)).is_some_and(|w| w),
        "the bound itself is within"
    );
}

#[test]
fn jobs_too_large_for_the_cluster_are_counted_unplaceable_with_a_warning() {
    // Regression (issue 9, item 21): ten of the sixty jobs ask for 8 GPUs; on 2 nodes of 2
    // GPUs they can never run and used to vanish from the results.
    let scenario = load_text(
        BASE,
        &["cluster.nodes_per_rack=2", "cluster.gpus_per_node=2"],
    )
    .expect("loads");
    let rows = scenario.run(&|_, _| {}, &|| 0.0).expect("runs");
    let s = &rows[0].summary;
    assert_eq!(
        (s.jobs, s.unfinished, s.failed, s.unplaceable),
        (50, 0, 0, 10)
    );
    assert_eq!(
        rows[0].warnings,
        vec!["sixty: 10 of 60 jobs can never run on this cluster and are counted as unplaceable, not in the metrics: \
              10 jobs ask for more GPUs (up to 8) than the cluster has (4)".to_string()]
    );
    let json = serde_json::to_value(&rows[0]).expect("serializes");
    assert_eq!(json["unplaceable"], serde_json::json!(10));
    let fits = load_text(BASE, &[])
        .expect("loads")
        .run(&|_, _| {}, &|| 0.0)
        .expect("runs");
    assert_eq!((fits[0].summary.jobs, fits[0].summary.unplaceable), (60, 0));
    assert!(fits[0].warnings.is_empty());
}

#[test]
fn per_policy_keys_apply_to_their_policy_only() {
    let text = format!("{BASE}[policy.muri]\npacking = 3\n[policy.themis]\nfairness_knob = 0.5\n[policy.per_policy.muri-l.muri]\nautopack = true\npacking = 2\n")
        .replace("policies = [\"fifo\"]", "policies = [\"muri-s\", \"muri-l\"]");
    let scenario = load_text(&text, &[]).expect("loads");
    let s = scenario
        .policy_config_for(PolicyKind::MuriS)
        .expect("muri-s");
    let l = scenario
        .policy_config_for(PolicyKind::MuriL)
        .expect("muri-l");
    assert_eq!(
        (s.muri.packing, s.muri.autopack, s.themis.fairness_knob),
        (3, false, 0.5)
    );
    // The override replaces only the keys it names, also within a family's table; the rest of
    // [policy] still applies.
    assert_eq!(
        (l.muri.packing, l.muri.autopack, l.themis.fairness_knob),
        (2, true, 0.5)
    );
    // A --set reaches into the override too.
    let set = load_text(&text, &["policy.per_policy.muri-l.muri.packing=4"]).expect("loads");
    assert_eq!(
        set.policy_config_for(PolicyKind::MuriL)
            .expect("muri-l")
            .muri
            .packing,
        4
    );
}

#[test]
fn per_policy_mistakes_name_the_policy_and_key() {
    let bad_key = format!("{BASE}[policy.per_policy.muri-l.muri]\nautopak = true\n");
    let e = load_text(&bad_key, &[])
        .expect_err("unknown key")
        .to_string();
    assert!(
        e.contains("policy.per_policy.muri-l: unknown field `autopak`"),
        "{e}"
    );
    let bad_policy = format!("{BASE}[policy.per_policy.muri-x.muri]\nautopack = true\n");
    let e = load_text(&bad_policy, &[])
        .expect_err("unknown policy")
        .to_string();
    assert!(e.contains("unknown policy `muri-x`"), "{e}");
    let bad_value = format!("{BASE}[policy.per_policy.themis.themis]\nfairness_knob = 1.5\n");
    let e = load_text(&bad_value, &[])
        .expect_err("f out of range")
        .to_string();
    assert!(
        e.contains("policy.per_policy.themis.themis: ") && e.contains("[0, 1), got 1.5"),
        "{e}"
    );
}

#[test]
fn horus_keys_reach_the_policy_and_bad_ones_are_refused() {
    let text = format!(
        "{BASE}[policy.horus]\nlookahead = 3\nutil_limit_pct = 150\ninterference = 0.5\njob_memory_gib = 4\n"
    );
    let scenario = load_text(&text, &["policies=[\"horus\"]"]).expect("valid");
    let horus = scenario
        .policy_config_for(PolicyKind::Horus)
        .expect("config")
        .horus;
    assert_eq!(
        (
            horus.lookahead,
            horus.util_limit_pct,
            horus.interference,
            horus.job_memory_gib
        ),
        (3, 150.0, 0.5, 4.0)
    );
    assert_eq!(horus.max_jobs_per_gpu, 3, "unset keys keep their defaults");
    let e = load_error(&["policy.horus.lookahead=0"]);
    assert!(
        e.contains("policy.horus.lookahead must be at least 1"),
        "{e}"
    );
    let e = load_error(&["policy.horus.max_jobs_per_gpu=9"]);
    assert!(
        e.contains("horus.max_jobs_per_gpu 9 is not in 1..=4"),
        "{e}"
    );
    // The flat keys of earlier releases are refused with their new spelling.
    let e = load_error(&["policy.horus_lookahead=3"]);
    assert!(
        e.contains("policy.horus_lookahead is now `lookahead` in the table [policy.horus]"),
        "{e}"
    );
}

#[test]
fn tenant_rows_split_a_shared_cluster_by_tenant() {
    let text = "name = \"t\"\npolicies = [\"fifo\", \"vtc\"]\ntenant_rows = true\n[cluster]\nnodes_per_rack = 4\n[[trace]]\nname = \"philly\"\nformat = \"philly\"\npath = \"../data/philly/philly.csv\"\nmax_jobs = 300\n";
    let rows = load_text(text, &[])
        .expect("loads")
        .run(&|_, _| {}, &|| 0.0)
        .expect("runs");
    for policy in [PolicyKind::Fifo, PolicyKind::Vtc] {
        let of: Vec<&ResultRow> = rows.iter().filter(|r| r.policy == policy).collect();
        assert_eq!(of[0].tenant, "all");
        let tenants: Vec<&str> = of[1..].iter().map(|r| r.tenant.as_str()).collect();
        assert!(
            tenants.len() > 1 && tenants.windows(2).all(|w| w[0] < w[1]),
            "one row per tenant, in name order: {tenants:?}"
        );
        assert_eq!(
            of[1..].iter().map(|r| r.summary.jobs).sum::<usize>(),
            of[0].summary.jobs
        );
        assert_eq!(
            of[1..].iter().map(|r| r.records.len()).sum::<usize>(),
            of[0].records.len()
        );
        // Each tenant's utilization is its share of the cluster over the whole run: they add up.
        let tenants_util: f64 = of[1..].iter().map(|r| r.summary.gpu_utilization).sum();
        assert!(
            (tenants_util - of[0].summary.gpu_utilization).abs() < 1e-9,
            "{policy}: tenants {tenants_util} vs all {}",
            of[0].summary.gpu_utilization
        );
    }
    // Off by default: one row per simulation.
    let plain = load_text(&text.replace("tenant_rows = true\n", ""), &[])
        .expect("loads")
        .run(&|_, _| {}, &|| 0.0)
        .expect("runs");
    assert_eq!(plain.len(), 2);
}

#[test]
fn a_run_asked_to_stop_starts_no_simulation_and_says_it_stopped() {
    let scenario = load_text(BASE, &["policies=[\"fifo\", \"srtf\"]"]).expect("loads");
    let stop = crate::StopFlag::new();
    let rows = scenario
        .run_until(&|_, _| {}, &|| 0.0, &stop)
        .expect("runs");
    assert_eq!(rows.len(), 2);
    stop.raise();
    let result = scenario.run_until(&|_, _| {}, &|| 0.0, &stop);
    assert!(matches!(result, Err(ScenarioError::Stopped)), "{result:?}");
}

#[test]
fn nodes_x_gpus_is_one_rack_of_gpu_nodes() {
    let c = ClusterSpec::nodes_x_gpus("4x2").expect("parses");
    assert_eq!(
        (
            c.racks,
            c.nodes_per_rack,
            c.gpus_per_node,
            c.gpu_type.as_str()
        ),
        (1, 4, 2, "GPU")
    );
    assert_eq!(
        ClusterSpec::nodes_x_gpus("4by2").expect_err("refused"),
        "`4by2`: expected NODESxGPUS, e.g. 8x8"
    );
}

#[test]
fn an_error_names_the_key_it_is_about() {
    let key = |text: &str, overrides: &[&str]| {
        load_text(text, overrides)
            .expect_err("refused")
            .key()
            .map(str::to_string)
    };
    assert_eq!(
        key(BASE, &["simulation.round_s=abc"]).as_deref(),
        Some("simulation.round_s")
    );
    assert_eq!(
        key(BASE, &["policies=[\"nope\"]"]).as_deref(),
        Some("policies")
    );
    // The `[policy]` table is read as a whole: its errors name `policy`.
    assert_eq!(
        key(&format!("{BASE}[policy.horus]\nlookahed = 5\n"), &[]).as_deref(),
        Some("policy")
    );
    assert_eq!(
        key(&format!("{BASE}[simulation]\nround_s = -1\n"), &[]).as_deref(),
        Some("simulation.round_s")
    );
    let gittins = load_text(BASE, &["policies=[\"gittins\"]"]).expect("loads");
    assert_eq!(
        gittins
            .run(&|_, _| {}, &|| 0.0)
            .expect_err("no prior")
            .key(),
        Some("policy")
    );
}

#[test]
fn a_policy_factory_builds_every_policy_one_simulation_at_a_time() {
    let scenario =
        load_text(BASE, &["policies=[\"fifo\", \"srtf\"]", "seeds=[0, 1]"]).expect("loads");
    let plain = scenario.run(&|_, _| {}, &|| 0.0).expect("runs");
    let built = std::sync::Mutex::new(Vec::new());
    let factory = |kind: PolicyKind, config: &arbiter_policy::PolicyConfig| {
        built
            .lock()
            .expect("not poisoned")
            .push((kind, config.rounds.seed));
        arbiter_policy::build(kind, config)
    };
    let rows = scenario
        .run_with(
            &|_, _| {},
            &|| 0.0,
            &crate::StopFlag::default(),
            Some(&factory),
        )
        .expect("runs");
    assert_eq!(rows.len(), plain.len());
    for (a, b) in rows.iter().zip(&plain) {
        assert_eq!(
            (a.policy, a.seed, a.summary.avg_jct_s),
            (b.policy, b.seed, b.summary.avg_jct_s)
        );
    }
    // In task order, on this thread: each simulation's policy from the factory.
    let built = built.into_inner().expect("not poisoned");
    assert_eq!(
        built,
        [
            (PolicyKind::Fifo, 0),
            (PolicyKind::Fifo, 1),
            (PolicyKind::Srtf, 0),
            (PolicyKind::Srtf, 1)
        ]
    );
    // A factory's refusal fails the run, naming the simulation.
    let refuse = |_: PolicyKind, _: &arbiter_policy::PolicyConfig| {
        Err(arbiter_policy::PolicyError::Config("no".into()))
    };
    let error = scenario
        .run_with(
            &|_, _| {},
            &|| 0.0,
            &crate::StopFlag::default(),
            Some(&refuse),
        )
        .expect_err("refused")
        .to_string();
    assert!(error.contains("no"), "{error}");
}

#[test]
fn a_cluster_listed_node_by_node_numbers_types_and_racks_by_first_appearance() {
    let text = format!(
        "{BASE}[cluster]\ncpus_per_node = 16\n[[cluster.nodes]]\nname = \"big\"\ngpu_type = \"a100\"\ngpus = 8\ncpus = 96\nmemory_gib = 1024\n\
         [[cluster.nodes]]\nname = \"small\"\ngpu_type = \"v100\"\ngpus = 4\ncount = 2\nrack = \"r1\"\n"
    );
    let scenario = load_text(&text, &[]).expect("loads");
    let trace = Trace::default();
    let clusters = scenario.clusters_for(&trace).expect("a cluster");
    let cluster = &clusters[0].1;
    assert_eq!(cluster.gpu_type_names, ["a100", "v100"]);
    let nodes: Vec<(&str, u32, u32, u32, u32)> = cluster
        .nodes
        .iter()
        .map(|n| {
            (
                n.name.as_str(),
                n.gpu_type.0 as u32,
                n.gpus,
                n.cpus,
                n.rack.0,
            )
        })
        .collect();
    assert_eq!(
        nodes,
        [
            ("big", 0, 8, 96, 0),
            ("small-0", 1, 4, 16, 1),
            ("small-1", 1, 4, 16, 1)
        ]
    );
    // It excludes the other ways of giving a cluster, and a node has GPUs.
    let both = text.replace(
        "cpus_per_node = 16\n",
        "cpus_per_node = 16\ngpu_types = { k80 = 8 }\n",
    );
    let e = load_text(&both, &[])
        .expect("loads")
        .clusters_for(&trace)
        .expect_err("both")
        .to_string();
    assert!(e.contains("cluster.nodes excludes gpu_types"), "{e}");
    let e = load_text(&text.replace("gpus = 8", "gpus = 0"), &[])
        .expect("loads")
        .clusters_for(&trace)
        .expect_err("no GPUs")
        .to_string();
    assert!(e.contains("cluster.nodes.0"), "{e}");
}

#[test]
fn a_quota_tree_that_does_not_add_up_is_refused_at_load_naming_the_table() {
    let groups = "[[quota_groups]]\nname = \"org\"\ngpus.all.guaranteed = 4\n\
                  [[quota_groups]]\nname = \"a\"\nparent = \"org\"\ngpus.all.guaranteed = 3\n\
                  [[quota_groups]]\nname = \"b\"\nparent = \"org\"\ngpus.all.guaranteed = 3\n";
    let e = load_text(&format!("{BASE}{groups}"), &[])
        .expect_err("children above their parent")
        .to_string();
    assert!(
        e.contains("t.toml: [[quota_groups]]: quota tree does not add up")
            && e.contains("a 3 + b 3 add up to 6, above its parent `org`'s 4"),
        "{e}"
    );
    let named = "[[quota_trees.cyclic]]\nname = \"a\"\nparent = \"b\"\n\
                 [[quota_trees.cyclic]]\nname = \"b\"\nparent = \"a\"\n";
    let e = load_text(&format!("{BASE}{named}"), &[])
        .expect_err("a cycle")
        .to_string();
    assert!(
        e.contains("t.toml: [[quota_trees.cyclic]]: quota groups form a cycle"),
        "{e}"
    );
}

#[test]
fn a_value_of_the_wrong_type_is_refused_with_its_line_and_column() {
    let text = format!("{BASE}[[quota_groups]]\nname = \"a\"\ngpus.all = {{ guaranteed = -2 }}\n");
    let e = load_text(&text, &[]).expect_err("negative").to_string();
    assert!(e.contains("line 9, column 27"), "{e}");
    assert!(e.contains("expected u32"), "{e}");
}
