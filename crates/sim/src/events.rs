//! The engine's future events, ordered by `(time, sequence)`, with removal.
//!
//! Every start, stop and speed change of a job re-predicts its completion. A binary heap with lazy
//! invalidation kept every superseded prediction until its time came: under a round-based
//! policy (Gavel re-places jobs every 360 s) the heap grew to millions of dead entries, and
//! popping them was a tenth of a simulation's time. Here each job's pending completion and
//! failure, and the policy's pending wake-up, are known by key and cancelled when superseded, so
//! the queue holds only events that will fire. Order among live events is unchanged: the
//! sequence number still breaks ties in push order.

use std::collections::BTreeSet;

/// What happens at an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum EventKind {
    // Order matters only for determinism among same-time events: completions first.
    Completion { job: u32, generation: u32 },
    Failure { job: u32, attempt: u32 },
    Wake { token: u64 },
    Round,
}

/// A pushed event's identity: its time (ms) and sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EventKey {
    at_ms: u64,
    sequence: u64,
}

/// Future events; see the module docs.
#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    events: BTreeSet<(u64, u64, EventKind)>,
    sequence: u64,
}

impl EventQueue {
    /// Adds an event at `at_ms`; its key cancels it.
    pub(crate) fn push(&mut self, at_ms: u64, kind: EventKind) -> EventKey {
        self.sequence += 1;
        self.events.insert((at_ms, self.sequence, kind));
        EventKey { at_ms, sequence: self.sequence }
    }

    /// Removes the event `key` names, if it has not fired yet.
    pub(crate) fn cancel(&mut self, key: EventKey) {
        // The kind is not part of the identity: (time, sequence) is unique, so the event is the
        // only one in the range from the smallest kind on.
        let found = self.events.range((key.at_ms, key.sequence, EventKind::Completion { job: 0, generation: 0 })..).next().copied();
        if let Some(event) = found.filter(|(at, seq, _)| *at == key.at_ms && *seq == key.sequence) {
            self.events.remove(&event);
        }
    }

    /// The time of the earliest event.
    pub(crate) fn next_time_ms(&self) -> Option<u64> {
        self.events.first().map(|(at, _, _)| *at)
    }

    /// Takes the earliest event if it is due at `now_ms`.
    pub(crate) fn pop_due(&mut self, now_ms: u64) -> Option<EventKind> {
        match self.events.first() {
            Some((at, _, _)) if *at == now_ms => self.events.pop_first().map(|(_, _, kind)| kind),
            _ => None,
        }
    }

    /// Whether no event is pending.
    pub(crate) fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_in_time_then_push_order_and_cancelled_ones_never() {
        let mut q = EventQueue::default();
        let late = q.push(20, EventKind::Round);
        q.push(10, EventKind::Wake { token: 1 });
        let cancelled = q.push(10, EventKind::Completion { job: 3, generation: 1 });
        q.push(10, EventKind::Completion { job: 4, generation: 1 });
        q.cancel(cancelled);
        q.cancel(cancelled); // twice: no effect
        assert_eq!(q.next_time_ms(), Some(10));
        assert_eq!(q.pop_due(9), None);
        assert_eq!(q.pop_due(10), Some(EventKind::Wake { token: 1 }));
        assert_eq!(q.pop_due(10), Some(EventKind::Completion { job: 4, generation: 1 }));
        assert_eq!(q.pop_due(10), None);
        q.cancel(late);
        assert!(q.is_empty());
    }
}
