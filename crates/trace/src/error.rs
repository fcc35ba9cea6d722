use std::path::PathBuf;
use thiserror::Error;

/// A trace could not be read. Displays as `file:line: field: reason` where those are known.
#[derive(Debug, Error)]
pub enum TraceError {
    /// The file could not be opened or read.
    #[error("cannot read {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A row or field is malformed.
    #[error("{path}:{line}: {field}: {reason}")]
    Field {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// Column name (or `row` for a row-level problem).
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// The header lacks a column the format needs.
    #[error("{path}: missing column `{column}` (the header has: {header})")]
    MissingColumn {
        /// The file.
        path: PathBuf,
        /// The column.
        column: String,
        /// The header as read.
        header: String,
    },
    /// A whole-file problem (no rows, bad JSON in a side file, ...).
    #[error("{path}: {reason}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}
