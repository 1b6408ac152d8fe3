//! The driver protocol: `baton run --driver external`, `baton next`,
//! `baton complete`, `baton fail`, and `baton resume` on such a run.
//! Each call is a short process; the engine's `external` module holds the
//! rules.

use baton_engine::RunRequest;
use baton_engine::external::{self, Standing};
use serde_json::json;

use super::errors::engine_error;
use super::run_ref;
use super::runtime::{block_on, block_on_exit, open_store};
use crate::args::Format;
use crate::args::driver::{CompleteArgs, FailArgs, NextArgs};
use crate::{exit_code, output};

/// An engine error as an exit code: a refusal is exit 3, the rest as for
/// the commands that drive runs.
fn refused_or(error: &baton_engine::Error, as_json: bool) -> u8 {
    match error {
        baton_engine::Error::Refused(message) => {
            output::stderr_line(&format!("error: {message}"));
            exit_code::REFUSED
        }
        baton_engine::Error::Store(baton_store::Error::NoSuchRun(_))
        | baton_engine::Error::NoSuchStage { .. } => {
            output::stderr_line(&format!("error: {}", super::errors::chain(error)));
            exit_code::INVALID_WORKFLOW
        }
        baton_engine::Error::Owned { .. } => {
            output::stderr_line(&format!("error: {}", super::errors::chain(error)));
            exit_code::REFUSED
        }
        other => engine_error(other, as_json),
    }
}

/// `baton run FILE --driver external`: records the run and prints its id.
pub(crate) fn create(request: &RunRequest, format: Format) -> u8 {
    block_on_exit(async {
        let store = open_store().await?;
        let created = external::create_run(&store, request)
            .await
            .map_err(|error| refused_or(&error, format == Format::Json))?;
        let value = json!({
            "run_id": created.run_id,
            "workspace": created.workspace,
            "driver": "external",
            "status": "pending",
        });
        output::json_or_text(format, &value, || format!("{}\n", created.run_id));
        output::stderr_line(&format!(
            "run {id} — workspace {}\nbaton runs nothing for it: `baton next {id} --json` lists the stages to work on, `baton complete {id} STAGE` records each",
            created.workspace.display(),
            id = created.run_id,
        ));
        Ok(exit_code::SUCCESS)
    })
}

/// What to tell the orchestrator. `listed`: `standing.ready` holds the
/// stages ready now (`next` and `resume` compute them; `complete` and
/// `fail` do not, so they point at `next`).
fn hint(standing: &Standing, listed: bool) {
    let run = &standing.run_id;
    match standing.status.as_str() {
        "awaiting_human" => {
            let gate = standing.gate.clone().unwrap_or_default();
            output::stderr_line(&format!(
                "run {run} waits at human gate '{gate}': `baton gate show {run} {gate}`, then `baton gate approve {run} {gate}` (or reject); `baton next {run}` goes on after the approval"
            ));
        }
        "success" => output::stderr_line(&format!("run {run} succeeded")),
        "running" if !listed => output::stderr_line(&format!(
            "run {run} goes on: `baton next {run}` hands out the stages ready now"
        )),
        "running" if standing.ready.is_empty() => {
            output::stderr_line(&format!("run {run}: nothing to hand out now"))
        }
        "running" => {}
        status => output::stderr_line(&format!(
            "run {run} ended {status}{}",
            standing
                .error
                .as_ref()
                .map(|error| format!(": {error}"))
                .unwrap_or_default()
        )),
    }
}

/// `baton next`.
pub(crate) fn next(args: &NextArgs) -> u8 {
    let format = args.format.format();
    block_on_exit(async {
        let (store, run_id) = run_ref::open_with_run(&args.run).await?;
        let worker = (!args.no_local_worker).then(super::drive::local_worker_options);
        let standing = external::next(&store, &run_id, worker.as_ref())
            .await
            .map_err(|error| refused_or(&error, format == Format::Json))?;
        for (stage, status) in &standing.scripts {
            output::stderr_line(&format!("ran '{stage}' (script or queue job): {status}"));
        }
        output::json_or_text(format, &standing.ready, || {
            let lines = standing
                .ready
                .iter()
                .map(|ready| format!("{}\t{}\n", ready.stage, ready.dispatch_file.display()));
            lines.collect()
        });
        hint(&standing, true);
        Ok(exit_code::SUCCESS)
    })
}

/// `baton complete`.
pub(crate) fn complete(args: &CompleteArgs) -> u8 {
    let format = args.format.format();
    block_on_exit(async {
        let (store, run_id) = run_ref::open_with_run(&args.run).await?;
        let completion = external::complete(&store, &run_id, &args.stage)
            .await
            .map_err(|error| refused_or(&error, format == Format::Json))?;
        if format == Format::Json {
            output::stdout(&output::json(&json!({
                "stage": completion.stage,
                "success": completion.success,
                "error": completion.error,
                "run_status": completion.run.status,
                "gate": completion.run.gate,
            })));
        }
        let code = if completion.success {
            output::stderr_line(&format!("stage '{}' completed", completion.stage));
            exit_code::SUCCESS
        } else {
            output::stderr_line(&format!(
                "error: stage '{}' failed verification: {}",
                completion.stage,
                completion.error.unwrap_or_default()
            ));
            exit_code::RUN_FAILED
        };
        hint(&completion.run, false);
        Ok(code)
    })
}

/// `baton fail`.
pub(crate) fn fail(args: &FailArgs) -> u8 {
    let format = args.format.format();
    block_on_exit(async {
        let (store, run_id) = run_ref::open_with_run(&args.run).await?;
        let standing = external::fail(&store, &run_id, &args.stage, &args.error)
            .await
            .map_err(|error| refused_or(&error, format == Format::Json))?;
        if format == Format::Json {
            output::stdout(&output::json(&json!({
                "stage": args.stage,
                "run_status": standing.status,
                "error": standing.error,
            })));
        }
        output::stderr_line(&format!("stage '{}' recorded as failed", args.stage));
        hint(&standing, false);
        Ok(exit_code::SUCCESS)
    })
}

/// `baton resume` on a run driven externally: says what `next` would hand
/// out and exits, spawning nothing. `None` for any other run (or one that
/// cannot be read, so that resume reports it as usual).
pub(crate) fn resume_hint(run_id: &str, format: Format, accept_merge: bool) -> Option<u8> {
    block_on(async {
        let store = open_store().await.ok()?;
        let run = store.run(run_id).await.ok()?;
        if !external::is_external(&run) {
            return None;
        }
        if accept_merge {
            output::stderr_line(&format!(
                "error: run {run_id} is driven through the driver protocol, where baton runs no stage, so `--accept-merge` cannot finish one; merge the stage's branch by hand, then `baton rerun {run_id} STAGE`: `baton next {run_id}` hands the stage out again on the merged work"
            ));
            return Some(exit_code::REFUSED);
        }
        // Merges a crashed `complete` began are finished first.
        match external::finish_merges(&store, run_id).await {
            Ok(finished) => {
                for completion in finished {
                    output::stderr_line(&format!(
                        "finished the interrupted completion of {}: {}",
                        completion.stage,
                        completion.error.as_deref().unwrap_or("verified and merged")
                    ));
                }
            }
            Err(error) => return Some(refused_or(&error, format == Format::Json)),
        }
        let code = match external::preview(&store, run_id).await {
            Ok(standing) => {
                let names: Vec<&str> = standing
                    .ready
                    .iter()
                    .map(|ready| ready.stage.as_str())
                    .collect();
                if format == Format::Json {
                    output::stdout(&output::json(&json!({
                        "run_id": standing.run_id,
                        "status": standing.status,
                        "driver": "external",
                        "ready": names,
                    })));
                }
                output::stderr_line(&format!(
                    "run {run_id} is driven externally; baton runs nothing for it. {}`baton next {run_id} --json` hands out the ready stages",
                    if names.is_empty() {
                        String::new()
                    } else {
                        format!("Ready or handed out: {}. ", names.join(", "))
                    }
                ));
                hint(&standing, true);
                exit_code::SUCCESS
            }
            Err(error) => refused_or(&error, format == Format::Json),
        };
        Some(code)
    })
}
