//! Trace files from Python: read into the native CSV (`arbiter trace convert`), characterised
//! as `arbiter trace analyze --json` prints it, with its report where asked.

use crate::Error;
use arbiter_trace::{ReadOptions, TraceError, TraceFormat};
use std::path::Path;

/// The format name `arbiter trace analyze` takes for an Alibaba PAI pod list (characterised
/// only, not simulated).
pub const PAI_PODS: &str = "pai-pods";

/// Reader options (`iteration_time_factor`, `profiles`, ... as a scenario's `[[trace]]` entry
/// gives them) from a JSON object; an unknown one is refused naming it.
pub fn read_options(json: &str) -> Result<ReadOptions, Error> {
    serde_json::from_str(json).map_err(|e| Error::Format(format!("trace options: {e}")))
}

/// Reads `path` as `format` and writes its jobs as the native CSV (`arbiter trace convert`),
/// from which reading gives the same jobs back.
pub fn read_csv(path: &Path, format: &str, options: &ReadOptions) -> Result<String, Error> {
    let format = TraceFormat::parse(format).map_err(Error::Format)?;
    let trace = arbiter_trace::read(path, format, options)?;
    let mut out = Vec::new();
    arbiter_trace::native::write(&mut out, &trace.jobs).map_err(|e| csv_error(path, e))?;
    String::from_utf8(out).map_err(|e| Error::Format(format!("{}: {e}", path.display())))
}

/// Characterises `path` (any trace format, or `pai-pods`) as `arbiter trace analyze --json`
/// prints it; with `report`, also writes the analysis' HTML report there
/// (`arbiter trace analyze --report DIR`).
pub fn analyze_json(path: &Path, format: &str, report: Option<&Path>) -> Result<String, Error> {
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    if format == PAI_PODS {
        let analysis = arbiter_trace::pai::analyze(&arbiter_trace::pai::read(path)?);
        if let Some(dir) = report {
            arbiter_report::trace::pod_report(&name, &analysis).write(dir)?;
        }
        return Ok(serde_json::to_string(&analysis)?);
    }
    let format = TraceFormat::parse(format).map_err(Error::Format)?;
    let trace = arbiter_trace::read(path, format, &ReadOptions::default())?;
    let analysis = arbiter_trace::analysis::analyze(&trace);
    if let Some(dir) = report {
        arbiter_report::trace::report(&name, &analysis).write(dir)?;
    }
    Ok(serde_json::to_string(&analysis)?)
}

fn csv_error(path: &Path, error: csv::Error) -> Error {
    Error::Trace(TraceError::File {
        path: path.to_path_buf(),
        reason: error.to_string(),
    })
}
