//! Showing diagnostics: graphical (miette) for people, JSON for scripts.

use std::fmt;

use baton_workflow::Diagnostic;
use miette::{MietteHandler, ReportHandler};
use serde::Serialize;

use crate::output;

/// Sets up miette's renderer once per process. Colour follows miette's own
/// detection, which honours `NO_COLOR` and a non-terminal stderr.
pub(crate) fn install() {
    let _ = miette::set_hook(Box::new(|_| Box::new(handler())));
}

/// Context is asked for but never given: a snippet quotes only the line of
/// the place (see `SourceFile`), from its start.
fn handler() -> MietteHandler {
    miette::MietteHandlerOpts::new()
        .context_lines(1)
        .tab_width(4)
        .build()
}

/// Prints diagnostics to stderr, each with its file, line, column and snippet.
/// One renderer serves them all: building one asks the terminal for its
/// size and colours, which costs more than drawing a snippet. miette's
/// colours are baton's own: the texts it renders are made printable first
/// (the snippet too, see `SourceFile`).
pub(crate) fn human(diagnostics: &[Diagnostic]) {
    let handler = handler();
    output::stderr_lines(diagnostics.iter().map(|diagnostic| {
        let diagnostic = printable(diagnostic);
        format!(
            "{:?}",
            Shown {
                handler: &handler,
                diagnostic: &diagnostic
            }
        )
    }));
}

/// A diagnostic as miette's report of it would print.
struct Shown<'a> {
    handler: &'a MietteHandler,
    diagnostic: &'a Diagnostic,
}

impl fmt::Debug for Shown<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.handler.debug(self.diagnostic, formatter)
    }
}

/// The diagnostic with its texts made printable: messages quote stage
/// names, keys and values from the workflow.
fn printable(diagnostic: &Diagnostic) -> Diagnostic {
    let text = |text: &str| output::printable(text).into_owned();
    Diagnostic {
        message: text(&diagnostic.message),
        label: diagnostic.label.as_deref().map(text),
        help: diagnostic.help.as_deref().map(text),
        stage: text(&diagnostic.stage),
        field: text(&diagnostic.field),
        ..diagnostic.clone()
    }
}

/// A diagnostic as JSON.
#[derive(Debug, Serialize)]
pub(crate) struct JsonDiagnostic<'a> {
    /// `error` or `warning`.
    pub(crate) severity: &'static str,
    /// Stable machine-readable kind, e.g. `schema::type`.
    pub(crate) code: &'a str,
    /// The message.
    pub(crate) message: &'a str,
    /// The file, if the problem is in one.
    pub(crate) file: Option<&'a str>,
    /// One-based line.
    pub(crate) line: Option<u32>,
    /// One-based column.
    pub(crate) column: Option<u32>,
    /// The stage concerned, or `<global>`.
    pub(crate) stage: &'a str,
    /// The field concerned.
    pub(crate) field: &'a str,
    /// What to do about it.
    pub(crate) help: Option<&'a str>,
}

impl<'a> From<&'a Diagnostic> for JsonDiagnostic<'a> {
    fn from(diagnostic: &'a Diagnostic) -> Self {
        let (line, column) = diagnostic.line_column().unzip();
        JsonDiagnostic {
            severity: if diagnostic.is_error() {
                "error"
            } else {
                "warning"
            },
            code: diagnostic.code,
            message: &diagnostic.message,
            file: diagnostic.file(),
            line,
            column,
            stage: &diagnostic.stage,
            field: &diagnostic.field,
            help: diagnostic.help.as_deref(),
        }
    }
}

/// Prints diagnostics to stderr as one JSON object `{"diagnostics": […]}`.
pub(crate) fn json(diagnostics: &[Diagnostic]) {
    #[derive(Serialize)]
    struct Envelope<'a> {
        diagnostics: Vec<JsonDiagnostic<'a>>,
    }
    let envelope = Envelope {
        diagnostics: diagnostics.iter().map(JsonDiagnostic::from).collect(),
    };
    output::stderr_line(&output::json_line(&envelope));
}

/// Prints diagnostics in the requested style; nothing when there are none.
pub(crate) fn emit(diagnostics: &[Diagnostic], as_json: bool) {
    if diagnostics.is_empty() {
        return;
    }
    if as_json {
        json(diagnostics)
    } else {
        human(diagnostics)
    }
}
