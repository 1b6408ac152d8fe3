//! `baton prune --older-than AGE [--dry-run]`: deletes finished runs that
//! ended before the cutoff, from the store and from the disk (workspace,
//! logs, worktrees, merged branches).
//!
//! What could hold work is kept whole and reported: a run that has not
//! finished, a run whose worktree has uncommitted changes or whose branch
//! is not merged, and a sub-workflow's parent or child of a kept run (a
//! parent without its child would run the child again on resume).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use baton_engine::workspace::utc;
use baton_store::{FINISHED_STATUSES, RunRow, Store};
use serde_json::json;

use super::errors::{chain, unavailable};
use super::runtime::{block_on_exit, open_store};
use crate::args::PruneArgs;
use crate::{exit_code, output};

/// An old run and whether it stays.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Choice {
    run_id: String,
    status: String,
    ended_at: i64,
    workspace: String,
    /// Why it is kept; `None`: it goes.
    kept: Option<String>,
    /// Set once it was deleted, if its workspace could not be.
    leftover: Option<String>,
}

/// `baton prune`.
pub(crate) fn run(args: &PruneArgs) -> u8 {
    block_on_exit(async {
        let store = open_store().await?;
        let runs = store.runs().await.map_err(|error| unavailable(&error))?;
        let now = baton_engine::clock::now_ms();
        let cutoff = args.older_than.at(now);
        let project = super::project_dir();
        let mut choices = select(&runs, cutoff);
        keep_worktrees_with_work(&store, &project, &mut choices).await;
        hold_families(&runs, &mut choices);
        if !args.dry_run
            && let Err(error) = delete(&store, &project, &runs, &mut choices, now).await
        {
            let code = unavailable(&error);
            report(&choices, args, cutoff);
            return Err(code);
        }
        report(&choices, args, cutoff);
        store.close_at_exit().await;
        Ok(exit_code::SUCCESS)
    })
}

/// When a run ended, for the cutoff: its finish, else its start.
fn ended_at(run: &RunRow) -> i64 {
    run.finished_at.unwrap_or(run.created_at)
}

/// Every run that ended (or, unfinished, started) before `cutoff`; the
/// unfinished ones kept.
fn select(runs: &[RunRow], cutoff: i64) -> Vec<Choice> {
    runs.iter()
        .filter(|run| ended_at(run) < cutoff)
        .map(|run| Choice {
            run_id: run.run_id.clone(),
            status: run.status.clone(),
            ended_at: ended_at(run),
            workspace: run.workspace.clone(),
            kept: (!FINISHED_STATUSES.contains(&run.status.as_str()))
                .then(|| format!("it is {}, not finished", run.status)),
            leftover: None,
        })
        .collect()
}

/// Keeps the runs whose worktrees or branches hold work (see
/// `baton worktree prune`), touching nothing.
async fn keep_worktrees_with_work(store: &Store, project: &Path, choices: &mut [Choice]) {
    for choice in choices.iter_mut().filter(|choice| choice.kept.is_none()) {
        match baton_engine::worktrees_kept(store, project, &choice.run_id).await {
            Ok(kept) if kept.is_empty() => {}
            Ok(kept) => {
                let reasons: Vec<String> = kept
                    .iter()
                    .map(|(branch, why)| format!("{branch}: {why}"))
                    .collect();
                choice.kept = Some(format!("its worktrees hold work ({})", reasons.join("; ")));
            }
            // No repository, no worktrees.
            Err(baton_engine::AdminError::NotARepository(_)) => {}
            Err(error) => {
                choice.kept = Some(format!(
                    "its worktrees could not be checked: {}",
                    chain(&error)
                ));
            }
        }
    }
}

/// A child run goes only with its parent, and a parent only with all its
/// children: keeps the rest of a family any member of which is kept.
fn hold_families(runs: &[RunRow], choices: &mut [Choice]) {
    let parents = parents(runs);
    let recorded: HashSet<&str> = runs.iter().map(|run| run.run_id.as_str()).collect();
    loop {
        let going: HashSet<String> = choices
            .iter()
            .filter(|choice| choice.kept.is_none())
            .map(|choice| choice.run_id.clone())
            .collect();
        let mut changed = false;
        for choice in choices.iter_mut().filter(|choice| choice.kept.is_none()) {
            let id = choice.run_id.as_str();
            if let Some(parent) = parents.get(id)
                && recorded.contains(parent.as_str())
                && !going.contains(parent)
            {
                choice.kept = Some(format!("its parent run {parent} is kept"));
                changed = true;
            } else if let Some((child, _)) = parents
                .iter()
                .find(|(child, parent)| parent.as_str() == id && !going.contains(**child))
            {
                choice.kept = Some(format!("its child run {child} is kept"));
                changed = true;
            }
        }
        if !changed {
            return;
        }
    }
}

/// Each sub-run's parent, by the sub-run's id.
fn parents(runs: &[RunRow]) -> HashMap<&str, String> {
    runs.iter()
        .filter_map(|run| {
            baton_engine::view::subruns::parent_of(run)
                .map(|(parent, _)| (run.run_id.as_str(), parent))
        })
        .collect()
}

/// How deep a run sits under other runs (0 for a top-level run).
fn depth(parents: &HashMap<&str, String>, run_id: &str) -> usize {
    let mut depth = 0;
    let mut current = run_id;
    while let Some(parent) = parents.get(current) {
        depth += 1;
        current = parent;
        if depth > parents.len() {
            break;
        }
    }
    depth
}

/// Deletes the runs that go, children first: their worktrees and merged
/// branches, their records, then their workspaces (a run the store refuses
/// to delete, resumed meanwhile, keeps its workspace).
async fn delete(
    store: &Store,
    project: &Path,
    runs: &[RunRow],
    choices: &mut [Choice],
    now: i64,
) -> Result<(), baton_store::Error> {
    let parents = parents(runs);
    let mut order: Vec<usize> = (0..choices.len()).collect();
    order.sort_by_key(|&index| std::cmp::Reverse(depth(&parents, &choices[index].run_id)));
    for index in order {
        let choice = &mut choices[index];
        if choice.kept.is_some() {
            continue;
        }
        match baton_engine::prune_worktrees(store, project, Some(&choice.run_id)).await {
            Ok(pruned) if !pruned.kept.is_empty() => {
                let (branch, why) = &pruned.kept[0];
                choice.kept = Some(format!("its worktrees hold work ({branch}: {why})"));
                continue;
            }
            Ok(_) | Err(baton_engine::AdminError::NotARepository(_)) => {}
            Err(error) => {
                choice.kept = Some(format!(
                    "its worktrees could not be removed: {}",
                    chain(&error)
                ));
                continue;
            }
        }
        if !store.delete_finished_run(&choice.run_id, now).await? {
            choice.kept = Some("it was resumed or taken while pruning".to_owned());
            continue;
        }
        choice.leftover = remove_workspace(Path::new(&choice.workspace), project);
    }
    Ok(())
}

/// Removes a deleted run's workspace (its outputs and logs); says why not
/// when it cannot. A path that holds the project is never removed.
fn remove_workspace(workspace: &Path, project: &Path) -> Option<String> {
    if !workspace.is_absolute() || project.starts_with(workspace) {
        return Some(format!(
            "its workspace {} was left: it holds the project",
            workspace.display()
        ));
    }
    match std::fs::remove_dir_all(workspace) {
        Ok(()) => None,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => Some(format!(
            "its workspace {} could not be removed: {error}",
            workspace.display()
        )),
    }
}

fn report(choices: &[Choice], args: &PruneArgs, cutoff: i64) {
    let going: Vec<&Choice> = choices
        .iter()
        .filter(|choice| choice.kept.is_none())
        .collect();
    let kept: Vec<&Choice> = choices
        .iter()
        .filter(|choice| choice.kept.is_some())
        .collect();
    let verb = if args.dry_run {
        "would prune"
    } else {
        "pruned"
    };
    let value = json!({
        "dry_run": args.dry_run,
        "older_than": utc(cutoff),
        "pruned": going.iter().map(|choice| json!({
            "run_id": choice.run_id,
            "status": choice.status,
            "ended_at": utc(choice.ended_at),
            "workspace": choice.workspace,
            "warning": choice.leftover,
        })).collect::<Vec<_>>(),
        "kept": kept.iter().map(|choice| json!({
            "run_id": choice.run_id,
            "status": choice.status,
            "reason": choice.kept,
        })).collect::<Vec<_>>(),
    });
    output::print(args.format.format(), &value, || {
        let mut text = String::new();
        for choice in &going {
            text.push_str(&format!(
                "{verb} {} ({}, ended {})\n",
                choice.run_id,
                choice.status,
                utc(choice.ended_at)
            ));
            if let Some(warning) = &choice.leftover {
                text.push_str(&format!("  warning: {warning}\n"));
            }
        }
        for choice in &kept {
            text.push_str(&format!(
                "kept {}: {}\n",
                choice.run_id,
                choice.kept.as_deref().unwrap_or_default()
            ));
        }
        text
    });
    output::stderr_line(&format!(
        "{verb} {} run(s) that ended before {}; kept {}{}",
        going.len(),
        utc(cutoff),
        kept.len(),
        if args.dry_run {
            " (dry run: nothing was deleted)"
        } else {
            ""
        }
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: &str, status: &str, finished_at: Option<i64>, parent: Option<&str>) -> RunRow {
        RunRow {
            run_id: id.to_owned(),
            workflow: "w".to_owned(),
            workflow_path: "w.yaml".to_owned(),
            workspace: format!("/ws/{id}"),
            status: status.to_owned(),
            created_at: 10,
            finished_at,
            plan: String::new(),
            params: String::new(),
            sources: String::new(),
            options: parent.map_or_else(
                || "{}".to_owned(),
                |parent| json!({"parent_run": parent, "parent_stage": "s"}).to_string(),
            ),
            error: None,
            lease_owner: None,
            lease_epoch: 0,
            lease_until: 0,
        }
    }

    fn verdicts(runs: &[RunRow], cutoff: i64) -> Vec<(String, bool)> {
        let mut choices = select(runs, cutoff);
        hold_families(runs, &mut choices);
        choices
            .into_iter()
            .map(|choice| (choice.run_id, choice.kept.is_none()))
            .collect()
    }

    #[test]
    fn only_finished_runs_that_ended_before_the_cutoff_go() {
        let runs = [
            run("old-done", "success", Some(50), None),
            run("old-failed", "failed", Some(60), None),
            run("new-done", "success", Some(500), None),
            run("old-gate", "awaiting_human", None, None),
            run("old-running", "running", None, None),
        ];
        let got = verdicts(&runs, 100);
        assert_eq!(
            got,
            [
                ("old-done".to_owned(), true),
                ("old-failed".to_owned(), true),
                ("old-gate".to_owned(), false),
                ("old-running".to_owned(), false),
            ]
        );
    }

    #[test]
    fn a_family_goes_together_or_stays_together() {
        let runs = [
            run("p", "success", Some(50), None),
            run("p-child", "success", Some(40), Some("p")),
            run("q", "awaiting_human", None, None),
            run("q-child", "success", Some(40), Some("q")),
            run("r", "success", Some(50), None),
            run("r-child", "success", Some(500), Some("r")),
        ];
        let got: HashMap<String, bool> = verdicts(&runs, 100).into_iter().collect();
        assert!(got["p"] && got["p-child"]);
        assert!(
            !got["q"] && !got["q-child"],
            "a child of a kept parent stays"
        );
        assert!(!got["r"], "a parent of a child that stays stays");
        assert!(!got.contains_key("r-child"));
    }

    #[test]
    fn a_workspace_holding_the_project_is_never_removed() {
        let project = Path::new("/srv/project");
        assert!(remove_workspace(Path::new("/srv"), project).is_some());
        assert!(remove_workspace(Path::new("/srv/project"), project).is_some());
        assert!(remove_workspace(Path::new("relative/ws"), project).is_some());
        assert_eq!(
            remove_workspace(Path::new("/srv/project/.baton/runs/gone"), project),
            None
        );
    }
}
