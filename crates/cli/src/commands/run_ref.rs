//! Run references: what every command that takes a run accepts. A whole
//! run id; `latest`, the run created last (a sub-workflow's child run is
//! never it: it is reached through its parent); or the start of one run's
//! id, as long as no other run's id starts the same way; or the run's
//! workspace directory (the path `baton status` shows, or one inside it).

use std::path::Path;

use baton_store::{RunRow, Store};

use super::errors::unavailable;
use super::runtime::open_store;
use crate::{exit_code, output};

/// The reference that names the run created last.
pub(crate) const LATEST: &str = "latest";

/// Candidates an ambiguous prefix error lists, at most.
const CANDIDATES_SHOWN: usize = 10;

/// Opens the store and resolves `reference` in it: what the commands that
/// take one run start with.
pub(crate) async fn open_with_run(reference: &str) -> Result<(Store, String), u8> {
    let store = open_store().await?;
    let run_id = resolve(&store, reference).await?;
    Ok((store, run_id))
}

/// The id of the run `reference` names, or the exit code after saying why
/// none (or more than one) is.
pub(crate) async fn resolve(store: &Store, reference: &str) -> Result<String, u8> {
    match store.run(reference).await {
        Ok(run) => return Ok(run.run_id),
        Err(baton_store::Error::NoSuchRun(_)) => {}
        Err(error) => return Err(unavailable(&error)),
    }
    let runs = store.runs().await.map_err(|error| unavailable(&error))?;
    match pick(&runs, reference) {
        Ok(run_id) => Ok(run_id),
        // Not an id, a prefix or `latest`: maybe the run's workspace.
        Err(_) if looks_like_a_path(reference) => workspace_owner(&runs, reference),
        Err(why) => {
            output::stderr_line(&format!("error: {why}"));
            output::stderr_line("hint: `baton runs` lists the recorded runs");
            Err(exit_code::INVALID_WORKFLOW)
        }
    }
}

/// The run `reference` names among `runs` (oldest first), which hold no
/// run with exactly that id.
fn pick(runs: &[RunRow], reference: &str) -> Result<String, String> {
    if reference == LATEST {
        return runs
            .iter()
            .filter(|run| baton_engine::view::subruns::parent_of(run).is_none())
            .max_by(|a, b| (a.created_at, &a.run_id).cmp(&(b.created_at, &b.run_id)))
            .map(|run| run.run_id.clone())
            .ok_or_else(|| "there is no run yet, so none is `latest`".to_owned());
    }
    if reference.is_empty() {
        return Err("the run id is empty".to_owned());
    }
    let matching: Vec<&RunRow> = runs
        .iter()
        .filter(|run| run.run_id.starts_with(reference))
        .collect();
    match matching.as_slice() {
        [] => Err(format!(
            "no run with id {reference}, nor one whose id starts with it"
        )),
        [one] => Ok(one.run_id.clone()),
        many => {
            let mut text = format!(
                "'{reference}' is the start of {} run ids; give more of the id:",
                many.len()
            );
            for run in many.iter().rev().take(CANDIDATES_SHOWN) {
                text.push_str(&format!("\n  {} ({})", run.run_id, run.status));
            }
            if many.len() > CANDIDATES_SHOWN {
                text.push_str(&format!("\n  … and {} more", many.len() - CANDIDATES_SHOWN));
            }
            Err(text)
        }
    }
}

/// A run id never holds a path separator; a path may also be a bare name
/// of a directory here.
fn looks_like_a_path(reference: &str) -> bool {
    reference.contains(std::path::MAIN_SEPARATOR) || Path::new(reference).exists()
}

/// The run whose workspace is the directory `reference` or holds it (the
/// deepest one, so a path inside a sub-run's workspace names the sub-run),
/// or the exit code after saying why none is.
fn workspace_owner(runs: &[RunRow], reference: &str) -> Result<String, u8> {
    let Ok(directory) = Path::new(reference).canonicalize() else {
        output::stderr_line(&format!(
            "error: no run has the id '{reference}', and there is no directory {reference}"
        ));
        output::stderr_line(
            "hint: `baton runs` lists the recorded runs; `baton status RUN` shows a run's workspace",
        );
        return Err(exit_code::INVALID_WORKFLOW);
    };
    let owner = runs
        .iter()
        .filter_map(|run| {
            let workspace = Path::new(&run.workspace).canonicalize().ok()?;
            directory
                .starts_with(&workspace)
                .then(|| (workspace.components().count(), &run.run_id))
        })
        .max_by_key(|(depth, _)| *depth);
    if let Some((_, run_id)) = owner {
        return Ok(run_id.clone());
    }
    output::stderr_line(&format!(
        "error: {} is not the workspace of any run in this store",
        directory.display()
    ));
    output::stderr_line(
        "hint: pass the run id or the workspace `baton status RUN` shows (`baton runs` lists the runs); a run recorded in another store needs BATON_DATABASE_URL set to that store",
    );
    Err(exit_code::INVALID_WORKFLOW)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: &str, created_at: i64, options: &str) -> RunRow {
        RunRow {
            run_id: id.to_owned(),
            workflow: "w".to_owned(),
            workflow_path: "w.yaml".to_owned(),
            workspace: String::new(),
            status: "success".to_owned(),
            created_at,
            finished_at: None,
            plan: String::new(),
            params: String::new(),
            sources: String::new(),
            options: options.to_owned(),
            error: None,
            lease_owner: None,
            lease_epoch: 0,
            lease_until: 0,
        }
    }

    #[test]
    fn latest_is_the_newest_run_that_is_not_a_child() {
        let runs = [
            run("a-1", 1, "{}"),
            run("b-2", 2, "{}"),
            run("b-2-sub", 3, r#"{"parent_run": "b-2"}"#),
        ];
        assert_eq!(pick(&runs, LATEST), Ok("b-2".to_owned()));
        assert!(pick(&[], LATEST).unwrap_err().contains("no run yet"));
    }

    #[test]
    fn a_prefix_names_one_run_or_lists_the_candidates() {
        let runs = [run("deploy-1", 1, "{}"), run("deploy-2", 2, "{}")];
        assert_eq!(pick(&runs, "deploy-2"), Ok("deploy-2".to_owned()));
        let ambiguous = pick(&runs, "dep").unwrap_err();
        assert!(ambiguous.contains("deploy-1") && ambiguous.contains("deploy-2"));
        assert!(pick(&runs, "x").unwrap_err().contains("no run with id x,"));
        assert!(pick(&runs, "").is_err());
    }
}
