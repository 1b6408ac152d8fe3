//! What a drive shows while it goes on: the events a caller of
//! [`crate::drive`] renders, and a sub-workflow's parent passes on. It
//! depends on nothing of the engine, so whatever reports progress can name
//! it without reaching into the coordinator.

/// Something worth showing while a run goes on.
#[derive(Debug, Clone)]
pub enum Progress {
    /// A stage attempt started.
    Started {
        /// Stage name.
        stage: String,
        /// Attempt number.
        attempt: i64,
    },
    /// A stage ended.
    Finished {
        /// Stage name.
        stage: String,
        /// `success`, `failed` or `skipped`.
        status: String,
        /// Duration in ms.
        duration_ms: i64,
        /// Why it failed.
        error: Option<String>,
    },
    /// Something the engine did on its own (reconciliation, stale outputs).
    Note(String),
    /// The drive waits at this gate for a decision (`wait_gates`).
    AwaitingGate {
        /// The gate stage.
        stage: String,
    },
    /// An event of the child run a sub-workflow stage drives.
    SubRun {
        /// The stage whose child it is (for a fan-out item, the item's
        /// label, as its own lines name it).
        stage: String,
        /// The child's event: itself a `SubRun` for a grandchild's.
        event: Box<Progress>,
    },
}
