//! Co-located jobs end to end (issue 11, item 8): `arbiter serve` with the local executor, one
//! declared GPU and `muri-s`; two jobs submitted with complementary `--stages` run at the same
//! time on the same GPU (each writes the `CUDA_VISIBLE_DEVICES` it got), and `arbiter show` says
//! with whom a job shares it — naming another tenant's job to no one but the admin.

use crate::common::{checkpoint_dir, cli, cli_ok, refused, state_of, submit, wait_for, Daemon};
use arbiter_daemon::client::Client;
use serde_json::{json, Value};
use std::process::Command;

/// Writes the GPUs it was given into its checkpoint directory, then runs until cancelled.
const REPORT_GPUS: &str = r#"echo "$CUDA_VISIBLE_DEVICES" > "$ARBITER_CHECKPOINT_DIR/cuda_visible_devices"; exec sleep 120"#;

fn start(dir: &tempfile::TempDir) -> Daemon {
    Daemon::start(&dir.path().join("data"), &["--gpus", "1xa100", "--policy", "muri-s", "--round-s", "1"])
}

/// The `CUDA_VISIBLE_DEVICES` job `id` wrote, once it has.
fn visible_devices(client: &Client, id: u64) -> Option<String> {
    std::fs::read_to_string(checkpoint_dir(client, id).join("cuda_visible_devices")).ok().filter(|s| s.ends_with('\n')).map(|s| s.trim().to_string())
}

fn job(client: &Client, id: u64) -> Value {
    client.get(&format!("/v1/jobs/{id}")).expect("job")
}

/// Waits until both jobs run and have written their GPUs; returns what each saw.
fn both_running(a: (&Client, u64), b: (&Client, u64), daemon: &Daemon) -> (String, String) {
    let mut seen = (None, None);
    wait_for("both jobs to run and report their GPUs", 60, || {
        seen = (visible_devices(a.0, a.1), visible_devices(b.0, b.1));
        seen.0.is_some() && seen.1.is_some()
    });
    // At the same time: both still running now that both have written.
    assert_eq!((state_of(a.0, a.1), state_of(b.0, b.1)), ("running".to_string(), "running".to_string()), "{}", daemon.stderr());
    (seen.0.unwrap_or_default(), seen.1.unwrap_or_default())
}

#[test]
fn two_co_located_jobs_see_the_same_gpu() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = start(&dir);
    let (token, client) = daemon.tenant_with_token("team-a");
    let submit_cli = |stages: &str, name: &str| -> u64 {
        let out =
            cli_ok(&daemon, &token, &["submit", "--stages", stages, "--name", name, "--working-dir", "/", "--export", "NONE", "--grace-s", "1", "--", "sh", "-c", REPORT_GPUS]);
        out.trim().rsplit(' ').next().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("a job id in {out:?}"))
    };
    // Mostly GPU compute, then mostly reading and preprocessing: Muri interleaves them.
    let first = submit_cli("0.02,0.08,0.4", "gpu-heavy");
    wait_for("the first job to run", 30, || state_of(&client, first) == "running");
    let second = submit_cli("0.3,0.15,0.05", "input-heavy");
    let (a, b) = both_running((&client, first), (&client, second), &daemon);
    assert_eq!((a.as_str(), b.as_str()), ("0", "0"), "both runs see the only GPU");
    assert_eq!(job(&client, second)["request"]["iteration_stages"], json!({ "io_s": 0.3, "cpu_s": 0.15, "gpu_s": 0.05 }));
    // The API and the CLI say with whom.
    assert_eq!(job(&client, first)["shares_gpus_with"], json!([{ "id": second, "gpus": [0] }]));
    assert_eq!(job(&client, second)["shares_gpus_with"], json!([{ "id": first, "gpus": [0] }]));
    let show = cli_ok(&daemon, &token, &["show", &first.to_string()]);
    assert!(show.contains(&format!("shares:     GPU 0 with job {second}")), "{show}");
    assert!(show.contains("iteration:  I/O 0.02 s, CPU 0.08 s, GPU 0.4 s"), "{show}");
    let jobs = cli_ok(&daemon, &token, &["jobs"]);
    for id in [first, second] {
        let line = jobs.lines().find(|l| l.trim_start().starts_with(&format!("{id} "))).expect("its line");
        assert!(line.contains(" 0* "), "{jobs}");
    }
    assert!(jobs.lines().any(|l| l.starts_with("* shares its GPUs")), "{jobs}");
    // `--help` says what the stages are for.
    let help = String::from_utf8(Command::new(env!("CARGO_BIN_EXE_arbiter")).args(["submit", "--help"]).output().expect("runs").stdout).expect("utf-8");
    assert!(help.contains("--stages <IO,CPU,GPU>") && help.contains("interleave"), "{help}");
    for id in [first, second] {
        client.post(&format!("/v1/jobs/{id}/cancel"), &json!({})).expect("cancels");
    }
    wait_for("the cancels", 30, || state_of(&client, first) == "cancelled" && state_of(&client, second) == "cancelled");
    assert_eq!(job(&client, first)["shares_gpus_with"], json!([]), "an ended job shares nothing");
}

#[test]
fn a_tenant_learns_only_that_its_gpu_is_shared_not_with_whose_job() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = start(&dir);
    let admin = daemon.admin();
    let (token_a, a) = daemon.tenant_with_token("team-a");
    let (token_b, b) = daemon.tenant_with_token("team-b");
    let body = |name: &str, io_s: f64, cpu_s: f64, gpu_s: f64| json!({ "command": REPORT_GPUS, "name": name, "grace_s": 1, "iteration_stages": { "io_s": io_s, "cpu_s": cpu_s, "gpu_s": gpu_s } });
    let mine = submit(&a, body("secret-project-a", 0.02, 0.08, 0.4));
    wait_for("a's job to run", 30, || state_of(&a, mine) == "running");
    let theirs = submit(&b, body("secret-project-b", 0.3, 0.15, 0.05));
    let (seen_a, seen_b) = both_running((&a, mine), (&b, theirs), &daemon);
    assert_eq!((seen_a.as_str(), seen_b.as_str()), ("0", "0"));

    // Each tenant sees that its GPU is shared, with another tenant's job — no id, tenant or name,
    // in the job, in the list, and in `arbiter show`.
    for (client, token, own, other, other_tenant, other_name) in
        [(&a, &token_a, mine, theirs, "team-b", "secret-project-b"), (&b, &token_b, theirs, mine, "team-a", "secret-project-a")]
    {
        let shown = job(client, own);
        assert_eq!(shown["shares_gpus_with"], json!([{ "gpus": [0], "other_tenant": true }]), "{shown}");
        let listed = client.get("/v1/jobs").expect("jobs");
        assert_eq!(listed["jobs"].as_array().map(Vec::len), Some(1), "{listed}");
        assert_eq!(listed["jobs"][0]["shares_gpus_with"], shown["shares_gpus_with"]);
        for text in [shown.to_string(), listed.to_string(), cli_ok(&daemon, token, &["show", &own.to_string()]), cli_ok(&daemon, token, &["jobs"])] {
            assert!(!text.contains(other_tenant), "another tenant's name leaked: {text}");
            assert!(!text.contains(other_name), "another tenant's job name leaked: {text}");
            assert!(!text.contains(&format!("job {other}")), "another tenant's job id leaked: {text}");
        }
        assert!(cli_ok(&daemon, token, &["show", &own.to_string()]).contains("shares:     GPU 0 with another tenant's job"));
        // And what the API never allowed stays refused.
        assert_eq!(refused(client.get(&format!("/v1/jobs/{other}"))).0, 403);
    }
    // The admin sees both ids.
    assert_eq!(job(&admin, mine)["shares_gpus_with"], json!([{ "id": theirs, "gpus": [0] }]));
    assert_eq!(job(&admin, theirs)["shares_gpus_with"], json!([{ "id": mine, "gpus": [0] }]));

    // Hostile stage times are refused with a 400 naming the field.
    for stages in [
        json!({ "io_s": -1.0, "cpu_s": 0.1, "gpu_s": 0.1 }),
        json!({ "io_s": 0.0, "cpu_s": 0.0, "gpu_s": 0.0 }),
        json!({ "io_s": 1e300, "cpu_s": 0.1, "gpu_s": 0.1 }),
        json!({ "io_s": 0.1, "cpu_s": 0.1, "gpu_s": 0.1, "net_s": 1.0 }),
        json!({ "io_s": 0.1, "cpu_s": 0.1 }),
        json!({ "io_s": "0.1", "cpu_s": 0.1, "gpu_s": 0.1 }),
    ] {
        let (status, message) = refused(a.post("/v1/jobs", &json!({ "command": "true", "iteration_stages": stages })));
        assert_eq!(status, 400, "{stages}: {message}");
        assert!(message.contains("iteration_stages") || message.contains("net_s") || message.contains("gpu_s") || message.contains("io_s"), "{stages}: {message}");
    }
    for body in
        [r#"{"command": "true", "iteration_stages": {"io_s": NaN, "cpu_s": 0, "gpu_s": 1}}"#, r#"{"command": "true", "iteration_stages": {"io_s": 1e999, "cpu_s": 0, "gpu_s": 1}}"#]
    {
        let reply = raw_post(&daemon, &token_a, body);
        assert!(reply.starts_with("HTTP/1.1 400"), "{body}: {reply}");
    }
    let out = cli(&daemon, &token_a, &["submit", "--stages", "nan,0,1", "--", "true"]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--stages"), "{}", String::from_utf8_lossy(&out.stderr));
    for id in [mine, theirs] {
        admin.post(&format!("/v1/jobs/{id}/cancel"), &json!({})).expect("cancels");
    }
}

/// POSTs `body` as is to `/v1/jobs` (JSON a client library would not write: NaN, 1e999).
fn raw_post(daemon: &Daemon, token: &str, body: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(&daemon.addr).expect("connects");
    stream.set_read_timeout(Some(std::time::Duration::from_secs(20))).expect("timeout");
    let request = format!(
        "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("writes");
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}
