//! One attempt of one stage: build the command, run it through the executor,
//! and verify the result. The attempt only reports; the coordinator records.
//!
//! A stage succeeds only if its process exits 0, every `writes_to` file
//! exists and was written during this attempt, and every `validates_output`
//! check passes. Then the hashes of its outputs are recorded, so that a
//! later change to them is noticed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use baton_executor::{KillReason, Outcome, ProcessSpec, Started, Stdin};
use baton_store::Transition;
use std::sync::Arc;

use baton_executor::endpoint::ChatRequest;
use baton_executor::profile::{AgentRequest, Config, Kind};
use baton_workflow::Plan;
use baton_workflow::plan::PlanStage;
use baton_workflow::schema::Executor;
use tokio::sync::{mpsc, watch};

use crate::checks;
use crate::digest::artifact;
use crate::reconcile::RUN_MARKER;
use crate::retries::Retry;
use crate::schedule::as_i64;
use crate::usage::Meter;
use crate::workspace::{self, output_path};

/// Resolved parameter values by name.
pub(crate) type Params = std::collections::HashMap<String, String>;

/// Limits applied to every stage process.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Wall-clock bound per attempt.
    pub wall: Duration,
    /// Bound on silence (no output).
    pub idle: Option<Duration>,
    /// Bytes kept per log file.
    pub log_cap: u64,
    /// Total output past which the process is killed.
    pub kill_after_bytes: Option<u64>,
    /// SIGTERM-to-SIGKILL grace.
    pub kill_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            wall: Duration::from_secs(60 * 60),
            idle: None,
            log_cap: 16 * 1024 * 1024,
            kill_after_bytes: Some(1024 * 1024 * 1024),
            kill_grace: Duration::from_secs(10),
        }
    }
}

/// Everything an attempt needs.
#[derive(Debug, Clone)]
pub(crate) struct Attempt {
    pub(crate) run_id: String,
    pub(crate) index: usize,
    pub(crate) attempt: i64,
    pub(crate) workspace: PathBuf,
    pub(crate) project_dir: PathBuf,
    pub(crate) params: Params,
    pub(crate) limits: Limits,
    /// The plan, for prompts that list upstream outputs.
    pub(crate) plan: Arc<Plan>,
    /// Agent profiles from `baton.toml`, if any.
    pub(crate) agents: Option<Arc<Config>>,
    /// The helper that contains read-only agents, where the machine can.
    pub(crate) contain_helper: Option<PathBuf>,
    /// The run's slots of agent profiles with `max_concurrent`.
    pub(crate) slots: Arc<Slots>,
    /// The previous attempt was cut short by a crash: a queue job it left
    /// is this attempt's (see `queued.rs`).
    pub(crate) adopt_job: bool,
    /// The unit of the stage this attempt runs (a fan-out child, a
    /// validator), or `None` for the stage itself.
    pub(crate) unit: Option<String>,
    /// Environment variables of the unit (a fan-out child's item).
    pub(crate) env: Vec<(String, String)>,
    /// The `validates_output` checks are left to the stage's program (which
    /// gives failures a correction round), not judged here.
    pub(crate) defer_checks: bool,
    /// The store, for stages run as queue jobs (`executor: worker_queue`).
    pub(crate) store: baton_store::Store,
    /// The agent session this attempt may continue (a correction's).
    pub(crate) continues: Option<crate::session::Continuation>,
    /// A stage whose branch failed to merge is finished by merging the
    /// branch as it is now, without its agent (`--accept-merge`).
    pub(crate) accept_merge: bool,
}

/// A run's slots of the agent profiles that set `max_concurrent`, by
/// profile name: an attempt holds one while its agent runs.
#[derive(Debug, Default)]
pub(crate) struct Slots(std::collections::HashMap<String, Arc<tokio::sync::Semaphore>>);

impl Slots {
    pub(crate) fn new(agents: Option<&Config>) -> Slots {
        Slots(
            agents
                .into_iter()
                .flat_map(|config| &config.profiles)
                .filter_map(|(name, profile)| {
                    let limit = profile.max_concurrent?;
                    Some((
                        name.clone(),
                        Arc::new(tokio::sync::Semaphore::new(limit.max(1))),
                    ))
                })
                .collect(),
        )
    }
}

/// What an attempt reports to the coordinator.
#[derive(Debug)]
pub(crate) enum Report {
    /// The process runs.
    Started {
        index: usize,
        unit: Option<String>,
        attempt: i64,
        started: Started,
    },
    /// The attempt is over (boxed: it is much larger than the others).
    Finished(Box<Finished>),
    /// Something about the attempt worth showing: a wait for a free slot
    /// of its profile.
    Note { note: String },
    /// The agent reported a failure that may pass, and the attempt runs
    /// again after a wait: shown, and recorded so `baton status` says why.
    Retry(Retry),
    /// An event of the child run a sub-workflow attempt drives, for the
    /// parent's progress.
    SubRun {
        index: usize,
        unit: Option<String>,
        event: crate::progress::Progress,
    },
}

/// The verified end of an attempt.
#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) index: usize,
    pub(crate) unit: Option<String>,
    pub(crate) attempt: i64,
    pub(crate) success: bool,
    pub(crate) exit_code: Option<i64>,
    pub(crate) error: Option<String>,
    /// (path, sha256, bytes) of every declared output.
    pub(crate) artifacts: Vec<(String, String, i64)>,
    pub(crate) cancelled: bool,
    /// Tokens and cost read from an agent's output, if any.
    pub(crate) usage: Option<baton_executor::profile::Usage>,
    /// The agent session the attempt continued, if it did.
    pub(crate) resumed: Option<String>,
}

impl Finished {
    /// The end of `attempt` before anything is known: failed, nothing
    /// recorded; each way of running an attempt fills in what happened.
    pub(crate) fn unsettled(attempt: &Attempt) -> Self {
        Finished {
            index: attempt.index,
            unit: attempt.unit.clone(),
            attempt: attempt.attempt,
            success: false,
            exit_code: None,
            error: None,
            artifacts: Vec::new(),
            cancelled: false,
            usage: None,
            resumed: None,
        }
    }

    /// The end of a stage's attempt that ran no process of its own (a
    /// composite stage's, once its units have all finished).
    pub(crate) fn ended(
        index: usize,
        attempt: i64,
        (success, error): (bool, Option<String>),
        artifacts: Vec<(String, String, i64)>,
    ) -> Self {
        Finished {
            index,
            unit: None,
            attempt,
            success,
            exit_code: None,
            error,
            artifacts,
            cancelled: false,
            usage: None,
            resumed: None,
        }
    }

    /// `success` or `failed`, as recorded and shown.
    pub(crate) fn status(&self) -> &'static str {
        if self.success { "success" } else { "failed" }
    }

    /// The result as the store records it, whichever driver ran it: the
    /// end of the stage's attempt, or of its unit.
    pub(crate) fn transition(&self, at: i64) -> Transition {
        let (index, status) = (as_i64(self.index), self.status().to_owned());
        let (exit_code, error, artifacts) =
            (self.exit_code, self.error.clone(), self.artifacts.clone());
        match &self.unit {
            Some(key) => Transition::UnitFinished {
                index,
                key: key.clone(),
                status,
                at,
                exit_code,
                error,
                artifacts,
            },
            None => Transition::AttemptFinished {
                index,
                attempt: self.attempt,
                status,
                at,
                exit_code,
                error,
                artifacts,
            },
        }
    }
}

/// How an attempt runs.
enum Launch {
    /// A process, and how to read its usage afterwards (agents only).
    Process {
        spec: Box<ProcessSpec>,
        success_codes: Vec<i32>,
        meter: Option<Meter>,
        /// Repository files the agent CLI keeps for itself (see
        /// `AccessRule::own_files`).
        own_files: Vec<String>,
        /// The profile's slots, when it limits how many run at once.
        slot: Option<(String, Arc<tokio::sync::Semaphore>)>,
    },
    /// A request to an OpenAI-compatible endpoint.
    Endpoint { request: ChatRequest, meter: Meter },
}

/// Runs the attempt and sends its reports.
pub(crate) async fn run(
    stage: PlanStage,
    attempt: Attempt,
    cancel: watch::Receiver<bool>,
    reports: mpsc::UnboundedSender<Report>,
) {
    if stage.spec.executor == Executor::WorkerQueue {
        let finished = crate::queued::run(&stage, &attempt, cancel).await;
        let _ = reports.send(Report::Finished(Box::new(redacted(finished))));
        return;
    }
    if attempt.accept_merge
        && crate::worktree::isolated(&stage)
        && let Some(finished) = crate::worktree::accept(&stage, &attempt).await
    {
        let _ = reports.send(Report::Finished(Box::new(redacted(finished))));
        return;
    }
    // An isolated agent runs in a git worktree of its own (`worktree.rs`).
    let worktree = if crate::worktree::isolated(&stage) {
        match crate::worktree::Worktree::prepare(&stage, &attempt).await {
            Ok(worktree) => Some(worktree),
            Err(error) => {
                let _ = reports.send(Report::Finished(Box::new(failed(&attempt, error))));
                return;
            }
        }
    } else {
        None
    };
    // A correction may continue its agent's session (`session.rs`); it
    // never runs in a worktree.
    let resume = worktree
        .is_none()
        .then(|| crate::session::resume(&stage, &attempt))
        .flatten();
    let finished = match resume {
        Some(resume) => crate::session::run(&stage, &attempt, resume, cancel, &reports).await,
        None => launch(&stage, &attempt, None, cancel, &reports, worktree.as_ref()).await,
    };
    let _ = reports.send(Report::Finished(Box::new(redacted(finished))));
}

/// Builds the attempt's command (continuing `resume`'s session, if given)
/// and runs it.
pub(crate) async fn launch(
    stage: &PlanStage,
    attempt: &Attempt,
    resume: Option<&crate::session::Resume>,
    cancel: watch::Receiver<bool>,
    reports: &mpsc::UnboundedSender<Report>,
    worktree: Option<&crate::worktree::Worktree>,
) -> Finished {
    match command(stage, attempt, worktree, resume) {
        Err(error) => failed(attempt, error),
        Ok(Launch::Process {
            spec,
            success_codes,
            meter,
            own_files,
            slot,
        }) => {
            let process = Process {
                spec: *spec,
                success_codes,
                meter,
                own_files,
                slot,
            };
            run_process(stage, attempt, &process, cancel, reports, worktree).await
        }
        Ok(Launch::Endpoint { request, meter }) => {
            crate::endpoint::execute(stage, attempt, request, &meter, cancel).await
        }
    }
}

/// The attempt's error without secrets: it is recorded and shown (a
/// process's output is redacted as it is logged; an endpoint's reply or a
/// message built from a value is not).
pub(crate) fn redacted(mut finished: Finished) -> Finished {
    if let Some(error) = &finished.error
        && let std::borrow::Cow::Owned(clean) =
            baton_executor::redact::Redactor::global().redact(error)
    {
        finished.error = Some(clean);
    }
    finished
}

/// A process to run for an attempt, as [`Launch::Process`] holds it.
struct Process {
    spec: ProcessSpec,
    success_codes: Vec<i32>,
    meter: Option<Meter>,
    own_files: Vec<String>,
    slot: Option<(String, Arc<tokio::sync::Semaphore>)>,
}

/// Runs the attempt's process. An agent that reported a rate limit or a
/// server error runs again after a wait, as its profile's `retry` says
/// (the earlier tries' logs are kept beside, `N.retry-K.stdout`); the
/// tokens of every try count.
async fn run_process(
    stage: &PlanStage,
    attempt: &Attempt,
    process: &Process,
    cancel: watch::Receiver<bool>,
    reports: &mpsc::UnboundedSender<Report>,
    worktree: Option<&crate::worktree::Worktree>,
) -> Finished {
    let log = process.spec.stdout_log.clone();
    let mut spent: Option<baton_executor::profile::Usage> = None;
    let mut retry = 0;
    loop {
        let Some(_slot) = take_slot(stage, attempt, process, &cancel, reports).await else {
            let mut finished = Finished::unsettled(attempt);
            finished.cancelled = true;
            finished.error = Some("cancelled".to_owned());
            finished.usage = spent;
            return finished;
        };
        let mut finished = execute(
            stage,
            attempt,
            (process.spec.clone(), &process.own_files),
            &process.success_codes,
            cancel.clone(),
            reports,
            worktree,
        )
        .await;
        let meter = process.meter.as_ref();
        let reported = meter
            .filter(|_| failed_on_its_own(&finished))
            .and_then(|meter| explain_failure(&mut finished, meter, &log));
        // Tokens are spent whether or not the attempt succeeded.
        if let Some(usage) = meter.and_then(|meter| meter.read(&log)) {
            spent.get_or_insert_with(Default::default).add(&usage);
        }
        let policy = meter.map(|meter| &meter.profile.retry);
        let wait = policy
            .zip(reported.as_deref())
            .and_then(|(policy, reported)| {
                let asked = baton_executor::profile::transient(reported)?;
                (retry < policy.attempts()).then(|| policy.wait(retry, asked))
            });
        let Some(wait) = wait else {
            finished.usage = spent;
            return finished;
        };
        retry += 1;
        keep_logs(&log, retry);
        let _ = reports.send(Report::Retry(Retry {
            label: unit_label(stage, attempt),
            index: attempt.index,
            unit: attempt.unit.clone(),
            attempt: attempt.attempt,
            retry,
            of: policy.map_or(0, baton_executor::profile::Retry::attempts),
            wait,
            reason: finished
                .error
                .clone()
                .unwrap_or_else(|| "failed".to_owned()),
        }));
        let mut cancelled = cancel.clone();
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            Ok(_) = cancelled.wait_for(|cancelled| *cancelled) => {
                finished.cancelled = true;
                finished.error = Some("cancelled".to_owned());
                finished.usage = spent;
                return finished;
            }
        }
    }
}

/// A slot of the attempt's profile, waited for (and said so) when all are
/// taken; `Some(None)` when the profile has no limit, `None` when the
/// attempt was cancelled meanwhile.
async fn take_slot(
    stage: &PlanStage,
    attempt: &Attempt,
    process: &Process,
    cancel: &watch::Receiver<bool>,
    reports: &mpsc::UnboundedSender<Report>,
) -> Option<Option<tokio::sync::OwnedSemaphorePermit>> {
    let Some((profile, slots)) = &process.slot else {
        return Some(None);
    };
    if let Ok(permit) = Arc::clone(slots).try_acquire_owned() {
        return Some(Some(permit));
    }
    let _ = reports.send(Report::Note {
        note: format!(
            "{}: waiting for a free `{profile}` slot (its profile's max_concurrent)",
            unit_label(stage, attempt)
        ),
    });
    let mut cancelled = cancel.clone();
    tokio::select! {
        permit = Arc::clone(slots).acquire_owned() => permit.ok().map(Some),
        Ok(_) = cancelled.wait_for(|cancelled| *cancelled) => None,
    }
}

/// The stage's name, with the unit for a fan-out child or a validator
/// (`report[c1:correct]`, as the unit is labelled everywhere; the unit's
/// own stage has a name of its own).
pub(crate) fn unit_label(stage: &PlanStage, attempt: &Attempt) -> String {
    let name = attempt
        .plan
        .stages
        .get(attempt.index)
        .map_or(stage.name(), PlanStage::name);
    match &attempt.unit {
        Some(unit) => format!("{name}[{unit}]"),
        None => name.to_owned(),
    }
}

/// Moves a try's logs aside (`N.stdout` → `N.retry-K.stdout`), so the next
/// try writes fresh ones and nothing is lost.
fn keep_logs(stdout_log: &Path, retry: u32) {
    for log in [
        stdout_log.to_path_buf(),
        stdout_log.with_extension("stderr"),
    ] {
        let (Some(stem), Some(extension)) = (log.file_stem(), log.extension()) else {
            continue;
        };
        let kept = log.with_file_name(format!(
            "{}.retry-{retry}.{}",
            stem.to_string_lossy(),
            extension.to_string_lossy()
        ));
        // A log that was never written has nothing to keep.
        let _ = std::fs::rename(&log, kept);
    }
}

/// Whether an attempt failed because its agent exited unsuccessfully, so
/// its output may say why. (Killed by one of baton's limits or a cancel,
/// there is no exit code; after a clean exit, an error event in the output
/// is one the agent recovered from.)
fn failed_on_its_own(finished: &Finished) -> bool {
    !finished.success && finished.exit_code.is_some_and(|code| code != 0)
}

/// Puts the agent's own account of its failure (from its output) first in
/// the attempt's error: "exited with code 1" alone says nothing. Returns
/// that account.
fn explain_failure(finished: &mut Finished, meter: &Meter, log: &Path) -> Option<String> {
    // Some CLIs (Gemini CLI) print the error object on stderr instead.
    let reported = meter
        .reported_error(log)
        .or_else(|| meter.reported_error(&log.with_extension("stderr")))?;
    let ours = finished.error.take().unwrap_or_default();
    let ours = ours.split(": ").next().unwrap_or_default();
    finished.error = Some(format!("the agent reported: {reported} ({ours})"));
    Some(reported)
}

/// An attempt that failed before anything ran.
fn failed(attempt: &Attempt, error: String) -> Finished {
    Finished::before_start(attempt.index, attempt.unit.clone(), attempt.attempt, error)
}

impl Finished {
    /// The attempt `attempt` of stage `index` (or its unit) failed with
    /// `error` before any process ran.
    pub(crate) fn before_start(
        index: usize,
        unit: Option<String>,
        attempt: i64,
        error: String,
    ) -> Finished {
        Finished {
            index,
            unit,
            attempt,
            success: false,
            exit_code: None,
            error: Some(error),
            artifacts: Vec::new(),
            cancelled: false,
            usage: None,
            resumed: None,
        }
    }
}

async fn execute(
    stage: &PlanStage,
    attempt: &Attempt,
    (mut spec, own_files): (ProcessSpec, &[String]),
    success_codes: &[i32],
    cancel: watch::Receiver<bool>,
    reports: &mpsc::UnboundedSender<Report>,
    worktree: Option<&crate::worktree::Worktree>,
) -> Finished {
    // What the declared outputs look like before the process runs: an
    // output counts as written by this attempt only if it is new or changed
    // since. (File times alone are not enough: the kernel stamps them from a
    // coarse clock that can lag the start of the attempt.)
    let before = snapshot(stage, &attempt.workspace);
    let index = attempt.index;
    let number = attempt.attempt;
    let report_started = |started: &Started| {
        let _ = reports.send(Report::Started {
            index,
            unit: attempt.unit.clone(),
            attempt: number,
            started: *started,
        });
    };
    let mut finished = Finished::unsettled(attempt);
    let guard = crate::guard::contain(&mut spec, attempt, stage, worktree).await;
    let outcome = match baton_executor::run(spec, cancel, report_started).await {
        Ok(outcome) => outcome,
        Err(error) => {
            finished.error = Some(format!("cannot start the stage's process: {error}"));
            return finished;
        }
    };
    finished.exit_code = outcome.exit_code.map(i64::from);
    if let Some(error) = process_error(&outcome, success_codes) {
        finished.cancelled = outcome.killed == Some(KillReason::Cancelled);
        finished.error = Some(error);
        return finished;
    }
    if let Some(guard) = guard
        && let Err(error) = guard.check(own_files).await
    {
        finished.error = Some(error);
        return finished;
    }
    if let Some(worktree) = worktree
        && let Err(error) = worktree.copy_back(stage, &attempt.workspace)
    {
        finished.error = Some(error);
        return finished;
    }
    match verify(stage, &attempt.workspace, &before, attempt.defer_checks) {
        Ok(artifacts) => {
            finished.success = true;
            finished.artifacts = artifacts;
        }
        Err(error) => finished.error = Some(error),
    }
    // A verified isolated stage is merged back before its dependants run.
    if let Some(worktree) = worktree.filter(|_| finished.success)
        && let Err(error) = worktree.integrate(stage, &attempt.run_id).await
    {
        finished.success = false;
        finished.artifacts.clear();
        finished.error = Some(error);
    }
    finished
}

fn process_error(outcome: &Outcome, success_codes: &[i32]) -> Option<String> {
    let tail = outcome.stderr_tail.trim();
    let tail = if tail.is_empty() {
        String::new()
    } else {
        format!(": {}", last_lines(tail, 5))
    };
    match outcome.killed {
        Some(KillReason::WallTimeout) => Some(format!(
            "timed out after {:.1} s; the process group was killed",
            outcome.elapsed.as_secs_f64()
        )),
        Some(KillReason::IdleTimeout) => Some(
            "produced no output for too long (idle timeout); the process group was killed"
                .to_owned(),
        ),
        Some(KillReason::OutputFlood) => Some(format!(
            "flooded {} bytes of output; the process group was killed",
            outcome.stdout_bytes + outcome.stderr_bytes
        )),
        Some(KillReason::Cancelled) => Some("cancelled".to_owned()),
        None => match (outcome.exit_code, outcome.signal) {
            (Some(code), _) if success_codes.contains(&code) => None,
            (Some(code), _) => Some(format!("exited with code {code}{tail}")),
            (None, Some(signal)) => Some(format!("killed by signal {signal}{tail}")),
            (None, None) => Some("ended without an exit status".to_owned()),
        },
    }
}

pub(crate) fn last_lines(text: &str, count: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(count)..].join(" | ")
}

/// The declared outputs exist, were written during this attempt, and pass
/// their checks (unless `defer_checks`); returns their hashes.
pub(crate) fn verify(
    stage: &PlanStage,
    workspace: &Path,
    before: &Snapshot,
    defer_checks: bool,
) -> Result<Vec<(String, String, i64)>, String> {
    let mut missing = Vec::new();
    let mut stale = Vec::new();
    let mut artifacts = Vec::new();
    let fresh = |path: &Path, metadata: &std::fs::Metadata| {
        before.get(path) != Some(&Fingerprint::of(metadata))
    };
    let escaping: Vec<String> = stage
        .spec
        .writes_to
        .iter()
        .filter_map(|declared| {
            let relative = output_path(&declared.value);
            let real = workspace::escapes(workspace, &relative)?;
            Some(format!("{relative} (to {})", real.display()))
        })
        .collect();
    if !escaping.is_empty() {
        return Err(format!(
            "an output leads outside the workspace through a symlink: {}; baton reads and writes a stage's outputs only inside its workspace (write real files there)",
            escaping.join(", ")
        ));
    }
    for declared in &stage.spec.writes_to {
        let relative = output_path(&declared.value);
        let path = workspace.join(&relative);
        if relative.ends_with('/') {
            // A declared directory: it must hold at least one file written
            // during this attempt; every file in it is recorded.
            let files = files_under(&path, MAX_DIRECTORY_FILES);
            if files.is_empty() {
                missing.push(relative);
                continue;
            }
            if !files.iter().any(|(file, metadata)| fresh(file, metadata)) {
                stale.push(relative.clone());
            }
            for (file, _) in files {
                let bytes = std::fs::read(&file)
                    .map_err(|error| format!("cannot read output {}: {error}", file.display()))?;
                let name = file
                    .strip_prefix(workspace)
                    .unwrap_or(&file)
                    .to_string_lossy()
                    .into_owned();
                artifacts.push(artifact(name, &bytes));
            }
            continue;
        }
        match std::fs::metadata(&path) {
            Err(_) => missing.push(relative),
            Ok(metadata) if !metadata.is_file() => missing.push(relative),
            Ok(metadata) => {
                // A file older than the attempt is a leftover from an
                // earlier attempt, not this attempt's output.
                if !fresh(&path, &metadata) {
                    stale.push(relative.clone());
                }
                let bytes = std::fs::read(&path)
                    .map_err(|error| format!("cannot read output {relative}: {error}"))?;
                artifacts.push(artifact(relative, &bytes));
            }
        }
    }
    if !missing.is_empty() {
        return Err(format!("exited 0 but did not write {}", missing.join(", ")));
    }
    if !stale.is_empty() {
        return Err(format!(
            "did not write {} during this attempt (it is unchanged since before the attempt)",
            stale.join(", ")
        ));
    }
    if !defer_checks {
        let failures = failed_checks(stage, workspace);
        if !failures.is_empty() {
            return Err(format!(
                "output checks failed: {}",
                failures
                    .iter()
                    .map(describe_check)
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
    }
    Ok(artifacts)
}

/// The stage's `validates_output` checks that fail on the files as they are.
pub(crate) fn failed_checks(stage: &PlanStage, workspace: &Path) -> Vec<checks::Finding> {
    let mut failures = Vec::new();
    for entry in &stage.spec.validates_output {
        let checks: Vec<_> = entry
            .checks
            .iter()
            .map(|check| check.value.clone())
            .collect();
        let path = crate::prompt::check_path(stage, &entry.path.value);
        failures.extend(
            checks::run(workspace, &path, &checks)
                .into_iter()
                .filter(|finding| !finding.passed),
        );
    }
    failures
}

/// A failed check in messages: `path check: why`.
pub(crate) fn describe_check(finding: &checks::Finding) -> String {
    format!("{} {}: {}", finding.path, finding.check, finding.message)
}

/// What identifies one version of a file. Serializable: the driver
/// protocol keeps a stage's snapshot on disk between `next` and `complete`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Fingerprint {
    inode: u64,
    size: u64,
    modified_ns: i128,
    changed_ns: i128,
}

impl Fingerprint {
    fn of(metadata: &std::fs::Metadata) -> Fingerprint {
        use std::os::unix::fs::MetadataExt;
        Fingerprint {
            inode: metadata.ino(),
            size: metadata.size(),
            modified_ns: i128::from(metadata.mtime()) * 1_000_000_000
                + i128::from(metadata.mtime_nsec()),
            changed_ns: i128::from(metadata.ctime()) * 1_000_000_000
                + i128::from(metadata.ctime_nsec()),
        }
    }
}

/// Fingerprints of every declared output file (and every file under a
/// declared output directory) that exists.
pub(crate) type Snapshot = std::collections::HashMap<PathBuf, Fingerprint>;

pub(crate) fn snapshot(stage: &PlanStage, workspace: &Path) -> Snapshot {
    let mut snapshot = Snapshot::new();
    for declared in &stage.spec.writes_to {
        let path = workspace.join(output_path(&declared.value));
        if declared.value.ends_with('/') {
            for (file, metadata) in files_under(&path, MAX_DIRECTORY_FILES) {
                snapshot.insert(file, Fingerprint::of(&metadata));
            }
        } else if let Ok(metadata) = std::fs::metadata(&path) {
            snapshot.insert(path, Fingerprint::of(&metadata));
        }
    }
    snapshot
}

/// The most files recorded from one declared output directory.
pub(crate) const MAX_DIRECTORY_FILES: usize = 10_000;

/// Regular files under `directory` (recursively, symlinks not followed), at
/// most `limit`, in a stable order.
pub(crate) fn files_under(directory: &Path, limit: usize) -> Vec<(PathBuf, std::fs::Metadata)> {
    let mut found = Vec::new();
    let mut pending = vec![directory.to_path_buf()];
    while let Some(current) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&current) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(metadata) = std::fs::symlink_metadata(entry.path()) else {
                continue;
            };
            if metadata.is_dir() {
                pending.push(entry.path());
            } else if metadata.is_file() && found.len() < limit {
                found.push((entry.path(), metadata));
            }
        }
    }
    found.sort_by(|left, right| left.0.cmp(&right.0));
    found
}

/// The process to run for the stage (with the exit codes that mean
/// success), or the endpoint to ask.
fn command(
    stage: &PlanStage,
    attempt: &Attempt,
    worktree: Option<&crate::worktree::Worktree>,
    resume: Option<&crate::session::Resume>,
) -> Result<Launch, String> {
    let spec = &stage.spec;
    if spec.fan_out.is_some() {
        return Err("fan_out stages are not run by this version of baton's engine".to_owned());
    }
    if spec.executor == Executor::WorkerQueue {
        return Err(
            "executor: worker_queue stages are not run by this version of baton's engine"
                .to_owned(),
        );
    }
    let logs = attempt.workspace.join("logs").join(stage.file_stem());
    let base = ProcessSpec {
        program: String::new(),
        args: Vec::new(),
        cwd: attempt.workspace.clone(),
        env: environment(stage, attempt),
        env_passthrough: Vec::new(),
        clear_env: false,
        stdin: Stdin::Null,
        stdout_log: logs.join(format!("{}.stdout", attempt.attempt)),
        stderr_log: logs.join(format!("{}.stderr", attempt.attempt)),
        log_cap_bytes: attempt.limits.log_cap,
        kill_after_bytes: attempt.limits.kill_after_bytes,
        wall_timeout: Some(attempt.limits.wall),
        idle_timeout: attempt.limits.idle,
        kill_grace: attempt.limits.kill_grace,
        // The marker must name this attempt alone: the executor kills every
        // process carrying it once the stage's leader exits, and stages of
        // one run run side by side. `BATON_RUN_ID` (in `environment`) is what
        // a resume uses to find everything a crashed driver left.
        marker: Some(("BATON_IDEMPOTENCY_KEY".to_owned(), idempotency_key(attempt))),
        contain: None,
    };
    match spec
        .script
        .as_ref()
        .filter(|_| spec.executor == Executor::Inline)
    {
        Some(script) => Ok(Launch::Process {
            spec: Box::new(shell_command(base, &script.value, attempt)?),
            success_codes: vec![0],
            meter: None,
            own_files: Vec::new(),
            slot: None,
        }),
        None => agent_command(base, stage, attempt, worktree, resume),
    }
}

fn shell_command(
    mut base: ProcessSpec,
    script: &str,
    attempt: &Attempt,
) -> Result<ProcessSpec, String> {
    let substituted = substitute_script(script, attempt)?;
    let (program, args) = baton_executor::shell::command_for_script(&substituted.script);
    base.program = program;
    base.args = args;
    base.env.extend(substituted.env);
    Ok(base)
}

/// The script with `{workspace}` and every parameter (and fan-out item
/// value) moved into variables it refers to, or why a value cannot go
/// where the script puts it.
pub(crate) fn substitute_script(
    script: &str,
    attempt: &Attempt,
) -> Result<baton_executor::shell::Substituted, String> {
    let workspace_text = attempt.workspace.to_string_lossy().into_owned();
    let lookup = |name: &str| {
        if name == "workspace" {
            Some(workspace_text.as_str())
        } else {
            attempt.params.get(name).map(String::as_str)
        }
    };
    baton_executor::shell::substitute(script, lookup)
        .map_err(|error| format!("cannot run the script: {error}"))
}

/// An agent stage (or an inline stage without a script): the role's profile
/// from `baton.toml` runs with a prompt baton renders and first writes to
/// `dispatch/NNN-name.json`; continuing `resume`'s session, its prompt.
fn agent_command(
    mut base: ProcessSpec,
    stage: &PlanStage,
    attempt: &Attempt,
    worktree: Option<&crate::worktree::Worktree>,
    resume: Option<&crate::session::Resume>,
) -> Result<Launch, String> {
    let spec = &stage.spec;
    let role = if spec.executor == Executor::Inline {
        "inline"
    } else {
        spec.agent.role.as_str()
    };
    let no_profile = || {
        format!(
            "no agent profile for role '{role}': add [agents.{role}] or [agents.default] with a profile to baton.toml (`baton agents check` lists the profiles that work here)"
        )
    };
    let config = attempt.agents.as_ref().ok_or_else(no_profile)?;
    let agent = config.agent(role).map_err(|_| no_profile())?;
    let prompt = match (resume, worktree) {
        (Some(resume), _) => resume.prompt.clone(),
        (None, None) => crate::prompt::render(&attempt.plan, stage, &attempt.workspace),
        (None, Some(worktree)) => worktree.prompt(&attempt.plan, stage),
    };
    let dispatch_path = attempt
        .workspace
        .join("dispatch")
        .join(format!("{}.json", stage.file_stem()));
    // The record of the dispatch keeps no secret a prompt was given; the
    // prompt file is what the agent reads.
    let recorded = baton_executor::redact::Redactor::global();
    workspace::write_json(
        &dispatch_path,
        &crate::prompt::dispatch(
            &attempt.plan,
            stage,
            &attempt.workspace,
            &recorded.redact(&prompt),
        ),
    )
    .map_err(|error| format!("cannot write {}: {error}", dispatch_path.display()))?;
    let prompt_file = attempt
        .workspace
        .join("dispatch")
        .join(format!("{}.prompt.md", stage.file_stem()));
    workspace::write_atomic(&prompt_file, prompt.as_bytes())
        .map_err(|error| format!("cannot write {}: {error}", prompt_file.display()))?;
    let model = spec
        .agent
        .model
        .clone()
        .or_else(|| agent.model.map(str::to_owned))
        .or_else(|| agent.profile.model.clone());
    let meter = Meter {
        profile: agent.profile.clone(),
        model: model.clone(),
        agents: Arc::clone(config),
    };
    if agent.profile.kind == Kind::OpenaiChat {
        let request = ChatRequest {
            base_url: agent.profile.base_url.clone().unwrap_or_default(),
            model,
            api_key_env: agent.profile.api_key_env.clone(),
            prompt,
            workspace: attempt.workspace.clone(),
            allowed: spec
                .writes_to
                .iter()
                .map(|declared| output_path(&declared.value))
                .collect(),
            response_log: base.stdout_log,
            wall_timeout: agent.profile.limits.wall.unwrap_or(attempt.limits.wall),
        };
        return Ok(Launch::Endpoint { request, meter });
    }
    let request = AgentRequest {
        prompt,
        prompt_file: Some(prompt_file),
        model,
        tools: spec.agent.tools.clone(),
        permission_mode: None,
        cwd: attempt.project_dir.clone(),
        options: std::collections::BTreeMap::new(),
        access: Some(access_request(stage, attempt, worktree)),
        resume: resume.map(|resume| resume.session.clone()),
    };
    let command = baton_executor::profile::command_line(agent.profile, &request)
        .map_err(|error| format!("agent profile '{}': {error}", agent.profile_name))?;
    for (path, content) in &command.files {
        workspace::write_atomic(path, content.as_bytes())
            .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
    }
    base.cwd = command.cwd;
    base.program = command.program;
    base.args = command.args;
    base.stdin = command.stdin.map_or(Stdin::Null, Stdin::Bytes);
    base.clear_env = true;
    base.env_passthrough = agent
        .profile
        .env_passthrough
        .iter()
        .chain(&agent.profile.env_passthrough_extra)
        .cloned()
        .collect();
    base.env.extend(
        agent
            .profile
            .env
            .iter()
            .map(|(key, value)| (key.clone(), value.clone()))
            .chain(command.env),
    );
    let limits = &agent.profile.limits;
    if let Some(wall) = limits.wall {
        base.wall_timeout = Some(wall);
    }
    if limits.idle.is_some() {
        base.idle_timeout = limits.idle;
    }
    if let Some(grace) = limits.kill_grace {
        base.kill_grace = grace;
    }
    Ok(Launch::Process {
        success_codes: agent.profile.success.exit_codes.clone(),
        spec: Box::new(base),
        meter: Some(meter),
        own_files: command.own_files,
        slot: attempt
            .slots
            .0
            .get(agent.profile_name)
            .map(|slots| (agent.profile_name.to_owned(), Arc::clone(slots))),
    })
}

/// Where an agent works and what it may change: in the project directory
/// (or its worktree), with the run's workspace writable whatever the
/// access, and the repository writable only for read-write stages.
fn access_request(
    stage: &PlanStage,
    attempt: &Attempt,
    worktree: Option<&crate::worktree::Worktree>,
) -> baton_executor::profile::AccessRequest {
    use baton_executor::profile::AccessMode;
    let read_only = stage.spec.agent.access == baton_workflow::schema::Access::ReadOnly;
    let (mode, project, workspace) = match worktree {
        Some(tree) if read_only => (AccessMode::ReadOnly, tree.path.clone(), tree.view()),
        Some(tree) => (AccessMode::Worktree, tree.path.clone(), tree.view()),
        None if read_only => (
            AccessMode::ReadOnly,
            attempt.project_dir.clone(),
            attempt.workspace.clone(),
        ),
        None => (
            AccessMode::ReadWrite,
            attempt.project_dir.clone(),
            attempt.workspace.clone(),
        ),
    };
    baton_executor::profile::AccessRequest {
        mode,
        project,
        workspace,
        files_dir: attempt
            .workspace
            .join("dispatch")
            .join(format!("{}.access", stage.file_stem())),
    }
}

/// `run/stage/item/attempt`, stable across retries of the same attempt.
pub(crate) fn idempotency_key(attempt: &Attempt) -> String {
    format!(
        "{}/{}/{}/{}",
        attempt.run_id,
        attempt.plan.stages[attempt.index].name(),
        attempt.unit.as_deref().unwrap_or("-"),
        attempt.attempt
    )
}

/// Variables every stage process sees (besides the idempotency key, set as
/// the executor's marker).
pub(crate) fn environment(stage: &PlanStage, attempt: &Attempt) -> Vec<(String, String)> {
    let mut env = vec![
        (RUN_MARKER.to_owned(), attempt.run_id.clone()),
        ("BATON_STAGE".to_owned(), stage.name().to_owned()),
        ("BATON_ATTEMPT".to_owned(), attempt.attempt.to_string()),
        (
            "BATON_WORKSPACE".to_owned(),
            attempt.workspace.to_string_lossy().into_owned(),
        ),
        (
            "BATON_PROJECT_DIR".to_owned(),
            attempt.project_dir.to_string_lossy().into_owned(),
        ),
    ];
    if let Some(unit) = &attempt.unit {
        env.push(("BATON_UNIT".to_owned(), unit.clone()));
    }
    env.extend(attempt.env.iter().cloned());
    env
}

/// Writes `{}` into every `writes_to` file of a stage skipped by `when`, so
/// readers find a file (the reference's sentinel).
pub(crate) fn write_skip_sentinels(stage: &PlanStage, workspace: &Path) -> crate::Result<()> {
    for declared in &stage.spec.writes_to {
        workspace::write_atomic(&workspace.join(output_path(&declared.value)), b"{}\n").map_err(
            |source| crate::Error::Workspace {
                path: workspace.to_path_buf(),
                source,
            },
        )?;
    }
    Ok(())
}
