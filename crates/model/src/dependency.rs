//! Job dependencies in Slurm's syntax (`sbatch --dependency`): `afterok:12:13,afterany:14`,
//! `singleton`. The simulator and the daemon parse them here and judge them by the same rules
//! ([`Dependency::verdict`]).
//!
//! | kind | the job may start when each named job has … | never, when it … |
//! |---|---|---|
//! | `after` | started, or ended (cancelled) without starting | — |
//! | `afterany` | ended, however | — |
//! | `afterok` | succeeded | ended otherwise (failed, cancelled) |
//! | `afternotok` | ended otherwise than succeeding (failed, cancelled) | succeeded |
//! | `singleton` | (no job named) every earlier job of its tenant with its name ended | — |
//!
//! Items are separated by `,` and all must hold (Slurm's `?`, any one of them, is not taken).

use serde::{Deserialize, Serialize};
use std::fmt;

/// How a job depends on another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DependencyKind {
    /// Once the other job started (or ended without starting).
    After,
    /// Once the other job ended, however it ended.
    AfterAny,
    /// Once the other job succeeded; never if it ended otherwise.
    AfterOk,
    /// Once the other job ended otherwise than succeeding; never if it succeeded.
    AfterNotOk,
}

impl DependencyKind {
    /// Its name in Slurm's syntax.
    pub fn name(self) -> &'static str {
        match self {
            DependencyKind::After => "after",
            DependencyKind::AfterAny => "afterany",
            DependencyKind::AfterOk => "afterok",
            DependencyKind::AfterNotOk => "afternotok",
        }
    }
}

impl fmt::Display for DependencyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One dependency: on the job named `on` (a job id in the daemon, a trace id in a trace).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dependency {
    /// How.
    pub kind: DependencyKind,
    /// On which job, as written.
    pub on: String,
}

/// Where the job depended on stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DependedOn {
    /// Submitted, never started.
    Waiting,
    /// Started at least once, not ended.
    Started,
    /// Ended successfully.
    Succeeded,
    /// Ended otherwise (failed, cancelled, timed out); `started`: whether it ever ran.
    EndedNotOk {
        /// Whether it ever started.
        started: bool,
    },
}

/// What a dependency allows now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// It holds: the job may start (as far as this dependency goes).
    Satisfied,
    /// Not yet.
    Waiting,
    /// It can never hold (Slurm's `DependencyNeverSatisfied`).
    Never,
}

impl Dependency {
    /// What this dependency allows, with the job it names standing at `other`.
    pub fn verdict(&self, other: DependedOn) -> Verdict {
        self.kind.verdict(other)
    }
}

impl DependencyKind {
    /// What a dependency of this kind allows, with the job it names standing at `other`.
    pub fn verdict(self, other: DependedOn) -> Verdict {
        use DependedOn::{EndedNotOk, Started, Succeeded, Waiting};
        use DependencyKind::{After, AfterAny, AfterNotOk, AfterOk};
        match (self, other) {
            (After, Waiting) => Verdict::Waiting,
            (After, _) => Verdict::Satisfied,
            (AfterAny, Succeeded | EndedNotOk { .. }) => Verdict::Satisfied,
            (AfterOk, Succeeded) | (AfterNotOk, EndedNotOk { .. }) => Verdict::Satisfied,
            (AfterOk, EndedNotOk { .. }) | (AfterNotOk, Succeeded) => Verdict::Never,
            (AfterAny | AfterOk | AfterNotOk, Waiting | Started) => Verdict::Waiting,
        }
    }
}

/// A job's dependencies, parsed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dependencies {
    /// On other jobs, in the order written.
    pub on: Vec<Dependency>,
    /// `singleton`: after every earlier job of its tenant with its name.
    pub singleton: bool,
}

/// Most jobs one dependency list may name.
pub const MAX_DEPENDENCIES: usize = 1_000;

impl Dependencies {
    /// Parses Slurm's syntax: `kind:id[:id...]` items and `singleton`, separated by `,`.
    pub fn parse(text: &str) -> Result<Dependencies, String> {
        let mut out = Dependencies::default();
        if text.trim().is_empty() {
            return Err("empty (e.g. afterok:12 or afterany:12:13,singleton)".into());
        }
        if text.contains('?') {
            return Err(format!(
                "`{text}`: `?` (any one of) is not supported; separate items with `,` (all of them)"
            ));
        }
        for item in text.split(',') {
            let item = item.trim();
            if item == "singleton" {
                out.singleton = true;
                continue;
            }
            let mut parts = item.split(':');
            let kind = match parts.next().unwrap_or_default() {
                "after" => DependencyKind::After,
                "afterany" => DependencyKind::AfterAny,
                "afterok" => DependencyKind::AfterOk,
                "afternotok" => DependencyKind::AfterNotOk,
                other => {
                    return Err(format!(
                        "`{other}` is not a dependency type (after, afterany, afterok, afternotok, singleton)"
                    ));
                }
            };
            let ids: Vec<&str> = parts.collect();
            if ids.is_empty() {
                return Err(format!("`{item}` names no job ({kind}:ID[:ID...])"));
            }
            for id in ids {
                // Slurm's `after:id+minutes` delay is not taken either.
                if id.is_empty()
                    || id.contains('+')
                    || !id
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
                {
                    return Err(format!("`{item}`: `{id}` is not a job id"));
                }
                out.on.push(Dependency {
                    kind,
                    on: id.to_string(),
                });
            }
        }
        if out.on.len() > MAX_DEPENDENCIES {
            return Err(format!(
                "names {} jobs, more than {MAX_DEPENDENCIES}",
                out.on.len()
            ));
        }
        Ok(out)
    }

    /// The combined verdict: never if any is never, waiting if any waits, else satisfied; with
    /// the first dependency that is not satisfied. `stand` says where a named job stands
    /// (`None`: no such job — never, reported by the caller as it sees fit).
    pub fn verdict(
        &self,
        mut stand: impl FnMut(&str) -> Option<DependedOn>,
    ) -> (Verdict, Option<&Dependency>) {
        let mut waiting = None;
        for dependency in &self.on {
            match stand(&dependency.on).map_or(Verdict::Never, |s| dependency.verdict(s)) {
                Verdict::Never => return (Verdict::Never, Some(dependency)),
                Verdict::Waiting if waiting.is_none() => waiting = Some(dependency),
                _ => {}
            }
        }
        match waiting {
            Some(d) => (Verdict::Waiting, Some(d)),
            None => (Verdict::Satisfied, None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurms_syntax_parses_and_the_rest_is_refused_saying_why() {
        let d = Dependencies::parse("afterok:12:13,afterany:14,singleton").expect("parses");
        assert!(d.singleton);
        assert_eq!(
            d.on.iter()
                .map(|x| (x.kind.name(), x.on.as_str()))
                .collect::<Vec<_>>(),
            [("afterok", "12"), ("afterok", "13"), ("afterany", "14")]
        );
        for (bad, says) in [
            ("", "empty"),
            ("afterok", "names no job"),
            ("afterok:", "is not a job id"),
            ("before:1", "not a dependency type"),
            ("afterok:1?afterany:2", "not supported"),
            ("after:1+10", "is not a job id"),
            ("afterok:1;rm", "is not a job id"),
        ] {
            let e = Dependencies::parse(bad).expect_err(bad);
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn verdicts_follow_slurm() {
        use DependedOn::{EndedNotOk, Started, Succeeded};
        use Verdict::{Never, Satisfied, Waiting};
        let d = |kind| Dependency {
            kind,
            on: "1".into(),
        };
        let table = [
            (
                DependencyKind::After,
                [Waiting, Satisfied, Satisfied, Satisfied],
            ),
            (
                DependencyKind::AfterAny,
                [Waiting, Waiting, Satisfied, Satisfied],
            ),
            (
                DependencyKind::AfterOk,
                [Waiting, Waiting, Satisfied, Never],
            ),
            (
                DependencyKind::AfterNotOk,
                [Waiting, Waiting, Never, Satisfied],
            ),
        ];
        for (kind, expected) in table {
            let got = [
                DependedOn::Waiting,
                Started,
                Succeeded,
                EndedNotOk { started: true },
            ]
            .map(|s| d(kind).verdict(s));
            assert_eq!(got, expected, "{kind}");
        }
    }

    #[test]
    fn the_combined_verdict_names_the_dependency_that_holds_the_job() {
        let d = Dependencies::parse("afterany:1,afterok:2").expect("parses");
        let (v, on) = d.verdict(|id| {
            Some(if id == "1" {
                DependedOn::Started
            } else {
                DependedOn::Succeeded
            })
        });
        assert_eq!(
            (v, on.map(|x| x.on.as_str())),
            (Verdict::Waiting, Some("1"))
        );
        let (v, on) = d.verdict(|id| {
            Some(if id == "1" {
                DependedOn::Started
            } else {
                DependedOn::EndedNotOk { started: false }
            })
        });
        assert_eq!((v, on.map(|x| x.on.as_str())), (Verdict::Never, Some("2")));
        assert_eq!(
            d.verdict(|_| Some(DependedOn::Succeeded)).0,
            Verdict::Satisfied
        );
        assert_eq!(d.verdict(|_| None).0, Verdict::Never);
    }
}
