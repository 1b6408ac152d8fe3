//! `baton runs`: every recorded run with its status, duration, stage
//! counts and cost, filtered by status and start time.

use std::collections::HashMap;

use baton_engine::view::{cost_usd, duration_ms, runs_json, select_runs};
use baton_engine::workspace::utc;
use baton_store::{RunRow, RunTally};

use super::errors::unavailable;
use super::runtime::{block_on_exit, open_store};
use crate::args::RunsArgs;
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
    block_on_exit(async {
        let store = open_store().await?;
        let (all, tallies) = tokio::try_join!(store.runs(), store.run_tallies())
            .map_err(|error| unavailable(&error))?;
        let runs = select_runs(&all, &args.filter(), baton_engine::clock::now_ms());
        let value = runs_json(&runs, &tallies);
        output::print(args.format.format(), &value, || {
            if all.is_empty() {
                output::stderr_line("No runs yet; start one with `baton run WORKFLOW`");
            } else if runs.is_empty() {
                output::stderr_line(&format!(
                    "No run matches; {} recorded in all (`baton runs` lists them)",
                    all.len()
                ));
            }
            table(&runs, &tallies)
        });
        Ok(exit_code::SUCCESS)
    })
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
    let header = [
        "run_id",
        "workflow",
        "status",
        "started_at",
        "duration",
        "stages",
        "cost",
    ];
    output::table_of(&header, runs, |run| {
        let tally = tallies.get(&run.run_id);
        vec![
            run.run_id.clone(),
            run.workflow.clone(),
            run.status.clone(),
            utc(run.created_at),
            duration_ms(run).map_or_else(|| "-".to_owned(), crate::progress::human_ms),
            stages_cell(tally),
            cost_usd(tally).map_or_else(|| "-".to_owned(), baton_engine::view::cost::dollars),
        ]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
