//! Validation waves and correction cycles of a stage with `validation:`
//! (docs/validation.md).
//!
//! Once the stage's primary work has succeeded, validation runs in cycles
//! numbered from 1. A cycle is a wave of validator units (for
//! `adversarial`, a wave of challengers and then one of evidence
//! gatherers); their findings files are parsed, merged into
//! `validation/<stage>-findings.json`, summarised for a person in
//! `validation/<stage>-summary.md` and recorded. No critical finding
//! (status FAIL, severity critical): the stage is done. Otherwise, while
//! fewer than `max_revisions` corrections have run, one correction unit
//! fixes those findings and the next cycle validates again; then the stage
//! fails, listing them.
//!
//! [`step`] reads only the finished units (their kind, cycle, status and
//! spec) and the files they wrote, so a resume continues the same cycle.

mod corrections;
mod findings;
mod materialize;
mod output_checks;
mod prompts;
mod session;
mod sources;
mod summary;
mod unit;
mod units;

#[cfg(test)]
mod tests;

use baton_store::{FindingRow, Transition, UnitRow};
use baton_workflow::schema::{Strategy, Validation};

use self::corrections::apply_corrections;
use self::findings::Finding;
pub(crate) use self::materialize::materialize;
pub(crate) use self::output_checks::step as checks_step;
use self::sources::sources;
pub(crate) use self::unit::{CHALLENGER, CHECK_CORRECTION, CORRECTION, EVIDENCE, VALIDATOR};
use self::unit::{Spec, failed, invalid, is_validation_unit, new_unit, spec_of, stage_index};
use super::context::{Context, Step, hashed};

/// The subject's files, as (stage, workspace-relative file).
fn subject_files(context: &Context<'_>, units: &[UnitRow]) -> Vec<(String, String)> {
    sources(context)
        .stages
        .iter()
        .flat_map(|stage| {
            let children: &[UnitRow] = if stage.index == context.stage.index {
                units
            } else {
                &[]
            };
            units::files(stage, context.workspace, children)
                .into_iter()
                .map(|file| (stage.name().to_owned(), file))
        })
        .collect()
}

/// The next step once the primary work and every validation unit so far
/// have finished.
pub(crate) fn step(context: &Context<'_>, units: &[UnitRow]) -> Step {
    let Some(validation) = &context.stage.spec.validation else {
        return Step::Done { record: Vec::new() };
    };
    let mut ours: Vec<&UnitRow> = units
        .iter()
        .filter(|unit| is_validation_unit(unit))
        .collect();
    ours.sort_by_key(|unit| unit.ordinal);
    let Some(cycle) = ours.iter().map(|unit| unit.cycle).max() else {
        return first_wave(context, validation, units, 1, Vec::new());
    };
    let current: Vec<&UnitRow> = ours
        .iter()
        .copied()
        .filter(|unit| unit.cycle == cycle)
        .collect();
    if let Some(correction) = current.iter().find(|unit| unit.kind == CORRECTION) {
        if correction.status != "success" {
            return failed(correction);
        }
        let corrections: Vec<&UnitRow> = units
            .iter()
            .filter(|unit| unit.kind == CORRECTION || unit.kind == CHECK_CORRECTION)
            .collect();
        return match apply_corrections(context, &corrections) {
            Ok(()) => first_wave(
                context,
                validation,
                units,
                cycle + 1,
                rehash_other_sources(context),
            ),
            Err(step) => step,
        };
    }
    if let Some(unit) = current.iter().find(|unit| unit.status != "success") {
        return failed(unit);
    }
    let has_evidence = current.iter().any(|unit| unit.kind == EVIDENCE);
    if validation.strategy == Strategy::Adversarial && !has_evidence {
        return evidence_wave(context, validation, units, cycle, &current);
    }
    let mut parts = Vec::new();
    let mut bad = Vec::new();
    for unit in current
        .iter()
        .filter(|unit| unit.kind == VALIDATOR || unit.kind == EVIDENCE)
    {
        match findings::read(context.workspace, &spec_of(unit).output) {
            Ok(part) => parts.push(part),
            Err(error) => bad.push((*unit, error)),
        }
    }
    if !bad.is_empty() {
        return invalid(context, &bad, "wrote invalid findings");
    }
    decide(
        context,
        validation,
        units,
        cycle,
        findings::merge(parts),
        Vec::new(),
    )
}

/// The ordinal after every unit of the stage.
fn next_ordinal(units: &[UnitRow]) -> i64 {
    units.iter().map(|unit| unit.ordinal + 1).max().unwrap_or(0)
}

/// Where a validator of `cycle` writes its findings.
fn findings_path(stage: &str, cycle: i64, name: &str) -> String {
    format!("validation/{stage}/cycle-{cycle}/{name}.json")
}

/// The merged findings of the latest cycle (the reference's path).
fn merged_path(stage: &str) -> String {
    format!("validation/{stage}-findings.json")
}

/// The first wave of a cycle: validators, or challengers for `adversarial`.
fn first_wave(
    context: &Context<'_>,
    validation: &Validation,
    units: &[UnitRow],
    cycle: i64,
    record: Vec<Transition>,
) -> Step {
    let stage = context.stage.name();
    let ordinal = next_ordinal(units);
    let files = subject_files(context, units);
    let single = |name: &str, key: &str| {
        let spec = Spec {
            n: 1,
            output: findings_path(stage, cycle, name),
            files: files.iter().map(|(_, file)| file.clone()).collect(),
            ..Spec::default()
        };
        vec![new_unit(
            context,
            VALIDATOR,
            cycle,
            format!("v{cycle}:{key}"),
            ordinal,
            &spec,
        )]
    };
    let planned = match validation.strategy {
        Strategy::CrossUnit => single("cross", "cross"),
        Strategy::Deliverable => single("deliverable", "deliverable"),
        Strategy::FactCheck => single("fact-check", "fact-check"),
        Strategy::Unit | Strategy::Adversarial => {
            let targets = match units::split(context.workspace, &files) {
                Ok(targets) => targets,
                Err(error) => return Step::Fail { error, record },
            };
            let challenging = validation.strategy == Strategy::Adversarial;
            targets
                .into_iter()
                .enumerate()
                .map(|(position, target)| {
                    let n = position + 1;
                    let (kind, key, output) = if challenging {
                        (
                            CHALLENGER,
                            format!("v{cycle}:challenge:{n}"),
                            format!("validation/challenges/{stage}-{n}.json"),
                        )
                    } else {
                        (
                            VALIDATOR,
                            format!("v{cycle}:unit:{n}"),
                            findings_path(stage, cycle, &format!("unit-{n}")),
                        )
                    };
                    let spec = Spec {
                        n,
                        output,
                        target: Some(target),
                        ..Spec::default()
                    };
                    let offset = i64::try_from(position).unwrap_or(i64::MAX);
                    new_unit(context, kind, cycle, key, ordinal + offset, &spec)
                })
                .collect()
        }
    };
    if planned.is_empty() {
        // Nothing to judge: the cycle has no findings.
        return decide(context, validation, units, cycle, Vec::new(), record);
    }
    Step::Next {
        units: planned,
        record,
    }
}

/// The adversarial second wave: one evidence gatherer per challenges file
/// that holds any challenge.
fn evidence_wave(
    context: &Context<'_>,
    validation: &Validation,
    units: &[UnitRow],
    cycle: i64,
    current: &[&UnitRow],
) -> Step {
    let stage = context.stage.name();
    let mut ordinal = next_ordinal(units);
    let mut planned = Vec::new();
    let mut bad = Vec::new();
    for challenger in current.iter().filter(|unit| unit.kind == CHALLENGER) {
        let spec = spec_of(challenger);
        match findings::count_challenges(context.workspace, &spec.output) {
            Err(error) => bad.push((*challenger, error)),
            Ok(0) => {}
            Ok(_) => {
                let evidence = Spec {
                    n: spec.n,
                    output: format!("validation/evidence/{stage}-{}.json", spec.n),
                    target: spec.target.clone(),
                    challenges: Some(spec.output.clone()),
                    ..Spec::default()
                };
                planned.push(new_unit(
                    context,
                    EVIDENCE,
                    cycle,
                    format!("v{cycle}:evidence:{}", spec.n),
                    ordinal,
                    &evidence,
                ));
                ordinal += 1;
            }
        }
    }
    if !bad.is_empty() {
        return invalid(context, &bad, "wrote invalid challenges");
    }
    if planned.is_empty() {
        // No challenge stood up to be checked: the cycle has no findings.
        return decide(context, validation, units, cycle, Vec::new(), Vec::new());
    }
    Step::Next {
        units: planned,
        record: Vec::new(),
    }
}

/// Records a cycle's findings and decides: done, correct, or fail.
fn decide(
    context: &Context<'_>,
    validation: &Validation,
    units: &[UnitRow],
    cycle: i64,
    found: Vec<Finding>,
    mut record: Vec<Transition>,
) -> Step {
    let stage = context.stage.name();
    if let Err(error) = findings::write_merged(context.workspace, &merged_path(stage), &found) {
        return Step::Fail { error, record };
    }
    record.push(Transition::FindingsRecorded {
        index: stage_index(context),
        cycle,
        findings: found.iter().map(Finding::row).collect::<Vec<FindingRow>>(),
    });
    // Every cycle after the first follows one correction.
    let corrections = cycle - 1;
    let correct = format!("c{cycle}:correct");
    let next = if !found.iter().any(Finding::is_critical) {
        summary::Next::Done
    } else if corrections < i64::from(validation.max_revisions) {
        summary::Next::Correct(correct.clone())
    } else {
        summary::Next::Exhausted
    };
    let decided = summary::Cycle {
        stage,
        validation,
        cycle,
        findings: &found,
        next,
    };
    if let Err(error) = summary::write(context.workspace, &decided) {
        return Step::Fail { error, record };
    }
    let critical: Vec<Finding> = found.into_iter().filter(Finding::is_critical).collect();
    if critical.is_empty() {
        return Step::Done { record };
    }
    if corrections < i64::from(validation.max_revisions) {
        let spec = Spec {
            n: 1,
            output: format!("validation/{stage}/cycle-{cycle}/corrections.json"),
            files: subject_files(context, units)
                .into_iter()
                .map(|(_, file)| file)
                .collect(),
            findings: critical,
            continues: session::of_producer(context, units),
            ..Spec::default()
        };
        let unit = new_unit(
            context,
            CORRECTION,
            cycle,
            correct,
            next_ordinal(units),
            &spec,
        );
        return Step::Next {
            units: vec![unit],
            record,
        };
    }
    Step::Fail {
        error: unresolved(stage, validation.max_revisions, corrections, &critical),
        record,
    }
}

/// Said in the error of a validation that failed for good: its correction
/// budget is spent, so a resume would fail it again; a rerun starts afresh.
pub const CORRECTIONS_SPENT: &str = "no correction cycle left";

/// The most findings an error message lists.
const LISTED: usize = 20;

fn unresolved(stage: &str, budget: u32, corrections: i64, critical: &[Finding]) -> String {
    let count = critical.len();
    let plural = if count == 1 { "" } else { "s" };
    let head = if budget == 0 {
        format!(
            "validation of '{stage}' has {count} critical finding{plural} and max_revisions is 0"
        )
    } else {
        format!(
            "validation of '{stage}' still has {count} critical finding{plural} after {corrections} correction cycle{}",
            if corrections == 1 { "" } else { "s" }
        )
    };
    let mut listed: Vec<String> = critical
        .iter()
        .take(LISTED)
        .map(|finding| format!("{}: {}", finding.id, finding.title()))
        .collect();
    if count > LISTED {
        listed.push(format!("and {} more", count - LISTED));
    }
    format!("{head} ({CORRECTIONS_SPENT}): {}", listed.join("; "))
}

/// The outputs of the validated stages other than this one as they are
/// now, to record: a correction may have changed them, and a resume must
/// not take the corrected files for changed and run those stages again.
fn rehash_other_sources(context: &Context<'_>) -> Vec<Transition> {
    sources(context)
        .stages
        .iter()
        .filter(|stage| stage.index != context.stage.index)
        .map(|stage| Transition::ArtifactsRecorded {
            index: i64::try_from(stage.index).unwrap_or(i64::MAX),
            at: context.now,
            artifacts: hashed(
                context.workspace,
                units::files(stage, context.workspace, &[]),
            ),
        })
        .collect()
}
