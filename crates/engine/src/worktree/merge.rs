//! Merging an isolated stage's branch back into the run's target branch:
//! one merge at a time, in the run's integration worktree, idempotent.

use std::path::Path;

use baton_executor::git;

use super::git_calls::{git_error, remove_index_lock};
use super::lock;

/// How a conflict's error starts: the run's closing hint and `--accept-merge`
/// look for it.
pub const CONFLICT: &str = "merge conflict merging";

/// Merges `branch` into `target` in the integration worktree and advances
/// the target, one merge at a time. Idempotent: a branch whose tip the
/// target already contains is not merged again (a crash between the ref
/// update and the record of success would otherwise duplicate the merge).
pub(super) async fn merge(
    repository: &Path,
    integration: &Path,
    branch: &str,
    target: &str,
    message: &str,
) -> Result<(), String> {
    let _lock = lock::lock(repository).await?;
    let target_ref = format!("refs/heads/{target}");
    // Retried when the target moves between reading and advancing it.
    for _ in 0..5 {
        let old = git::run(repository, ["rev-parse", "--verify", &target_ref])
            .await
            .map_err(git_error(&format!("cannot read branch {target}")))?;
        let tip = git::run(
            repository,
            ["rev-parse", "--verify", &format!("refs/heads/{branch}")],
        )
        .await
        .map_err(git_error(&format!("cannot read branch {branch}")))?;
        let contained = git::output(repository, ["merge-base", "--is-ancestor", &tip, &old])
            .await
            .map_err(git_error("cannot compare branches"))?;
        let new = if contained.success || changes_nothing(repository, &old, &tip).await? {
            old.clone()
        } else {
            merge_commit(repository, integration, &old, &tip, branch, target, message).await?
        };
        match advance(repository, &target_ref, &new, &old).await? {
            true => return Ok(()),
            false => continue,
        }
    }
    Err(format!(
        "branch {target} kept moving while baton merged {branch}; resume to try again"
    ))
}

/// Whether the branch's commits since it last joined the target change no
/// file: a stage re-run after a crash that followed its merge may only add
/// empty commits, and merging those would just duplicate the merge.
async fn changes_nothing(repository: &Path, old: &str, tip: &str) -> Result<bool, String> {
    let base = git::run(repository, ["merge-base", old, tip])
        .await
        .map_err(git_error("cannot compare branches"))?;
    let diff = git::output(repository, ["diff-tree", "--quiet", &base, tip])
        .await
        .map_err(git_error("cannot compare branches"))?;
    Ok(diff.success)
}

/// Makes the merge commit of `tip` onto `old` in the integration worktree.
async fn merge_commit(
    repository: &Path,
    integration: &Path,
    old: &str,
    tip: &str,
    branch: &str,
    target: &str,
    message: &str,
) -> Result<String, String> {
    if integration.join(".git").exists() {
        // A crash may have left a merge in progress there.
        remove_index_lock(integration).await;
        let _ = git::output(integration, ["merge", "--abort"]).await;
        git::run(integration, ["checkout", "-q", "--force", "--detach", old])
            .await
            .map_err(git_error("cannot reset the integration worktree"))?;
        git::run(integration, ["clean", "-q", "-fd"])
            .await
            .map_err(git_error("cannot clean the integration worktree"))?;
    } else {
        let _ = git::output(repository, ["worktree", "prune"]).await;
        let mut args: Vec<std::ffi::OsString> = vec!["worktree".into(), "add".into()];
        args.extend([
            "--detach".into(),
            integration.as_os_str().to_owned(),
            old.into(),
        ]);
        git::run(repository, args)
            .await
            .map_err(git_error("cannot create the integration worktree"))?;
    }
    // The tip is passed as a commit id, so nothing in a branch name can be
    // read as an option; the message is baton's, not the agent's.
    let merged = git::output(
        integration,
        ["merge", "--no-ff", "--no-edit", "-m", message, tip],
    )
    .await
    .map_err(git_error("cannot merge"))?;
    if !merged.success {
        let conflicts = git::run(integration, ["diff", "--name-only", "--diff-filter=U"])
            .await
            .unwrap_or_default();
        let _ = git::output(integration, ["merge", "--abort"]).await;
        // A conflict is reported only from a clean state: no merge left in
        // progress and HEAD back where it was.
        let pending = git::output(integration, ["rev-parse", "-q", "--verify", "MERGE_HEAD"])
            .await
            .map_err(git_error("cannot check the integration worktree"))?;
        let head = git::run(integration, ["rev-parse", "--verify", "HEAD"])
            .await
            .map_err(git_error("cannot check the integration worktree"))?;
        if pending.success || head != old {
            return Err(format!(
                "merging {branch} into {target} failed and the integration worktree {} could not be reset; the next merge starts it afresh",
                integration.display()
            ));
        }
        if conflicts.trim().is_empty() {
            return Err(format!(
                "merging {branch} into {target} failed: {}",
                merged.stderr
            ));
        }
        return Err(format!(
            "{CONFLICT} {branch} into {target} in {}; the branch is kept for inspection",
            conflicts.lines().collect::<Vec<_>>().join(", ")
        ));
    }
    git::run(integration, ["rev-parse", "--verify", "HEAD"])
        .await
        .map_err(git_error("cannot read the merge commit"))
}

/// Moves the target from `old` to `new`: a fast-forward of the user's
/// checkout when it has the target checked out (and is clean), else a
/// compare-and-swap of the ref. `false` when the target moved meanwhile.
async fn advance(
    repository: &Path,
    target_ref: &str,
    new: &str,
    old: &str,
) -> Result<bool, String> {
    let checked_out = git::output(repository, ["symbolic-ref", "-q", "HEAD"])
        .await
        .map_err(git_error("cannot read the checkout's branch"))?;
    if checked_out.success && checked_out.stdout == target_ref {
        if new == old {
            return Ok(true);
        }
        let status = git::run(
            repository,
            ["status", "--porcelain=v1", "--untracked-files=no"],
        )
        .await
        .map_err(git_error("cannot read the checkout's status"))?;
        if !status.trim().is_empty() {
            // Moving the branch under uncommitted edits would make them
            // look like reverts of the merged work.
            return Err(format!(
                "{} has {target_ref} checked out with uncommitted changes; commit or stash them and resume the run to merge",
                repository.display()
            ));
        }
        // The only git command baton runs in the user's checkout.
        let merged = git::output(repository, ["merge", "-q", "--ff-only", new])
            .await
            .map_err(git_error("cannot fast-forward the checkout"))?;
        return Ok(merged.success);
    }
    if new == old {
        return Ok(true);
    }
    let updated = git::output(
        repository,
        ["update-ref", "-m", "baton: merge", target_ref, new, old],
    )
    .await
    .map_err(git_error("cannot advance the branch"))?;
    Ok(updated.success)
}
