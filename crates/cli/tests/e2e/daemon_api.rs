//! End-to-end tests of the daemon's HTTP surface and its command-line client (issue 9): streamed
//! and capped logs (escaped on a terminal), connection timeouts and limits, clean shutdown on SIGTERM/SIGINT, the
//! bearer scheme, what a tenant sees of others, refused parameters, idempotent submissions,
//! tenant management, the client's text output, `--export`, and `serve`'s errors and help.

use crate::common::{Daemon, Options, cli, cli_ok, refused as status, state_of, submit, wait_for};
use arbiter_daemon::api::client::{Client, ClientError};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Starts a daemon with `config` (TOML) and `args`. Tests here run several tenants as whatever
/// user runs them (without root that needs `allow_shared_identity`).
fn start(data_dir: &Path, config: &str, args: &[&str]) -> Daemon {
    let config = format!("allow_shared_identity = true\n{config}");
    Daemon::start_with(
        data_dir,
        Options {
            args,
            config: Some(&config),
            uid: None,
        },
    )
}

/// Sends `request` as is on a new connection and returns everything read until the server
/// closes it (or 20 s pass).
fn raw(addr: &str, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).expect("connects");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    stream.write_all(request.as_bytes()).expect("writes");
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether the server closes `stream` (EOF or reset) within `within`, reading whatever it sends.
fn closed_by_server(stream: &mut TcpStream, within: Duration) -> bool {
    stream.set_read_timeout(Some(within)).expect("timeout");
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return false;
            }
            Err(_) => return true,
        }
    }
}

/// Peak resident memory of a process, KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmHWM")
}

#[test]
fn logs_are_streamed_capped_and_tail_bytes_returns_exactly_the_last_bytes() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = start(
        &dir.path().join("data"),
        "",
        &["--gpus", "1xa100", "--round-s", "1"],
    );
    let admin = daemon.admin();
    let id = submit(&admin, json!({ "command": "true" }));
    wait_for("the job to end", 30, || state_of(&admin, id) == "succeeded");
    let log = daemon.data_dir.join("logs").join(format!("{id}.log"));
    // 20 MiB in numbered lines: every byte's place is recognizable.
    let mut text = String::new();
    let mut n = 0u64;
    while text.len() < 20 << 20 {
        text.push_str(&format!("line {n:09}\n"));
        n += 1;
    }
    std::fs::write(&log, &text).expect("writes the log");
    let cap = 16usize << 20;

    let mut body = Vec::new();
    let part = admin
        .get_log(&format!("/v1/jobs/{id}/logs"), &mut body)
        .expect("log");
    assert_eq!(body.len(), cap, "capped at 16 MiB");
    assert_eq!(&body[..], &text.as_bytes()[..cap]);
    assert_eq!(
        (part.size, part.start, part.truncated),
        (text.len() as u64, 0, true)
    );

    let tail = admin
        .get_text(&format!("/v1/jobs/{id}/logs?tail_bytes=100"))
        .expect("tail");
    assert_eq!(tail.as_bytes(), &text.as_bytes()[text.len() - 100..]);

    let mut body = Vec::new();
    let part = admin
        .get_log(
            &format!("/v1/jobs/{id}/logs?tail_bytes={}", 30 << 20),
            &mut body,
        )
        .expect("tail");
    assert_eq!(
        &body[..],
        &text.as_bytes()[text.len() - cap..],
        "the last 16 MiB"
    );
    assert!(part.truncated);

    let mut body = Vec::new();
    let part = admin
        .get_log(&format!("/v1/jobs/{id}/logs?offset={cap}"), &mut body)
        .expect("rest");
    assert_eq!(
        &body[..],
        &text.as_bytes()[cap..],
        "the rest, from --offset"
    );
    assert!(!part.truncated);

    assert_eq!(
        admin
            .get_text(&format!("/v1/jobs/{id}/logs?max_bytes=10"))
            .expect("head"),
        "line 00000"
    );
    let (code, message) = status(admin.get(&format!("/v1/jobs/{id}/logs?max_bytes=0")));
    assert!(code == 400 && message.starts_with("max_bytes"), "{message}");
    let (code, message) =
        status(admin.get(&format!("/v1/jobs/{id}/logs?max_bytes={}", 1u64 << 40)));
    assert!(code == 400 && message.starts_with("max_bytes"), "{message}");
    let (code, message) = status(admin.get(&format!("/v1/jobs/{id}/logs?tail_bytes=4&offset=1")));
    assert!(
        code == 400 && message.starts_with("tail_bytes"),
        "{message}"
    );

    // A 512 MiB log (sparse, so the test writes little): `tail_bytes` and a full read both run
    // without the daemon's memory growing by anything like the log's size.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&log)
        .expect("opens");
    f.set_len(512 << 20).expect("grows");
    drop(f);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .expect("opens");
    f.write_all(b"THE END\n").expect("writes");
    drop(f);
    let before = peak_rss_kib(daemon.child.id());
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let (url, token, path) = (
                daemon.url.clone(),
                daemon.admin_token(),
                format!("/v1/jobs/{id}/logs?tail_bytes=8"),
            );
            std::thread::spawn(move || Client::new(&url, &token).get_text(&path).expect("tail"))
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().expect("thread"), "THE END\n");
    }
    let part = admin
        .get_log(&format!("/v1/jobs/{id}/logs"), &mut std::io::sink())
        .expect("log");
    assert_eq!((part.len, part.truncated), (cap as u64, true));
    let grown_mib = peak_rss_kib(daemon.child.id()).saturating_sub(before) / 1024;
    assert!(
        grown_mib < 128,
        "the daemon's peak memory grew by {grown_mib} MiB serving a 512 MiB log"
    );
}

/// Runs `arbiter ARGS` as a client of `daemon` with its standard output on a pseudo-terminal
/// (in raw mode, so the terminal passes bytes unchanged), and returns what it wrote there.
fn cli_on_terminal(daemon: &Daemon, token: &str, args: &[&str]) -> Vec<u8> {
    use nix::sys::termios::{SetArg, cfmakeraw, tcgetattr, tcsetattr};
    let pty = nix::pty::openpty(None, None).expect("a pseudo-terminal");
    let mut mode = tcgetattr(&pty.slave).expect("its mode");
    cfmakeraw(&mut mode);
    tcsetattr(&pty.slave, SetArg::TCSANOW, &mode).expect("raw mode");
    // The command (and with it this process's copy of the terminal's end) is dropped once the
    // client runs, so that reading ends when the client exits.
    let mut child = Command::new(env!("CARGO_BIN_EXE_arbiter"))
        .args(args)
        .env("ARBITER_URL", &daemon.url)
        .env("ARBITER_TOKEN", token)
        .stdout(std::process::Stdio::from(pty.slave))
        .spawn()
        .expect("binary runs");
    let mut master = std::fs::File::from(pty.master);
    let (mut shown, mut buf) = (Vec::new(), [0u8; 4096]);
    // Linux answers EIO once the last process holding the other end has closed it.
    while let Ok(n @ 1..) = master.read(&mut buf) {
        shown.extend_from_slice(&buf[..n]);
    }
    assert!(
        child.wait().expect("exits").success(),
        "arbiter {args:?} failed"
    );
    shown
}

#[test]
fn logs_show_a_jobs_escape_sequences_escaped_on_a_terminal_and_unchanged_otherwise() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = start(
        &dir.path().join("data"),
        "",
        &["--gpus", "1xa100", "--round-s", "1"],
    );
    let token = daemon.admin_token();
    let admin = daemon.admin();
    // A clipboard write (OSC 52), a cursor move up, a line erase, a carriage return, a line
    // separator, a right-to-left override, a tab and a byte that is not UTF-8.
    let command =
        r"printf 'a\033]52;c;ZXZpbA==\007b\033[1A\033[2K\r\342\200\250\342\200\256c\n\tend\377\n'";
    let job = submit(&admin, json!({ "command": command }));
    wait_for("the job to end", 30, || {
        state_of(&admin, job) == "succeeded"
    });
    let id = job.to_string();
    let raw: &[u8] =
        b"a\x1b]52;c;ZXZpbA==\x07b\x1b[1A\x1b[2K\r\xe2\x80\xa8\xe2\x80\xaec\n\tend\xff\n";
    let escaped =
        "a\\u{1b}]52;c;ZXZpbA==\\u{7}b\\u{1b}[1A\\u{1b}[2K\\u{d}\\u{2028}\\u{202e}c\n\tend\\xff\n";
    // Into a pipe: the bytes as they are.
    let piped = cli(&daemon, &token, &["logs", &id]);
    assert!(
        piped.status.success(),
        "{}",
        String::from_utf8_lossy(&piped.stderr)
    );
    assert_eq!(
        piped.stdout,
        raw,
        "{:?}",
        String::from_utf8_lossy(&piped.stdout)
    );
    // On a terminal: escaped, newlines and tabs kept; `--raw` asks for the bytes.
    let shown = cli_on_terminal(&daemon, &token, &["logs", &id]);
    assert_eq!(String::from_utf8_lossy(&shown), escaped);
    assert_eq!(
        cli_on_terminal(&daemon, &token, &["logs", &id, "--raw"]),
        raw
    );
}

#[test]
fn partial_headers_and_silent_connections_are_closed_after_the_header_timeout() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = start(
        &dir.path().join("data"),
        "header_timeout_s = 1\n",
        &["--gpus", "1xa100"],
    );
    let mut silent = TcpStream::connect(&daemon.addr).expect("connects");
    let mut partial = TcpStream::connect(&daemon.addr).expect("connects");
    partial
        .write_all(b"GET /v1/cluster HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        .expect("writes");
    assert!(
        closed_by_server(&mut silent, Duration::from_secs(20)),
        "a connection that sends nothing stays open"
    );
    assert!(
        closed_by_server(&mut partial, Duration::from_secs(20)),
        "a connection with partial headers stays open"
    );
    // An idle keep-alive connection is closed too, after its answer.
    let mut idle = TcpStream::connect(&daemon.addr).expect("connects");
    idle.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("writes");
    assert!(
        closed_by_server(&mut idle, Duration::from_secs(20)),
        "an idle keep-alive connection stays open"
    );
    // The daemon still serves.
    assert!(daemon.admin().get("/v1/cluster").is_ok());
}

/// Reads one HTTP/1.1 response (headers, then `content-length` bytes) from `stream`, leaving the
/// connection open; returns the head and the body.
fn read_response(stream: &mut TcpStream) -> (String, String) {
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if data.len() >= end + 4 + length {
                return (
                    head,
                    String::from_utf8_lossy(&data[end + 4..end + 4 + length]).into_owned(),
                );
            }
        }
        let n = stream
            .read(&mut buf)
            .expect("the server answers on this connection");
        assert!(
            n > 0,
            "the server closed the connection: {}",
            String::from_utf8_lossy(&data)
        );
        data.extend_from_slice(&buf[..n]);
    }
}

#[test]
fn a_refused_request_whose_body_the_route_ignores_leaves_the_connection_usable() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = start(
        &dir.path().join("data"),
        "max_request_bytes = 1000\n",
        &["--gpus", "1xa100"],
    );
    let token = daemon.admin_token();
    let mut stream = TcpStream::connect(&daemon.addr).expect("connects");
    // The body comes in its own packet, after the server has answered: a handler that never
    // reads it (cancel of an unknown job) used to leave it on the connection, which hyper then
    // closed without a word, so the client's next request hit a broken pipe.
    for _ in 0..3 {
        let head = format!(
            "POST /v1/jobs/999/cancel HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).expect("writes");
        std::thread::sleep(Duration::from_millis(100));
        stream.write_all(b"{}").expect("writes the body");
        let (head, body) = read_response(&mut stream);
        assert!(head.starts_with("http/1.1 404"), "{head}\n{body}");
        assert!(!head.contains("connection: close"), "{head}");
        stream
            .write_all(
                format!(
                    "GET /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
                )
                .as_bytes(),
            )
            .expect("writes");
        let (head, body) = read_response(&mut stream);
        assert!(
            head.starts_with("http/1.1 200") && body.contains("\"jobs\""),
            "{head}\n{body}"
        );
    }
    // A body over the limit is refused with 413, and the server says it closes the connection.
    let mut big = TcpStream::connect(&daemon.addr).expect("connects");
    let head = format!(
        "POST /v1/jobs/999/cancel HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Length: 5000\r\n\r\n{}",
        "x".repeat(5000)
    );
    big.write_all(head.as_bytes()).expect("writes");
    let (head, body) = read_response(&mut big);
    assert!(
        head.starts_with("http/1.1 413")
            && head.contains("connection: close")
            && body.contains("max_request_bytes"),
        "{head}\n{body}"
    );
}

#[test]
fn a_stalled_upload_is_closed_after_the_idle_timeout() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = start(
        &dir.path().join("data"),
        "idle_timeout_s = 1\nheader_timeout_s = 60\n",
        &["--gpus", "1xa100"],
    );
    let mut stalled = TcpStream::connect(&daemon.addr).expect("connects");
    let head = format!(
        "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"command\"",
        daemon.admin_token()
    );
    stalled.write_all(head.as_bytes()).expect("writes");
    assert!(
        closed_by_server(&mut stalled, Duration::from_secs(20)),
        "a connection whose body stalls stays open"
    );
    assert_eq!(
        daemon.admin().get("/v1/jobs").expect("list")["jobs"]
            .as_array()
            .map(Vec::len),
        Some(0)
    );
}

#[test]
fn a_trickled_body_is_answered_408_within_the_request_timeout() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = start(
        &dir.path().join("data"),
        "request_timeout_s = 1\nidle_timeout_s = 60\nheader_timeout_s = 60\n",
        &["--gpus", "1xa100"],
    );
    let mut slow = TcpStream::connect(&daemon.addr).expect("connects");
    slow.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let head = format!(
        "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n",
        daemon.admin_token()
    );
    slow.write_all(head.as_bytes()).expect("writes");
    // One byte every 100 ms keeps the idle timeout from firing; the request deadline does not.
    let started = Instant::now();
    let mut reply = Vec::new();
    while started.elapsed() < Duration::from_secs(10) {
        if slow.write_all(b" ").is_err() {
            break;
        }
        let mut buf = [0u8; 512];
        match slow.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                reply.extend_from_slice(&buf[..n]);
                break;
            }
            Err(_) => {}
        }
    }
    let reply = String::from_utf8_lossy(&reply);
    assert!(
        reply.starts_with("HTTP/1.1 408"),
        "answered within {:?}: {reply}",
        started.elapsed()
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_client_cannot_hold_more_connections_than_the_limit() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = start(
        &dir.path().join("data"),
        "max_connections = 2\nheader_timeout_s = 60\n",
        &["--gpus", "1xa100"],
    );
    let first = TcpStream::connect(&daemon.addr).expect("connects");
    let _second = TcpStream::connect(&daemon.addr).expect("connects");
    // The third is answered 503 and closed at once (it sends nothing: unread bytes would turn
    // the close into a reset that can hide the answer).
    let reply = raw(&daemon.addr, "");
    assert!(reply.starts_with("HTTP/1.1 503"), "{reply}");
    assert!(reply.contains("too many connections"), "{reply}");
    // Once one is closed, a new connection is served.
    drop(first);
    wait_for("a connection slot to free up", 20, || {
        raw(
            &daemon.addr,
            "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .starts_with("HTTP/1.1 200")
    });
}

#[test]
fn sigterm_stops_the_daemon_cleanly_and_running_jobs_are_readopted() {
    let dir = tempfile::tempdir().expect("dir");
    let data = dir.path().join("data");
    let mut daemon = start(&data, "", &["--gpus", "1xa100", "--round-s", "1"]);
    let admin = daemon.admin();
    let id = submit(&admin, json!({ "command": "sleep 60", "grace_s": 1 }));
    wait_for("the job to run", 30, || state_of(&admin, id) == "running");
    let exit = daemon.signal_and_wait("TERM");
    assert_eq!(exit.code(), Some(0), "{}", daemon.stderr());
    let stderr = daemon.stderr();
    assert!(
        stderr.contains(
            "shutting down on SIGTERM; 1 runs keep running and will be re-adopted at the next start"
        ),
        "{stderr}"
    );
    // The run kept running and the next daemon adopts it.
    let daemon = start(&data, "", &["--gpus", "1xa100", "--round-s", "1"]);
    let admin = daemon.admin();
    let job = admin.get(&format!("/v1/jobs/{id}")).expect("job");
    assert_eq!(
        (job["state"]["state"].as_str(), job["runs"].as_u64()),
        (Some("running"), Some(1)),
        "{job}"
    );
    admin
        .post(&format!("/v1/jobs/{id}/cancel"), &json!({}))
        .expect("cancels");
    wait_for("the job to be cancelled", 30, || {
        state_of(&admin, id) == "cancelled"
    });
}

#[test]
fn sigint_stops_the_daemon_cleanly_too() {
    let dir = tempfile::tempdir().expect("dir");
    let mut daemon = start(&dir.path().join("data"), "", &["--gpus", "1xa100"]);
    let exit = daemon.signal_and_wait("INT");
    assert_eq!(exit.code(), Some(0), "{}", daemon.stderr());
    assert!(
        daemon
            .stderr()
            .contains("shutting down on SIGINT; 0 runs keep running"),
        "{}",
        daemon.stderr()
    );
}

#[test]
fn a_bind_failure_names_the_address() {
    let dir = tempfile::tempdir().expect("dir");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
    let addr = taken.local_addr().expect("addr").to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_arbiter"))
        .args([
            "serve",
            "--data-dir",
            dir.path().join("data").to_str().expect("utf-8"),
            "--listen",
            &addr,
            "--gpus",
            "1xa100",
        ])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("cannot listen on {addr}: Address already in use")),
        "{stderr}"
    );
    assert!(stderr.contains("another daemon? pick --listen"), "{stderr}");
}

#[test]
fn serve_help_shows_the_defaults() {
    let out = Command::new(env!("CARGO_BIN_EXE_arbiter"))
        .args(["serve", "--help"])
        .output()
        .expect("runs");
    let help = String::from_utf8_lossy(&out.stdout);
    let d = arbiter_daemon::config::ServeConfig::default();
    for default in [
        d.data_dir.display().to_string(),
        d.listen.to_string(),
        d.policy.clone(),
        d.gpus.clone(),
        d.round_s.to_string(),
    ] {
        assert!(
            help.contains(&format!("[default: {default}]")),
            "`serve --help` does not show the default {default}:\n{help}"
        );
    }
    assert!(help.contains("[default: $RUST_LOG, else info]"), "{help}");
    assert!(
        help.contains("SIGTERM") && help.contains("exits 0"),
        "{help}"
    );
}

#[test]
fn a_lowercase_bearer_scheme_is_accepted() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = start(&dir.path().join("data"), "", &["--gpus", "1xa100"]);
    let token = daemon.admin_token();
    for scheme in ["bearer", "BEARER", "Bearer"] {
        let reply = raw(
            &daemon.addr,
            &format!(
                "GET /v1/cluster HTTP/1.1\r\nHost: x\r\nAuthorization: {scheme} {token}\r\nConnection: close\r\n\r\n"
            ),
        );
        assert!(reply.starts_with("HTTP/1.1 200"), "{scheme}: {reply}");
    }
    let reply = raw(
        &daemon.addr,
        &format!(
            "GET /v1/cluster HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {token}\r\nConnection: close\r\n\r\n"
        ),
    );
    assert!(reply.starts_with("HTTP/1.1 401"), "{reply}");
}

#[test]
fn a_tenant_sees_other_tenants_running_jobs_only_as_gpus_held() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = start(
        &dir.path().join("data"),
        "",
        &["--gpus", "2xa100", "--round-s", "1"],
    );
    let admin = daemon.admin();
    let (_, a) = daemon.tenant_with_token("team-a");
    let (_, b) = daemon.tenant_with_token("team-b");
    let secret = submit(
        &a,
        json!({ "command": "sleep 60", "name": "secret-project", "grace_s": 1 }),
    );
    let own = submit(
        &b,
        json!({ "command": "sleep 60", "name": "b-job", "grace_s": 1 }),
    );
    wait_for("both jobs to run", 30, || {
        state_of(&a, secret) == "running" && state_of(&b, own) == "running"
    });
    let seen_by_b = b.get("/v1/cluster").expect("cluster");
    let text = seen_by_b.to_string();
    assert!(
        !text.contains("secret-project") && !text.contains("team-a"),
        "{text}"
    );
    let running = seen_by_b["running"].as_array().expect("running");
    assert_eq!(running.len(), 2, "{text}");
    let other = running
        .iter()
        .find(|j| j["id"].is_null())
        .expect("the other tenant's job, anonymous");
    assert_eq!(other["gpus"].as_array().map(Vec::len), Some(1), "{text}");
    assert!(
        other.get("tenant").is_none() && other.get("name").is_none(),
        "{text}"
    );
    assert!(
        running
            .iter()
            .any(|j| j["id"] == own && j["name"] == "b-job"),
        "its own job in full: {text}"
    );
    let seen_by_admin = admin.get("/v1/cluster").expect("cluster").to_string();
    assert!(
        seen_by_admin.contains("secret-project") && seen_by_admin.contains("team-a"),
        "{seen_by_admin}"
    );
    for (client, id) in [(&a, secret), (&b, own)] {
        client
            .post(&format!("/v1/jobs/{id}/cancel"), &json!({}))
            .expect("cancels");
    }
}

#[test]
fn unknown_tenant_and_state_parameters_are_refused_naming_them() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = start(&dir.path().join("data"), "", &["--gpus", "1xa100"]);
    let admin = daemon.admin();
    let (_, a) = daemon.tenant_with_token("team-a");
    let (code, message) = status(admin.get("/v1/jobs?tenant=nobody"));
    assert!(
        code == 400 && message.starts_with("tenant:") && message.contains("nobody"),
        "{message}"
    );
    let (code, message) =
        status(admin.post("/v1/jobs?tenant=nobody", &json!({ "command": "true" })));
    assert!(code == 400 && message.starts_with("tenant:"), "{message}");
    let (code, message) = status(admin.get("/v1/jobs?state=bogus"));
    assert!(
        code == 400 && message.starts_with("state:") && message.contains("queued"),
        "{message}"
    );
    let (code, message) = status(a.get("/v1/jobs?state=bogus"));
    assert!(code == 400 && message.starts_with("state:"), "{message}");
    let (code, message) = status(admin.get("/v1/jobs?stat=queued"));
    assert!(code == 400 && message.contains("stat"), "{message}");
    // Known ones work.
    let id = submit(&admin, json!({ "command": "true" }));
    let on_behalf = admin
        .post("/v1/jobs?tenant=team-a", &json!({ "command": "true" }))
        .expect("accepted")["id"]
        .as_u64()
        .expect("id");
    assert_eq!(
        admin.get("/v1/jobs?tenant=team-a").expect("list")["jobs"][0]["id"],
        on_behalf
    );
    assert_eq!(
        admin.get("/v1/jobs?tenant=admin").expect("list")["jobs"][0]["id"],
        id
    );
    assert!(admin.get("/v1/jobs?state=queued").is_ok());
}

#[test]
fn the_same_idempotency_key_gives_one_job() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = start(&dir.path().join("data"), "", &["--gpus", "1xa100"]);
    let (token, a) = daemon.tenant_with_token("team-a");
    let body = json!({ "command": "sleep 1" });
    let first = a.submit(&body, "key-1").expect("accepted");
    let again = a.submit(&body, "key-1").expect("accepted");
    assert_eq!(first["id"], again["id"], "{first} {again}");
    assert!(first.get("duplicate").is_none(), "{first}");
    assert_eq!(again["duplicate"], true, "{again}");
    assert_eq!(
        a.get("/v1/jobs").expect("list")["jobs"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    // In the body, same key: the same job.
    let in_body = a
        .post(
            "/v1/jobs",
            &json!({ "command": "sleep 1", "client_request_id": "key-1" }),
        )
        .expect("accepted");
    assert_eq!(in_body["id"], first["id"]);
    // Body and header disagreeing: 400 naming client_request_id.
    let (code, message) = match a.submit(
        &json!({ "command": "true", "client_request_id": "other" }),
        "key-2",
    ) {
        Err(ClientError::Status { status, message }) => (status, message),
        other => panic!("{other:?}"),
    };
    assert!(
        code == 400 && message.starts_with("client_request_id"),
        "{message}"
    );
    // The CLI sends a fresh key per invocation: two submits, two jobs.
    let out1 = cli_ok(&daemon, &token, &["submit", "--", "true"]);
    let out2 = cli_ok(&daemon, &token, &["submit", "--", "true"]);
    assert_ne!(out1, out2);
    assert_eq!(
        a.get("/v1/jobs").expect("list")["jobs"]
            .as_array()
            .map(Vec::len),
        Some(3)
    );
}

#[test]
fn tenants_add_refuses_an_existing_tenant_and_update_rotate_remove_work() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = start(
        &dir.path().join("data"),
        "",
        &["--gpus", "1xa100", "--round-s", "1"],
    );
    let admin_token = daemon.admin_token();
    let out = cli_ok(
        &daemon,
        &admin_token,
        &[
            "tenants",
            "add",
            "team-a",
            "--weight",
            "2",
            "--gpu-quota",
            "1",
        ],
    );
    let token1 = out.rsplit(' ').next().expect("token").trim().to_string();
    assert_eq!(token1.len(), 64, "{out}");
    // Adding it again is refused and changes nothing.
    let again = cli(&daemon, &admin_token, &["tenants", "add", "team-a"]);
    assert!(!again.status.success());
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        stderr.contains("409")
            && stderr.contains("tenant team-a exists")
            && stderr.contains("tenants update"),
        "{stderr}"
    );
    let a1 = Client::new(&daemon.url, &token1);
    assert!(a1.get("/v1/jobs").is_ok(), "the first token still works");
    let tenants = daemon.admin().get("/v1/tenants").expect("list");
    assert_eq!(
        (
            tenants["tenants"][0]["weight"].as_f64(),
            tenants["tenants"][0]["gpu_quota"].as_u64()
        ),
        (Some(2.0), Some(1)),
        "{tenants}"
    );
    // Update: weight only keeps the quota; --no-gpu-quota clears it.
    cli_ok(
        &daemon,
        &admin_token,
        &["tenants", "update", "team-a", "--weight", "3"],
    );
    let t = &daemon.admin().get("/v1/tenants").expect("list")["tenants"][0];
    assert_eq!(
        (t["weight"].as_f64(), t["gpu_quota"].as_u64()),
        (Some(3.0), Some(1)),
        "{t}"
    );
    cli_ok(
        &daemon,
        &admin_token,
        &["tenants", "update", "team-a", "--no-gpu-quota"],
    );
    assert!(daemon.admin().get("/v1/tenants").expect("list")["tenants"][0]["gpu_quota"].is_null());
    let (code, message) = status(
        daemon
            .admin()
            .patch("/v1/tenants/team-a", &json!({ "weight": 0 })),
    );
    assert!(code == 400 && message.starts_with("weight"), "{message}");
    assert_eq!(
        status(
            daemon
                .admin()
                .patch("/v1/tenants/nobody", &json!({ "weight": 1 }))
        )
        .0,
        404
    );
    assert!(
        !cli(&daemon, &admin_token, &["tenants", "update", "team-a"])
            .status
            .success(),
        "nothing to change"
    );
    // Rotate: the old token stops working at once, the new one works.
    let out = cli_ok(
        &daemon,
        &admin_token,
        &["tenants", "rotate-token", "team-a"],
    );
    let token2 = out.rsplit(' ').next().expect("token").trim().to_string();
    assert_eq!(status(a1.get("/v1/jobs")).0, 401);
    let a2 = Client::new(&daemon.url, &token2);
    // Remove: refused while it has a job that has not ended.
    let id = submit(&a2, json!({ "command": "sleep 60", "grace_s": 1 }));
    let refused = cli(&daemon, &admin_token, &["tenants", "remove", "team-a"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("409") && stderr.contains("queued or running"),
        "{stderr}"
    );
    a2.post(&format!("/v1/jobs/{id}/cancel"), &json!({}))
        .expect("cancels");
    wait_for("the job to be cancelled", 30, || {
        state_of(&a2, id) == "cancelled"
    });
    cli_ok(&daemon, &admin_token, &["tenants", "remove", "team-a"]);
    assert_eq!(
        status(a2.get("/v1/jobs")).0,
        401,
        "a removed tenant's token no longer works"
    );
    assert_eq!(
        daemon.admin().get("/v1/tenants").expect("list")["tenants"]
            .as_array()
            .map(Vec::len),
        Some(0)
    );
    assert_eq!(status(daemon.admin().delete("/v1/tenants/team-a")).0, 404);
    // Its ended jobs stay listed.
    assert_eq!(
        daemon.admin().get("/v1/jobs?tenant=team-a").expect("list")["jobs"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    // The OpenAPI document describes the new endpoints.
    let openapi = daemon.admin().get("/v1/openapi.json").expect("openapi");
    for (path, method) in [
        ("/v1/tenants/{name}", "patch"),
        ("/v1/tenants/{name}", "delete"),
        ("/v1/tenants/{name}/token", "post"),
    ] {
        assert!(
            openapi["paths"][path][method].is_object(),
            "{path} {method}"
        );
    }
}

#[test]
fn client_commands_print_text_and_json_only_with_the_flag() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = start(
        &dir.path().join("data"),
        "",
        &["--gpus", "2xa100", "--round-s", "1"],
    );
    let admin_token = daemon.admin_token();
    let admin = daemon.admin();
    let (token, a) = daemon.tenant_with_token("team-a");
    let long_command = "sleep 60 && echo averyveryverylongargumentthatwouldbecutinthemiddle";
    let running = submit(
        &a,
        json!({ "command": long_command, "name": "train-resnet", "gpus": 2, "grace_s": 1 }),
    );
    wait_for("the job to run", 30, || state_of(&a, running) == "running");
    let queued = submit(&a, json!({ "command": "true", "gpus": 1 }));
    wait_for("a pending reason", 30, || {
        a.get(&format!("/v1/jobs/{queued}")).expect("job")["pending_reason"].is_string()
    });

    let jobs = cli_ok(&daemon, &token, &["jobs"]);
    assert!(serde_json::from_str::<Value>(&jobs).is_err(), "{jobs}");
    let header = jobs.lines().next().expect("header");
    for column in [
        "id",
        "tenant",
        "name",
        "state",
        "gpus",
        "on",
        "command",
        "waiting because",
    ] {
        assert!(
            header.split_whitespace().any(|w| w == column) || header.contains(column),
            "no `{column}` column: {header}"
        );
    }
    let line = jobs
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{running} ")))
        .expect("the running job's line");
    assert!(
        line.contains("train-resnet") && line.contains("    2 0,1"),
        "count asked, then indices held: {line}"
    );
    assert!(
        line.contains("sleep 60 && echo…"),
        "the command is cut at a word boundary: {line}"
    );
    let queued_line = jobs
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{queued} ")))
        .expect("the queued job's line");
    // Cancelled: no stale reason.
    a.post(&format!("/v1/jobs/{queued}/cancel"), &json!({}))
        .expect("cancels");
    wait_for("the cancel", 30, || state_of(&a, queued) == "cancelled");
    let jobs = cli_ok(&daemon, &token, &["jobs"]);
    let cancelled_line = jobs
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{queued} ")))
        .expect("the cancelled job's line");
    assert!(cancelled_line.contains("cancelled"), "{cancelled_line}");
    let reason_words = queued_line.split_whitespace().last().expect("a reason");
    assert!(
        !cancelled_line.ends_with(reason_words),
        "a cancelled job shows no pending reason: {cancelled_line} (was {queued_line})"
    );

    let show = cli_ok(&daemon, &token, &["show", &running.to_string()]);
    assert!(
        show.starts_with(&format!("job {running} (train-resnet), tenant team-a")),
        "{show}"
    );
    assert!(show.contains("state:      running on GPUs 0,1"), "{show}");
    assert!(show.contains("history:"), "{show}");
    let show_json: Value = serde_json::from_str(&cli_ok(
        &daemon,
        &token,
        &["--json", "show", &running.to_string()],
    ))
    .expect("JSON with --json");
    assert_eq!(show_json["id"], running);
    // The time on GPUs counts the run going on (issue 33: "0 s on GPUs" while it ran).
    let started = show_json["state"]["started_unix_s"]
        .as_i64()
        .expect("a start");
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64)
    };
    wait_for("two seconds of the run", 10, || now() >= started + 3);
    let show = cli_ok(&daemon, &token, &["show", &running.to_string()]);
    let on_gpus: f64 = show
        .lines()
        .find(|l| l.trim_start().starts_with("runs:"))
        .and_then(|l| {
            l.split(", ")
                .find_map(|part| part.strip_suffix(" s on GPUs"))
        })
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no time on GPUs in {show}"));
    assert!(on_gpus >= 2.0, "{show}");

    let cluster = cli_ok(&daemon, &token, &["cluster"]);
    assert!(cluster.starts_with("policy "), "{cluster}");
    assert!(cluster.contains("GPUs: 2 (2xa100), 0 free"), "{cluster}");
    assert!(cluster.contains("train-resnet"), "{cluster}");
    assert!(
        cluster.lines().any(|l| l.starts_with("tenants: ")),
        "how tenants are isolated is said: {cluster}"
    );
    assert!(
        serde_json::from_str::<Value>(&cli_ok(&daemon, &token, &["--json", "cluster"])).is_ok()
    );

    let tenants = cli_ok(&daemon, &admin_token, &["tenants"]);
    assert!(
        tenants.lines().next().is_some_and(|h| h.contains("tenant")
            && h.contains("weight")
            && h.contains("GPU quota")),
        "{tenants}"
    );
    assert!(
        tenants
            .lines()
            .any(|l| l.starts_with("team-a ") && l.trim_end().ends_with("none")),
        "{tenants}"
    );
    let listed: Value =
        serde_json::from_str(&cli_ok(&daemon, &admin_token, &["--json", "tenants"])).expect("JSON");
    assert_eq!(listed["tenants"][0]["name"], "team-a");
    admin
        .post(&format!("/v1/jobs/{running}/cancel"), &json!({}))
        .expect("cancels");
}

#[test]
fn submit_exports_the_environment_minus_the_variables_arbiter_owns() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = start(&dir.path().join("data"), "", &["--gpus", "1xa100"]);
    let (token, a) = daemon.tenant_with_token("team-a");
    let submit_env = |args: &[&str]| -> Output {
        Command::new(env!("CARGO_BIN_EXE_arbiter"))
            .arg("submit")
            .args(args)
            .env("ARBITER_URL", &daemon.url)
            .env("ARBITER_TOKEN", &token)
            .env("FROM_SHELL", "yes")
            .env("CUDA_VISIBLE_DEVICES", "7")
            .env("CUDA_DEVICE_ORDER", "FASTEST_FIRST")
            .env("ARBITER_SOMETHING", "x")
            .output()
            .expect("runs")
    };
    let env_of = |out: &Output| -> Value {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let id: u64 = String::from_utf8_lossy(&out.stdout)
            .trim()
            .rsplit(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .expect("job id");
        a.get(&format!("/v1/jobs/{id}")).expect("job")["request"]["env"].clone()
    };
    // Default (ALL): the shell's variables, without Arbiter's.
    let env = env_of(&submit_env(&["--env", "EXTRA=1", "--", "true"]));
    assert_eq!(
        (env["FROM_SHELL"].as_str(), env["EXTRA"].as_str()),
        (Some("yes"), Some("1")),
        "{env}"
    );
    for owned in [
        "ARBITER_TOKEN",
        "ARBITER_URL",
        "ARBITER_SOMETHING",
        "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER",
    ] {
        assert!(env.get(owned).is_none(), "{owned} was exported: {env}");
    }
    // NONE, and a list.
    assert_eq!(
        env_of(&submit_env(&[
            "--export", "NONE", "--env", "A=1", "--", "true"
        ])),
        json!({ "A": "1" })
    );
    assert_eq!(
        env_of(&submit_env(&["--export", "FROM_SHELL,B=2", "--", "true"])),
        json!({ "FROM_SHELL": "yes", "B": "2" })
    );
    // Setting one Arbiter owns is refused with a clear message.
    let refused = submit_env(&["--env", "CUDA_VISIBLE_DEVICES=0", "--", "true"]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("Arbiter sets CUDA_VISIBLE_DEVICES"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let help = Command::new(env!("CARGO_BIN_EXE_arbiter"))
        .args(["submit", "--help"])
        .output()
        .expect("runs");
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("--export") && help.contains("CUDA_VISIBLE_DEVICES"),
        "{help}"
    );
}
