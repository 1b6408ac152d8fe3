//! `baton runs`: every recorded run with its status, duration, stage
//! counts and cost, filtered by status and start time.

use std::collections::HashMap;

use baton_engine::workspace::utc;
use baton_store::{RunRow, RunTally};
use serde_json::{Value, json};

use super::errors::chain;
use super::runtime::{block_on, open_store};
use crate::args::{Format, RunsArgs};
use crate::{exit_code, output};

/// Stage statuses in the order the table names them; others follow.
const STAGE_ORDER: [&str; 6] = [
    "success",
    "failed",
    "running",
    "awaiting_human",
    "pending",
    "skipped",
];

/// `baton runs`: `[{run_id, workflow, status, started_at, finished_at,
/// duration_ms, stages: {total, <status>: n}, cost_usd, parent}]`, oldest first.
pub(crate) fn run(args: &RunsArgs) -> u8 {
    block_on(async {
        let store = match open_store().await {
            Ok(store) => store,
            Err(code) => return code,
        };
        let read = tokio::try_join!(store.runs(), store.run_tallies());
        let (all, tallies) = match read {
            Ok(read) => read,
            Err(error) => {
                output::stderr_line(&format!("error: {}", chain(&error)));
                return exit_code::STORE_UNAVAILABLE;
            }
        };
        let runs = selected(&all, args, baton_engine::clock::now_ms());
        let text = match args.format.format() {
            Format::Json => output::json(&rows_json(&runs, &tallies)),
            Format::Yaml => output::yaml(&rows_json(&runs, &tallies)),
            Format::Table => {
                if all.is_empty() {
                    output::stderr_line("No runs yet; start one with `baton run WORKFLOW`");
                } else if runs.is_empty() {
                    output::stderr_line(&format!(
                        "No run matches; {} recorded in all (`baton runs` lists them)",
                        all.len()
                    ));
                }
                table(&runs, &tallies)
            }
        };
        output::stdout(&text);
        exit_code::SUCCESS
    })
}

/// The runs the filters keep, oldest first: the most recent `--limit` of
/// those with the `--status` that started at or after `--since`.
fn selected<'a>(runs: &'a [RunRow], args: &RunsArgs, now_ms: i64) -> Vec<&'a RunRow> {
    let since = args.since.map(|cutoff| cutoff.at(now_ms));
    let kept: Vec<&RunRow> = runs
        .iter()
        .filter(|run| {
            args.status
                .as_ref()
                .is_none_or(|status| &run.status == status)
        })
        .filter(|run| since.is_none_or(|since| run.created_at >= since))
        .collect();
    let skip = args
        .limit
        .map_or(0, |limit| kept.len().saturating_sub(limit));
    kept.into_iter().skip(skip).collect()
}

fn duration_ms(run: &RunRow) -> Option<i64> {
    run.finished_at
        .map(|end| end.saturating_sub(run.created_at).max(0))
}

fn cost_usd(tally: Option<&RunTally>) -> Option<f64> {
    #[expect(clippy::cast_precision_loss, reason = "micro-dollars of real spending")]
    tally
        .and_then(|tally| tally.cost_microusd)
        .map(|micro| micro as f64 / 1_000_000.0)
}

fn rows_json(runs: &[&RunRow], tallies: &HashMap<String, RunTally>) -> Vec<Value> {
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
                "parent": super::subruns::parent_of(run).map(|(parent, _)| parent),
            })
        })
        .collect()
}

/// `3 success, 1 failed, 2 pending`.
fn stages_cell(tally: Option<&RunTally>) -> String {
    let Some(tally) = tally else {
        return "-".to_owned();
    };
    let ordered = STAGE_ORDER
        .iter()
        .filter_map(|status| tally.stages.get_key_value(*status));
    let others = tally
        .stages
        .iter()
        .filter(|(status, _)| !STAGE_ORDER.contains(&status.as_str()));
    ordered
        .chain(others)
        .map(|(status, count)| format!("{count} {status}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn table(runs: &[&RunRow], tallies: &HashMap<String, RunTally>) -> String {
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|run| {
            let tally = tallies.get(&run.run_id);
            vec![
                run.run_id.clone(),
                run.workflow.clone(),
                run.status.clone(),
                utc(run.created_at),
                duration_ms(run).map_or_else(
                    || "-".to_owned(),
                    |ms| {
                        crate::progress::human(std::time::Duration::from_millis(
                            u64::try_from(ms).unwrap_or(0),
                        ))
                    },
                ),
                stages_cell(tally),
                cost_usd(tally).map_or_else(|| "-".to_owned(), super::cost::dollars),
            ]
        })
        .collect();
    output::table(
        &[
            "run_id",
            "workflow",
            "status",
            "started_at",
            "duration",
            "stages",
            "cost",
        ],
        &rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cutoff::Cutoff;

    fn run(id: &str, status: &str, created_at: i64) -> RunRow {
        RunRow {
            run_id: id.to_owned(),
            workflow: "w".to_owned(),
            workflow_path: "w.yaml".to_owned(),
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

    fn args(status: Option<&str>, limit: Option<usize>, since: Option<Cutoff>) -> RunsArgs {
        RunsArgs {
            status: status.map(str::to_owned),
            limit,
            since,
            format: crate::args::FormatArgs {
                format: Format::Table,
                json: false,
            },
        }
    }

    #[test]
    fn filters_keep_the_most_recent_matching_runs_oldest_first() {
        let runs = [
            run("a", "failed", 1_000),
            run("b", "success", 2_000),
            run("c", "failed", 3_000),
            run("d", "failed", 4_000),
        ];
        let ids = |kept: Vec<&RunRow>| {
            kept.iter()
                .map(|run| run.run_id.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            ids(selected(&runs, &args(Some("failed"), Some(2), None), 5_000)),
            ["c", "d"]
        );
        assert_eq!(
            ids(selected(
                &runs,
                &args(None, None, Some(Cutoff::Ago(2_500))),
                5_000
            )),
            ["c", "d"]
        );
        assert_eq!(
            ids(selected(
                &runs,
                &args(None, None, Some(Cutoff::At(2_000))),
                5_000
            )),
            ["b", "c", "d"]
        );
        assert_eq!(
            ids(selected(&runs, &args(None, Some(0), None), 5_000)),
            Vec::<String>::new()
        );
    }

    #[test]
    fn the_stages_cell_names_statuses_in_a_fixed_order() {
        let mut tally = RunTally::default();
        for (status, count) in [("pending", 2), ("failed", 1), ("success", 3), ("weird", 1)] {
            tally.stages.insert(status.to_owned(), count);
        }
        assert_eq!(
            stages_cell(Some(&tally)),
            "3 success, 1 failed, 2 pending, 1 weird"
        );
        assert_eq!(stages_cell(None), "-");
    }
}
