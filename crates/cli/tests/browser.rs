//! The dashboard and an HTML report in a real headless Chromium, driven over the DevTools
//! protocol (`headless_chrome`): the pages load with no console error, the occupancy grid shows
//! a small daemon's running jobs, the queue a pending reason, a tenant's token shows nothing of
//! another tenant's jobs, and every report figure renders with data. Screenshots are written to
//! `target/browser/` (CI keeps them as artifacts).
//!
//! The tests are named `browser_*` and ignored by default (they need Chromium); `.ci/run`
//! installs Debian's `chromium` and runs them: `cargo test -p arbiter-cli --test browser --
//! --ignored`. `ARBITER_CHROMIUM` names the browser binary where it is not on PATH.

#[path = "e2e/common.rs"]
mod common;

use common::{Daemon, Options, state_of, submit, wait_for};
use headless_chrome::protocol::cdp::Page::CaptureScreenshotFormatOption;
use headless_chrome::protocol::cdp::types::Event;
use headless_chrome::{Browser, LaunchOptions, Tab};
use serde_json::json;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The browser binary: `ARBITER_CHROMIUM`, else the first of Chromium's usual names on PATH.
fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("ARBITER_CHROMIUM") {
        return PathBuf::from(path);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ] {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!(
        "no Chromium found: install it (Debian: apt-get install chromium) or set ARBITER_CHROMIUM"
    );
}

/// A headless Chromium with the flags a CI container needs (no sandbox as root, no GPU, no
/// background traffic).
fn browser() -> Browser {
    let args: Vec<&OsStr> = [
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--no-default-browser-check",
        "--allow-file-access-from-files",
    ]
    .iter()
    .map(OsStr::new)
    .collect();
    let options = LaunchOptions::default_builder()
        .path(Some(chromium()))
        .headless(true)
        .sandbox(false)
        .window_size(Some((1280, 900)))
        .args(args)
        .idle_browser_timeout(Duration::from_secs(120))
        .build()
        .expect("launch options");
    Browser::new(options).expect("Chromium starts")
}

/// Console errors, uncaught exceptions and failed loads the page reports.
fn collect_errors(tab: &Tab) -> Arc<Mutex<Vec<String>>> {
    let errors = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&errors);
    tab.enable_log().expect("log domain");
    tab.enable_runtime().expect("runtime domain");
    tab.add_event_listener(Arc::new(move |event: &Event| {
        let message = match event {
            Event::RuntimeExceptionThrown(e) => {
                Some(format!("exception: {:?}", e.params.exception_details.text))
            }
            Event::LogEntryAdded(e)
                if format!("{:?}", e.params.entry.level).eq_ignore_ascii_case("error") =>
            {
                Some(format!("log: {}", e.params.entry.text))
            }
            Event::RuntimeConsoleAPICalled(e)
                if format!("{:?}", e.params.Type).eq_ignore_ascii_case("error") =>
            {
                Some(format!("console.error: {:?}", e.params.args))
            }
            _ => None,
        };
        if let Some(m) = message
            && let Ok(mut v) = sink.lock()
        {
            v.push(m);
        }
    }))
    .expect("listener");
    errors
}

fn screenshot(tab: &Tab, name: &str) {
    let dir = repo().join("target/browser");
    std::fs::create_dir_all(&dir).expect("screenshot dir");
    let png = tab
        .capture_screenshot(CaptureScreenshotFormatOption::Png, None, None, true)
        .expect("screenshot");
    std::fs::write(dir.join(name), png).expect("screenshot written");
}

/// Evaluates `expression` (returning a JSON-serializable value) in the page.
fn eval(tab: &Tab, expression: &str) -> serde_json::Value {
    tab.evaluate(&format!("JSON.stringify({expression})"), false)
        .expect("evaluates")
        .value
        .and_then(|v| v.as_str().map(str::to_string))
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or(serde_json::Value::Null)
}

/// Waits until `expression` is true in the page.
fn wait_in_page(tab: &Tab, what: &str, expression: &str) {
    wait_for(what, 30, || eval(tab, expression) == json!(true));
}

fn sign_in(tab: &Tab, token: &str) {
    tab.wait_for_element("#token")
        .expect("sign-in form")
        .click()
        .expect("focus");
    tab.type_str(token).expect("types the token");
    tab.wait_for_element("#signin-button")
        .expect("button")
        .click()
        .expect("signs in");
    wait_in_page(
        tab,
        "the cluster view",
        "!document.getElementById('cluster').hidden && document.querySelectorAll('#grid .gpu').length > 0",
    );
}

#[test]
#[ignore = "needs Chromium; .ci/run installs it and runs the browser_* tests"]
fn browser_dashboard_shows_the_live_cluster_and_hides_other_tenants() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start_with(
        &dir.path().join("data"),
        Options {
            args: &["--gpus", "4xa100", "--round-s", "1"],
            config: Some("allow_shared_identity = true\n"),
            uid: None,
        },
    );
    let (_, alice) = daemon.tenant_with_token("alice");
    let (bob_token, bob) = daemon.tenant_with_token("bob");
    let a_running = submit(
        &alice,
        json!({ "command": "sleep 120", "name": "alice-secret-run", "gpus": 2, "grace_s": 1 }),
    );
    let b_running = submit(
        &bob,
        json!({ "command": "echo hello from bob; sleep 120", "name": "bob-run", "gpus": 2, "grace_s": 1 }),
    );
    wait_for("both jobs to run", 30, || {
        state_of(&alice, a_running) == "running" && state_of(&bob, b_running) == "running"
    });
    let a_queued = submit(
        &alice,
        json!({ "command": "true", "name": "alice-secret-queued", "gpus": 4 }),
    );
    wait_for("a pending reason", 30, || {
        alice.get(&format!("/v1/jobs/{a_queued}")).expect("job")["pending_reason"].is_string()
    });

    let browser = browser();
    let tab = browser.new_tab().expect("tab");
    let errors = collect_errors(&tab);
    tab.navigate_to(&daemon.url)
        .expect("navigates")
        .wait_until_navigated()
        .expect("loads");

    // The admin sees both jobs on the grid and the queued one with its reason.
    sign_in(&tab, &daemon.admin_token());
    wait_in_page(
        &tab,
        "four held GPU cells",
        "document.querySelectorAll('#grid .gpu span.mine').length === 4",
    );
    let held: Vec<u64> = serde_json::from_value(eval(
        &tab,
        "[...document.querySelectorAll('#grid .gpu span.mine')].map(s => Number(s.dataset.job))",
    ))
    .expect("ids");
    assert!(
        held.contains(&a_running) && held.contains(&b_running),
        "{held:?}"
    );
    // Two tenants, two colours of the palette (issue 33: a hash of the names gave both purple).
    let colours = eval(
        &tab,
        "[...new Set([...document.querySelectorAll('#grid .gpu span.mine')].map(s => s.style.backgroundColor))]",
    );
    assert_eq!(colours.as_array().map(Vec::len), Some(2), "{colours}");
    // fifo ignores weights: no fair share, and the page says why.
    let note = eval(&tab, "document.getElementById('tenants-note').innerText").to_string();
    assert!(
        note.contains("the policy (fifo) does not use weights"),
        "{note}"
    );
    assert_eq!(
        eval(
            &tab,
            "[...document.querySelectorAll('#tenants tbody tr td:nth-child(5)')].map(c => c.innerText)"
        ),
        json!(["not used", "not used"])
    );
    let queue = eval(
        &tab,
        "[...document.querySelectorAll('#queue tbody tr')].map(r => r.innerText)",
    );
    let queue = queue.to_string();
    assert!(
        queue.contains(&format!("#{a_queued}")) && queue.contains("alice-secret-queued"),
        "{queue}"
    );
    let reason = eval(
        &tab,
        "document.querySelector('#queue tbody tr td:last-child').innerText",
    );
    assert!(
        reason
            .as_str()
            .is_some_and(|r| !r.is_empty() && r != "waiting for the next round"),
        "{reason}"
    );
    assert!(
        !tab.get_url().contains(&daemon.admin_token()),
        "the token is never in the address"
    );
    assert_eq!(
        eval(&tab, "sessionStorage.getItem('arbiter-token') !== null"),
        json!(true)
    );
    screenshot(&tab, "dashboard-admin.png");

    // Bob sees his job, Alice's only as another tenant's GPUs, and nothing of her queue.
    tab.wait_for_element("#signout")
        .expect("sign out")
        .click()
        .expect("signs out");
    sign_in(&tab, &bob_token);
    wait_in_page(
        &tab,
        "bob's grid",
        "document.querySelectorAll('#grid .gpu span.mine').length === 2 && document.querySelectorAll('#grid .gpu span.other').length === 2",
    );
    let text = eval(&tab, "document.body.innerText").to_string();
    assert!(
        !text.contains("alice"),
        "bob's page shows alice's jobs: {text}"
    );
    let tips = eval(
        &tab,
        "[...document.querySelectorAll('#grid .gpu')].map(g => g.title).join('\\n')",
    )
    .to_string();
    assert!(
        tips.contains(&format!("job {b_running} (bob, bob-run)")) && !tips.contains("alice"),
        "{tips}"
    );
    assert_eq!(
        eval(&tab, "document.querySelectorAll('#queue tbody tr').length"),
        json!(0)
    );
    screenshot(&tab, "dashboard-tenant.png");

    // His job's page: history and log tail.
    tab.navigate_to(&format!("{}/#job/{b_running}", daemon.url))
        .expect("job page");
    wait_in_page(
        &tab,
        "the job page",
        "!document.getElementById('job').hidden && document.getElementById('job-log').innerText.includes('hello from bob')",
    );
    assert!(
        eval(
            &tab,
            "document.querySelectorAll('#job-history tbody tr').length"
        )
        .as_u64()
        .is_some_and(|n| n >= 2)
    );
    screenshot(&tab, "dashboard-job.png");
    // Alice's job page is refused to him, and says so without showing anything of it.
    tab.navigate_to(&format!("{}/#job/{a_running}", daemon.url))
        .expect("navigates");
    wait_in_page(
        &tab,
        "a refusal",
        "document.getElementById('status').className === 'error'",
    );
    assert!(
        !eval(&tab, "document.body.innerText")
            .to_string()
            .contains("alice-secret")
    );

    let errors = errors.lock().expect("errors").clone();
    // The refused job page is one 403 the page reports itself; nothing else may fail.
    let unexpected: Vec<&String> = errors.iter().filter(|e| !e.contains("403")).collect();
    assert!(unexpected.is_empty(), "console errors: {errors:?}");
}

#[test]
#[ignore = "needs Chromium; .ci/run installs it and runs the browser_* tests"]
fn browser_dashboard_shows_the_quota_tree_and_a_tenant_only_its_path() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start_with(
        &dir.path().join("data"),
        Options {
            args: &["--gpus", "4xa100", "--round-s", "1"],
            config: Some("allow_shared_identity = true\n"),
            uid: None,
        },
    );
    let (_, atlas) = daemon.tenant_with_token("atlas");
    let (vega_token, _) = daemon.tenant_with_token("vega");
    let admin = daemon.admin();
    for (name, body) in [
        ("ml-org", json!({ "gpus": { "a100": { "guaranteed": 4 } } })),
        (
            "atlas",
            json!({ "parent": "ml-org", "gpus": { "a100": { "guaranteed": 3, "borrowing_limit": 1 } } }),
        ),
        (
            "vega",
            json!({ "parent": "ml-org", "gpus": { "a100": { "guaranteed": 1 } } }),
        ),
    ] {
        admin
            .put(&format!("/v1/quotas/{name}"), &body)
            .expect("a quota group");
    }
    let jobs: Vec<u64> = (0..4)
        .map(|_| submit(&atlas, json!({ "command": "sleep 120", "grace_s": 1 })))
        .collect();
    wait_for("atlas's jobs to run", 30, || {
        jobs.iter().all(|&j| state_of(&atlas, j) == "running")
    });

    let browser = browser();
    let tab = browser.new_tab().expect("tab");
    let errors = collect_errors(&tab);
    tab.navigate_to(&daemon.url)
        .expect("navigates")
        .wait_until_navigated()
        .expect("loads");
    sign_in(&tab, &daemon.admin_token());
    // atlas's row: indented under ml-org, 4 held of 3 guaranteed, 1 borrowed and reclaimable.
    let atlas_row = "[...document.querySelectorAll('#quotas tbody tr')].find(r => r.cells[0].innerText.endsWith('atlas'))";
    wait_in_page(
        &tab,
        "atlas borrowing in the quota table",
        &format!(
            "!document.getElementById('quotas-section').hidden && (r => r !== undefined && r.cells[2].innerText === '1' && r.cells[6].innerText === '1')({atlas_row})"
        ),
    );
    let cells = eval(
        &tab,
        &format!("[...{atlas_row}.cells].map(c => c.innerText)"),
    );
    assert_eq!(
        cells.as_array().map(|c| c[..8].to_vec()),
        Some(
            ["└ atlas", "1", "1", "a100", "3", "4", "1", "1"]
                .map(|c| json!(c))
                .to_vec()
        ),
        "{cells}"
    );
    let indent = eval(
        &tab,
        &format!(
            "parseFloat({atlas_row}.cells[0].style.paddingLeft) > parseFloat([...document.querySelectorAll('#quotas td.group')].find(c => c.innerText === 'ml-org').style.paddingLeft)"
        ),
    );
    assert_eq!(indent, json!(true), "atlas indented under ml-org");
    // The bar: held within guaranteed and borrowed beside it.
    let widths = eval(
        &tab,
        &format!(
            "[...{atlas_row}.querySelectorAll('.qbar i')].map(i => parseFloat(i.style.width))"
        ),
    );
    assert_eq!(widths, json!([75, 25]), "{widths}");
    screenshot(&tab, "dashboard-quotas-admin.png");

    // vega, atlas's sibling: its own group under ml-org's totals, nothing of atlas.
    tab.wait_for_element("#signout")
        .expect("sign out")
        .click()
        .expect("signs out");
    sign_in(&tab, &vega_token);
    wait_in_page(
        &tab,
        "vega's quota table",
        "!document.getElementById('quotas-section').hidden && document.querySelectorAll('#quotas tbody tr').length === 2",
    );
    let text = eval(&tab, "document.body.innerText").to_string();
    assert!(!text.contains("atlas"), "vega's page names atlas: {text}");
    assert_eq!(
        eval(
            &tab,
            "[...document.querySelectorAll('#quotas td.group')].map(c => c.innerText)"
        ),
        json!(["ml-org", "└ vega"])
    );
    let tips = eval(
        &tab,
        "[...document.querySelectorAll('#quotas [title]')].map(e => e.title).join('\\n')",
    )
    .to_string();
    assert!(!tips.contains("atlas"), "{tips}");
    screenshot(&tab, "dashboard-quotas-tenant.png");
    let errors = errors.lock().expect("errors").clone();
    assert!(errors.is_empty(), "console errors: {errors:?}");
}

#[test]
#[ignore = "needs Chromium; .ci/run installs it and runs the browser_* tests"]
fn browser_report_figures_render_with_data() {
    let dir = tempfile::tempdir().expect("dir");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_arbiter"))
        .args([
            "run",
            "scenarios/vtc-philly.toml",
            "--set",
            "trace.0.max_jobs=400",
            "--report",
            dir.path().to_str().expect("utf-8"),
        ])
        .current_dir(repo())
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let browser = browser();
    let tab = browser.new_tab().expect("tab");
    let errors = collect_errors(&tab);
    let url = format!("file://{}", dir.path().join("index.html").display());
    tab.navigate_to(&url)
        .expect("navigates")
        .wait_until_navigated()
        .expect("loads");
    let figures = eval(
        &tab,
        "[...document.querySelectorAll('figure')].map(f => { const s = f.querySelector('svg'); const r = s.getBoundingClientRect(); \
         return { id: f.id, width: r.width, height: r.height, marks: s.querySelectorAll('path, rect').length }; })",
    );
    let figures = figures.as_array().expect("figures");
    assert!(figures.len() >= 8, "{figures:?}");
    for f in figures {
        assert!(
            f["width"].as_f64().is_some_and(|w| w > 300.0)
                && f["height"].as_f64().is_some_and(|h| h > 150.0),
            "{f}"
        );
        assert!(
            f["marks"].as_u64().is_some_and(|m| m > 5),
            "figure without data: {f}"
        );
    }
    eval(
        &tab,
        "(document.querySelector('figure').scrollIntoView(), true)",
    );
    screenshot(&tab, "report.png");
    let errors = errors.lock().expect("errors").clone();
    assert!(errors.is_empty(), "console errors: {errors:?}");
}
