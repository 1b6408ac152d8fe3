//! Work inside one stage that is more than one process: fan-out children,
//! validators and corrections.
//!
//! Such a stage runs as *units*, recorded in the store. A stage's program is
//! a pure function of its finished units (and the files they wrote): each
//! time every unit of the stage has finished, [`step`] decides the next
//! wave of units, or that the stage is done or has failed. The coordinator
//! runs pending units as slots allow and records every unit's start and
//! end, so after a crash the finished units are kept and only the rest run;
//! a correction cycle's count lives in the units, so it is never reset.
//!
//! The phases, in order: the primary work (one `main` unit running the
//! stage as declared, or one `item` unit per fan-out item), then, for a
//! stage with `validates_output` checks, the checks (failures get one
//! correction round), then, for a stage with `validation:`, validation
//! waves and correction cycles.

mod context;
pub(crate) mod fanout;
pub(crate) mod validation;

use std::path::Path;

use baton_store::{NewUnit, Transition, UnitRow};
use baton_workflow::plan::PlanStage;

use crate::attempt::Finished;
use context::hashed;
pub use context::unit_stage_name;
pub(crate) use context::{Context, ITEM, MAIN, Materialized, Step};

/// Whether the stage runs as units rather than as one process.
pub(crate) fn is_composite(stage: &PlanStage) -> bool {
    stage.spec.fan_out.is_some() || stage.spec.validation.is_some() || checks_corrected(stage)
}

/// Whether the stage's program, not its `main` unit, judges its
/// `validates_output` checks, so that failures get a correction round. A
/// fan-out's children judge their own checks.
pub(crate) fn checks_corrected(stage: &PlanStage) -> bool {
    stage.spec.fan_out.is_none() && !stage.spec.validates_output.is_empty()
}

/// The next step of a stage whose units (`units`, this stage's only, in
/// ordinal order) have all finished.
pub(crate) fn step(context: &Context<'_>, units: &[UnitRow]) -> Step {
    let primary: Vec<&UnitRow> = units
        .iter()
        .filter(|unit| unit.kind == MAIN || unit.kind == ITEM)
        .collect();
    if primary.is_empty() {
        return match context.stage.spec.fan_out {
            Some(_) => fanout::plan(context),
            None => Step::Next {
                units: vec![main_unit(context.stage)],
                record: Vec::new(),
            },
        };
    }
    if context.stage.spec.fan_out.is_some() {
        if let Some(failed) = fanout::failure(context, &primary) {
            return failed;
        }
    } else if let Some(main) = primary.iter().find(|unit| unit.status != "success") {
        return Step::Fail {
            error: main.error.clone().unwrap_or_else(|| "failed".to_owned()),
            record: Vec::new(),
        };
    }
    if checks_corrected(context.stage)
        && let Some(step) = validation::checks_step(context, units)
    {
        return step;
    }
    match &context.stage.spec.validation {
        Some(_) => validation::step(context, units),
        None => Step::Done { record: Vec::new() },
    }
}

/// Where a composite stage whose units have all finished stands after its
/// next step.
pub(crate) enum Advanced {
    /// More units: recorded as planned, to run.
    Planned(Vec<NewUnit>),
    /// The stage's attempt ended so (its result to record).
    Ended(Box<Finished>),
}

/// Takes the next step of a stage whose units (`units`) have all finished,
/// in its attempt `attempt`, adding what it records to `pending`; the same
/// for both drivers. A stage that succeeds records the outputs its units
/// recorded, as the files are now (a later unit may have changed an
/// earlier one's).
pub(crate) fn advance(
    context: &Context<'_>,
    (units, attempt): (&[UnitRow], i64),
    pending: &mut Vec<Transition>,
) -> Advanced {
    let index = context.stage.index;
    let ended = |success, error| {
        let artifacts = if success {
            outputs(context.workspace, units)
        } else {
            Vec::new()
        };
        let finished = Finished::ended(index, attempt, (success, error), artifacts);
        Advanced::Ended(Box::new(finished))
    };
    match step(context, units) {
        Step::Next { units, record } => {
            pending.extend(record);
            if units.is_empty() {
                let error = "internal error: the stage planned no further work".to_owned();
                return ended(false, Some(error));
            }
            pending.push(Transition::UnitsPlanned {
                index: i64::try_from(context.stage.index).unwrap_or(i64::MAX),
                units: units.clone(),
                at: context.now,
            });
            Advanced::Planned(units)
        }
        Step::Done { record } => {
            pending.extend(record);
            ended(true, None)
        }
        Step::Fail { error, record } => {
            pending.extend(record);
            ended(false, Some(error))
        }
    }
}

/// (path, sha256, bytes) of the outputs a composite stage's units recorded,
/// as the files are now.
fn outputs(workspace: &Path, units: &[UnitRow]) -> Vec<(String, String, i64)> {
    let mut paths: Vec<String> = units
        .iter()
        .filter_map(|unit| serde_json::from_str::<Vec<(String, String, i64)>>(&unit.artifacts).ok())
        .flatten()
        .map(|(path, _, _)| path)
        .collect();
    paths.sort();
    paths.dedup();
    hashed(workspace, paths)
}

/// The stage to run for one unit: the stage itself for `main`, a child
/// stage for an item, a validator or correction stage otherwise.
pub(crate) fn materialize(context: &Context<'_>, unit: &UnitRow) -> Result<Materialized, String> {
    match unit.kind.as_str() {
        MAIN => Ok(Materialized {
            stage: context.stage.clone(),
            values: Vec::new(),
            env: Vec::new(),
            defer_checks: checks_corrected(context.stage),
            continues: None,
        }),
        ITEM => fanout::child(context, unit),
        _ => validation::materialize(context, unit),
    }
}

fn main_unit(stage: &PlanStage) -> NewUnit {
    NewUnit {
        key: MAIN.to_owned(),
        ordinal: 0,
        kind: MAIN.to_owned(),
        cycle: 0,
        label: stage.name().to_owned(),
        spec: "{}".to_owned(),
    }
}
