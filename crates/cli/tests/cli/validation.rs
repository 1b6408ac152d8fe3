//! `validation:` end to end: validators, challengers, evidence gatherers
//! and correctors played by the stand-in agent through `baton.toml`
//! profiles, one per role, each given its directive in its environment.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::project::{HEADER, Project, run_id};

/// The stand-in agent next to the `baton` under test.
fn fake_agent() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_baton")).with_file_name("baton-fake-agent")
}

/// A `baton.toml` whose roles run the stand-in agent with these
/// directives: (role, directive).
fn agents(roles: &[(&str, &str)]) -> String {
    let fake = fake_agent();
    let mut text = format!(
        "[agents.default]\nprofile = \"fake\"\n\n[profiles.fake]\nprogram = \"{}\"\nprompt = {{ via = \"stdin\" }}\nenv_passthrough = [\"PATH\", \"HOME\"]\n",
        fake.display()
    );
    for (role, directive) in roles {
        text.push_str(&format!(
            "\n[agents.{role}]\nprofile = \"{role}\"\n\n[profiles.{role}]\nprogram = \"{}\"\nprompt = {{ via = \"stdin\" }}\nenv_passthrough = [\"PATH\", \"HOME\"]\nenv = {{ BATON_FAKE_AGENT = \"{directive}\" }}\n",
            fake.display()
        ));
    }
    text
}

/// An inline stage writing a list of three items, validated by `strategy`.
fn producer(name: &str, validation: &str) -> String {
    format!(
        "  - name: {name}\n    kind: execute\n    description: d\n    executor: inline\n    script: |\n      printf '[{{\"id\": \"a\"}}, {{\"id\": \"b\"}}, {{\"id\": \"c\"}}]' > outputs/{name}.json\n    writes_to: [{name}.json]\n    validation: {validation}\n"
    )
}

/// Runs the workflow; returns the exit code, the status JSON and the
/// workspace.
fn run(project: &Project, stages: &str) -> (i32, Value, PathBuf) {
    let (code, status, workspace, _) = run_with_id(project, stages);
    (code, status, workspace)
}

/// [`run`], and the run's id.
fn run_with_id(project: &Project, stages: &str) -> (i32, Value, PathBuf, String) {
    project.write("wf.yaml", &format!("{HEADER}{stages}"));
    let run = project.baton(&["run", "wf.yaml", "--json"]);
    let id = run_id(&run);
    let status = project.json(&["status", &id, "--json"]);
    let workspace = PathBuf::from(status["workspace"].as_str().expect("workspace"));
    (run.code, status, workspace, id)
}

fn stage<'a>(status: &'a Value, name: &str) -> &'a Value {
    status["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .find(|stage| stage["stage"] == name)
        .unwrap_or_else(|| panic!("no stage {name}: {status}"))
}

fn json(workspace: &Path, relative: &str) -> Value {
    let text = std::fs::read_to_string(workspace.join(relative))
        .unwrap_or_else(|error| panic!("{relative}: {error}"));
    serde_json::from_str(&text).unwrap_or_else(|error| panic!("{relative}: {error}"))
}

fn count(workspace: &Path, relative: &str) -> usize {
    json(workspace, relative).as_array().map_or(0, Vec::len)
}

#[test]
fn every_strategy_runs_its_validators_and_records_findings() {
    let project = Project::new();
    project.write(
        "baton.toml",
        &agents(&[
            ("validator", "findings pass"),
            ("challenger", "challenges 1"),
            ("evidence", "findings pass"),
        ]),
    );
    let stages = [
        producer("per-unit", "{strategy: unit}"),
        producer("cross", "{strategy: cross_unit}"),
        producer("goal", "{strategy: deliverable}"),
        producer("facts", "{strategy: fact_check}"),
        producer("attack", "{strategy: adversarial}"),
    ]
    .concat();
    let (code, status, workspace) = run(&project, &stages);
    assert_eq!(code, 0, "{status}");
    for name in ["per-unit", "cross", "goal", "facts", "attack"] {
        assert_eq!(
            stage(&status, name)["status"],
            "success",
            "{name}: {status}"
        );
    }
    // One validator per item; one over everything for the others.
    assert_eq!(count(&workspace, "validation/per-unit-findings.json"), 3);
    for name in ["cross", "goal", "facts"] {
        assert_eq!(
            count(&workspace, &format!("validation/{name}-findings.json")),
            1
        );
    }
    for n in 1..=3 {
        assert!(
            workspace
                .join(format!("validation/per-unit/cycle-1/unit-{n}.json"))
                .is_file()
        );
        assert_eq!(
            count(
                &workspace,
                &format!("validation/challenges/attack-{n}.json")
            ),
            1
        );
        assert!(
            workspace
                .join(format!("validation/evidence/attack-{n}.json"))
                .is_file()
        );
    }
    assert_eq!(count(&workspace, "validation/attack-findings.json"), 3);
    let findings = json(&workspace, "validation/cross-findings.json");
    assert_eq!(findings[0]["status"], "PASS");
    assert!(
        !workspace
            .join("validation/corrections-applied.json")
            .exists()
    );
}

/// Once the corrections are spent a resume would only fail the stage
/// again: the run's closing hint says so and points at `rerun`.
#[test]
fn a_spent_correction_budget_is_hinted_at_rerun_not_resume() {
    let project = Project::new();
    project.write(
        "baton.toml",
        &agents(&[
            ("validator", "findings critical"),
            ("correction", "correct"),
        ]),
    );
    let workflow = format!(
        "{HEADER}{}",
        producer("report", "{strategy: deliverable, max_revisions: 0}")
    );
    project.write("wf.yaml", &workflow);
    let run = project.baton(&["run", "wf.yaml"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let id = run
        .stdout
        .split_whitespace()
        .next()
        .expect("run id")
        .to_owned();
    assert!(
        run.stderr.contains(
            "hint: 'report' used up its correction cycles, so `baton resume` would fail it again"
        ) && run.stderr.contains(&format!(
            "then `baton rerun {id} report` runs it with a fresh budget"
        )),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(&format!("run {id}: 1 failed in ")),
        "{}",
        run.stderr
    );
    // It is true: a resume fails it again at once.
    let resumed = project.baton(&["resume", &id]);
    assert_eq!(resumed.code, 2, "{}", resumed.stderr);
    assert!(resumed.stderr.contains("baton rerun"), "{}", resumed.stderr);
}

#[test]
fn a_correction_cycle_converges() {
    let project = Project::new();
    project.write(
        "baton.toml",
        &agents(&[
            ("validator", "findings critical-until 1"),
            ("correction", "correct"),
        ]),
    );
    let (code, status, workspace) = run(&project, &producer("report", "{strategy: cross_unit}"));
    assert_eq!(code, 0, "{status}");
    assert_eq!(stage(&status, "report")["status"], "success");
    let applied = json(&workspace, "validation/corrections-applied.json");
    assert_eq!(applied.as_array().map(Vec::len), Some(1), "{applied}");
    assert_eq!(applied[0]["stage"], "report");
    assert_eq!(applied[0]["cycle"], 1);
    assert_eq!(applied[0]["finding_id"], "F1");
    // The findings file holds the last cycle: it passed.
    assert_eq!(
        json(&workspace, "validation/report-findings.json")[0]["status"],
        "PASS"
    );
    assert!(
        workspace
            .join("validation/report/cycle-2/cross.json")
            .is_file()
    );
}

#[test]
fn exhausting_max_revisions_halts_listing_the_findings() {
    let project = Project::new();
    project.write(
        "baton.toml",
        &agents(&[
            ("validator", "findings critical"),
            ("correction", "correct"),
        ]),
    );
    let stages = format!(
        "{}  - name: after\n    kind: execute\n    description: d\n    executor: inline\n    script: 'true'\n    depends_on: [report]\n",
        producer("report", "{strategy: unit, max_revisions: 1}")
    );
    let (code, status, workspace, id) = run_with_id(&project, &stages);
    assert_eq!(code, 2, "{status}");
    let report = stage(&status, "report");
    assert_eq!(report["status"], "failed");
    let error = report["error"].as_str().expect("error");
    assert!(
        error.starts_with(
            "validation of 'report' still has 3 critical findings after 1 correction cycle (no correction cycle left): F1: unit-1 is right; F1#2: unit-2 is right; F1#3: unit-3 is right"
        ),
        "{error}"
    );
    assert_ne!(stage(&status, "after")["status"], "success");
    assert_eq!(count(&workspace, "validation/corrections-applied.json"), 3);
    // The human-readable status shows it too.
    let plain = project.baton(&["status", &id]);
    assert!(
        plain.stdout.contains("F1#2: unit-2 is right"),
        "{}",
        plain.stdout
    );
}

#[test]
fn max_revisions_zero_halts_at_the_first_critical_finding() {
    let project = Project::new();
    project.write(
        "baton.toml",
        &agents(&[
            ("validator", "findings critical"),
            ("correction", "correct"),
        ]),
    );
    let (code, status, workspace) = run(
        &project,
        &producer("report", "{strategy: deliverable, max_revisions: 0}"),
    );
    assert_eq!(code, 2, "{status}");
    let error = stage(&status, "report")["error"]
        .as_str()
        .expect("error")
        .to_owned();
    assert_eq!(
        error,
        "validation of 'report' has 1 critical finding and max_revisions is 0 (no correction cycle left): F1: deliverable is right"
    );
    assert!(
        !workspace
            .join("validation/corrections-applied.json")
            .exists()
    );
}

#[test]
fn a_validator_that_fails_or_writes_nonsense_fails_the_stage() {
    let project = Project::new();
    project.write("baton.toml", &agents(&[("validator", "exit 3")]));
    let (code, status, _) = run(&project, &producer("report", "{strategy: cross_unit}"));
    assert_eq!(code, 2, "{status}");
    let error = stage(&status, "report")["error"]
        .as_str()
        .expect("error")
        .to_owned();
    assert!(
        error.starts_with("validator report[v1:cross] failed: exited with code 3"),
        "{error}"
    );

    let project = Project::new();
    project.write("baton.toml", &agents(&[("validator", "findings invalid")]));
    let (code, status, _) = run(&project, &producer("report", "{strategy: cross_unit}"));
    assert_eq!(code, 2, "{status}");
    let error = stage(&status, "report")["error"]
        .as_str()
        .expect("error")
        .to_owned();
    assert!(
        error.starts_with(
            "validator report[v1:cross] wrote invalid findings: validation/report/cycle-1/cross.json is not JSON"
        ),
        "{error}"
    );
}

#[test]
fn a_validate_stage_judges_its_dependencies_and_their_role_corrects() {
    let project = Project::new();
    project.write(
        "baton.toml",
        &agents(&[
            ("validator", "findings critical-until 1"),
            ("doc-writer", "write-listed\\ncorrect"),
        ]),
    );
    let stages = "  - name: draft\n    kind: propose\n    description: d\n    agent: {role: doc-writer}\n    writes_to: [draft.md]\n  - name: check\n    kind: validate\n    description: d\n    depends_on: [draft]\n    reads_from: [draft]\n    agent: {role: checker}\n    writes_to: [validation/check.json]\n    validation: {strategy: unit}\n";
    let (code, status, workspace) = run(&project, stages);
    assert_eq!(code, 0, "{status}");
    let applied = json(&workspace, "validation/corrections-applied.json");
    assert_eq!(applied[0]["stage"], "check");
    // One validator for the one file the draft stage wrote.
    assert!(
        workspace
            .join("validation/check/cycle-1/unit-1.json")
            .is_file()
    );
    assert!(
        !workspace
            .join("validation/check/cycle-1/unit-2.json")
            .exists()
    );
}

#[test]
fn a_resume_runs_a_failed_validator_again() {
    let project = Project::new();
    project.write("baton.toml", &agents(&[("validator", "findings invalid")]));
    let (code, status, workspace, id) =
        run_with_id(&project, &producer("report", "{strategy: unit}"));
    assert_eq!(code, 2, "{status}");
    project.write("baton.toml", &agents(&[("validator", "findings pass")]));
    let resumed = project.baton(&["resume", &id, "--json"]);
    assert_eq!(resumed.code, 0, "{}\n{}", resumed.stdout, resumed.stderr);
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(stage(&status, "report")["status"], "success", "{status}");
    assert_eq!(count(&workspace, "validation/report-findings.json"), 3);
}

#[test]
fn a_resume_does_not_reset_the_correction_count() {
    let project = Project::new();
    project.write(
        "baton.toml",
        &agents(&[
            ("validator", "findings critical"),
            ("correction", "correct"),
        ]),
    );
    let (code, status, workspace, id) = run_with_id(
        &project,
        &producer("report", "{strategy: cross_unit, max_revisions: 1}"),
    );
    assert_eq!(code, 2, "{status}");
    let first = stage(&status, "report")["error"].clone();
    // Resumed, the spent budget stays spent: no second correction runs.
    let resumed = project.baton(&["resume", &id, "--json"]);
    assert_eq!(resumed.code, 2, "{}\n{}", resumed.stdout, resumed.stderr);
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(stage(&status, "report")["error"], first);
    assert_eq!(count(&workspace, "validation/corrections-applied.json"), 1);
    assert!(!workspace.join("validation/report/cycle-3").exists());
}

#[test]
fn a_correction_of_a_dependency_survives_a_resume() {
    let project = Project::new();
    project.write(
        "baton.toml",
        &agents(&[
            ("validator", "findings critical-until 1"),
            (
                "correction",
                "correct\\nwrite $BATON_WORKSPACE/outputs/draft.md corrected",
            ),
        ]),
    );
    // `after` fails until the file `go` exists, so that the run can be resumed.
    let stages = "  - name: draft\n    kind: propose\n    description: d\n    executor: inline\n    script: |\n      echo \"$BATON_ATTEMPT\" >> \"$BATON_PROJECT_DIR/draft-runs.txt\"\n      echo first > outputs/draft.md\n    writes_to: [draft.md]\n  - name: check\n    kind: validate\n    description: d\n    depends_on: [draft]\n    executor: inline\n    script: echo '{}' > outputs/check.json\n    writes_to: [check.json]\n    validation: {strategy: cross_unit}\n  - name: after\n    kind: execute\n    description: d\n    executor: inline\n    depends_on: [check]\n    script: test -f \"$BATON_PROJECT_DIR/go\"\n";
    let (code, status, workspace, id) = run_with_id(&project, stages);
    assert_eq!(code, 2, "{status}");
    assert_eq!(stage(&status, "check")["status"], "success", "{status}");
    let corrected = || std::fs::read_to_string(workspace.join("outputs/draft.md")).expect("draft");
    assert_eq!(corrected(), "corrected\n");
    project.write("go", "");
    let resumed = project.baton(&["resume", &id, "--json"]);
    assert_eq!(resumed.code, 0, "{}\n{}", resumed.stdout, resumed.stderr);
    // The corrected draft is what was recorded: neither it nor its
    // validation ran again, and the correction stays.
    assert_eq!(corrected(), "corrected\n");
    let runs = std::fs::read_to_string(project.path().join("draft-runs.txt")).expect("runs");
    assert_eq!(runs, "1\n");
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(stage(&status, "draft")["attempts"], 1, "{status}");
    assert_eq!(stage(&status, "check")["attempts"], 1, "{status}");
    assert_eq!(count(&workspace, "validation/corrections-applied.json"), 1);
}

/// An inline stage writing a list where its check wants an object.
const LIST_NOT_OBJECT: &str = "  - name: shape\n    kind: execute\n    description: d\n    executor: inline\n    script: |\n      echo \"$BATON_ATTEMPT\" >> \"$BATON_PROJECT_DIR/shape-runs.txt\"\n      echo '[1]' > outputs/x.json\n    writes_to: [x.json]\n    validates_output: [{path: outputs/x.json, checks: [is_json, is_dict]}]\n";

#[test]
fn failed_output_checks_get_one_correction_round_that_can_fix_them() {
    let project = Project::new();
    project.write(
        "baton.toml",
        &agents(&[(
            "correction",
            "correct\\nwrite $BATON_WORKSPACE/outputs/x.json {\\\"fixed\\\": true}",
        )]),
    );
    let (code, status, workspace) = run(&project, LIST_NOT_OBJECT);
    assert_eq!(code, 0, "{status}");
    assert_eq!(stage(&status, "shape")["status"], "success", "{status}");
    assert_eq!(
        json(&workspace, "outputs/x.json"),
        serde_json::json!({"fixed": true})
    );
    // The stage's own work ran once; the correction is logged like a
    // validation's, with the failed check as its finding.
    let runs = std::fs::read_to_string(project.path().join("shape-runs.txt")).expect("runs");
    assert_eq!(runs, "1\n");
    let applied = json(&workspace, "validation/corrections-applied.json");
    assert_eq!(applied.as_array().map(Vec::len), Some(1), "{applied}");
    assert_eq!(applied[0]["stage"], "shape");
    assert_eq!(applied[0]["finding_id"], "CHECK1");
    let prompt =
        std::fs::read_to_string(workspace.join("dispatch/000-shape-c1-correct-outputs.prompt.md"))
            .expect("the correction's prompt");
    assert!(prompt.contains("output checks"), "{prompt}");
    assert!(prompt.contains("is_dict"), "{prompt}");
}

#[test]
fn failed_output_checks_that_one_round_does_not_fix_fail_the_stage() {
    let project = Project::new();
    project.write("baton.toml", &agents(&[("correction", "correct")]));
    let (code, status, workspace) = run(&project, LIST_NOT_OBJECT);
    assert_eq!(code, 2, "{status}");
    let error = stage(&status, "shape")["error"].as_str().expect("error");
    assert!(
        error.starts_with("output checks failed: outputs/x.json is_dict"),
        "{error}"
    );
    assert!(
        error.contains("the correction round did not fix them"),
        "{error}"
    );
    assert_eq!(count(&workspace, "validation/corrections-applied.json"), 1);

    // Without an agent for the correction, the failed checks still lead.
    let project = Project::new();
    let (code, status, _) = run(&project, LIST_NOT_OBJECT);
    assert_eq!(code, 2, "{status}");
    let error = stage(&status, "shape")["error"].as_str().expect("error");
    assert!(
        error.starts_with("output checks failed: outputs/x.json is_dict"),
        "{error}"
    );
    assert!(
        error.contains("no agent profile for role 'correction'"),
        "{error}"
    );
}

/// After a cycle that fails and one that passes, the summary beside the
/// findings says, per cycle, the verdict, the counts, the findings, the
/// corrections used and what came next.
#[test]
fn the_summary_beside_the_findings_tells_each_cycle() {
    let project = Project::new();
    project.write(
        "baton.toml",
        &agents(&[
            ("validator", "findings critical-until 1"),
            ("correction", "correct"),
        ]),
    );
    let (code, status, workspace) = run(
        &project,
        &producer("report", "{strategy: cross_unit, max_revisions: 3}"),
    );
    assert_eq!(code, 0, "{status}");
    let summary = std::fs::read_to_string(workspace.join("validation/report-summary.md"))
        .expect("the summary is written");
    let expected_head = "# Validation of `report`\n\nStrategy `cross_unit`, at most 3 correction cycles (`max_revisions: 3`).\nLatest: cycle 2, PASS.";
    assert!(summary.starts_with(expected_head), "{summary}");
    let (_, cycles) = summary
        .split_once("## Cycle 1: FAIL\n\n1 finding (1 critical, 0 minor, 0 info); 1 is critical")
        .unwrap_or_else(|| panic!("cycle 1 failed: {summary}"));
    let (first, second) = cycles
        .split_once("## Cycle 2: PASS\n")
        .unwrap_or_else(|| panic!("cycle 2 passed after it: {summary}"));
    let finding = json(&workspace, "validation/report/cycle-1/cross.json");
    for expected in [
        "Corrections used: 0 of 3.".to_owned(),
        format!(
            "- F1 [FAIL, critical]: {}",
            finding[0]["claim"].as_str().expect("a claim")
        ),
        "Next: the correction `report[c1:correct]` fixes the 1 critical finding (F1), then cycle 2 validates again.".to_owned(),
    ] {
        assert!(first.contains(&expected), "{expected}:\n{summary}");
    }
    for expected in [
        "none is critical",
        "Corrections used: 1 of 3.",
        "Next: nothing; no critical finding remains",
    ] {
        assert!(second.contains(expected), "{expected}:\n{summary}");
    }
}
