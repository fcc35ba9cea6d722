//! Muri's Philly-derived traces: Tiresias' columns plus `batch_size`, `iteration_time`,
//! `resource_time_0..2` and `priority`. **All times are milliseconds.**
//!
//! As in Muri's simulator, a job's work is `iterations × iteration_time` (the `duration` column is
//! not what is simulated), optionally scaled by an iteration-time factor (Muri uses 1.015). Each job
//! also gets Muri's profiled start-up overhead for its model and GPU count as its restart overhead.

use crate::rows::read_csv;
use crate::{Trace, TraceError};
use arbiter_model::{IterationStages, JobId, JobSpec, SimDuration, SimTime};
use std::path::Path;

/// Muri's profiled start-up overhead in seconds for a model on `gpus` GPUs (table in Muri's
/// `run_sim.py`); 10 s for models or sizes it does not list.
pub fn startup_overhead_s(model: &str, gpus: u32) -> u64 {
    // Columns: vgg16, vgg19, resnet18, shufflenet_v2_x1_0, bert, gpt2, a2c, dqn.
    const MODELS: [&str; 8] = [
        "vgg16",
        "vgg19",
        "resnet18",
        "shufflenet_v2_x1_0",
        "bert",
        "gpt2",
        "a2c",
        "dqn",
    ];
    const TABLE: [(u32, [u64; 8]); 6] = [
        (1, [7, 7, 4, 4, 10, 10, 38, 5]),
        (2, [7, 7, 5, 4, 10, 10, 39, 5]),
        (4, [8, 8, 5, 5, 10, 10, 39, 6]),
        (8, [9, 9, 7, 5, 10, 10, 46, 6]),
        (16, [9, 10, 7, 7, 10, 10, 46, 8]),
        (32, [10, 10, 7, 8, 10, 10, 46, 8]),
    ];
    let Some(column) = MODELS.iter().position(|m| *m == model) else {
        return 10;
    };
    TABLE
        .iter()
        .find(|(g, _)| *g == gpus)
        .map(|(_, row)| row[column])
        .unwrap_or(10)
}

/// Reads a Muri trace; `iteration_time_factor` scales every iteration time (1.0 reads as-is).
pub fn read(path: &Path, iteration_time_factor: f64) -> Result<Trace, TraceError> {
    if !(iteration_time_factor.is_finite() && iteration_time_factor > 0.0) {
        return Err(TraceError::File {
            path: path.to_path_buf(),
            reason: format!("iteration_time_factor must be > 0, got {iteration_time_factor}"),
        });
    }
    let mut jobs = Vec::new();
    read_csv(
        path,
        b',',
        |file| {
            file.require(&[
                "job_id",
                "num_gpu",
                "submit_time",
                "iterations",
                "model_name",
                "iteration_time",
            ])
        },
        |row| {
            let submit_ms = row.non_negative("submit_time")?;
            let iterations: f64 = row.non_negative("iterations")?;
            let iteration_ms = row.non_negative("iteration_time")?;
            let gpus = row.gpu_count("num_gpu")?;
            let model = row.get("model_name")?.to_string();
            let run_time_s = iterations * iteration_ms * iteration_time_factor / 1000.0;
            let mut job = JobSpec::new(
                JobId(jobs.len() as u32),
                SimTime::from_ms(submit_ms.round() as u64),
                gpus,
                run_time_s,
            );
            job.trace_id = row.get("job_id")?.to_string();
            job.iterations = Some(iterations as u64);
            job.restart_overhead = Some(SimDuration::from_secs(startup_overhead_s(&model, gpus)));
            job.model = Some(model);
            if let Ok(p) = row.get("priority") {
                job.priority = p.parse().unwrap_or(0);
            }
            // Stage times as Muri's simulator takes them: milliseconds to seconds, not scaled by
            // the iteration-time factor (its iteration time is).
            let stage = |i: usize| row.optional_non_negative(&format!("resource_time_{i}"));
            if let (Some(io), Some(cpu), Some(gpu)) = (stage(0)?, stage(1)?, stage(2)?) {
                job.stages = Some(IterationStages {
                    io_s: io / 1000.0,
                    cpu_s: cpu / 1000.0,
                    gpu_s: gpu / 1000.0,
                });
            }
            job.iteration_s = Some(iteration_ms * iteration_time_factor / 1000.0);
            // Muri truncates the column to whole milliseconds first.
            job.trace_duration_s = row
                .optional_non_negative("duration")?
                .map(|ms| ms.trunc() / 1000.0);
            jobs.push(job);
            Ok(())
        },
    )?;
    Ok(Trace::from_jobs(jobs, None))
}
