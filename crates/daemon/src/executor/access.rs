//! Why a job's command could not be run by its tenant's user. Under isolation a job runs as
//! its tenant's own uid, which cannot enter the daemon admin's home: a program (a Python venv,
//! the job helper) installed under `/root` works for the admin's tests and fails for every
//! tenant with the shell's bare "Permission denied" (exit 126 for a path, 127 for a name found
//! on `PATH`). The run wrapper asks [`explain`] after such an exit and writes the answer into
//! the job's log: which directory or file stops that uid, and where to install instead.
//!
//! Permissions are read from the file modes (owner, group, other), as the kernel checks them for
//! a uid with only its primary group (the wrapper drops supplementary groups); ACLs are not read.

use super::Launch;
use crate::security::identity::UnixIdentity;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

/// Exit codes after which the command may not have been executable: `sh` exits 126 when a path
/// it was given cannot be executed, 127 when a name it looked up on `PATH` could not be.
pub const NOT_EXECUTABLE_CODES: [i32; 2] = [126, 127];

/// The job's `PATH` where the environment has none (the daemon's default).
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Where a uid is stopped on the way to a program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    /// The directory it cannot search, or the file it cannot execute.
    pub at: PathBuf,
    /// Whether `at` is a directory.
    pub dir: bool,
    /// Its permission bits.
    pub mode: u32,
    /// Its owner.
    pub owner: u32,
}

/// The line for the job's log when a run of `launch` ended with `code`: why its command is not
/// executable by its tenant's user, where that is the reason; `None` otherwise (the job's own
/// code, a program that is simply missing, or no identity of its own).
pub fn explain(launch: &Launch, code: i32) -> Option<String> {
    let identity = launch.identity.filter(|i| i.uid != 0)?;
    if !NOT_EXECUTABLE_CODES.contains(&code) {
        return None;
    }
    let program = program_of(&launch.command)?;
    let path_var = launch.env.get("PATH").map_or(DEFAULT_PATH, String::as_str);
    let (path, denial) = denied_program(&program, &launch.working_dir, path_var, identity)?;
    let tenant = launch.tenant.as_deref().map_or_else(
        || "the tenant's user".to_string(),
        |t| format!("tenant {t}'s user"),
    );
    Some(message(&program, &path, &denial, &tenant, identity))
}

/// The sentence itself (see [`explain`]).
pub fn message(
    program: &str,
    path: &Path,
    denial: &Denial,
    tenant: &str,
    identity: UnixIdentity,
) -> String {
    let resolved = if Path::new(program) == path {
        String::new()
    } else {
        format!(" ({})", path.display())
    };
    let what = if denial.dir {
        "a directory it cannot enter"
    } else {
        "a file it cannot execute"
    };
    format!(
        "the command `{program}`{resolved} is not executable by {tenant} (uid {}): Permission denied at {} ({what}: mode {:04o}, owner uid {}) — install it where every tenant can read it, e.g. /opt/arbiter/venv with o+rx or the system's site-packages, not under /root (docs/production.md, \"Where jobs' programs live\")",
        identity.uid,
        denial.at.display(),
        denial.mode & 0o7777,
        denial.owner
    )
}

/// The program a shell command starts: its first word with quotes removed, after any leading
/// `NAME=value` assignments and an `exec`. `None` where the command starts with shell syntax
/// this does not follow (a group, a substitution, a keyword).
pub fn program_of(command: &str) -> Option<String> {
    let mut words = command
        .split_whitespace()
        .map(|w| w.trim_matches(|c| c == '\'' || c == '"'));
    let word = words.find(|w| !is_assignment(w) && *w != "exec")?;
    let syntax = |c: char| "$`(){};|&<>*?[]\\".contains(c);
    let keyword = ["if", "for", "while", "until", "case", "!", "{", "[["].contains(&word);
    (!word.is_empty() && !keyword && !word.contains(syntax)).then(|| word.to_string())
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty() && name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric())
    })
}

/// Where `program` is (a path, against `working_dir` when relative; a bare name, in each
/// directory of `path_var`) and where `identity` is stopped on the way there. `None` when it can
/// reach one of them, or none is there (then the shell said "not found", which needs no
/// explaining).
///
/// Nothing is looked at beyond a place the uid cannot enter (see [`reach`]): a candidate in a
/// directory it cannot search is reported by that directory whether or not the program is
/// there, or the explanation would tell a tenant which files exist where it may not look.
pub fn denied_program(
    program: &str,
    working_dir: &Path,
    path_var: &str,
    identity: UnixIdentity,
) -> Option<(PathBuf, Denial)> {
    let candidates: Vec<PathBuf> = if program.contains('/') {
        vec![working_dir.join(program)]
    } else {
        path_var
            .split(':')
            .filter(|d| !d.is_empty())
            .map(|d| working_dir.join(d).join(program))
            .collect()
    };
    let mut first = None;
    for path in candidates {
        match reach(&path, identity) {
            // The shell would have run this one: the exit was the program's own.
            Reach::Reached => return None,
            Reach::Missing => {}
            Reach::Denied(d) => {
                first.get_or_insert((path, d));
            }
        }
    }
    first
}

/// The first place `identity` is stopped on the way to executing `path`: a directory on the way
/// (symbolic links followed where they are), the file, or a script's interpreter (`#!`).
pub fn denial_on_the_way(path: &Path, identity: UnixIdentity) -> Option<Denial> {
    match reach(path, identity) {
        Reach::Denied(d) => Some(d),
        Reach::Reached | Reach::Missing => None,
    }
}

/// How far a uid gets towards executing a file.
enum Reach {
    /// It may execute it (and its interpreter, for a script it may read).
    Reached,
    /// Stopped there.
    Denied(Denial),
    /// Not there (as far as the uid can look).
    Missing,
}

/// Most symbolic links followed on one walk (the kernel's limit).
const MAX_LINKS: u32 = 40;

/// [`Reach`] for `path`: the walk to it, then its execute bit, then, for a script the uid may
/// read, its interpreter. (A script it may not read is not read here either.)
fn reach(path: &Path, identity: UnixIdentity) -> Reach {
    let file = match walk(path, identity, &mut 0) {
        Ok(file) => file,
        Err(stop) => return stop,
    };
    if let Some(denial) = denied_at(&file, identity, 0o1) {
        return Reach::Denied(denial);
    }
    if denied_at(&file, identity, 0o4).is_some() {
        return Reach::Reached;
    }
    match interpreter_of(&file) {
        Some(interpreter) => match walk(&interpreter, identity, &mut 0) {
            Ok(found) => denied_at(&found, identity, 0o1).map_or(Reach::Reached, Reach::Denied),
            Err(Reach::Denied(d)) => Reach::Denied(d),
            Err(_) => Reach::Reached,
        },
        None => Reach::Reached,
    }
}

/// Walks `path` as the kernel resolves it for `identity`: each directory must let it search
/// before a name in it is looked up, and a symbolic link is followed from where it is (its
/// target is walked the same way). `Ok` with the resolved path when every step is allowed;
/// otherwise where it stopped (`Denied`, or `Missing` for a name that is not there).
fn walk(path: &Path, identity: UnixIdentity, links: &mut u32) -> Result<PathBuf, Reach> {
    let mut at = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::CurDir => {}
            Component::RootDir => at.push(component),
            Component::ParentDir => {
                if let Some(denial) = denied_at(&at, identity, 0o1) {
                    return Err(Reach::Denied(denial));
                }
                at.pop();
            }
            Component::Normal(name) => {
                if let Some(denial) = denied_at(&at, identity, 0o1) {
                    return Err(Reach::Denied(denial));
                }
                let next = at.join(name);
                let meta = std::fs::symlink_metadata(&next).map_err(|_| Reach::Missing)?;
                if !meta.file_type().is_symlink() {
                    at = next;
                    continue;
                }
                *links += 1;
                let target = std::fs::read_link(&next)
                    .ok()
                    .filter(|_| *links <= MAX_LINKS)
                    .ok_or(Reach::Missing)?;
                at = walk(&at.join(target), identity, links)?;
            }
        }
    }
    Ok(at)
}

/// `path`'s denial of the permission bits `want` to `identity`, if it denies them (a directory:
/// 0o1 is search). The walk reached it, so the uid may know it is there.
fn denied_at(path: &Path, identity: UnixIdentity, want: u32) -> Option<Denial> {
    let meta = std::fs::metadata(path).ok()?;
    (!allows(meta.mode(), meta.uid(), meta.gid(), identity, want)).then(|| Denial {
        at: path.to_path_buf(),
        dir: meta.is_dir(),
        mode: meta.mode(),
        owner: meta.uid(),
    })
}

/// Whether a file of `mode`, owned by `owner`:`group`, grants `identity` the permission bits
/// `want` (0o1: execute/search): the owner's bits for its owner, else the group's for its
/// group, else the others' — the first class that matches decides, as in the kernel.
pub fn allows(mode: u32, owner: u32, group: u32, identity: UnixIdentity, want: u32) -> bool {
    let bits = if identity.uid == owner {
        mode >> 6
    } else if identity.gid == group {
        mode >> 3
    } else {
        mode
    };
    bits & want == want
}

/// A script's interpreter: the first word after `#!` on its first line.
fn interpreter_of(path: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .ok()?;
    let line = std::str::from_utf8(&head[..n]).ok()?.lines().next()?;
    let interpreter = line.strip_prefix("#!")?.split_whitespace().next()?;
    interpreter
        .starts_with('/')
        .then(|| PathBuf::from(interpreter))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A uid and gid no file of the test's own belongs to.
    const TENANT: UnixIdentity = UnixIdentity {
        uid: 1_950_999_901,
        gid: 1_950_999_901,
    };

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    fn launch(command: &str, working_dir: &Path, path_var: &str) -> Launch {
        let tmp = Path::new("/nonexistent");
        Launch {
            command: command.into(),
            working_dir: working_dir.into(),
            env: [("PATH".to_string(), path_var.to_string())].into(),
            log_path: tmp.join("log"),
            exit_file: tmp.join("exit"),
            pid_file: tmp.join("pid"),
            checkpoint_dir: tmp.join("ckpt"),
            identity: Some(TENANT),
            tenant: Some("team-a".into()),
            cgroup: None,
            max_processes: None,
            max_log_bytes: None,
            pid_namespace: false,
            memory_rlimit_bytes: None,
        }
    }

    /// `dir/home` (0700, like /root) holding `bin/python` (0755), and `dir/opt/bin` (0755).
    fn layout(dir: &Path) -> (PathBuf, PathBuf) {
        chmod(dir, 0o755);
        let home_bin = dir.join("home/venv/bin");
        let opt_bin = dir.join("opt/bin");
        for d in [&home_bin, &opt_bin] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        std::fs::write(home_bin.join("python"), "#!/bin/sh\n").expect("write");
        chmod(&home_bin.join("python"), 0o755);
        chmod(&dir.join("home"), 0o700);
        (home_bin, opt_bin)
    }

    #[test]
    fn the_class_that_matches_first_decides() {
        let t = TENANT;
        assert!(allows(0o755, 0, 0, t, 1));
        assert!(!allows(0o750, 0, 0, t, 1));
        assert!(allows(0o750, 0, t.gid, t, 1));
        // The owner's bits hold for the owner even where others may.
        assert!(!allows(0o601, t.uid, 0, t, 1));
    }

    #[test]
    fn the_program_is_the_first_word_after_assignments() {
        assert_eq!(
            program_of("python train.py --epochs 90").as_deref(),
            Some("python")
        );
        assert_eq!(
            program_of("  OMP_NUM_THREADS=4 exec '/opt/x/run' a").as_deref(),
            Some("/opt/x/run")
        );
        assert_eq!(program_of("$HOME/run.sh"), None);
        assert_eq!(program_of("if true; then x; fi"), None);
        assert_eq!(program_of(""), None);
    }

    #[test]
    fn a_program_under_a_home_other_tenants_cannot_enter_is_explained() {
        let dir = tempfile::tempdir().expect("dir");
        let (home_bin, opt_bin) = layout(dir.path());
        let program = home_bin.join("python");
        // By path (exit 126): the home directory stops the tenant's uid.
        let text = explain(
            &launch(
                &format!("{} train.py", program.display()),
                dir.path(),
                "/usr/bin",
            ),
            126,
        )
        .expect("explained");
        let home = dir.path().join("home");
        assert!(
            text.contains(&format!(
                "the command `{}` is not executable by tenant team-a's user (uid {})",
                program.display(),
                TENANT.uid
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "Permission denied at {} (a directory it cannot enter: mode 0700",
                home.display()
            )),
            "{text}"
        );
        assert!(
            text.contains("install it where every tenant can read it"),
            "{text}"
        );
        // By name on PATH (dash exits 127 then): the same, naming where it was found.
        let path_var = format!("{}:{}", home_bin.display(), opt_bin.display());
        let text =
            explain(&launch("python train.py", dir.path(), &path_var), 127).expect("explained");
        assert!(
            text.contains(&format!("the command `python` ({})", program.display())),
            "{text}"
        );
        // Other exit codes, the daemon's own uid, or a program the tenant can reach elsewhere on
        // PATH: the exit was the program's own.
        assert_eq!(explain(&launch("python", dir.path(), &path_var), 1), None);
        assert_eq!(
            explain(
                &Launch {
                    identity: None,
                    ..launch("python", dir.path(), &path_var)
                },
                127
            ),
            None
        );
        std::fs::write(opt_bin.join("python"), "#!/bin/sh\n").expect("write");
        chmod(&opt_bin.join("python"), 0o755);
        assert_eq!(explain(&launch("python", dir.path(), &path_var), 127), None);
        // A program that is simply not there, where the uid can look: the shell's "not found"
        // says it. (Behind a directory it cannot search nothing is looked up: see below.)
        assert_eq!(
            explain(
                &launch("nosuchprogram", dir.path(), &opt_bin.display().to_string()),
                127
            ),
            None
        );
    }

    #[test]
    fn nothing_beyond_a_place_the_tenant_cannot_enter_is_told() {
        let dir = tempfile::tempdir().expect("dir");
        let (home_bin, opt_bin) = layout(dir.path());
        let home = dir.path().join("home");
        // Whether a name exists behind the home directory: the same answer either way.
        let path_var = home_bin.display().to_string();
        let there = explain(&launch("python", dir.path(), &path_var), 127).expect("explained");
        let absent =
            explain(&launch("nosuchprogram", dir.path(), &path_var), 127).expect("explained");
        assert_eq!(
            there.replace("python", "X"),
            absent.replace("nosuchprogram", "X")
        );
        // A link of the tenant's own pointing behind it: the home is named, not the file's mode.
        let secret = home_bin.join("secret");
        std::fs::write(&secret, "").expect("write");
        chmod(&secret, 0o640);
        let link = opt_bin.join("link");
        std::os::unix::fs::symlink(&secret, &link).expect("symlink");
        let denial = denial_on_the_way(&link, TENANT).expect("denied");
        assert_eq!((denial.at, denial.mode & 0o7777), (home.clone(), 0o700));
        // A script the tenant may execute but not read: its interpreter is not read for it.
        let script = opt_bin.join("unreadable");
        std::fs::write(
            &script,
            format!("#!{}\n", home_bin.join("python").display()),
        )
        .expect("write");
        chmod(&script, 0o711);
        assert_eq!(denial_on_the_way(&script, TENANT), None);
    }

    #[test]
    fn a_script_whose_interpreter_is_out_of_reach_is_explained() {
        let dir = tempfile::tempdir().expect("dir");
        let (home_bin, opt_bin) = layout(dir.path());
        // A console script installed outside, its `#!` naming the venv's python under the home.
        let script = opt_bin.join("train");
        std::fs::write(
            &script,
            format!("#!{}\nprint()\n", home_bin.join("python").display()),
        )
        .expect("write");
        chmod(&script, 0o755);
        let denial = denial_on_the_way(&script, TENANT).expect("denied");
        assert_eq!((denial.at, denial.dir), (dir.path().join("home"), true));
        // A file without the execute bit for others.
        chmod(&script, 0o744);
        let denial = denial_on_the_way(&script, TENANT).expect("denied");
        assert_eq!((denial.at, denial.dir), (script, false));
    }
}
