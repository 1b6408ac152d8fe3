//! One attempt of one stage: build the command ([`command`]), run it through
//! the executor, and verify the result ([`crate::outputs`]). The attempt
//! only reports ([`crate::attempt`]); the coordinator records.
//!
//! A stage succeeds only if its process exits 0, every `writes_to` file
//! exists and was written during this attempt, and every `validates_output`
//! check passes. Then the hashes of its outputs are recorded, so that a
//! later change to them is noticed.

mod command;

use std::path::Path;
use std::sync::Arc;

use baton_executor::git::last_lines;
use baton_executor::{KillReason, Outcome, ProcessSpec, Started};
use baton_workflow::plan::PlanStage;
use baton_workflow::schema::Executor;
use tokio::sync::{mpsc, watch};

use crate::attempt::{Attempt, Finished, Report, redacted, unit_label};
use crate::outputs::{snapshot, verify_attempt};
use crate::retries::Retry;
use crate::session::{self, Resume};
use crate::usage::Meter;
use crate::worktree::{Place, Worktree};
use command::{Launch, Process, command};

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
        match Worktree::create(&stage, &Place::of(&attempt)).await {
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
        .then(|| session::resume(&stage, &attempt))
        .flatten();
    let finished = match resume {
        Some(resume) => resumed(&stage, &attempt, resume, cancel, &reports).await,
        None => launch(&stage, &attempt, None, cancel, &reports, worktree.as_ref()).await,
    };
    let _ = reports.send(Report::Finished(Box::new(redacted(finished))));
}

/// Builds the attempt's command (continuing `resume`'s session, if given)
/// and runs it.
pub(crate) async fn launch(
    stage: &PlanStage,
    attempt: &Attempt,
    resume: Option<&Resume>,
    cancel: watch::Receiver<bool>,
    reports: &mpsc::UnboundedSender<Report>,
    worktree: Option<&Worktree>,
) -> Finished {
    match command(stage, attempt, worktree, resume) {
        Err(error) => failed(attempt, error),
        Ok(Launch::Process(process)) => {
            run_process(stage, attempt, &process, cancel, reports, worktree).await
        }
        Ok(Launch::Endpoint { request, meter }) => {
            crate::endpoint::execute(stage, attempt, request, &meter, cancel).await
        }
    }
}

/// Runs the attempt in the session `resume` names; if the CLI does not
/// have it, once more in a fresh session with the full prompt (`session.rs`).
async fn resumed(
    stage: &PlanStage,
    attempt: &Attempt,
    resume: Resume,
    cancel: watch::Receiver<bool>,
    reports: &mpsc::UnboundedSender<Report>,
) -> Finished {
    let label = unit_label(stage, attempt);
    note(
        reports,
        format!(
            "{label}: continues the agent's session {} ({}), sending only the findings",
            resume.session, resume.profile
        ),
    );
    let mut continued = launch(
        &resume.stage,
        attempt,
        Some(&resume),
        cancel.clone(),
        reports,
        None,
    )
    .await;
    let stdout = session::stage_log(stage, attempt, "stdout");
    let stderr = session::stage_log(stage, attempt, "stderr");
    let Some(words) = session::not_found(&resume, &continued, &stderr) else {
        continued.resumed = Some(resume.session);
        return continued;
    };
    session::set_aside(&[stdout, stderr]);
    note(
        reports,
        format!(
            "{label}: {} has no session {} (\"{words}\"); a fresh session starts with the full prompt",
            resume.profile, resume.session
        ),
    );
    let mut fresh = launch(stage, attempt, None, cancel, reports, None).await;
    // The failed try's tokens count too, as a retry's do.
    if let Some(spent) = continued.usage {
        let mut usage = spent;
        if let Some(later) = &fresh.usage {
            usage.add(later);
        }
        fresh.usage = Some(usage);
    }
    fresh
}

fn note(reports: &mpsc::UnboundedSender<Report>, note: String) {
    let _ = reports.send(Report::Note { note });
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
    worktree: Option<&Worktree>,
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
            (ProcessSpec::clone(&process.spec), &process.own_files),
            &process.success_codes,
            cancel.clone(),
            reports,
            worktree,
        )
        .await;
        let meter = process.meter.as_ref();
        // Only an agent that exited unsuccessfully may say why in its
        // output: killed by one of baton's limits or a cancel, there is no
        // exit code; after a clean exit, an error event in the output is one
        // the agent recovered from.
        let reported = meter
            .filter(|_| !finished.success && finished.exit_code.is_some_and(|code| code != 0))
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

async fn execute(
    stage: &PlanStage,
    attempt: &Attempt,
    (mut spec, own_files): (ProcessSpec, &[String]),
    success_codes: &[i32],
    cancel: watch::Receiver<bool>,
    reports: &mpsc::UnboundedSender<Report>,
    worktree: Option<&Worktree>,
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
    verify_attempt(&mut finished, stage, attempt, &before);
    // A verified isolated stage is merged back before its dependants run.
    if let Some(worktree) = worktree.filter(|_| finished.success)
        && let Err(error) = worktree.integrate(stage, &attempt.run_id, None).await
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
