//! The validation program as a pure function: unit lists and files in a
//! temporary workspace in, steps out.

use baton_store::{Transition, UnitRow};
use baton_workflow::schema::Access;
use baton_workflow::{MemoryLoader, Plan};

use super::super::{Context, Step, materialize, step};
use crate::run_state::composite::pending;

const HEADER: &str = "name: t\nversion: '1'\ndescription: d\ntrigger: {source: manual}\nstages:\n";

/// A workspace, a plan, and the units recorded so far.
struct Run {
    directory: tempfile::TempDir,
    plan: Plan,
    units: Vec<UnitRow>,
}

impl Run {
    fn new(stages: &str) -> Run {
        let yaml = format!("{HEADER}{stages}");
        let loader = MemoryLoader::new().with("w.yaml", &yaml);
        let loaded = baton_workflow::load("w.yaml", &loader).expect("loads");
        let plan =
            baton_workflow::compile(&loaded, &Default::default(), &loader).expect("compiles");
        Run {
            directory: tempfile::tempdir().expect("temp dir"),
            plan,
            units: Vec::new(),
        }
    }

    fn context<'a>(&'a self, stage: &str) -> Context<'a> {
        Context {
            plan: &self.plan,
            stage: self.plan.stage(stage).expect("stage"),
            workspace: self.directory.path(),
            now: 1_000,
        }
    }

    fn write(&self, relative: &str, text: &str) {
        let path = self.directory.path().join(relative);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
        std::fs::write(path, text).expect("write");
    }

    fn read(&self, relative: &str) -> serde_json::Value {
        let text = std::fs::read_to_string(self.directory.path().join(relative)).expect("read");
        serde_json::from_str(&text).expect("json")
    }

    /// Steps the stage; a `Next` is recorded as pending units.
    fn step(&mut self, stage: &str) -> Step {
        let next = step(&self.context(stage), &self.units);
        if let Step::Next { units, .. } = &next {
            let index = i64::try_from(self.plan.stage(stage).expect("stage").index).expect("small");
            self.units
                .extend(units.iter().map(|unit| pending(index, unit.clone())));
        }
        next
    }

    /// Finishes every pending unit: `output` gives the text each writes to
    /// its one output (None: it fails).
    fn finish(&mut self, stage: &str, output: impl Fn(&UnitRow) -> Option<String>) {
        let pending: Vec<usize> = (0..self.units.len())
            .filter(|&position| self.units[position].status == "pending")
            .collect();
        for position in pending {
            let unit = self.units[position].clone();
            let materialized = materialize(&self.context(stage), &unit).expect("materializes");
            match output(&unit) {
                Some(text) => {
                    for declared in &materialized.stage.spec.writes_to {
                        self.write(&crate::workspace::output_path(&declared.value), &text);
                    }
                    self.units[position].status = "success".to_owned();
                    self.units[position].attempts += 1;
                }
                None => {
                    self.units[position].status = "failed".to_owned();
                    self.units[position].error = Some("exited with code 3".to_owned());
                }
            }
        }
    }

    fn keys(&self) -> Vec<&str> {
        self.units.iter().map(|unit| unit.key.as_str()).collect()
    }

    fn unit(&self, key: &str) -> &UnitRow {
        self.units
            .iter()
            .find(|unit| unit.key == key)
            .expect("unit")
    }
}

const PASS: &str = r#"[{"id": "F1", "status": "PASS", "claim": "fine", "severity": "info"}]"#;
const CRITICAL: &str =
    r#"[{"id": "F1", "status": "FAIL", "claim": "the total is wrong", "severity": "critical"}]"#;
const LOG: &str = r#"[{"finding_id": "F1", "change": "fixed the total"}]"#;

/// A producing stage whose output is a list of three items.
fn produce(validation: &str) -> String {
    format!(
        "  - name: produce\n    kind: execute\n    description: Write the list.\n    agent: {{role: writer}}\n    writes_to: [list.json]\n    validation: {validation}\n"
    )
}

/// Runs the primary work: the list is written and the main unit succeeds.
fn primary(run: &mut Run) {
    assert!(matches!(run.step("produce"), Step::Next { .. }));
    run.write(
        "outputs/list.json",
        r#"[{"id": "a"}, {"id": "b"}, {"id": "c"}]"#,
    );
    run.finish("produce", |_| {
        Some(r#"[{"id": "a"}, {"id": "b"}, {"id": "c"}]"#.to_owned())
    });
}

fn findings_of(record: &[Transition]) -> Vec<(i64, usize)> {
    record
        .iter()
        .filter_map(|transition| match transition {
            Transition::FindingsRecorded {
                cycle, findings, ..
            } => Some((*cycle, findings.len())),
            _ => None,
        })
        .collect()
}

fn by_kind(kind: &str) -> impl Fn(&UnitRow) -> Option<String> + '_ {
    move |unit| {
        Some(match unit.kind.as_str() {
            "correction" => LOG.to_owned(),
            _ => kind.to_owned(),
        })
    }
}

#[test]
fn validators_are_planned_one_per_unit_in_one_wave() {
    let mut run = Run::new(&produce("{strategy: unit, criteria: [Totals add up]}"));
    primary(&mut run);
    let Step::Next { units, .. } = run.step("produce") else {
        panic!("validators planned");
    };
    let keys: Vec<&str> = units.iter().map(|unit| unit.key.as_str()).collect();
    assert_eq!(keys, ["v1:unit:1", "v1:unit:2", "v1:unit:3"]);
    assert!(
        units
            .iter()
            .all(|unit| unit.kind == "validator" && unit.cycle == 1)
    );
    assert_eq!(units[0].label, "produce[v1:unit:1]");
    let materialized =
        materialize(&run.context("produce"), run.unit("v1:unit:2")).expect("materializes");
    let stage = &materialized.stage;
    assert_eq!(stage.name(), "produce-v1-unit-2");
    assert_eq!(stage.spec.agent.role, "validator");
    assert_eq!(stage.spec.agent.access, Access::ReadOnly);
    let writes: Vec<&str> = stage
        .spec
        .writes_to
        .iter()
        .map(|w| w.value.as_str())
        .collect();
    assert_eq!(writes, ["validation/produce/cycle-1/unit-2.json"]);
    for expected in [
        "strategy: unit",
        "Totals add up",
        "Item 2 of the list in {workspace}/outputs/list.json",
        "\"id\": \"b\"",
        "\"status\": \"FAIL\"",
        "critical",
    ] {
        assert!(
            stage.description.contains(expected),
            "{expected}: {}",
            stage.description
        );
    }
}

#[test]
fn a_correction_cycle_converges() {
    let mut run = Run::new(&produce("{strategy: unit}"));
    primary(&mut run);
    run.step("produce");
    run.finish("produce", by_kind(CRITICAL));
    let Step::Next { units, record } = run.step("produce") else {
        panic!("a correction");
    };
    assert_eq!(findings_of(&record), [(1, 3)]);
    assert_eq!(units[0].key, "c1:correct");
    assert_eq!(units[0].kind, "correction");
    // The merged findings keep ids unique.
    let merged = run.read("validation/produce-findings.json");
    assert_eq!(merged[2]["id"], "F1#3");
    let correction =
        materialize(&run.context("produce"), run.unit("c1:correct")).expect("materializes");
    assert_eq!(correction.stage.spec.agent.role, "writer");
    assert_eq!(correction.stage.spec.agent.access, Access::ReadWrite);
    assert!(correction.stage.description.contains("the total is wrong"));
    assert!(
        correction
            .stage
            .description
            .contains("Fix only these findings")
    );
    run.finish("produce", by_kind(CRITICAL));
    let Step::Next { units, .. } = run.step("produce") else {
        panic!("cycle 2");
    };
    assert_eq!(units[0].key, "v2:unit:1");
    assert_eq!(units[0].cycle, 2);
    let applied = run.read("validation/corrections-applied.json");
    assert_eq!(applied[0]["stage"], "produce");
    assert_eq!(applied[0]["cycle"], 1);
    assert_eq!(applied[0]["finding_id"], "F1");
    run.finish("produce", by_kind(PASS));
    let Step::Done { record } = run.step("produce") else {
        panic!("done");
    };
    assert_eq!(findings_of(&record), [(2, 3)]);
}

#[test]
fn exhausting_max_revisions_fails_listing_the_findings() {
    let mut run = Run::new(&produce("{strategy: cross_unit, max_revisions: 1}"));
    primary(&mut run);
    run.step("produce");
    assert_eq!(run.keys()[1], "v1:cross");
    run.finish("produce", by_kind(CRITICAL));
    run.step("produce");
    run.finish("produce", by_kind(CRITICAL));
    run.step("produce");
    run.finish("produce", by_kind(CRITICAL));
    let Step::Fail { error, record } = run.step("produce") else {
        panic!("fails");
    };
    assert_eq!(
        error,
        "validation of 'produce' still has 1 critical finding after 1 correction cycle (no correction cycle left): F1: the total is wrong"
    );
    assert_eq!(findings_of(&record), [(2, 1)]);
    assert_eq!(run.keys(), ["main", "v1:cross", "c1:correct", "v2:cross"]);
}

#[test]
fn max_revisions_zero_halts_at_once() {
    let mut run = Run::new(&produce("{strategy: deliverable, max_revisions: 0}"));
    primary(&mut run);
    run.step("produce");
    let materialized =
        materialize(&run.context("produce"), run.unit("v1:deliverable")).expect("materializes");
    // The goal is quoted, not given as instructions.
    assert!(materialized.stage.description.contains("> Write the list."));
    run.finish("produce", by_kind(CRITICAL));
    let Step::Fail { error, .. } = run.step("produce") else {
        panic!("fails");
    };
    assert_eq!(
        error,
        "validation of 'produce' has 1 critical finding and max_revisions is 0 (no correction cycle left): F1: the total is wrong"
    );
}

#[test]
fn a_failed_validator_fails_the_stage() {
    let mut run = Run::new(&produce("{strategy: fact_check}"));
    primary(&mut run);
    run.step("produce");
    run.finish("produce", |_| None);
    let Step::Fail { error, .. } = run.step("produce") else {
        panic!("fails");
    };
    assert_eq!(
        error,
        "validator produce[v1:fact-check] failed: exited with code 3"
    );
}

#[test]
fn invalid_findings_fail_the_stage_and_the_unit() {
    let mut run = Run::new(&produce("{strategy: unit}"));
    primary(&mut run);
    run.step("produce");
    run.finish("produce", |unit| {
        Some(if unit.key == "v1:unit:1" {
            PASS.to_owned()
        } else {
            r#"[{"id": "F9", "status": "BROKEN", "severity": "minor"}]"#.to_owned()
        })
    });
    let Step::Fail { error, record } = run.step("produce") else {
        panic!("fails");
    };
    assert_eq!(
        error,
        "validator produce[v1:unit:2] wrote invalid findings: validation/produce/cycle-1/unit-2.json: finding 1 (id F9): 'status' is 'BROKEN', not one of PASS, FAIL, WARN (and 1 more: produce[v1:unit:3])"
    );
    // Those units are failed, so a resume runs them again.
    let failed: Vec<&str> = record
        .iter()
        .filter_map(|transition| match transition {
            Transition::UnitFinished { key, status, .. } if status == "failed" => {
                Some(key.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(failed, ["v1:unit:2", "v1:unit:3"]);
}

#[test]
fn adversarial_plans_challengers_then_evidence() {
    let mut run = Run::new(&produce("{strategy: adversarial}"));
    primary(&mut run);
    let Step::Next { units, .. } = run.step("produce") else {
        panic!("challengers");
    };
    assert!(units.iter().all(|unit| unit.kind == "challenger"));
    assert_eq!(units[0].key, "v1:challenge:1");
    let challenger =
        materialize(&run.context("produce"), run.unit("v1:challenge:1")).expect("materializes");
    assert_eq!(challenger.stage.spec.agent.role, "challenger");
    assert_eq!(
        challenger.stage.spec.writes_to[0].value,
        "validation/challenges/produce-1.json"
    );
    // Only the second unit draws a challenge.
    run.finish("produce", |unit| {
        Some(if unit.key == "v1:challenge:2" {
            r#"[{"id": "C1", "claim": "b", "challenge": "b is not a letter"}]"#.to_owned()
        } else {
            "[]".to_owned()
        })
    });
    let Step::Next { units, .. } = run.step("produce") else {
        panic!("evidence");
    };
    assert_eq!(units.len(), 1);
    assert_eq!(units[0].key, "v1:evidence:2");
    assert_eq!(units[0].kind, "evidence");
    let evidence =
        materialize(&run.context("produce"), run.unit("v1:evidence:2")).expect("materializes");
    assert_eq!(evidence.stage.spec.agent.role, "evidence");
    assert_eq!(
        evidence.stage.spec.writes_to[0].value,
        "validation/evidence/produce-2.json"
    );
    assert!(evidence.stage.description.contains("b is not a letter"));
    run.finish("produce", by_kind(CRITICAL));
    let Step::Next { units, record } = run.step("produce") else {
        panic!("a correction");
    };
    assert_eq!(findings_of(&record), [(1, 1)]);
    assert_eq!(units[0].key, "c1:correct");
}

#[test]
fn adversarial_without_challenges_is_done() {
    let mut run = Run::new(&produce("{strategy: adversarial}"));
    primary(&mut run);
    run.step("produce");
    run.finish("produce", |_| Some("[]".to_owned()));
    let Step::Done { record } = run.step("produce") else {
        panic!("done");
    };
    assert_eq!(findings_of(&record), [(1, 0)]);
}

#[test]
fn a_resume_mid_cycle_continues_from_the_right_cycle() {
    let mut run = Run::new(&produce("{strategy: unit, max_revisions: 2}"));
    primary(&mut run);
    run.step("produce");
    run.finish("produce", by_kind(CRITICAL));
    run.step("produce");
    run.finish("produce", by_kind(CRITICAL));
    // A crash after the correction finished, before cycle 2 was planned:
    // the step runs twice; the applied log does not double.
    let units = run.units.clone();
    let _ = step(&run.context("produce"), &units);
    run.step("produce");
    assert_eq!(
        run.read("validation/corrections-applied.json")
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    // Cycle 2: two validators finished before a crash, the third ran
    // again after the resume. The next correction is the second, not a
    // fresh first.
    run.finish("produce", by_kind(CRITICAL));
    let Step::Next { units, .. } = run.step("produce") else {
        panic!("correction 2");
    };
    assert_eq!(units[0].key, "c2:correct");
    run.finish("produce", by_kind(CRITICAL));
    run.step("produce");
    run.finish("produce", by_kind(CRITICAL));
    let Step::Fail { error, .. } = run.step("produce") else {
        panic!("budget spent");
    };
    assert!(
        error.starts_with("validation of 'produce' still has 3 critical findings after 2 correction cycles (no correction cycle left): F1: the total is wrong; F1#2: "),
        "{error}"
    );
    assert_eq!(
        run.read("validation/corrections-applied.json")
            .as_array()
            .map(Vec::len),
        Some(2)
    );
}

#[test]
fn a_validate_stage_judges_what_it_depends_on() {
    let stages = "  - name: draft\n    kind: propose\n    description: Draft.\n    agent: {role: doc-writer}\n    writes_to: [draft.md, notes.md]\n  - name: check\n    kind: validate\n    description: Check.\n    depends_on: [draft]\n    reads_from: [draft]\n    agent: {role: unit-validator}\n    writes_to: [validation/check.json]\n    validation: {strategy: unit}\n";
    let mut run = Run::new(stages);
    assert!(matches!(run.step("check"), Step::Next { .. }));
    run.write("outputs/draft.md", "# draft");
    run.write("outputs/notes.md", "notes");
    run.finish("check", |_| Some("{}".to_owned()));
    let Step::Next { units, .. } = run.step("check") else {
        panic!("validators");
    };
    let files: Vec<String> = units
        .iter()
        .map(|unit| {
            serde_json::from_str::<serde_json::Value>(&unit.spec).expect("json")["target"]["file"]
                .as_str()
                .expect("file")
                .to_owned()
        })
        .collect();
    assert_eq!(files, ["outputs/draft.md", "outputs/notes.md"]);
    let validator = materialize(&run.context("check"), run.unit("v1:unit:1")).expect("ok");
    assert_eq!(validator.stage.reads_from, [0]);
    run.finish("check", by_kind(CRITICAL));
    run.step("check");
    let correction = materialize(&run.context("check"), run.unit("c1:correct")).expect("ok");
    // The producing stage's role corrects.
    assert_eq!(correction.stage.spec.agent.role, "doc-writer");
}

#[test]
fn an_inline_producer_is_corrected_by_the_correction_role() {
    let stages = "  - name: produce\n    kind: execute\n    description: d\n    executor: inline\n    script: 'true'\n    writes_to: [r.md]\n    validation: {strategy: cross_unit}\n";
    let mut run = Run::new(stages);
    run.step("produce");
    run.finish("produce", |_| Some("r".to_owned()));
    run.step("produce");
    run.finish("produce", by_kind(CRITICAL));
    run.step("produce");
    let correction = materialize(&run.context("produce"), run.unit("c1:correct")).expect("ok");
    assert_eq!(correction.stage.spec.agent.role, "correction");
    assert_eq!(
        correction.stage.spec.executor,
        baton_workflow::schema::Executor::Agent
    );
    assert!(correction.stage.spec.script.is_none());
}

/// The log a correction unit says it continues the session of.
fn continues(run: &Run, key: &str) -> Option<String> {
    let spec: serde_json::Value = serde_json::from_str(&run.unit(key).spec).expect("json");
    spec["continues"].as_str().map(str::to_owned)
}

#[test]
fn a_correction_continues_the_session_of_the_work_before_it() {
    let mut run = Run::new(&produce("{strategy: cross_unit}"));
    primary(&mut run);
    run.step("produce");
    run.finish("produce", by_kind(CRITICAL));
    run.step("produce");
    assert_eq!(
        continues(&run, "c1:correct").as_deref(),
        Some("logs/000-produce/1.stdout")
    );
    let correction = materialize(&run.context("produce"), run.unit("c1:correct")).expect("ok");
    let continuation = correction.continues.expect("a session to continue");
    assert_eq!(
        continuation.log,
        run.directory.path().join("logs/000-produce/1.stdout")
    );
    // The session ran read-only (the stage's access); the fresh correction
    // would run read-write.
    assert_eq!(continuation.access, Access::ReadOnly);
    assert_eq!(correction.stage.spec.agent.access, Access::ReadWrite);
    let task = &continuation.task;
    assert!(
        task.starts_with("Your work in this session was checked: validation cycle 1 found 1 critical finding in the output of `produce`"),
        "{task}"
    );
    for expected in [
        "## Files to correct\n\n- {workspace}/outputs/list.json",
        "the total is wrong",
        "{workspace}/validation/produce/cycle-1/corrections.json",
    ] {
        assert!(task.contains(expected), "{expected}: {task}");
    }
    assert!(!task.contains("The producing stage's task"), "{task}");
    // The fresh prompt lists the same files to correct, after the task.
    assert!(
        correction.stage.description.contains(
            "## The producing stage's task\n\n> Write the list.\n\n## Files to correct\n"
        )
    );
    // The next correction continues the session the first one left.
    run.finish("produce", by_kind(CRITICAL));
    run.step("produce");
    run.finish("produce", by_kind(CRITICAL));
    run.step("produce");
    assert_eq!(
        continues(&run, "c2:correct").as_deref(),
        Some("logs/000-produce-c1-correct/1.stdout")
    );
}

#[test]
fn the_correction_of_output_checks_continues_the_stage_s_work() {
    let stage = "  - name: shape\n    kind: execute\n    description: Write x.\n    agent: {role: writer, access: read-write}\n    writes_to: [x.json]\n    validates_output: [{path: outputs/x.json, checks: [is_dict]}]\n";
    let mut run = Run::new(stage);
    run.step("shape");
    run.finish("shape", |_| Some("[1]".to_owned()));
    let Step::Next { units, .. } = run.step("shape") else {
        panic!("a correction");
    };
    assert_eq!(units[0].key, "c1:correct-outputs");
    assert_eq!(
        continues(&run, "c1:correct-outputs").as_deref(),
        Some("logs/000-shape/1.stdout")
    );
    let correction =
        materialize(&run.context("shape"), run.unit("c1:correct-outputs")).expect("ok");
    let continuation = correction.continues.expect("a session to continue");
    assert_eq!(continuation.access, Access::ReadWrite);
    assert!(
        continuation
            .task
            .starts_with("Your work in this session was checked: its output checks (`validates_output`) found 1 critical finding"),
        "{}",
        continuation.task
    );
}

#[test]
fn only_one_agent_session_in_the_project_is_continued() {
    // A script has no session; nor does an isolated stage's, whose
    // worktree is gone.
    for producer in [
        "executor: inline\n    script: 'true'",
        "agent: {role: writer, isolation: worktree}",
    ] {
        let stages = format!(
            "  - name: produce\n    kind: execute\n    description: d\n    {producer}\n    writes_to: [r.md]\n    validation: {{strategy: cross_unit}}\n"
        );
        let mut run = Run::new(&stages);
        run.step("produce");
        run.finish("produce", |_| Some("r".to_owned()));
        run.step("produce");
        run.finish("produce", by_kind(CRITICAL));
        run.step("produce");
        assert_eq!(continues(&run, "c1:correct"), None, "{producer}");
        let correction = materialize(&run.context("produce"), run.unit("c1:correct")).expect("ok");
        assert!(correction.continues.is_none(), "{producer}");
    }
}

#[test]
fn a_validate_stage_s_correction_continues_the_producer_s_latest_attempt() {
    let stages = "  - name: draft\n    kind: propose\n    description: Draft.\n    agent: {role: doc-writer}\n    writes_to: [draft.md]\n  - name: check\n    kind: validate\n    description: Check.\n    depends_on: [draft]\n    agent: {role: unit-validator}\n    writes_to: [validation/check.json]\n    validation: {strategy: cross_unit}\n";
    for (logs, expected) in [
        (
            &["1.stdout", "2.stdout", "2.retry-1.stdout", "10.stderr"][..],
            Some("logs/000-draft/2.stdout"),
        ),
        (&[][..], None),
    ] {
        let mut run = Run::new(stages);
        for log in logs {
            run.write(&format!("logs/000-draft/{log}"), "{}");
        }
        run.write("outputs/draft.md", "# draft");
        run.step("check");
        run.finish("check", |_| Some("{}".to_owned()));
        run.step("check");
        run.finish("check", by_kind(CRITICAL));
        run.step("check");
        assert_eq!(
            continues(&run, "c1:correct").as_deref(),
            expected,
            "{logs:?}"
        );
    }
}

fn text(run: &Run, relative: &str) -> String {
    std::fs::read_to_string(run.directory.path().join(relative)).expect("read")
}

#[test]
fn the_summary_tells_each_cycle_s_verdict_findings_budget_and_next_step() {
    const MIXED: &str = r#"[
        {"id": "F1", "status": "FAIL", "claim": "the total is wrong", "severity": "critical"},
        {"id": "F2", "status": "WARN", "claim": "", "actual": "dates use two\nformats", "severity": "minor"},
        {"id": "F3", "status": "PASS", "claim": "sources are cited", "severity": "info"}
    ]"#;
    let mut run = Run::new(&produce("{strategy: cross_unit, max_revisions: 2}"));
    primary(&mut run);
    run.step("produce");
    run.finish("produce", by_kind(MIXED));
    assert!(matches!(run.step("produce"), Step::Next { .. }));
    let first = text(&run, "validation/produce-summary.md");
    assert_eq!(
        first,
        "# Validation of `produce`\n\nStrategy `cross_unit`, at most 2 correction cycles (`max_revisions: 2`).\nLatest: cycle 1, FAIL. Its findings are in `validation/produce-findings.json`; every cycle's files are under `validation/produce/`.\n\n## Cycle 1: FAIL\n\n3 findings (1 critical, 1 minor, 1 info); 1 is critical (status FAIL, severity critical).\nCorrections used: 0 of 2.\n\n- F1 [FAIL, critical]: the total is wrong\n- F2 [WARN, minor]: dates use two formats\n- F3 [PASS, info]: sources are cited\n\nNext: the correction `produce[c1:correct]` fixes the 1 critical finding (F1), then cycle 2 validates again.\n"
    );
    run.finish("produce", by_kind(CRITICAL));
    run.step("produce");
    run.finish("produce", by_kind(PASS));
    assert!(matches!(run.step("produce"), Step::Done { .. }));
    let second = text(&run, "validation/produce-summary.md");
    assert!(
        second.contains("Latest: cycle 2, PASS."),
        "the header is the latest cycle's: {second}"
    );
    let (_, cycles) = second
        .split_once("\n## Cycle 1: FAIL\n")
        .expect("cycle 1 kept");
    assert!(cycles.contains("Next: the correction `produce[c1:correct]`"));
    let (_, latest) = cycles
        .split_once("\n## Cycle 2: PASS\n")
        .expect("cycle 2 after it");
    assert_eq!(
        latest,
        "\n1 finding (0 critical, 0 minor, 1 info); none is critical (status FAIL, severity critical).\nCorrections used: 1 of 2.\n\n- F1 [PASS, info]: fine\n\nNext: nothing; no critical finding remains, so the validation is done and the stage succeeds.\n"
    );
}

#[test]
fn the_summary_says_when_the_budget_is_spent_and_forgets_cycles_after_a_rerun() {
    let mut run = Run::new(&produce("{strategy: deliverable, max_revisions: 0}"));
    primary(&mut run);
    run.step("produce");
    run.finish("produce", by_kind(CRITICAL));
    assert!(matches!(run.step("produce"), Step::Fail { .. }));
    let summary = text(&run, "validation/produce-summary.md");
    assert!(summary.contains("## Cycle 1: FAIL"), "{summary}");
    assert!(summary.contains("Corrections used: 0 of 0."), "{summary}");
    assert!(
        summary.contains(
            "Next: the stage fails with 1 critical finding unresolved (F1): max_revisions (0) allows no further correction"
        ),
        "{summary}"
    );
    // A section of a later cycle left by an earlier try is not the latest
    // run's: only cycles 1 to the one decided are shown.
    run.write("validation/produce/cycle-2/summary.md", "## Cycle 2: old\n");
    let mut again = Run {
        directory: run.directory,
        plan: run.plan,
        units: Vec::new(),
    };
    primary(&mut again);
    again.step("produce");
    again.finish("produce", by_kind(PASS));
    assert!(matches!(again.step("produce"), Step::Done { .. }));
    let summary = text(&again, "validation/produce-summary.md");
    assert!(summary.contains("## Cycle 1: PASS"), "{summary}");
    assert!(!summary.contains("Cycle 2"), "{summary}");
}
