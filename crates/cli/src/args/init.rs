//! `baton init`.

use clap::Args;

use super::format::FormatArgs;

/// `baton init`.
#[derive(Debug, Args)]
pub(crate) struct InitArgs {
    /// Overwrite baton.toml and the starter workflow when they exist.
    #[arg(long)]
    pub(crate) force: bool,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}
