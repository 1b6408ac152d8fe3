//! `baton run`, `resume`, `rerun`, `cancel`: the commands that drive runs.
//! Each builds a tokio runtime of its own; the read-only commands never do.

use baton_engine::{DriveOptions, Outcome, RunRequest};
use baton_store::Store;
use serde_json::json;

use super::drive::{Drive, drive_options, drive_with_progress, refuse_unready};
use super::errors::engine_error;
use super::run_ref;
use super::runtime::{block_on, block_on_exit, open_store};
use super::summary::Summary;
use crate::args::{Format, RerunArgs, ResumeArgs, RunArgs, RunRef};
use crate::{exit_code, output, report};

fn finish(outcome: &Outcome, summary: Option<&Summary>, format: Format) -> u8 {
    let value = json!({
        "run_id": outcome.run_id,
        "status": outcome.status,
        "gate": outcome.gate,
        "error": outcome.error,
        "summary": summary.map(Summary::json),
    });
    output::json_or_text(format, &value, || {
        format!("{} {}\n", outcome.run_id, outcome.status)
    });
    let run = &outcome.run_id;
    if outcome.status == "success" {
        output::stderr_line(&match summary {
            Some(summary) => format!(
                "run {run} succeeded: {}\n`baton status {run}` shows every stage",
                summary.line()
            ),
            None => format!("run {run} succeeded; `baton status {run}` shows every stage"),
        });
        return exit_code::SUCCESS;
    }
    if let Some(summary) = summary {
        output::stderr_line(&format!("run {run}: {}", summary.line()));
    }
    match outcome.status.as_str() {
        "awaiting_human" => {
            let gate = outcome.gate.clone().unwrap_or_default();
            let run = &outcome.run_id;
            output::stderr_line(&format!(
                "run {run} waits at human gate '{gate}':\n  baton gate show {run} {gate}      # review its outputs (drop/edit/add change them)\n  baton gate approve {run} {gate}   # or: baton gate push-back (or reject) {run} {gate} --comment …\n  baton resume {run}                # continue after the approval"
            ));
            exit_code::SUCCESS
        }
        "rejected" => {
            output::stderr_line(&format!(
                "Workflow did not complete successfully: status=rejected ({})",
                outcome.error.as_deref().unwrap_or("a gate was rejected")
            ));
            exit_code::RUN_FAILED
        }
        status => {
            output::stderr_line(&format!(
                "Workflow did not complete successfully: status={status}{}",
                outcome
                    .error
                    .as_ref()
                    .map(|error| format!(" ({})", output::clipped(error, 2_000)))
                    .unwrap_or_default()
            ));
            output::stderr_line(&failure_hint(outcome, summary));
            exit_code::RUN_FAILED
        }
    }
}

/// What to do after a run failed, as far as the failed stages tell: a
/// resume retries failed stages, except a validation whose correction
/// budget is spent (it would fail again; a rerun starts it afresh).
fn failure_hint(outcome: &Outcome, summary: Option<&Summary>) -> String {
    let run = &outcome.run_id;
    let spent: Vec<&str> = summary
        .map(|summary| summary.failed_where(baton_engine::CORRECTIONS_SPENT))
        .unwrap_or_default();
    if let Some(stage) = spent.first() {
        return format!(
            "hint: '{stage}' used up its correction cycles, so `baton resume` would fail it again; \
             `baton logs {run}` shows the findings; fix what they name (or raise `max_revisions`), \
             then `baton rerun {run} {stage}` runs it with a fresh budget"
        );
    }
    if let Some(hint) = summary.and_then(|summary| conflict_hint(run, summary)) {
        return hint;
    }
    format!(
        "hint: `baton logs {run}` shows the output; `baton resume {run}` runs the failed stages again"
    )
}

/// The way out of a merge conflict that keeps the agent's work: resolve it
/// by hand, then accept the merge (a resume would run the agent again, into
/// the same conflict).
fn conflict_hint(run: &str, summary: &Summary) -> Option<String> {
    let stage = *summary.failed_where(baton_engine::MERGE_CONFLICT).first()?;
    let branch = summary
        .error_of(stage)?
        .split(baton_engine::MERGE_CONFLICT)
        .nth(1)?
        .split_whitespace()
        .next()?;
    Some(format!(
        "hint: '{stage}' conflicts with its target branch. To keep its agent's work, run \
         `git merge {branch}` in the repository (on the branch the run started on), resolve \
         the conflicts and commit, then `baton resume {run} --accept-merge` finishes the stage \
         without running its agent again (`baton resume {run}` would run it again)"
    ))
}

/// Drives a run, prints how it ended and lets the store go: what `run`,
/// `resume` and `rerun` end with.
async fn drive_to_exit(
    store: Store,
    run: Drive<'_>,
    options: &DriveOptions,
    format: Format,
    notify: Option<&str>,
) -> u8 {
    let code = match drive_with_progress(&store, run, options, format, notify).await {
        Ok(outcome) => {
            let summary = Summary::read(&store, &outcome.run_id).await;
            finish(&outcome, summary.as_ref(), format)
        }
        Err(error) => engine_error(&error, format == Format::Json),
    };
    store.close_at_exit().await;
    code
}

/// `baton run`.
pub(crate) fn run(args: &RunArgs) -> Result<u8, u8> {
    let format = args.format.format();
    let as_json = format == Format::Json;
    let options = super::compile_options(&args.params)?;
    if args.strict
        && let Some(code) = super::lint::strict_refusal(&args.file, &options, as_json)
    {
        return Ok(code);
    }
    if args.dry_run {
        return super::compile::dry_run(&args.file, &options, as_json);
    }
    let request = RunRequest {
        workflow_path: super::workflow_file(&args.file),
        params: options.params,
        // Typed on the command line: from the current directory.
        base_dir: args
            .workspace
            .as_ref()
            .map(|dir| super::current_dir().join(dir)),
        max_parallel: args.max_parallel,
        project_dir: super::project_dir(),
        budget_usd: args.budget,
    };
    if args.driver == crate::args::driver::DriverArg::External {
        // Needs no agent profiles: baton spawns nothing for this run.
        return Ok(super::driver::create(&request, format));
    }
    block_on(async {
        let drive = drive_options(false, args.wait_gates, !args.no_local_worker)?;
        // The workflow compiles on a thread of its own while the store
        // opens: both take a millisecond or more before the run can be
        // recorded. A store that cannot be opened is still reported first.
        let prepared = tokio::task::spawn_blocking(move || {
            baton_engine::prepare_run(&request, baton_engine::external::DriverMode::Builtin)
        });
        let store = open_store().await?;
        let prepared = match prepared.await {
            Ok(prepared) => prepared.map_err(|error| engine_error(&error, as_json))?,
            Err(panicked) => std::panic::resume_unwind(panicked.into_panic()),
        };
        report::emit(prepared.warnings(), as_json);
        let budgeted = args.budget.or(prepared.plan().budget_usd).is_some();
        if let Some(code) =
            refuse_unready(prepared.plan(), drive.agents.as_deref(), budgeted, as_json)
        {
            output::stderr_line(
                "nothing was run or recorded: set up baton.toml or install the CLIs as the lines above say, then run again",
            );
            return Err(code);
        }
        let created = baton_engine::record_run(&store, prepared)
            .await
            .map_err(|error| engine_error(&error, as_json))?;
        let workspace = created.workspace.display();
        output::stderr_line(&format!("run {} — workspace {workspace}", created.run_id));
        let run = Drive::Created(Box::new(created));
        Ok(drive_to_exit(store, run, &drive, format, args.notify.as_deref()).await)
    })
}

/// `baton resume`.
pub(crate) fn resume(args: &ResumeArgs) -> Result<u8, u8> {
    let format = args.format.format();
    let (_, run_id) = block_on(super::run_ref::open_with_run(&args.run))?;
    if let Some(code) = super::driver::resume_hint(&run_id, format, args.accept_merge) {
        return Ok(code);
    }
    block_on(async {
        let mut options =
            drive_options(args.accept_changes, args.wait_gates, !args.no_local_worker)?;
        options.accept_merge = args.accept_merge;
        options.budget_usd = args.budget;
        let store = open_store().await?;
        if args.accept_merge {
            // Refused before the drive: without a failed merge the flag
            // would silently do nothing.
            let stages = baton_engine::failed_merges(&store, &run_id)
                .await
                .map_err(|error| engine_error(&error, format == Format::Json))?;
            let stages = stages.join(", ");
            output::stderr_line(&format!("accepting the merge of {stages} as it is now"));
        }
        let notify = args.notify.as_deref();
        Ok(drive_to_exit(store, Drive::Recorded(&run_id), &options, format, notify).await)
    })
}

/// `baton rerun`: resets the stage and its dependants, then drives the run.
pub(crate) fn rerun(args: &RerunArgs) -> u8 {
    let format = args.format.format();
    block_on_exit(async {
        let mut options = drive_options(args.accept_changes, false, true)?;
        options.budget_usd = args.budget;
        let (store, run_id) = run_ref::open_with_run(&args.run).await?;
        match baton_engine::invalidate(&store, &run_id, &args.stage, args.accept_changes).await {
            Ok(reset) => output::stderr_line(&format!("rerunning {}", reset.join(", "))),
            Err(baton_engine::Error::WorkflowChanged { changed, .. }) => {
                output::stderr_line(&format!(
                    "error: the workflow changed since run {run_id} started: {}; nothing was reset",
                    changed.join(", ")
                ));
                output::stderr_line(&format!(
                    "hint: `baton rerun {run_id} {} --accept-changes` runs it with the workflow as it is now",
                    args.stage
                ));
                return Ok(exit_code::RUN_FAILED);
            }
            Err(error) => return Err(engine_error(&error, format == Format::Json)),
        }
        if let Ok(run) = store.run(&run_id).await
            && baton_engine::external::is_external(&run)
        {
            // Its orchestrator runs the stages again: baton spawns nothing.
            output::stderr_line(&format!(
                "run {run} is driven externally: `baton next {run} --json` hands out the stages reset",
                run = run_id
            ));
            return Ok(exit_code::SUCCESS);
        }
        let notify = args.notify.as_deref();
        Ok(drive_to_exit(store, Drive::Recorded(&run_id), &options, format, notify).await)
    })
}

/// `baton cancel`.
pub(crate) fn cancel(args: &RunRef) -> u8 {
    block_on_exit(async {
        let (store, run_id) = run_ref::open_with_run(&args.run).await?;
        let message = baton_engine::cancel(&store, &run_id)
            .await
            .map_err(|error| engine_error(&error, false))?;
        output::stderr_line(&message);
        Ok(exit_code::SUCCESS)
    })
}
