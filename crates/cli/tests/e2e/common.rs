//! The harness of the daemon's end-to-end tests: a real `arbiter serve` process on a port the OS
//! picks, its stderr kept in a file, helpers to submit and wait.
#![allow(dead_code)]

use arbiter_daemon::api::client::{Client, ClientError};
use serde_json::{Value, json};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `tenant_uid_range` line of its own for each test daemon. Daemons on one machine must not
/// share automatic uids: each kills the processes of its uids that left their runs, and tests run
/// many daemons at once.
pub fn own_uid_range() -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let base = 1_950_000_000 + (std::process::id() % 10_000) * 1_000 + (n % 50) * 20;
    format!("tenant_uid_range = [{base}, {}]\n", base + 19)
}

/// Whether the tests run as root (then the daemon isolates tenants with real uids).
pub fn is_root() -> bool {
    nix::unistd::Uid::effective().is_root()
}

/// A running daemon.
pub struct Daemon {
    pub child: Child,
    pub url: String,
    /// `host:port` it listens on.
    pub addr: String,
    pub data_dir: PathBuf,
    pub stderr_path: PathBuf,
}

/// How to start one.
#[derive(Default)]
pub struct Options<'a> {
    /// Extra `serve` arguments.
    pub args: &'a [&'a str],
    /// A config file's text (written beside the data dir).
    pub config: Option<&'a str>,
    /// Run the daemon as this uid (the test must be root).
    pub uid: Option<u32>,
}

impl Daemon {
    /// Starts `arbiter serve --data-dir DIR --listen 127.0.0.1:0 ARGS`.
    pub fn start(data_dir: &Path, args: &[&str]) -> Daemon {
        Self::start_with(
            data_dir,
            Options {
                args,
                ..Default::default()
            },
        )
    }

    /// Starts a daemon; panics with its stderr if it does not come up.
    pub fn start_with(data_dir: &Path, options: Options<'_>) -> Daemon {
        match Self::try_start(data_dir, options) {
            Ok(d) => d,
            Err(stderr) => panic!("daemon did not start:\n{stderr}"),
        }
    }

    /// Starts a daemon, or returns its stderr if it exits (or does not listen within 20 s).
    pub fn try_start(data_dir: &Path, options: Options<'_>) -> Result<Daemon, String> {
        let addr_file = data_dir.join("daemon.addr");
        let _ = std::fs::remove_file(&addr_file);
        let parent = data_dir.parent().unwrap_or(data_dir);
        let name = data_dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("data");
        let stderr_path = parent.join(format!("{name}.stderr"));
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&stderr_path)
            .expect("stderr file");
        let mut command = Command::new(env!("CARGO_BIN_EXE_arbiter"));
        command
            .args([
                "serve",
                "--data-dir",
                data_dir.to_str().expect("utf-8"),
                "--listen",
                "127.0.0.1:0",
            ])
            .args(options.args);
        // Without root the daemon cannot give tenants their own uids and serves one tenant
        // unless told that sharing its identity is accepted; tests that create several tenants
        // accept it (the isolation tests pass their own config).
        let shared = if is_root() {
            ""
        } else {
            "allow_shared_identity = true\n"
        };
        let text = format!("{}{}", options.config.unwrap_or(shared), own_uid_range());
        let path = parent.join(format!("{name}.toml"));
        std::fs::write(&path, text).expect("config");
        command.args(["--config", path.to_str().expect("utf-8")]);
        if let Some(uid) = options.uid {
            command.uid(uid).gid(uid);
        }
        let mut child = command
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("daemon starts");
        let deadline = Instant::now() + Duration::from_secs(20);
        let listen = loop {
            if let Ok(addr) = std::fs::read_to_string(&addr_file)
                && addr.ends_with('\n')
            {
                break addr.trim().to_string();
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "exited with {status}: {}",
                    std::fs::read_to_string(&stderr_path).unwrap_or_default()
                ));
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                return Err(format!(
                    "did not listen within 20 s: {}",
                    std::fs::read_to_string(&stderr_path).unwrap_or_default()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Ok(Daemon {
            child,
            url: format!("http://{listen}"),
            addr: listen,
            data_dir: data_dir.to_path_buf(),
            stderr_path,
        })
    }

    /// The admin token.
    pub fn admin_token(&self) -> String {
        std::fs::read_to_string(self.data_dir.join("admin.token"))
            .expect("admin token")
            .trim()
            .to_string()
    }

    /// A client with the admin token.
    pub fn admin(&self) -> Client {
        Client::new(&self.url, &self.admin_token())
    }

    /// Creates a tenant; returns its token and a client with it.
    pub fn tenant_with_token(&self, name: &str) -> (String, Client) {
        let token = self
            .admin()
            .post("/v1/tenants", &json!({ "name": name }))
            .expect("tenant created")["token"]
            .as_str()
            .expect("token")
            .to_string();
        let client = Client::new(&self.url, &token);
        (token, client)
    }

    /// Creates a tenant; returns a client with its token.
    pub fn tenant(&self, name: &str) -> Client {
        self.tenant_with_token(name).1
    }

    /// Sends `signal` (`TERM`, `INT`) and waits for the process to exit.
    pub fn signal_and_wait(&mut self, signal: &str) -> std::process::ExitStatus {
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the daemon did not exit after SIG{signal}: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What the daemon wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill9();
    }
}

pub fn submit(client: &Client, body: Value) -> u64 {
    client.post("/v1/jobs", &body).expect("accepted")["id"]
        .as_u64()
        .expect("id")
}

pub fn state_of(client: &Client, id: u64) -> String {
    client.get(&format!("/v1/jobs/{id}")).expect("job")["state"]["state"]
        .as_str()
        .expect("state")
        .to_string()
}

pub fn wait_for(what: &str, timeout_s: u64, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(timeout_s);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The HTTP status and message of a refused call.
pub fn refused(r: Result<Value, ClientError>) -> (u16, String) {
    match r {
        Err(ClientError::Status { status, message }) => (status, message),
        other => panic!("expected an error status, got {other:?}"),
    }
}

/// The checkpoint directory the daemon gave job `id`.
pub fn checkpoint_dir(client: &Client, id: u64) -> PathBuf {
    PathBuf::from(
        client.get(&format!("/v1/jobs/{id}")).expect("job")["checkpoint_dir"]
            .as_str()
            .expect("checkpoint_dir"),
    )
}

/// Runs the `arbiter` binary as a client of `daemon` with `token`.
pub fn cli(daemon: &Daemon, token: &str, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_arbiter"))
        .args(args)
        .env("ARBITER_URL", &daemon.url)
        .env("ARBITER_TOKEN", token)
        .output()
        .expect("binary runs")
}

/// [`cli`], which must succeed; its standard output.
pub fn cli_ok(daemon: &Daemon, token: &str, args: &[&str]) -> String {
    let out = cli(daemon, token, args);
    assert!(
        out.status.success(),
        "arbiter {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// A data directory `data` in `dir` for a daemon without privileges: as root, owned by `nobody`
/// (65534), whose uid is returned to run the daemon as; otherwise the test's own user's.
pub fn unprivileged_data_dir(dir: &Path) -> (PathBuf, Option<u32>) {
    use std::os::unix::fs::PermissionsExt;
    let data = dir.join("data");
    std::fs::create_dir(&data).expect("mkdir");
    let uid = is_root().then_some(65534);
    if let Some(uid) = uid {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::os::unix::fs::chown(&data, Some(uid), Some(uid)).expect("chown");
    }
    (data, uid)
}
