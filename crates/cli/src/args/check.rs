//! `baton check`.

use clap::Args;

use super::format::FormatArgs;

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
    /// Also ask each profile the workflow uses for a one-word answer, as
    /// `baton agents check --probe` does (once every agent can start).
    #[arg(long)]
    pub(crate) probe: bool,
    /// How long each probe may take (90s, 2m, 500ms).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = super::agents::duration, requires = "probe")]
    pub(crate) timeout: std::time::Duration,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}
