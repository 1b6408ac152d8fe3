//! The options recorded with a run, so that every later process drives it
//! as the first one did, and who drives it (baton, or an external
//! orchestrator).

use std::path::PathBuf;

use baton_store::RunRow;
use serde::{Deserialize, Serialize};

/// Options recorded with the run, so `resume` acts as the first process did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunOptions {
    /// The project: where the store, workspaces and worktrees are, and
    /// what relative workflow paths start from.
    pub project_dir: PathBuf,
    /// Concurrency bound.
    pub max_parallel: usize,
    /// Who executes the stages; recorded here (rather than in a column of
    /// its own) so that older runs read as built-in without a migration.
    #[serde(default, skip_serializing_if = "DriverMode::is_builtin")]
    pub driver: DriverMode,
    /// `--budget`, else the workflow's `budget_usd`: no agent stage starts
    /// once the run spent this many dollars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<f64>,
}

/// Who executes a run's stages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DriverMode {
    /// baton's coordinator spawns every stage ([`crate::drive`]).
    #[default]
    Builtin,
    /// An external orchestrator asks for work with `next` and reports it
    /// with `complete` / `fail`; baton spawns no agents.
    External,
}

impl DriverMode {
    /// Whether this is the default (kept out of the recorded options).
    #[must_use]
    pub fn is_builtin(&self) -> bool {
        *self == DriverMode::Builtin
    }
}

/// Whether a recorded run is driven externally.
#[must_use]
pub fn is_external(run: &RunRow) -> bool {
    serde_json::from_str::<RunOptions>(&run.options)
        .is_ok_and(|options| options.driver == DriverMode::External)
}
