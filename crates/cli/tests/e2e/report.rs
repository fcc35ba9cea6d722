//! Reports: `run --report`, `sweep --report` and `trace analyze --report` write a
//! self-contained page whose figures all have data, and recording what a report needs changes
//! no result.

use crate::cli::{TRACE3_ONLY, arbiter, ok_stdout};
use std::path::Path;

/// The page, checked for what every report must be: HTML, no URL at all (it opens offline and
/// fetches nothing), and an SVG and a PNG file for each inline figure. Returns the page and the
/// figure ids.
fn check_page(dir: &Path) -> (String, Vec<String>) {
    let page = std::fs::read_to_string(dir.join("index.html")).expect("index.html written");
    assert!(page.starts_with("<!DOCTYPE html>") && page.trim_end().ends_with("</html>"));
    assert!(!page.contains("http"), "the page names a URL");
    assert!(!page.contains("<script"), "no script is needed");
    let ids: Vec<String> = page
        .split("<figure id=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .map(str::to_string)
        .collect();
    assert_eq!(page.matches("<svg").count(), ids.len());
    for id in &ids {
        let svg =
            std::fs::read_to_string(dir.join("figures").join(format!("{id}.svg"))).expect("svg");
        assert!(svg.starts_with("<svg xmlns="), "{id}");
        let png = std::fs::read(dir.join("figures").join(format!("{id}.png"))).expect("png");
        assert!(
            png.starts_with(b"\x89PNG") && png.len() > 5_000,
            "{id}: {} bytes",
            png.len()
        );
    }
    (page, ids)
}

/// Curves drawn in a line chart's SVG.
fn curves(svg: &str) -> usize {
    svg.split("<path")
        .skip(1)
        .filter(|p| {
            p.split('>')
                .next()
                .is_some_and(|tag| tag.contains("fill=\"none\""))
        })
        .count()
}

#[test]
fn run_report_has_every_figure_with_data_and_changes_no_result() {
    let dir = tempfile::tempdir().expect("dir");
    let report = dir.path().to_str().expect("utf-8");
    let args = [
        "run",
        "scenarios/muri-traces.toml",
        "--json",
        "--set",
        TRACE3_ONLY,
        "--set",
        r#"policies=["srtf","las"]"#,
    ];
    let plain: serde_json::Value = serde_json::from_str(&ok_stdout(&args)).expect("json");
    let mut with_report = args.to_vec();
    with_report.extend(["--report", report]);
    let reported: serde_json::Value = serde_json::from_str(&ok_stdout(&with_report)).expect("json");
    let strip = |mut v: serde_json::Value| {
        for row in v["results"].as_array_mut().expect("rows") {
            row["wall_s"] = 0.into();
        }
        v
    };
    assert_eq!(
        strip(plain),
        strip(reported),
        "recording the timeline changed a result"
    );

    let (page, ids) = check_page(dir.path());
    for id in [
        "trace3-all-jct-cdf",
        "trace3-all-queue-cdf",
        "trace3-all-utilization",
        "trace3-all-queue-length",
        "trace3-all-ftf-rho",
        "trace3-all-gantt-srtf",
        "trace3-all-gantt-las",
    ] {
        assert!(ids.iter().any(|i| i == id), "{id} missing from {ids:?}");
    }
    for id in ids.iter().filter(|i| !i.contains("gantt")) {
        let svg = std::fs::read_to_string(dir.path().join("figures").join(format!("{id}.svg")))
            .expect("svg");
        assert_eq!(curves(&svg), 2, "{id}: one curve per policy");
        assert!(svg.len() < 60_000, "{id}: {} bytes, not thinned", svg.len());
        let names = if id.starts_with("delay-by-size") {
            "muri-traces · seed 0 · Arbiter "
        } else {
            "muri-traces · trace3 · seed 0 · Arbiter "
        };
        assert!(
            svg.contains(names),
            "{id} names its scenario, seed and version"
        );
    }
    let gantt = std::fs::read_to_string(dir.path().join("figures/trace3-all-gantt-las.svg"))
        .expect("gantt");
    assert!(
        gantt.matches("<rect").count() > 20,
        "the Gantt chart has bars"
    );
    // Muri's srtf numbers are reproduced exactly: within tolerance, marked green.
    assert!(
        page.contains("class=\"good\">within"),
        "published vs ours marks the rows within tolerance"
    );
    assert!(!page.contains("class=\"bad\">outside"));
}

#[test]
fn run_report_shows_tenant_shares_against_their_fair_share() {
    let dir = tempfile::tempdir().expect("dir");
    let report = dir.path().to_str().expect("utf-8");
    ok_stdout(&[
        "run",
        "scenarios/vtc-philly.toml",
        "--set",
        "trace.0.max_jobs=400",
        "--set",
        r#"policies=["fifo","vtc"]"#,
        "--report",
        report,
    ]);
    let (_, ids) = check_page(dir.path());
    assert!(
        ids.iter().any(|i| i == "philly-2days-all-tenant-share"),
        "{ids:?}"
    );
    let svg = std::fs::read_to_string(dir.path().join("figures/philly-2days-all-tenant-share.svg"))
        .expect("svg");
    assert!(svg.contains("fifo got, Jain ") && svg.contains("vtc fair share"));
}

#[test]
fn sweep_and_trace_reports() {
    let dir = tempfile::tempdir().expect("dir");
    let out = dir.path().join("out");
    let report = dir.path().join("report");
    ok_stdout(&[
        "sweep",
        "scenarios/gavel-continuous-single.toml",
        "--key",
        "workload.jobs_per_hour",
        "--values",
        "1,3",
        "--set",
        "workload.jobs=200",
        "--set",
        "window.first_job=50",
        "--set",
        "window.last_job=149",
        "--set",
        "workload.seeds=[0]",
        "--out",
        out.to_str().expect("utf-8"),
        "--report",
        report.to_str().expect("utf-8"),
    ]);
    let (_, ids) = check_page(&report);
    for id in [
        "avg_jct",
        "p99_jct",
        "avg_queue",
        "utilization",
        "jct_cdf_1",
        "jct_cdf_3",
    ] {
        assert!(ids.iter().any(|i| i == id), "{id} missing from {ids:?}");
    }
    let avg = std::fs::read_to_string(report.join("figures/avg_jct.svg")).expect("svg");
    assert!(curves(&avg) >= 2, "one curve per policy");

    let trace_report = dir.path().join("trace");
    let out = arbiter(&[
        "trace",
        "analyze",
        "data/philly/philly.csv",
        "--format",
        "philly",
        "--report",
        trace_report.to_str().expect("utf-8"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (page, ids) = check_page(&trace_report);
    assert_eq!(
        ids,
        [
            "size-shares",
            "duration-cdf",
            "tenant-load",
            "arrivals-hour",
            "arrivals-weekday"
        ]
    );
    assert!(
        page.contains("The largest 1% of jobs (by GPU-time) hold 67.4% of the GPU-time"),
        "the concentration is stated"
    );
}

/// The `(size, run) → mean delay` cells of the report's delay-by-size table.
fn mean_delays(page: &str) -> std::collections::BTreeMap<(String, String), f64> {
    let start = page
        .find("Queueing delay by job size</h2>")
        .expect("the by-size section");
    let table = &page[start..];
    let table =
        &table[table.find("<tbody>").expect("table")..table.find("</tbody>").expect("table end")];
    table
        .split("<tr>")
        .skip(1)
        .map(|row| {
            let cells: Vec<&str> = row
                .split("<td>")
                .skip(1)
                .map(|c| c.split('<').next().unwrap_or(""))
                .collect();
            (
                (cells[0].to_string(), cells[1].to_string()),
                cells[5].parse::<f64>().expect("mean delay"),
            )
        })
        .collect()
}

#[test]
fn philly_locality_strict_locality_delays_the_largest_jobs_and_relaxing_it_helps() {
    let dir = tempfile::tempdir().expect("dir");
    let report = dir.path().to_str().expect("utf-8");
    let table = ok_stdout(&["run", "scenarios/philly-locality.toml", "--report", report]);
    assert!(
        table.contains("philly-strict") && table.contains("philly-anywhere"),
        "{table}"
    );
    let (page, ids) = check_page(dir.path());
    for id in [
        "delay-by-size-1",
        "delay-by-size-2-4",
        "delay-by-size-5-8",
        "delay-by-size-gt8",
    ] {
        assert!(ids.iter().any(|i| i == id), "{id} missing from {ids:?}");
        let svg = std::fs::read_to_string(dir.path().join("figures").join(format!("{id}.svg")))
            .expect("svg");
        assert_eq!(curves(&svg), 3, "{id}: strict, relaxed, anywhere");
    }
    let mean = mean_delays(&page);
    let at = |size: &str, run: &str| mean[&(format!("{size} GPU"), format!("philly-{run}"))];
    // The Philly study's finding: under strict locality the largest jobs wait longest...
    assert!(at("&gt;8", "strict") > 3.0 * at("1", "strict"), "{mean:?}");
    // ...relaxing locality after a wait cuts their delay...
    assert!(
        at("&gt;8", "relaxed") < 0.5 * at("&gt;8", "strict"),
        "{mean:?}"
    );
    // ...and giving it up entirely slows every spread job so much that everyone waits longer.
    assert!(at("1", "anywhere") > 10.0 * at("1", "strict"), "{mean:?}");
}

#[test]
fn a_pai_pod_list_is_characterized_with_phases_and_gpu_shares() {
    let dir = tempfile::tempdir().expect("dir");
    let pods = dir.path().join("pods.csv");
    std::fs::write(
        &pods,
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n\
         p0,12000,16384,1,1000,,LS,Running,0,100,0\n\
         p1,6000,12288,1,500,,LS,Failed,10,30,10\n\
         p2,6000,12288,1,250,V100M16|V100M32,BE,Succeeded,20,60,20\n\
         p3,4000,4096,0,0,,BE,Running,0,10,0\n\
         p4,32000,65536,8,1000,,LS,Failed,5,1005,5\n",
    )
    .expect("written");
    let path = pods.to_str().expect("utf-8");
    let text = ok_stdout(&["trace", "analyze", path, "--format", "pai-pods"]);
    assert!(
        text.contains(
            "GPU pods asking for a share of one GPU: 50.0%; constrained to GPU types: 25.0%"
        ),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("<1 GPU") && l.contains("Failed 50.0%, Succeeded 50.0%")),
        "{text}"
    );
    let v: serde_json::Value = serde_json::from_str(&ok_stdout(&[
        "trace", "analyze", path, "--format", "pai-pods", "--json",
    ]))
    .expect("json");
    assert_eq!(v["pods"], 5);
    assert_eq!(
        v["fractional_milli_cdf"],
        serde_json::json!([[250.0, 0.5], [500.0, 1.0]])
    );
    let report = dir.path().join("report");
    ok_stdout(&[
        "trace",
        "analyze",
        path,
        "--format",
        "pai-pods",
        "--report",
        report.to_str().expect("utf-8"),
    ]);
    let (_, ids) = check_page(&report);
    assert_eq!(ids, ["pod-classes", "pod-phases", "gpu-share-cdf"]);
}
