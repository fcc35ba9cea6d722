//! Usage accounting, as Slurm's `sacct`/`sreport` keep it: one record per ended run — who
//! (tenant, user), what it held (GPUs of one type, CPU cores, memory) and for how long — written
//! in the store in the same transaction as the job's record that says the run ended.
//!
//! ```text
//!   run ends ──► conclude: JobRecord.last_run_usage = RunUsage, runs_accounted + 1
//!            ──► store: job record + usage row (job, runs_accounted) in one transaction
//!   GET /v1/usage ──► usage rows in the window + runs going on, up to now ──► rows by key
//! ```
//!
//! A row's key is the job and its count of accounted runs, both fixed by the transaction that
//! writes the row: a restarted daemon that concludes a run the store still calls running gives it
//! the same key as a write that was lost, and rewriting a job's record rewrites the same row. So a
//! run is counted once, and a run whose end was committed survives `kill -9`. Rows outlive the
//! job records that retention prunes; they are about 100 bytes each, in a compact binary form
//! (reading a million takes a fraction of a second).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What one run held and for how long.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunUsage {
    /// The job.
    pub job: u32,
    /// Its tenant.
    pub tenant: String,
    /// Who submitted it, as the client said (`user`); empty when it did not.
    #[serde(default)]
    pub user: String,
    /// GPU type of its GPUs.
    pub gpu_type: String,
    /// GPUs held.
    pub gpus: u32,
    /// CPU cores reserved (over all its nodes).
    pub cpus: f64,
    /// Memory reserved, GiB (over all its nodes).
    pub memory_gib: f64,
    /// Unix seconds the run started.
    pub started_unix_s: i64,
    /// Unix seconds it ended.
    pub ended_unix_s: i64,
}

/// The format version of an encoded row.
const ROW_VERSION: u8 = 1;

/// A usage row that does not decode.
#[derive(Debug, thiserror::Error)]
#[error("usage row: {0}")]
pub struct BadRow(String);

impl RunUsage {
    /// Seconds it ran (never negative).
    pub fn seconds(&self) -> i64 {
        (self.ended_unix_s - self.started_unix_s).max(0)
    }

    /// Encodes the row: version, fixed fields little-endian, then the three strings each with
    /// a u16 length.
    pub fn encode(&self) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(48 + self.tenant.len() + self.user.len() + self.gpu_type.len());
        out.push(ROW_VERSION);
        out.extend_from_slice(&self.job.to_le_bytes());
        out.extend_from_slice(&self.gpus.to_le_bytes());
        out.extend_from_slice(&self.cpus.to_le_bytes());
        out.extend_from_slice(&self.memory_gib.to_le_bytes());
        out.extend_from_slice(&self.started_unix_s.to_le_bytes());
        out.extend_from_slice(&self.ended_unix_s.to_le_bytes());
        for text in [&self.tenant, &self.user, &self.gpu_type] {
            // Names are bounded far below 64 KiB by the API's checks; cut to be safe.
            let bytes = &text.as_bytes()[..text.len().min(u16::MAX as usize)];
            out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
            out.extend_from_slice(bytes);
        }
        out
    }

    /// Decodes a row [`RunUsage::encode`] wrote.
    pub fn decode(bytes: &[u8]) -> Result<Self, BadRow> {
        let mut r = Reader { bytes, at: 0 };
        let version = r.take::<1>()?[0];
        if version != ROW_VERSION {
            return Err(BadRow(format!(
                "version {version}, this build reads {ROW_VERSION}"
            )));
        }
        let job = u32::from_le_bytes(r.take()?);
        let gpus = u32::from_le_bytes(r.take()?);
        let cpus = f64::from_le_bytes(r.take()?);
        let memory_gib = f64::from_le_bytes(r.take()?);
        let started_unix_s = i64::from_le_bytes(r.take()?);
        let ended_unix_s = i64::from_le_bytes(r.take()?);
        let (tenant, user, gpu_type) = (r.text()?, r.text()?, r.text()?);
        Ok(RunUsage {
            job,
            tenant,
            user,
            gpu_type,
            gpus,
            cpus,
            memory_gib,
            started_unix_s,
            ended_unix_s,
        })
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], BadRow> {
        let slice = self
            .bytes
            .get(self.at..self.at + N)
            .ok_or_else(|| BadRow(format!("truncated at byte {}", self.at)))?;
        self.at += N;
        let mut out = [0; N];
        out.copy_from_slice(slice);
        Ok(out)
    }

    fn text(&mut self) -> Result<String, BadRow> {
        let len = u16::from_le_bytes(self.take()?) as usize;
        let slice = self
            .bytes
            .get(self.at..self.at + len)
            .ok_or_else(|| BadRow(format!("truncated text at byte {}", self.at)))?;
        self.at += len;
        String::from_utf8(slice.to_vec()).map_err(|e| BadRow(e.to_string()))
    }
}

/// The store key of a job's `n`-th accounted run (from 1): job in the high half.
pub fn row_key(job: u32, n: u32) -> u64 {
    (u64::from(job) << 32) | u64::from(n)
}

/// What usage is grouped by (`--by`), in the order given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GroupBy {
    /// The tenant (Slurm's account).
    Tenant,
    /// The submitting user, as the client said.
    User,
    /// The GPU type.
    GpuType,
    /// The UTC day (`YYYY-MM-DD`); a run over midnight counts in each day for its part.
    Day,
}

impl GroupBy {
    /// Every dimension, by name.
    pub const ALL: [(&'static str, GroupBy); 4] = [
        ("tenant", GroupBy::Tenant),
        ("user", GroupBy::User),
        ("gpu-type", GroupBy::GpuType),
        ("day", GroupBy::Day),
    ];

    /// Its name.
    pub fn name(self) -> &'static str {
        GroupBy::ALL
            .iter()
            .find(|(_, g)| *g == self)
            .map_or("?", |(n, _)| n)
    }

    /// Parses `tenant`, `gpu-type,day`, ...: one to four distinct dimensions.
    pub fn parse_list(text: &str) -> Result<Vec<GroupBy>, String> {
        let names = || {
            GroupBy::ALL
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut out = Vec::new();
        for part in text.split(',').map(str::trim) {
            let Some((_, by)) = GroupBy::ALL.iter().find(|(n, _)| {
                n.eq_ignore_ascii_case(part) || n.replace('-', "_").eq_ignore_ascii_case(part)
            }) else {
                return Err(format!(
                    "`{}` is not a grouping; one or more of {} (comma-separated)",
                    part.escape_debug(),
                    names()
                ));
            };
            if out.contains(by) {
                return Err(format!("`{part}` is named twice"));
            }
            out.push(*by);
        }
        Ok(out)
    }
}

/// Seconds in a day.
const DAY_S: i64 = 86_400;

/// The start of a usage window, Unix seconds, from `--since`: a duration back from `now_unix_s`
/// (`90m`, `36h`, `7d`, `2w`; a bare number is seconds), a UTC date `YYYY-MM-DD`, or `all`.
pub fn parse_since(text: &str, now_unix_s: i64) -> Result<i64, String> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("all") {
        return Ok(i64::MIN);
    }
    if let Some(days) = parse_date(text) {
        return Ok(days * DAY_S);
    }
    let seconds = parse_duration_s(text).map_err(|e| {
        format!(
            "`{}`: {e}; or a date YYYY-MM-DD, or `all`",
            text.escape_debug()
        )
    })?;
    Ok(now_unix_s.saturating_sub(seconds))
}

pub use crate::config::parse_duration_s;

/// Days since 1970-01-01 of a `YYYY-MM-DD` date (1970 to 9999), if it is one.
pub fn parse_date(text: &str) -> Option<i64> {
    // Exactly YYYY-MM-DD (chrono alone would also take `2024-3-1`).
    if text.len() != 10 {
        return None;
    }
    let date = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()?;
    let days = date
        .signed_duration_since(chrono::NaiveDate::default())
        .num_days();
    (days >= 0).then_some(days)
}

/// `YYYY-MM-DD` of a day number (days since 1970-01-01).
pub fn civil_date(days: i64) -> String {
    chrono::NaiveDate::default()
        .checked_add_signed(chrono::TimeDelta::days(days))
        .map_or_else(
            || format!("day {days}"),
            |d| d.format("%Y-%m-%d").to_string(),
        )
}

/// One line of a usage report: a key (one value per grouping) and what was used in the window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageRow {
    /// The grouping's values, in the order of `by` (`tenant`, `user`, `gpu_type`, `day`).
    pub key: BTreeMap<String, String>,
    /// Runs with time in the window (a run over several days counts in each).
    pub runs: u64,
    /// Of them, runs going on now.
    pub running: u64,
    /// GPU-seconds.
    pub gpu_s: f64,
    /// CPU core-seconds reserved.
    pub cpu_s: f64,
    /// GiB-seconds of memory reserved.
    pub memory_gib_s: f64,
}

/// Sums runs into rows by `by`, counting each run's time inside `[since, until]`.
#[derive(Debug)]
pub struct Report {
    by: Vec<GroupBy>,
    since: i64,
    until: i64,
    rows: BTreeMap<Vec<String>, UsageRow>,
}

impl Report {
    /// An empty report over `[since, until]` (Unix seconds).
    pub fn new(by: Vec<GroupBy>, since: i64, until: i64) -> Self {
        Report {
            by,
            since,
            until,
            rows: BTreeMap::new(),
        }
    }

    /// Counts `run` (`running`: going on, its end being now).
    pub fn add(&mut self, run: &RunUsage, running: bool) {
        let (start, end) = (
            run.started_unix_s.max(self.since),
            run.ended_unix_s.min(self.until),
        );
        if end < start || (end == start && run.seconds() > 0) {
            return;
        }
        if !self.by.contains(&GroupBy::Day) {
            self.add_part(run, running, start, end, None);
            return;
        }
        // A part per UTC day it touched.
        let mut from = start;
        loop {
            let day = from.div_euclid(DAY_S);
            let to = end.min((day + 1) * DAY_S);
            self.add_part(run, running, from, to, Some(day));
            if to >= end {
                break;
            }
            from = to;
        }
    }

    fn add_part(&mut self, run: &RunUsage, running: bool, from: i64, to: i64, day: Option<i64>) {
        let key: Vec<String> = self
            .by
            .iter()
            .map(|g| match g {
                GroupBy::Tenant => run.tenant.clone(),
                GroupBy::User => run.user.clone(),
                GroupBy::GpuType => run.gpu_type.clone(),
                GroupBy::Day => day.map(civil_date).unwrap_or_default(),
            })
            .collect();
        let seconds = (to - from) as f64;
        let by = &self.by;
        let row = self.rows.entry(key).or_insert_with_key(|key| UsageRow {
            key: by
                .iter()
                .map(|g| g.name().replace('-', "_"))
                .zip(key.iter().cloned())
                .collect(),
            ..UsageRow::default()
        });
        row.runs += 1;
        row.running += u64::from(running);
        row.gpu_s += seconds * f64::from(run.gpus);
        row.cpu_s += seconds * run.cpus;
        row.memory_gib_s += seconds * run.memory_gib;
    }

    /// The rows, by key.
    pub fn rows(self) -> Vec<UsageRow> {
        self.rows.into_values().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(tenant: &str, gpus: u32, start: i64, end: i64) -> RunUsage {
        RunUsage {
            job: 7,
            tenant: tenant.into(),
            user: "ann".into(),
            gpu_type: "a100".into(),
            gpus,
            cpus: 8.0,
            memory_gib: 64.0,
            started_unix_s: start,
            ended_unix_s: end,
        }
    }

    #[test]
    fn rows_round_trip_and_damage_is_an_error() {
        let r = run("team-a", 4, 100, 200);
        let bytes = r.encode();
        assert_eq!(RunUsage::decode(&bytes).expect("decodes"), r);
        assert!(
            RunUsage::decode(&bytes[..bytes.len() - 1]).is_err(),
            "truncated"
        );
        assert!(
            RunUsage::decode(&[9])
                .expect_err("version")
                .to_string()
                .contains("version 9")
        );
        assert!(RunUsage::decode(&[]).is_err());
        assert!(row_key(1, 2) > row_key(0, u32::MAX) && row_key(1, 1) < row_key(1, 2));
    }

    #[test]
    fn since_takes_durations_dates_and_all_and_names_what_is_wrong() {
        let now = 1_000_000;
        assert_eq!(parse_since("7d", now), Ok(now - 7 * 86_400));
        assert_eq!(parse_since("90m", now), Ok(now - 5400));
        assert_eq!(parse_since("2w", now), Ok(now - 14 * 86_400));
        assert_eq!(parse_since("3600", now), Ok(now - 3600));
        assert_eq!(parse_since("all", now), Ok(i64::MIN));
        assert_eq!(parse_since("1970-01-02", now), Ok(86_400));
        assert_eq!(parse_since("2024-03-01", now), Ok(19_783 * 86_400));
        for bad in [
            "7y",
            "",
            "-5d",
            "d",
            "2024-02-30",
            "9999999999999999999d",
            "7d; drop",
        ] {
            assert!(parse_since(bad, now).is_err(), "{bad:?}");
        }
        assert!(
            parse_since("7y", now)
                .expect_err("bad")
                .contains("unknown unit `y`")
        );
        assert!(
            parse_since("99999w", now)
                .expect_err("bad")
                .contains("ten years")
        );
    }

    #[test]
    fn civil_dates_round_trip() {
        for days in [0, 59, 60, 365, 10_957, 19_783, 2_932_896] {
            assert_eq!(
                parse_date(&civil_date(days)),
                Some(days),
                "{}",
                civil_date(days)
            );
        }
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(19_783), "2024-03-01");
    }

    #[test]
    fn groupings_parse_by_name_and_refuse_unknown_or_repeated_ones() {
        assert_eq!(GroupBy::parse_list("tenant"), Ok(vec![GroupBy::Tenant]));
        assert_eq!(
            GroupBy::parse_list("gpu-type,day"),
            Ok(vec![GroupBy::GpuType, GroupBy::Day])
        );
        assert_eq!(GroupBy::parse_list("gpu_type"), Ok(vec![GroupBy::GpuType]));
        assert!(
            GroupBy::parse_list("account")
                .expect_err("bad")
                .contains("one or more of tenant, user, gpu-type, day")
        );
        assert!(
            GroupBy::parse_list("day,day")
                .expect_err("bad")
                .contains("twice")
        );
        assert!(GroupBy::parse_list("").is_err());
    }

    #[test]
    fn a_report_counts_the_part_of_each_run_inside_the_window_and_splits_days() {
        // 2 GPUs from 23:00 on day 0 to 01:00 on day 1, window from 23:30.
        let mut report = Report::new(
            vec![GroupBy::Tenant, GroupBy::Day],
            86_400 - 1800,
            10 * 86_400,
        );
        report.add(&run("a", 2, 86_400 - 3600, 86_400 + 3600), false);
        report.add(&run("b", 1, 0, 100), false); // before the window: not counted
        report.add(&run("a", 1, 86_400 + 7200, 86_400 + 7300), true);
        let rows = report.rows();
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!(
            (rows[0].key["day"].as_str(), rows[0].gpu_s, rows[0].runs),
            ("1970-01-01", 3600.0, 1)
        );
        assert_eq!(
            (
                rows[1].key["day"].as_str(),
                rows[1].gpu_s,
                rows[1].runs,
                rows[1].running
            ),
            ("1970-01-02", 7200.0 + 100.0, 2, 1)
        );
        assert_eq!(rows[1].cpu_s, 8.0 * 3700.0);
        assert_eq!(rows[1].memory_gib_s, 64.0 * 3700.0);
        assert_eq!(rows[1].key["tenant"], "a");
    }
}
