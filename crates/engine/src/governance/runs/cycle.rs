//! One validation cycle of a run, in its ledger: a validation of the files
//! it judged, the re-review of what the last correction repaired, and its
//! critical findings as a review.

use baton_lifecycle::governance::{FindingStatus, Identity};
use baton_store::{FindingRow, Transition};
use baton_workflow::Plan;
use baton_workflow::plan::PlanStage;
use baton_workflow::schema::Strategy;

use super::super::{Entry, Who};
use super::ledger::RunLedger;
use super::{resolve, validated, validator_roles};
use crate::work;

impl RunLedger {
    /// The files of `judged` edited so far, or `<stage>/` when none is
    /// known: what a validation by `stage` covers.
    pub(super) fn covered(&self, judged: &[&PlanStage], stage: &PlanStage) -> Vec<String> {
        let edited = judged.iter().filter_map(|s| self.edited.get(s.name()));
        let covered: Vec<String> = edited.flatten().cloned().collect();
        if covered.is_empty() {
            vec![format!("{}/", stage.name())]
        } else {
            covered
        }
    }

    /// One validation cycle: a validation of the validated stages' files,
    /// the re-review of what the last correction repaired, and the new
    /// blocking findings as a review.
    #[expect(clippy::too_many_arguments, reason = "one cycle's facts")]
    pub(super) fn cycle(
        &mut self,
        plan: &Plan,
        stage: &PlanStage,
        index: i64,
        cycle: i64,
        findings: &[FindingRow],
        now: i64,
        out: &mut Vec<Transition>,
    ) {
        let strategy = stage
            .spec
            .validation
            .as_ref()
            .map_or(Strategy::Unit, |v| v.strategy);
        let role = *validator_roles(strategy)
            .last()
            .unwrap_or(&work::validation::VALIDATOR);
        let session = format!("{}/{}", self.run_id, stage.name());
        let judge = self
            .config
            .as_deref()
            .and_then(|config| resolve(config, role, None, session.clone()))
            .unwrap_or(Identity {
                profile: role.to_owned(),
                model: None,
                session,
            });
        let blocking: Vec<&FindingRow> = findings
            .iter()
            .filter(|f| f.status == "FAIL" && f.severity == "critical")
            .collect();
        // The validated stages' files, and the validating stage's own (its
        // report, its corrections' logs): the cycle judged them all.
        let mut judged = validated(plan, stage);
        if !judged.iter().any(|s| s.index == stage.index) {
            judged.push(stage);
        }
        out.push(self.record(
            Entry::Validated {
                command: format!(
                    "validation of {} ({strategy:?}), cycle {cycle}",
                    stage.name()
                ),
                exit_code: i32::from(!blocking.is_empty()),
                covered: self.covered(&judged, stage),
            },
            &judge,
            now,
        ));
        let reviewer = Who::from(&judge);
        let previous = self.cycle_findings.remove(&index).unwrap_or_default();
        for (finding, id) in &previous {
            if self
                .state
                .findings()
                .get(*finding)
                .is_some_and(|(_, s)| *s == FindingStatus::Repaired)
            {
                let resolved = !blocking.iter().any(|f| f.id == *id);
                out.push(self.record(
                    Entry::ReReviewed {
                        reviewer: reviewer.clone(),
                        finding: *finding,
                        resolved,
                    },
                    &judge,
                    now,
                ));
            }
        }
        let first = self.state.findings().len();
        // `<id> (<stage>): <what>`: a resumed drive reads the id back
        // (`RunLedger::remember_cycle`).
        let texts: Vec<String> = blocking
            .iter()
            .map(|f| {
                format!(
                    "{} ({}): {}",
                    f.id,
                    stage.name(),
                    if f.actual.is_empty() {
                        &f.claim
                    } else {
                        &f.actual
                    }
                )
            })
            .collect();
        out.push(self.record(
            Entry::Reviewed {
                reviewer,
                findings: texts,
            },
            &judge,
            now,
        ));
        self.cycle_findings.insert(
            index,
            blocking
                .iter()
                .enumerate()
                .map(|(n, f)| (first + n, f.id.clone()))
                .collect(),
        );
    }
}
