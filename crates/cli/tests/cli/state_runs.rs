//! Workflow runs and governance: a validator under its producer's identity
//! is refused before the run starts (or, when `baton.toml` allows it,
//! recorded as a waiver), and a run records its outputs, validation cycles,
//! findings, repairs and re-reviews in its ledger.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::project::{HEADER, Project, run_id, stage};

fn fake_agent() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_baton")).with_file_name("baton-fake-agent")
}

/// A profile running the stand-in agent with `directive` (empty: none).
fn profile(name: &str, directive: &str) -> String {
    let env = if directive.is_empty() {
        String::new()
    } else {
        format!("env = {{ BATON_FAKE_AGENT = \"{directive}\" }}\n")
    };
    format!(
        "\n[profiles.{name}]\nprogram = \"{}\"\nprompt = {{ via = \"stdin\" }}\nenv_passthrough = [\"PATH\", \"HOME\"]\n{env}",
        fake_agent().display()
    )
}

/// A draft written by the `doc-writer` role, judged by a validate stage.
const STAGES: &str = "  - name: draft\n    kind: propose\n    description: d\n    agent: {role: doc-writer}\n    writes_to: [draft.md]\n  - name: check\n    kind: validate\n    description: d\n    depends_on: [draft]\n    reads_from: [draft]\n    agent: {role: checker}\n    writes_to: [validation/check.json]\n    validation: {strategy: unit}\n";

fn ledger(project: &Project, id: &str) -> Value {
    project.json(&["state", "show", "--run", id, "--json"])
}

fn kinds(shown: &Value) -> Vec<String> {
    shown["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["kind"].as_str().expect("kind").to_owned())
        .collect()
}

#[test]
fn a_validator_under_the_producers_identity_is_refused_unless_allowed() {
    let project = Project::new();
    // Every role, the validator's included, runs the one profile.
    let toml = format!(
        "[agents.default]\nprofile = \"fake\"\n{}",
        profile("fake", "")
    );
    project.write("baton.toml", &toml);
    project.write("wf.yaml", &format!("{HEADER}{STAGES}"));
    let run = project.baton(&["run", "wf.yaml", "--json"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    for part in [
        "stage `check` would validate the work of `draft` under the identity that produced it",
        "roles `doc-writer` and `validator` both resolve to profile `fake`",
        "[agents.validator]",
        "self_review = \"allow\"",
    ] {
        assert!(run.stderr.contains(part), "{part}: {}", run.stderr);
    }
    let id = project.run_ids().pop().expect("the run is recorded");
    let status = project.json(&["status", &id, "--json"]);
    assert!(
        status["stages"]
            .as_array()
            .expect("stages")
            .iter()
            .all(|stage| stage["status"] == "pending"),
        "nothing ran: {status}"
    );
    // Allowed knowingly: the run goes on and the waiver is in its ledger.
    project.write(
        "baton.toml",
        &format!("{toml}\n[governance]\nself_review = \"allow\"\n"),
    );
    let resumed = project.baton(&["resume", &id]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    let shown = ledger(&project, &id);
    assert_eq!(
        shown["waivers"].as_array().map(Vec::len),
        Some(1),
        "{shown}"
    );
    assert!(
        shown["waivers"][0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("self_review = \"allow\"")),
        "{shown}"
    );
    let text = project.baton(&["state", "show", "--run", &id]);
    assert!(
        text.stdout.contains("waived at event 4: self_review"),
        "{}",
        text.stdout
    );
    // A second resume records the waiver once.
    assert_eq!(project.baton(&["resume", &id]).code, 0);
    assert_eq!(
        ledger(&project, &id)["waivers"].as_array().map(Vec::len),
        Some(1)
    );
}

#[test]
fn a_run_records_outputs_cycles_repairs_and_re_reviews() {
    let project = Project::new();
    let toml = format!(
        "[agents.default]\nprofile = \"writer\"\n[agents.validator]\nprofile = \"judge\"\n{}{}",
        profile("writer", "write-listed\\ncorrect"),
        profile("judge", "findings critical-until 1")
    );
    project.write("baton.toml", &toml);
    project.write("wf.yaml", &format!("{HEADER}{STAGES}"));
    let run = project.baton(&["run", "wf.yaml", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let id = run_id(&run);
    let shown = ledger(&project, &id);
    assert_eq!(
        kinds(&shown),
        [
            "clarified",
            "inspected",
            "planned", // what the run is
            "edited",
            "edited", // the draft, then the check stage's report
            "validated",
            "reviewed", // cycle 1: one critical finding
            "repaired",
            "edited",
            "edited", // the correction's log, the draft again
            "validated",
            "re_reviewed",
            "reviewed", // cycle 2 passes
        ],
        "{shown:#}"
    );
    let events = shown["events"].as_array().expect("events");
    // The draft's output, with its hash, by the writer's profile.
    assert_eq!(events[3]["payload"]["path"], "outputs/draft.md");
    assert_eq!(
        events[3]["payload"]["hash"].as_str().map(str::len),
        Some(64)
    );
    assert_eq!(events[3]["profile"], "writer");
    assert_eq!(events[3]["session"], format!("{id}/draft"));
    assert_eq!(events[9]["payload"]["path"], "outputs/draft.md");
    // Re-hashed after the correction (the stand-in's correction only logs,
    // so the content is the same).
    assert_eq!(events[9]["payload"]["hash"], events[3]["payload"]["hash"]);
    // Cycle 1 failed with a finding, judged by the validator's profile;
    // cycle 2 covered the corrected draft, passed, and re-reviewed the
    // repair as resolved.
    assert_eq!(events[5]["payload"]["exit_code"], 1);
    assert_eq!(events[5]["profile"], "judge");
    assert_eq!(
        events[6]["payload"]["findings"].as_array().map(Vec::len),
        Some(1)
    );
    assert_eq!(events[10]["payload"]["exit_code"], 0);
    assert!(
        events[10]["payload"]["covered"]
            .as_array()
            .is_some_and(|c| c.contains(&Value::from("outputs/draft.md"))),
        "{}",
        events[10]
    );
    assert_eq!(events[11]["payload"]["resolved"], true);
    assert_eq!(shown["validation_fresh"], true, "{shown:#}");
    let check = project.baton(&["state", "check", "--run", &id]);
    assert_eq!(check.code, 0, "{}{}", check.stdout, check.stderr);
    let summary = project.json(&["state", "summary", "--run", &id, "--json"]);
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/schemas/workflow-state-summary.schema.json"
        ))
        .expect("schema"),
    )
    .expect("schema JSON");
    let errors = baton_engine::checks::check_schema(&summary, &schema);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(summary["mode_selected"]["mode"], "workflow_run");
    assert_eq!(summary["owner_review_map"]["independently_reviewed"], true);
}

#[test]
fn output_checks_validate_a_stage_and_runs_are_ordered_by_their_dag() {
    let project = Project::new();
    let stages = format!(
        "{}{}",
        stage(
            "a",
            "echo '{\"items\": []}' > outputs/a.json",
            "    writes_to: [outputs/a.json]\n    validates_output:\n      - path: outputs/a.json\n        checks: [is_json]\n"
        ),
        stage(
            "b",
            "echo b > outputs/b.txt",
            "    depends_on: [a]\n    writes_to: [outputs/b.txt]\n"
        )
    );
    project.write("wf.yaml", &format!("{HEADER}{stages}"));
    let run = project.baton(&["run", "wf.yaml", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let id = run_id(&run);
    let shown = ledger(&project, &id);
    assert_eq!(
        kinds(&shown),
        [
            "clarified",
            "inspected",
            "planned",
            "edited",
            "validated",
            "edited"
        ],
        "{shown:#}"
    );
    let events = shown["events"].as_array().expect("events");
    assert_eq!(events[3]["profile"], "script");
    assert_eq!(events[4]["payload"]["command"], "output checks of a");
    assert_eq!(events[4]["payload"]["covered"][0], "outputs/a.json");
    // b's output has no check: nothing validated it, and check says so
    // (the stage table's order between stages is not a violation in a run).
    let check = project.baton(&["state", "check", "--run", &id]);
    assert_eq!(check.code, 3, "{}", check.stdout);
    assert!(
        check.stderr.contains(
            "violated: stale_validation: outputs/b.txt was edited after its last validation"
        ),
        "{}",
        check.stderr
    );
    assert!(
        !check.stderr.contains("illegal_transition"),
        "{}",
        check.stderr
    );
    // A run scope names a recorded run.
    let unknown = project.baton(&["state", "show", "--run", "nope"]);
    assert_eq!(unknown.code, 1);
    assert!(
        unknown.stderr.contains("no run with id nope"),
        "{}",
        unknown.stderr
    );
}
