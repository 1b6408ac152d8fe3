//! A run's ledger as the coordinator extends it, batch by batch (see
//! `runs.rs` for what is recorded and under which identity).

use std::collections::{BTreeMap, BTreeSet};

use baton_executor::profile::Config;
use baton_lifecycle::governance::{FindingStatus, Identity, State, observe};
use baton_store::{NewLedgerEvent, Transition};
use baton_workflow::Plan;
use baton_workflow::plan::PlanStage;

use super::super::{Entry, Recorded, ScopeKind};
use super::{ENGINE, SelfReviewConflict, stage_identity};
use crate::work;

/// The run's ledger as the coordinator extends it: the state folded so
/// far, the files each stage edited, and the findings each validating
/// stage's last cycle left.
pub(crate) struct RunLedger {
    pub(super) run_id: String,
    pub(super) state: State,
    /// Stage name → files it edited (workspace-relative).
    pub(super) edited: BTreeMap<String, BTreeSet<String>>,
    /// Stage index → (finding number, id) of its last cycle's blocking
    /// findings (read back from the recorded reviews when a run resumes).
    pub(super) cycle_findings: BTreeMap<i64, Vec<(usize, String)>>,
    pub(super) config: Option<std::sync::Arc<Config>>,
}

impl RunLedger {
    /// The ledger of `run_id` as recorded (`entries`), and the transitions
    /// that open it when it is empty (what the run is, read, and how it is
    /// validated) or record allowed self-reviews not yet waived.
    pub(crate) fn open(
        run_id: &str,
        plan: &Plan,
        workflow_path: &str,
        config: Option<std::sync::Arc<Config>>,
        entries: &[Recorded],
        waived: &[SelfReviewConflict],
        now: i64,
    ) -> (RunLedger, Vec<Transition>) {
        let engine = Identity {
            profile: ENGINE.to_owned(),
            model: None,
            session: run_id.to_owned(),
        };
        let owner = super::super::owner(entries, &engine);
        let mut ledger = RunLedger {
            run_id: run_id.to_owned(),
            state: State::new(owner),
            edited: BTreeMap::new(),
            cycle_findings: BTreeMap::new(),
            config,
        };
        for recorded in entries {
            if let Entry::Edited { path, .. } = &recorded.entry
                && let Some((_, stage)) = recorded.identity.session.split_once('/')
            {
                ledger
                    .edited
                    .entry(stage.to_owned())
                    .or_default()
                    .insert(path.clone());
            }
            let first = ledger.state.findings().len();
            ledger.fold(&recorded.entry);
            ledger.remember_cycle(plan, recorded, first);
        }
        let mut out = Vec::new();
        if entries.is_empty() {
            let (validation_intent, validation_claimed) = validation_intent(plan);
            for entry in [
                Entry::Clarified {
                    note: Some(format!("workflow {workflow_path}")),
                },
                Entry::Inspected {
                    path: workflow_path.to_owned(),
                },
                Entry::Planned {
                    validation_intent,
                    validation_claimed,
                },
            ] {
                out.push(ledger.record(entry, &engine, now));
            }
        }
        for conflict in waived {
            let reason = format!(
                "[governance] self_review = \"allow\": stage `{}` validates `{}` under the same profile `{}`",
                conflict.stage, conflict.producer, conflict.identity.profile
            );
            let already = entries.iter().any(
                |r| matches!(&r.entry, Entry::Waived { reason: known, .. } if *known == reason),
            );
            if !already {
                out.push(ledger.record(
                    Entry::Waived {
                        rule: "self_review".to_owned(),
                        reason,
                    },
                    &engine,
                    now,
                ));
            }
        }
        (ledger, out)
    }

    /// Takes a recorded review of a validation cycle (see `cycle.rs`) as
    /// its stage's last cycle's blocking findings, numbered from `first`:
    /// what the stage's correction repairs and its next cycle re-reviews,
    /// in a drive that resumes the run as in the one that recorded them.
    fn remember_cycle(&mut self, plan: &Plan, recorded: &Recorded, first: usize) {
        let Entry::Reviewed { findings, .. } = &recorded.entry else {
            return;
        };
        let Some(stage) = recorded
            .identity
            .session
            .strip_prefix(self.run_id.as_str())
            .and_then(|rest| rest.strip_prefix('/'))
            .and_then(|name| plan.stages.iter().find(|stage| stage.name() == name))
        else {
            return;
        };
        // Each finding as `cycle` writes it: `<id> (<stage>): <what>`.
        let after_id = format!(" ({}): ", stage.name());
        let cycle = findings
            .iter()
            .enumerate()
            .map(|(n, text)| {
                let id = text
                    .split_once(&after_id)
                    .map_or(text.as_str(), |(id, _)| id);
                (first + n, id.to_owned())
            })
            .collect();
        self.cycle_findings
            .insert(i64::try_from(stage.index).unwrap_or(i64::MAX), cycle);
    }

    fn fold(&mut self, entry: &Entry) {
        if let Some(event) = entry.event() {
            self.state = observe(&self.state, &event).state;
        }
    }

    pub(super) fn record(&mut self, entry: Entry, who: &Identity, now: i64) -> Transition {
        self.fold(&entry);
        let (kind, payload) = entry.encode();
        Transition::LedgerAppended(NewLedgerEvent {
            scope_kind: ScopeKind::Run.as_str().to_owned(),
            scope_key: self.run_id.clone(),
            kind,
            payload,
            profile: who.profile.clone(),
            model: who.model.clone(),
            session: who.session.clone(),
            recorded_at: now,
        })
    }

    fn edits(
        &mut self,
        stage: &PlanStage,
        who: &Identity,
        artifacts: &[(String, String, i64)],
        now: i64,
        out: &mut Vec<Transition>,
    ) {
        for (path, hash, _) in artifacts {
            self.edited
                .entry(stage.name().to_owned())
                .or_default()
                .insert(path.clone());
            out.push(self.record(
                Entry::Edited {
                    path: path.clone(),
                    hash: hash.clone(),
                },
                who,
                now,
            ));
        }
    }

    /// The ledger entries for a batch about to be committed, in its order.
    /// `kind_of(index, key)` names a unit's kind.
    pub(crate) fn derive(
        &mut self,
        plan: &Plan,
        batch: &[Transition],
        kind_of: impl Fn(i64, &str) -> Option<String>,
        now: i64,
    ) -> Vec<Transition> {
        let mut out = Vec::new();
        let config = self.config.clone();
        for transition in batch {
            match transition {
                Transition::AttemptFinished {
                    index,
                    status,
                    artifacts,
                    ..
                } if status == "success" => {
                    let Some(stage) = stage_at(plan, *index) else {
                        continue;
                    };
                    let who = stage_identity(&self.run_id, stage, config.as_deref());
                    // A composite stage's outputs were recorded unit by unit.
                    if !work::is_composite(stage) {
                        self.edits(stage, &who, artifacts, now, &mut out);
                    }
                    // A success means its output checks passed: a validation
                    // of its files, by baton.
                    if !stage.spec.validates_output.is_empty() {
                        let engine = Identity {
                            profile: ENGINE.to_owned(),
                            model: None,
                            session: who.session.clone(),
                        };
                        let entry = Entry::Validated {
                            command: format!("output checks of {}", stage.name()),
                            exit_code: 0,
                            covered: self.covered(&[stage], stage),
                        };
                        out.push(self.record(entry, &engine, now));
                    }
                }
                Transition::UnitFinished {
                    index,
                    key,
                    status,
                    artifacts,
                    ..
                } if status == "success" => {
                    let Some(stage) = stage_at(plan, *index) else {
                        continue;
                    };
                    let kind = kind_of(*index, key).unwrap_or_else(|| kind_from_key(key));
                    let who = stage_identity(&self.run_id, stage, config.as_deref());
                    match kind.as_str() {
                        work::MAIN | work::ITEM => {
                            self.edits(stage, &who, artifacts, now, &mut out)
                        }
                        work::validation::CORRECTION | work::validation::CHECK_CORRECTION => {
                            let open: Vec<usize> = self
                                .cycle_findings
                                .get(index)
                                .map(|f| f.iter().map(|(n, _)| *n).collect())
                                .unwrap_or_default();
                            for finding in open {
                                if self
                                    .state
                                    .findings()
                                    .get(finding)
                                    .is_some_and(|(_, s)| *s == FindingStatus::Open)
                                {
                                    out.push(self.record(Entry::Repaired { finding }, &who, now));
                                }
                            }
                            self.edits(stage, &who, artifacts, now, &mut out);
                        }
                        _ => {}
                    }
                }
                Transition::ArtifactsRecorded {
                    index, artifacts, ..
                } => {
                    // Another stage's correction changed this stage's files.
                    let Some(stage) = stage_at(plan, *index) else {
                        continue;
                    };
                    let who = stage_identity(&self.run_id, stage, config.as_deref());
                    self.edits(stage, &who, artifacts, now, &mut out);
                }
                Transition::FindingsRecorded {
                    index,
                    cycle,
                    findings,
                } => {
                    let Some(stage) = stage_at(plan, *index) else {
                        continue;
                    };
                    self.cycle(plan, stage, *index, *cycle, findings, now, &mut out);
                }
                _ => {}
            }
        }
        out
    }
}

/// How a run is validated, and whether it claims validation at all: a
/// workflow whose stages declare neither `validation:` nor output checks
/// claims none, so nothing it writes is held to the freshness rule.
fn validation_intent(plan: &Plan) -> (String, bool) {
    let validated: Vec<String> = plan
        .stages
        .iter()
        .filter_map(|s| {
            s.spec
                .validation
                .as_ref()
                .map(|v| format!("{} ({:?})", s.name(), v.strategy))
        })
        .collect();
    let checked: Vec<&str> = plan
        .stages
        .iter()
        .filter(|s| !s.spec.validates_output.is_empty())
        .map(|s| s.name())
        .collect();
    let mut parts = Vec::new();
    if !validated.is_empty() {
        parts.push(format!("validation of {}", validated.join(", ")));
    }
    if !checked.is_empty() {
        parts.push(format!("output checks of {}", checked.join(", ")));
    }
    if parts.is_empty() {
        return (
            "none: no stage declares validation or output checks".to_owned(),
            false,
        );
    }
    (parts.join("; "), true)
}

/// A unit's kind from its key, for a unit whose stage has already ended
/// (the key formats of `work`).
fn kind_from_key(key: &str) -> String {
    let numbered = |prefix: char| {
        key.strip_prefix(prefix)
            .and_then(|rest| rest.split_once(':'))
            .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    if key == work::MAIN {
        work::MAIN
    } else if numbered('v') {
        work::validation::VALIDATOR
    } else if numbered('c') {
        work::validation::CORRECTION
    } else {
        work::ITEM
    }
    .to_owned()
}

pub(super) fn stage_at(plan: &Plan, index: i64) -> Option<&PlanStage> {
    usize::try_from(index)
        .ok()
        .and_then(|index| plan.stages.get(index))
}

#[cfg(test)]
mod tests {
    use baton_store::{FindingRow, LedgerEventRow, NewLedgerEvent, Transition};
    use baton_workflow::MemoryLoader;

    use super::{RunLedger, kind_from_key};

    fn plan() -> baton_workflow::Plan {
        let yaml = "name: t\nversion: '1'\ndescription: d\ntrigger: {source: manual}\nstages:\n  - {name: report, kind: execute, description: d, executor: inline, script: 'true', writes_to: [r.json], validation: {strategy: cross_unit}}\n";
        let loader = MemoryLoader::new().with("w.yaml", yaml);
        let loaded = baton_workflow::load("w.yaml", &loader).expect("loads");
        baton_workflow::compile(&loaded, &Default::default(), &loader).expect("compiles")
    }

    fn findings(cycle: i64, status: &str, severity: &str) -> Transition {
        Transition::FindingsRecorded {
            index: 0,
            cycle,
            findings: vec![FindingRow {
                index: 0,
                cycle,
                position: 0,
                id: "F1".to_owned(),
                status: status.to_owned(),
                severity: severity.to_owned(),
                category: "accuracy".to_owned(),
                claim: "c".to_owned(),
                expected: "e".to_owned(),
                actual: "a".to_owned(),
                source: "s".to_owned(),
                fix: "f".to_owned(),
            }],
        }
    }

    fn corrected() -> Transition {
        Transition::UnitFinished {
            index: 0,
            key: "c1:correct".to_owned(),
            status: "success".to_owned(),
            at: 3,
            exit_code: Some(0),
            error: None,
            artifacts: Vec::new(),
        }
    }

    fn kinds(transitions: &[Transition]) -> Vec<String> {
        transitions
            .iter()
            .filter_map(|transition| match transition {
                Transition::LedgerAppended(event) => Some(event.kind.clone()),
                _ => None,
            })
            .collect()
    }

    /// The ledger as the store would give it back.
    fn stored(events: &[Transition]) -> Vec<crate::governance::Recorded> {
        let rows: Vec<LedgerEventRow> = events
            .iter()
            .filter_map(|transition| match transition {
                Transition::LedgerAppended(event) => Some(event),
                _ => None,
            })
            .zip(1..)
            .map(|(event, seq): (&NewLedgerEvent, i64)| LedgerEventRow {
                seq,
                kind: event.kind.clone(),
                payload: event.payload.clone(),
                profile: event.profile.clone(),
                model: event.model.clone(),
                session: event.session.clone(),
                recorded_at: event.recorded_at,
            })
            .collect();
        crate::governance::decode(&rows).expect("decodes")
    }

    /// A drive that resumes a run between a cycle's critical finding and
    /// its correction records the repair and the next cycle's re-review,
    /// as the drive that recorded the finding would have.
    #[test]
    fn a_resumed_ledger_repairs_and_re_reviews_the_last_cycles_findings() {
        let plan = plan();
        let kind_of = |_: i64, _: &str| None;
        let (mut first, mut recorded) = RunLedger::open("r", &plan, "w.yaml", None, &[], &[], 1);
        recorded.extend(first.derive(&plan, &[findings(1, "FAIL", "critical")], kind_of, 2));
        let went_on = [
            first.derive(&plan, &[corrected()], kind_of, 3),
            first.derive(&plan, &[findings(2, "PASS", "info")], kind_of, 4),
        ];
        let (mut resumed, opening) =
            RunLedger::open("r", &plan, "w.yaml", None, &stored(&recorded), &[], 5);
        assert!(opening.is_empty());
        let after_resume = [
            resumed.derive(&plan, &[corrected()], kind_of, 6),
            resumed.derive(&plan, &[findings(2, "PASS", "info")], kind_of, 7),
        ];
        assert_eq!(kinds(&went_on[0]), ["repaired"]);
        assert_eq!(kinds(&went_on[1]), ["validated", "re_reviewed", "reviewed"]);
        for (went_on, resumed) in went_on.iter().zip(&after_resume) {
            assert_eq!(kinds(resumed), kinds(went_on));
        }
    }

    #[test]
    fn unit_kinds_are_read_back_from_their_keys() {
        for (key, kind) in [
            ("main", "main"),
            ("v1:cross", "validator"),
            ("v12:unit:3", "validator"),
            ("c2:correct", "correction"),
            ("c1:correct-outputs", "correction"),
            ("item-7", "item"),
            ("v:x", "item"),
            ("cats", "item"),
        ] {
            assert_eq!(kind_from_key(key), kind, "{key}");
        }
    }
}
