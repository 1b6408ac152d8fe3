//! `baton status`, `logs`: reading what the store recorded of a run.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use super::errors::store_error;
use super::run_ref;
use super::runtime::block_on_exit;
use super::status_report::render;
use crate::args::{Format, LogsArgs, StatusArgs};
use crate::{exit_code, output};

/// `baton status RUN`: `{run_id, status, stages: [{stage, status, duration_ms, …}]}`;
/// with `--watch`, redrawn until the run stops.
pub(crate) fn status(args: &StatusArgs) -> u8 {
    if args.watch {
        return super::watch::watch(args);
    }
    let args = &args.run;
    block_on_exit(async {
        let (store, run_id) = run_ref::open_with_run(&args.run).await?;
        output::stdout(&render(&store, &run_id, args.format.format()).await?);
        Ok(exit_code::SUCCESS)
    })
}

/// What to say of a run whose driver is gone.
fn driver_gone_note(run_id: &str) -> String {
    format!(
        "run {run_id} is recorded as running, but no process drives it (its driver was stopped or crashed): `baton resume {run_id}` continues it"
    )
}

/// Whether a run with this status has stopped (for now).
fn ended(status: &str) -> bool {
    matches!(
        status,
        "success" | "failed" | "cancelled" | "awaiting_human" | "rejected"
    )
}

/// `baton logs RUN [STAGE] [--follow] [--raw]`.
pub(crate) fn logs(args: &LogsArgs) -> u8 {
    block_on_exit(async {
        let (store, run_id) = run_ref::open_with_run(&args.run).await?;
        let mut offsets: std::collections::HashMap<PathBuf, u64> = std::collections::HashMap::new();
        loop {
            let (run, stages, units) = tokio::try_join!(
                store.run(&run_id),
                store.stages(&run_id),
                store.units(&run_id)
            )
            .map_err(|error| store_error(&error))?;
            if let Some(wanted) = &args.stage
                && !stages.iter().any(|stage| &stage.name == wanted)
                && !units.iter().any(|unit| &unit.label == wanted)
            {
                output::stderr_line(&format!(
                    "error: run {} has no stage or unit named '{wanted}'",
                    run_id
                ));
                output::stderr_line(&format!(
                    "hint: `baton status {}` lists its stages; a fan-out child is named like `stage[key]`",
                    run_id
                ));
                return Err(exit_code::INVALID_WORKFLOW);
            }
            let workspace = PathBuf::from(&run.workspace);
            let sources = baton_engine::view::logs::sources(
                &workspace,
                &stages,
                &units,
                args.stage.as_deref(),
            );
            if args.format.format() == Format::Json && !args.follow {
                let entries: Vec<_> = sources
                    .iter()
                    .map(|source| {
                        let stdout = std::fs::read_to_string(&source.stdout).unwrap_or_default();
                        json!({
                            "stage": source.label,
                            "attempt": source.attempt,
                            "transcript": baton_executor::profile::transcript::render(&stdout),
                            "stdout": stdout,
                            "stderr": std::fs::read_to_string(&source.stderr).unwrap_or_default(),
                        })
                    })
                    .collect();
                output::stdout(&output::json(&entries));
                return Ok(exit_code::SUCCESS);
            }
            for source in &sources {
                for (path, stream) in [(&source.stdout, "stdout"), (&source.stderr, "stderr")] {
                    let offset = offsets.entry(path.clone()).or_insert(0);
                    let Ok(bytes) = std::fs::read(path) else {
                        continue;
                    };
                    let start = usize::try_from(*offset).unwrap_or(0).min(bytes.len());
                    // While the run goes on, whole lines only: an agent's
                    // event is read once it is complete.
                    let end = if args.follow && !ended(&run.status) {
                        bytes[start..]
                            .iter()
                            .rposition(|&byte| byte == b'\n')
                            .map_or(start, |last| start + last + 1)
                    } else {
                        bytes.len()
                    };
                    if start == end {
                        continue;
                    }
                    let text = String::from_utf8_lossy(&bytes[start..end]);
                    *offset = end as u64;
                    let transcript = (stream == "stdout" && !args.raw)
                        .then(|| baton_executor::profile::transcript::render(&text))
                        .flatten();
                    let (text, stream) = match &transcript {
                        Some(transcript) => (transcript.as_str(), "agent"),
                        None => (text.as_ref(), stream),
                    };
                    let mut chunk = String::new();
                    for line in text.lines() {
                        chunk.push_str(&format!("{} | {stream} | {line}\n", source.label));
                    }
                    output::stdout(&chunk);
                }
            }
            if !args.follow || ended(&run.status) {
                return Ok(exit_code::SUCCESS);
            }
            if baton_engine::driver_gone(&store, &run_id)
                .await
                .unwrap_or(false)
            {
                output::stderr_line(&driver_gone_note(&run_id));
                return Ok(exit_code::RUN_FAILED);
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    })
}
