//! Errors and warnings that point into workflow files.
//!
//! Every problem baton finds in a workflow is a [`Diagnostic`]: a message, an
//! optional place (file, line, column, a snippet through miette), an optional
//! hint, and the stage and field it concerns (what `lint --format json`
//! reports). Messages keep the reference engine's wording where the reference
//! has one, so that people and scripts moving over recognise them.

use std::fmt;
use std::sync::{Arc, OnceLock};

use miette::{LabeledSpan, MietteSpanContents, SourceCode, SourceSpan, SpanContents};

use crate::span::Span;

/// The most characters of a line a snippet quotes: a file's lines can be
/// of any length, and an error must not carry a file's content along.
pub const MAX_SNIPPET_CHARS: usize = 200;

/// How many characters a long line's snippet shows before the place.
const SNIPPET_LEAD_CHARS: usize = 40;

/// A workflow or fragment file's text, named as the user gave it.
#[derive(Debug)]
pub struct SourceFile {
    /// The path as shown to the user (as given on the command line, or as
    /// resolved for an included fragment).
    pub path: String,
    /// The file's text.
    pub text: String,
    /// Byte offsets where lines start, computed when a snippet is first
    /// shown: finding a span's line from the start of the file made showing
    /// N diagnostics take time quadratic in N.
    line_starts: OnceLock<Vec<usize>>,
    /// The text as snippets show it (see [`shown`]), made on first use.
    shown: OnceLock<String>,
}

impl SourceFile {
    /// Wraps a file's text.
    pub fn new(path: impl Into<String>, text: impl Into<String>) -> Arc<Self> {
        Arc::new(SourceFile {
            path: path.into(),
            text: text.into(),
            line_starts: OnceLock::new(),
            shown: OnceLock::new(),
        })
    }

    /// The byte range a snippet of the place at `offset` quotes: its line,
    /// or at most [`MAX_SNIPPET_CHARS`] of it around the place.
    pub fn snippet_range(&self, offset: usize) -> std::ops::Range<usize> {
        let text = self.text.as_str();
        let offset = text.floor_char_boundary(offset);
        let starts = self.line_starts();
        let line_start = starts[starts.partition_point(|start| *start <= offset) - 1];
        let line_end = text[offset..]
            .find(['\n', '\r'])
            .map_or(text.len(), |at| offset + at);
        let line = &text[line_start..line_end];
        if line.chars().count() <= MAX_SNIPPET_CHARS {
            return line_start..line_end;
        }
        let before = text[line_start..offset].chars().count();
        let skip = before.saturating_sub(SNIPPET_LEAD_CHARS);
        let start = nth_char(line, skip);
        let end = start + nth_char(&line[start..], MAX_SNIPPET_CHARS);
        line_start + start..line_start + end
    }
}

/// The byte offset of the `n`th character of `text`, or its length.
fn nth_char(text: &str, n: usize) -> usize {
    text.char_indices().nth(n).map_or(text.len(), |(at, _)| at)
}

/// `text` with every control character but tab and line breaks replaced,
/// byte for byte, by `?`: a terminal shows the snippet instead of obeying
/// it, and every offset into the text still holds.
fn shown(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let line_break = c == '\n' || (c == '\r' && chars.peek() == Some(&'\n'));
        if c.is_control() && c != '\t' && !line_break {
            out.extend(std::iter::repeat_n('?', c.len_utf8()));
        } else {
            out.push(c);
        }
    }
    out
}

impl SourceFile {
    /// Byte offsets where lines start, found once per file: counting lines
    /// from the start of the file for every diagnostic made showing N of
    /// them take time quadratic in N.
    fn line_starts(&self) -> &[usize] {
        self.line_starts.get_or_init(|| line_starts(&self.text))
    }
}

/// Byte offsets where lines start. Lines end where YAML ends them, and
/// where the parser counts them: at `\n`, `\r\n` or a `\r` alone, so that
/// a snippet's line and column are the ones the parser reported.
fn line_starts(text: &str) -> Vec<usize> {
    let bytes = text.as_bytes();
    let mut starts = vec![0];
    for (index, byte) in bytes.iter().enumerate() {
        let ends_line = match byte {
            b'\n' => true,
            b'\r' => bytes.get(index + 1) != Some(&b'\n'),
            _ => false,
        };
        if ends_line {
            starts.push(index + 1);
        }
    }
    starts
}

/// The one-based line and column (in characters) of a byte offset, lines
/// counted as the parser counts them (see [`line_starts`]).
pub(crate) fn line_column(text: &str, offset: usize) -> (u32, u32) {
    let offset = text.floor_char_boundary(offset);
    let starts = line_starts(&text[..offset]);
    let line_start = starts.last().copied().unwrap_or(0);
    let number = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    (
        number(starts.len()),
        number(text[line_start..offset].chars().count() + 1),
    )
}

impl SourceCode for SourceFile {
    /// Only the place's line is quoted, whatever context is asked for, and
    /// at most [`MAX_SNIPPET_CHARS`] of it. Without context (how miette
    /// asks for the line and column it names) it starts at the place.
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, miette::MietteError> {
        if span.offset() > self.text.len() {
            return Err(miette::MietteError::OutOfBounds);
        }
        let shown = self.shown.get_or_init(|| shown(&self.text));
        let mut range = self.snippet_range(span.offset());
        if context_lines_before == 0 && context_lines_after == 0 {
            range.start = self
                .text
                .floor_char_boundary(span.offset())
                .clamp(range.start, range.end);
        }
        let starts = self.line_starts();
        let line = starts.partition_point(|start| *start <= range.start) - 1;
        let line_start = starts[line];
        let column = self.text[line_start..range.start].chars().count();
        Ok(Box::new(MietteSpanContents::new_named(
            self.path.clone(),
            &shown.as_bytes()[range.clone()],
            (range.start, range.len()).into(),
            line,
            column,
            1,
        )))
    }
}

/// A place in a source file.
#[derive(Debug, Clone)]
pub struct Location {
    /// The file.
    pub file: Arc<SourceFile>,
    /// The place in it.
    pub span: Span,
}

impl Location {
    /// A place in a file.
    pub fn new(file: &Arc<SourceFile>, span: Span) -> Self {
        Location {
            file: Arc::clone(file),
            span,
        }
    }
}

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Something to fix; the workflow still compiles.
    Warning,
    /// The workflow cannot be used as written.
    Error,
}

/// One problem in a workflow.
#[derive(Debug, Clone)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// A stable, machine-readable name for the kind of problem.
    pub code: &'static str,
    /// One sentence, lowercase, no trailing period.
    pub message: String,
    /// Where the problem is, when it is in a file.
    pub location: Option<Location>,
    /// Text attached to the underlined span.
    pub label: Option<String>,
    /// What to do about it.
    pub help: Option<String>,
    /// The stage concerned (`<global>` when none), as lint reports it.
    pub stage: String,
    /// The field concerned, as lint reports it.
    pub field: String,
}

impl Diagnostic {
    /// An error.
    pub fn error(code: &'static str, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            code,
            message: message.into(),
            location: None,
            label: None,
            help: None,
            stage: GLOBAL.to_owned(),
            field: PARSE_FIELD.to_owned(),
        }
    }

    /// A warning.
    pub fn warning(code: &'static str, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(code, message)
        }
    }

    /// Points the diagnostic at a place.
    #[must_use]
    pub fn at(mut self, file: &Arc<SourceFile>, span: Span) -> Self {
        self.location = Some(Location::new(file, span));
        self
    }

    /// Adds a label for the underlined span.
    #[must_use]
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    /// Adds a hint.
    #[must_use]
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Names the stage and field concerned.
    #[must_use]
    pub fn for_field(mut self, stage: impl Into<String>, field: impl Into<String>) -> Self {
        self.stage = stage.into();
        self.field = field.into();
        self
    }

    /// Whether this is an error.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// The file the diagnostic points into, if any.
    pub fn file(&self) -> Option<&str> {
        self.location
            .as_ref()
            .map(|location| location.file.path.as_str())
    }

    /// One-based line and column, if known.
    pub fn line_column(&self) -> Option<(u32, u32)> {
        self.location
            .as_ref()
            .filter(|location| location.span.line > 0)
            .map(|location| (location.span.line, location.span.column))
    }
}

/// The stage name lint uses for problems that concern no single stage.
pub const GLOBAL: &str = "<global>";
/// The field name lint uses for parse errors.
pub const PARSE_FIELD: &str = "<parse>";

impl fmt::Display for Diagnostic {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.message)
    }
}

impl std::error::Error for Diagnostic {}

impl miette::Diagnostic for Diagnostic {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(format!("baton::{}", self.code)))
    }

    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.severity {
            Severity::Warning => miette::Severity::Warning,
            Severity::Error => miette::Severity::Error,
        })
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|help| Box::new(help) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        self.location
            .as_ref()
            .map(|location| &*location.file as &dyn SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let location = self.location.as_ref()?;
        // The label ends with the snippet, which holds one line at most.
        let shown = location.file.snippet_range(location.span.offset);
        let offset = location.span.offset.clamp(shown.start, shown.end);
        let len = location.span.len.min(shown.end - offset);
        let label = LabeledSpan::new(self.label.clone(), offset, len);
        Some(Box::new(std::iter::once(label)))
    }
}

/// Finds the known name closest to a misspelt one, for "did you mean" hints.
pub fn suggest<'a>(written: &str, known: &[&'a str]) -> Option<&'a str> {
    let written_lower = written.to_ascii_lowercase();
    known
        .iter()
        .map(|candidate| (edit_distance(&written_lower, candidate), *candidate))
        .filter(|(distance, candidate)| {
            *distance <= (candidate.len().max(written.len()) / 3).max(1)
        })
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

fn edit_distance(left: &str, right: &str) -> usize {
    let right: Vec<char> = right.chars().collect();
    let mut previous: Vec<usize> = (0..=right.len()).collect();
    let mut current = vec![0; right.len() + 1];
    for (row, left_char) in left.chars().enumerate() {
        current[0] = row + 1;
        for (column, right_char) in right.iter().enumerate() {
            let substitution = previous[column] + usize::from(left_char != *right_char);
            current[column + 1] = substitution
                .min(previous[column + 1] + 1)
                .min(current[column] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[right.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_find_near_misses_only() {
        let known = ["depends_on", "reads_from", "writes_to"];
        assert_eq!(suggest("depend_on", &known), Some("depends_on"));
        assert_eq!(suggest("write_to", &known), Some("writes_to"));
        assert_eq!(suggest("mode", &known), None);
    }

    /// What miette shows of a span: the snippet, where it is, its line and
    /// column, or why there is none.
    fn shown(source: &dyn SourceCode, span: SourceSpan, before: usize, after: usize) -> String {
        match source.read_span(&span, before, after) {
            Ok(contents) => format!(
                "{:?} {:?} line {} column {} of {}",
                std::str::from_utf8(contents.data()),
                contents.span(),
                contents.line(),
                contents.column(),
                contents.line_count()
            ),
            Err(error) => format!("{error}"),
        }
    }

    #[test]
    fn snippet_lines_and_columns_match_a_count_from_the_start() {
        use miette::SourceCode;
        let text = "name: x\nstages:\n  - a: é\n  - b\n\n\nlast line\n";
        let file = SourceFile::new("w.yaml", text);
        for offset in (0..=text.len()).filter(|offset| text.is_char_boundary(*offset)) {
            let contents = file
                .read_span(&SourceSpan::new(offset.into(), 0), 1, 1)
                .expect("in bounds");
            let line = text[..offset].matches('\n').count();
            assert_eq!(contents.line(), line, "offset {offset}");
            let start = text[..offset].rfind('\n').map_or(0, |at| at + 1);
            let column = text[start..contents.span().offset()].chars().count();
            assert_eq!(contents.column(), column, "offset {offset}");
        }
    }

    #[test]
    fn a_span_past_the_end_has_no_snippet() {
        let file = SourceFile::new("w.yaml", "a: 1\n");
        let span = SourceSpan::new(6.into(), 0);
        assert_eq!(
            shown(&*file, span, 1, 1),
            "The given offset is outside the bounds of its Source"
        );
    }
}

#[cfg(test)]
mod snippet_tests {
    use miette::SourceCode;

    use super::*;

    fn snippet(file: &SourceFile, offset: usize, context: usize) -> (String, usize, usize) {
        let contents = file
            .read_span(&(offset, 1).into(), context, context)
            .expect("in bounds");
        let data = String::from_utf8(contents.data().to_vec()).expect("UTF-8");
        (data, contents.line(), contents.column())
    }

    #[test]
    fn a_snippet_quotes_the_line_of_the_place_only() {
        let file = SourceFile::new("f.yaml", "secret: one\nbad line\nsecret: two\n");
        let (data, line, column) = snippet(&file, 14, 3);
        assert_eq!((data.as_str(), line, column), ("bad line", 1, 0));
        let (data, line, column) = snippet(&file, 14, 0);
        assert_eq!((data.as_str(), line, column), ("d line", 1, 2));
    }

    #[test]
    fn a_long_line_is_quoted_around_the_place_and_no_further() {
        let line = format!("{}HERE{}", "a".repeat(5_000), "b".repeat(5_000));
        let file = SourceFile::new("f.yaml", format!("k: v\n{line}\n"));
        let (data, line, column) = snippet(&file, 5 + 5_000, 1);
        assert_eq!(data.chars().count(), MAX_SNIPPET_CHARS);
        assert!(data.contains("HERE"), "{data}");
        assert_eq!((line, column), (1, 5_000 - SNIPPET_LEAD_CHARS));
        let (data, _, column) = snippet(&file, 5 + 5_000, 0);
        assert!(data.starts_with("HERE"), "{data}");
        assert_eq!(column, 5_000);
    }

    #[test]
    fn a_snippet_shows_control_characters_instead_of_sending_them() {
        let file = SourceFile::new("f.yaml", "a: \u{1b}]0;x\u{7}\u{9b}2K\u{8}b\r\n");
        let (data, _, _) = snippet(&file, 0, 1);
        assert_eq!(data, "a: ?]0;x???2K?b");
    }

    /// YAML ends a line at a `\r` alone, and the parser reports lines so:
    /// a snippet counts them the same way, and never holds a `\r`.
    #[test]
    fn a_lone_carriage_return_ends_a_line_as_the_parser_counts_it() {
        let text = "a: 1\rb: é\r\nc: 3\n";
        let file = SourceFile::new("f.yaml", text);
        assert_eq!(snippet(&file, 5, 1), ("b: é".to_owned(), 1, 0));
        assert_eq!(snippet(&file, 12, 0), ("c: 3".to_owned(), 2, 0));
        assert_eq!(line_column(text, 8), (2, 4));
        assert_eq!(line_column(text, 12), (3, 1));
    }

    #[test]
    fn a_label_ends_with_its_snippet() {
        let file = SourceFile::new("f.yaml", format!("k: {}\nnext\n", "v".repeat(1_000)));
        let diagnostic = Diagnostic::error("t", "t").at(
            &file,
            Span {
                offset: 0,
                len: 2_000,
                line: 1,
                column: 1,
            },
        );
        let labels: Vec<_> = miette::Diagnostic::labels(&diagnostic)
            .expect("labels")
            .collect();
        assert_eq!(
            (labels[0].offset(), labels[0].len()),
            (0, MAX_SNIPPET_CHARS)
        );
    }
}
