//! What the store recorded of runs, in the shapes baton shows them:
//! `baton runs --format json` and `baton status RUN --format json` print
//! them, and `baton serve` answers with the very same values.
//!
//! Reads only. Costs, retries, sub-runs, units and findings are detail: a
//! failure to read them leaves them out rather than failing the view.

pub mod cost;
pub mod gates;
pub mod logs;
pub mod queue;
pub mod retries;
mod status;
pub mod subruns;
pub mod tasks;
mod work;

use std::collections::HashMap;

use baton_store::{GateDecisionRow, RunRow, RunTally};
use serde_json::{Value, json};

pub use status::Status;
pub use work::Work;

use crate::workspace::utc;

/// How long a finished run took, in ms.
pub fn duration_ms(run: &RunRow) -> Option<i64> {
    run.finished_at
        .map(|end| end.saturating_sub(run.created_at).max(0))
}

/// A run's total cost in dollars, when any was recorded.
pub fn cost_usd(tally: Option<&RunTally>) -> Option<f64> {
    #[expect(clippy::cast_precision_loss, reason = "micro-dollars of real spending")]
    tally
        .and_then(|tally| tally.cost_microusd)
        .map(|micro| micro as f64 / 1_000_000.0)
}

/// `[{run_id, workflow, status, started_at, finished_at, duration_ms,
/// stages: {total, <status>: n}, cost_usd, parent}]`, in the order given.
pub fn runs_json(runs: &[&RunRow], tallies: &HashMap<String, RunTally>) -> Vec<Value> {
    runs.iter()
        .map(|run| {
            let tally = tallies.get(&run.run_id);
            let mut stages = json!({"total": 0});
            if let Some(tally) = tally {
                stages["total"] = json!(tally.stages.values().sum::<i64>());
                for (status, count) in &tally.stages {
                    stages[status] = json!(count);
                }
            }
            json!({
                "run_id": run.run_id,
                "workflow": run.workflow,
                "status": run.status,
                "started_at": utc(run.created_at),
                "finished_at": run.finished_at.map(utc),
                "duration_ms": duration_ms(run),
                "stages": stages,
                "cost_usd": cost_usd(tally),
                "parent": subruns::parent_of(run).map(|(parent, _)| parent),
            })
        })
        .collect()
}

/// A gate decision as recorded: `{run_id, stage, decision, decided_by,
/// decided_at, comment, attempt, sha256}`.
pub fn decision_json(run_id: &str, stage: &str, row: &GateDecisionRow) -> Value {
    json!({
        "run_id": run_id,
        "stage": stage,
        "decision": row.decision,
        "decided_by": row.decided_by,
        "decided_at": utc(row.decided_at),
        "comment": row.comment,
        "attempt": row.attempt,
        "sha256": row.sha256,
    })
}

/// A run's validation findings, every cycle's, each with its stage's
/// name; only `stage`'s when one is named.
pub fn findings_json(
    stages: &[baton_store::StageRow],
    findings: &[baton_store::FindingRow],
    stage: Option<&str>,
) -> Vec<Value> {
    findings
        .iter()
        .filter_map(|finding| {
            let name = stages
                .iter()
                .find(|row| row.index == finding.index)
                .map(|row| row.name.as_str())?;
            if stage.is_some_and(|wanted| wanted != name) {
                return None;
            }
            Some(json!({
                "stage": name,
                "cycle": finding.cycle,
                "id": finding.id,
                "status": finding.status,
                "severity": finding.severity,
                "category": finding.category,
                "claim": finding.claim,
                "expected": finding.expected,
                "actual": finding.actual,
                "source": finding.source,
                "fix": finding.fix,
            }))
        })
        .collect()
}
