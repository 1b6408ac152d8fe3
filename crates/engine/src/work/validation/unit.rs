//! A validation unit: its kinds, the spec recorded with it, how a new one
//! is planned, and how its failure fails the stage.

use baton_store::{NewUnit, Transition, UnitRow};
use serde::{Deserialize, Serialize};

use super::findings::Finding;
use super::units::Target;
use crate::work::context::{Context, Step};

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
pub(super) struct Spec {
    /// Its number within the wave (from 1; 1 for a single validator).
    pub(super) n: usize,
    /// The one file it writes (workspace-relative).
    pub(super) output: String,
    /// The unit of output it judges (per-unit strategies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) target: Option<Target>,
    /// The subject's files (whole-output validators and corrections).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) files: Vec<String>,
    /// An evidence gatherer's challenges file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) challenges: Option<String>,
    /// A correction's critical findings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) findings: Vec<Finding>,
    /// A correction's: the stdout log (workspace-relative) of the attempt
    /// whose agent session it continues (`session.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) continues: Option<String>,
}

pub(super) fn is_validation_unit(unit: &UnitRow) -> bool {
    matches!(
        unit.kind.as_str(),
        VALIDATOR | CHALLENGER | EVIDENCE | CORRECTION
    )
}

/// Who a unit is, in messages.
pub(super) fn role_word(kind: &str) -> &'static str {
    match kind {
        CHALLENGER => "challenger",
        EVIDENCE => "evidence gatherer",
        CORRECTION | CHECK_CORRECTION => "correction",
        _ => "validator",
    }
}

/// The stage fails because a unit failed; a resume runs the unit again.
pub(super) fn failed(unit: &UnitRow) -> Step {
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
pub(super) fn invalid(context: &Context<'_>, bad: &[(&UnitRow, String)], what: &str) -> Step {
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

pub(super) fn stage_index(context: &Context<'_>) -> i64 {
    i64::try_from(context.stage.index).unwrap_or(i64::MAX)
}

pub(super) fn spec_of(unit: &UnitRow) -> Spec {
    serde_json::from_str(&unit.spec).unwrap_or_default()
}

pub(super) fn new_unit(
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
