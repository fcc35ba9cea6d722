//! `arbiter serve` settings: a TOML file, every key optional.
//!
//! ```toml
//! data_dir = "/var/lib/arbiter"     # store, logs, checkpoints, admin token
//! listen = "127.0.0.1:7070"
//! policy = "las"                    # any simulator policy name
//! round_s = 30                      # the policy is also called at every submit and job end
//! gpus = "auto"                     # `nvidia-smi`, or declared: "4xa100", "2xv100,2xk80", "0"
//! cpus = 0                          # 0: detected
//! memory_gib = 0                    # 0: detected
//! admin_token_file = "/etc/arbiter/admin.token"   # default: <data_dir>/admin.token, created
//! max_request_bytes = 65536
//! ```

use arbiter_policy::PolicyKind;
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// Daemon settings.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServeConfig {
    /// Store, logs, checkpoints.
    pub data_dir: PathBuf,
    /// HTTP address.
    pub listen: SocketAddr,
    /// Policy name.
    pub policy: String,
    /// Seconds between scheduling rounds.
    pub round_s: f64,
    /// `auto` or declared GPUs (`4xa100`, `2xv100,2xk80`, `0`).
    pub gpus: String,
    /// CPU cores (0: detected).
    pub cpus: u32,
    /// Memory in GiB (0: detected).
    pub memory_gib: u32,
    /// File holding the admin token (created with a random token if missing).
    pub admin_token_file: Option<PathBuf>,
    /// Largest request body accepted.
    pub max_request_bytes: usize,
    /// URL jobs use to reach the API (`ARBITER_URL`); default `http://<listen>`.
    pub public_url: Option<String>,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            data_dir: PathBuf::from("arbiter-data"),
            listen: SocketAddr::from(([127, 0, 0, 1], 7070)),
            policy: "fifo".into(),
            round_s: 30.0,
            gpus: "auto".into(),
            cpus: 0,
            memory_gib: 0,
            admin_token_file: None,
            max_request_bytes: 64 * 1024,
            public_url: None,
        }
    }
}

/// A configuration problem, naming the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Unreadable file.
    #[error("{path}: {source}")]
    Io {
        /// File.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// Bad value.
    #[error("{0}")]
    Invalid(String),
}

impl ServeConfig {
    /// Reads a TOML file.
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io { path: path.to_path_buf(), source })?;
        toml::from_str(&text).map_err(|e| ConfigError::Invalid(format!("{}: {e}", path.display())))
    }

    /// The policy, parsed.
    pub fn policy_kind(&self) -> Result<PolicyKind, ConfigError> {
        PolicyKind::from_name(&self.policy).ok_or_else(|| ConfigError::Invalid(format!("policy: unknown policy `{}` (`arbiter policies` lists them)", self.policy)))
    }

    /// Checks values that parse but cannot work.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.policy_kind()?;
        if !(self.round_s.is_finite() && self.round_s > 0.0) {
            return Err(ConfigError::Invalid(format!("round_s: must be > 0, got {}", self.round_s)));
        }
        parse_gpus(&self.gpus)?;
        Ok(())
    }
}

/// GPUs of the machine: `(type, count)` groups, in index order.
pub type GpuInventory = Vec<(String, u32)>;

/// Parses a declared inventory (`4xa100`, `2xv100,2xk80`, `0`); `auto` gives `None`.
pub fn parse_gpus(text: &str) -> Result<Option<GpuInventory>, ConfigError> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("auto") {
        return Ok(None);
    }
    if text == "0" || text.is_empty() {
        return Ok(Some(Vec::new()));
    }
    let mut out = Vec::new();
    for part in text.split(',') {
        let (count, kind) = part
            .trim()
            .split_once(['x', 'X'])
            .ok_or_else(|| ConfigError::Invalid(format!("gpus: `{part}` is not COUNTxTYPE (e.g. 4xa100)")))?;
        let count: u32 = count.trim().parse().map_err(|_| ConfigError::Invalid(format!("gpus: `{count}` in `{part}` is not a number")))?;
        let kind = kind.trim();
        if kind.is_empty() {
            return Err(ConfigError::Invalid(format!("gpus: `{part}` has no GPU type")));
        }
        out.push((kind.to_ascii_lowercase(), count));
    }
    Ok(Some(out))
}

/// GPUs found by `nvidia-smi` (none when it is missing or fails).
pub fn detect_gpus() -> GpuInventory {
    let Ok(out) = std::process::Command::new("nvidia-smi").args(["--query-gpu=name", "--format=csv,noheader"]).output() else {
        return Vec::new();
    };
    if !out.status.success() {
        return Vec::new();
    }
    parse_nvidia_smi(&String::from_utf8_lossy(&out.stdout))
}

/// Groups `nvidia-smi --query-gpu=name --format=csv,noheader` output into consecutive runs of
/// one type, named by the model number (`NVIDIA A100-SXM4-80GB` → `a100`).
pub fn parse_nvidia_smi(output: &str) -> GpuInventory {
    let mut groups: GpuInventory = Vec::new();
    for line in output.lines().filter(|l| !l.trim().is_empty()) {
        // "NVIDIA A100-SXM4-80GB" → "a100": the first word that contains a digit.
        let name = line.split_whitespace().find(|w| w.chars().any(|c| c.is_ascii_digit())).unwrap_or(line.trim());
        let kind = name.split('-').next().unwrap_or(name).to_ascii_lowercase();
        match groups.last_mut() {
            Some((k, n)) if *k == kind => *n += 1,
            _ => groups.push((kind, 1)),
        }
    }
    groups
}

/// CPU cores and memory (GiB) of this machine.
pub fn detect_host() -> (u32, u32) {
    let cpus = std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1);
    let memory_kib: u64 = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| m.lines().find(|l| l.starts_with("MemTotal:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
        .unwrap_or(0);
    (cpus, (memory_kib / (1024 * 1024)) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_gpus_parse_and_bad_ones_name_the_problem() {
        assert_eq!(parse_gpus("4xa100").expect("ok"), Some(vec![("a100".into(), 4)]));
        assert_eq!(parse_gpus("2xV100, 2xk80").expect("ok"), Some(vec![("v100".into(), 2), ("k80".into(), 2)]));
        assert_eq!(parse_gpus("auto").expect("ok"), None);
        assert!(parse_gpus("four").expect_err("bad").to_string().contains("COUNTxTYPE"));
        assert!(parse_gpus("ax100").expect_err("bad").to_string().contains("not a number"));
    }

    #[test]
    fn nvidia_smi_names_become_gpu_types() {
        let out = "NVIDIA A100-SXM4-80GB\nNVIDIA A100-SXM4-80GB\nTesla V100-PCIE-16GB\nNVIDIA H100 80GB HBM3\n";
        assert_eq!(parse_nvidia_smi(out), vec![("a100".into(), 2), ("v100".into(), 1), ("h100".into(), 1)]);
        assert!(parse_nvidia_smi("").is_empty());
    }

    #[test]
    fn unknown_keys_and_policies_are_refused() {
        assert!(toml::from_str::<ServeConfig>("polcy = \"las\"").is_err());
        let c: ServeConfig = toml::from_str("policy = \"nope\"").expect("parses");
        assert!(c.validate().expect_err("bad").to_string().contains("unknown policy"));
    }
}
