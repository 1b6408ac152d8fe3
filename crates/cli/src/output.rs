//! Writing results to stdout and messages to stderr.
//!
//! stdout carries only the result of a command; diagnostics, hints and
//! progress go to stderr. A closed stdout (`baton … | head`) is not an error.

use std::io::{self, Write};

use serde::Serialize;

/// Writes text to stdout; a broken pipe is ignored.
pub(crate) fn stdout(text: &str) {
    let mut out = io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

/// Writes one line to stderr, in one write: stderr is unbuffered, and a
/// run prints two progress lines per stage.
pub(crate) fn stderr_line(text: &str) {
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

/// Pretty JSON (2-space indent) followed by a newline.
pub(crate) fn json<T: Serialize + ?Sized>(value: &T) -> String {
    let mut text = serde_json::to_string_pretty(value).expect("results are plain data");
    text.push('\n');
    text
}

/// Writes pretty JSON (2-space indent) and a newline straight to stdout; a
/// broken pipe is ignored.
pub(crate) fn write_json<T: Serialize>(value: &T) {
    let mut out = io::BufWriter::with_capacity(64 * 1024, io::stdout().lock());
    let _ = serde_json::to_writer_pretty(&mut out, value)
        .map_err(io::Error::from)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
}

/// YAML.
pub(crate) fn yaml<T: Serialize>(value: &T) -> String {
    serde_saphyr::to_string(value).expect("results are plain data")
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

fn single_line(text: &str) -> String {
    let first = text.lines().next().unwrap_or("");
    if text.contains('\n') {
        format!("{first} …")
    } else {
        first.to_owned()
    }
}
