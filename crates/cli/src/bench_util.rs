//! Measuring helpers the benchmark suites share.

/// A memory figure from `/proc/PID/status` (`/proc/self` for `None`) in MiB: `VmHWM` is the
/// peak resident memory, `VmRSS` the resident memory now. `None` where it cannot be read.
pub(crate) fn status_mib(pid: Option<u32>, field: &str) -> Option<f64> {
    let path = pid.map_or_else(
        || "/proc/self/status".to_string(),
        |p| format!("/proc/{p}/status"),
    );
    let status = std::fs::read_to_string(path).ok()?;
    let line = status.lines().find(|l| {
        l.strip_prefix(field)
            .is_some_and(|rest| rest.starts_with(':'))
    })?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// Peak resident memory of this process, MiB (Linux `VmHWM`), if known.
pub(crate) fn peak_rss_mib() -> Option<f64> {
    status_mib(None, "VmHWM")
}

/// The median (the upper one of an even count); 0 for no values.
pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The Philly trace and its VCs' sizes (nodes per VC) the Philly suites replay: `trace` and
/// `vc_sizes`, or the bundled files.
pub(crate) fn read_philly(
    trace: Option<std::path::PathBuf>,
    vc_sizes: Option<std::path::PathBuf>,
) -> anyhow::Result<(arbiter_trace::Trace, Vec<(String, u32)>)> {
    use anyhow::Context;
    let path = trace.unwrap_or_else(|| "data/philly/philly.csv".into());
    let sizes_path = vc_sizes.unwrap_or_else(|| "data/philly/philly_vc.csv".into());
    let trace = arbiter_trace::read(
        &path,
        arbiter_trace::TraceFormat::Philly,
        &arbiter_trace::ReadOptions::default(),
    )
    .with_context(|| {
        format!(
            "reading {} (run from the repository root or pass --trace)",
            path.display()
        )
    })?;
    let sizes = arbiter_trace::philly::read_vc_sizes(&sizes_path)?;
    Ok((trace, sizes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_this_process_memory() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 3.0);
        assert_eq!(median(Vec::new()), 0.0);
        // The resident size first: the peak read after it is at least what it was, however much
        // the tests running beside this one allocate in between.
        let now = status_mib(None, "VmRSS").expect("Linux /proc");
        let peak = peak_rss_mib().expect("Linux /proc");
        assert!(peak > 0.0 && now > 0.0 && now <= peak + 1.0, "{now} {peak}");
        assert_eq!(status_mib(None, "NoSuchField"), None);
    }
}
