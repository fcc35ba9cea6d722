//! The daemon's clock: the system's in production, a virtual one when tests step the
//! scheduling loop by hand (HyperQueue's "`now` is passed in").

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Unix time in milliseconds.
pub trait Clock: Send + Sync + Debug {
    /// Now, Unix milliseconds.
    fn now_ms(&self) -> u64;
}

/// The system clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }
}

/// A clock that moves only when told to.
#[derive(Debug, Default)]
pub struct VirtualClock(AtomicU64);

impl VirtualClock {
    /// A clock standing at `ms`.
    pub fn at(ms: u64) -> Self {
        VirtualClock(AtomicU64::new(ms))
    }

    /// Moves the clock to `ms` (never backwards).
    pub fn set(&self, ms: u64) {
        self.0.fetch_max(ms, Ordering::SeqCst);
    }
}

impl Clock for VirtualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Unix seconds as `YYYY-MM-DD HH:MM:SS` UTC.
pub fn utc_text(unix_s: i64) -> String {
    chrono::DateTime::from_timestamp(unix_s, 0).map_or_else(
        || format!("{unix_s} (Unix time)"),
        |t| t.format("%Y-%m-%d %H:%M:%S").to_string(),
    )
}
