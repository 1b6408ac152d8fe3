//! What an agent may write. No agent may write baton's own state
//! (`.baton/`) beyond its workspace, and a read-only agent may change its
//! workspace and nothing else of the repository. Where the machine allows
//! it, every agent runs contained (see `baton_executor::contain`); else a
//! read-only agent's repository is compared before and after the attempt,
//! and `.baton/` stays writable.

use std::path::{Path, PathBuf};

use baton_executor::ProcessSpec;
use baton_executor::contain::{Containment, Overlay};
use baton_workflow::plan::PlanStage;
use baton_workflow::schema::Access;

use crate::attempt::Attempt;
use crate::digest::sha256_hex;

/// How a read-only agent is kept from changing the repository: contained
/// where the machine allows it (its writes outside the workspace never reach
/// the disk, and are listed afterwards), else by comparing the repository
/// before and after, which also blames it for anything else that changed
/// meanwhile.
pub(crate) enum ReadOnly {
    Contained { report: PathBuf },
    Compared(RepositoryGuard),
}

/// Contains the agent a stage runs, where the machine allows it. Returns
/// how a read-only agent's writes are checked afterwards; `None` for a
/// read-write agent or a script.
pub(crate) async fn contain(
    spec: &mut ProcessSpec,
    attempt: &Attempt,
    stage: &PlanStage,
    worktree: Option<&crate::worktree::Worktree>,
) -> Option<ReadOnly> {
    if stage.spec.runs_script() {
        return None;
    }
    let read_only = stage.spec.agent.access == Access::ReadOnly;
    if read_only {
        // `git status` must not refresh the index of a repository it may
        // only read.
        spec.env
            .push(("GIT_OPTIONAL_LOCKS".to_owned(), "0".to_owned()));
    }
    let Some(helper) = &attempt.contain_helper else {
        if !read_only {
            return None;
        }
        return RepositoryGuard::take(&attempt.project_dir, &attempt.workspace)
            .await
            .map(ReadOnly::Compared);
    };
    let mut containment = Containment {
        writable: vec![attempt.workspace.clone()],
        ..Containment::default()
    };
    if let Some(worktree) = worktree {
        containment.writable.push(if read_only {
            worktree.view()
        } else {
            worktree.path.clone()
        });
    }
    // The store stays writable: baton's own hooks record into it from
    // inside an agent's session.
    containment.writable.extend(attempt.store.files());
    let state = attempt.project_dir.join(".baton");
    if state.is_dir() {
        containment.read_only.push(state);
    }
    let mut checked = None;
    if read_only {
        let root = baton_executor::git::top_level(&attempt.project_dir)
            .await
            .unwrap_or_else(|| attempt.project_dir.clone());
        let place = crate::workspace::dispatch_file(&attempt.workspace, stage, "contain");
        let scratch = place.join("scratch");
        let report = place.join("changes.txt");
        // A report left by an earlier attempt must not stand for this one.
        let _ = std::fs::remove_file(&report);
        // Where it cannot be created, the helper fails saying so.
        let _ = std::fs::create_dir_all(&scratch);
        containment.overlay = Some(Overlay {
            root,
            scratch,
            report: report.clone(),
        });
        checked = Some(ReadOnly::Contained { report });
    }
    spec.contain = Some(baton_executor::Contained {
        helper: helper.clone(),
        containment,
    });
    checked
}

impl ReadOnly {
    /// What the agent changed outside its workspace, as the stage's error.
    pub(crate) async fn check(self, own_files: &[String]) -> Result<(), String> {
        let (mut changed, fate) = match self {
            ReadOnly::Contained { report } => (
                baton_executor::contain::read_report(&report)?,
                " (discarded: the repository never saw them)",
            ),
            ReadOnly::Compared(guard) => (guard.changes().await, ""),
        };
        changed.retain(|path| !is_own_file(path, own_files));
        if changed.is_empty() {
            return Ok(());
        }
        let shown: Vec<&str> = changed.iter().take(10).map(String::as_str).collect();
        let more = changed.len().saturating_sub(shown.len());
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        Err(format!(
            "a read-only stage wrote outside its workspace: {}{more}{fate}; it may write only its declared outputs (give it `access: read-write` to let it change the repository)",
            shown.join(", ")
        ))
    }
}

/// Whether a changed path (as a report lists it) is one of the CLI's own.
fn is_own_file(changed: &str, own_files: &[String]) -> bool {
    let path = changed.strip_suffix(" (deleted)").unwrap_or(changed);
    own_files.iter().any(|own| match own.strip_suffix('/') {
        Some(directory) => path == directory || path.starts_with(own.as_str()),
        None => path == own,
    })
}

/// The state of the project's repository before an agent ran: its changed
/// and untracked files with their content hashes. Outside a git repository
/// there is nothing to compare, and the guard is absent.
pub(crate) struct RepositoryGuard {
    top: PathBuf,
    excluded: Vec<PathBuf>,
    before: std::collections::HashMap<String, Option<String>>,
}

impl RepositoryGuard {
    async fn take(project_dir: &Path, workspace: &Path) -> Option<RepositoryGuard> {
        let top = baton_executor::git::top_level(project_dir).await?;
        let excluded = vec![workspace.to_path_buf(), project_dir.join(".baton")];
        let mut guard = RepositoryGuard {
            top,
            excluded,
            before: std::collections::HashMap::new(),
        };
        guard.before = guard.snapshot().await?;
        Some(guard)
    }

    async fn snapshot(&self) -> Option<std::collections::HashMap<String, Option<String>>> {
        let paths = baton_executor::git::changed_paths(&self.top).await?;
        Some(
            paths
                .into_iter()
                .filter(|path| {
                    let full = self.top.join(path);
                    !self
                        .excluded
                        .iter()
                        .any(|excluded| full.starts_with(excluded))
                })
                .map(|path| {
                    let hash = std::fs::read(self.top.join(&path))
                        .ok()
                        .map(|bytes| sha256_hex(&bytes));
                    (path, hash)
                })
                .collect(),
        )
    }

    /// Paths that changed since the guard was taken.
    async fn changes(&self) -> Vec<String> {
        let Some(after) = self.snapshot().await else {
            return Vec::new();
        };
        let mut changed: Vec<String> = after
            .iter()
            .filter(|(path, hash)| self.before.get(*path) != Some(*hash))
            .map(|(path, _)| path.clone())
            .collect();
        // A file that was dirty before and is clean now was written too.
        changed.extend(
            self.before
                .keys()
                .filter(|path| !after.contains_key(*path))
                .cloned(),
        );
        changed.sort();
        changed
    }
}
