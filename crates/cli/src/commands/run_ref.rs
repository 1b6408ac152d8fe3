//! Run references: what every command that takes a run accepts. A whole
//! run id; `latest`, the run created last (a sub-workflow's child run is
//! never it: it is reached through its parent); or the start of one run's
//! id, as long as no other run's id starts the same way.

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
        Err(_) if super::workspace_run::looks_like_a_path(reference) => {
            super::workspace_run::resolve(store, reference, exit_code::INVALID_WORKFLOW).await
        }
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
