//! `isolation: worktree`: an agent stage (or fan-out child) runs in a git
//! worktree of its own on branch `baton/<run>/<stage>[/<key>]`, and its
//! commits are merged back into the branch the run started on.
//!
//! The worktree's `inputs/` directory is the stage's view of the workspace
//! (ignored by git, so it is never committed): upstream outputs and result
//! files are copied in before the agent starts, the agent writes its
//! declared outputs there, and baton copies them back into the workspace.
//! Merges happen one at a time in a baton-owned integration worktree; the
//! user's checkout is only ever fast-forwarded, and only when it is clean.
//! See `docs/worktrees.md`.

use std::path::{Path, PathBuf};

use baton_executor::git;
use baton_workflow::Plan;
use baton_workflow::plan::PlanStage;
use baton_workflow::schema::{Access, Executor, Isolation};
use serde::{Deserialize, Serialize};

use crate::digest::sha256_hex;
use crate::run_options::RunOptions;
use crate::workspace::{self, output_path};

mod accept;
mod admin;
mod git_calls;
mod inputs;
mod lock;
mod merge;
mod place;

pub(crate) use accept::accept;
pub use accept::failed_merges;
pub use admin::{
    AdminError, Pruned, WorktreeEntry, list_worktrees, prune_worktrees, worktrees_kept,
};
pub use merge::CONFLICT as MERGE_CONFLICT;
pub(crate) use place::Place;

use git_calls::{git_error, remove_index_lock};

/// The prompt of a stage handed to an agent: for an isolated stage, its
/// worktree's; after a push-back at its gate, with the comment.
pub(crate) fn handed_prompt(
    plan: &Plan,
    stage: &PlanStage,
    workspace: &Path,
    worktree: Option<&Worktree>,
    push_back: Option<&baton_store::GateDecisionRow>,
) -> String {
    let mut prompt = match worktree {
        Some(worktree) => worktree.prompt(plan, stage),
        None => crate::prompt::render(plan, stage, workspace),
    };
    if let Some(decision) = push_back {
        prompt.push_str(&crate::prompt::pushed_back(decision));
    }
    prompt
}

/// Where a project's worktrees live: `<project>/.baton/worktrees/<run>/`.
fn worktrees_dir(project_dir: &Path) -> PathBuf {
    project_dir.join(".baton").join("worktrees")
}

/// Where a run started in git, recorded in the run's options as `git`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct GitBase {
    /// The commit HEAD named when the run was created.
    pub(crate) base: String,
    /// The branch checked out then; `None` when HEAD was detached.
    pub(crate) target: Option<String>,
}

#[derive(Deserialize)]
struct WithGit {
    git: Option<GitBase>,
}

/// The run's options as JSON, with its [`GitBase`] when the plan has an
/// isolated stage and the project is in a git repository.
pub(crate) async fn record_base(
    options: &RunOptions,
    project_dir: &Path,
    plan: &Plan,
) -> serde_json::Value {
    let mut value = serde_json::to_value(options).expect("plain data");
    let isolated = plan.stages.iter().any(|stage| {
        stage.spec.agent.isolation == Isolation::Worktree
            || stage
                .spec
                .fan_out
                .as_ref()
                .is_some_and(|fan_out| fan_out.isolation == Isolation::Worktree)
    });
    if isolated && let Some((base, target)) = git::head(project_dir).await {
        value["git"] = serde_json::to_value(GitBase { base, target }).expect("plain data");
    }
    value
}

/// Whether an attempt of `stage` runs in a worktree: agent stages (not
/// scripts, not queue jobs) that ask for it.
pub(crate) fn isolated(stage: &PlanStage) -> bool {
    !stage.spec.runs_script()
        && stage.spec.executor != Executor::WorkerQueue
        && stage.spec.agent.isolation == Isolation::Worktree
}

/// One attempt's worktree.
#[derive(Debug)]
pub(crate) struct Worktree {
    /// The repository's top level (the user's checkout).
    repository: PathBuf,
    /// The worktree.
    pub(crate) path: PathBuf,
    /// `baton/<run>/<stage>[/<key>]`.
    branch: String,
    /// The commit the branch started at.
    start: String,
    /// The branch merged into.
    target: String,
    /// The run's directory of worktrees.
    root: PathBuf,
    /// The repository configuration as it was before the agent ran.
    config: String,
    /// Written when the branch failed to merge (see [`MERGE_FAILED`]).
    merge_record: PathBuf,
}

/// The digest of the repository configuration when the run's first
/// isolated stage started, in the run's directory of worktrees. Records
/// there start with a dot, which no worktree's name does, so a stage named
/// `config.digest` (or `a.start`) has a directory of its own.
const CONFIG_RECORD: &str = ".config.digest";

/// How the record of a branch that failed to merge ends
/// (`.<stage>.merge-failed`, holding the branch): `--accept-merge` finishes
/// such a stage by merging the branch as it is then, without its agent.
const MERGE_FAILED: &str = "merge-failed";

/// A git ref component from a name: only `[A-Za-z0-9._-]`, no leading dot,
/// no `..`, no `.lock` ending (`git check-ref-format`).
fn ref_component(name: &str) -> String {
    let mut text: String = name.chars().map(workspace::name_char).collect();
    while text.contains("..") {
        text = text.replace("..", "_.");
    }
    if text.starts_with('.') || text.is_empty() {
        text.insert(0, '_');
    }
    if text.ends_with(".lock") || text.ends_with('.') {
        text.push('_');
    }
    text
}

/// A worktree's names, before anything exists.
struct Names {
    repository: PathBuf,
    target: String,
    branch: String,
    root: PathBuf,
    path: PathBuf,
    start_file: PathBuf,
    config_file: PathBuf,
    merge_record: PathBuf,
}

impl Names {
    async fn of(stage: &PlanStage, place: &Place<'_>) -> Result<Names, String> {
        let run = place
            .store
            .run(place.run_id)
            .await
            .map_err(|error| format!("cannot read the run: {error}"))?;
        let base = serde_json::from_str::<WithGit>(&run.options)
            .ok()
            .and_then(|options| options.git)
            .ok_or("isolation: worktree needs the run to start inside a git repository with at least one commit")?;
        let target = base.target.ok_or(
            "isolation: worktree needs a branch checked out when the run starts (HEAD was detached); baton merges back into that branch",
        )?;
        let repository = git::top_level(place.project_dir)
            .await
            .ok_or("isolation: worktree: the project is no longer in a git repository")?;
        let parent = place.plan.stages[place.index].name();
        let mut branch = format!(
            "baton/{}/{}",
            ref_component(place.run_id),
            ref_component(parent)
        );
        if let Some(item) = place.item {
            branch = format!("{branch}/{}", ref_component(item));
        }
        let root = worktrees_dir(place.project_dir).join(ref_component(place.run_id));
        let name = ref_component(stage.name());
        Ok(Names {
            repository,
            target,
            branch,
            path: root.join(&name),
            start_file: root.join(format!(".{name}.start")),
            merge_record: root.join(format!(".{name}.{MERGE_FAILED}")),
            config_file: root.join(CONFIG_RECORD),
            root,
        })
    }

    /// The worktree of these names, once its start and configuration are
    /// known.
    fn worktree(self, start: String, config: String) -> Worktree {
        Worktree {
            repository: self.repository,
            path: self.path,
            branch: self.branch,
            start,
            target: self.target,
            root: self.root,
            config,
            merge_record: self.merge_record,
        }
    }

    /// The commit an existing branch started at: as recorded, or, when
    /// `prune` removed the record, where the branch left the target.
    async fn start(&self) -> Result<String, String> {
        if let Ok(text) = std::fs::read_to_string(&self.start_file) {
            return Ok(text.trim().to_owned());
        }
        git::run(
            &self.repository,
            [
                "merge-base",
                &format!("refs/heads/{}", self.branch),
                &format!("refs/heads/{}", self.target),
            ],
        )
        .await
        .map_err(git_error("cannot find where the branch started"))
    }
}

impl Worktree {
    /// Creates (or, for a later attempt, resets) the stage's worktree and
    /// fills its `inputs/`.
    pub(crate) async fn create(stage: &PlanStage, place: &Place<'_>) -> Result<Worktree, String> {
        let names = Names::of(stage, place).await?;
        let _lock = lock::lock(&names.repository).await?;
        // The agent runs again: its new work is what a later merge takes.
        remove_record(&names.merge_record)?;
        ignore_worktrees(place.project_dir)?;
        let exists = git::output(
            &names.repository,
            [
                "rev-parse",
                "--verify",
                "-q",
                &format!("refs/heads/{}^{{commit}}", names.branch),
            ],
        )
        .await
        .map_err(git_error("cannot read the branch"))?
        .success;
        let start = if exists {
            names.start().await?
        } else {
            // Branches start at the target's current tip, so a stage sees
            // the merged work of the stages before it.
            let start = git::run(
                &names.repository,
                [
                    "rev-parse",
                    "--verify",
                    &format!("refs/heads/{}^{{commit}}", names.target),
                ],
            )
            .await
            .map_err(git_error(&format!("cannot read branch {}", names.target)))?;
            // Recorded before the branch exists, so a crash in between
            // leaves nothing a later attempt cannot account for.
            workspace::write_atomic(&names.start_file, format!("{start}\n").as_bytes())
                .map_err(|error| format!("cannot write {}: {error}", names.start_file.display()))?;
            start
        };
        if !(names.path.join(".git").exists() && reset(&names.path).await) {
            // No worktree, or one a crash left half made: (re)create it.
            if names.path.exists() {
                std::fs::remove_dir_all(&names.path)
                    .map_err(|error| format!("cannot remove {}: {error}", names.path.display()))?;
            }
            let _ = git::output(&names.repository, ["worktree", "prune"]).await;
            let mut args: Vec<std::ffi::OsString> = vec!["worktree".into(), "add".into()];
            if exists {
                args.extend([
                    names.path.clone().into_os_string(),
                    names.branch.clone().into(),
                ]);
            } else {
                args.extend([
                    "--no-track".into(),
                    "-b".into(),
                    names.branch.clone().into(),
                    names.path.clone().into_os_string(),
                    start.clone().into(),
                ]);
            }
            add_worktree(&names.repository, &args)
                .await
                .map_err(git_error(&format!(
                    "cannot create the worktree for {}",
                    names.branch
                )))?;
        }
        // The configuration as the run's first isolated stage found it:
        // one agent's change then fails every later merge of the run, not
        // only its own (a sibling's merge would otherwise run under it).
        let config = match std::fs::read_to_string(&names.config_file) {
            Ok(recorded) => recorded,
            Err(_) => {
                let config = config_digest(&names.repository).await;
                workspace::write_atomic(&names.config_file, config.as_bytes()).map_err(
                    |error| format!("cannot write {}: {error}", names.config_file.display()),
                )?;
                config
            }
        };
        drop(_lock);
        inputs::fill_inputs(stage, place, &names.path.join("inputs"))?;
        Ok(names.worktree(start, config))
    }

    /// The worktree [`Worktree::create`] made for the stage, as it is now
    /// (the driver protocol's `complete`, in a later process): nothing is
    /// reset or copied.
    pub(crate) async fn find(stage: &PlanStage, place: &Place<'_>) -> Result<Worktree, String> {
        let names = Names::of(stage, place).await?;
        if !names.path.join(".git").exists() {
            return Err(format!(
                "the worktree of {} is gone ({}); hand the stage out again",
                names.branch,
                names.path.display()
            ));
        }
        let start = names.start().await?;
        let config = std::fs::read_to_string(&names.config_file)
            .map_err(|error| format!("cannot read {}: {error}", names.config_file.display()))?;
        Ok(names.worktree(start, config))
    }

    /// The directory the agent sees as its workspace.
    pub(crate) fn view(&self) -> PathBuf {
        self.path.join("inputs")
    }

    /// The agent's prompt: the usual one with `inputs/` as its workspace,
    /// and what isolation asks of it.
    pub(crate) fn prompt(&self, plan: &Plan, stage: &PlanStage) -> String {
        let mut prompt = crate::prompt::render(plan, stage, &self.view());
        let commit = if stage.spec.agent.access == Access::ReadWrite {
            "Change the repository's files here. Commit as you go if you like; when you finish, baton commits whatever you left uncommitted and merges the branch back. A stage that changes nothing fails."
        } else {
            "Do not change the repository's code."
        };
        prompt.push_str(&format!(
            "\n## Isolation\n\nYou work in a git worktree of the repository, {}, on branch `{}` (your working directory). The outputs of earlier stages are under `inputs/`; write the files listed above there too (baton copies them back; `inputs/` is never committed). {commit}\n",
            self.path.display(),
            self.branch
        ));
        prompt
    }

    /// Copies the stage's declared outputs from the worktree into the
    /// workspace (verification then finds a missing one).
    pub(crate) fn copy_back(&self, stage: &PlanStage, workspace_dir: &Path) -> Result<(), String> {
        for declared in &stage.spec.writes_to {
            let relative = output_path(&declared.value);
            inputs::copy(&self.view().join(&relative), &workspace_dir.join(&relative))?;
        }
        Ok(())
    }

    /// Commits what the agent changed and left uncommitted: most agent
    /// CLIs may not run git, and some cannot write the worktree's git
    /// directory from their sandbox. `inputs/` ignores itself, so it stays
    /// out.
    async fn commit_leftovers(&self, stage: &PlanStage, run_id: &str) -> Result<(), String> {
        git::run(&self.path, ["add", "-A"])
            .await
            .map_err(git_error("cannot stage the agent's changes"))?;
        let unchanged = git::output(&self.path, ["diff", "--cached", "--quiet"])
            .await
            .map_err(git_error("cannot compare the agent's changes"))?;
        if unchanged.success {
            return Ok(());
        }
        let message = format!("baton: changes of stage {} in run {run_id}", stage.name());
        git::run(&self.path, ["commit", "-q", "--no-verify", "-m", &message])
            .await
            .map_err(git_error("cannot commit the agent's changes"))?;
        Ok(())
    }

    /// Checks the branch and merges it into the target; a failure says
    /// how to go on: through the driver protocol (`rerun`: the plan stage
    /// to reset, a fan-out child's parent), else with `--accept-merge`.
    pub(crate) async fn integrate(
        &self,
        stage: &PlanStage,
        run_id: &str,
        rerun: Option<&str>,
    ) -> Result<(), String> {
        self.check_config().await?;
        if stage.spec.agent.access == Access::ReadWrite {
            self.commit_leftovers(stage, run_id).await?;
        }
        let commits = git::run(
            &self.repository,
            [
                "rev-list",
                "--count",
                &format!("{}..refs/heads/{}", self.start, self.branch),
            ],
        )
        .await
        .map_err(git_error("cannot count the branch's commits"))?;
        if commits.trim() == "0" {
            if stage.spec.agent.access == Access::ReadWrite {
                return Err(format!(
                    "no changes on branch {} (a read-write stage must change the repository)",
                    self.branch
                ));
            }
            return Ok(());
        }
        self.merge(stage, run_id, rerun).await
    }

    /// Refuses to merge once the repository's configuration changed.
    async fn check_config(&self) -> Result<(), String> {
        if config_digest(&self.repository).await != self.config {
            return Err(format!(
                "the repository's git configuration changed since the run's first isolated stage started; baton does not merge {} after that (inspect .git/config and .git/info/attributes; if the change is yours, delete {} and resume)",
                self.branch,
                self.root.join(CONFIG_RECORD).display()
            ));
        }
        Ok(())
    }

    /// Merges the branch into the target. A failure is recorded, and its
    /// error says how to finish the stage without running the agent again.
    async fn merge(
        &self,
        stage: &PlanStage,
        run_id: &str,
        rerun: Option<&str>,
    ) -> Result<(), String> {
        let merged = merge::merge(
            &self.repository,
            &self.root.join("_integration"),
            &self.branch,
            &self.target,
            &format!("baton: merge stage {} of run {run_id}", stage.name()),
        )
        .await;
        match merged {
            Ok(()) => remove_record(&self.merge_record),
            Err(error) => {
                workspace::write_atomic(
                    &self.merge_record,
                    format!("{}\n", self.branch).as_bytes(),
                )
                .map_err(|why| {
                    format!(
                        "{error} (and cannot write {}: {why})",
                        self.merge_record.display()
                    )
                })?;
                let way_out = self.way_out(&error, run_id, rerun);
                Err(format!("{error}; {way_out}"))
            }
        }
    }

    /// What to do after a failed merge: for a conflict, resolve it by hand;
    /// either way `--accept-merge` then merges without the agent. Through
    /// the driver protocol, which runs no agent to skip, the stage (`rerun`)
    /// is reset and handed out again.
    fn way_out(&self, error: &str, run_id: &str, rerun: Option<&str>) -> String {
        let conflict = error.starts_with(merge::CONFLICT);
        let then = match rerun {
            None => format!(
                "`baton resume {run_id} --accept-merge` finishes the stage without running its agent again"
            ),
            Some(stage) => format!(
                "`baton rerun {run_id} {stage}` resets the stage, and `baton next {run_id}` hands it out again{}",
                if conflict { " on the merged work" } else { "" }
            ),
        };
        if conflict {
            format!(
                "to keep this work, run `git merge {}` on {} in {}, resolve the conflicts and commit (or commit a resolution on the branch), then {then}",
                self.branch,
                self.target,
                self.repository.display()
            )
        } else {
            format!("once that is fixed, {then}")
        }
    }
}

/// Removes a record that may not exist.
fn remove_record(record: &Path) -> Result<(), String> {
    match std::fs::remove_file(record) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            Err(format!("cannot remove {}: {error}", record.display()))
        }
        _ => Ok(()),
    }
}

/// `git worktree add`, retried with backoff while another git (another
/// baton process, the user) holds the repository's configuration or ref
/// lock: giving up on contention would fail a stage for nothing.
async fn add_worktree(
    repository: &Path,
    args: &[std::ffi::OsString],
) -> Result<String, git::GitError> {
    let mut delay = std::time::Duration::from_millis(50);
    let mut tries = 0;
    loop {
        match git::run(repository, args).await {
            Err(git::GitError::Failed { stderr, .. }) if tries < 6 && stderr.contains(".lock") => {
                tries += 1;
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
            result => return result,
        }
    }
}

/// Keeps the worktrees out of the user's `git status` and `git add -A`
/// (they sit inside the user's checkout): `.baton/worktrees/.gitignore`
/// ignores everything there, itself included.
fn ignore_worktrees(project_dir: &Path) -> Result<(), String> {
    let ignore = worktrees_dir(project_dir).join(".gitignore");
    if ignore.exists() {
        return Ok(());
    }
    workspace::write_atomic(&ignore, b"*\n")
        .map_err(|error| format!("cannot write {}: {error}", ignore.display()))
}

/// Resets an existing worktree for a later attempt, which starts from the
/// branch as committed: whatever an interrupted attempt left uncommitted is
/// discarded. `false` when the worktree is unusable.
async fn reset(path: &Path) -> bool {
    remove_index_lock(path).await;
    for args in [
        vec!["reset", "-q", "--hard", "HEAD"],
        vec!["clean", "-q", "-fd"],
    ] {
        if git::run(path, args).await.is_err() {
            return false;
        }
    }
    true
}

/// A digest of the repository configuration an agent could use to make git
/// run its programs (config, attributes), read from the common git dir.
async fn config_digest(repository: &Path) -> String {
    let common = git::run(
        repository,
        ["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )
    .await
    .map(PathBuf::from)
    .unwrap_or_else(|_| repository.join(".git"));
    let mut bytes = Vec::new();
    for file in ["config", "info/attributes"] {
        bytes.extend(std::fs::read(common.join(file)).unwrap_or_default());
        bytes.push(0);
    }
    sha256_hex(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ref_components_are_valid() {
        assert_eq!(ref_component("implement"), "implement");
        assert_eq!(ref_component("a b/c"), "a_b_c");
        assert_eq!(ref_component("..x"), "_.x");
        assert_eq!(ref_component(".hidden"), "_.hidden");
        assert_eq!(ref_component("x.lock"), "x.lock_");
        assert_eq!(ref_component(""), "_");
    }
}
