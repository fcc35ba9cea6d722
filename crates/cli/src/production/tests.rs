use super::*;

fn environment(
    pairs: &[(&str, &str)],
) -> impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)> {
    pairs
        .iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect::<Vec<_>>()
        .into_iter()
}

const SHELL: [(&str, &str); 6] = [
    ("PATH", "/bin"),
    ("HOME", "/home/u"),
    ("ARBITER_TOKEN", "secret"),
    ("ARBITER_URL", "http://x"),
    ("CUDA_VISIBLE_DEVICES", "3"),
    ("CUDA_DEVICE_ORDER", "FASTEST_FIRST"),
];

#[test]
fn export_all_passes_the_environment_minus_the_variables_arbiter_owns() {
    let env = job_env(
        "ALL",
        &["EXTRA=1".into(), "HOME=/elsewhere".into()],
        environment(&SHELL),
    )
    .expect("valid");
    let keys: Vec<&str> = env.keys().map(String::as_str).collect();
    assert_eq!(keys, vec!["EXTRA", "HOME", "PATH"]);
    assert_eq!(env["HOME"], "/elsewhere", "--env overrides the export");
}

#[test]
fn export_none_and_lists_pass_only_what_is_named() {
    assert!(
        job_env("NONE", &[], environment(&SHELL))
            .expect("valid")
            .is_empty()
    );
    let env = job_env("PATH,MISSING,MODE=fast", &[], environment(&SHELL)).expect("valid");
    assert_eq!(
        env.into_iter().collect::<Vec<_>>(),
        vec![
            ("MODE".to_string(), "fast".to_string()),
            ("PATH".to_string(), "/bin".to_string())
        ]
    );
}

#[test]
fn variables_arbiter_owns_are_refused_in_env_and_export_lists() {
    for bad in [
        "ARBITER_JOB_ID=1",
        "CUDA_VISIBLE_DEVICES=0",
        "CUDA_DEVICE_ORDER=PCI_BUS_ID",
    ] {
        let e = job_env("NONE", &[bad.into()], environment(&[]))
            .expect_err("refused")
            .to_string();
        assert!(
            e.contains("Arbiter sets") && e.contains(bad.split('=').next().unwrap_or("")),
            "{e}"
        );
    }
    assert!(job_env("ARBITER_TOKEN", &[], environment(&SHELL)).is_err());
    assert!(
        job_env("NONE", &["NOEQUALS".into()], environment(&[]))
            .expect_err("refused")
            .to_string()
            .contains("KEY=VALUE")
    );
}

#[test]
fn long_commands_are_cut_at_a_word_boundary() {
    assert_eq!(cut_words("python train.py", 40), "python train.py");
    assert_eq!(
        cut_words("python train.py --epochs 10 --learning-rate 0.001", 30),
        "python train.py --epochs 10…"
    );
    assert!(
        cut_words("python train.py --epochs 10 --learning-rate 0.001", 30)
            .chars()
            .count()
            <= 30
    );
    assert_eq!(
        cut_words("a\n  multi-line\tscript", 40),
        "a multi-line script"
    );
    assert_eq!(cut_words("averyveryverylongsingleword", 10), "averyvery…");
}

#[test]
fn terminal_escapes_in_tenant_text_are_shown_escaped() {
    let shown = printable("job\u{1b}]52;c;ZXZpbA==\u{7}\u{1b}[1A\u{1b}[2Kok\nnext");
    assert!(
        !shown.contains('\u{1b}') && !shown.contains('\u{7}'),
        "{shown:?}"
    );
    assert!(
        shown.contains("\\u{1b}") && shown.ends_with("ok\nnext"),
        "{shown:?}"
    );
    // Separators and direction controls too (a record stored before names refused them).
    let shown = printable("a\u{2028}b\u{202e}c\u{61c}d");
    assert_eq!(shown, "a\\u{2028}b\\u{202e}c\\u{61c}d");
}

#[test]
fn unix_seconds_format_as_utc() {
    assert_eq!(utc(0), "1970-01-01 00:00:00");
    assert_eq!(utc(951_782_400), "2000-02-29 00:00:00");
    assert_eq!(utc(1_700_000_000), "2023-11-14 22:13:20");
}

#[test]
fn queued_jobs_show_their_reason_and_others_do_not() {
    let jobs = vec![
        json!({ "id": 0, "tenant": "t", "state": { "state": "cancelled" }, "request": { "gpus": 2, "command": "sleep 1", "name": "old" }, "pending_reason": "stale" }),
        json!({ "id": 1, "tenant": "t", "state": { "state": "running", "gpus": [2, 3] }, "request": { "gpus": 2, "command": "sleep 2" } }),
        json!({ "id": 2, "tenant": "t", "state": { "state": "queued" }, "request": { "gpus": 4, "command": "sleep 3" }, "pending_reason": "no free GPUs" }),
    ];
    let table = jobs_table(&jobs, false);
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].contains("gpus") && lines[0].contains(" on ") && lines[0].contains("name"),
        "{table}"
    );
    assert!(!lines[1].contains("stale"), "{table}");
    assert!(lines[2].contains("   2 2,3"), "{table}");
    assert!(lines[3].ends_with("no free GPUs"), "{table}");
}

#[test]
fn stages_are_three_numbers_of_seconds() {
    assert_eq!(
        parse_stages("0.05, 0.1,0.35").expect("valid"),
        json!({ "io_s": 0.05, "cpu_s": 0.1, "gpu_s": 0.35 })
    );
    for bad in [
        "", "1,2", "1,2,3,4", "a,b,c", "1;2;3", "nan,0,1", "inf,0,1", "-1,0,1",
    ] {
        let e = parse_stages(bad).expect_err("refused").to_string();
        assert!(e.contains("--stages") && e.contains("IO,CPU,GPU"), "{e}");
    }
}

#[test]
fn show_says_which_jobs_share_the_gpus_and_jobs_marks_them() {
    let job = json!({
        "id": 3, "tenant": "a", "request": { "command": "train", "gpus": 1, "iteration_stages": { "io_s": 0.3, "cpu_s": 0.15, "gpu_s": 0.05 } },
        "state": { "state": "running", "gpus": [0], "pid": 10, "started_unix_s": 0 },
        "shares_gpus_with": [{ "id": 7, "gpus": [0] }, { "gpus": [0], "other_tenant": true }],
    });
    let text = job_text(&job);
    assert!(
        text.contains("  shares:     GPU 0 with job 7; GPU 0 with another tenant's job"),
        "{text}"
    );
    assert!(
        text.contains("  iteration:  I/O 0.3 s, CPU 0.15 s, GPU 0.05 s"),
        "{text}"
    );
    let table = jobs_table(&[job], false);
    assert!(
        table.lines().nth(1).is_some_and(|l| l.contains(" 0* ")),
        "{table}"
    );
    assert!(
        table
            .lines()
            .last()
            .is_some_and(|l| l.starts_with("* shares its GPUs")),
        "{table}"
    );
    let alone = json!({ "id": 4, "request": { "command": "x", "gpus": 1 }, "state": { "state": "running", "gpus": [1] }, "shares_gpus_with": [] });
    assert!(!job_text(&alone).contains("shares:"));
    assert!(!jobs_table(&[alone], false).contains('*'));
}

#[test]
fn gpus_take_a_count_or_an_elastic_range() {
    assert_eq!(parse_gpu_range("4"), Ok((4, None)));
    assert_eq!(parse_gpu_range("2..8"), Ok((2, Some(8))));
    assert_eq!(parse_gpu_range("3..3"), Ok((3, None)));
    assert!(
        parse_gpu_range("8..2")
            .expect_err("reversed")
            .contains("1 <= MIN <= MAX")
    );
    assert!(parse_gpu_range("0..2").is_err());
    assert!(
        parse_gpu_range("two")
            .expect_err("not a number")
            .contains("not a GPU count")
    );
}

#[test]
fn deadlines_take_seconds_or_a_unit() {
    assert_eq!(parse_duration_s("3600"), Ok(3600));
    assert_eq!(parse_duration_s("90m"), Ok(5400));
    assert_eq!(parse_duration_s("1.5h"), Ok(5400));
    assert_eq!(parse_duration_s("2d"), Ok(172_800));
    assert!(
        parse_duration_s("2w")
            .expect_err("unit")
            .contains("s, m, h or d")
    );
    assert!(parse_duration_s("soon").is_err());
    assert!(parse_duration_s("0").is_err());
}

#[test]
fn an_array_is_one_line_with_its_tasks_counted_unless_expanded() {
    let task = |index: u64, state: &str| {
        serde_json::json!({
            "id": 12 + index, "tenant": "a", "state": { "state": state }, "pending_reason": "array 12 has 2 tasks running, its limit (%2)",
            "request": { "gpus": 1, "command": "python train.py", "name": "sweep" },
            "array": { "array_id": 12, "index": index, "tasks": 4 }
        })
    };
    let jobs = vec![
        task(0, "running"),
        task(1, "running"),
        task(2, "queued"),
        task(3, "succeeded"),
    ];
    let folded = jobs_table(&jobs, false);
    assert_eq!(folded.lines().count(), 2, "{folded}");
    assert!(
        folded.contains("12_[4]")
            && folded.contains("2 running, 1 queued, 1 succeeded")
            && folded.contains("its limit (%2)"),
        "{folded}"
    );
    let expanded = jobs_table(&jobs, true);
    assert_eq!(expanded.lines().count(), 5, "{expanded}");
    assert!(expanded.contains("12_3"), "{expanded}");
}

#[test]
fn job_references_are_ids_or_array_tasks() {
    assert_eq!(parse_job_ref("12"), Ok("12".into()));
    assert_eq!(parse_job_ref("12_7"), Ok("12_7".into()));
    for bad in ["", "12_", "_7", "1/../x", "12_7_1", "-1", "12345678901"] {
        assert!(parse_job_ref(bad).is_err(), "{bad}");
    }
}
