//! Line-numbered CSV rows with field-naming errors, shared by the CSV-based readers.

use crate::TraceError;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// A CSV file's path and header.
pub(crate) struct CsvFile {
    path: PathBuf,
    header: csv::StringRecord,
}

/// One data row.
pub(crate) struct Row<'a> {
    file: &'a CsvFile,
    record: &'a csv::StringRecord,
    line: u64,
}

/// Reads a delimited file with a header, calling `f` first with the header (to check columns)
/// and then on each non-blank data row, stopping at the first error.
pub(crate) fn read_csv(
    path: &Path,
    delimiter: u8,
    check_header: impl FnOnce(&CsvFile) -> Result<(), TraceError>,
    mut f: impl FnMut(&Row<'_>) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    let handle = std::fs::File::open(path).map_err(|source| TraceError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    // Rows end at `\n` only, not csv's default "\r, \n or \r\n": with that default a CRLF row
    // ends at its `\r` and its `\n` is counted into the next row, whose line number then comes
    // out one short (issue 9, item 20). A trailing `\r` is whitespace, which trimming removes.
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .terminator(csv::Terminator::Any(b'\n'))
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(std::io::BufReader::new(handle));
    let header = reader
        .headers()
        .map_err(|e| TraceError::File {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?
        .clone();
    let file = CsvFile {
        path: path.to_path_buf(),
        header,
    };
    check_header(&file)?;
    let mut record = csv::StringRecord::new();
    loop {
        match reader.read_record(&mut record) {
            Ok(false) => return Ok(()),
            Ok(true) => {
                if record.iter().all(str::is_empty) {
                    continue;
                }
                let line = record.position().map(|p| p.line()).unwrap_or(0);
                f(&Row {
                    file: &file,
                    record: &record,
                    line,
                })?;
            }
            Err(e) => {
                let line = e.position().map(|p| p.line()).unwrap_or(0);
                return Err(TraceError::Field {
                    path: path.to_path_buf(),
                    line,
                    field: "row".into(),
                    reason: e.to_string(),
                });
            }
        }
    }
}

/// Lines in the file at `path` (an upper bound on its rows, to size what is read into; 0 when it
/// cannot be read, which the reader then reports).
pub(crate) fn line_count(path: &Path) -> usize {
    std::fs::read(path).map_or(0, |bytes| bytes.iter().filter(|&&b| b == b'\n').count() + 1)
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

    /// The raw text of a column by index.
    pub(crate) fn at(&self, index: usize, field: &str) -> Result<&str, TraceError> {
        self.record
            .get(index)
            .ok_or_else(|| self.error(field, "missing value (row is too short)"))
    }

    /// The text of the column at `index` (from [`CsvFile::indices`]), `None` where the file
    /// lacks the column, the row is too short for it or leaves it empty.
    pub(crate) fn present(&self, index: Option<usize>) -> Option<&str> {
        self.record.get(index?).filter(|t| !t.is_empty())
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

    /// The raw text of a named column.
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
