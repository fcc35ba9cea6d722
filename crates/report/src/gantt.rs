//! A Gantt chart of a window of jobs: GPUs down, time across, one colour per job, a red tick
//! where a job was preempted (or migrated) and a gap until it ran again.
//!
//! Placements name GPU counts per node, not GPUs, so lanes (GPU rows) are assigned here: per
//! node, each stint takes the lowest free lanes when it starts; a job sharing its GPUs with
//! another (space sharing) is drawn in the lower half of its partner's lanes.

use crate::chart::{COLORS, Format, duration_ticks, escape, label};
use arbiter_sim::RunSegment;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Jobs a Gantt chart shows: enough to see preemptions and packing, few enough to read.
pub const GANTT_JOBS: usize = 60;
/// GPU rows drawn at most.
pub const MAX_LANES: usize = 64;

/// One bar of the chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    /// Job id.
    pub job: u32,
    /// GPU row (0 at the top).
    pub lane: usize,
    /// Start, seconds.
    pub start_s: f64,
    /// End, seconds.
    pub end_s: f64,
    /// Drawn in the lower half of the lane (sharing the GPU with the bar above it).
    pub shared: bool,
    /// The job was preempted or moved when this bar ended.
    pub interrupted: bool,
}

/// A job's consecutive segments on the same GPUs, merged (a change of partner or speed does not
/// break a bar).
fn stints(segments: &[&RunSegment]) -> Vec<RunSegment> {
    let mut out: Vec<RunSegment> = Vec::new();
    for s in segments {
        match out.last_mut() {
            Some(last) if last.job == s.job && last.end_s == s.start_s && last.slots == s.slots => {
                last.end_s = s.end_s;
                last.gpu_share = last.gpu_share.min(s.gpu_share);
            }
            _ => out.push((*s).clone()),
        }
    }
    out
}

/// The bars for the first [`GANTT_JOBS`] jobs (by id) of `jobs` (the measured ones), lanes
/// numbered node by node; also the row label of each lane (`node/GPU`).
pub fn bars(timeline: &[RunSegment], jobs: impl Fn(u32) -> bool) -> (Vec<Bar>, Vec<String>) {
    let mut chosen: Vec<u32> = timeline
        .iter()
        .map(|s| s.job)
        .filter(|&j| jobs(j))
        .collect();
    chosen.sort_unstable();
    chosen.dedup();
    chosen.truncate(GANTT_JOBS);
    let mut by_job: BTreeMap<u32, Vec<&RunSegment>> = BTreeMap::new();
    for s in timeline
        .iter()
        .filter(|s| chosen.binary_search(&s.job).is_ok())
    {
        by_job.entry(s.job).or_default().push(s);
    }
    let mut all: Vec<(RunSegment, bool)> = Vec::new();
    for segments in by_job.values_mut() {
        segments.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
        let merged = stints(segments);
        let n = merged.len();
        all.extend(merged.into_iter().enumerate().map(|(i, s)| (s, i + 1 < n)));
    }
    all.sort_by(|a, b| {
        a.0.start_s
            .total_cmp(&b.0.start_s)
            .then(a.0.job.cmp(&b.0.job))
    });
    // Per node: lanes busy until, and who holds them (for partners to join).
    struct Lane {
        until: f64,
        holder: Option<Vec<(u32, u32)>>,
    }
    let mut nodes: BTreeMap<u32, Vec<Lane>> = BTreeMap::new();
    let mut placed: Vec<(u32, usize, RunSegment, bool, bool)> = Vec::new();
    for (s, interrupted) in all {
        for &(node, gpus) in &s.slots {
            let lanes = nodes.entry(node).or_default();
            // A sharing job joins lanes held by a stint on the same GPUs that is still running.
            let partner_lanes: Vec<usize> = if s.gpu_share < 1.0 {
                lanes
                    .iter()
                    .enumerate()
                    .filter(|(_, l)| {
                        l.until > s.start_s
                            && l.holder.as_ref().is_some_and(|slots| *slots == s.slots)
                    })
                    .map(|(i, _)| i)
                    .take(gpus as usize)
                    .collect()
            } else {
                Vec::new()
            };
            let (picked, shared) = if partner_lanes.len() == gpus as usize {
                (partner_lanes, true)
            } else {
                let mut picked: Vec<usize> = lanes
                    .iter()
                    .enumerate()
                    .filter(|(_, l)| l.until <= s.start_s)
                    .map(|(i, _)| i)
                    .take(gpus as usize)
                    .collect();
                while picked.len() < gpus as usize {
                    lanes.push(Lane {
                        until: f64::NEG_INFINITY,
                        holder: None,
                    });
                    picked.push(lanes.len() - 1);
                }
                (picked, false)
            };
            for &i in &picked {
                if !shared {
                    lanes[i] = Lane {
                        until: s.end_s,
                        holder: Some(s.slots.clone()),
                    };
                }
                placed.push((node, i, s.clone(), shared, interrupted));
            }
        }
    }
    // Lanes numbered node by node.
    let mut first_lane: BTreeMap<u32, usize> = BTreeMap::new();
    let mut labels = Vec::new();
    for (node, lanes) in &nodes {
        first_lane.insert(*node, labels.len());
        labels.extend((0..lanes.len()).map(|i| format!("n{node}/{i}")));
    }
    let mut bars: Vec<Bar> = placed
        .into_iter()
        .map(|(node, i, s, shared, interrupted)| Bar {
            job: s.job,
            lane: first_lane.get(&node).copied().unwrap_or(0) + i,
            start_s: s.start_s,
            end_s: s.end_s,
            shared,
            interrupted,
        })
        .collect();
    bars.sort_by(|a, b| a.lane.cmp(&b.lane).then(a.start_s.total_cmp(&b.start_s)));
    (bars, labels)
}

/// A run of pixel columns of one lane held by one job.
#[derive(Clone, Debug, PartialEq)]
struct PixelRun {
    job: u32,
    from: usize,
    to: usize,
    /// Columns where the job was preempted or moved (a stint ended).
    interrupted: Vec<usize>,
}

/// The bars reduced to pixel columns: per lane and half (full height, or the lower half where a
/// job shares its partner's GPUs), each column shows the first job that held it, and runs of
/// columns of one job are one rectangle. A job preempted every few seconds over days would
/// otherwise be tens of thousands of sub-pixel rectangles (Muri's per-event model does this):
/// the chart's size is bounded by lanes × columns whatever the trace.
fn pixel_runs(
    bars: &[&Bar],
    columns: usize,
    px: impl Fn(f64) -> f64,
) -> Vec<(usize, bool, PixelRun)> {
    /// Per pixel column: the job shown there, and whether it was interrupted there.
    type Column = Option<(u32, bool)>;
    let mut cells: BTreeMap<(usize, bool), Vec<Column>> = BTreeMap::new();
    for b in bars {
        let lane = cells
            .entry((b.lane, b.shared))
            .or_insert_with(|| vec![None; columns]);
        let from = (px(b.start_s).floor().max(0.0) as usize).min(columns.saturating_sub(1));
        let to = (px(b.end_s).round() as usize).clamp(from + 1, columns);
        for cell in lane[from..to].iter_mut().filter(|c| c.is_none()) {
            *cell = Some((b.job, false));
        }
        if b.interrupted
            && let Some(Some((job, mark))) = lane.get_mut(to - 1)
            && *job == b.job
        {
            *mark = true;
        }
    }
    let mut out = Vec::new();
    for ((lane, half), cells) in cells {
        let mut current: Option<PixelRun> = None;
        for (c, cell) in cells.into_iter().enumerate() {
            match (cell, current.as_mut()) {
                (Some((job, mark)), Some(run)) if run.job == job && run.to == c => {
                    run.to = c + 1;
                    if mark {
                        run.interrupted.push(c + 1);
                    }
                }
                (cell, _) => {
                    out.extend(current.take().map(|run| (lane, half, run)));
                    current = cell.map(|(job, mark)| PixelRun {
                        job,
                        from: c,
                        to: c + 1,
                        interrupted: if mark { vec![c + 1] } else { Vec::new() },
                    });
                }
            }
        }
        out.extend(current.map(|run| (lane, half, run)));
    }
    out
}

/// The chart as a standalone SVG document (at most [`MAX_LANES`] rows; the title says when
/// more were cut).
pub fn to_svg(title: &str, caption: &str, bars: &[Bar], labels: &[String]) -> String {
    let lanes = labels.len().min(MAX_LANES);
    let row = if lanes > 32 { 7.0 } else { 12.0 };
    let (left, top, right) = (70.0, 44.0, 860.0);
    let height = top + lanes as f64 * row + 60.0;
    let shown: Vec<&Bar> = bars.iter().filter(|b| b.lane < lanes).collect();
    let t0 = shown
        .iter()
        .map(|b| b.start_s)
        .fold(f64::INFINITY, f64::min);
    let t1 = shown
        .iter()
        .map(|b| b.end_s)
        .fold(f64::NEG_INFINITY, f64::max);
    let (t0, t1) = if t0.is_finite() && t1 > t0 {
        (t0, t1)
    } else {
        (0.0, 1.0)
    };
    let x = |t: f64| left + (t - t0) / (t1 - t0) * (right - left);
    let mut out = String::with_capacity(2048 + shown.len() * 160);
    let cut = if labels.len() > lanes {
        format!(" (first {lanes} of {} GPU rows)", labels.len())
    } else {
        String::new()
    };
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 880 {height}" width="880" height="{height}" font-family="DejaVu Sans, Verdana, sans-serif" font-size="11"><rect width="100%" height="100%" fill="white"/><text x="{left}" y="24" font-size="15" font-weight="bold">{}{}</text>"#,
        escape(title),
        escape(&cut)
    );
    for (i, name) in labels.iter().take(lanes).enumerate() {
        let y = top + i as f64 * row;
        if lanes <= 32 || i % 4 == 0 {
            let _ = write!(
                out,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="end" font-size="9">{}</text>"#,
                left - 4.0,
                y + row - 2.0,
                escape(name)
            );
        }
    }
    // Round times in one unit (not fifths of the span in mixed units: `2.3h, 4.6h, 1.2d`).
    let (times, time_labels, unit) = duration_ticks(t1 - t0);
    for (dt, text) in times.iter().zip(&time_labels) {
        let _ = write!(
            out,
            r##"<line x1="{0:.1}" y1="{top}" x2="{0:.1}" y2="{1:.1}" stroke="#e4e4e4"/><text x="{0:.1}" y="{2:.1}" text-anchor="middle">{text}</text>"##,
            x(t0 + dt),
            top + lanes as f64 * row,
            top + lanes as f64 * row + 14.0,
        );
    }
    let columns = (right - left) as usize;
    // Wide runs are rectangles with a tooltip; runs under 3 px go into one path per colour, and
    // the preemption ticks into one red path: a chart of a job preempted every few pixels stays
    // a few hundred kilobytes.
    let mut thin: BTreeMap<&str, String> = BTreeMap::new();
    let mut ticks = String::new();
    for (lane, half, run) in pixel_runs(&shown, columns, |t| x(t) - left) {
        let y = top + lane as f64 * row + if half { row / 2.0 } else { 0.0 };
        let h = if half { row / 2.0 - 1.0 } else { row - 1.0 };
        let color = COLORS[run.job as usize % COLORS.len()];
        let (x0, w) = (left as usize + run.from, run.to - run.from);
        if w >= 3 {
            let time = |c: usize| label((t1 - t0) * c as f64 / columns as f64, Format::Seconds);
            let _ = write!(
                out,
                r#"<rect x="{x0}" y="{y:.1}" width="{w}" height="{h:.1}" fill="{color}" fill-opacity="0.85"><title>job {} {}–{}</title></rect>"#,
                run.job,
                time(run.from),
                time(run.to)
            );
        } else {
            let _ = write!(
                thin.entry(color).or_default(),
                "M{x0} {y:.1}h{w}v{h:.1}h-{w}z"
            );
        }
        for c in run.interrupted {
            let _ = write!(ticks, "M{} {y:.1}v{h:.1}", left as usize + c);
        }
    }
    for (color, d) in thin {
        let _ = write!(out, r#"<path d="{d}" fill="{color}" fill-opacity="0.85"/>"#);
    }
    if !ticks.is_empty() {
        let _ = write!(
            out,
            r##"<path d="{ticks}" stroke="#c00" stroke-width="1"/>"##
        );
    }
    let _ = write!(
        out,
        r##"<text x="{left}" y="{:.1}">time since the first start, {unit} (red tick: preempted or moved; half-height: sharing the GPU)</text><text x="{left}" y="{:.1}" font-size="10" fill="#666">{}</text></svg>"##,
        top + lanes as f64 * row + 32.0,
        height - 8.0,
        escape(caption)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(
        job: u32,
        start_s: f64,
        end_s: f64,
        slots: Vec<(u32, u32)>,
        gpu_share: f64,
    ) -> RunSegment {
        RunSegment {
            job,
            start_s,
            end_s,
            slots,
            gpu_share,
            guest: false,
            on_held: 0,
        }
    }

    #[test]
    fn lanes_preemptions_and_sharing_by_hand() {
        let timeline = vec![
            // Job 0: 2 GPUs on node 0, 0–10, preempted, back 20–30 (two pieces, one bar).
            seg(0, 0.0, 10.0, vec![(0, 2)], 1.0),
            seg(0, 20.0, 25.0, vec![(0, 2)], 1.0),
            seg(0, 25.0, 30.0, vec![(0, 2)], 1.0),
            // Job 1 takes the freed lanes 10–20.
            seg(1, 10.0, 20.0, vec![(0, 1)], 1.0),
            // Jobs 2 and 3 share one GPU of node 1.
            seg(2, 0.0, 30.0, vec![(1, 1)], 0.5),
            seg(3, 5.0, 30.0, vec![(1, 1)], 0.5),
            // Job 9 is not measured.
            seg(9, 0.0, 5.0, vec![(1, 1)], 1.0),
        ];
        let (bars, labels) = bars(&timeline, |j| j < 9);
        assert_eq!(labels, vec!["n0/0", "n0/1", "n1/0"]);
        let of = |job| {
            bars.iter()
                .filter(|b| b.job == job)
                .map(|b| (b.lane, b.start_s, b.end_s, b.shared, b.interrupted))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            of(0),
            vec![
                (0, 0.0, 10.0, false, true),
                (0, 20.0, 30.0, false, false),
                (1, 0.0, 10.0, false, true),
                (1, 20.0, 30.0, false, false)
            ]
        );
        assert_eq!(of(1), vec![(0, 10.0, 20.0, false, false)]);
        assert_eq!(of(2), vec![(2, 0.0, 30.0, false, false)]);
        assert_eq!(of(3), vec![(2, 5.0, 30.0, true, false)]);
        let svg = to_svg("t", "c", &bars, &labels);
        assert_eq!(svg.matches("<rect x=").count(), bars.len(), "one per bar");
        assert_eq!(svg.matches("v11.0").count(), 2, "a tick per interruption");
        // Round times in one unit, named once (were fifths of the span, each in its own unit).
        assert!(
            svg.contains(r#"text-anchor="middle">30</text>"#)
                && svg.contains("time since the first start, seconds")
        );
        let long = [Bar {
            job: 0,
            lane: 0,
            start_s: 0.0,
            end_s: 1.2 * 86_400.0,
            shared: false,
            interrupted: false,
        }];
        let svg = to_svg("t", "c", &long, &labels);
        let times: Vec<&str> = svg
            .split(r#"text-anchor="middle">"#)
            .skip(1)
            .filter_map(|t| t.split('<').next())
            .collect();
        assert_eq!(times, ["0", "5", "10", "15", "20", "25"]);
        assert!(svg.contains("time since the first start, hours"));
        // Sub-pixel stints of one job merge into one rectangle, with their preemption ticks.
        let many: Vec<Bar> = (0..10_000)
            .map(|i| Bar {
                job: 7,
                lane: 0,
                start_s: i as f64,
                end_s: i as f64 + 0.5,
                shared: false,
                interrupted: true,
            })
            .collect();
        let runs = pixel_runs(&many.iter().collect::<Vec<_>>(), 100, |t| t / 100.0);
        assert_eq!(runs.len(), 1);
        assert_eq!(
            (runs[0].2.from, runs[0].2.to, runs[0].2.interrupted.len()),
            (0, 100, 100)
        );
    }
}
