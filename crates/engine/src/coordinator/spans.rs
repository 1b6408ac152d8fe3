//! The `tracing` spans of a drive: one per run, one per stage under it, one
//! per attempt under its stage.
//!
//! Whoever runs baton chooses whether anything listens (the CLI installs a
//! subscriber for `BATON_LOG` or an OpenTelemetry endpoint). When nothing
//! does, each span is `Span::none()` and its fields are never formatted:
//! values are handed over as `Display` and formatted only by a listener,
//! and the profile is looked up only for a span that is enabled.

use std::collections::HashMap;

use baton_executor::profile::Config;
use baton_workflow::plan::PlanStage;
use tracing::Span;
use tracing::field::{Empty, display};

use crate::attempt::Finished;

/// The span of a run's drive, entered while it lasts. The workflow's name
/// is recorded once the run is read ([`Spans::new`]).
pub(super) fn run(run_id: &str) -> Span {
    tracing::info_span!(
        target: "baton::run",
        "run",
        run_id = display(run_id),
        workflow = Empty,
        status = Empty,
        error = Empty,
    )
}

/// Records how the drive ended on its run's span.
pub(super) fn run_ended(span: &Span, status: &str, error: Option<&str>) {
    span.record("status", display(status));
    if let Some(error) = error {
        span.record("error", display(error));
    }
}

/// The spans of the stages that started in this drive, by index.
pub(super) struct Spans {
    run: Span,
    stages: HashMap<usize, Span>,
}

impl Spans {
    /// The stage spans of the drive whose span is `run` (the current one
    /// when the drive opens), which now knows its workflow.
    pub(super) fn new(workflow: &str) -> Spans {
        let run = Span::current();
        run.record("workflow", display(workflow));
        Spans {
            run,
            stages: HashMap::new(),
        }
    }

    /// Opens the span of `stage`, which starts now.
    pub(super) fn stage_started(&mut self, index: usize, stage: &PlanStage) {
        let span = stage_span(&self.run, stage);
        // Nothing listens to a disabled span: kept, it would only be hashed
        // in and out for every stage.
        if !span.is_disabled() {
            self.stages.insert(index, span);
        }
    }

    /// Closes the span of stage `index` with how it ended. A stage that
    /// ends without starting (skipped, or failed before it could start)
    /// gets a span that opens and closes here.
    pub(super) fn stage_ended(&mut self, index: usize, stage: &PlanStage, status: &str) {
        let span = self
            .stages
            .remove(&index)
            .unwrap_or_else(|| stage_span(&self.run, stage));
        span.record("status", display(status));
    }

    /// The span of an attempt of stage `index` (of one of its units when
    /// `unit` is set), under its stage's span.
    pub(super) fn attempt(
        &self,
        index: usize,
        stage: &PlanStage,
        (attempt, unit): (i64, Option<&str>),
        agents: Option<&Config>,
    ) -> Span {
        let parent = self.stages.get(&index).unwrap_or(&self.run);
        let role = stage.spec.agent_role();
        let span = tracing::info_span!(
            target: "baton::attempt",
            parent: parent,
            "attempt",
            stage = display(stage.name()),
            attempt,
            unit = unit.map(display),
            agent = display(role),
            profile = Empty,
            status = Empty,
            exit_code = Empty,
        );
        if !span.is_disabled()
            && !stage.spec.runs_script()
            && let Some(agent) = agents.and_then(|config| config.agent(role).ok())
        {
            span.record("profile", display(agent.profile_name));
        }
        span
    }
}

fn stage_span(run: &Span, stage: &PlanStage) -> Span {
    tracing::info_span!(
        target: "baton::stage",
        parent: run,
        "stage",
        stage = display(stage.name()),
        kind = display(stage.spec.kind),
        status = Empty,
    )
}

/// Records an attempt's end on its span, which closes once the attempt's
/// task and its slot are gone.
pub(super) fn attempt_ended(span: &Span, result: &Finished) {
    let status = if result.cancelled {
        "cancelled"
    } else {
        result.status()
    };
    span.record("status", display(status));
    if let Some(code) = result.exit_code {
        span.record("exit_code", code);
    }
}
