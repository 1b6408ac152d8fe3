//! What a drive reports when it ends.

/// How a drive ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The run.
    pub run_id: String,
    /// `success`, `failed`, `awaiting_human`, `rejected` or `cancelled`.
    pub status: String,
    /// The gate waited on, if any.
    pub gate: Option<String>,
    /// Why the run failed.
    pub error: Option<String>,
}
