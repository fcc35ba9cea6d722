//! Parsers for what Slurm's tools print (`sbatch --parsable`, `squeue --json`, `sinfo --json`,
//! `sacct -n -P`) and for hostlists and GRES strings; the facts they rely on are in [`super::cli`].

use super::error::{SlurmError, parse_err};
use serde_json::Value;

/// A job's state as Slurm names it (`job_state`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlurmJobState {
    /// Waiting for resources or its start time.
    Pending,
    /// Running.
    Running,
    /// Stopped by `scontrol suspend`.
    Suspended,
    /// Ending: some processes may still be alive.
    Completing,
    /// Exited 0.
    Completed,
    /// Exited non-zero, or could not launch.
    Failed,
    /// Cancelled (`scancel`).
    Cancelled,
    /// Hit its time limit.
    Timeout,
    /// A node failed.
    NodeFail,
    /// Preempted by Slurm.
    Preempted,
    /// Killed for exceeding its memory.
    OutOfMemory,
    /// Nodes failed to boot.
    BootFail,
    /// Missed its deadline.
    Deadline,
    /// Any other state string (kept verbatim).
    Other(String),
}

impl SlurmJobState {
    /// Maps Slurm's state string (case-insensitive).
    pub fn parse(s: &str) -> Self {
        match s.trim().to_ascii_uppercase().as_str() {
            "PENDING" => Self::Pending,
            "RUNNING" => Self::Running,
            "SUSPENDED" => Self::Suspended,
            "COMPLETING" => Self::Completing,
            "COMPLETED" => Self::Completed,
            "FAILED" => Self::Failed,
            "CANCELLED" => Self::Cancelled,
            "TIMEOUT" => Self::Timeout,
            "NODE_FAIL" => Self::NodeFail,
            "PREEMPTED" => Self::Preempted,
            "OUT_OF_MEMORY" => Self::OutOfMemory,
            "BOOT_FAIL" => Self::BootFail,
            "DEADLINE" => Self::Deadline,
            _ => Self::Other(s.trim().to_string()),
        }
    }

    /// True for terminal states. `Completing` is not: processes may still be running.
    /// `Other` is not either, so an unknown state is never mistaken for an end.
    pub fn is_finished(&self) -> bool {
        matches!(
            self,
            Self::Completed
                | Self::Failed
                | Self::Cancelled
                | Self::Timeout
                | Self::NodeFail
                | Self::Preempted
                | Self::OutOfMemory
                | Self::BootFail
                | Self::Deadline
        )
    }
}

/// One job as `squeue --json` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmJob {
    /// Slurm job id.
    pub id: u64,
    /// Job name.
    pub name: String,
    /// Partition.
    pub partition: String,
    /// State.
    pub state: SlurmJobState,
    /// `state_reason` (`None`, `Resources`, `NonZeroExitCode`, `JobLaunchFailure`, ...).
    pub reason: String,
    /// Allocated nodes, hostlist expanded (empty while pending).
    pub nodes: Vec<String>,
    /// Exit status of a finished job that exited normally (`None` while running or if killed).
    pub exit_code: Option<i32>,
    /// Signal that ended a finished job, if it died of one.
    pub signal: Option<i32>,
    /// Times Slurm restarted (requeued) it.
    pub restarts: u32,
    /// The uid it runs as.
    pub user_id: Option<u32>,
}

/// One node as `sinfo --json` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmNode {
    /// Node name.
    pub name: String,
    /// CPUs.
    pub cpus: u32,
    /// Memory in MB (`real_memory`).
    pub memory_mb: u64,
    /// GPU type when all its GPUs share one; `None` when untyped, mixed or no GPU.
    pub gpu_type: Option<String>,
    /// Number of GPUs (all types).
    pub gpus: u32,
    /// Available features (`Feature=` in slurm.conf).
    pub features: Vec<String>,
    /// Base state (`idle`, `mixed`, `allocated`, `down`, ...).
    pub state: String,
    /// State flags (`DRAIN`, `NOT_RESPONDING`, ...).
    pub state_flags: Vec<String>,
    /// Partitions the node is in.
    pub partitions: Vec<String>,
}

impl SlurmNode {
    /// Whether Slurm would start a new job here now: its base state is one that runs jobs
    /// (`idle`, `mixed`, `allocated`, `completing`) and no flag stops new ones (`DRAIN`,
    /// `NOT_RESPONDING`, `FAIL`, `MAINTENANCE`, `REBOOT_REQUESTED`, `POWERED_DOWN`, ...).
    pub fn takes_new_jobs(&self) -> bool {
        const RUNS: [&str; 4] = ["idle", "mixed", "allocated", "completing"];
        const STOPS: [&str; 11] = [
            "DRAIN",
            "DRAINING",
            "DRAINED",
            "NOT_RESPONDING",
            "FAIL",
            "FAILING",
            "MAINTENANCE",
            "MAINT",
            "REBOOT_REQUESTED",
            "REBOOT_ISSUED",
            "POWERED_DOWN",
        ];
        let base = self.state.to_ascii_lowercase();
        RUNS.contains(&base.as_str())
            && !self.state_flags.iter().any(|f| {
                STOPS.contains(&f.to_ascii_uppercase().as_str())
                    || f.to_ascii_uppercase().starts_with("POWER")
            })
    }
}

/// One entry of a GRES string such as `gpu:v100:4(S:0-1)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gres {
    /// Resource name (`gpu`).
    pub name: String,
    /// Type (`v100`), if given.
    pub kind: Option<String>,
    /// Count.
    pub count: u64,
}

/// The job id from `sbatch --parsable`: `123` or `123;cluster`.
pub fn parse_sbatch_output(stdout: &str) -> Result<u64, SlurmError> {
    let line = stdout
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("");
    let id = line.split(';').next().unwrap_or("").trim();
    id.parse().map_err(|_| {
        parse_err(
            "sbatch --parsable output",
            format!("expected `ID` or `ID;cluster`, got {stdout:?}"),
        )
    })
}

/// Splits at `sep` outside `[]` and `()`.
fn split_top(s: &str, sep: char) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' => depth -= 1,
            c if c == sep && depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

/// Expands a Slurm hostlist: `n[1-2,4],gpu-a,x[01-03]` gives n1 n2 n4 gpu-a x01 x02 x03.
/// Zero padding follows the lower bound's width; several brackets multiply out.
pub fn expand_hostlist(list: &str) -> Result<Vec<String>, SlurmError> {
    const MAX: usize = 1 << 16; // a typo like n[1-99999999] must not allocate forever
    let mut hosts = Vec::new();
    for item in split_top(list.trim(), ',')
        .into_iter()
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        hosts.extend(expand_one(item, list)?);
        if hosts.len() > MAX {
            return Err(parse_err(
                format!("hostlist {list:?}"),
                format!("more than {MAX} hosts"),
            ));
        }
    }
    Ok(hosts)
}

fn expand_one(item: &str, list: &str) -> Result<Vec<String>, SlurmError> {
    let err = |r: &str| parse_err(format!("hostlist {list:?}"), r.to_string());
    let Some(open) = item.find('[') else {
        return if item.contains(']') {
            Err(err("`]` without `[`"))
        } else {
            Ok(vec![item.to_string()])
        };
    };
    let close = item[open..]
        .find(']')
        .map(|c| open + c)
        .ok_or_else(|| err("`[` without `]`"))?;
    let (prefix, body, rest) = (&item[..open], &item[open + 1..close], &item[close + 1..]);
    let tails = expand_one(rest, list)?;
    let mut out = Vec::new();
    for range in body.split(',') {
        let (lo, hi) = range.split_once('-').unwrap_or((range, range));
        let (a, b) = match (lo.trim().parse::<u64>(), hi.trim().parse::<u64>()) {
            (Ok(a), Ok(b)) if a <= b && b - a < 1 << 16 => (a, b),
            _ => return Err(err(&format!("bad range {range:?}"))),
        };
        let width = lo.trim().len();
        for n in a..=b {
            for tail in &tails {
                out.push(format!("{prefix}{n:0width$}{tail}"));
            }
            if out.len() > 1 << 16 {
                return Err(err("more than 65536 hosts"));
            }
        }
    }
    Ok(out)
}

/// Parses a GRES string: `gpu:v100:4`, `gpu:4`, `gpu:a100:4(S:0-1)`, `gpu:v100:2,gpu:a100:2`;
/// empty or `(null)` is none. A missing count means 1.
pub fn parse_gres(gres: &str) -> Result<Vec<Gres>, SlurmError> {
    let gres = gres.trim();
    if gres.is_empty() || gres == "(null)" {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for entry in split_top(gres, ',') {
        let entry = entry.split('(').next().unwrap_or("").trim(); // drop `(S:0-1)` / `(IDX:..)`
        let mut parts: Vec<&str> = entry.split(':').collect();
        let count = match parts.last().map(|p| p.parse::<u64>()) {
            Some(Ok(n)) if parts.len() > 1 => {
                parts.pop();
                n
            }
            _ => 1,
        };
        let name = parts.first().copied().unwrap_or("");
        if name.is_empty() {
            return Err(parse_err(
                format!("GRES {gres:?}"),
                format!("entry {entry:?} has no name"),
            ));
        }
        // Flags such as `no_consume` may sit between type and count.
        let kind = parts
            .get(1)
            .filter(|k| !k.is_empty() && **k != "no_consume")
            .map(|k| k.to_string());
        out.push(Gres {
            name: name.to_string(),
            kind,
            count,
        });
    }
    Ok(out)
}

/// An integer, either plain (22.05) or `{"set": true, "number": N}` (23.02 and later).
fn num(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::Object(o) if o.get("set").and_then(Value::as_bool) != Some(false) => {
            o.get("number").and_then(num)
        }
        _ => None,
    }
}

/// A string, or the first string of an array (newer versions list states as arrays).
fn first_str(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Array(a) => a.iter().find_map(|x| x.as_str().map(str::to_string)),
        _ => None,
    }
}

/// A comma-separated string or an array of strings.
fn str_list(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::String(s)) => s
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect(),
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|x| x.as_str().map(String::from))
            .collect(),
        _ => Vec::new(),
    }
}

fn str_of(v: Option<&Value>) -> String {
    v.and_then(first_str).unwrap_or_default()
}

/// The `key` array of a `--json` document, or an error quoting Slurm's own `errors`.
/// With no controller, 22.05's `squeue --json` exits 0 after ~9 s with `"jobs": []` and the
/// failure only in `errors`: taken at face value, every job would look gone.
fn json_array<'a>(root: &'a Value, key: &str, what: &str) -> Result<&'a Vec<Value>, SlurmError> {
    let errors = root
        .get("errors")
        .filter(|e| e.as_array().is_none_or(|a| !a.is_empty()));
    if let Some(errors) = errors {
        return Err(SlurmError::Reported {
            what: what.into(),
            errors: errors.to_string(),
        });
    }
    root.get(key)
        .and_then(Value::as_array)
        .ok_or_else(|| parse_err(what, format!("no `{key}` array")))
}

/// `(exit status, signal)` from `exit_code`: 22.05 gives the raw wait status (768 = exit 3,
/// 9 = SIGKILL); 23.02+ an object with `return_code` and `signal`.
fn decode_exit(v: Option<&Value>) -> (Option<i32>, Option<i32>) {
    let Some(v) = v else { return (None, None) };
    if let Some(raw) = num(v) {
        let signal = (raw & 0x7f) as i32;
        return if signal == 0 {
            (Some(((raw >> 8) & 0xff) as i32), None)
        } else {
            (None, Some(signal))
        };
    }
    let signal = v
        .get("signal")
        .and_then(|s| s.get("id").or_else(|| s.get("signal_id")))
        .and_then(num);
    match (
        signal.filter(|s| *s > 0),
        v.get("return_code").and_then(num),
    ) {
        (Some(s), _) => (None, i32::try_from(s).ok()),
        (None, code) => (code.and_then(|c| i32::try_from(c).ok()), None),
    }
}

/// The fields of one `squeue --json` job that Arbiter reads; the dozens of others are skipped
/// without being built (a busy queue prints megabytes, read every poll).
#[derive(serde::Deserialize)]
struct QueueJob {
    job_id: Option<Value>,
    job_state: Option<Value>,
    nodes: Option<Value>,
    exit_code: Option<Value>,
    name: Option<Value>,
    partition: Option<Value>,
    state_reason: Option<Value>,
    restart_cnt: Option<Value>,
    user_id: Option<Value>,
}

#[derive(serde::Deserialize)]
struct Queue {
    jobs: Option<Vec<QueueJob>>,
    errors: Option<Value>,
}

/// Every job in `squeue --json` output (any partition).
pub fn parse_squeue_json(text: &str) -> Result<Vec<SlurmJob>, SlurmError> {
    const WHAT: &str = "squeue --json output";
    let root: Queue = serde_json::from_str(text).map_err(|e| parse_err(WHAT, e.to_string()))?;
    if let Some(errors) = root
        .errors
        .filter(|e| e.as_array().is_none_or(|a| !a.is_empty()))
    {
        return Err(SlurmError::Reported {
            what: WHAT.into(),
            errors: errors.to_string(),
        });
    }
    let queue = root
        .jobs
        .ok_or_else(|| parse_err(WHAT, "no `jobs` array"))?;
    let mut jobs = Vec::with_capacity(queue.len());
    for (i, j) in queue.iter().enumerate() {
        let id = j
            .job_id
            .as_ref()
            .and_then(num)
            .and_then(|n| u64::try_from(n).ok());
        let id = id.ok_or_else(|| parse_err(format!("squeue job #{i}"), "no numeric `job_id`"))?;
        let state = j.job_state.as_ref().and_then(first_str);
        let state = SlurmJobState::parse(
            &state.ok_or_else(|| parse_err(format!("squeue job {id}"), "no `job_state`"))?,
        );
        let nodes = expand_hostlist(&str_of(j.nodes.as_ref()))?;
        let (exit_code, signal) = if state.is_finished() {
            decode_exit(j.exit_code.as_ref())
        } else {
            (None, None)
        };
        jobs.push(SlurmJob {
            id,
            name: str_of(j.name.as_ref()),
            partition: str_of(j.partition.as_ref()),
            reason: str_of(j.state_reason.as_ref()),
            state,
            nodes,
            exit_code,
            signal,
            restarts: j
                .restart_cnt
                .as_ref()
                .and_then(num)
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(0),
            user_id: j
                .user_id
                .as_ref()
                .and_then(num)
                .and_then(|n| u32::try_from(n).ok()),
        });
    }
    Ok(jobs)
}

/// Every node in `sinfo --json` output (any partition).
pub fn parse_sinfo_json(text: &str) -> Result<Vec<SlurmNode>, SlurmError> {
    const WHAT: &str = "sinfo --json output";
    let root: Value = serde_json::from_str(text).map_err(|e| parse_err(WHAT, e.to_string()))?;
    let mut nodes = Vec::new();
    for (i, n) in json_array(&root, "nodes", WHAT)?.iter().enumerate() {
        let name = n.get("name").and_then(Value::as_str);
        let name = name
            .ok_or_else(|| parse_err(format!("sinfo node #{i}"), "no `name`"))?
            .to_string();
        let gres = parse_gres(&str_of(n.get("gres")))?;
        let gpus: Vec<&Gres> = gres.iter().filter(|g| g.name == "gpu").collect();
        let kinds: Vec<Option<&String>> = gpus.iter().map(|g| g.kind.as_ref()).collect();
        let gpu_type = match kinds.first() {
            Some(Some(k)) if kinds.iter().all(|x| *x == Some(*k)) => Some(k.to_string()),
            _ => None,
        };
        let count = |key: &str| {
            n.get(key)
                .and_then(num)
                .and_then(|v| u64::try_from(v).ok())
                .unwrap_or(0)
        };
        nodes.push(SlurmNode {
            cpus: u32::try_from(count("cpus")).unwrap_or(u32::MAX),
            memory_mb: count("real_memory"),
            gpus: u32::try_from(gpus.iter().map(|g| g.count).sum::<u64>()).unwrap_or(u32::MAX),
            gpu_type,
            features: str_list(n.get("features")),
            state: str_of(n.get("state")).to_lowercase(),
            state_flags: str_list(n.get("state_flags")),
            partitions: str_list(n.get("partitions")),
            name,
        });
    }
    Ok(nodes)
}

/// `(State, exit)` for job `id` from `sacct -X -n -P -o JobID,State,ExitCode`. `CANCELLED by 0`
/// reads as `CANCELLED`; `ExitCode` `E:S` as E, or 128 + S when a signal S ended it.
pub fn parse_sacct_output(text: &str, id: u64) -> Result<Option<(String, i32)>, SlurmError> {
    let id = id.to_string();
    let Some(line) = text
        .lines()
        .find(|l| l.split('|').next() == Some(id.as_str()))
    else {
        return Ok(None);
    };
    let what = || format!("sacct line {line:?}");
    let fields: Vec<&str> = line.split('|').collect();
    let [_, state, exit] = fields[..] else {
        return Err(parse_err(what(), "expected JobID|State|ExitCode"));
    };
    let state = state.split_whitespace().next().unwrap_or("").to_string();
    let (code, signal) = exit
        .split_once(':')
        .ok_or_else(|| parse_err(what(), "ExitCode is not E:S"))?;
    let (Ok(code), Ok(signal)) = (code.parse::<i32>(), signal.parse::<i32>()) else {
        return Err(parse_err(what(), "ExitCode is not numeric"));
    };
    Ok(Some((state, if signal != 0 { 128 + signal } else { code })))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SQUEUE: &str = include_str!("fixtures/squeue_22.05.8.json");
    const SINFO: &str = include_str!("fixtures/sinfo_22.05.8.json");

    #[test]
    fn hostlists_expand() {
        let got = expand_hostlist("n[1-2,4],gpu-a,x[01-03]").expect("valid");
        assert_eq!(got, ["n1", "n2", "n4", "gpu-a", "x01", "x02", "x03"]);
        assert_eq!(expand_hostlist("").expect("empty"), Vec::<String>::new());
        assert_eq!(
            expand_hostlist("n[9-10]-ib").expect("suffix"),
            ["n9-ib", "n10-ib"]
        );
        assert_eq!(expand_hostlist("r[1-2]n[1-2]").expect("two").len(), 4);
        for bad in [
            "n[1-",
            "n[3-1]",
            "n[a]",
            "n]1",
            "n[1-99999999]",
            "r[1-60000]n[1-60000]",
        ] {
            let e = expand_hostlist(bad).expect_err(bad).to_string();
            assert!(e.contains("hostlist"), "{e}");
        }
    }

    #[test]
    fn gres_strings() {
        let g = |s| parse_gres(s).expect(s);
        assert_eq!(
            g("gpu:v100:4"),
            [Gres {
                name: "gpu".into(),
                kind: Some("v100".into()),
                count: 4
            }]
        );
        assert_eq!(
            g("gpu:4"),
            [Gres {
                name: "gpu".into(),
                kind: None,
                count: 4
            }]
        );
        assert_eq!(g("gpu:a100:4(S:0-1)")[0].count, 4);
        assert_eq!(g("gpu:v100:2(S:0,1),gpu:a100:1").len(), 2);
        assert_eq!(
            g("gpu:tesla:no_consume:2")[0].kind.as_deref(),
            Some("tesla")
        );
        assert_eq!(g("gpu")[0].count, 1);
        assert!(g("(null)").is_empty() && g("").is_empty());
        assert!(parse_gres(":4").is_err());
    }

    #[test]
    fn sbatch_output() {
        assert_eq!(parse_sbatch_output("123\n").expect("plain"), 123);
        assert_eq!(parse_sbatch_output("124;lab\n").expect("cluster"), 124);
        let e = parse_sbatch_output("Submitted batch job x\n")
            .expect_err("garbage")
            .to_string();
        assert!(e.contains("sbatch --parsable output"), "{e}");
    }

    #[test]
    fn squeue_fixture() {
        let jobs = parse_squeue_json(SQUEUE).expect("fixture parses");
        let by = |id: u64| jobs.iter().find(|j| j.id == id).expect("job in fixture");
        use SlurmJobState::*;
        // (id, state, reason, nodes, exit, signal) as observed on the lab cluster.
        type Want<'a> = (
            u64,
            SlurmJobState,
            &'a str,
            &'a [&'a str],
            Option<i32>,
            Option<i32>,
        );
        let want: [Want; 8] = [
            (47, Completed, "None", &["n1", "n2"], Some(0), None), // 2-node job as uid 1900000200
            (48, Cancelled, "None", &["n1"], Some(143), None),     // scancel after a TERM trap
            (49, Failed, "NonZeroExitCode", &["n2"], Some(3), None),
            (50, Completed, "None", &["n2"], Some(0), None),
            (51, Running, "None", &["n3"], None, None),
            (52, Pending, "Resources", &[], None, None),
            (39, Failed, "JobLaunchFailure", &["n2"], None, Some(53)), // output not writable
            (37, Cancelled, "BeginTime", &[], Some(0), None),
        ];
        for (id, state, reason, nodes, exit, signal) in want {
            let j = by(id);
            assert_eq!(
                (&j.state, j.reason.as_str(), j.exit_code, j.signal),
                (&state, reason, exit, signal),
                "{j:?}"
            );
            assert_eq!(j.nodes, nodes, "{j:?}");
            assert_eq!(j.partition, "arbiter");
        }
        assert_eq!(
            (by(47).user_id, by(48).user_id, by(37).restarts),
            (Some(1_900_000_200), Some(0), 1)
        );
        assert_eq!(by(49).name, "wrap");
        assert!(
            by(49).state.is_finished() && !by(51).state.is_finished() && !Completing.is_finished()
        );
        assert_eq!(SlurmJobState::parse("requeued"), Other("requeued".into()));
    }

    #[test]
    fn squeue_tolerates_and_names_what_is_missing() {
        let minimal = r#"{"jobs":[{"job_id":5,"job_state":"RUNNING","new_key":{"x":1}}]}"#;
        let j = parse_squeue_json(minimal).expect("minimal");
        assert_eq!(
            (j[0].id, &j[0].state, j[0].nodes.len(), j[0].user_id),
            (5, &SlurmJobState::Running, 0, None)
        );
        let newer = r#"{"jobs":[{"job_id":{"set":true,"number":6},"job_state":["FAILED"],
            "exit_code":{"status":["EXITED"],"return_code":{"set":true,"number":2}}}]}"#;
        let j = parse_squeue_json(newer).expect("newer shape");
        assert_eq!(
            (j[0].id, &j[0].state, j[0].exit_code),
            (6, &SlurmJobState::Failed, Some(2))
        );
        let e = parse_squeue_json(r#"{"jobs":[{"job_state":"RUNNING"}]}"#)
            .expect_err("no id")
            .to_string();
        assert!(e.contains("job_id"), "{e}");
        let e = parse_squeue_json(r#"{"jobs":[{"job_id":3}]}"#)
            .expect_err("no state")
            .to_string();
        assert!(e.contains("job 3") && e.contains("job_state"), "{e}");
        let e = parse_squeue_json(r#"{"errors":[]}"#)
            .expect_err("no jobs")
            .to_string();
        assert!(e.contains("`jobs`"), "{e}");
        let down = include_str!("fixtures/squeue_no_controller_22.05.8.json");
        let e = parse_squeue_json(down)
            .expect_err("errors, not an empty list")
            .to_string();
        assert!(
            e.contains("slurm_load_jobs") && e.contains("slurmctld"),
            "{e}"
        );
        assert!(parse_squeue_json("not json").is_err());
    }

    #[test]
    fn sinfo_fixture() {
        let nodes = parse_sinfo_json(SINFO).expect("fixture parses");
        let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["n1", "n2", "n3", "n4"]);
        let n2 = &nodes[1];
        assert_eq!(
            (n2.cpus, n2.memory_mb, n2.gpus, n2.gpu_type.as_deref()),
            (8, 16000, 4, Some("v100"))
        );
        assert_eq!(
            (n2.features.clone(), n2.partitions.clone()),
            (vec!["v100".into(), "rack1".into()], vec!["arbiter".into()])
        );
        assert_eq!(
            (n2.state.as_str(), n2.state_flags.clone()),
            ("idle", vec!["DRAIN".to_string()])
        );
        assert_eq!(
            (nodes[2].state.as_str(), nodes[2].gpu_type.as_deref()),
            ("mixed", Some("a100"))
        );
        let takes: Vec<bool> = nodes.iter().map(SlurmNode::takes_new_jobs).collect();
        assert_eq!(takes, [true, false, true, true], "n2 is drained");
        let down = SlurmNode {
            state: "down".into(),
            state_flags: vec![],
            ..nodes[0].clone()
        };
        let unresponsive = SlurmNode {
            state_flags: vec!["NOT_RESPONDING".into()],
            ..nodes[0].clone()
        };
        assert!(!down.takes_new_jobs() && !unresponsive.takes_new_jobs());
        let mixed = r#"{"nodes":[{"name":"m","gres":"gpu:a:1,gpu:b:1"}]}"#;
        let m = parse_sinfo_json(mixed).expect("mixed types");
        assert_eq!((m[0].gpus, m[0].gpu_type.clone(), m[0].cpus), (2, None, 0));
        assert!(
            parse_sinfo_json(r#"{"nodes":[{"cpus":1}]}"#)
                .expect_err("no name")
                .to_string()
                .contains("name")
        );
    }

    #[test]
    fn sacct_lines() {
        assert_eq!(
            parse_sacct_output("49|FAILED|3:0\n", 49).expect("ok"),
            Some(("FAILED".into(), 3))
        );
        assert_eq!(
            parse_sacct_output("8|CANCELLED by 0|0:15\n", 8).expect("ok"),
            Some(("CANCELLED".into(), 143))
        );
        assert_eq!(parse_sacct_output("", 8).expect("empty"), None);
        assert!(parse_sacct_output("8|X|oops\n", 8).is_err());
    }
}
