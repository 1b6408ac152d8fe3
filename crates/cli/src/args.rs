//! The command line, as clap sees it. Nothing here is interpreted.

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::exit_code;

/// baton runs multi-step AI-agent work on software projects: workflows of
/// stages compiled to a DAG and carried out by deterministic code.
#[derive(Debug, Parser)]
#[command(name = "baton", version, after_help = exit_code::HELP, propagate_version = true)]
pub(crate) struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Parse a workflow and show its stages (includes expanded).
    #[command(
        after_help = "Examples:\n  baton parse workflows/code/ci-debug.yaml\n  baton parse workflows/code/ci-debug.yaml --json\n\nExit codes: 0 the workflow parses, 1 it does not, 2 usage error."
    )]
    Parse(FileArgs),

    /// Check a workflow or fragment for errors and likely mistakes.
    ///
    /// Reports the reference engine's rules (includes exist, the file parses,
    /// undeclared {variables}, a queue fan-out needs a script) and baton's own
    /// (unknown keys, unquoted placeholders in scripts, writes_to outside the
    /// workspace, read-only agents with editing tools, unused parameters,
    /// everything compile would reject).
    #[command(
        after_help = "Examples:\n  baton lint workflows/code/open-pr.yaml\n  baton lint workflows/shared/plan-critic.yaml --format json\n  baton lint workflows/code/open-pr.yaml --strict   # warnings fail too\n\nExit codes: 0 valid, 1 invalid (with --strict: any warning), 2 usage error."
    )]
    Lint(LintArgs),

    /// Compile a workflow into its execution plan: groups, indices, contracts.
    #[command(
        after_help = "Examples:\n  baton compile workflows/code/ci-debug.yaml\n  baton compile workflows/code/ci-debug.yaml --format json | jq '.groups'\n  baton compile wf.yaml --params pr_number=42 --format mermaid > plan.mmd\n  baton compile wf.yaml --format dot | dot -Tsvg > plan.svg\n\nExit codes: 0 compiled, 1 invalid workflow (with --strict: also any warning), 2 usage error."
    )]
    Compile(CompileArgs),

    /// List the workflows and fragments under a directory.
    #[command(
        after_help = "Without DIR, lists ./workflows when it exists, else the current directory.\n\nExit codes: 0 listed (even if empty), 2 usage error."
    )]
    List(ListArgs),
}

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

/// A workflow file and an output format.
#[derive(Debug, Args)]
pub(crate) struct FileArgs {
    /// The workflow file (includes are resolved from the current directory first).
    pub(crate) file: String,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}

/// `baton lint`.
#[derive(Debug, Args)]
pub(crate) struct LintArgs {
    /// The workflow or fragment file.
    pub(crate) file: String,
    /// Treat warnings as errors.
    #[arg(long)]
    pub(crate) strict: bool,
    /// Parameter values, as `key=value` (repeatable).
    #[arg(long = "params", short = 'p', value_name = "KEY=VALUE")]
    pub(crate) params: Vec<String>,
    /// Output format (default: table).
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}

/// `baton compile`.
#[derive(Debug, Args)]
pub(crate) struct CompileArgs {
    /// The workflow file.
    pub(crate) file: String,
    /// Treat warnings (unknown keys, unknown checks) as errors.
    #[arg(long)]
    pub(crate) strict: bool,
    /// Parameter values, as `key=value` (repeatable); they override
    /// `trigger.params`, which override the built-in `work_dir`.
    #[arg(long = "params", short = 'p', value_name = "KEY=VALUE")]
    pub(crate) params: Vec<String>,
    /// Output format.
    #[arg(long, short = 'f', value_enum, default_value_t = CompileFormat::Table)]
    pub(crate) format: CompileFormat,
    /// Same as `--format json`.
    #[arg(long, conflicts_with = "format")]
    pub(crate) json: bool,
}

/// `baton list`.
#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    /// Directory to search (recursively) for `*.yaml` files.
    pub(crate) dir: Option<String>,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}
