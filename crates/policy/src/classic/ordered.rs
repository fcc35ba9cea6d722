//! Policies that are a fixed order plus [`crate::mechanisms::greedy`]: FIFO, SJF, SRTF and SRSF.

use crate::mechanisms::greedy::{GreedyOptions, schedule_changes_in_order};
use crate::{order_key, Policy, PolicyError, SchedulerView};
use arbiter_model::{Decision, SimTime};

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
}

impl OrderedPolicy {
    /// A policy with the classic switches for its order, and the given placement options.
    pub fn new(order: Order, strategy: crate::PlacementStrategy, keep_placements: bool) -> Self {
        let preemptive = matches!(order, Order::ShortestRemainingTime | Order::ShortestRemainingService | Order::EarliestDeadline);
        let options = GreedyOptions {
            preemptive,
            head_of_line_blocking: order == Order::Fifo,
            keep_placements,
            strategy,
        };
        OrderedPolicy { order, options }
    }
}

impl Policy for OrderedPolicy {
    fn name(&self) -> &'static str {
        match self.order {
            Order::Fifo => "fifo",
            Order::ShortestJob => "sjf",
            Order::ShortestRemainingTime => "srtf",
            Order::ShortestRemainingService => "srsf",
            Order::EarliestDeadline => "edf",
        }
    }

    fn schedule(&mut self, view: &SchedulerView<'_>, now: SimTime) -> Result<Decision, PolicyError> {
        let decision = match self.order {
            Order::Fifo => schedule_changes_in_order(view, now, self.options, |j| j.submit),
            Order::ShortestJob => {
                schedule_changes_in_order(view, now, self.options, |j| order_key(view.spec(j).run_time_s))
            }
            Order::ShortestRemainingTime => {
                schedule_changes_in_order(view, now, self.options, |j| order_key(j.remaining_s_at(now)))
            }
            Order::ShortestRemainingService => schedule_changes_in_order(view, now, self.options, |j| {
                order_key(j.remaining_s_at(now) * j.gpus as f64)
            }),
            // (deadline or none, submission): best-effort jobs after every job with a deadline.
            Order::EarliestDeadline => {
                schedule_changes_in_order(view, now, self.options, |j| (view.spec(j).deadline.map_or(u64::MAX, SimTime::as_ms), j.submit))
            }
        };
        Ok(decision)
    }
}
