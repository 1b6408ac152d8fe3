//! What goes wrong with a gate, worded for the person who acted.

use std::path::PathBuf;

use super::list;

/// Gate errors, worded for the person who acted.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] baton_store::Error),
    /// The run has no stage of that name.
    #[error("run {run_id} has no stage named '{stage}'")]
    NoSuchStage {
        /// The run.
        run_id: String,
        /// The name asked for.
        stage: String,
    },
    /// The stage is not a human gate.
    #[error("stage '{stage}' is not a human gate (it has no `human_gate: true`)")]
    NotAGate {
        /// The stage.
        stage: String,
    },
    /// The gate's stage has not succeeded, so there is nothing to decide on.
    #[error("gate '{stage}' has not succeeded yet (its stage is {status}); decide once it has run")]
    NotReady {
        /// The stage.
        stage: String,
        /// Its status.
        status: String,
    },
    /// A push-back without a comment: the stage would run again with
    /// nothing new to go by.
    #[error(
        "a push-back needs a comment: the stage runs again with it in its prompt (--comment \"what to change\")"
    )]
    NoComment {
        /// The stage.
        stage: String,
    },
    /// A stage after the gate already ran on the outputs to push back.
    #[error(
        "stage '{after}' already ran on the outputs of gate '{stage}': a push-back cannot take them back; `baton rerun {run_id} {stage}` runs '{stage}' and every stage after it again"
    )]
    RanPastGate {
        /// The gate stage.
        stage: String,
        /// A stage after it that ran.
        after: String,
        /// The run.
        run_id: String,
    },
    /// Someone decided on this attempt and artifact already.
    #[error("gate '{stage}' was already {decision} by {by} at {at}")]
    AlreadyDecided {
        /// The stage.
        stage: String,
        /// `approved`, `rejected` or `pushed back`.
        decision: String,
        /// Who.
        by: String,
        /// When (UTC).
        at: String,
    },
    /// The run ended at this or another gate.
    #[error("run {run_id} is {status}; its gates can no longer be decided")]
    RunEnded {
        /// The run.
        run_id: String,
        /// Its status.
        status: String,
    },
    /// None of the gate's outputs is a list that can be edited.
    #[error(
        "gate '{stage}' has no editable output: none of {outputs} is a JSON list or a markdown list"
    )]
    NotEditable {
        /// The stage.
        stage: String,
        /// Its outputs, for the message.
        outputs: String,
    },
    /// The edit does not fit the list.
    #[error("cannot edit {path}")]
    Edit {
        /// The output.
        path: String,
        /// Why.
        #[source]
        source: list::EditError,
    },
    /// The output changed between reading and writing it.
    #[error(
        "{path} changed meanwhile (another edit, or a rerun of the stage); nothing was written, retry"
    )]
    Changed {
        /// The output.
        path: String,
    },
    /// The run was rejected, and the child runs of its sub-workflow stages
    /// could not all be cancelled.
    #[error(
        "run {run_id} is rejected, but its child runs could not all be cancelled; `baton cancel {run_id}` cancels them"
    )]
    Children {
        /// The run.
        run_id: String,
        /// Why.
        #[source]
        source: Box<crate::Error>,
    },
    /// A file could not be read or written.
    #[error("cannot write {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
