//! Policies that are a fixed order plus [`crate::mechanisms::greedy`]: FIFO, SJF, SRTF and SRSF.

use crate::descriptor::{Descriptor, Family};
use crate::mechanisms::greedy::{GreedyOptions, GreedyScratch, schedule_changes_in_order_reusing};
use crate::mechanisms::placement::Placing;
use crate::{Policy, PolicyError, SchedulerView, order_key};
use arbiter_model::{Decision, SimTime};

/// `fifo`.
pub const FIFO: Descriptor = Descriptor::new(
    "fifo",
    Family::Events,
    "strict FIFO, head-of-line blocking (YARN-CS, as in the Philly and Tiresias papers)",
)
.aliases(&["yarn-cs"])
.paper("baseline in the Philly and Tiresias papers")
.detail("strict FIFO with head-of-line blocking (YARN-CS); non-preemptive");
/// `sjf`.
pub const SJF: Descriptor = Descriptor::new(
    "sjf",
    Family::Events,
    "shortest job first by trace duration, non-preemptive (oracle baseline in Helios)",
)
.paper("baseline in Helios (SC'21)")
.detail("shortest job first by trace duration (oracle); non-preemptive, fit-first");
/// `srtf`.
pub const SRTF: Descriptor = Descriptor::new(
    "srtf",
    Family::Events,
    "shortest remaining time first, preemptive (oracle baseline in Tiresias, Muri, Helios)",
)
.paper("Tiresias (NSDI'19), Muri (SIGCOMM'22)")
.detail("shortest remaining time first (oracle); preemptive");
/// `srsf`.
pub const SRSF: Descriptor = Descriptor::new(
    "srsf",
    Family::Events,
    "shortest remaining service (time x GPUs) first, preemptive (Tiresias, Muri)",
)
.paper("Tiresias, Muri")
.detail("shortest remaining service (remaining time × GPUs) first (oracle); preemptive");
/// `edf`.
pub const EDF: Descriptor = Descriptor::new("edf", Family::Events, "earliest deadline first, jobs without a deadline after (submission order); preemptive (baseline in Chronus, SoCC'21)")
    .paper("baseline in Chronus (SoCC'21)")
    .detail("earliest deadline first (the job's first deadline), jobs without one after in submission order; preemptive");

/// Builds `fifo`.
pub fn build_fifo(placing: Placing) -> Result<OrderedPolicy, PolicyError> {
    Ok(OrderedPolicy::new(Order::Fifo, placing))
}

/// Builds `sjf`.
pub fn build_sjf(placing: Placing) -> Result<OrderedPolicy, PolicyError> {
    Ok(OrderedPolicy::new(Order::ShortestJob, placing))
}

/// Builds `srtf`.
pub fn build_srtf(placing: Placing) -> Result<OrderedPolicy, PolicyError> {
    Ok(OrderedPolicy::new(Order::ShortestRemainingTime, placing))
}

/// Builds `srsf`.
pub fn build_srsf(placing: Placing) -> Result<OrderedPolicy, PolicyError> {
    Ok(OrderedPolicy::new(Order::ShortestRemainingService, placing))
}

/// Builds `edf`.
pub fn build_edf(placing: Placing) -> Result<OrderedPolicy, PolicyError> {
    Ok(OrderedPolicy::new(Order::EarliestDeadline, placing))
}

/// Which order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Submission time. Non-preemptive with head-of-line blocking: YARN-CS's strict FIFO.
    Fifo,
    /// Total run time (oracle), shortest first. Non-preemptive, fit-first.
    ShortestJob,
    /// Remaining run time (oracle), shortest first. Preemptive.
    ShortestRemainingTime,
    /// Remaining run time × GPUs (oracle), smallest first. Preemptive.
    ShortestRemainingService,
    /// Earliest deadline first; jobs without one after, in submission order. Preemptive.
    EarliestDeadline,
}

/// A fixed-order policy.
#[derive(Clone, Debug)]
pub struct OrderedPolicy {
    order: Order,
    options: GreedyOptions,
    scratch: GreedyScratch,
}

impl OrderedPolicy {
    /// A policy with the classic switches for its order, placing as `placing` says.
    pub fn new(order: Order, placing: Placing) -> Self {
        let preemptive = matches!(
            order,
            Order::ShortestRemainingTime
                | Order::ShortestRemainingService
                | Order::EarliestDeadline
        );
        let options = GreedyOptions {
            preemptive,
            head_of_line_blocking: order == Order::Fifo,
            ..GreedyOptions::fit_first(placing)
        };
        OrderedPolicy {
            order,
            options,
            scratch: GreedyScratch::default(),
        }
    }
}

impl Policy for OrderedPolicy {
    fn name(&self) -> &'static str {
        match self.order {
            Order::Fifo => FIFO.name,
            Order::ShortestJob => SJF.name,
            Order::ShortestRemainingTime => SRTF.name,
            Order::ShortestRemainingService => SRSF.name,
            Order::EarliestDeadline => EDF.name,
        }
    }

    fn schedule(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> Result<Decision, PolicyError> {
        let (scratch, options) = (&mut self.scratch, self.options);
        let decision = match self.order {
            Order::Fifo => {
                schedule_changes_in_order_reusing(scratch, view, now, options, |j| j.submit)
            }
            Order::ShortestJob => {
                schedule_changes_in_order_reusing(scratch, view, now, options, |j| {
                    order_key(view.spec(j).run_time_s)
                })
            }
            Order::ShortestRemainingTime => {
                schedule_changes_in_order_reusing(scratch, view, now, options, |j| {
                    order_key(j.remaining_s_at(now))
                })
            }
            Order::ShortestRemainingService => {
                schedule_changes_in_order_reusing(scratch, view, now, options, |j| {
                    order_key(j.remaining_s_at(now) * j.gpus as f64)
                })
            }
            // (deadline or none, submission): best-effort jobs after every job with a deadline.
            Order::EarliestDeadline => {
                schedule_changes_in_order_reusing(scratch, view, now, options, |j| {
                    (
                        view.spec(j).deadline.map_or(u64::MAX, SimTime::as_ms),
                        j.submit,
                    )
                })
            }
        };
        Ok(decision)
    }
}
