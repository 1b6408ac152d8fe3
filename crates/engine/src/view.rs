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

use crate::cutoff::Cutoff;
use crate::workspace::utc;

/// How long a finished run took, in ms.
pub fn duration_ms(run: &RunRow) -> Option<i64> {
    run.finished_at
        .map(|end| end.saturating_sub(run.created_at).max(0))
}

/// A run's total cost in dollars, when any was recorded.
pub fn cost_usd(tally: Option<&RunTally>) -> Option<f64> {
    cost::usd(tally.and_then(|tally| tally.cost_microusd))
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

/// The statuses a run can have, in the order a filter offers them.
pub const RUN_STATUSES: [&str; 7] = [
    "pending",
    "running",
    "awaiting_human",
    "success",
    "failed",
    "cancelled",
    "rejected",
];

/// Which runs a list keeps: `baton runs`'s flags, `GET /api/runs`'s
/// query and the runs page's form.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFilter {
    /// Only runs with this status.
    pub status: Option<String>,
    /// Only runs of the workflow with this name.
    pub workflow: Option<String>,
    /// Only runs started at or after this point.
    pub since: Option<Cutoff>,
    /// Only the most recent this many of those the other filters keep.
    pub limit: Option<usize>,
}

/// The runs `filter` keeps, oldest first, as `runs` holds them.
pub fn select_runs<'a>(runs: &'a [RunRow], filter: &RunFilter, now_ms: i64) -> Vec<&'a RunRow> {
    let since = filter.since.map(|cutoff| cutoff.at(now_ms));
    let kept: Vec<&RunRow> = runs
        .iter()
        .filter(|run| {
            filter
                .status
                .as_ref()
                .is_none_or(|status| &run.status == status)
        })
        .filter(|run| {
            filter
                .workflow
                .as_ref()
                .is_none_or(|name| &run.workflow == name)
        })
        .filter(|run| since.is_none_or(|since| run.created_at >= since))
        .collect();
    let skip = filter
        .limit
        .map_or(0, |limit| kept.len().saturating_sub(limit));
    kept.into_iter().skip(skip).collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: &str, workflow: &str, status: &str, created_at: i64) -> RunRow {
        RunRow {
            run_id: id.to_owned(),
            workflow: workflow.to_owned(),
            workflow_path: format!("{workflow}.yaml"),
            workspace: String::new(),
            status: status.to_owned(),
            created_at,
            finished_at: None,
            plan: String::new(),
            params: String::new(),
            sources: String::new(),
            options: String::new(),
            error: None,
            lease_owner: None,
            lease_epoch: 0,
            lease_until: 0,
        }
    }

    fn ids(runs: &[RunRow], filter: RunFilter) -> Vec<&str> {
        select_runs(runs, &filter, 5_000)
            .iter()
            .map(|run| run.run_id.as_str())
            .collect()
    }

    #[test]
    fn filters_keep_the_most_recent_matching_runs_oldest_first() {
        let runs = [
            run("a", "w", "failed", 1_000),
            run("b", "w", "success", 2_000),
            run("c", "v", "failed", 3_000),
            run("d", "w", "failed", 4_000),
        ];
        let status = |text: &str| Some(text.to_owned());
        let filter = RunFilter::default;
        assert_eq!(ids(&runs, filter()), ["a", "b", "c", "d"]);
        let failed = RunFilter {
            status: status("failed"),
            limit: Some(2),
            ..filter()
        };
        assert_eq!(ids(&runs, failed), ["c", "d"]);
        let recent = RunFilter {
            since: Some(Cutoff::Ago(2_500)),
            ..filter()
        };
        assert_eq!(ids(&runs, recent), ["c", "d"]);
        let from = RunFilter {
            since: Some(Cutoff::At(2_000)),
            ..filter()
        };
        assert_eq!(ids(&runs, from), ["b", "c", "d"]);
        let of_w = RunFilter {
            workflow: status("w"),
            status: status("failed"),
            ..filter()
        };
        assert_eq!(ids(&runs, of_w), ["a", "d"]);
        assert!(
            ids(
                &runs,
                RunFilter {
                    limit: Some(0),
                    ..filter()
                }
            )
            .is_empty()
        );
        assert!(
            ids(
                &runs,
                RunFilter {
                    workflow: status("x"),
                    ..filter()
                }
            )
            .is_empty()
        );
    }
}
