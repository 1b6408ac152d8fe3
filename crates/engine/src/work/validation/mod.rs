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

mod findings;
mod materialize;
mod output_checks;
mod prompts;
mod session;
mod summary;
mod units;

#[cfg(test)]
mod tests;

use baton_store::{FindingRow, NewUnit, Transition, UnitRow};
use baton_workflow::plan::PlanStage;
use baton_workflow::schema::{Kind, Strategy, Validation};
use serde::{Deserialize, Serialize};

use self::findings::Finding;
pub(crate) use self::materialize::materialize;
pub(crate) use self::output_checks::step as checks_step;
use self::units::Target;
use super::{Context, Step};

/// A unit that judges the output and writes findings.
pub(crate) const VALIDATOR: &str = "validator";
/// An adversarial unit that writes challenges.
pub(crate) const CHALLENGER: &str = "challenger";
/// An adversarial unit that rules on challenges and writes findings.
pub(crate) const EVIDENCE: &str = "evidence";
/// A unit that fixes critical findings.
pub(crate) const CORRECTION: &str = "correction";
/// The one unit that fixes failed `validates_output` checks.
pub(crate) const CHECK_CORRECTION: &str = "check-correction";

/// What a validation unit works on, stored as its spec.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Spec {
    /// Its number within the wave (from 1; 1 for a single validator).
    n: usize,
    /// The one file it writes (workspace-relative).
    output: String,
    /// The unit of output it judges (per-unit strategies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    target: Option<Target>,
    /// The subject's files (whole-output validators and corrections).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    files: Vec<String>,
    /// An evidence gatherer's challenges file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    challenges: Option<String>,
    /// A correction's critical findings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    findings: Vec<Finding>,
    /// A correction's: the stdout log (workspace-relative) of the attempt
    /// whose agent session it continues (`session.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    continues: Option<String>,
}

/// The stages whose outputs are validated, and the one whose role corrects.
struct Sources<'a> {
    stages: Vec<&'a PlanStage>,
    producer: &'a PlanStage,
}

/// A `kind: validate` stage validates the stages it depends on (the first
/// one produced the work, so its role corrects); any other stage validates
/// its own outputs. Human-gated dependencies are left out: their output was
/// approved as it is, and a correction would make the approval stale. A
/// validate stage with no other dependency validates its own outputs.
fn sources<'a>(context: &Context<'a>) -> Sources<'a> {
    let stage = context.stage;
    if stage.spec.kind == Kind::Validate {
        let upstream: Vec<&PlanStage> = stage
            .spec
            .depends_on
            .iter()
            .filter_map(|name| context.plan.stage(&name.value))
            .filter(|upstream| !upstream.spec.human_gate)
            .collect();
        if let Some(&producer) = upstream.first() {
            return Sources {
                stages: upstream,
                producer,
            };
        }
    }
    Sources {
        stages: vec![stage],
        producer: stage,
    }
}

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

fn is_validation_unit(unit: &UnitRow) -> bool {
    matches!(
        unit.kind.as_str(),
        VALIDATOR | CHALLENGER | EVIDENCE | CORRECTION
    )
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

/// Who a unit is, in messages.
fn role_word(kind: &str) -> &'static str {
    match kind {
        CHALLENGER => "challenger",
        EVIDENCE => "evidence gatherer",
        CORRECTION | CHECK_CORRECTION => "correction",
        _ => "validator",
    }
}

/// The stage fails because a unit failed; a resume runs the unit again.
fn failed(unit: &UnitRow) -> Step {
    Step::Fail {
        error: format!(
            "{} {} failed: {}",
            role_word(&unit.kind),
            unit.label,
            unit.error.as_deref().unwrap_or("failed")
        ),
        record: Vec::new(),
    }
}

/// The stage fails because units that exited well wrote something
/// unusable (the first is named, the others counted). They are recorded
/// as failed too, so that a resume runs them again rather than failing on
/// the same files.
fn invalid(context: &Context<'_>, bad: &[(&UnitRow, String)], what: &str) -> Step {
    let (first, error) = &bad[0];
    let mut message = format!("{} {} {what}: {error}", role_word(&first.kind), first.label);
    if bad.len() > 1 {
        message.push_str(&format!(
            " (and {} more: {})",
            bad.len() - 1,
            bad[1..]
                .iter()
                .take(9)
                .map(|(unit, _)| unit.label.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Step::Fail {
        error: message,
        record: bad
            .iter()
            .map(|(unit, error)| Transition::UnitFinished {
                index: stage_index(context),
                key: unit.key.clone(),
                status: "failed".to_owned(),
                at: context.now,
                exit_code: unit.exit_code,
                error: Some(format!("{what}: {error}")),
                artifacts: Vec::new(),
            })
            .collect(),
    }
}

fn stage_index(context: &Context<'_>) -> i64 {
    i64::try_from(context.stage.index).unwrap_or(i64::MAX)
}

fn spec_of(unit: &UnitRow) -> Spec {
    serde_json::from_str(&unit.spec).unwrap_or_default()
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

fn new_unit(
    context: &Context<'_>,
    kind: &str,
    cycle: i64,
    key: String,
    ordinal: i64,
    spec: &Spec,
) -> NewUnit {
    NewUnit {
        label: format!("{}[{key}]", context.stage.name()),
        key,
        ordinal,
        kind: kind.to_owned(),
        cycle,
        spec: serde_json::to_string(spec).expect("plain data"),
    }
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
            artifacts: super::hashed(
                context.workspace,
                units::files(stage, context.workspace, &[]),
            ),
        })
        .collect()
}

/// Merges every successful correction's log into
/// `validation/corrections-applied.json`.
fn apply_corrections(context: &Context<'_>, corrections: &[&UnitRow]) -> Result<(), Step> {
    let stage = context.stage.name();
    let mut entries = Vec::new();
    for unit in corrections.iter().filter(|unit| unit.status == "success") {
        let spec = spec_of(unit);
        match findings::read_log(context.workspace, &spec.output, stage, unit.cycle) {
            Ok(log) => entries.extend(log),
            Err(error) => {
                return Err(invalid(
                    context,
                    &[(*unit, error)],
                    "wrote an invalid corrections log",
                ));
            }
        }
    }
    findings::write_applied(context.workspace, stage, &entries).map_err(|error| Step::Fail {
        error,
        record: Vec::new(),
    })
}
