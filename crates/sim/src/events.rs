//! The engine's future events, ordered by `(time, sequence)`, dropping superseded ones.
//!
//! Every start, stop and speed change of a job re-predicts its completion, and every decision
//! replaces the policy's wake-up. The superseded events stay queued until they are dropped (the
//! engine knows which are live: a job's generation and attempt, the latest wake token). A plain
//! binary heap kept them until their time came: under a round-based policy (Gavel re-places
//! jobs every 360 s) it grew to millions of dead entries, and popping them was a tenth of a
//! simulation's time. Here dead events are dropped as soon as they reach the top, and the queue is
//! compacted whenever it has doubled since the last compaction, so it holds O(live events) and a
//! push stays O(1) amortized — cheaper than removing each superseded event by key, which Muri's
//! per-event model (every running job re-predicted at every event) would pay at every event.
//! Order among live events is unchanged: the sequence number breaks ties in push order.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// What happens at an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum EventKind {
    // Order matters only for determinism among same-time events: completions first.
    Completion {
        job: u32,
        generation: u32,
    },
    Failure {
        job: u32,
        attempt: u32,
    },
    Wake {
        token: u64,
    },
    Round,
    /// A reservation starts or ends.
    Window,
}

/// Queued events below this count are never compacted.
const COMPACT_FLOOR: usize = 1024;

/// Future events; see the module docs. `live` tells whether a queued event still holds.
#[derive(Debug)]
pub(crate) struct EventQueue {
    heap: BinaryHeap<Reverse<(u64, u64, EventKind)>>,
    sequence: u64,
    /// Compact when the queue grows past this.
    compact_at: usize,
}

impl Default for EventQueue {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            sequence: 0,
            compact_at: COMPACT_FLOOR,
        }
    }
}

impl EventQueue {
    /// Adds an event at `at_ms`; dead events are dropped first when the queue has doubled.
    pub(crate) fn push(&mut self, at_ms: u64, kind: EventKind, live: impl Fn(&EventKind) -> bool) {
        if self.heap.len() >= self.compact_at {
            self.heap.retain(|Reverse((_, _, kind))| live(kind));
            self.compact_at = (2 * self.heap.len()).max(COMPACT_FLOOR);
        }
        self.sequence += 1;
        self.heap.push(Reverse((at_ms, self.sequence, kind)));
    }

    /// Drops dead events from the top.
    fn prune(&mut self, live: impl Fn(&EventKind) -> bool) {
        while let Some(Reverse((_, _, kind))) = self.heap.peek() {
            if live(kind) {
                break;
            }
            self.heap.pop();
        }
    }

    /// The time of the earliest live event.
    pub(crate) fn next_time_ms(&mut self, live: impl Fn(&EventKind) -> bool) -> Option<u64> {
        self.prune(live);
        self.heap.peek().map(|Reverse((at, _, _))| *at)
    }

    /// Takes the earliest live event if it is due at `now_ms`.
    pub(crate) fn pop_due(
        &mut self,
        now_ms: u64,
        live: impl Fn(&EventKind) -> bool,
    ) -> Option<EventKind> {
        self.prune(live);
        match self.heap.peek() {
            Some(Reverse((at, _, _))) if *at == now_ms => {
                self.heap.pop().map(|Reverse((_, _, kind))| kind)
            }
            _ => None,
        }
    }

    /// Whether a live event is pending.
    pub(crate) fn has_live(&mut self, live: impl Fn(&EventKind) -> bool) -> bool {
        self.prune(live);
        !self.heap.is_empty()
    }

    /// Events queued, dead ones included (for tests).
    #[cfg(test)]
    fn queued(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_events_come_in_time_then_push_order_and_dead_ones_never() {
        let mut q = EventQueue::default();
        let dead = |k: &EventKind| matches!(k, EventKind::Completion { job: 3, .. });
        let live = |k: &EventKind| !dead(k);
        q.push(20, EventKind::Round, live);
        q.push(10, EventKind::Wake { token: 1 }, live);
        q.push(
            10,
            EventKind::Completion {
                job: 3,
                generation: 1,
            },
            live,
        );
        q.push(
            10,
            EventKind::Completion {
                job: 4,
                generation: 1,
            },
            live,
        );
        assert_eq!(q.next_time_ms(live), Some(10));
        assert_eq!(q.pop_due(9, live), None);
        assert_eq!(q.pop_due(10, live), Some(EventKind::Wake { token: 1 }));
        assert_eq!(
            q.pop_due(10, live),
            Some(EventKind::Completion {
                job: 4,
                generation: 1
            })
        );
        assert_eq!(q.pop_due(10, live), None);
        assert!(q.has_live(live));
        assert_eq!(q.pop_due(20, live), Some(EventKind::Round));
        assert!(!q.has_live(live));
    }

    #[test]
    fn superseded_events_do_not_accumulate() {
        // One job re-predicted a million times: the queue stays within twice its live events
        // (here one) plus the floor.
        let mut q = EventQueue::default();
        for generation in 0..1_000_000u32 {
            let live = |k: &EventKind| *k == EventKind::Completion { job: 0, generation };
            q.push(
                u64::from(generation) + 5_000_000,
                EventKind::Completion { job: 0, generation },
                live,
            );
            assert!(q.queued() <= COMPACT_FLOOR + 1);
        }
        let last = |k: &EventKind| {
            *k == EventKind::Completion {
                job: 0,
                generation: 999_999,
            }
        };
        assert_eq!(q.next_time_ms(last), Some(5_999_999));
    }
}
