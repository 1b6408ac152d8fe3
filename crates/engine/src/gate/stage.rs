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

/// The gate stage `name` of the run with what its recorded plan says
/// about it; an error when there is no such stage or it is not a gate.
pub(super) fn find_gate(run: &RunRow, stages: &[StageRow], name: &str) -> Result<GateStage> {
    let stage = stages
        .iter()
        .find(|stage| stage.name == name)
        .ok_or_else(|| Error::NoSuchStage {
            run_id: run.run_id.clone(),
            stage: name.to_owned(),
        })?;
    let gate = gate_stage(&recorded_plan(run), stage);
    if !gate.human_gate {
        return Err(Error::NotAGate {
            stage: name.to_owned(),
        });
    }
    Ok(gate)
}

impl GateStage {
    /// The gate, if its stage has succeeded: only then is there something
    /// to decide on or edit.
    pub(super) fn succeeded(self) -> Result<GateStage> {
        if self.stage.status != "success" {
            return Err(Error::NotReady {
                stage: self.stage.name,
                status: self.stage.status,
            });
        }
        Ok(self)
    }
}

/// The plan recorded with `run`, parsed; read once for all of its stages,
/// since a large run's plan is slow to parse once per stage.
pub(super) fn recorded_plan(run: &RunRow) -> serde_json::Value {
    serde_json::from_str(&run.plan).unwrap_or_default()
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
