//! `kind: sub-workflow` stages: the referenced workflow runs as a child run.
//!
//! An attempt of such a stage creates the child run — or, on a later attempt
//! or after a crash, finds the one it created before — and drives it to its
//! end with the parent's drive options, inside the attempt. The child is an
//! ordinary run with a lease, stages, attempts and a resume of its own:
//!
//! * its id is derived from the parent's ([`child_run_id`]), so the next
//!   attempt of the parent stage finds it and resumes it instead of starting
//!   the child's work again;
//! * its workspace is `<parent workspace>/sub/<stage>`, so a parent stage
//!   reads the child's outputs as `{workspace}/sub/<stage>/<path>`;
//! * its recorded options carry `parent_run` and `parent_stage`, which
//!   `baton runs` and `baton status` show;
//! * its params are the stage's `sub_workflow_params`, rendered with the
//!   parent's params.
//!
//! The stage succeeds when the child succeeds (and its own `writes_to`, if
//! any, exist). A child that fails fails the stage with the child's error. A
//! child that stops at a human gate fails the stage with a message that says
//! to decide the child's gate and resume the parent: a resume retries failed
//! stages, and the retry drives the same child on from its gate. (Waiting in
//! the parent instead would need a second kind of gate; `--wait-gates` is
//! passed down, so a child waits at its gate when the parent would.)
//! Cancelling the parent cancels the child.
//!
//! The child's progress events go to the parent's coordinator as reports of
//! the attempt, which shows them under the stage (`Progress::SubRun`); a
//! grandchild's arrive the same way, one level at a time.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

use baton_store::{NewRun, Store};
use baton_workflow::plan::PlanStage;
use serde_json::json;
use tokio::sync::{mpsc, watch};

use crate::attempt::{Attempt, Finished, Report};
use crate::coordinator::{DriveOptions, Outcome};
use crate::create;
use crate::digest::sha256_hex;
use crate::loader::FsLoader;
use crate::outputs::{Snapshot, verify_attempt};
use crate::progress::Progress;
use crate::run_options::DriverMode;
use crate::{Error, Result, clock};

tokio::task_local! {
    /// The drive options of the run whose attempt this task is. The
    /// coordinator sets it around every attempt it spawns, so that a
    /// sub-workflow attempt drives its child exactly as its parent is driven.
    pub(crate) static OPTIONS: Arc<DriveOptions>;
}

/// How a sub-workflow attempt drives its child run: the coordinator's
/// `drive`, handed down with the attempt, since the coordinator is what runs
/// the attempt.
pub(crate) type DriveChild = for<'a> fn(
    &'a Store,
    &'a str,
    &'a DriveOptions,
    &'a (dyn Fn(Progress) + Sync),
) -> Pin<Box<dyn Future<Output = Result<Outcome>> + 'a>>;

/// The id of the child run a sub-workflow stage of `parent_run` creates:
/// `<parent>-<stage>`, with every character outside `[a-z0-9-]` replaced
/// (and a short digest of the name appended when anything was replaced, so
/// that two stage names never share a child).
pub(crate) fn child_run_id(parent_run: &str, stage: &str) -> String {
    let safe: String = stage
        .chars()
        .map(|character| {
            if character.is_ascii_alphanumeric() || character == '-' {
                character.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    if safe == stage {
        format!("{parent_run}-{safe}")
    } else {
        format!("{parent_run}-{safe}-{}", &sha256_hex(stage.as_bytes())[..8])
    }
}

/// The workspace of a stage's child run, under its parent's.
pub(crate) fn child_workspace(parent_workspace: &Path, stage: &str) -> std::path::PathBuf {
    let name = child_run_id("", stage);
    parent_workspace
        .join("sub")
        .join(name.trim_start_matches('-'))
}

/// Runs the attempt: the child run, created or found, driven to its end.
pub(crate) async fn run(
    stage: &PlanStage,
    attempt: &Attempt,
    mut cancel: watch::Receiver<bool>,
    reports: &mpsc::UnboundedSender<Report>,
    drive: DriveChild,
) -> Finished {
    let mut finished = Finished::unsettled(attempt);
    let options = OPTIONS
        .try_with(|options| DriveOptions::clone(options))
        .unwrap_or_default();
    let child = match find_or_create(stage, attempt).await {
        Ok(child) => child,
        Err(error) => {
            finished.error = Some(format!("cannot start sub-workflow run: {error}"));
            return finished;
        }
    };
    let store = attempt.store.clone();
    let forward = Forward {
        reports: reports.clone(),
        index: attempt.index,
        unit: attempt.unit.clone(),
    };
    let mut driving = drive_child(store.clone(), child.clone(), options, forward, drive);
    let outcome = tokio::select! {
        outcome = &mut driving => Some(outcome),
        _ = cancel.wait_for(|cancelled| *cancelled) => None,
    };
    let Some(outcome) = outcome else {
        // The child's driver sees the request when it renews its lease and
        // stops its stages; wait for that so nothing outlives the attempt.
        let _ = store.request_cancel(&child, clock::now_ms()).await;
        let _ = (&mut driving).await;
        finished.cancelled = true;
        finished.error = Some(format!("cancelled (sub-workflow run {child} cancelled)"));
        return finished;
    };
    let outcome = match outcome {
        Ok(outcome) => outcome.map_err(|error| describe(&error)),
        Err(error) => Err(format!("its driver ended abnormally: {error}")),
    };
    match outcome {
        Ok(outcome) => ended(stage, attempt, &outcome, DriverMode::Builtin),
        Err(error) => {
            finished.error = Some(format!("sub-workflow run {child}: {error}"));
            finished
        }
    }
}

/// The attempt's result once its child run has stopped as `child` says;
/// a failure says how to go on in a parent driven by `driver`.
pub(crate) fn ended(
    stage: &PlanStage,
    attempt: &Attempt,
    child: &Outcome,
    driver: DriverMode,
) -> Finished {
    let mut finished = Finished::unsettled(attempt);
    if child.status == "success" {
        // The child verified its own outputs when its stages ran; here
        // only the parent stage's declared files are checked, and an
        // empty snapshot counts them all as fresh, because a resumed
        // parent finds a child that finished before the crash.
        verify_attempt(&mut finished, stage, attempt, &Snapshot::new());
    } else {
        finished.error = Some(failure_message(stage, attempt, child, driver));
    }
    finished
}

/// Drives the child on a blocking-pool thread of the same runtime.
///
/// `drive` keeps state that is not `Send` across its awaits (it is the one
/// owner of its run and never moves between threads), while an attempt is a
/// spawned task that must be `Send`. `Handle::block_on` runs the child's
/// `drive` on a thread of its own, with the runtime's timers and I/O (on a
/// one-thread runtime, the parent's `Runtime::block_on` drives those), and
/// also breaks the recursion of a future that would otherwise contain
/// itself (a child's attempts may drive children in turn).
fn drive_child(
    store: Store,
    child: String,
    options: DriveOptions,
    forward: Forward,
    drive: DriveChild,
) -> tokio::task::JoinHandle<Result<Outcome>> {
    let handle = tokio::runtime::Handle::current();
    // The child's run span goes under this attempt's, across the thread.
    let attempt = tracing::Span::current();
    tokio::task::spawn_blocking(move || {
        let _inside = attempt.enter();
        let progress = |event: Progress| forward.send(event);
        handle.block_on(drive(&store, &child, &options, &progress))
    })
}

/// Where the child's progress goes: to the parent's coordinator, as a
/// report of this attempt (a parent that has stopped listening loses none
/// of the child's state, only its lines).
struct Forward {
    reports: mpsc::UnboundedSender<Report>,
    index: usize,
    unit: Option<String>,
}

impl Forward {
    fn send(&self, event: Progress) {
        let _ = self.reports.send(Report::SubRun {
            index: self.index,
            unit: self.unit.clone(),
            event,
        });
    }
}

fn failure_message(
    stage: &PlanStage,
    attempt: &Attempt,
    outcome: &Outcome,
    driver: DriverMode,
) -> String {
    let (child, parent) = (&outcome.run_id, &attempt.run_id);
    // A resume retries the stage, which drives the same child on; through
    // the protocol the stage is reset to be handed out again.
    let go_on = match driver {
        DriverMode::Builtin => format!("`baton resume {parent}`"),
        DriverMode::External => format!("`baton rerun {parent} {}`", stage.name()),
    };
    match (outcome.status.as_str(), driver) {
        ("awaiting_human", _) => format!(
            "sub-workflow run {child} stopped at human gate '{gate}': decide it (`baton gate approve {child} {gate}` or `baton gate reject …`), then {go_on}",
            gate = outcome.gate.as_deref().unwrap_or("?"),
        ),
        // The protocol's child keeps its failure until its stage is reset.
        ("failed", DriverMode::External) => format!(
            "sub-workflow run {child} failed: {}; to go on, `baton rerun {child} STAGE` its failed stage, then {go_on}",
            outcome.error.as_deref().unwrap_or("no error recorded")
        ),
        (status, _) => format!(
            "sub-workflow run {child} {status}: {}",
            outcome.error.as_deref().unwrap_or("no error recorded")
        ),
    }
}

fn describe(error: &Error) -> String {
    match error {
        Error::Invalid(failure) => failure
            .errors
            .iter()
            .map(|diagnostic| diagnostic.message.clone())
            .collect::<Vec<_>>()
            .join("; "),
        other => other.to_string(),
    }
}

/// The child run's id, created (compiled, recorded, laid out) unless it is
/// recorded already.
pub(crate) async fn find_or_create(stage: &PlanStage, attempt: &Attempt) -> Result<String, String> {
    created(stage, attempt)
        .await
        .map_err(|error| describe(&error))
}

async fn created(stage: &PlanStage, attempt: &Attempt) -> Result<String> {
    let child = child_run_id(&attempt.run_id, stage.name());
    match attempt.store.run(&child).await {
        Ok(_) => return Ok(child),
        Err(baton_store::Error::NoSuchRun(_)) => {}
        Err(other) => return Err(other.into()),
    }
    let loader = FsLoader::new(&attempt.project_dir);
    // Loading checked that a sub-workflow stage has a path.
    let path = baton_workflow::subworkflow::resolve(&stage.spec, &loader).unwrap_or_default();
    let workspace_text = attempt.workspace.to_string_lossy().into_owned();
    let lookup = |name: &str| attempt.template_value(name, &workspace_text);
    let params = stage
        .spec
        .sub_workflow_params
        .iter()
        .map(|(name, value)| {
            (
                name.clone(),
                baton_workflow::template::render(&value.value, lookup).into_owned(),
            )
        })
        .collect();
    let compile_options = baton_workflow::compile::Options {
        work_dir: Some(
            attempt
                .project_dir
                .join("out")
                .to_string_lossy()
                .into_owned(),
        ),
        params,
        // A child may be handed parameters it does not use.
        reject_unknown_params: false,
    };
    let (loaded, plan) = create::compile(&attempt.project_dir, &path, &compile_options)?;
    let workspace = child_workspace(&attempt.workspace, stage.name());
    let now = clock::now_ms();
    // The parent's options (its concurrency bound, its driver), with the
    // git base recorded afresh for the child's own isolated stages, and the
    // parent link as extra fields: the options column takes them without a
    // migration, and `RunOptions` ignores them when the child is resumed.
    let parent_options = attempt
        .store
        .run(&attempt.run_id)
        .await
        .ok()
        .and_then(|run| serde_json::from_str::<create::RunOptions>(&run.options).ok())
        .ok_or_else(|| Error::Store(baton_store::Error::NoSuchRun(attempt.run_id.clone())))?;
    let mut options =
        crate::worktree::record_base(&parent_options, &attempt.project_dir, &plan).await;
    options["project_dir"] = json!(attempt.project_dir);
    options["parent_run"] = json!(attempt.run_id);
    options["parent_stage"] = json!(stage.name());
    let plan_text = create::PlanText::new(&plan, &child);
    let created = attempt
        .store
        .create_run(&NewRun {
            run_id: child.clone(),
            workflow: plan.name.clone(),
            workflow_path: path.clone(),
            workspace: workspace.to_string_lossy().into_owned(),
            created_at: now,
            plan: plan_text.compact,
            params: serde_json::to_string(&plan.params).expect("plain data"),
            sources: serde_json::to_string(&create::digests(&loaded)).expect("plain data"),
            options: options.to_string(),
            stages: plan
                .stages
                .iter()
                .map(|stage| stage.name().to_owned())
                .collect(),
        })
        .await;
    if let Err(error) = created {
        // Recorded by an earlier attempt after all (a race with nothing
        // else, since the parent's lease admits one driver): use it.
        if attempt.store.run(&child).await.is_err() {
            return Err(error.into());
        }
    }
    create::ensure_workspace(
        &workspace,
        &child,
        &plan,
        &attempt.project_dir.join(&path),
        now,
        Some(&plan_text.pretty),
    )?;
    Ok(child)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_ids_are_deterministic_and_safe() {
        assert_eq!(
            child_run_id("p-20260101-abc123", "build"),
            "p-20260101-abc123-build"
        );
        let odd = child_run_id("p", "Build Docs");
        assert!(odd.starts_with("p-build-docs-"), "{odd}");
        assert_eq!(odd, child_run_id("p", "Build Docs"));
        assert_ne!(odd, child_run_id("p", "Build-Docs"));
        assert_eq!(
            child_workspace(Path::new("/w/run"), "build"),
            Path::new("/w/run/sub/build")
        );
    }
}
