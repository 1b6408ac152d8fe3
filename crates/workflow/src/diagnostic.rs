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

use crate::node::Span;

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
}

impl SourceFile {
    /// Wraps a file's text.
    pub fn new(path: impl Into<String>, text: impl Into<String>) -> Arc<Self> {
        Arc::new(SourceFile {
            path: path.into(),
            text: text.into(),
            line_starts: OnceLock::new(),
        })
    }

    /// A zero-based line and where it starts: `lines_before` lines and one
    /// more above the line holding byte `offset` (fewer at the top). The
    /// extra line keeps a span off the start of the text miette reads,
    /// where it treats an empty span differently. Line breaks are miette's:
    /// `\n`, `\r\n` and a lone `\r`.
    fn line_start(&self, offset: usize, lines_before: usize) -> (usize, usize) {
        let starts = self.line_starts.get_or_init(|| line_starts(&self.text));
        let line = starts.partition_point(|start| *start <= offset) - 1;
        let line = line.saturating_sub(lines_before.saturating_add(1));
        (line, starts[line])
    }
}

fn line_starts(text: &str) -> Vec<usize> {
    let bytes = text.as_bytes();
    let mut starts = vec![0];
    for (index, byte) in bytes.iter().enumerate() {
        let ends_line = *byte == b'\n' || (*byte == b'\r' && bytes.get(index + 1) != Some(&b'\n'));
        if ends_line {
            starts.push(index + 1);
        }
    }
    starts
}

impl SourceCode for SourceFile {
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, miette::MietteError> {
        // miette scans from the start of the text it is given, so it is
        // given the text from the first context line on, and its answer is
        // moved back to the whole file's offsets and lines.
        if span.offset() > self.text.len() {
            // miette panics on a span that starts past the end.
            return Err(miette::MietteError::OutOfBounds);
        }
        let (line, start) = self.line_start(span.offset(), context_lines_before);
        let local = SourceSpan::new((span.offset() - start).into(), span.len());
        let contents =
            self.text[start..].read_span(&local, context_lines_before, context_lines_after)?;
        let found = contents.span();
        Ok(Box::new(MietteSpanContents::new_named(
            self.path.clone(),
            contents.data(),
            SourceSpan::new((found.offset() + start).into(), found.len()),
            contents.line() + line,
            contents.column(),
            contents.line_count() + line,
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

    /// Points the diagnostic at a place, if there is one.
    #[must_use]
    pub fn at_location(mut self, location: Option<Location>) -> Self {
        self.location = location;
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
        let text_len = location.file.text.len();
        let offset = location.span.offset.min(text_len);
        let len = location.span.len.min(text_len - offset);
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
    fn snippets_match_miettes_reading_of_the_whole_text() {
        let text = "name: x\r\nstages:\n  - a: é\r  - b\n\n\nlast line\r\n";
        let file = SourceFile::new("w.yaml", text);
        for offset in 0..=text.len() {
            for len in [0, 1, 3, 12] {
                for (before, after) in [(0, 0), (1, 1), (2, 0), (0, 3), (5, 5)] {
                    let span = SourceSpan::new(offset.into(), len);
                    assert_eq!(
                        shown(&*file, span, before, after),
                        shown(&text, span, before, after),
                        "offset {offset}, length {len}, context {before}/{after}"
                    );
                }
            }
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
