//! A gate's stage as the plan recorded with its run describes it.

use std::collections::HashMap;

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

/// What the plan recorded with `run` says of its stages as gates: read
/// once for all of its stages, and only these fields (a large run's plan
/// is slow to parse whole, and a run's status reads it at every poll).
pub(super) fn recorded_plan(run: &RunRow) -> RecordedPlan {
    serde_json::from_str(&run.plan).unwrap_or_default()
}

/// The fields of a recorded plan a gate needs.
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct RecordedPlan {
    #[serde(default)]
    stage_details: HashMap<String, Detail>,
}

#[derive(Debug, Default, serde::Deserialize)]
struct Detail {
    #[serde(default)]
    human_gate: bool,
    #[serde(default)]
    writes_to: Vec<String>,
}

/// Whether the recorded plan makes `stage` a human gate.
pub(super) fn is_gate(plan: &RecordedPlan, stage: &StageRow) -> bool {
    plan.stage_details
        .get(&stage.name)
        .is_some_and(|detail| detail.human_gate)
}

pub(super) fn gate_stage(plan: &RecordedPlan, stage: &StageRow) -> GateStage {
    let detail = plan.stage_details.get(&stage.name);
    GateStage {
        stage: stage.clone(),
        writes_to: detail
            .map(|detail| detail.writes_to.clone())
            .unwrap_or_default(),
        human_gate: detail.is_some_and(|detail| detail.human_gate),
    }
}
