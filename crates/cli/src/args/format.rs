//! Output formats: `--format` and its `--json` alias, shared by the
//! commands that print.

use clap::{Args, ValueEnum};

/// Output format shared by the read-only commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// Aligned text for people.
    Table,
    /// JSON for scripts.
    Json,
    /// YAML.
    Yaml,
}

/// Output format of `compile`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum CompileFormat {
    /// Aligned text for people.
    Table,
    /// JSON for scripts (the reference engine's keys plus per-stage details).
    Json,
    /// YAML.
    Yaml,
    /// A Mermaid flowchart of the DAG.
    Mermaid,
    /// A Graphviz digraph of the DAG.
    Dot,
}

/// `--format` with its `--json` alias.
#[derive(Debug, Args)]
pub(crate) struct FormatArgs {
    /// Output format.
    #[arg(long, short = 'f', value_enum, default_value_t = Format::Table)]
    pub(crate) format: Format,
    /// Same as `--format json`.
    #[arg(long, conflicts_with = "format")]
    pub(crate) json: bool,
}

impl FormatArgs {
    /// The chosen format.
    pub(crate) fn format(&self) -> Format {
        if self.json { Format::Json } else { self.format }
    }
}
