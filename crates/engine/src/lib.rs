//! baton's run engine: creates runs, schedules stages by dependency, runs
//! them through the executor, verifies and records every result, and picks a
//! run up again after any crash.
//!
//! The coordinator ([`drive`]) is the one place that changes a run's state:
//! it holds the run's lease, applies every transition through the store
//! fenced by the lease's epoch, and batches the transitions that arrive
//! together into one commit. Stage attempts run as tasks that only report.
//!
//! Not here: parsing (baton-workflow), SQL (baton-store), spawning processes
//! (baton-executor), printing (baton-cli).

#![forbid(unsafe_code)]

mod attempt;
pub mod checks;
pub mod clock;
mod control;
mod coordinator;
pub mod create;
pub mod cutoff;
mod digest;
mod endpoint;
mod envelopes;
pub mod external;
pub mod failpoint;
#[doc(hidden)]
pub mod fuzz;
pub mod gate;
pub mod governance;
mod guard;
pub mod loader;
mod outputs;
mod owner;
pub mod probe;
mod progress;
pub mod prompt;
pub mod queue;
mod queued;
pub mod readiness;
mod reconcile;
pub mod retries;
mod run_options;
mod run_state;
pub mod schedule;
mod session;
mod stage;
pub mod stage_agent;
mod start;
mod subrun;
pub mod tasks;
mod usage;
pub mod verify;
pub mod view;
mod work;
pub mod workspace;
mod worktree;

use std::path::PathBuf;

pub use attempt::Limits;
pub use control::{cancel, driver_gone, invalidate};
pub use coordinator::{DriveOptions, Outcome, drive, drive_created};
pub use create::{Created, Prepared, RunRequest, create_run, prepare_run, record_run};
pub use progress::Progress;
pub use work::{unit_stage_name, validation::CORRECTIONS_SPENT};
pub use worktree::{
    AdminError, MERGE_CONFLICT, Pruned, WorktreeEntry, failed_merges, list_worktrees,
    prune_worktrees, worktrees_kept,
};

/// Engine errors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The workflow does not load or compile.
    #[error("invalid workflow")]
    Invalid(baton_workflow::Failure),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] baton_store::Error),
    /// The workspace could not be written.
    #[error("cannot write the workspace at {}", path.display())]
    Workspace {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The workflow or a fragment changed since the run started.
    #[error("the workflow changed since run {run_id} started: {}", changed.join(", "))]
    WorkflowChanged {
        /// The run.
        run_id: String,
        /// The files whose contents differ (or that are new or gone).
        changed: Vec<String>,
    },
    /// The run has no stage of that name.
    #[error("run {run_id} has no stage named '{stage}'")]
    NoSuchStage {
        /// The run.
        run_id: String,
        /// The name asked for.
        stage: String,
    },
    /// A driver-protocol call that the run's state does not allow (a
    /// completion out of order, of a stage baton runs itself).
    #[error("{0}")]
    Refused(String),
    /// A live baton process drives the run.
    #[error(
        "run {run_id} is being driven by {owner} (alive); wait for it, or `baton cancel {run_id}`"
    )]
    Owned {
        /// The run.
        run_id: String,
        /// Who drives it.
        owner: String,
    },
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
