//! Simulated and wall time as integer milliseconds.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A point in time: milliseconds since the start of the workload (simulation) or since the Unix
/// epoch (daemon). Never read from a clock inside a policy: it is always passed in.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct SimTime(pub u64);

/// A span of time in milliseconds.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct SimDuration(pub u64);

impl SimTime {
    /// Time zero.
    pub const ZERO: SimTime = SimTime(0);
    /// The far future; used as "never".
    pub const MAX: SimTime = SimTime(u64::MAX);

    /// From whole milliseconds.
    pub const fn from_ms(ms: u64) -> Self {
        SimTime(ms)
    }
    /// From seconds, rounded to the nearest millisecond; negative or NaN input clamps to zero.
    pub fn from_secs_f64(secs: f64) -> Self {
        SimTime(secs_to_ms(secs))
    }
    /// Milliseconds.
    pub const fn as_ms(self) -> u64 {
        self.0
    }
    /// Seconds as a float.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1000.0
    }
    /// The span from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_since(self, earlier: SimTime) -> SimDuration {
        SimDuration(self.0.saturating_sub(earlier.0))
    }
}

impl SimDuration {
    /// No time.
    pub const ZERO: SimDuration = SimDuration(0);

    /// From whole milliseconds.
    pub const fn from_ms(ms: u64) -> Self {
        SimDuration(ms)
    }
    /// From whole seconds.
    pub const fn from_secs(secs: u64) -> Self {
        SimDuration(secs * 1000)
    }
    /// From seconds, rounded to the nearest millisecond; negative or NaN input clamps to zero.
    pub fn from_secs_f64(secs: f64) -> Self {
        SimDuration(secs_to_ms(secs))
    }
    /// From seconds, rounded up to the next millisecond, so that an event scheduled this far ahead
    /// never fires before the work it waits for is done.
    pub fn from_secs_f64_ceil(secs: f64) -> Self {
        if secs.is_nan() || secs <= 0.0 {
            return SimDuration(0);
        }
        let ms = (secs * 1000.0).ceil();
        SimDuration(if ms >= u64::MAX as f64 {
            u64::MAX
        } else {
            ms as u64
        })
    }
    /// Milliseconds.
    pub const fn as_ms(self) -> u64 {
        self.0
    }
    /// Seconds as a float.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1000.0
    }
}

fn secs_to_ms(secs: f64) -> u64 {
    if secs.is_nan() || secs <= 0.0 {
        0
    } else {
        let ms = (secs * 1000.0).round();
        if ms >= u64::MAX as f64 {
            u64::MAX
        } else {
            ms as u64
        }
    }
}

impl Add<SimDuration> for SimTime {
    type Output = SimTime;
    fn add(self, rhs: SimDuration) -> SimTime {
        SimTime(self.0.saturating_add(rhs.0))
    }
}

impl AddAssign<SimDuration> for SimTime {
    fn add_assign(&mut self, rhs: SimDuration) {
        self.0 = self.0.saturating_add(rhs.0);
    }
}

impl Sub<SimTime> for SimTime {
    type Output = SimDuration;
    /// Saturating: a later minus an earlier time; zero if reversed.
    fn sub(self, rhs: SimTime) -> SimDuration {
        self.saturating_since(rhs)
    }
}

impl Add for SimDuration {
    type Output = SimDuration;
    fn add(self, rhs: SimDuration) -> SimDuration {
        SimDuration(self.0.saturating_add(rhs.0))
    }
}

impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3}s", self.as_secs_f64())
    }
}

impl fmt::Display for SimDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3}s", self.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_round_trip_through_milliseconds() {
        assert_eq!(SimTime::from_secs_f64(1.2345).as_ms(), 1235);
        assert_eq!(SimDuration::from_secs_f64_ceil(0.0001).as_ms(), 1);
        assert_eq!(SimDuration::from_secs_f64(-3.0), SimDuration::ZERO);
        assert_eq!(SimTime(5) - SimTime(9), SimDuration::ZERO);
        assert_eq!(SimTime(5) + SimDuration(u64::MAX), SimTime(u64::MAX));
    }
}
