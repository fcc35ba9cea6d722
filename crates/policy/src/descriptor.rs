//! What is known about a policy before it is built: its [`Descriptor`] (name, one line, how it
//! decides, what it needs, whether the daemon runs it). A leaf: it names no policy, so each
//! policy module states its own facts with these types and the registry (`kind.rs`) only
//! collects them.

/// What is known about a policy before it is built (`PolicyKind::descriptor`): one entry per
/// policy instead of a table per question. `arbiter policies --markdown` prints the guide's
/// table of policies from these; `arbiter policies --json` prints them serialized (the daemon
/// support flattened to `daemon` and, where refused, `daemon_refused_because`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Descriptor {
    /// The identifier (scenarios, `--policy`, JSON).
    pub name: &'static str,
    /// Other names it is accepted by (`tiresias-l` for `las`), none of them another's name.
    pub aliases: &'static [&'static str],
    /// One line on what it does and where it comes from (`arbiter policies`).
    pub describe: &'static str,
    /// How it decides.
    pub family: Family,
    /// Whether it uses measured speeds of job pairs sharing GPUs.
    pub pair_speeds: bool,
    /// Whether it resizes elastic jobs (chooses their GPU counts within their range).
    pub elastic: bool,
    /// Whether the daemon can carry out its decisions.
    #[serde(flatten)]
    pub daemon: DaemonSupport,
    /// Whether results under it show finish-time fairness (max ρ, share of jobs with ρ > 1).
    pub fairness_columns: bool,
    /// Where it comes from: the paper, and whose implementation it follows where that matters.
    pub paper: &'static str,
    /// What it does in full, for the guide's "In detail" table (Markdown). Its parameters'
    /// defaults are printed beside it from the code, so the text names keys, not values.
    pub detail: &'static str,
}

/// Whether the production daemon runs a policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(
    rename_all = "kebab-case",
    tag = "daemon",
    content = "daemon_refused_because"
)]
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
    /// daemon everywhere; its paper and detail are to be given ([`Descriptor::paper`],
    /// [`Descriptor::detail`]: a test holds every policy to having them).
    pub const fn new(name: &'static str, family: Family, describe: &'static str) -> Self {
        Descriptor {
            name,
            aliases: &[],
            describe,
            family,
            pair_speeds: false,
            elastic: false,
            daemon: DaemonSupport::Runs,
            fairness_columns: false,
            paper: "",
            detail: "",
        }
    }

    /// Other names it is accepted by.
    pub const fn aliases(mut self, aliases: &'static [&'static str]) -> Self {
        self.aliases = aliases;
        self
    }

    /// Where it comes from.
    pub const fn paper(mut self, paper: &'static str) -> Self {
        self.paper = paper;
        self
    }

    /// What it does in full.
    pub const fn detail(mut self, detail: &'static str) -> Self {
        self.detail = detail;
        self
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
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
