//! `baton runs`, `status`, `logs`: reading what the store recorded.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use super::run::{block_on, chain, open_store};
use crate::args::{Format, FormatOnly, LogsArgs, RunRef};
use crate::{exit_code, output};

fn utc(ms: i64) -> String {
    baton_engine::workspace::utc(ms)
}

fn store_error(error: &baton_store::Error) -> u8 {
    output::stderr_line(&format!("error: {}", chain(error)));
    if matches!(error, baton_store::Error::NoSuchRun(_)) {
        output::stderr_line("hint: `baton runs` lists the recorded runs");
        exit_code::INVALID_WORKFLOW
    } else {
        exit_code::STORE_UNAVAILABLE
    }
}

/// `baton runs`: `[{run_id, workflow, status, started_at}]`, oldest first.
pub(crate) fn runs(args: &FormatOnly) -> u8 {
    block_on(async {
        let store = match open_store().await {
            Ok(store) => store,
            Err(code) => return code,
        };
        let runs = match store.runs().await {
            Ok(runs) => runs,
            Err(error) => return store_error(&error),
        };
        let text = match args.format.format() {
            Format::Json | Format::Yaml => {
                let rows: Vec<_> = runs
                    .iter()
                    .map(|run| json!({"run_id": run.run_id, "workflow": run.workflow, "status": run.status, "started_at": utc(run.created_at)}))
                    .collect();
                if args.format.format() == Format::Json {
                    output::json(&rows)
                } else {
                    output::yaml(&rows)
                }
            }
            Format::Table => {
                if runs.is_empty() {
                    output::stderr_line("No runs yet; start one with `baton run WORKFLOW`");
                }
                let rows: Vec<Vec<String>> = runs
                    .iter()
                    .map(|run| {
                        vec![
                            run.run_id.clone(),
                            run.workflow.clone(),
                            run.status.clone(),
                            utc(run.created_at),
                        ]
                    })
                    .collect();
                output::table(&["run_id", "workflow", "status", "started_at"], &rows)
            }
        };
        output::stdout(&text);
        exit_code::SUCCESS
    })
}

/// `baton status RUN`: `{run_id, status, stages: [{stage, status, duration_ms, …}]}`.
pub(crate) fn status(args: &RunRef) -> u8 {
    block_on(async {
        let store = match open_store().await {
            Ok(store) => store,
            Err(code) => return code,
        };
        let (run, stages) = match tokio::try_join!(store.run(&args.run), store.stages(&args.run)) {
            Ok(found) => found,
            Err(error) => return store_error(&error),
        };
        // Gate decisions are extra detail: a failure to read them hides them.
        let gates = baton_engine::gate::list(&store, Some(&args.run))
            .await
            .unwrap_or_default();
        let text = match args.format.format() {
            Format::Json | Format::Yaml => {
                let value = json!({
                    "gates": gates.iter().map(|gate| {
                        let decision = gate.decision.as_ref();
                        json!({
                            "stage": gate.stage,
                            "status": gate.state.as_str(),
                            "decided_by": decision.map(|row| row.decided_by.clone()),
                            "decided_at": decision.map(|row| utc(row.decided_at)),
                            "comment": decision.and_then(|row| row.comment.clone()),
                        })
                    }).collect::<Vec<_>>(),
                    "run_id": run.run_id,
                    "workflow": run.workflow,
                    "status": run.status,
                    "workspace": run.workspace,
                    "started_at": utc(run.created_at),
                    "finished_at": run.finished_at.map(utc),
                    "error": run.error,
                    "stages": stages.iter().map(|stage| json!({
                        "index": stage.index,
                        "stage": stage.name,
                        "status": stage.status,
                        "duration_ms": stage.duration_ms(),
                        "attempts": stage.attempts,
                        "error": stage.error,
                        "note": stage.note,
                    })).collect::<Vec<_>>(),
                });
                if args.format.format() == Format::Json {
                    output::json(&value)
                } else {
                    output::yaml(&value)
                }
            }
            Format::Table => {
                let mut text = format!(
                    "run: {}\nworkflow: {}\nstatus: {}\nworkspace: {}\n",
                    run.run_id, run.workflow, run.status, run.workspace
                );
                if let Some(error) = &run.error {
                    text.push_str(&format!("error: {error}\n"));
                }
                for gate in &gates {
                    text.push_str(&format!("gate {}: {}", gate.stage, gate.state.as_str()));
                    if let Some(row) = &gate.decision {
                        text.push_str(&format!(
                            " ({} by {} at {})",
                            row.decision,
                            row.decided_by,
                            utc(row.decided_at)
                        ));
                    }
                    text.push('\n');
                }
                text.push('\n');
                let rows: Vec<Vec<String>> = stages
                    .iter()
                    .map(|stage| {
                        vec![
                            format!("{:03}", stage.index),
                            stage.name.clone(),
                            stage.status.clone(),
                            stage
                                .duration_ms()
                                .map(|ms| format!("{ms} ms"))
                                .unwrap_or_default(),
                            stage.attempts.to_string(),
                            stage
                                .error
                                .clone()
                                .or_else(|| stage.note.clone())
                                .unwrap_or_default(),
                        ]
                    })
                    .collect();
                text.push_str(&output::table(
                    &["index", "stage", "status", "duration", "attempts", "detail"],
                    &rows,
                ));
                text
            }
        };
        output::stdout(&text);
        exit_code::SUCCESS
    })
}

fn log_files(workspace: &Path, index: i64, name: &str, attempt: i64) -> (PathBuf, PathBuf) {
    let directory = workspace.join("logs").join(format!("{index:03}-{name}"));
    (
        directory.join(format!("{attempt}.stdout")),
        directory.join(format!("{attempt}.stderr")),
    )
}

/// `baton logs RUN [STAGE] [--follow]`.
pub(crate) fn logs(args: &LogsArgs) -> u8 {
    block_on(async {
        let store = match open_store().await {
            Ok(store) => store,
            Err(code) => return code,
        };
        let mut offsets: std::collections::HashMap<PathBuf, u64> = std::collections::HashMap::new();
        loop {
            let (run, stages) =
                match tokio::try_join!(store.run(&args.run), store.stages(&args.run)) {
                    Ok(found) => found,
                    Err(error) => return store_error(&error),
                };
            if let Some(wanted) = &args.stage
                && !stages.iter().any(|stage| &stage.name == wanted)
            {
                output::stderr_line(&format!(
                    "error: run {} has no stage named '{wanted}'",
                    args.run
                ));
                return exit_code::INVALID_WORKFLOW;
            }
            let workspace = PathBuf::from(&run.workspace);
            let selected = stages.iter().filter(|stage| {
                stage.attempts > 0
                    && args
                        .stage
                        .as_ref()
                        .is_none_or(|wanted| &stage.name == wanted)
            });
            if args.format.format() == Format::Json && !args.follow {
                let entries: Vec<_> = selected
                    .map(|stage| {
                        let (stdout, stderr) =
                            log_files(&workspace, stage.index, &stage.name, stage.attempts);
                        json!({
                            "stage": stage.name,
                            "attempt": stage.attempts,
                            "stdout": std::fs::read_to_string(stdout).unwrap_or_default(),
                            "stderr": std::fs::read_to_string(stderr).unwrap_or_default(),
                        })
                    })
                    .collect();
                output::stdout(&output::json(&entries));
                return exit_code::SUCCESS;
            }
            for stage in selected {
                let (stdout, stderr) =
                    log_files(&workspace, stage.index, &stage.name, stage.attempts);
                for (path, stream) in [(stdout, "stdout"), (stderr, "stderr")] {
                    let offset = offsets.entry(path.clone()).or_insert(0);
                    let Ok(bytes) = std::fs::read(&path) else {
                        continue;
                    };
                    let start = usize::try_from(*offset).unwrap_or(0).min(bytes.len());
                    if start == bytes.len() {
                        continue;
                    }
                    let text = String::from_utf8_lossy(&bytes[start..]);
                    *offset = bytes.len() as u64;
                    let mut chunk = String::new();
                    for line in text.lines() {
                        chunk.push_str(&format!("{} | {stream} | {line}\n", stage.name));
                    }
                    output::stdout(&chunk);
                }
            }
            let ended = matches!(
                run.status.as_str(),
                "success" | "failed" | "cancelled" | "awaiting_human" | "rejected"
            );
            if !args.follow || ended {
                return exit_code::SUCCESS;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    })
}
