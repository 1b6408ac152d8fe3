//! `baton worktree list|prune`: the branches and worktrees isolated stages
//! left, and their removal once a run is over.
//!
//! Pruning never loses work: a worktree with uncommitted changes and a
//! branch the target does not contain are kept and reported.

use std::path::{Path, PathBuf};

use baton_executor::git;
use baton_store::Store;

use super::{WithGit, worktrees_dir};

/// Why listing or pruning failed.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] baton_store::Error),
    /// The directory is not in a git repository.
    #[error("{} is not in a git repository", .0.display())]
    NotARepository(PathBuf),
    /// A git command failed.
    #[error(transparent)]
    Git(#[from] git::GitError),
    /// The repository's lock could not be taken.
    #[error("{0}")]
    Lock(String),
}

/// One branch an isolated stage made.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WorktreeEntry {
    /// The run.
    pub run_id: String,
    /// `baton/<run>/<stage>[/<key>]`.
    pub branch: String,
    /// Its worktree, when one still exists.
    pub worktree: Option<PathBuf>,
    /// The branch the run merges into, when the run is recorded.
    pub target: Option<String>,
    /// Whether the target contains the branch's tip.
    pub merged: bool,
    /// The run's status, when the run is recorded.
    pub run_status: Option<String>,
}

/// What `prune` did.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Pruned {
    /// Worktrees removed.
    pub removed_worktrees: Vec<PathBuf>,
    /// Branches deleted (merged ones only).
    pub deleted_branches: Vec<String>,
    /// What was kept, and why.
    pub kept: Vec<(String, String)>,
}

/// The `baton/…` branches of the repository at `project_dir` (of one run,
/// or all), with their worktrees and whether they are merged.
///
/// # Errors
///
/// Not a repository, git or the store failing.
pub async fn list_worktrees(
    store: &Store,
    project_dir: &Path,
    run: Option<&str>,
) -> Result<Vec<WorktreeEntry>, AdminError> {
    let repository = git::top_level(project_dir)
        .await
        .ok_or_else(|| AdminError::NotARepository(project_dir.to_path_buf()))?;
    let prefix = match run {
        Some(run) => format!("refs/heads/baton/{run}/"),
        None => "refs/heads/baton/".to_owned(),
    };
    let refs = git::run(
        &repository,
        ["for-each-ref", "--format=%(refname)", prefix.as_str()],
    )
    .await?;
    let worktrees = worktree_branches(&repository).await?;
    let mut entries = Vec::new();
    for reference in refs.lines() {
        let branch = reference.trim_start_matches("refs/heads/").to_owned();
        let Some(run_id) = branch.split('/').nth(1).map(str::to_owned) else {
            continue;
        };
        let recorded = store.run(&run_id).await.ok();
        let target = recorded.as_ref().and_then(|run| {
            serde_json::from_str::<WithGit>(&run.options)
                .ok()
                .and_then(|options| options.git?.target)
        });
        let merged = match &target {
            Some(target) => {
                git::output(
                    &repository,
                    [
                        "merge-base",
                        "--is-ancestor",
                        reference,
                        &format!("refs/heads/{target}"),
                    ],
                )
                .await?
                .success
            }
            None => false,
        };
        entries.push(WorktreeEntry {
            worktree: worktrees
                .iter()
                .find(|(_, checked_out)| checked_out == reference)
                .map(|(path, _)| path.clone()),
            run_id,
            branch,
            target,
            merged,
            run_status: recorded.map(|run| run.status),
        });
    }
    Ok(entries)
}

/// Removes the worktrees and merged branches of finished runs (of `run`,
/// or of every finished run).
///
/// # Errors
///
/// Not a repository, git or the store failing.
pub async fn prune_worktrees(
    store: &Store,
    project_dir: &Path,
    run: Option<&str>,
) -> Result<Pruned, AdminError> {
    let repository = git::top_level(project_dir)
        .await
        .ok_or_else(|| AdminError::NotARepository(project_dir.to_path_buf()))?;
    let mut pruned = Pruned::default();
    let _lock = super::lock::lock(&repository)
        .await
        .map_err(AdminError::Lock)?;
    for entry in list_worktrees(store, project_dir, run).await? {
        if !entry.run_status.as_deref().is_some_and(finished) {
            pruned.kept.push((
                entry.branch,
                "its run is not finished (or not recorded in this store)".to_owned(),
            ));
            continue;
        }
        if let Some(path) = &entry.worktree {
            if let Some(why) = uncommitted(path).await? {
                pruned.kept.push((entry.branch, why));
                continue;
            }
            // Clean but for ignored files (its inputs/): --force removes them.
            let mut args: Vec<std::ffi::OsString> =
                vec!["worktree".into(), "remove".into(), "--force".into()];
            args.push(path.clone().into_os_string());
            git::run(&repository, args).await?;
            pruned.removed_worktrees.push(path.clone());
        }
        if entry.merged {
            git::run(
                &repository,
                ["update-ref", "-d", &format!("refs/heads/{}", entry.branch)],
            )
            .await?;
            pruned.deleted_branches.push(entry.branch);
        } else {
            pruned.kept.push((
                entry.branch,
                "not merged into its target (kept for inspection)".to_owned(),
            ));
        }
    }
    remove_integration_worktrees(store, project_dir, &repository, run, &mut pruned).await?;
    let _ = git::output(&repository, ["worktree", "prune"]).await;
    Ok(pruned)
}

/// What [`prune_worktrees`] would keep of a finished run's branches and
/// worktrees, and why (a worktree with uncommitted changes, a branch its
/// target does not contain), found without changing anything. Empty when
/// pruning would remove them all.
///
/// # Errors
///
/// Not a repository, git or the store failing.
pub async fn worktrees_kept(
    store: &Store,
    project_dir: &Path,
    run: &str,
) -> Result<Vec<(String, String)>, AdminError> {
    let mut kept = Vec::new();
    for entry in list_worktrees(store, project_dir, Some(run)).await? {
        if let Some(path) = &entry.worktree
            && let Some(why) = uncommitted(path).await?
        {
            kept.push((entry.branch, why));
        } else if !entry.merged {
            kept.push((
                entry.branch,
                "not merged into its target (kept for inspection)".to_owned(),
            ));
        }
    }
    Ok(kept)
}

/// Why a worktree must be kept for its uncommitted changes, if it must.
async fn uncommitted(path: &Path) -> Result<Option<String>, AdminError> {
    let status = git::output(path, ["status", "--porcelain", "--untracked-files=all"]).await?;
    Ok((!status.success || !status.stdout.trim().is_empty())
        .then(|| format!("{} has uncommitted changes", path.display())))
}

/// Whether a run status is final.
fn finished(status: &str) -> bool {
    matches!(status, "success" | "failed" | "rejected" | "cancelled")
}

/// Removes the integration worktrees (and start records) of finished runs.
async fn remove_integration_worktrees(
    store: &Store,
    project_dir: &Path,
    repository: &Path,
    run: Option<&str>,
    pruned: &mut Pruned,
) -> Result<(), AdminError> {
    let root = worktrees_dir(project_dir);
    let Ok(entries) = std::fs::read_dir(&root) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let run_id = entry.file_name().to_string_lossy().into_owned();
        if run.is_some_and(|run| run != run_id) {
            continue;
        }
        let done = store
            .run(&run_id)
            .await
            .ok()
            .is_some_and(|recorded| finished(&recorded.status));
        if !done {
            continue;
        }
        let integration = entry.path().join("_integration");
        if integration.exists() {
            let mut args: Vec<std::ffi::OsString> =
                vec!["worktree".into(), "remove".into(), "--force".into()];
            args.push(integration.clone().into_os_string());
            git::run(repository, args).await?;
            pruned.removed_worktrees.push(integration);
        }
        // What is left: the start and configuration records, and worktrees
        // kept above.
        if let Ok(files) = std::fs::read_dir(entry.path()) {
            for file in files.flatten() {
                if file
                    .path()
                    .extension()
                    .is_some_and(|ext| ext == "start" || ext == "digest")
                {
                    let _ = std::fs::remove_file(file.path());
                }
            }
        }
        let _ = std::fs::remove_dir(entry.path());
    }
    Ok(())
}

/// Every worktree's path and the ref it has checked out.
async fn worktree_branches(repository: &Path) -> Result<Vec<(PathBuf, String)>, AdminError> {
    let listing = git::run(repository, ["worktree", "list", "--porcelain"]).await?;
    let mut found = Vec::new();
    let mut path = None;
    for line in listing.lines() {
        if let Some(rest) = line.strip_prefix("worktree ") {
            path = Some(PathBuf::from(rest));
        } else if let Some(branch) = line.strip_prefix("branch ")
            && let Some(path) = path.take()
        {
            found.push((path, branch.to_owned()));
        }
    }
    Ok(found)
}
