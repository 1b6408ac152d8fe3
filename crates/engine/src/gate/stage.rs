//! A gate's stage as the plan recorded with its run describes it.

use baton_store::{RunRow, StageRow};

use super::error::{Error, Result};

/// A gate stage of a run, from the plan recorded with it.
#[derive(Debug, Clone)]
pub(super) struct GateStage {
    pub(super) stage: StageRow,
    pub(super) writes_to: Vec<String>,
    pub(super) human_gate: bool,
}

/// The stage `name` of the run with what its recorded plan says about it.
pub(super) fn find_stage(run: &RunRow, stages: &[StageRow], name: &str) -> Result<GateStage> {
    let stage = stages
        .iter()
        .find(|stage| stage.name == name)
        .ok_or_else(|| Error::NoSuchStage {
            run_id: run.run_id.clone(),
            stage: name.to_owned(),
        })?;
    Ok(gate_stage(&recorded_plan(run), stage))
}

/// The plan recorded with `run`, parsed; read once for all of its stages,
/// since a large run's plan is slow to parse once per stage.
pub(super) fn recorded_plan(run: &RunRow) -> serde_json::Value {
    serde_json::from_str(&run.plan).unwrap_or_default()
}

/// Whether the recorded plan makes `stage` a human gate.
pub(super) fn is_gate(plan: &serde_json::Value, stage: &StageRow) -> bool {
    plan["stage_details"][stage.name.as_str()]["human_gate"]
        .as_bool()
        .unwrap_or(false)
}

pub(super) fn gate_stage(plan: &serde_json::Value, stage: &StageRow) -> GateStage {
    let detail = &plan["stage_details"][stage.name.as_str()];
    GateStage {
        stage: stage.clone(),
        writes_to: detail["writes_to"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|path| path.as_str().map(str::to_owned))
            .collect(),
        human_gate: detail["human_gate"].as_bool().unwrap_or(false),
    }
}
