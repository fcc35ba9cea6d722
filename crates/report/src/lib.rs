//! Arbiter's reports: one self-contained `index.html` (styles inline, figures as inline SVG, no
//! script, no font or URL fetched: it opens from disk, offline) plus an SVG and a PNG of every
//! figure under `figures/` for papers.
//!
//! Three builders: [`run::report`] (a scenario run: JCT and queueing-delay CDFs, utilization
//! and queue length over time, per-tenant shares with Jain's index, finish-time fairness, a
//! Gantt chart, published vs ours), [`sweep::report`] (average JCT against the swept key, with
//! its spread over seeds) and [`trace::report`] (the Philly/Helios characterization of a
//! trace). Each page opens with its summary table, then the figures.
#![deny(missing_docs)]

pub mod chart;
pub mod figures;
pub mod gantt;
mod html;
pub mod panels;
pub mod raster;
pub mod run;
pub mod sweep;
pub mod trace;

use rayon::prelude::*;
use std::path::{Path, PathBuf};

/// Arbiter's version, printed on every figure.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A file could not be written.
    // (Not `source`: a cause in the words and in the chain was printed twice.)
    #[error("writing {path}: {cause}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        cause: std::io::Error,
    },
    /// A figure could not be rasterized.
    #[error("figure {figure}: {error}")]
    Raster {
        /// The figure's id.
        figure: String,
        /// What failed.
        error: raster::RasterError,
    },
}

/// A table cell's emphasis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// Plain.
    None,
    /// Good news (within tolerance).
    Good,
    /// Bad news (outside tolerance).
    Bad,
}

/// A table of the report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    /// Column names.
    pub head: Vec<String>,
    /// Rows of cells, each with its mark.
    pub rows: Vec<Vec<(String, Mark)>>,
}

/// A figure: its file name (without extension) and its SVG.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// File stem under `figures/`, also the HTML anchor.
    pub id: String,
    /// The SVG document.
    pub svg: String,
}

/// A part of the page, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Section {
    /// A heading (listed in the table of contents).
    Heading(String),
    /// A paragraph of plain text.
    Text(String),
    /// A table.
    Table(Table),
    /// A figure.
    Figure(Figure),
}

/// A whole report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// Page title.
    pub title: String,
    /// Facts shown under the title (`scenario`, `seeds`, `overrides`, `Arbiter`...).
    pub facts: Vec<(String, String)>,
    /// Body.
    pub sections: Vec<Section>,
}

impl Report {
    /// The figures, in page order.
    pub fn figures(&self) -> impl Iterator<Item = &Figure> {
        self.sections.iter().filter_map(|s| {
            if let Section::Figure(f) = s {
                Some(f)
            } else {
                None
            }
        })
    }

    /// The page as HTML.
    pub fn to_html(&self) -> String {
        html::page(self)
    }

    /// Writes `index.html` and `figures/<id>.svg` and `.png` into `dir` (created); returns the
    /// page's path. Figures are rasterized in parallel.
    pub fn write(&self, dir: &Path) -> Result<PathBuf, ReportError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |cause| ReportError::Io { path, cause }
        };
        let figures_dir = dir.join("figures");
        std::fs::create_dir_all(&figures_dir).map_err(io(&figures_dir))?;
        let figures: Vec<&Figure> = self.figures().collect();
        figures
            .par_iter()
            .try_for_each(|f| -> Result<(), ReportError> {
                let svg_path = figures_dir.join(format!("{}.svg", f.id));
                std::fs::write(&svg_path, &f.svg).map_err(io(&svg_path))?;
                let png = raster::png(&f.svg, 2.0).map_err(|error| ReportError::Raster {
                    figure: f.id.clone(),
                    error,
                })?;
                let png_path = figures_dir.join(format!("{}.png", f.id));
                std::fs::write(&png_path, png).map_err(io(&png_path))
            })?;
        let page = dir.join("index.html");
        std::fs::write(&page, self.to_html()).map_err(io(&page))?;
        Ok(page)
    }
}

/// A figure id from free text: lower-case letters, digits and dashes only (safe as a file name
/// and an HTML id whatever a trace or tenant is called).
pub fn slug(parts: &[&str]) -> String {
    let one = |part: &str| {
        let mut out = String::new();
        for c in part.chars() {
            if c.is_ascii_alphanumeric() {
                out.push(c.to_ascii_lowercase());
            } else if !out.ends_with('-') {
                out.push('-');
            }
        }
        out.trim_matches('-').to_string()
    };
    let joined = parts
        .iter()
        .map(|p| one(p))
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    if joined.is_empty() {
        "figure".into()
    } else {
        joined.chars().take(100).collect()
    }
}

/// What the tests of several modules build on: hand-made runs, and curves read back out of
/// the SVG they were drawn into.
#[cfg(test)]
pub(crate) mod test_support {
    use arbiter_sim::{JobOutcome, JobRecord, RunSegment};

    /// A completed job run without interruption.
    pub fn record(
        job: u32,
        tenant: &str,
        submit_s: f64,
        start_s: f64,
        finish_s: f64,
        gpus: u32,
    ) -> JobRecord {
        JobRecord {
            job,
            trace_id: job.to_string(),
            tenant: tenant.into(),
            priority_class: None,
            gpus,
            submit_s,
            first_start_s: Some(start_s),
            finish_s: Some(finish_s),
            run_time_s: finish_s - start_s,
            executed_s: finish_s - start_s,
            gpu_s_allocated: (finish_s - start_s) * gpus as f64,
            busy_gpu_s: (finish_s - start_s) * gpus as f64,
            shared_gpu_s: 0.0,
            guest_gpu_s: 0.0,
            colocated_s: 0.0,
            cost_usd: 0.0,
            preemptions: 0,
            migrations: 0,
            failures: 0,
            outcome: JobOutcome::Completed,
            last_wait_reason: None,
            deadline_s: None,
            deadline_value: None,
            admitted: None,
        }
    }

    /// A segment of `gpus` GPUs of node 0.
    pub fn segment(job: u32, start_s: f64, end_s: f64, gpus: u32) -> RunSegment {
        RunSegment {
            job,
            start_s,
            end_s,
            slots: vec![(0, gpus)],
            gpu_share: 1.0,
            guest: false,
            on_held: 0,
        }
    }

    /// The pixel points of every curve (a `fill="none"` path) of an SVG, in drawing order.
    pub fn curves(svg: &str) -> Vec<Vec<(f64, f64)>> {
        svg.split("<path d=\"")
            .skip(1)
            .filter(|p| {
                p.split('>')
                    .next()
                    .is_some_and(|tag| tag.contains("fill=\"none\""))
            })
            .filter_map(|p| p.split('"').next())
            .map(|d| {
                d.split(['M', 'L'])
                    .filter_map(|xy| {
                        let (x, y) = xy.trim().split_once(' ')?;
                        Some((x.parse().ok()?, y.parse().ok()?))
                    })
                    .collect()
            })
            .collect()
    }

    /// Whether consecutive points form steps: each move horizontal or vertical, never both
    /// (a ramp between two samples).
    pub fn is_staircase(points: &[(f64, f64)]) -> bool {
        points
            .windows(2)
            .all(|w| w[0].0 == w[1].0 || w[0].1 == w[1].1)
    }

    /// The position of the first `<table` and the first `<figure` of a page.
    pub fn first_table_and_figure(html: &str) -> (Option<usize>, Option<usize>) {
        (html.find("<table"), html.find("<figure"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_safe_file_names() {
        assert_eq!(
            slug(&["Trace 1", "../etc/passwd", "jct"]),
            "trace-1-etc-passwd-jct"
        );
        assert_eq!(slug(&["<>"]), "figure");
    }
}
