//! `validates_output` failures get one correction round (docs/validation.md).
//!
//! A stage with output checks runs its work as a `main` unit that does not
//! judge them; once it has succeeded (exited well, wrote its files), the
//! stage's program runs the checks on the files. Failures become critical
//! findings for one correction unit (`c1:correct-outputs`, an agent of the
//! stage's role, the same task and corrections log as a validation's
//! correction); then the checks run again, and the stage succeeds or fails
//! with what still fails. Like the rest of the program, this reads only the
//! finished units and the files, so a resume continues where it stopped.

use baton_store::UnitRow;

use super::corrections::apply_corrections;
use super::findings::Finding;
use super::unit::{CHECK_CORRECTION, Spec, is_validation_unit, new_unit, spec_of};
use crate::outputs::{describe_check, failed_checks};
use crate::work::context::{Context, Step};

/// The key of the correction unit.
const KEY: &str = "c1:correct-outputs";

/// The step the output checks call for, or `None` when they are settled
/// (they pass, or validation has already begun) and the stage goes on.
pub(crate) fn step(context: &Context<'_>, units: &[UnitRow]) -> Option<Step> {
    if units.iter().any(is_validation_unit) {
        return None;
    }
    let failures = failed_checks(context.stage, context.workspace);
    let Some(correction) = units.iter().find(|unit| unit.kind == CHECK_CORRECTION) else {
        if failures.is_empty() {
            return None;
        }
        return Some(Step::Next {
            units: vec![correction_unit(context, units, &failures)],
            record: Vec::new(),
        });
    };
    let original: Vec<String> = spec_of(correction)
        .findings
        .iter()
        .map(|finding| finding.claim.clone())
        .collect();
    if correction.status != "success" {
        // The checks that failed lead: they are the stage's problem.
        return Some(Step::Fail {
            error: format!(
                "output checks failed: {}; the correction round did not run to the end: correction {} failed: {}",
                original.join("; "),
                correction.label,
                correction.error.as_deref().unwrap_or("failed")
            ),
            record: Vec::new(),
        });
    }
    if let Err(step) = apply_corrections(context, &[correction]) {
        return Some(step);
    }
    if failures.is_empty() {
        return None;
    }
    Some(Step::Fail {
        error: format!(
            "output checks failed: {}; the correction round did not fix them (it was given: {})",
            failures
                .iter()
                .map(describe_check)
                .collect::<Vec<_>>()
                .join("; "),
            original.join("; ")
        ),
        record: Vec::new(),
    })
}

/// The correction unit, given the failed checks as critical findings.
fn correction_unit(
    context: &Context<'_>,
    units: &[UnitRow],
    failures: &[crate::checks::Finding],
) -> baton_store::NewUnit {
    let stage = context.stage.name();
    let findings = failures
        .iter()
        .enumerate()
        .map(|(position, failure)| Finding {
            id: format!("CHECK{}", position + 1),
            status: "FAIL".to_owned(),
            claim: describe_check(failure),
            expected: format!("{} passes {}", failure.path, failure.check),
            actual: failure.message.clone(),
            severity: "critical".to_owned(),
            category: "output-check".to_owned(),
            source: failure.path.clone(),
            fix: format!(
                "change {} so that it passes {}, keeping everything else",
                failure.path, failure.check
            ),
        })
        .collect();
    let spec = Spec {
        n: 1,
        output: format!("validation/{stage}/checks/corrections.json"),
        files: super::units::files(context.stage, context.workspace, units),
        findings,
        continues: super::session::of_own_work(context, units),
        ..Spec::default()
    };
    let ordinal = units.iter().map(|unit| unit.ordinal + 1).max().unwrap_or(0);
    new_unit(context, CHECK_CORRECTION, 0, KEY.to_owned(), ordinal, &spec)
}
