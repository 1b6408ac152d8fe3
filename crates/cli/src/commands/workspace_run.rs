//! A run named by its workspace directory: every command that takes a run
//! takes the path `baton status` shows (or one inside it) as well as the
//! run id (see `run_ref`).

use std::path::{Path, PathBuf};

use baton_store::Store;

use super::errors::unavailable;
use crate::output;

/// The run id `reference` names: itself when a run has that id; else the
/// run whose workspace is that directory or holds it (the deepest one, so
/// a path inside a sub-run's workspace names the sub-run). A reference
/// that is neither a run id nor a path is returned as it is, for the
/// command's own "no such run" error.
///
/// # Errors
///
/// After saying why on stderr, the exit code: `no_such_run` (the
/// command's code for an unknown run) for a path that is no run's
/// workspace, [`exit_code::STORE_UNAVAILABLE`] when the store fails.
pub(crate) async fn resolve(store: &Store, reference: &str, no_such_run: u8) -> Result<String, u8> {
    match store.run(reference).await {
        Ok(_) => return Ok(reference.to_owned()),
        Err(baton_store::Error::NoSuchRun(_)) => {}
        Err(error) => return Err(unavailable(&error)),
    }
    if !looks_like_a_path(reference) {
        return Ok(reference.to_owned());
    }
    let path = Path::new(reference);
    let Ok(directory) = path.canonicalize() else {
        output::stderr_line(&format!(
            "error: no run has the id '{reference}', and there is no directory {reference}"
        ));
        output::stderr_line(
            "hint: `baton runs` lists the recorded runs; `baton status RUN` shows a run's workspace",
        );
        return Err(no_such_run);
    };
    let runs = store.runs().await.map_err(|error| unavailable(&error))?;
    let owner = runs
        .iter()
        .filter_map(|run| {
            let workspace = canonical(Path::new(&run.workspace))?;
            directory
                .starts_with(&workspace)
                .then(|| (workspace.components().count(), &run.run_id))
        })
        .max_by_key(|(depth, _)| *depth);
    match owner {
        Some((_, run_id)) => Ok(run_id.clone()),
        None => {
            output::stderr_line(&format!(
                "error: {} is not the workspace of any run in this store",
                directory.display()
            ));
            output::stderr_line(
                "hint: pass the run id or the workspace `baton status RUN` shows (`baton runs` lists the runs); a run recorded in another store needs BATON_DATABASE_URL set to that store",
            );
            Err(no_such_run)
        }
    }
}

/// A run id never holds a path separator; a path may also be a bare name
/// of a directory here.
pub(crate) fn looks_like_a_path(reference: &str) -> bool {
    reference.contains(std::path::MAIN_SEPARATOR) || Path::new(reference).exists()
}

/// The directory with symbolic links resolved; `None` when it is gone.
fn canonical(path: &Path) -> Option<PathBuf> {
    path.canonicalize().ok()
}
