//! `baton check`.

use clap::Args;

use super::FormatArgs;

/// `baton check`.
#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// The workflow file.
    pub(crate) file: String,
    /// Treat lint warnings as errors.
    #[arg(long)]
    pub(crate) strict: bool,
    /// Parameter values, as `key=value` (repeatable).
    #[arg(long = "params", short = 'p', value_name = "KEY=VALUE")]
    pub(crate) params: Vec<String>,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}
