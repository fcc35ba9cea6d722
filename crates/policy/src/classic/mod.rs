//! The classic orders: FIFO, SJF, SRTF, SRSF and EDF ([`ordered`]), and FIFO with EASY
//! backfilling ([`backfill`]).

pub mod backfill;
pub mod ordered;
