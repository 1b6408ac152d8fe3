//! `baton state`: the governance rules of docs/governance.md through the binary —
//! self-review refused, validation stale after an edit, a repair that needs
//! a re-review before closure, the third same-path attempt blocked — and
//! `summary --json` checked against the JSON Schema kept in the repository.

use serde_json::Value;

use crate::project::Project;

fn record(project: &Project, who: &str, event: &[&str]) -> baton_test_support::Run {
    let mut args = vec!["state", "record", "--task", "t", "--as", who];
    args.extend_from_slice(event);
    project.baton(&args)
}

fn ok(project: &Project, who: &str, event: &[&str]) {
    let run = record(project, who, event);
    assert_eq!(run.code, 0, "{event:?}: {}", run.stderr);
}

/// Refused with exit 3, the rule and a reason; nothing written.
fn refused(project: &Project, who: &str, event: &[&str], rule: &str, reason: &str) {
    let before = events(project);
    let run = record(project, who, event);
    assert_eq!(run.code, 3, "{event:?}: {}", run.stderr);
    assert!(
        run.stderr.contains(&format!("refused ({rule})")),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains(reason), "{}", run.stderr);
    assert_eq!(events(project), before, "a refused event is not written");
}

fn events(project: &Project) -> usize {
    let shown = project.json(&["state", "show", "--task", "t", "--json"]);
    shown["events"].as_array().map_or(0, Vec::len)
}

/// Clarify, read, plan and one edit of src/lib.rs, as `claude`.
fn prepared() -> Project {
    let project = Project::new();
    std::fs::create_dir_all(project.path().join("src")).expect("mkdir");
    project.write("src/lib.rs", "fn a() {}\n");
    ok(&project, "claude", &["clarified", "--note", "add a"]);
    ok(&project, "claude", &["inspected", "src/lib.rs"]);
    ok(&project, "claude", &["planned", "--intent", "cargo test"]);
    ok(&project, "claude", &["edited", "src/lib.rs"]);
    project
}

fn test(project: &Project, code: &str) {
    ok(
        project,
        "claude",
        &[
            "validated",
            "--command",
            "cargo test",
            "--exit-code",
            code,
            "--covers",
            "src",
        ],
    );
}

fn check(project: &Project) -> (i32, Value) {
    let run = project.baton(&["state", "check", "--task", "t", "--json"]);
    (
        run.code,
        serde_json::from_str(&run.stdout).expect("check JSON"),
    )
}

fn rules(checked: &Value) -> Vec<String> {
    checked["violations"]
        .as_array()
        .expect("violations")
        .iter()
        .map(|v| v["rule"].as_str().expect("rule").to_owned())
        .collect()
}

#[test]
fn an_edit_needs_a_plan_and_its_hash_is_read_from_the_file() {
    let project = Project::new();
    project.write("a.txt", "x");
    refused(
        &project,
        "claude",
        &["edited", "a.txt"],
        "illegal_transition",
        "An edit needs a clarified request, inspected context and a plan that says how the work will be validated first",
    );
    let project = prepared();
    let shown = project.json(&["state", "show", "--task", "t", "--json"]);
    // sha256("fn a() {}\n"), read by baton from the file.
    assert_eq!(
        shown["events"][3]["payload"]["hash"],
        "509a0a5b5ce4e59f5039e30a39324342d7a161296bb8eba761983faaeebf6efd"
    );
    let missing = record(&project, "claude", &["edited", "src/gone.rs"]);
    assert_eq!(missing.code, 2);
    assert!(
        missing.stderr.contains("cannot hash src/gone.rs"),
        "{}",
        missing.stderr
    );
}

#[test]
fn self_review_is_refused() {
    let project = prepared();
    test(&project, "0");
    // The owner's profile, or another profile on the owner's model.
    refused(
        &project,
        "claude",
        &["reviewed", "--reviewer", "claude"],
        "self_review",
        "not independent of the owner",
    );
    ok(
        &project,
        "claude",
        &["reviewed", "--reviewer", "codex", "--reviewer-model", "gpt"],
    );
    let (code, checked) = check(&project);
    assert_eq!(
        (code, checked["ok"].clone()),
        (0, Value::Bool(true)),
        "{checked}"
    );
}

#[test]
fn validation_is_stale_after_a_later_edit() {
    let project = prepared();
    test(&project, "0");
    assert_eq!(check(&project).0, 0);
    project.write("src/lib.rs", "fn a() { 1; }\n");
    ok(&project, "claude", &["edited", "src/lib.rs"]);
    let (code, checked) = check(&project);
    assert_eq!(code, 3);
    assert_eq!(rules(&checked), ["stale_validation"]);
    assert!(
        checked["violations"][0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("src/lib.rs was edited after its last validation")),
        "{checked}"
    );
    // Text mode lists the rule on stderr with the same exit code.
    let text = project.baton(&["state", "check", "--task", "t"]);
    assert_eq!(text.code, 3);
    assert!(
        text.stderr.contains("violated: stale_validation"),
        "{}",
        text.stderr
    );
    // Stale validation cannot support review and release: a test of another
    // directory does not cover it; a covering one does.
    ok(
        &project,
        "claude",
        &[
            "validated",
            "--command",
            "cargo test",
            "--exit-code",
            "0",
            "--covers",
            "docs",
        ],
    );
    assert_eq!(check(&project).0, 3);
    test(&project, "0");
    assert_eq!(check(&project).0, 0);
}

#[test]
fn a_repair_without_re_review_blocks_closure() {
    let project = prepared();
    test(&project, "0");
    ok(
        &project,
        "claude",
        &[
            "reviewed",
            "--reviewer",
            "codex",
            "--finding",
            "leak: a handle is never closed",
        ],
    );
    ok(&project, "claude", &["repaired", "0"]);
    let (code, checked) = check(&project);
    assert_eq!(code, 3);
    assert_eq!(rules(&checked), ["repair_without_rereview"]);
    let closed = [
        "closed",
        "--proven",
        "p",
        "--not-proven",
        "n",
        "--residual-risk",
        "r",
        "--next-owner",
        "o",
    ];
    refused(
        &project,
        "claude",
        &closed,
        "illegal_transition",
        "Closure needs a re-review of the repair and a release first",
    );
    // The repair is tested, then the re-review by the owner is refused.
    test(&project, "0");
    refused(
        &project,
        "claude",
        &["released"],
        "illegal_transition",
        "Release needs an independent review first: record `reviewed --reviewer PROFILE`",
    );
    refused(
        &project,
        "claude",
        &["re-reviewed", "0", "--reviewer", "claude", "--resolved"],
        "self_review",
        "not independent",
    );
    ok(
        &project,
        "claude",
        &["re-reviewed", "0", "--reviewer", "codex", "--resolved"],
    );
    ok(&project, "claude", &["released"]);
    refused(
        &project,
        "claude",
        &[
            "closed",
            "--proven",
            "p",
            "--not-proven",
            " ",
            "--residual-risk",
            "r",
            "--next-owner",
            "o",
        ],
        "missing_evidence",
        "closure must state what is not proven.",
    );
    ok(&project, "claude", &closed);
    assert_eq!(check(&project).0, 0);
}

#[test]
fn a_third_attempt_on_the_same_path_is_blocked() {
    let project = prepared();
    test(&project, "101");
    ok(&project, "claude", &["edited", "src/lib.rs"]);
    test(&project, "101");
    refused(
        &project,
        "claude",
        &["edited", "src/lib.rs"],
        "third_attempt",
        "failed `cargo test` with exit code 101 twice",
    );
    // Another path is not blocked; new evidence lifts the block.
    project.write("src/other.rs", "");
    ok(&project, "claude", &["edited", "src/other.rs"]);
    ok(
        &project,
        "claude",
        &[
            "new-evidence",
            "src/lib.rs",
            "--note",
            "the failure is a flaky fixture",
        ],
    );
    // New evidence is reading: the route is planned again before the edit.
    ok(
        &project,
        "claude",
        &["planned", "--intent", "cargo test, fixture pinned"],
    );
    ok(&project, "claude", &["edited", "src/lib.rs"]);
}

/// The schema kept in the repository.
fn schema() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/schemas/workflow-state-summary.schema.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("read the schema"))
        .expect("schema JSON")
}

fn summary(project: &Project, scope: &[&str]) -> Value {
    let mut args = vec!["state", "summary", "--json"];
    args.extend_from_slice(scope);
    project.json(&args)
}

#[test]
fn the_summary_is_valid_against_the_schema_in_every_state() {
    let schema = schema();
    let fields = [
        "mode_selected",
        "boundaries_inspected",
        "workflow_state",
        "transition_decision",
        "owner_review_map",
        "validation_freshness",
        "repair_rereview_ledger",
        "tool_permission_adapter_limits",
        "trajectory_validation_coupling",
        "closure_decision",
        "evidence_limits",
        "residual_risk",
    ];
    let required: Vec<&str> = schema["required"]
        .as_array()
        .expect("required")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        required, fields,
        "the schema requires every field docs/governance.md names"
    );

    let project = prepared();
    let mut summaries = vec![
        summary(&project, &["--task", "t"]),
        summary(&project, &["--task", "empty"]),
    ];
    test(&project, "0");
    ok(
        &project,
        "claude",
        &["reviewed", "--reviewer", "codex", "--finding", "f"],
    );
    ok(&project, "claude", &["repaired", "0"]);
    summaries.push(summary(&project, &["--task", "t"]));
    ok(
        &project,
        "claude",
        &["re-reviewed", "0", "--reviewer", "codex", "--resolved"],
    );
    ok(&project, "claude", &["released"]);
    ok(
        &project,
        "claude",
        &[
            "closed",
            "--proven",
            "tests pass",
            "--not-proven",
            "load",
            "--residual-risk",
            "low",
            "--next-owner",
            "ops",
        ],
    );
    let closed = summary(&project, &["--task", "t"]);
    assert_eq!(closed["closure_decision"]["closed"], true);
    assert_eq!(closed["residual_risk"]["stated"], "low");
    assert_eq!(closed["workflow_state"]["stage"], "closed");
    summaries.push(closed);
    for summary in &summaries {
        let errors = baton_engine::checks::check_schema(summary, &schema);
        assert!(errors.is_empty(), "{errors:?}\n{summary:#}");
    }
    // The check can fail: a summary missing a field, or with a wrong type.
    let mut broken = summaries[0].clone();
    broken
        .as_object_mut()
        .expect("object")
        .remove("residual_risk");
    broken["workflow_state"]["stage"] = Value::from("done");
    let errors = baton_engine::checks::check_schema(&broken, &schema);
    assert_eq!(errors.len(), 2, "{errors:?}");
}
