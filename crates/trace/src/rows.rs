//! Line-numbered CSV rows with field-naming errors, shared by the CSV-based readers.

use crate::TraceError;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// A CSV file's path and header.
pub(crate) struct CsvFile {
    path: PathBuf,
    header: csv::StringRecord,
    /// The header's line (1 unless blank lines come first).
    line: u64,
}

/// One data row.
pub(crate) struct Row<'a> {
    file: &'a CsvFile,
    record: &'a csv::StringRecord,
    line: u64,
}

/// What a row with more fields than the header has columns is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LongRows {
    /// Read; the fields beyond the header are ignored (the public traces' readers: their files
    /// are as published).
    Ignored,
    /// Refused naming its line: a field beyond the header is a value that went nowhere, most
    /// often an unquoted value holding a comma (Arbiter's native format).
    Refused,
}

/// Reads a delimited file with a header, calling `f` first with the header (to check columns)
/// and then on each non-blank data row, stopping at the first error. The file is read whole
/// first, so that a row after blank lines is named by its own line (csv places it at the first
/// blank one).
pub(crate) fn read_csv(
    path: &Path,
    delimiter: u8,
    check_header: impl FnOnce(&CsvFile) -> Result<(), TraceError>,
    f: impl FnMut(&Row<'_>) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    let bytes = std::fs::read(path).map_err(|source| TraceError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    read_csv_bytes(path, &bytes, delimiter, LongRows::Ignored, check_header, f)
}

/// [`read_csv`] over a file already read into memory (`bytes`, read from `path`): a pipe
/// (`/dev/stdin`, `<(...)`) can be read only once.
pub(crate) fn read_csv_bytes(
    path: &Path,
    bytes: &[u8],
    delimiter: u8,
    long_rows: LongRows,
    check_header: impl FnOnce(&CsvFile) -> Result<(), TraceError>,
    f: impl FnMut(&Row<'_>) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    // csv places a row after blank lines at the first of them (it skips them as part of the
    // row): its line is that one's plus the blank lines (`\n`s) from there.
    let line = |p: &csv::Position| {
        let skipped = usize::try_from(p.byte())
            .ok()
            .and_then(|at| bytes.get(at..))
            .map_or(0, |rest| rest.iter().take_while(|&&b| b == b'\n').count());
        p.line() + skipped as u64
    };
    read_records(path, bytes, line, delimiter, long_rows, check_header, f)
}

/// [`read_csv`] over `input`, `line` telling a row's line from its position.
fn read_records(
    path: &Path,
    input: impl std::io::Read,
    line: impl Fn(&csv::Position) -> u64,
    delimiter: u8,
    long_rows: LongRows,
    check_header: impl FnOnce(&CsvFile) -> Result<(), TraceError>,
    mut f: impl FnMut(&Row<'_>) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    // Rows end at `\n` only, not csv's default "\r, \n or \r\n": with that default a CRLF row
    // ends at its `\r` and its `\n` is counted into the next row, whose line number then comes
    // out one short (issue 9, item 20). A trailing `\r` is whitespace, which trimming removes.
    // Fields are trimmed as they are read (`Row::at`, `Row::present`), not by csv: its
    // `Trim::All` rebuilds every record, field by field, which cost a third of reading a
    // million-row history of mostly empty columns.
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .terminator(csv::Terminator::Any(b'\n'))
        .flexible(true)
        .from_reader(input);
    let header = reader
        .headers()
        .map_err(|e| csv_error(path, None, &line, e))?;
    let file = CsvFile {
        path: path.to_path_buf(),
        line: header.position().map_or(1, &line),
        header: header.iter().map(str::trim).collect(),
    };
    check_header(&file)?;
    let mut record = csv::StringRecord::new();
    loop {
        match reader.read_record(&mut record) {
            Ok(false) => return Ok(()),
            Ok(true) => {
                if record.iter().all(|f| f.trim().is_empty()) {
                    continue;
                }
                let row = Row {
                    file: &file,
                    record: &record,
                    line: record.position().map_or(0, &line),
                };
                if long_rows == LongRows::Refused && record.len() > file.header.len() {
                    return Err(row.error(
                        "row",
                        format!(
                            "{} fields, but the header has {} columns: a value holding a comma \
                             must be quoted (a dependency as \"afterok:1,afterok:2\")",
                            record.len(),
                            file.header.len()
                        ),
                    ));
                }
                f(&row)?;
            }
            Err(e) => return Err(csv_error(path, Some(&file.header), &line, e)),
        }
    }
}

/// A csv error as the file's: a field that is not UTF-8 named by its column (`header`: the
/// file's header, `None` while reading the header itself).
fn csv_error(
    path: &Path,
    header: Option<&csv::StringRecord>,
    line: impl Fn(&csv::Position) -> u64,
    e: csv::Error,
) -> TraceError {
    let line = e.position().map_or(0, line);
    match (e.kind(), header) {
        (csv::ErrorKind::Utf8 { err, .. }, Some(header)) => TraceError::Field {
            path: path.to_path_buf(),
            line,
            field: header
                .get(err.field())
                .map_or_else(|| format!("field {}", err.field() + 1), str::to_string),
            reason: "not valid UTF-8 (a trace is UTF-8 text)".into(),
        },
        (csv::ErrorKind::Utf8 { err, .. }, None) => TraceError::Field {
            path: path.to_path_buf(),
            line,
            field: "header".into(),
            reason: format!(
                "column {} is not valid UTF-8 (a trace is UTF-8 text)",
                err.field() + 1
            ),
        },
        (_, Some(_)) => TraceError::Field {
            path: path.to_path_buf(),
            line,
            field: "row".into(),
            reason: e.to_string(),
        },
        (_, None) => TraceError::File {
            path: path.to_path_buf(),
            reason: e.to_string(),
        },
    }
}

impl CsvFile {
    /// Column index of `name`, or an error listing the header.
    pub(crate) fn column(&self, name: &str) -> Result<usize, TraceError> {
        self.header
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| TraceError::MissingColumn {
                path: self.path.clone(),
                column: name.to_string(),
                header: self.header.iter().collect::<Vec<_>>().join(","),
            })
    }

    /// Refuses a header that names a column twice, leaves one unnamed or names one that is not
    /// in `known` (the format's columns): a misspelt column would otherwise be read as absent
    /// and its values dropped. A near miss names the column meant (`depedency`: did you mean
    /// `dependency`?).
    pub(crate) fn check_columns(&self, format: &str, known: &[&str]) -> Result<(), TraceError> {
        let error = |field: &str, reason: String| TraceError::Field {
            path: self.path.clone(),
            line: self.line,
            field: field.to_string(),
            reason,
        };
        for (i, name) in self.header.iter().enumerate() {
            if name.is_empty() {
                return Err(error(
                    "header",
                    format!("column {} has no name (a trailing comma?)", i + 1),
                ));
            }
            if let Some(first) = self.header.iter().take(i).position(|h| h == name) {
                return Err(error(
                    name,
                    format!(
                        "the header names this column twice (columns {} and {})",
                        first + 1,
                        i + 1
                    ),
                ));
            }
            if known.contains(&name) {
                continue;
            }
            let lower = name.to_lowercase();
            let close = known
                .iter()
                .map(|k| (strsim::osa_distance(&lower, k), *k))
                .min_by_key(|(d, _)| *d)
                .filter(|(d, _)| *d <= 2);
            return Err(error(
                name,
                match close {
                    Some((_, k)) => format!("unknown column; did you mean `{k}`?"),
                    None => format!(
                        "unknown column: not one of the {format} format's ({})",
                        known.join(", ")
                    ),
                },
            ));
        }
        Ok(())
    }

    /// Checks that every named column is present.
    pub(crate) fn require(&self, columns: &[&str]) -> Result<(), TraceError> {
        columns.iter().try_for_each(|c| self.column(c).map(|_| ()))
    }

    /// The indices of `names` in the header (`None`: no such column), looked up once by a
    /// reader of many rows instead of by name in every row.
    pub(crate) fn indices<const N: usize>(&self, names: [&str; N]) -> [Option<usize>; N] {
        names.map(|name| self.header.iter().position(|h| h == name))
    }
}

impl Row<'_> {
    pub(crate) fn line(&self) -> u64 {
        self.line
    }

    pub(crate) fn error(&self, field: &str, reason: impl Into<String>) -> TraceError {
        TraceError::Field {
            path: self.file.path.clone(),
            line: self.line,
            field: field.to_string(),
            reason: reason.into(),
        }
    }

    /// The text of a column by index, without leading and trailing whitespace.
    pub(crate) fn at(&self, index: usize, field: &str) -> Result<&str, TraceError> {
        self.record
            .get(index)
            .map(str::trim)
            .ok_or_else(|| self.error(field, "missing value (row is too short)"))
    }

    /// The text of the column at `index` (from [`CsvFile::indices`]), `None` where the file
    /// lacks the column, the row is too short for it or leaves it empty.
    pub(crate) fn present(&self, index: Option<usize>) -> Option<&str> {
        self.record
            .get(index?)
            .map(str::trim)
            .filter(|t| !t.is_empty())
    }

    /// The column `field` at `index` as a finite, non-negative float.
    pub(crate) fn non_negative_at(&self, index: usize, field: &str) -> Result<f64, TraceError> {
        let text = self.at(index, field)?;
        let value: f64 = text
            .parse()
            .map_err(|e| self.error(field, format!("`{text}`: {e}")))?;
        if !value.is_finite() || value < 0.0 {
            return Err(self.error(field, format!("`{value}` must be a finite number >= 0")));
        }
        Ok(value)
    }

    /// The column `field` at `index` as a GPU count (integer >= 1; a float with no fraction is
    /// accepted).
    pub(crate) fn gpu_count_at(&self, index: usize, field: &str) -> Result<u32, TraceError> {
        let text = self.at(index, field)?;
        let value: f64 = text
            .parse()
            .map_err(|e| self.error(field, format!("`{text}`: {e}")))?;
        if value.fract() != 0.0 || value < 1.0 || value > u32::MAX as f64 {
            return Err(self.error(
                field,
                format!("`{text}` must be a whole number of GPUs >= 1"),
            ));
        }
        Ok(value as u32)
    }

    /// The text of a named column, trimmed.
    pub(crate) fn get(&self, field: &str) -> Result<&str, TraceError> {
        let index = self.file.column(field)?;
        self.at(index, field)
    }

    /// A named column that the file may lack: `None` without the column, its value (checked
    /// like [`Row::non_negative`]) with it.
    pub(crate) fn optional_non_negative(&self, field: &str) -> Result<Option<f64>, TraceError> {
        if self.file.column(field).is_err() {
            return Ok(None);
        }
        self.non_negative(field).map(Some)
    }

    /// A named column parsed as `T`.
    pub(crate) fn parse<T: FromStr>(&self, field: &str) -> Result<T, TraceError>
    where
        T::Err: std::fmt::Display,
    {
        let text = self.get(field)?;
        text.parse::<T>()
            .map_err(|e| self.error(field, format!("`{text}`: {e}")))
    }

    /// A named column as a finite, non-negative float.
    pub(crate) fn non_negative(&self, field: &str) -> Result<f64, TraceError> {
        self.non_negative_at(self.file.column(field)?, field)
    }

    /// A named column as a GPU count (integer >= 1; a float with no fraction is accepted).
    pub(crate) fn gpu_count(&self, field: &str) -> Result<u32, TraceError> {
        self.gpu_count_at(self.file.column(field)?, field)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rows of `text` read by `read_csv` (from the file) or `read_csv_bytes`, each as its
    /// line and fields, or the error.
    fn rows(text: &str, from_bytes: Option<LongRows>) -> Result<Vec<(u64, usize)>, String> {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("t.csv");
        std::fs::write(&path, text).expect("write");
        let mut rows = Vec::new();
        let f = |row: &Row<'_>| {
            rows.push((row.line(), row.record.len()));
            Ok(())
        };
        match from_bytes {
            None => read_csv(&path, b',', |_| Ok(()), f),
            Some(long) => read_csv_bytes(&path, text.as_bytes(), b',', long, |_| Ok(()), f),
        }
        .map_err(|e| e.to_string())?;
        Ok(rows)
    }

    #[test]
    fn long_rows_are_refused_only_where_asked_for() {
        let text = "a,b\n1,2\n1,2,3\n";
        // The public traces' readers read them as before (none of the bundled traces has one).
        assert_eq!(rows(text, None), Ok(vec![(2, 2), (3, 3)]));
        assert_eq!(
            rows(text, Some(LongRows::Ignored)),
            Ok(vec![(2, 2), (3, 3)])
        );
        let e = rows(text, Some(LongRows::Refused)).expect_err("refused");
        assert!(
            e.contains("t.csv:3: row: 3 fields, but the header has 2 columns"),
            "{e}"
        );
        // Short rows stay for the readers' own "row is too short".
        assert_eq!(rows("a,b\n1\n", Some(LongRows::Refused)), Ok(vec![(2, 1)]));
    }

    #[test]
    fn a_row_after_blank_lines_has_its_own_line() {
        let text = "a,b\n1,2\n\n\n3,4\n";
        assert_eq!(
            rows(text, Some(LongRows::Refused)),
            Ok(vec![(2, 2), (5, 2)])
        );
        // The public traces' readers too (the file read whole).
        assert_eq!(rows(text, None), Ok(vec![(2, 2), (5, 2)]));
    }
}
