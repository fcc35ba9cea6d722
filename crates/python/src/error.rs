//! One error type for everything the bindings do, and the Python exception class each error
//! raises. Messages are the command line's words (it prints `error: {e:#}`: the error, then
//! each of its sources after a colon); [`Error::message`] gives the same text.

use arbiter_sim::SimError;
use arbiter_sim::scenario::ScenarioError;
use arbiter_trace::TraceError;
use thiserror::Error;

/// Something the bindings were asked to do failed.
#[derive(Debug, Error)]
pub enum Error {
    /// A scenario could not be loaded or run.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// A trace could not be read.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// An unknown trace format.
    #[error("{0}")]
    Format(String),
    /// An unknown policy name, or a policy's parameters refused.
    #[error("{0}")]
    Policy(String),
    /// An argument has no meaning (a value with no TOML form, an unknown option).
    #[error("{0}")]
    Argument(String),
    /// A table could not be written as JSON.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A table could not be written as CSV.
    #[error("CSV: {0}")]
    Csv(#[from] csv::Error),
    /// A report could not be written.
    #[error(transparent)]
    Report(#[from] arbiter_report::ReportError),
}

/// The Python exception an [`Error`] raises: `arbiter.ScenarioError`, `arbiter.TraceError`,
/// `arbiter.PolicyError` (all subclasses of `arbiter.ArbiterError`), or `KeyboardInterrupt`
/// for a run stopped by Ctrl-C.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    /// `arbiter.ArbiterError` itself (a report or a table could not be written).
    Arbiter,
    /// `arbiter.ScenarioError`: a scenario key, a `set` override or an argument is wrong.
    Scenario,
    /// `arbiter.TraceError`: a trace file, row or column is wrong.
    Trace,
    /// `arbiter.PolicyError`: a policy name or parameter is wrong, or a policy failed.
    Policy,
    /// The run was stopped (Ctrl-C).
    Stopped,
}

impl Error {
    /// Which Python exception this error raises.
    pub fn class(&self) -> ErrorClass {
        match self {
            Error::Scenario(e) => scenario_class(e),
            Error::Trace(_) | Error::Format(_) => ErrorClass::Trace,
            Error::Policy(_) => ErrorClass::Policy,
            Error::Argument(_) => ErrorClass::Scenario,
            Error::Report(_) | Error::Json(_) | Error::Csv(_) => ErrorClass::Arbiter,
        }
    }

    /// The message, with every source after a colon, as the command line prints it.
    pub fn message(&self) -> String {
        let mut text = self.to_string();
        let mut source = std::error::Error::source(self);
        while let Some(cause) = source {
            let words = cause.to_string();
            if !text.ends_with(&words) {
                text = format!("{text}: {words}");
            }
            source = cause.source();
        }
        text
    }
}

/// A scenario error is the policy's where it is about the `policies` list or a `[policy]` table,
/// or a simulation failed in its policy; a trace's where a trace failed to read.
fn scenario_class(error: &ScenarioError) -> ErrorClass {
    match error {
        ScenarioError::Trace(_) => ErrorClass::Trace,
        ScenarioError::Stopped => ErrorClass::Stopped,
        ScenarioError::Sim {
            error: SimError::Stopped(_),
            ..
        } => ErrorClass::Stopped,
        ScenarioError::Sim {
            error: SimError::Policy { .. } | SimError::InvalidDecision { .. } | SimError::Config(_),
            ..
        } => ErrorClass::Policy,
        other if other.key().is_some_and(is_policy_key) => ErrorClass::Policy,
        _ => ErrorClass::Scenario,
    }
}

/// `policies`, `policy` and every key under `policy.`.
fn is_policy_key(key: &str) -> bool {
    let top = key.split('.').next().unwrap_or(key);
    top == "policies" || top == "policy"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_keys_are_the_list_and_the_tables() {
        assert!(is_policy_key("policies"));
        assert!(is_policy_key("policy.horus.lookahead"));
        assert!(is_policy_key("policy"));
        assert!(!is_policy_key("policy_x"));
        assert!(!is_policy_key("simulation.round_s"));
    }

    #[test]
    fn the_message_carries_the_sources_as_the_command_line_prints_them() {
        let io = std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "No such file or directory (os error 2)",
        );
        let error = Error::Trace(TraceError::Io {
            path: "x.csv".into(),
            source: io,
        });
        assert_eq!(
            error.message(),
            "cannot read x.csv: No such file or directory (os error 2)"
        );
        assert_eq!(error.class(), ErrorClass::Trace);
    }
}
