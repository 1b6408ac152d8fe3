//! Which stage (or fan-out child) of which run a worktree is for.

use std::path::Path;

use baton_workflow::Plan;

use crate::attempt::Attempt;

/// Which stage (or fan-out child) of which run is isolated, and where the
/// run lives: what both the built-in executor and the driver protocol know.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Place<'a> {
    /// The store, for the run's recorded git base.
    pub(crate) store: &'a baton_store::Store,
    /// The run.
    pub(crate) run_id: &'a str,
    /// The directory the run started in.
    pub(crate) project_dir: &'a Path,
    /// The run's workspace.
    pub(crate) workspace: &'a Path,
    /// The run's plan.
    pub(crate) plan: &'a Plan,
    /// The plan stage (a fan-out child's parent).
    pub(crate) index: usize,
    /// A fan-out child's file-name key (`BATON_ITEM_NAME`).
    pub(crate) item: Option<&'a str>,
}

impl<'a> Place<'a> {
    /// The place of an attempt of the built-in executor.
    pub(crate) fn of(attempt: &'a Attempt) -> Place<'a> {
        Place {
            store: &attempt.store,
            run_id: &attempt.run_id,
            project_dir: &attempt.project_dir,
            workspace: &attempt.workspace,
            plan: &attempt.plan,
            index: attempt.index,
            item: attempt
                .env
                .iter()
                .find(|(name, _)| name == "BATON_ITEM_NAME")
                .map(|(_, value)| value.as_str()),
        }
    }
}
