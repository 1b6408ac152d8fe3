//! What every command that drives a run shares (`run`, `resume`, `rerun`
//! and `task run`): the drive's options, the agents' readiness check, and
//! driving with progress on stderr.

use baton_engine::{DriveOptions, Outcome, Progress};
use baton_store::Store;

use super::containment::contain_helper;
use super::notify::Notifier;
use crate::args::Format;
use crate::{exit_code, output, progress, settings};

/// Jobs the local worker runs at once (the run's own jobs are bounded by
/// its `--max-parallel` anyway).
const LOCAL_WORKER_CONCURRENCY: usize = 8;
/// How often the local worker looks for jobs while the queue is empty.
const LOCAL_WORKER_POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// Drive options with the project's agent profiles, or the usage exit code.
pub(crate) fn drive_options(
    accept_changes: bool,
    wait_gates: bool,
    local_worker: bool,
) -> Result<DriveOptions, u8> {
    let agents = super::or_usage(settings::project_agents(&super::project_dir()))?;
    // Only agents are contained, so only a project with agents pays for the
    // check.
    let contain_helper = agents.as_ref().and_then(|_| contain_helper());
    Ok(DriveOptions {
        accept_changes,
        wait_gates,
        agents: agents.map(std::sync::Arc::new),
        contain_helper,
        local_worker: local_worker.then(local_worker_options),
        ..DriveOptions::default()
    })
}

/// The queue worker a driver runs for its run's own jobs.
pub(crate) fn local_worker_options() -> baton_engine::queue::WorkerOptions {
    let mut options = super::queue::worker_options(
        baton_engine::queue::DEFAULT_QUEUE,
        LOCAL_WORKER_CONCURRENCY,
        false,
    );
    // The run waits on these jobs: look for them often.
    options.poll = options.poll.min(LOCAL_WORKER_POLL);
    options
}

/// Refuses (exit 3, before anything is recorded) a run whose agents cannot
/// start here, naming every stage and role that lacks one.
pub(crate) fn refuse_unready(
    plan: &baton_workflow::Plan,
    agents: Option<&baton_executor::profile::Config>,
    budgeted: bool,
    as_json: bool,
) -> Option<u8> {
    for warning in baton_engine::readiness::warnings(plan, agents) {
        output::stderr_line(&format!("warning: {warning}"));
    }
    let mut problems = baton_engine::readiness::problems(
        plan,
        agents,
        crate::settings::path().as_deref(),
        &super::project_dir(),
    );
    if budgeted && problems.is_empty() {
        problems = baton_engine::readiness::uncounted(plan, agents);
    }
    if problems.is_empty() {
        return None;
    }
    if as_json {
        output::write_json(
            &serde_json::json!({ "error": "agents not ready", "problems": problems }),
        );
    }
    for problem in &problems {
        output::stderr_line(&format!("error: {problem}"));
    }
    Some(exit_code::REFUSED)
}

/// The run a drive takes on.
pub(crate) enum Drive<'a> {
    /// A recorded run, by id: its workflow is compiled again and checked
    /// against the sources it started from.
    Recorded(&'a str),
    /// A run this process has just created, with the plan it compiled.
    Created(Box<baton_engine::Created>),
}

/// Drives the run, showing its progress on stderr (live on a terminal,
/// plain lines otherwise) and sending the notices `[notify]` and `notify`
/// (a command) ask for; the display is closed before the result prints.
pub(crate) async fn drive_with_progress(
    store: &Store,
    run: Drive<'_>,
    options: &DriveOptions,
    format: Format,
    notify: Option<&str>,
) -> baton_engine::Result<Outcome> {
    let reporter = progress::Reporter::new(format);
    let notifier = Notifier::new(options, notify);
    let run_id = match &run {
        Drive::Recorded(run_id) => *run_id,
        Drive::Created(created) => created.run_id.as_str(),
    }
    .to_owned();
    if reporter.is_live()
        && let Ok(stages) = store.stages(&run_id).await
    {
        reporter.fit_names(stages.iter().map(|stage| stage.name.as_str()));
    }
    let report = |event: Progress| {
        if let (Some(notifier), Progress::AwaitingGate { stage }) = (&notifier, &event) {
            notifier.gate_waiting(&run_id, stage);
        }
        reporter.report(event);
    };
    let outcome = match run {
        Drive::Recorded(run_id) => baton_engine::drive(store, run_id, options, &report).await,
        Drive::Created(created) => {
            baton_engine::drive_created(store, *created, options, &report).await
        }
    };
    reporter.finish();
    if let (Some(notifier), Ok(outcome)) = (&notifier, &outcome) {
        notifier.ended(outcome).await;
    }
    outcome
}
