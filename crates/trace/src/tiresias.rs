//! Tiresias' trace CSV: `job_id,num_gpu,submit_time,iterations,model_name,duration,interval`,
//! times in seconds. `duration` drives completion, as in Tiresias' simulator.

use crate::rows::read_csv;
use crate::{Trace, TraceError};
use arbiter_model::{JobId, JobSpec, SimTime};
use std::path::Path;

/// Reads a Tiresias trace.
pub fn read(path: &Path) -> Result<Trace, TraceError> {
    let mut jobs = Vec::new();
    read_csv(
        path,
        b',',
        |file| file.require(&["job_id", "num_gpu", "submit_time", "duration"]),
        |row| {
            let submit_s = row.non_negative("submit_time")?;
            let duration_s = row.non_negative("duration")?;
            let gpus = row.gpu_count("num_gpu")?;
            let mut job = JobSpec::new(
                JobId(jobs.len() as u32),
                SimTime::from_secs_f64(submit_s),
                gpus,
                duration_s,
            );
            job.trace_id = row.get("job_id")?.to_string();
            if let Ok(model) = row.get("model_name") {
                job.model = Some(model.to_string());
            }
            if let Ok(text) = row.get("iterations") {
                job.iterations = text.parse().ok();
            }
            jobs.push(job);
            Ok(())
        },
    )?;
    Ok(Trace::from_jobs(jobs, None))
}

/// Reads a job-size prior: Tiresias' `yarn-gput*.csv`, one column `duration` of job sizes in
/// GPU-seconds (the Gittins policy's prior).
pub fn read_gpu_time_prior(path: &Path) -> Result<Vec<f64>, TraceError> {
    let mut samples = Vec::new();
    read_csv(
        path,
        b',',
        |f| f.require(&["duration"]),
        |row| {
            samples.push(row.non_negative("duration")?);
            Ok(())
        },
    )?;
    if samples.is_empty() {
        return Err(TraceError::File {
            path: path.to_path_buf(),
            reason: "no samples".into(),
        });
    }
    Ok(samples)
}
