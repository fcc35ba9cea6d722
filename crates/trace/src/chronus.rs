//! Chronus' deadline traces (SoCC'21 artifact, `trace_job_Philly_{SLO,MIX1,MIX2}.csv`):
//! `job_id,user,num_gpu,submit_time,iterations,model_name,duration,interval,expect_time_list,
//! expect_value_list,best_effort,job_type`, times in **minutes**.
//!
//! - `user` (the Philly virtual cluster) is the tenant; `duration` the run time on the requested
//!   GPUs (as the artifact's simulator runs it: placement does not change speed there);
//! - an SLO job's options are `expect_time_list` (minutes after submission, dash-separated) with
//!   `expect_value_list` (the value of finishing by each): one option for `strict` jobs, several
//!   decreasing ones (10-8-5-2) for `soft`; the first is the job's `deadline`;
//! - `best_effort = 1` (`job_type = best`): no deadline;
//! - every start and restart costs `0.5 × (1 + log2 GPUs)` minutes without progress (the
//!   artifact's checkpoint + resume overhead, 0.1 + 0.4 minutes scaled by gang size), set as
//!   the job's `restart_overhead`;
//! - rows asking for 0 GPUs (about 200 per trace; the artifact skips them too) are skipped and
//!   counted in [`Trace::skipped`].

use crate::rows::read_csv;
use crate::{Trace, TraceError};
use arbiter_model::{DeadlineOption, JobId, JobSpec, SimDuration, SimTime, TenantNames};
use std::path::Path;

/// Reads a Chronus trace.
pub fn read(path: &Path) -> Result<Trace, TraceError> {
    let mut jobs = Vec::new();
    let mut zero_gpu_rows = 0usize;
    let mut tenants = TenantNames::default();
    read_csv(
        path,
        b',',
        |f| {
            f.require(&[
                "job_id",
                "user",
                "num_gpu",
                "submit_time",
                "duration",
                "expect_time_list",
                "expect_value_list",
                "best_effort",
            ])
        },
        |row| {
            let gpus: u32 = row.parse("num_gpu")?;
            if gpus == 0 {
                zero_gpu_rows += 1;
                return Ok(());
            }
            let submit = SimTime::from_secs_f64(60.0 * row.non_negative("submit_time")?);
            let mut job = JobSpec::new(
                JobId(jobs.len() as u32),
                submit,
                gpus,
                60.0 * row.non_negative("duration")?,
            );
            job.trace_id = row.get("job_id")?.to_string();
            job.tenant = tenants.get(row.get("user")?);
            if let Ok(model) = row.get("model_name") {
                job.model = Some(model.to_string());
            }
            if let Ok(text) = row.get("iterations") {
                job.iterations = text.parse().ok();
            }
            job.restart_overhead = Some(SimDuration::from_secs_f64(
                30.0 * (1.0 + f64::from(gpus).log2()),
            ));
            let best_effort: u32 = row.parse("best_effort")?;
            if best_effort == 0 {
                let list = |field: &str| -> Result<Vec<f64>, TraceError> {
                    row.get(field)?
                        .split('-')
                        .map(|x| {
                            x.trim()
                                .parse::<f64>()
                                .ok()
                                .filter(|v| v.is_finite() && *v > 0.0)
                        })
                        .collect::<Option<Vec<f64>>>()
                        .ok_or_else(|| {
                            row.error(
                                field,
                                "expected positive numbers separated by `-` (e.g. 123-163-193)",
                            )
                        })
                };
                let (times, values) = (list("expect_time_list")?, list("expect_value_list")?);
                if times.len() != values.len() {
                    return Err(row.error(
                        "expect_value_list",
                        format!("{} values for {} deadlines", values.len(), times.len()),
                    ));
                }
                if times.windows(2).any(|w| w[1] <= w[0]) || values.windows(2).any(|w| w[1] > w[0])
                {
                    return Err(row.error(
                        "expect_time_list",
                        "deadline options must come later and be worth no more, in order",
                    ));
                }
                let options: Vec<DeadlineOption> = times
                    .iter()
                    .zip(&values)
                    .map(|(t, v)| DeadlineOption {
                        deadline: submit + SimDuration::from_secs_f64(60.0 * t),
                        value: *v,
                    })
                    .collect();
                job.deadline = options.first().map(|o| o.deadline);
                if options.len() > 1 {
                    job.deadline_options = options;
                }
            }
            jobs.push(job);
            Ok(())
        },
    )?;
    let mut trace = Trace::from_jobs(jobs, None);
    if zero_gpu_rows > 0 {
        trace
            .skipped
            .push((zero_gpu_rows, "asking for 0 GPUs".to_string()));
    }
    Ok(trace)
}
