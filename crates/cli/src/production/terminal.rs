//! A job's output shown on a terminal (`arbiter logs`). The bytes are the job's, and a hostile
//! job writes escape sequences that act on the terminal of whoever reads them: OSC 52 writes the
//! clipboard, cursor moves and carriage returns overwrite lines to forge others, direction
//! controls reorder text. On a terminal every character the daemon refuses in a command
//! (`arbiter_daemon::security::text`: control characters other than newline and tab, line and paragraph
//! separators, direction controls) is shown escaped (`\u{1b}`), as `arbiter show` shows tenants'
//! text, and every byte that is not part of UTF-8 as `\xff`.

use arbiter_daemon::security::text::{Text, refused};
use std::io::{self, Write};

/// A writer that passes what it is given to `out` escaped, chunk by chunk as a log streams in:
/// a UTF-8 sequence cut by the end of one chunk is held until the next completes it.
pub(super) struct Escaping<W: Write> {
    out: W,
    /// The start of a UTF-8 sequence the last chunk ended inside (at most 3 bytes).
    pending: Vec<u8>,
}

impl<W: Write> Escaping<W> {
    pub(super) fn new(out: W) -> Self {
        Escaping {
            out,
            pending: Vec::new(),
        }
    }

    /// Writes what is still held — the start of a sequence no chunk completed, so bytes that
    /// are not UTF-8 — and flushes.
    pub(super) fn finish(mut self) -> io::Result<W> {
        let mut shown = String::new();
        for byte in std::mem::take(&mut self.pending) {
            push_byte(&mut shown, byte);
        }
        self.out.write_all(shown.as_bytes())?;
        self.out.flush()?;
        Ok(self.out)
    }
}

impl<W: Write> Write for Escaping<W> {
    fn write(&mut self, chunk: &[u8]) -> io::Result<usize> {
        let mut bytes = std::mem::take(&mut self.pending);
        bytes.extend_from_slice(chunk);
        let (shown, rest) = escape(&bytes);
        self.out.write_all(shown.as_bytes())?;
        self.pending = rest.to_vec();
        Ok(chunk.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// `bytes` as shown on a terminal, and what is left at their end: the start of a UTF-8 sequence
/// that the next bytes may complete (empty when they end on a whole character).
pub(super) fn escape(bytes: &[u8]) -> (String, &[u8]) {
    let mut shown = String::with_capacity(bytes.len());
    let mut rest = bytes;
    loop {
        let error = match std::str::from_utf8(rest) {
            Ok(text) => {
                push_text(&mut shown, text);
                return (shown, &[]);
            }
            Err(error) => error,
        };
        let (valid, after) = rest.split_at(error.valid_up_to());
        // Valid by `valid_up_to`: the default is never taken.
        push_text(&mut shown, std::str::from_utf8(valid).unwrap_or_default());
        // No length: the bytes end inside a sequence that may yet be completed.
        let Some(invalid) = error.error_len() else {
            return (shown, after);
        };
        for byte in &after[..invalid] {
            push_byte(&mut shown, *byte);
        }
        rest = &after[invalid..];
    }
}

fn push_text(shown: &mut String, text: &str) {
    for c in text.chars() {
        match refused(c, Text::Lines) {
            Some(_) => shown.extend(c.escape_unicode()),
            None => shown.push(c),
        }
    }
}

fn push_byte(shown: &mut String, byte: u8) {
    shown.push_str(&format!("\\x{byte:02x}"));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `chunks` written one by one through [`Escaping`], then finished.
    fn shown(chunks: &[&[u8]]) -> String {
        let mut writer = Escaping::new(Vec::new());
        for chunk in chunks {
            writer.write_all(chunk).expect("writes to memory");
        }
        String::from_utf8(writer.finish().expect("writes to memory"))
            .expect("escaped text is UTF-8")
    }

    #[test]
    fn terminal_controls_are_escaped_and_newlines_tabs_and_text_kept() {
        assert_eq!(shown(&[b"epoch 1\tloss 0.5\n"]), "epoch 1\tloss 0.5\n");
        assert_eq!(
            shown(&["résumé ✓ 训练 👩\u{200d}💻\n".as_bytes()]),
            "résumé ✓ 训练 👩\u{200d}💻\n"
        );
        // A clipboard write (OSC 52, ended by BEL), a cursor move up and a line erase.
        assert_eq!(
            shown(&[b"\x1b]52;c;ZXZpbA==\x07\x1b[1A\x1b[2Kok\n"]),
            "\\u{1b}]52;c;ZXZpbA==\\u{7}\\u{1b}[1A\\u{1b}[2Kok\n"
        );
        assert_eq!(shown(&[b"10%\r20%\r\n"]), "10%\\u{d}20%\\u{d}\n");
        assert_eq!(
            shown(&[b"\x00\x7f\xc2\x9b"]),
            "\\u{0}\\u{7f}\\u{9b}",
            "NUL, DEL and the C1 CSI"
        );
        assert_eq!(
            shown(&["a\u{2028}b\u{2029}c\u{202e}d\u{2066}e\u{200f}f\u{61c}".as_bytes()]),
            "a\\u{2028}b\\u{2029}c\\u{202e}d\\u{2066}e\\u{200f}f\\u{61c}"
        );
    }

    #[test]
    fn a_character_split_across_chunks_is_shown_whole() {
        let line_separator = "\u{2028}".as_bytes();
        assert_eq!(shown(&[b"a\xe2", b"\x80", b"\xa8b"]), "a\\u{2028}b");
        assert_eq!(
            shown(&[&line_separator[..1], &line_separator[1..]]),
            "\\u{2028}"
        );
        let rocket = "🚀".as_bytes();
        for cut in 1..rocket.len() {
            assert_eq!(
                shown(&[b"x", &rocket[..cut], &rocket[cut..], b"y"]),
                "x🚀y",
                "cut after {cut} bytes"
            );
        }
    }

    #[test]
    fn bytes_that_are_not_utf8_are_shown_as_hex() {
        assert_eq!(shown(&[b"a\xffb\xc3(c"]), "a\\xffb\\xc3(c");
        assert_eq!(
            shown(&[b"\xed\xa0\x80"]),
            "\\xed\\xa0\\x80",
            "a surrogate's encoding"
        );
        // A sequence never completed: shown when the output ends ...
        assert_eq!(shown(&[b"end\xe2\x80"]), "end\\xe2\\x80");
        // ... or when the next chunk does not continue it.
        assert_eq!(shown(&[b"a\xe2", b"b"]), "a\\xe2b");
    }
}
