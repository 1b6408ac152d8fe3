//! Running one claimed job through the executor and turning how it ended
//! into an outcome for the store.

use std::path::{Path, PathBuf};
use std::time::Duration;

use baton_executor::{KillReason, Outcome, ProcessSpec, Stdin};
use baton_store::{JobOutcome, JobRow};
use serde_json::json;
use tokio::sync::watch;

use super::options::WorkerOptions;
use super::{ScriptPayload, backoff, kind};
use crate::clock::millis;

/// How much of stdout and stderr a result keeps, and of stderr a failure
/// reason (the reference keeps the last 2000 characters).
const TAIL_BYTES: usize = 2000;

/// Failure text starting with this makes the job dead at once.
pub(crate) const TERMINAL_PREFIX: &str = "terminal-";
/// Failure text starting with this puts the job back for later without
/// counting an attempt.
pub(crate) const DEFERRED_PREFIX: &str = "deferred-";

/// Runs `job` to its end (or until `cancel`) and says how it ended.
/// `released` is read after a cancel: true when the worker is giving the
/// job back (stopping), false when it lost the lease.
pub(crate) async fn run(
    job: &JobRow,
    options: &WorkerOptions,
    cancel: watch::Receiver<bool>,
    released: impl Fn() -> bool,
) -> JobOutcome {
    if job.kind != kind::SHELL && job.kind != kind::WORKFLOW_STAGE {
        return JobOutcome::Terminal {
            error: format!("unknown job kind '{}'", job.kind),
            result: None,
        };
    }
    let payload: ScriptPayload = match serde_json::from_str(&job.payload) {
        Ok(payload) => payload,
        Err(error) => {
            return JobOutcome::Terminal {
                error: format!("the job's payload is not a script payload: {error}"),
                result: None,
            };
        }
    };
    if payload.script.trim().is_empty() {
        return JobOutcome::Terminal {
            error: "the job has no script".to_owned(),
            result: None,
        };
    }
    let spec = spec(job, &payload, options);
    let stdout_log = spec.stdout_log.clone();
    let stderr_log = spec.stderr_log.clone();
    let outcome = match baton_executor::run(spec, cancel, |_| {}).await {
        Ok(outcome) => outcome,
        Err(error) => {
            return JobOutcome::Failed {
                error: format!("cannot start the job's process: {error}"),
                result: None,
                retry_in_ms: millis(backoff(
                    job.attempts,
                    options.backoff_base,
                    options.backoff_max,
                )),
            };
        }
    };
    let result = json!({
        "exit_code": outcome.exit_code,
        "signal": outcome.signal,
        "killed": outcome.killed.map(|reason| reason.to_string()),
        "duration_ms": millis(outcome.elapsed),
        "stdout_tail": tail_of(&stdout_log).await,
        "stderr_tail": last_chars(&outcome.stderr_tail, TAIL_BYTES),
        "stdout_log": stdout_log.to_string_lossy(),
        "stderr_log": stderr_log.to_string_lossy(),
        "worker": options.owner,
        "epoch": job.lease_epoch,
    })
    .to_string();
    classify(job, &outcome, result, options, released())
}

/// The outcome for how the process ended.
fn classify(
    job: &JobRow,
    outcome: &Outcome,
    result: String,
    options: &WorkerOptions,
    released: bool,
) -> JobOutcome {
    if outcome.success() {
        return JobOutcome::Succeeded { result };
    }
    if outcome.killed == Some(KillReason::Cancelled) && released {
        return JobOutcome::Released {
            reason: format!("released unfinished by {} (stopping)", options.owner),
        };
    }
    let stderr = last_chars(outcome.stderr_tail.trim(), TAIL_BYTES);
    let text = if let Some(reason) = outcome.killed {
        format!("killed: {reason}")
    } else if !stderr.is_empty() {
        stderr.to_owned()
    } else if let Some(code) = outcome.exit_code {
        format!("exit code {code}")
    } else {
        format!("killed by signal {}", outcome.signal.unwrap_or_default())
    };
    // The reference looks at the start of the failure text; a script that
    // printed something first still means it when its last line says so.
    let marked = |prefix: &str| {
        text.starts_with(prefix)
            || text
                .lines()
                .rev()
                .find(|line| !line.trim().is_empty())
                .is_some_and(|line| line.trim_start().starts_with(prefix))
    };
    if outcome.killed.is_none() && marked(TERMINAL_PREFIX) {
        JobOutcome::Terminal {
            error: text,
            result: Some(result),
        }
    } else if outcome.killed.is_none() && marked(DEFERRED_PREFIX) {
        JobOutcome::Deferred {
            error: text,
            retry_in_ms: millis(backoff(
                job.deferrals + 1,
                options.backoff_base,
                options.backoff_max,
            )),
        }
    } else {
        let error = if job.attempts >= job.max_attempts {
            format!(
                "attempt {} of {} failed, no attempts left: {text}",
                job.attempts, job.max_attempts
            )
        } else {
            text
        };
        JobOutcome::Failed {
            error,
            result: Some(result),
            retry_in_ms: millis(backoff(
                job.attempts,
                options.backoff_base,
                options.backoff_max,
            )),
        }
    }
}

/// The process for `job`: its own group, capped logs under the jobs log
/// directory (one pair per claim), the wall timeout and a marker naming
/// this claim so escaped descendants die with it.
fn spec(job: &JobRow, payload: &ScriptPayload, options: &WorkerOptions) -> ProcessSpec {
    let (program, args) = baton_executor::shell::command_for_script(&payload.script);
    let logs = options.log_dir.join(job.id.to_string());
    let mut env: Vec<(String, String)> = payload
        .env
        .iter()
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    env.extend([
        ("BATON_JOB_ID".to_owned(), job.id.to_string()),
        ("BATON_JOB_EPOCH".to_owned(), job.lease_epoch.to_string()),
        ("BATON_JOB_ATTEMPT".to_owned(), job.attempts.to_string()),
        ("BATON_JOB_QUEUE".to_owned(), job.queue.clone()),
        ("BATON_WORKER".to_owned(), options.owner.clone()),
        (
            "BATON_WORKER_PID".to_owned(),
            std::process::id().to_string(),
        ),
    ]);
    if let Some(key) = &job.idempotency_key {
        env.push(("BATON_IDEMPOTENCY_KEY".to_owned(), key.clone()));
    }
    ProcessSpec {
        program,
        args,
        cwd: payload
            .cwd
            .as_ref()
            .map_or_else(|| options.cwd.clone(), PathBuf::from),
        env,
        env_passthrough: Vec::new(),
        clear_env: false,
        stdin: Stdin::Null,
        stdout_log: logs.join(format!("{}.stdout", job.lease_epoch)),
        stderr_log: logs.join(format!("{}.stderr", job.lease_epoch)),
        log_cap_bytes: options.log_cap,
        kill_after_bytes: Some(options.log_cap.saturating_mul(64)),
        wall_timeout: Some(
            payload
                .timeout_secs
                .map_or(options.job_timeout, Duration::from_secs),
        ),
        idle_timeout: None,
        kill_grace: options.kill_grace,
        marker: Some((
            "BATON_JOB_MARKER".to_owned(),
            format!("{}/{}/{}", options.owner, job.id, job.lease_epoch),
        )),
        contain: None,
    }
}

/// The last `limit` bytes of `text`, cut at a character boundary.
fn last_chars(text: &str, limit: usize) -> &str {
    &text[text.ceil_char_boundary(text.len().saturating_sub(limit))..]
}

/// The end of a log file ("" when the job wrote nothing: the executor
/// creates a log on its first byte).
async fn tail_of(path: &Path) -> String {
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    let Ok(mut file) = tokio::fs::File::open(path).await else {
        return String::new();
    };
    let length = file.metadata().await.map_or(0, |meta| meta.len());
    // Only the end is read: a log may be megabytes long.
    let from = length.saturating_sub(TAIL_BYTES as u64);
    let mut bytes = Vec::new();
    if file.seek(std::io::SeekFrom::Start(from)).await.is_err()
        || file.read_to_end(&mut bytes).await.is_err()
    {
        return String::new();
    }
    let text = String::from_utf8_lossy(&bytes);
    last_chars(&text, TAIL_BYTES).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_chars_respects_char_boundaries() {
        assert_eq!(last_chars("abc", 2), "bc");
        assert_eq!(last_chars("é", 1), "");
        assert_eq!(last_chars("abc", 10), "abc");
    }
}
