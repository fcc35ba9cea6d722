//! Job arrays, in Slurm's syntax (`sbatch --array`): `0-99`, `1,3,5-7`, `0-15:4`, and a `%N`
//! suffix for at most N tasks running at once. One submission makes one job per task, with
//! consecutive ids; the first task's id is the array's id (as Slurm's `ArrayJobID`), so
//! `arbiter cancel 12` cancels the array and `12_7` its task 7.

use serde::{Deserialize, Serialize};

/// An array submission, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArraySpec {
    /// The task indices, ascending, each once.
    pub indices: Vec<u32>,
    /// At most this many tasks running at once (`%N`); `None`: no limit.
    pub max_running: Option<u32>,
}

/// Largest task index taken (Slurm's default `MaxArraySize` is 1001; indices are bounded so
/// that `12_4000000000` is refused as text, not as a count).
pub const MAX_TASK_INDEX: u32 = 4_000_000;

impl ArraySpec {
    /// Parses `text`; at most `max_tasks` tasks.
    pub fn parse(text: &str, max_tasks: usize) -> Result<ArraySpec, String> {
        let (ranges, limit) = match text.split_once('%') {
            Some((r, l)) => (r, Some(l)),
            None => (text, None),
        };
        let max_running = match limit {
            Some(l) => match l.trim().parse::<u32>() {
                Ok(n) if n > 0 => Some(n),
                _ => {
                    return Err(format!(
                        "`%{l}`: the limit is a number of tasks, at least 1"
                    ));
                }
            },
            None => None,
        };
        let mut indices = Vec::new();
        for item in ranges.split(',') {
            let item = item.trim();
            let (range, step) = match item.split_once(':') {
                Some((r, s)) => (
                    r,
                    s.parse::<u32>().ok().filter(|s| *s > 0).ok_or_else(|| {
                        format!("`{item}`: the step `{s}` is not a positive number")
                    })?,
                ),
                None => (item, 1),
            };
            let number = |t: &str| {
                t.trim()
                    .parse::<u32>()
                    .ok()
                    .filter(|n| *n <= MAX_TASK_INDEX)
                    .ok_or_else(|| {
                        format!("`{item}`: `{t}` is not a task index (0 to {MAX_TASK_INDEX})")
                    })
            };
            let (from, to) = match range.split_once('-') {
                Some((a, b)) => (number(a)?, number(b)?),
                None => {
                    let n = number(range)?;
                    (n, n)
                }
            };
            if to < from {
                return Err(format!("`{item}`: the range ends before it starts"));
            }
            let count = (to - from) / step + 1;
            if indices.len() + count as usize > max_tasks {
                return Err(format!("more than {max_tasks} tasks (max_array_size)"));
            }
            indices.extend((from..=to).step_by(step as usize));
        }
        indices.sort_unstable();
        let before = indices.len();
        indices.dedup();
        if indices.len() != before {
            return Err(format!("`{text}`: a task index is given twice"));
        }
        if indices.is_empty() {
            return Err("no tasks (e.g. 0-99%8)".into());
        }
        Ok(ArraySpec {
            indices,
            max_running,
        })
    }
}

/// What makes a job a task of an array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArrayTask {
    /// The array's id: its first task's job id.
    pub array_id: u32,
    /// This task's index (`ARBITER_ARRAY_TASK_ID`).
    pub index: u32,
    /// Tasks in the array.
    pub tasks: u32,
    /// At most this many of its tasks running at once (`%N`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_running: Option<u32>,
}

/// Where an array's tasks are: `count` consecutive job ids from `first` (the array's id).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArrayIds {
    /// The first task's id, which is the array's.
    pub first: u32,
    /// Tasks.
    pub count: u32,
    /// At most this many running at once.
    pub max_running: Option<u32>,
}

impl ArrayIds {
    /// The tasks' job ids.
    pub fn ids(&self) -> std::ops::Range<u32> {
        self.first..self.first.saturating_add(self.count)
    }
}

/// The arrays of the tasks on record (ended tasks pruned since leave their array in place).
pub fn arrays_of(
    tasks: impl Iterator<Item = ArrayTask>,
) -> std::collections::BTreeMap<u32, ArrayIds> {
    let mut out = std::collections::BTreeMap::new();
    for task in tasks {
        out.entry(task.array_id).or_insert(ArrayIds {
            first: task.array_id,
            count: task.tasks,
            max_running: task.max_running,
        });
    }
    out
}

/// `12_7` (array 12, task index 7) as numbers; `None` for anything else.
pub fn parse_task_ref(text: &str) -> Option<(u32, u32)> {
    let (array, index) = text.split_once('_')?;
    Some((array.parse().ok()?, index.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurms_array_syntax_parses() {
        let a = ArraySpec::parse("0-99%8", 10_000).expect("parses");
        assert_eq!(
            (a.indices.len(), a.indices[99], a.max_running),
            (100, 99, Some(8))
        );
        assert_eq!(
            ArraySpec::parse("1,3,5-7", 10).expect("parses").indices,
            [1, 3, 5, 6, 7]
        );
        assert_eq!(
            ArraySpec::parse("0-15:4", 10).expect("parses").indices,
            [0, 4, 8, 12]
        );
        assert_eq!(parse_task_ref("12_7"), Some((12, 7)));
        assert_eq!(parse_task_ref("12"), None);
    }

    #[test]
    fn bad_arrays_are_refused_saying_why() {
        for (text, says) in [
            ("", "not a task index"),
            ("5-1", "ends before it starts"),
            ("0-9%0", "at least 1"),
            ("0-9:0", "not a positive number"),
            ("1,1", "given twice"),
            ("0-10000", "more than 10000 tasks"),
            ("0-4294967295", "not a task index"),
            ("a-b", "not a task index"),
        ] {
            let e = ArraySpec::parse(text, 10_000).expect_err(text);
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
