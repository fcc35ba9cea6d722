//! Policies written in Python, in-process: what a scheduling point hands them and how their
//! answer comes back, as plain Rust (`py.rs` calls into Python with it). The features are the
//! external protocol's ([`Observation`]), packed as bytes that NumPy reads without a copy per
//! job: one float64 column after another.

use arbiter_policy::external::Observation;
use std::collections::HashMap;

/// The job columns, in the order [`pack`] writes them (`python/arbiter/_policy.py` reads them
/// in this order).
pub const COLUMNS: [&str; 9] = ["id", "tenant", "gpus", "submit_s", "running", "executed_s", "attained_gpu_s", "duration_s", "remaining_s"];

/// Tenants as small integers, in the order first seen, for the `tenant` column.
#[derive(Debug, Default)]
pub struct TenantCodes {
    codes: HashMap<String, usize>,
    names: Vec<String>,
    /// Each job's code by id, once known (a job's tenant never changes): no hashing per job.
    by_job: Vec<Option<usize>>,
    /// How many of `names` the Python side already has.
    sent: usize,
}

impl TenantCodes {
    fn code(&mut self, job: u32, tenant: &str) -> usize {
        if let Some(&Some(code)) = self.by_job.get(job as usize) {
            return code;
        }
        let code = match self.codes.get(tenant) {
            Some(&code) => code,
            None => {
                let code = self.names.len();
                self.codes.insert(tenant.to_string(), code);
                self.names.push(tenant.to_string());
                code
            }
        };
        if self.by_job.len() <= job as usize {
            self.by_job.resize(job as usize + 1, None);
        }
        self.by_job[job as usize] = Some(code);
        code
    }

    /// The tenants seen since the last call, in code order.
    pub fn take_new(&mut self) -> &[String] {
        let new = &self.names[self.sent..];
        self.sent = self.names.len();
        new
    }
}

/// The bytes [`pack_columns`] writes for `jobs` jobs.
pub fn columns_len(jobs: usize) -> usize {
    8 * COLUMNS.len() * jobs
}

/// Writes the job columns of `observation` into `out` ([`columns_len`] bytes; float64, native
/// byte order, one column after another in [`COLUMNS`] order), coding tenants with `tenants`:
/// one pass over the jobs, straight into the buffer Python reads.
pub fn pack_columns(observation: &Observation<'_>, tenants: &mut TenantCodes, out: &mut [u8]) {
    let n = observation.jobs.len();
    let mut put = |column: usize, row: usize, value: f64| {
        let at = 8 * (column * n + row);
        if let Some(slot) = out.get_mut(at..at + 8) {
            slot.copy_from_slice(&value.to_ne_bytes());
        }
    };
    for (i, job) in observation.jobs.iter().enumerate() {
        put(0, i, f64::from(job.id));
        put(1, i, tenants.code(job.id, job.tenant) as f64);
        put(2, i, f64::from(job.gpus));
        put(3, i, job.submit_s);
        put(4, i, if job.running { 1.0 } else { 0.0 });
        put(5, i, job.executed_s);
        put(6, i, job.attained_gpu_s);
        put(7, i, job.duration_s);
        put(8, i, job.remaining_s);
    }
}

/// Free GPUs per node as int64 bytes (native byte order).
pub fn pack_free(observation: &Observation<'_>) -> Vec<u8> {
    observation.free_gpus.iter().flat_map(|&f| i64::from(f).to_ne_bytes()).collect()
}

/// An order of job ids from int64 bytes (native byte order); an id no job can have is the
/// error, as the id.
pub fn unpack_order(bytes: &[u8]) -> Result<Vec<u32>, i64> {
    bytes
        .chunks_exact(8)
        .map(|chunk| {
            let mut id = [0u8; 8];
            id.copy_from_slice(chunk);
            let id = i64::from_ne_bytes(id);
            u32::try_from(id).map_err(|_| id)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbiter_policy::external::JobFeatures;

    fn floats(bytes: &[u8]) -> Vec<f64> {
        bytes.chunks_exact(8).map(|c| f64::from_ne_bytes(c.try_into().expect("8 bytes"))).collect()
    }

    #[test]
    fn columns_come_one_after_another_with_tenants_coded_in_order_seen() {
        let job = |id, tenant| JobFeatures { id, tenant, gpus: 2, submit_s: 1.5, running: id == 7, executed_s: 3.0, attained_gpu_s: 6.0, duration_s: 10.0, remaining_s: 7.0 };
        let observation = Observation { time_s: 4.5, free_gpus: vec![3, 0], jobs: vec![job(7, "b"), job(9, "a"), job(11, "b")] };
        let mut tenants = TenantCodes::default();
        let mut packed = vec![0; columns_len(3)];
        pack_columns(&observation, &mut tenants, &mut packed);
        let columns = floats(&packed);
        assert_eq!(columns.len(), 3 * COLUMNS.len());
        assert_eq!(&columns[0..3], &[7.0, 9.0, 11.0]);
        assert_eq!(&columns[3..6], &[0.0, 1.0, 0.0]);
        assert_eq!(&columns[12..15], &[1.0, 0.0, 0.0]);
        assert_eq!(&columns[24..27], &[7.0, 7.0, 7.0]);
        assert_eq!(tenants.take_new(), ["b", "a"]);
        assert!(tenants.take_new().is_empty());
        assert_eq!(pack_free(&observation), [3i64, 0].iter().flat_map(|f| f.to_ne_bytes()).collect::<Vec<u8>>());
    }

    #[test]
    fn an_order_is_ids_and_an_impossible_id_is_named() {
        let bytes = |ids: &[i64]| ids.iter().flat_map(|i| i.to_ne_bytes()).collect::<Vec<u8>>();
        assert_eq!(unpack_order(&bytes(&[3, 1, 2])), Ok(vec![3, 1, 2]));
        assert_eq!(unpack_order(&bytes(&[3, -1])), Err(-1));
        assert_eq!(unpack_order(&bytes(&[1 << 40])), Err(1 << 40));
    }
}
