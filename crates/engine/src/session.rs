//! Continuing an agent's own session (docs/agents.md, "Sessions").
//!
//! A correction is the producing stage's agent asked to fix what was found
//! in its work. When the unit's program named the attempt that did the work
//! (`work/validation/session.rs`), that attempt's output reported a session
//! id, and the profile can resume (the `resume` capability and a `[resume]`
//! rule), the CLI continues that session: in the same working directory and
//! with the same access as the session had, sent only what is new — the
//! findings and where to log the fixes — since the task, the inputs and the
//! work are in the session already. That costs fewer tokens and keeps what
//! the agent learned.
//!
//! When the CLI has no such session (its own error, as the rule's
//! `not_found` words it), the attempt runs once more, in a fresh session
//! with the full prompt and the correction's own access, and the run's
//! progress says so. It falls back once, never in a loop.

use std::path::{Path, PathBuf};

use baton_executor::profile::Kind;
use baton_workflow::plan::PlanStage;

use crate::attempt::{Attempt, Finished};

/// A session this attempt continues.
#[derive(Debug)]
pub(crate) struct Resume {
    /// The session's id, as the agent reported it.
    pub(crate) session: String,
    /// The prompt to send in it.
    pub(crate) prompt: String,
    /// The stage as the session ran: its access.
    pub(crate) stage: PlanStage,
    /// The profile's name, for messages.
    pub(crate) profile: String,
    /// The CLI's words for a session it does not have.
    not_found: Vec<String>,
}

/// The session `attempt` continues, if it may continue one: its program
/// planned one, the profile can resume, and the earlier attempt's output
/// names the session.
pub(crate) fn resume(stage: &PlanStage, attempt: &Attempt) -> Option<Resume> {
    let continuation = attempt.continues.as_ref()?;
    let agent = attempt
        .agents
        .as_ref()?
        .agent(&stage.spec.agent.role)
        .ok()?;
    if agent.profile.kind != Kind::Cli {
        return None;
    }
    let rule = agent.profile.resumes()?;
    let session = crate::usage::session(agent.profile, &continuation.log)?;
    let mut resumed = stage.clone();
    std::sync::Arc::make_mut(&mut resumed.spec).agent.access = continuation.access;
    let prompt = crate::prompt::continued(&resumed, &attempt.workspace, &continuation.task);
    Some(Resume {
        session,
        prompt,
        stage: resumed,
        profile: agent.profile_name.to_owned(),
        not_found: rule.not_found.clone(),
    })
}

/// The log of this attempt's process (`N.stdout`, `N.stderr`).
pub(crate) fn stage_log(stage: &PlanStage, attempt: &Attempt, stream: &str) -> PathBuf {
    attempt
        .workspace
        .join("logs")
        .join(stage.file_stem())
        .join(format!("{}.{stream}", attempt.attempt))
}

/// The most of a stderr log searched for the CLI's words.
const MAX_STDERR_BYTES: u64 = 1024 * 1024;

/// Which of the CLI's not-found words its stderr holds, when the resumed
/// process failed on its own (a cancel or one of baton's limits is not the
/// CLI's answer).
pub(crate) fn not_found<'a>(
    resume: &'a Resume,
    finished: &Finished,
    stderr: &Path,
) -> Option<&'a str> {
    let failed = !finished.success
        && !finished.cancelled
        && finished.exit_code.is_some_and(|code| code != 0);
    if !failed {
        return None;
    }
    let text = crate::usage::read_head(stderr, MAX_STDERR_BYTES)?;
    resume
        .not_found
        .iter()
        .find(|words| !words.is_empty() && text.contains(words.as_str()))
        .map(String::as_str)
}

/// Moves the failed resume's logs aside (`N.stdout` → `N.resumed.stdout`),
/// so the fresh session writes its own and nothing is lost.
pub(crate) fn set_aside(logs: &[PathBuf]) {
    for log in logs {
        let (Some(stem), Some(extension)) = (log.file_stem(), log.extension()) else {
            continue;
        };
        let kept = log.with_file_name(format!(
            "{}.resumed.{}",
            stem.to_string_lossy(),
            extension.to_string_lossy()
        ));
        // A log that was never written has nothing to keep.
        let _ = std::fs::rename(log, kept);
    }
}
