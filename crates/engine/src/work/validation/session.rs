//! Which agent session a correction continues (docs/agents.md, "Sessions").
//!
//! A correction is the producing stage's own agent asked to fix what was
//! found in its work, so it may continue the session that did that work:
//! the latest of the stage's own work (`main`) and its corrections so far,
//! or, for a `kind: validate` stage judging another stage, that stage's
//! latest attempt. Only an agent stage that ran in the project directory
//! has a session to continue: a script has none, a fan-out has one per item,
//! and a worktree's session belongs to a directory that is gone.
//!
//! What the unit records, when it is planned, is the stdout log of that
//! attempt; the attempt reads the session's id from it by its profile's
//! output rules, and continues it only if the profile can resume.

use baton_store::UnitRow;
use baton_workflow::plan::PlanStage;
use baton_workflow::schema::{Executor, Isolation};

use super::sources::sources;
use super::unit::{CHECK_CORRECTION, CORRECTION};
use crate::work::context::{Context, MAIN, unit_stage_name};

/// The log of the attempt whose session the correction of the stage's
/// output checks continues: the stage's own work.
pub(super) fn of_own_work(context: &Context<'_>, units: &[UnitRow]) -> Option<String> {
    if !continuable(context.stage) {
        return None;
    }
    latest(context, units, &[MAIN])
}

/// The log of the attempt whose session a validation cycle's correction
/// continues: the latest work on the validated output by the producing
/// stage's role.
pub(super) fn of_producer(context: &Context<'_>, units: &[UnitRow]) -> Option<String> {
    let producer = sources(context).producer;
    if !continuable(producer) {
        return None;
    }
    if producer.index == context.stage.index {
        return latest(context, units, &[MAIN, CHECK_CORRECTION, CORRECTION]);
    }
    // A validate stage's own check correction ran under its own role, not
    // the producer's.
    latest(context, units, &[CORRECTION]).or_else(|| latest_log(context, producer))
}

/// Whether an attempt of `stage` runs one agent session in the project
/// directory.
fn continuable(stage: &PlanStage) -> bool {
    let spec = &stage.spec;
    let agent = match spec.executor {
        Executor::Agent => true,
        Executor::Inline => spec.script.is_none(),
        Executor::WorkerQueue => false,
    };
    agent
        && spec.fan_out.is_none()
        && spec.sub_workflow.is_none()
        && spec.agent.isolation == Isolation::WorkDir
}

/// The log of the latest successful attempt among the stage's units of
/// these kinds.
fn latest(context: &Context<'_>, units: &[UnitRow], kinds: &[&str]) -> Option<String> {
    let unit = units
        .iter()
        .filter(|unit| kinds.contains(&unit.kind.as_str()))
        .filter(|unit| unit.status == "success" && unit.attempts > 0)
        .max_by_key(|unit| unit.ordinal)?;
    let name = unit_stage_name(context.stage.name(), unit);
    Some(format!(
        "logs/{:03}-{name}/{}.stdout",
        context.stage.index, unit.attempts
    ))
}

/// The stdout log of another stage's latest attempt, found on disk (its
/// attempts are the stage's own record, not this one's units).
fn latest_log(context: &Context<'_>, stage: &PlanStage) -> Option<String> {
    let directory = format!("logs/{}", stage.file_stem());
    let entries = std::fs::read_dir(context.workspace.join(&directory)).ok()?;
    let attempt = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name();
            name.to_str()?.strip_suffix(".stdout")?.parse::<u64>().ok()
        })
        .max()?;
    Some(format!("{directory}/{attempt}.stdout"))
}
