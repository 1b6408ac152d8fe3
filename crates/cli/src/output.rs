//! Writing results to stdout and messages to stderr.
//!
//! stdout carries only the result of a command; diagnostics, hints and
//! progress go to stderr. A closed stdout (`baton … | head`) is not an error.
//!
//! Stage names, fan-out keys, error messages and logs come from workflows
//! and agents, and a terminal obeys the escape sequences in them: a key
//! could repaint its own FAILED line as ok. So every text written here goes
//! through [`printable`] first. JSON is written with its control characters
//! escaped, which leaves it untouched by that and carries the exact values.

use std::borrow::Cow;
use std::io::{self, Write};

use serde::Serialize;

use crate::args::Format;

/// Writes text to stdout, made [`printable`]; a broken pipe is ignored.
pub(crate) fn stdout(text: &str) {
    let mut out = io::stdout().lock();
    let _ = out
        .write_all(printable(text).as_bytes())
        .and_then(|()| out.flush());
}

/// Writes one line to stderr, made [`printable`], in one write: stderr is
/// unbuffered, and a run prints two progress lines per stage.
pub(crate) fn stderr_line(text: &str) {
    stderr_rendered(&printable(text));
}

/// Writes one line to stderr as it is: only for text whose escape sequences
/// baton produced itself (colours) from strings already made printable.
pub(crate) fn stderr_rendered(text: &str) {
    let mut line = String::with_capacity(text.len() + 1);
    line.push_str(text);
    line.push('\n');
    let _ = io::stderr().lock().write_all(line.as_bytes());
}

/// Writes lines to stderr through one buffer: many lines, few writes.
pub(crate) fn stderr_lines(lines: impl Iterator<Item = String>) {
    let mut err = io::BufWriter::with_capacity(64 * 1024, io::stderr().lock());
    for line in lines {
        if err
            .write_all(line.as_bytes())
            .and_then(|()| err.write_all(b"\n"))
            .is_err()
        {
            return;
        }
    }
    let _ = err.flush();
}

/// Text with every control character removed but newline and tab, and
/// with escape sequences (CSI, OSC, DCS and the like, 7- or 8-bit) removed
/// whole, so that their parameters do not show up as litter either.
pub(crate) fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unprintable) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => skip_escape(&mut chars),
            '\u{9b}' => skip_csi(&mut chars),
            '\u{90}' | '\u{98}' | '\u{9d}' | '\u{9e}' | '\u{9f}' => skip_string(&mut chars),
            c if is_unprintable(c) => {}
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// [`printable`] on one line: line breaks show as ` ⏎ `, a trailing one
/// not at all, so that a multi-line error cannot pass for lines of its own.
pub(crate) fn one_line(text: &str) -> String {
    let text = printable(text);
    let mut lines = text.trim_end_matches('\n').split('\n');
    let mut out = lines.next().unwrap_or_default().to_owned();
    for line in lines {
        out.push_str(" ⏎ ");
        out.push_str(line);
    }
    out
}

/// `text` cut to about `max` characters for a line a person reads: its
/// start and end, with how much was left out between. Keys and errors can
/// be huge (a fan-out key is whatever an item holds); the whole text stays
/// in the store and in `--format json`.
pub(crate) fn clipped(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return text.to_owned();
    }
    let tail = max / 4;
    let head = max - tail;
    let start: String = text.chars().take(head).collect();
    let end: String = text.chars().skip(count - tail).collect();
    format!("{start}…[{} characters]…{end}", count - head - tail)
}

fn is_unprintable(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

type Chars<'a> = std::iter::Peekable<std::str::Chars<'a>>;

/// Skips what follows an ESC: a CSI, a control string, or a short sequence.
fn skip_escape(chars: &mut Chars<'_>) {
    match chars.peek() {
        Some('[') => {
            chars.next();
            skip_csi(chars);
        }
        Some(']' | 'P' | 'X' | '^' | '_') => {
            chars.next();
            skip_string(chars);
        }
        Some(' '..='/') => {
            while chars.next_if(|c| matches!(c, ' '..='/')).is_some() {}
            chars.next_if(|c| matches!(c, '0'..='~'));
        }
        Some('0'..='~') => {
            chars.next();
        }
        _ => {}
    }
}

/// Skips a CSI's parameters, intermediates and final byte.
fn skip_csi(chars: &mut Chars<'_>) {
    while chars.next_if(|c| matches!(c, ' '..='?')).is_some() {}
    chars.next_if(|c| matches!(c, '@'..='~'));
}

/// Skips a control string (OSC, DCS, …) up to its terminator: BEL, ST
/// (`ESC \` or U+009C). An unterminated one ends at the line's end, not
/// the text's, so that it cannot swallow every line after it.
fn skip_string(chars: &mut Chars<'_>) {
    while let Some(c) = chars.next_if(|c| *c != '\n') {
        match c {
            '\u{7}' | '\u{9c}' => return,
            '\u{1b}' => {
                chars.next_if_eq(&'\\');
                return;
            }
            _ => {}
        }
    }
}

/// Pretty JSON (2-space indent) followed by a newline, its control
/// characters escaped (see [`JsonEscapes`]).
pub(crate) fn json<T: Serialize + ?Sized>(value: &T) -> String {
    let mut text = Vec::new();
    let mut out = JsonEscapes(&mut text);
    serde_json::to_writer_pretty(&mut out, value).expect("results are plain data");
    let mut text = String::from_utf8(text).expect("JSON is UTF-8");
    text.push('\n');
    text
}

/// Compact JSON on one line, its control characters escaped.
pub(crate) fn json_line<T: Serialize + ?Sized>(value: &T) -> String {
    let mut text = Vec::new();
    serde_json::to_writer(JsonEscapes(&mut text), value).expect("results are plain data");
    String::from_utf8(text).expect("JSON is UTF-8")
}

/// Writes pretty JSON (2-space indent) and a newline straight to stdout,
/// its control characters escaped; a broken pipe is ignored.
pub(crate) fn write_json<T: Serialize>(value: &T) {
    let mut out = JsonEscapes(io::BufWriter::with_capacity(64 * 1024, io::stdout().lock()));
    let _ = serde_json::to_writer_pretty(&mut out, value)
        .map_err(io::Error::from)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
}

/// Escapes DEL and the C1 controls in serde_json's output as `\u00XX`,
/// which serde_json leaves raw (it escapes only C0). They can occur only
/// inside strings, where the escape means the same character: the values
/// stay exact and the text holds no control character a terminal obeys.
struct JsonEscapes<W>(W);

impl<W: Write> Write for JsonEscapes<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // serde_json writes whole characters per call, so a C1 control's
        // two bytes (0xC2 0x80..=0x9F) always arrive together.
        let mut start = 0;
        let mut at = 0;
        while at < buf.len() {
            let escaped = match (buf[at], buf.get(at + 1)) {
                (0x7f, _) => Some((0x7f, 1)),
                (0xc2, Some(&next @ 0x80..=0x9f)) => Some((next, 2)),
                _ => None,
            };
            match escaped {
                Some((code, len)) => {
                    self.0.write_all(&buf[start..at])?;
                    write!(self.0, "\\u{code:04x}")?;
                    at += len;
                    start = at;
                }
                None => at += 1,
            }
        }
        self.0.write_all(&buf[start..])?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// YAML.
pub(crate) fn yaml<T: Serialize>(value: &T) -> String {
    serde_saphyr::to_string(value).expect("results are plain data")
}

/// [`yaml`] for `--format yaml`, else [`json`].
pub(crate) fn json_or_yaml<T: Serialize>(format: Format, value: &T) -> String {
    if format == Format::Yaml {
        yaml(value)
    } else {
        json(value)
    }
}

/// Prints a command's result: `value` as JSON or YAML, or for the table
/// format the text `table` makes (which may write to stderr first).
pub(crate) fn print<T: Serialize + ?Sized>(
    format: Format,
    value: &T,
    table: impl FnOnce() -> String,
) {
    match format {
        Format::Json => write_json(&value),
        Format::Yaml => stdout(&yaml(&value)),
        Format::Table => stdout(&table()),
    }
}

/// [`print`] for the commands whose `--format yaml` has always printed
/// their `text`: scripts that read it must keep working.
pub(crate) fn json_or_text<T: Serialize + ?Sized>(
    format: Format,
    value: &T,
    text: impl FnOnce() -> String,
) {
    if format == Format::Json {
        write_json(&value);
    } else {
        stdout(&text());
    }
}

/// [`table`] with a row for each item.
pub(crate) fn table_of<I: IntoIterator>(
    header: &[&str],
    items: I,
    row: impl FnMut(I::Item) -> Vec<String>,
) -> String {
    let rows: Vec<Vec<String>> = items.into_iter().map(row).collect();
    table(header, &rows)
}

/// Rows as aligned columns with a header; empty cells print as `-`.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut columns = Columns::new(header);
    for row in rows {
        columns.fit(row);
    }
    let mut out = columns.line(header);
    for row in rows {
        out.push_str(&columns.line(row));
    }
    out
}

/// The widths of a table's columns, grown row by row: a listing too long
/// to hold is measured in one pass over its rows and printed in another.
pub(crate) struct Columns(Vec<usize>);

impl Columns {
    /// Columns as wide as their headers.
    pub(crate) fn new(header: &[&str]) -> Self {
        Columns(header.iter().map(|cell| cell.chars().count()).collect())
    }

    /// Widens the columns to hold `row`.
    pub(crate) fn fit(&mut self, row: &[String]) {
        for (width, cell) in self.0.iter_mut().zip(row) {
            *width = (*width).max(single_line(cell).chars().count());
        }
    }

    /// One line of the table, newline included; empty cells print as `-`.
    pub(crate) fn line<S: AsRef<str>>(&self, cells: &[S]) -> String {
        let mut text = String::new();
        for (column, cell) in cells.iter().enumerate() {
            if column > 0 {
                text.push_str("  ");
            }
            let cell = single_line(cell.as_ref());
            let cell = if cell.is_empty() { "-" } else { cell.as_str() };
            text.push_str(cell);
            if let Some(width) = self.0.get(column).filter(|_| column + 1 < self.0.len()) {
                for _ in cell.chars().count()..*width {
                    text.push(' ');
                }
            }
        }
        let mut line = text.trim_end().to_owned();
        line.push('\n');
        line
    }
}

/// A cell on one line: its first, made [`printable`], and ` …` if more
/// follow.
fn single_line(text: &str) -> String {
    let text = printable(text);
    let first = text.lines().next().unwrap_or("");
    if text.contains('\n') {
        format!("{first} …")
    } else {
        first.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clipped_text_keeps_its_start_and_end_and_counts_the_rest() {
        assert_eq!(clipped("short", 10), "short");
        let long = format!("fan[{}]", "é".repeat(1_000));
        let shown = clipped(&long, 40);
        assert!(shown.starts_with("fan[éé"), "{shown}");
        assert!(shown.ends_with("éé]"), "{shown}");
        assert!(shown.contains("…[965 characters]…"), "{shown}");
    }

    #[test]
    fn printable_drops_controls_and_whole_escape_sequences() {
        let cases = [
            ("plain text\tand\nlines", "plain text\tand\nlines"),
            ("\u{1b}[2K\rok      a", "ok      a"),
            ("\u{1b}[1;31mred\u{1b}[0m", "red"),
            ("\u{1b}]0;title\u{7}after", "after"),
            ("\u{1b}]8;;http://x\u{1b}\\link\u{1b}]8;;\u{1b}\\", "link"),
            ("\u{1b}Pdcs\u{1b}\\x", "x"),
            ("\u{1b}(Bx\u{1b}7y\u{1b}c", "xy"),
            ("\u{9b}2Kc1\u{9d}0;t\u{9c}!", "c1!"),
            ("bell\u{7} del\u{7f} nul\u{0} c1\u{85}", "bell del nul c1"),
            // An unterminated title ends with its line, not the text.
            ("\u{1b}]0;title\nnext", "\nnext"),
            ("trailing escape\u{1b}", "trailing escape"),
            ("naïve ✓", "naïve ✓"),
        ];
        for (text, shown) in cases {
            assert_eq!(printable(text), shown, "{text:?}");
        }
        assert!(matches!(printable("clean"), Cow::Borrowed("clean")));
    }

    #[test]
    fn one_line_marks_line_breaks() {
        assert_eq!(one_line("first\r\nsecond\n"), "first ⏎ second");
        assert_eq!(one_line("\u{1b}[2Kjust one"), "just one");
    }

    #[test]
    fn table_cells_stay_on_their_line_and_column() {
        let rows = vec![
            vec!["\u{1b}[32mok\u{1b}[0m".to_owned(), "x".to_owned()],
            vec!["two\nlines".to_owned(), "y".to_owned()],
        ];
        assert_eq!(table(&["A", "B"], &rows), "A      B\nok     x\ntwo …  y\n");
    }

    #[test]
    fn json_escapes_every_control_character_and_keeps_the_value() {
        let value = serde_json::json!({"k\u{1b}": "a\u{1b}[2K\u{7f}\u{9b}\u{85}é"});
        for text in [json(&value), json_line(&value)] {
            assert!(!text.chars().any(is_unprintable), "{text:?}");
            assert_eq!(printable(&text), text);
            let back: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
            assert_eq!(back, value);
        }
    }

    #[test]
    fn yaml_carries_no_raw_control_character() {
        let value = serde_json::json!({"k": "a\u{1b}[2K\u{7f}\u{9b}"});
        let text = yaml(&value);
        assert!(!text.chars().any(is_unprintable), "{text:?}");
    }
}
