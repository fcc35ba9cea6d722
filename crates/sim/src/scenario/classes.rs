//! A scenario's priority classes (`[[priority_classes]]`): what each class is worth, whether
//! its jobs may be preempted for a higher class, and the share of a trace's jobs it gets when
//! the trace does not name classes itself (its `priority_class` column).

use arbiter_model::{JobClass, JobSpec};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::sync::Arc;

/// One priority class of a scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassSpec {
    /// Its name, as a trace's `priority_class` column gives it.
    pub name: String,
    /// Higher values are served first.
    pub value: i32,
    /// Whether its running jobs may be preempted for a job of a higher class.
    #[serde(default = "yes")]
    pub preemptible: bool,
    /// The share of the jobs that name no class given this one, drawn per job with a fixed
    /// seed (the same classes for every policy and seed). Shares, where given, add up to 1.
    #[serde(default)]
    pub share: Option<f64>,
}

fn yes() -> bool {
    true
}

/// Checks a scenario's classes: names unique, shares in [0, 1] adding up to 1 where given.
pub fn check(classes: &[ClassSpec]) -> Result<(), String> {
    let mut names = BTreeSet::new();
    for (i, c) in classes.iter().enumerate() {
        if c.name.trim().is_empty() {
            return Err(format!("priority_classes.{i}.name is empty"));
        }
        if !names.insert(c.name.as_str()) {
            return Err(format!(
                "priority_classes.{i}.name: `{}` is defined twice",
                c.name
            ));
        }
        if let Some(s) = c.share
            && !(0.0..=1.0).contains(&s)
        {
            return Err(format!(
                "priority_classes.{i}.share: {s} is not between 0 and 1"
            ));
        }
    }
    let shares: Vec<f64> = classes.iter().filter_map(|c| c.share).collect();
    let total: f64 = shares.iter().sum();
    if !shares.is_empty() && (total - 1.0).abs() > 1e-9 {
        return Err(format!(
            "priority_classes: the shares add up to {total}, not 1"
        ));
    }
    Ok(())
}

/// Gives every job of a trace (`context` names it in errors) its class: the one its
/// `priority_class` column names, else one drawn by the classes' shares, else none.
pub fn assign(classes: &[ClassSpec], jobs: &mut [JobSpec], context: &str) -> Result<(), String> {
    let class_of = |c: &ClassSpec| JobClass {
        name: Some(Arc::from(c.name.as_str())),
        value: c.value,
        preemptible: c.preemptible,
    };
    let mut draw = ChaCha8Rng::seed_from_u64(0);
    let shared: Vec<&ClassSpec> = classes.iter().filter(|c| c.share.is_some()).collect();
    for job in jobs {
        match job.class.name.clone() {
            Some(name) => {
                let c = classes.iter().find(|c| *c.name == *name).ok_or_else(|| {
                    let known: Vec<&str> = classes.iter().map(|c| c.name.as_str()).collect();
                    format!("{context}: job {} names priority class `{name}`, which [[priority_classes]] does not define (defined: {})", job.trace_id, if known.is_empty() { "none".to_string() } else { known.join(", ") })
                })?;
                job.class = class_of(c);
            }
            None if !shared.is_empty() => {
                let mut x: f64 = draw.random();
                let picked = shared.iter().find(|c| {
                    x -= c.share.unwrap_or(0.0);
                    x < 0.0
                });
                if let Some(c) = picked.or(shared.last()) {
                    job.class = class_of(c);
                }
            }
            None => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbiter_model::{JobId, SimTime};

    fn spec(name: &str, value: i32, share: Option<f64>) -> ClassSpec {
        ClassSpec {
            name: name.into(),
            value,
            preemptible: true,
            share,
        }
    }

    fn jobs(n: u32) -> Vec<JobSpec> {
        (0..n)
            .map(|i| JobSpec::new(JobId(i), SimTime::ZERO, 1, 10.0))
            .collect()
    }

    #[test]
    fn shares_split_the_jobs_and_the_draw_is_the_same_every_time() {
        let classes = [spec("high", 100, Some(0.25)), spec("low", 10, Some(0.75))];
        let mut a = jobs(4000);
        assign(&classes, &mut a, "t").expect("assigns");
        let high = a.iter().filter(|j| j.class.value == 100).count();
        assert!((900..1100).contains(&high), "{high} of 4000 high");
        let mut b = jobs(4000);
        assign(&classes, &mut b, "t").expect("assigns");
        assert_eq!(a, b);
    }

    #[test]
    fn a_class_named_by_the_trace_is_looked_up_and_an_unknown_one_refused() {
        let classes = [spec("high", 100, None)];
        let mut js = jobs(2);
        js[0].class.name = Some("high".into());
        assign(&classes, &mut js, "t").expect("assigns");
        assert_eq!((js[0].class.value, js[1].class.value), (100, 0));
        js[1].class.name = Some("urgent".into());
        let err = assign(&classes, &mut js, "trace `a`").expect_err("unknown");
        assert!(
            err.contains("job 1 names priority class `urgent`") && err.contains("defined: high"),
            "{err}"
        );
    }

    #[test]
    fn bad_definitions_are_refused_naming_the_key() {
        assert!(
            check(&[spec("a", 1, None), spec("a", 2, None)])
                .expect_err("twice")
                .contains("priority_classes.1.name")
        );
        assert!(
            check(&[spec("a", 1, Some(0.5))])
                .expect_err("sum")
                .contains("add up to 0.5")
        );
        assert!(
            check(&[spec("a", 1, Some(1.5)), spec("b", 1, Some(-0.5))])
                .expect_err("range")
                .contains("priority_classes.0.share")
        );
    }
}
