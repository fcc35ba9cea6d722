//! Helpers the simulator's test binaries share.

/// The busy and shared GPUs counted at each instant the timeline changes, once every change at
/// that instant is in: `(at_s, busy, shared)` from `(start_s, end_s, busy, shared)` segments.
pub fn gpus_counted_over_time(
    segments: impl IntoIterator<Item = (f64, f64, f64, f64)>,
) -> Vec<(f64, f64, f64)> {
    let mut changes: Vec<(f64, f64, f64)> = Vec::new();
    for (start, end, busy, shared) in segments {
        changes.push((start, busy, shared));
        changes.push((end, -busy, -shared));
    }
    changes.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut busy, mut shared) = (0.0, 0.0);
    let mut totals = Vec::new();
    for (i, &(at, b, sh)) in changes.iter().enumerate() {
        busy += b;
        shared += sh;
        if changes.get(i + 1).is_none_or(|next| next.0 > at) {
            totals.push((at, busy, shared));
        }
    }
    totals
}
