//! Arguments of the driver-protocol commands: `baton next`, `complete`, `fail`.

use clap::{Args, ValueEnum};

use super::format::FormatArgs;

/// `baton run --driver`: who executes the run's stages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub(crate) enum DriverArg {
    /// baton runs every stage itself.
    #[default]
    Builtin,
    /// An external orchestrator asks for work with `baton next` and reports
    /// it with `baton complete` / `baton fail`; baton spawns no agents.
    External,
}

/// `baton next`.
#[derive(Debug, Args)]
pub(crate) struct NextArgs {
    /// The run (from `baton run FILE --driver external`): its id, the start of it, or `latest`.
    pub(crate) run: String,
    /// Leave the run's queue jobs (`executor: worker_queue` stages and
    /// `fan_out.mode: worker_queue` items) to `baton worker` processes
    /// instead of working them in this call too; `next` waits for them.
    #[arg(long)]
    pub(crate) no_local_worker: bool,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}

/// `baton complete`.
#[derive(Debug, Args)]
pub(crate) struct CompleteArgs {
    /// The run: its id, the start of it, or `latest`.
    pub(crate) run: String,
    /// The stage handed out by `baton next`.
    pub(crate) stage: String,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}

/// `baton fail`.
#[derive(Debug, Args)]
pub(crate) struct FailArgs {
    /// The run: its id, the start of it, or `latest`.
    pub(crate) run: String,
    /// The stage handed out by `baton next`.
    pub(crate) stage: String,
    /// Why the stage failed (recorded as its error).
    #[arg(long, value_name = "TEXT")]
    pub(crate) error: String,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}
