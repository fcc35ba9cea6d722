//! A job's progress report (`POST /v1/jobs/ID/progress`): what a job may say about itself, and
//! the bounds that keep what it says from reaching a policy as a number no policy can use.
//!
//! The report is the one input a job's own process sends the daemon, so it is hostile until
//! checked: a report of `{"steps":0,"throughput":5e-324,"total_steps":18446744073709551615}`
//! once made the job's remaining time infinite, which a policy agent received as `null` and
//! crashed on, stopping every tenant's jobs. Two walls keep that out: the report is refused
//! unless every value is finite and within [`ProgressReport::validate`]'s bounds (400 naming the
//! field), and the time the policy sees is bounded again where it is computed
//! ([`remaining_s`]), whatever is on record from an older daemon.

use crate::records::job::FieldError;
use serde::Deserialize;

/// Most steps a job may report as done or in all: 2^53, the largest count an f64 (the policies'
/// arithmetic, the JSON a client parses) holds exactly.
pub const MAX_STEPS: u64 = 1 << 53;

/// Fastest a job may say it goes: a billion steps per second (no training step is that short).
pub const MAX_THROUGHPUT: f64 = 1e9;

/// Slowest non-zero rate a job may report: one step in ten years. (0 means "not measured".)
pub const MIN_THROUGHPUT: f64 = 1.0 / crate::records::job::MAX_SECONDS as f64;

/// The longest remaining time the policy is shown: ten years, the longest time a submission
/// may name.
pub const MAX_REMAINING_S: f64 = crate::records::job::MAX_SECONDS as f64;

/// The body of a progress report.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProgressReport {
    /// Steps done so far.
    pub steps: u64,
    /// Steps per second, as the job measured them (0 or absent: not measured).
    #[serde(default)]
    pub throughput: Option<f64>,
    /// Steps in all (gives the remaining time with the throughput).
    #[serde(default)]
    pub total_steps: Option<u64>,
}

impl ProgressReport {
    /// Refuses a report with a value no policy can use: steps beyond [`MAX_STEPS`], a total of 0
    /// or beyond it, a throughput that is not finite, negative, below [`MIN_THROUGHPUT`] (but not
    /// 0) or above [`MAX_THROUGHPUT`]. The error names the field.
    pub fn validate(&self) -> Result<(), FieldError> {
        let bad = |field: &'static str, reason: String| Err(FieldError { field, reason });
        if self.steps > MAX_STEPS {
            return bad(
                "steps",
                format!("{} is more than {MAX_STEPS} (2^53)", self.steps),
            );
        }
        match self.total_steps {
            Some(0) => return bad("total_steps", "must be at least 1".into()),
            Some(t) if t > MAX_STEPS => {
                return bad(
                    "total_steps",
                    format!("{t} is more than {MAX_STEPS} (2^53)"),
                );
            }
            _ => {}
        }
        match self.throughput {
            Some(t) if !t.is_finite() => bad("throughput", "must be a finite number".into()),
            Some(t) if t < 0.0 => bad("throughput", format!("{t} is negative")),
            Some(t) if t > 0.0 && t < MIN_THROUGHPUT => bad(
                "throughput",
                format!(
                    "{t} steps/s is below {MIN_THROUGHPUT:e} (one step in ten years); send 0 or leave it out when not measured"
                ),
            ),
            Some(t) if t > MAX_THROUGHPUT => bad(
                "throughput",
                format!("{t} steps/s is more than {MAX_THROUGHPUT:e}"),
            ),
            _ => Ok(()),
        }
    }
}

/// Seconds of work left at `throughput` steps per second with `done` of `total` steps done: at
/// least 1 s and at most [`MAX_REMAINING_S`]; `None` when the rate is not a usable number (0,
/// negative, not finite).
pub fn remaining_s(total: u64, done: u64, throughput: f64) -> Option<f64> {
    if !(throughput.is_finite() && throughput > 0.0) {
        return None;
    }
    let left = total.saturating_sub(done) as f64 / throughput;
    // `left` is +inf for a subnormal rate: `clamp` keeps it finite (NaN cannot occur: the
    // numerator is finite and the rate positive).
    Some(left.clamp(1.0, MAX_REMAINING_S))
}

/// A measured rate as the policy may see it: finite and within the bounds a report may give
/// (`None` for anything else, so a record written before the bounds existed is ignored).
pub fn usable_throughput(t: f64) -> Option<f64> {
    (t.is_finite() && (MIN_THROUGHPUT..=MAX_THROUGHPUT).contains(&t)).then_some(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn report(steps: u64, throughput: Option<f64>, total_steps: Option<u64>) -> ProgressReport {
        ProgressReport {
            steps,
            throughput,
            total_steps,
        }
    }

    #[test]
    fn the_report_that_froze_scheduling_is_refused_naming_the_field() {
        let attack = report(0, Some(5e-324), Some(u64::MAX));
        let e = attack.validate().expect_err("refused");
        assert_eq!(e.field, "total_steps", "{e}");
        let e = report(0, Some(5e-324), Some(10))
            .validate()
            .expect_err("refused");
        assert_eq!(e.field, "throughput", "{e}");
        let e = report(u64::MAX, None, None)
            .validate()
            .expect_err("refused");
        assert_eq!(e.field, "steps", "{e}");
        for t in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1.0, 1e10] {
            assert_eq!(
                report(0, Some(t), None)
                    .validate()
                    .expect_err("refused")
                    .field,
                "throughput",
                "{t}"
            );
        }
        assert_eq!(
            report(1, None, Some(0))
                .validate()
                .expect_err("refused")
                .field,
            "total_steps"
        );
    }

    #[test]
    fn ordinary_reports_pass() {
        for r in [
            report(0, None, None),
            report(10, Some(0.0), Some(100)),
            report(MAX_STEPS, Some(MAX_THROUGHPUT), Some(MAX_STEPS)),
            report(5, Some(MIN_THROUGHPUT), Some(6)),
        ] {
            assert_eq!(r.validate(), Ok(()), "{r:?}");
        }
    }

    #[test]
    fn remaining_time_is_bounded_even_for_values_no_report_may_give() {
        assert_eq!(remaining_s(u64::MAX, 0, 5e-324), Some(MAX_REMAINING_S));
        assert_eq!(remaining_s(100, 100, 1.0), Some(1.0));
        assert_eq!(remaining_s(100, 0, 0.0), None);
        assert_eq!(remaining_s(100, 0, f64::NAN), None);
        assert_eq!(remaining_s(100, 0, 4.0), Some(25.0));
    }

    proptest! {
        /// Whatever a report says, what the policy is shown is finite and in bounds.
        #[test]
        fn remaining_time_is_finite_and_bounded(total in any::<u64>(), done in any::<u64>(), bits in any::<u64>()) {
            let rate = f64::from_bits(bits);
            if let Some(r) = remaining_s(total, done, rate) {
                prop_assert!(r.is_finite() && (1.0..=MAX_REMAINING_S).contains(&r), "{r}");
            }
            if let Some(t) = usable_throughput(rate) {
                prop_assert!(t.is_finite() && t > 0.0);
            }
        }

        /// A report passes validation exactly when its values are in bounds.
        #[test]
        fn validation_matches_the_bounds(steps in any::<u64>(), total in proptest::option::of(any::<u64>()), bits in proptest::option::of(any::<u64>())) {
            let throughput = bits.map(f64::from_bits);
            let ok = steps <= MAX_STEPS
                && total.is_none_or(|t| (1..=MAX_STEPS).contains(&t))
                && throughput.is_none_or(|t| t == 0.0 || usable_throughput(t).is_some());
            prop_assert_eq!(report(steps, throughput, total).validate().is_ok(), ok);
        }
    }
}
