//! `baton worktree …` arguments.

use clap::{Args, Subcommand};

use super::format::FormatArgs;

/// `baton worktree …`.
#[derive(Debug, Subcommand)]
pub(crate) enum WorktreeCommand {
    /// List the branches isolated stages made, their worktrees, and whether each is merged.
    #[command(
        after_help = "Examples:\n  baton worktree list\n  baton worktree list RUN --format json"
    )]
    List(WorktreeArgs),
    /// Remove the worktrees and merged branches of finished runs.
    ///
    /// A worktree with uncommitted changes and a branch its target does not
    /// contain are kept (and listed): pruning never loses work.
    #[command(after_help = "Examples:\n  baton worktree prune\n  baton worktree prune RUN")]
    Prune(WorktreeArgs),
}

/// An optional run and a format.
#[derive(Debug, Args)]
pub(crate) struct WorktreeArgs {
    /// Only this run (default: every run).
    pub(crate) run: Option<String>,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}
