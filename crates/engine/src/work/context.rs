//! What a composite stage's program works with: the context it sees, the
//! step it answers, the stage a unit runs, and the names of units.

use std::path::Path;

use baton_store::{NewUnit, Transition, UnitRow};
use baton_workflow::Plan;
use baton_workflow::plan::PlanStage;

use crate::attempt::Continuation;

/// Unit kinds of the primary work.
pub(crate) const MAIN: &str = "main";
/// A fan-out child.
pub(crate) const ITEM: &str = "item";

/// What a stage's program sees.
pub(crate) struct Context<'a> {
    /// The run's plan.
    pub(crate) plan: &'a Plan,
    /// The stage.
    pub(crate) stage: &'a PlanStage,
    /// The run's workspace.
    pub(crate) workspace: &'a Path,
    /// Time (ms), for transitions.
    pub(crate) now: i64,
}

/// What to do once every unit of a stage has finished.
#[derive(Debug)]
pub(crate) enum Step {
    /// Plan these units and run them (after recording `record`).
    Next {
        units: Vec<NewUnit>,
        record: Vec<Transition>,
    },
    /// The stage succeeded.
    Done { record: Vec<Transition> },
    /// The stage failed.
    Fail {
        error: String,
        record: Vec<Transition>,
    },
}

/// (path, sha256, bytes) of the workspace-relative `paths` that can be read.
pub(crate) fn hashed(
    workspace: &Path,
    paths: impl IntoIterator<Item = String>,
) -> Vec<(String, String, i64)> {
    paths
        .into_iter()
        .filter_map(|path| {
            let bytes = std::fs::read(workspace.join(&path)).ok()?;
            Some(crate::digest::artifact(path, &bytes))
        })
        .collect()
}

/// What runs for one unit.
#[derive(Debug, Clone)]
pub(crate) struct Materialized {
    /// The stage to run (its own name, outputs and description).
    pub(crate) stage: PlanStage,
    /// Values for the script's `{placeholders}`, shell-quoted when
    /// substituted, besides the run's parameters.
    pub(crate) values: Vec<(String, String)>,
    /// Environment variables for its process, besides baton's usual ones.
    pub(crate) env: Vec<(String, String)>,
    /// Its `validates_output` checks are judged by the stage's program.
    pub(crate) defer_checks: bool,
    /// The agent session it may continue instead of starting a new one.
    pub(crate) continues: Option<Continuation>,
}

/// The name a unit runs under, which names its files (`NNN-<name>.json`
/// result and dispatch files, `logs/NNN-<name>/`): the stage's name and the
/// fan-out item's file-name form, or the unit's key with `:` as `-`.
pub fn unit_stage_name(stage: &str, unit: &UnitRow) -> String {
    match unit.kind.as_str() {
        MAIN => stage.to_owned(),
        ITEM => {
            let name = serde_json::from_str::<serde_json::Value>(&unit.spec)
                .ok()
                .and_then(|spec| spec.get("name")?.as_str().map(str::to_owned))
                .unwrap_or_else(|| unit.key.clone());
            format!("{stage}-{name}")
        }
        _ => format!("{stage}-{}", unit.key.replace(':', "-")),
    }
}
