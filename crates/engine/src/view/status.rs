//! A run's status: its stages, gates, units, findings, costs and retries,
//! read once and shown as JSON here (the table is the CLI's).

use baton_store::{RunRow, StageRow, Store};
use serde_json::{Value, json};

use super::cost::Costs;
use super::retries::Retries;
use super::subruns::SubRuns;
use super::work::Work;
use crate::gate::GateStatus;
use crate::workspace::utc;

/// Everything `baton status` shows of a run.
#[derive(Debug)]
pub struct Status {
    /// The run.
    pub run: RunRow,
    /// Its stages, by index.
    pub stages: Vec<StageRow>,
    /// Its gates, waiting or decided.
    pub gates: Vec<GateStatus>,
    /// Its units and validation findings.
    pub work: Work,
    /// Recorded as running with no process driving it.
    pub driver_gone: bool,
    /// Every child run in the store.
    pub subruns: SubRuns,
    /// Its usage, its sub-runs' rolled up.
    pub costs: Costs,
    /// Its agents' retries.
    pub retries: Retries,
}

impl Status {
    /// Reads a run's status.
    ///
    /// # Errors
    ///
    /// The run is unknown, or its row or stages cannot be read.
    pub async fn read(store: &Store, run_id: &str) -> baton_store::Result<Status> {
        let (run, stages) = tokio::try_join!(store.run(run_id), store.stages(run_id))?;
        // Gate decisions, units and findings are extra detail: a failure to
        // read them hides them.
        let gates = crate::gate::of_run(store, &run, &stages)
            .await
            .unwrap_or_default();
        let work = Work::read(store, run_id).await;
        let driver_gone = crate::driver_gone(store, run_id).await.unwrap_or(false);
        let subruns = SubRuns::read(store).await;
        let costs = Costs::read(store, run_id, &stages, &subruns).await;
        let retries = Retries::read(store, run_id).await;
        Ok(Status {
            run,
            stages,
            gates,
            work,
            driver_gone,
            subruns,
            costs,
            retries,
        })
    }

    /// `{gates, run_id, workflow, status, workspace, started_at,
    /// finished_at, error, driver_gone, stages: [{index, stage, status,
    /// duration_ms, attempts, error, note, …}], cost_usd, tokens}`.
    pub fn json(&self) -> Value {
        let run = &self.run;
        let gates = self.gates.iter().map(|gate| {
            let decision = gate.decision.as_ref();
            json!({
                "stage": gate.stage,
                "status": gate.state.as_str(),
                "decided_by": decision.map(|row| row.decided_by.clone()),
                "decided_at": decision.map(|row| utc(row.decided_at)),
                "comment": decision.and_then(|row| row.comment.clone()),
            })
        });
        let stages = self.stages.iter().map(|stage| {
            let mut entry = json!({
                "index": stage.index,
                "stage": stage.name,
                "status": stage.status,
                "duration_ms": stage.duration_ms(),
                "attempts": stage.attempts,
                "error": stage.error,
                "note": stage.note,
            });
            self.work.describe_json(stage.index, &mut entry);
            self.costs.describe_json(Some(stage.index), &mut entry);
            self.retries.describe_json(stage, &mut entry);
            self.subruns
                .describe_json(&run.run_id, &stage.name, &mut entry);
            entry
        });
        // The lists go in after: `json!` would copy every entry built above
        // once more, and the watcher of a followed run builds this object
        // several times a second. The placeholders keep the fields' order.
        let mut value = json!({
            "gates": null,
            "run_id": run.run_id,
            "workflow": run.workflow,
            "status": run.status,
            "workspace": run.workspace,
            "started_at": utc(run.created_at),
            "finished_at": run.finished_at.map(utc),
            "error": run.error,
            "driver_gone": self.driver_gone,
            "stages": null,
        });
        value["gates"] = Value::Array(gates.collect());
        value["stages"] = Value::Array(stages.collect());
        self.costs.describe_json(None, &mut value);
        value
    }
}
