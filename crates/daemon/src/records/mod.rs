//! The daemon's domain records: jobs and their histories ([`job`], [`jobs`]), job arrays ([`array`]), reservations ([`reservation`]), who holds which GPU ([`holders`]), the embedded store
//! that persists every transition before it is acted on ([`store`]), what tenants keep
//! ([`retention`]), what a job says of its progress ([`progress`]), learned co-location speeds
//! ([`pairs`]), what every run used ([`usage`]), the cluster's history for replays ([`history`]), webhook events waiting for delivery ([`outbox`]), the cluster's nodes ([`topology`]) and the policy's view of it all ([`view`]).
//!
//! Records know the configuration and the text rules ([`crate::security::text`]); they know
//! nothing of executors, the round or the API.

pub mod array;
pub mod history;
pub mod holders;
pub mod job;
pub mod jobs;
pub mod outbox;
pub mod pairs;
pub mod progress;
pub mod reservation;
pub mod retention;
pub mod store;
pub mod topology;
pub mod usage;
pub mod view;
