//! What can go wrong talking to Slurm: running its tools ([`super::cli`]) or reading what they
//! print ([`super::parse`]).

use std::time::Duration;

/// What can go wrong talking to Slurm.
#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    /// The tool could not be found.
    #[error("`{tool}` not found: install Slurm's client tools (slurm-client) or set bin_dir")]
    NotInstalled {
        /// The program that was looked for.
        tool: String,
    },
    /// The tool ran and failed.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        /// The command line, for the log.
        command: String,
        /// How it ended (exit status or why it could not start).
        status: String,
        /// What it printed on stderr, trimmed.
        stderr: String,
    },
    /// The tool's output was not what this Slurm version is known to print.
    #[error("cannot read {what} from Slurm: {reason}")]
    Parse {
        /// What was being read.
        what: String,
        /// What was wrong or missing.
        reason: String,
    },
    /// The tool did not finish in time (killed). Usually slurmctld is down or unreachable.
    #[error("`{command}` did not answer within {timeout:?} and was killed; is slurmctld up?")]
    Timeout {
        /// The command line.
        command: String,
        /// The deadline it had.
        timeout: Duration,
    },
    /// The tool exited 0 but its JSON lists errors (seen when slurmctld is unreachable).
    #[error("{what} reports errors (is slurmctld up?): {errors}")]
    Reported {
        /// Which output.
        what: String,
        /// Slurm's `errors`, as JSON.
        errors: String,
    },
    /// The job request cannot be expressed safely as an sbatch call.
    #[error("invalid batch job: {0}")]
    InvalidJob(String),
}

pub(super) fn parse_err(what: impl Into<String>, reason: impl Into<String>) -> SlurmError {
    SlurmError::Parse {
        what: what.into(),
        reason: reason.into(),
    }
}
