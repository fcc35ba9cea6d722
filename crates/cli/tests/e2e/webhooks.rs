//! Tenants' webhooks end to end (issue 29, item 5): set with `arbiter tenants update --webhook`,
//! delivered to a receiver on loopback, signed; hostile URLs and hostile tenants refused; a daemon
//! killed with SIGKILL mid-delivery sends the event again after its restart and loses none.

use super::common::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;

#[path = "../../../daemon/tests/webhook_receiver/mod.rs"]
mod receiver;
use receiver::{Answer, Receiver};

/// Loopback receivers allowed (tests only); retries quick.
fn config() -> String {
    let shared = if is_root() {
        ""
    } else {
        "allow_shared_identity = true\n"
    };
    format!(
        "{shared}webhooks = {{ allow_private = true, retry_initial_s = 0.05, retry_max_s = 0.2 }}\n"
    )
}

fn start(data: &std::path::Path, config: &str) -> Daemon {
    Daemon::start_with(
        data,
        Options {
            args: &["--gpus", "1xa100", "--policy", "fifo", "--round-s", "1"],
            config: Some(config),
            ..Default::default()
        },
    )
}

/// Sets `tenant`'s webhook with the CLI; returns the secret it shows once.
fn set_webhook(daemon: &Daemon, tenant: &str, url: &str) -> String {
    let out = cli_ok(
        daemon,
        &daemon.admin_token(),
        &["tenants", "update", tenant, "--webhook", url],
    );
    let line = out
        .lines()
        .find(|l| l.starts_with("webhook secret"))
        .unwrap_or_else(|| panic!("no secret shown: {out}"));
    line.rsplit(' ').next().expect("secret").to_string()
}

fn now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

#[test]
fn webhooks_reach_a_loopback_receiver_signed_and_only_for_their_own_tenant() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = start(&dir.path().join("data"), &config());
    let hook = Receiver::start(Answer::Status(200));
    let (a, b) = (daemon.tenant("team-a"), daemon.tenant("team-b"));
    let secret = set_webhook(&daemon, "team-a", &hook.url);
    assert!(secret.starts_with("whsec_"), "{secret}");
    let id = submit(&a, json!({ "command": "true", "name": "quick" }));
    let other = submit(&b, json!({ "command": "true" }));
    wait_for("team-b's job to end", 30, || {
        state_of(&b, other) == "succeeded"
    });
    let got = hook.wait_for(2, 30);
    for r in &got {
        let signature = r.headers.get("arbiter-signature").expect("signed");
        assert_eq!(
            arbiter_daemon::security::webhook::verify(
                &secret,
                signature,
                r.body.as_bytes(),
                now_s(),
                300
            ),
            Ok(())
        );
        assert_eq!(
            r.json()["tenant"],
            "team-a",
            "never another tenant's job: {}",
            r.body
        );
        assert_eq!(r.json()["job_id"], id);
    }
    let events: Vec<Value> = got.iter().map(|r| r.json()["event"].clone()).collect();
    assert_eq!(events, [json!("started"), json!("succeeded")]);
    assert_eq!(got[1].json()["exit_code"], 0);
    wait_for("the tenants list to count the deliveries", 20, || {
        cli_ok(&daemon, &daemon.admin_token(), &["tenants"])
            .lines()
            .any(|l| l.starts_with("team-a") && l.contains("active, 2 delivered"))
    });
    let listed = cli_ok(&daemon, &daemon.admin_token(), &["--json", "tenants"]);
    assert!(
        !listed.contains(&secret) && !listed.contains("whsec_"),
        "the secret is shown once only: {listed}"
    );
    // Removed: nothing more is sent.
    cli_ok(
        &daemon,
        &daemon.admin_token(),
        &["tenants", "update", "team-a", "--no-webhook"],
    );
    let admin = daemon.admin();
    assert_eq!(
        admin.get("/v1/tenants").expect("tenants")["tenants"]
            .as_array()
            .expect("list")
            .iter()
            .find(|t| t["name"] == "team-a")
            .expect("team-a")["webhook"],
        Value::Null
    );
}

#[test]
fn hostile_tenants_and_urls_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = start(&dir.path().join("data"), &config());
    let hook = Receiver::start(Answer::Status(200));
    let (_, a) = daemon.tenant_with_token("team-a");
    daemon.tenant("team-b");
    // A tenant sets no webhook, not even its own, and reads none.
    assert_eq!(
        refused(a.patch("/v1/tenants/team-a", &json!({ "webhook": hook.url }))).0,
        403
    );
    assert_eq!(
        refused(a.patch("/v1/tenants/team-b", &json!({ "webhook": hook.url }))).0,
        403
    );
    assert_eq!(refused(a.get("/v1/tenants")).0, 403);
    let admin = daemon.admin();
    let port = daemon.addr.rsplit(':').next().expect("port");
    for bad in [
        format!("{}/v1/jobs", daemon.url),
        format!("http://localhost:{port}/v1/tenants"),
        format!("http://127.0.0.9:{port}/"),
        "file:///etc/passwd".to_string(),
        "gopher://127.0.0.1:70/".to_string(),
        "http://admin:pw@127.0.0.1:9/".to_string(),
        "http://169.254.169.254/latest/meta-data/".to_string(),
        "http://[fe80::1]/".to_string(),
        "https://hooks.example.com/".to_string(),
        "http://exa\u{202e}mple.com/".to_string(),
        "no url".to_string(),
    ] {
        let (status, message) =
            refused(admin.patch("/v1/tenants/team-a", &json!({ "webhook": bad })));
        assert_eq!(status, 400, "{bad}: {message}");
        assert!(message.starts_with("webhook:"), "{bad}: {message}");
    }
    assert_eq!(
        refused(admin.patch("/v1/tenants/nobody", &json!({ "webhook": hook.url }))).0,
        404
    );
    assert_eq!(
        refused(admin.patch(
            "/v1/tenants/team-a",
            &json!({ "rotate_webhook_secret": true })
        ))
        .0,
        409,
        "no webhook to rotate"
    );
    // Without allow_private, loopback receivers are refused too.
    let strict_dir = tempfile::tempdir().expect("dir");
    let strict = start(
        &strict_dir.path().join("data"),
        if is_root() {
            ""
        } else {
            "allow_shared_identity = true\n"
        },
    );
    strict.tenant("team-a");
    let (status, message) = refused(
        strict
            .admin()
            .patch("/v1/tenants/team-a", &json!({ "webhook": hook.url })),
    );
    assert!(
        status == 400 && message.contains("allow_private"),
        "{message}"
    );
    // A rotation makes a new secret, shown once; the URL stays.
    let first = set_webhook(&daemon, "team-a", &hook.url);
    let out = cli_ok(
        &daemon,
        &daemon.admin_token(),
        &["tenants", "update", "team-a", "--rotate-webhook-secret"],
    );
    assert!(
        out.contains(&hook.url) && out.contains("whsec_") && !out.contains(&first),
        "{out}"
    );
}

#[test]
fn a_daemon_killed_mid_delivery_sends_that_event_again_after_restart_and_loses_none() {
    let dir = tempfile::tempdir().expect("dir");
    let data = dir.path().join("data");
    let config = config();
    let mut daemon = start(&data, &config);
    let hook = Receiver::start(Answer::Hang);
    let a = daemon.tenant("team-a");
    set_webhook(&daemon, "team-a", &hook.url);
    let id = submit(&a, json!({ "command": "true" }));
    // The `started` POST is in flight (the receiver holds it); the job ends meanwhile.
    hook.wait_for(1, 30);
    wait_for("the job to end", 30, || state_of(&a, id) == "succeeded");
    daemon.kill9();
    hook.answer(Answer::Status(200));
    let daemon = start(&data, &config);
    let got = hook.wait_for(3, 30);
    let admin = daemon.admin();
    wait_for("the outbox to empty", 20, || {
        admin.get("/v1/tenants").expect("tenants")["tenants"]
            .as_array()
            .expect("list")
            .iter()
            .any(|t| t["name"] == "team-a" && t["webhook"]["pending"] == 0)
    });
    let got = if hook.received().len() > got.len() {
        hook.received()
    } else {
        got
    };
    let mut times: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for r in &got {
        let e = r.json();
        let entry = times
            .entry(e["id"].as_str().expect("id").to_string())
            .or_insert((0, e["event"].as_str().unwrap_or("").to_string()));
        entry.0 += 1;
    }
    let summary: Vec<(usize, String)> = times.into_values().collect();
    // The interrupted one twice (at least once, same id), the other once: nothing lost.
    assert_eq!(
        summary,
        [(2, "started".to_string()), (1, "succeeded".to_string())],
        "{got:?}"
    );
}
