//! What ran where and when: the pieces of every job's time on GPUs, recorded only when a report
//! asks for them ([`crate::SimConfig::record_timeline`]). Reports draw Gantt charts,
//! utilization and queue length over time from them; metrics never read them.

use crate::metrics::{GpuSharing, GpuTime, gpu_time};
use serde::{Deserialize, Serialize};

/// One stretch of a job on GPUs with nothing about it changing: same placement, same sharing.
/// A stint (start to preemption, migration or completion) is one or more consecutive segments;
/// a gap between two segments of a job is time it spent queued.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSegment {
    /// Dense job id.
    pub job: u32,
    /// Start, seconds.
    pub start_s: f64,
    /// End, seconds.
    pub end_s: f64,
    /// `(node index, GPUs on it)`, as the placement names them.
    pub slots: Vec<(u32, u32)>,
    /// The share of these GPUs' time that is the job's: 1 alone, 1/k in a group of k sharing
    /// them (space sharing).
    pub gpu_share: f64,
    /// Whether it ran as a guest on GPUs it does not hold (opportunistic sharing).
    pub guest: bool,
    /// A guest's GPUs that another job held (the rest nobody held); 0 for a job that holds its
    /// GPUs.
    #[serde(default)]
    pub on_held: u32,
}

impl RunSegment {
    /// GPUs it ran on.
    pub fn gpus(&self) -> u32 {
        self.slots.iter().map(|(_, g)| g).sum()
    }

    /// GPU-seconds it was allocated (its share of the GPUs' time); 0 for a guest, whose GPUs
    /// count for their holder.
    pub fn allocated_gpu_s(&self) -> f64 {
        if self.guest {
            0.0
        } else {
            (self.end_s - self.start_s) * self.gpus() as f64 * self.gpu_share
        }
    }

    /// How it shared its GPUs, for [`crate::metrics::gpu_time`].
    pub fn sharing(&self) -> GpuSharing {
        if self.guest {
            GpuSharing::Guest {
                on_held: self.on_held,
            }
        } else {
            GpuSharing::Held {
                share: self.gpu_share,
            }
        }
    }

    /// Its part of the cluster's busy and shared GPUs while it ran (GPUs, not GPU-seconds), by
    /// the rule utilization counts by ([`crate::metrics::gpu_time`]: each GPU once).
    pub fn gpus_counted(&self) -> GpuTime {
        gpu_time(1.0, self.gpus(), self.sharing())
    }
}
