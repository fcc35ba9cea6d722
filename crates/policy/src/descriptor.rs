//! What is known about a policy before it is built: its [`Descriptor`] (name, one line, how it
//! decides, what it needs, whether the daemon runs it). A leaf: it names no policy, so each
//! policy module states its own facts with these types and the registry (`kind.rs`) only
//! collects them.

/// What is known about a policy before it is built (`PolicyKind::descriptor`): one entry per
/// policy instead of a table per question. `arbiter policies --markdown` prints the guide's
/// table of policies from these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Descriptor {
    /// The identifier (scenarios, `--policy`, JSON).
    pub name: &'static str,
    /// One line on what it does and where it comes from (`arbiter policies`).
    pub describe: &'static str,
    /// How it decides.
    pub family: Family,
    /// Whether it uses measured speeds of job pairs sharing GPUs.
    pub pair_speeds: bool,
    /// Whether it resizes elastic jobs (chooses their GPU counts within their range).
    pub elastic: bool,
    /// Whether the daemon can carry out its decisions.
    pub daemon: DaemonSupport,
    /// Whether results under it show finish-time fairness (max ρ, share of jobs with ρ > 1).
    pub fairness_columns: bool,
}

/// Whether the production daemon runs a policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DaemonSupport {
    /// On every executor.
    Runs,
    /// Only on an executor that lets runs share GPUs (the local one; Slurm with `share_gpus`):
    /// its decisions share GPUs.
    NeedsColocation,
    /// Never, for the reason given.
    Refused(&'static str),
}

impl Descriptor {
    /// A policy deciding as `family`, using no pair speeds, resizing no elastic jobs, run by the
    /// daemon everywhere.
    pub const fn new(name: &'static str, family: Family, describe: &'static str) -> Self {
        Descriptor { name, describe, family, pair_speeds: false, elastic: false, daemon: DaemonSupport::Runs, fairness_columns: false }
    }

    /// It uses measured speeds of job pairs sharing GPUs.
    pub const fn pair_speeds(mut self) -> Self {
        self.pair_speeds = true;
        self
    }

    /// It resizes elastic jobs.
    pub const fn elastic(mut self) -> Self {
        self.elastic = true;
        self
    }

    /// What the daemon makes of it, if not [`DaemonSupport::Runs`].
    pub const fn daemon(mut self, daemon: DaemonSupport) -> Self {
        self.daemon = daemon;
        self
    }

    /// Results under it show finish-time fairness.
    pub const fn fairness_columns(mut self) -> Self {
        self.fairness_columns = true;
        self
    }
}

/// How a policy decides, as its callers need to know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// At arrivals, completions and its own wake-ups.
    Events,
    /// Gavel's allocation programs, realized by rounds.
    GavelAllocation,
    /// Synergy's CPU/memory-aware mechanisms, in rounds.
    Synergy,
    /// Another round-based policy (Gandiva).
    OtherRounds,
}
