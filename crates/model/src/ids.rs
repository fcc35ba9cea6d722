//! Typed identifiers. A newtype per kind of thing so a node index can never be passed as a job id.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! id_type {
    ($(#[$meta:meta])* $name:ident($inner:ty), $prefix:literal) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub $inner);

        impl $name {
            /// The id as an index into a dense table.
            #[inline]
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}{}", $prefix, self.0)
            }
        }
    };
}

id_type!(
    /// A job, numbered densely from 0 in submission order within one workload.
    JobId(u32), "job"
);
id_type!(
    /// A node (server) of the cluster, numbered densely from 0.
    NodeId(u32), "node"
);
id_type!(
    /// A rack (Tiresias/Muri call it a switch): nodes under one top-of-rack switch.
    RackId(u32), "rack"
);
id_type!(
    /// A GPU type (K80, V100, ...), an index into [`crate::Cluster::gpu_type_names`].
    GpuTypeId(u8), "gpu-type"
);
