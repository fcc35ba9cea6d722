//! Text that tenants and the admin write and others read: which characters it may not hold.
//!
//! Job names, job types, GPU types, idempotency keys, tenant names, environment variable names,
//! paths and commands are shown to others: in the admin's terminal (`arbiter jobs`, `arbiter
//! show`) and on the dashboard. There a control character (ESC, CR, BEL) rewrites the terminal —
//! forged lines, a clipboard write (OSC 52); a line or paragraph separator (U+2028, U+2029) breaks
//! the line where the viewer honours it; an invisible format character (U+200B, U+FEFF) makes two
//! names look alike; a direction mark or override (U+061C, U+202E) reorders what is shown (as in
//! "Trojan Source", CVE-2021-42574). Every such field is checked by [`check`], with the
//! characters' general categories from `unicode-properties` (Unicode's own tables).

use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};

/// A field of a submission that is not acceptable, and why.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct FieldError {
    /// The offending field.
    pub field: &'static str,
    /// What is wrong.
    pub reason: String,
}

/// What a field holds, and so which characters it refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Text {
    /// One line (names, keys, types, ids, paths): no character of the general categories Cc
    /// (controls, tab and newline included), Cf (format), Zl or Zp (line, paragraph separator).
    Line,
    /// A command: newlines and tabs, but no other control character, no line or paragraph
    /// separator and no bidirectional control. Other format characters stay: the zero-width
    /// joiner and non-joiner are part of emoji and of Persian and Indic words, tag characters
    /// of flag emoji, which commands echo and paths contain; they hide nothing a reader of the
    /// command could not see by copying it, while a direction control reorders what is read.
    Lines,
    /// An environment variable's value: like [`Text::Lines`], but of the control characters only
    /// NUL is refused (the environment is C strings). `arbiter submit` exports the submitter's
    /// environment (`--export ALL`), which commonly holds raw escape sequences
    /// (`LESS_TERMCAP_md=$'\e[1m'`, coloured prompts); values are never shown as text, only
    /// inside JSON, which escapes control characters but not separators or direction controls.
    Value,
}

/// The bidirectional controls: Unicode's `Bidi_Control` property (PropList.txt; this set since
/// Unicode 6.3): the Arabic letter mark, the left-to-right and right-to-left marks, the
/// embeddings and overrides (LRE, RLE, PDF, LRO, RLO) and the isolates (LRI, RLI, FSI, PDI).
/// All are of category Cf, so [`Text::Line`] refuses them anyway (tested).
pub const BIDI_CONTROLS: [char; 12] = [
    '\u{61c}', '\u{200e}', '\u{200f}', '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}', '\u{202e}',
    '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}',
];

/// What `c` is ("control character", "line separator", ...) when a field holding `text` refuses
/// it; `None` when it may appear there.
pub fn refused(c: char, text: Text) -> Option<&'static str> {
    use GeneralCategory::{Control, Format, LineSeparator, ParagraphSeparator};
    let category = c.general_category();
    let bidi = || BIDI_CONTROLS.contains(&c);
    let refuse = match (text, category) {
        (_, LineSeparator | ParagraphSeparator) | (Text::Line, Control | Format) => true,
        (Text::Lines, Control) => !matches!(c, '\n' | '\t'),
        (Text::Value, Control) => c == '\0',
        (Text::Lines | Text::Value, Format) => bidi(),
        _ => false,
    };
    if !refuse {
        return None;
    }
    Some(match category {
        LineSeparator => "line separator",
        ParagraphSeparator => "paragraph separator",
        Control => "control character",
        _ if bidi() => "direction control character",
        _ => "invisible format character",
    })
}

/// Checks `value`, the field `field` holding `text`: the first character refused is named in the
/// error, escaped (`contains the line separator \u{2028}`), so the message itself is safe to show.
pub fn check(field: &'static str, value: &str, text: Text) -> Result<(), FieldError> {
    match value
        .chars()
        .find_map(|c| refused(c, text).map(|what| (c, what)))
    {
        Some((c, what)) => Err(FieldError {
            field,
            reason: format!("contains the {what} {}", c.escape_unicode()),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Whether `c` is of a category no single-line field may hold.
    pub(crate) fn of_refused_category(c: char) -> bool {
        use GeneralCategory::{Control, Format, LineSeparator, ParagraphSeparator};
        matches!(
            c.general_category(),
            Control | Format | LineSeparator | ParagraphSeparator
        )
    }

    /// Every character of the categories Cc, Cf, Zl and Zp (about 230).
    pub(crate) fn refused_characters() -> Vec<char> {
        (0..=u32::from(char::MAX))
            .filter_map(char::from_u32)
            .filter(|c| of_refused_category(*c))
            .collect()
    }

    #[test]
    fn the_reported_characters_are_refused_in_one_line_and_named_escaped() {
        for (c, what) in [
            ('\u{2028}', "line separator"),
            ('\u{2029}', "paragraph separator"),
            ('\u{61c}', "direction control character"),
            ('\u{202e}', "direction control character"),
            ('\u{200b}', "invisible format character"),
            ('\u{feff}', "invisible format character"),
            ('\u{1b}', "control character"),
            ('\n', "control character"),
            ('\t', "control character"),
            ('\0', "control character"),
            ('\u{85}', "control character"),
        ] {
            let e = check("name", &format!("a{c}b"), Text::Line).expect_err("refused");
            assert_eq!(
                e.to_string(),
                format!("name: contains the {what} {}", c.escape_unicode())
            );
        }
    }

    #[test]
    fn the_bidi_controls_are_format_characters() {
        for c in BIDI_CONTROLS {
            assert_eq!(
                c.general_category(),
                GeneralCategory::Format,
                "{}",
                c.escape_unicode()
            );
        }
    }

    #[test]
    fn commands_keep_lines_tabs_and_joiners_but_not_other_controls_or_direction_changes() {
        for ok in [
            "python train.py\n\tpython eval.py",
            "echo 👩\u{200d}💻 \u{1f3f4}\u{e0067}\u{e0062}\u{e0073}\u{e0063}\u{e0074}\u{e007f}",
            "ls می\u{200c}خواهم",
        ] {
            assert_eq!(check("command", ok, Text::Lines), Ok(()), "{ok:?}");
        }
        for bad in [
            "a\rb",
            "a\u{1b}]52;c;eA==\u{7}",
            "a\u{2028}b",
            "a\u{202e}b",
            "a\u{2066}b",
            "a\0b",
        ] {
            assert_eq!(
                check("command", bad, Text::Lines).map_err(|e| e.field),
                Err("command"),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn environment_values_keep_escape_sequences_but_not_nul_separators_or_direction_changes() {
        for ok in ["\u{1b}[01;31m", "a\nb\r\n", "f() { :; }"] {
            assert_eq!(check("env", ok, Text::Value), Ok(()), "{ok:?}");
        }
        for bad in ["a\0b", "a\u{2029}b", "a\u{200f}b"] {
            assert!(check("env", bad, Text::Value).is_err(), "{bad:?}");
        }
    }

    /// Text of any characters but those of the refused categories.
    pub(crate) fn clean_text() -> impl Strategy<Value = String> {
        prop::collection::vec(
            any::<char>().prop_filter("not Cc, Cf, Zl, Zp", |c| !of_refused_category(*c)),
            0..40,
        )
        .prop_map(String::from_iter)
    }

    proptest! {
        /// Any text holding a character of Cc, Cf, Zl or Zp anywhere is refused on one line,
        /// and the message names that character (the first one refused), escaped.
        #[test]
        fn one_line_refuses_every_character_of_the_categories(
            before in clean_text(),
            c in prop::sample::select(refused_characters()),
            after in ".*",
        ) {
            let value = format!("{before}{c}{after}");
            let e = check("name", &value, Text::Line).expect_err("refused");
            prop_assert_eq!(e.field, "name");
            prop_assert!(e.reason.ends_with(&c.escape_unicode().to_string()), "{}", e.reason);
        }

        /// Text without them is accepted on one line (and so in commands and values).
        #[test]
        fn one_line_accepts_text_without_them(value in clean_text()) {
            for text in [Text::Line, Text::Lines, Text::Value] {
                prop_assert_eq!(check("name", &value, text), Ok(()));
            }
        }
    }
}
