//! Cluster-spec CSVs of Tiresias' and Muri's simulators:
//! `num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node` and one data row, e.g.
//! `1,8,8,92,520` for Muri's `n8g8` (8 nodes × 8 GPUs under one switch). Switches become racks.

use crate::TraceError;
use crate::rows::read_csv;
use arbiter_model::Cluster;
use std::path::Path;

/// Reads a cluster spec; `gpu_type` names the (single) GPU type.
pub fn read(path: &Path, gpu_type: &str) -> Result<Cluster, TraceError> {
    let mut spec: Option<[u32; 5]> = None;
    let columns = [
        "num_switch",
        "num_node_p_switch",
        "num_gpu_p_node",
        "num_cpu_p_node",
        "mem_p_node",
    ];
    read_csv(
        path,
        b',',
        |f| f.require(&columns),
        |row| {
            if spec.is_some() {
                return Err(row.error("row", "a cluster spec has exactly one data row"));
            }
            let mut values = [0u32; 5];
            for (value, column) in values.iter_mut().zip(columns) {
                *value = row.parse(column)?;
            }
            spec = Some(values);
            Ok(())
        },
    )?;
    let [racks, nodes, gpus, cpus, memory] = spec.ok_or_else(|| TraceError::File {
        path: path.to_path_buf(),
        reason: "no data row".into(),
    })?;
    Cluster::homogeneous(racks, nodes, gpus, cpus, memory, gpu_type).map_err(|e| TraceError::File {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}
