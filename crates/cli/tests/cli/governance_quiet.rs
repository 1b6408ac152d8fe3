//! Governance that is quiet in normal use, through the binary: a workflow
//! without validation passes `state check`, a hooked session that reads,
//! edits and tests breaks no rule, refusals say what is missing, the
//! summary states its decisions in words, a third identical failing
//! command is blocked, the usual test runners count as tests, and a person
//! without `$USER` is named by git or the system.

use std::process::Stdio;

use serde_json::Value;

use crate::hooks::{RECORDED_CWD, SESSION, fixture, hook_raw, recorded};
use crate::project::{HEADER, Project, git_repository, run_id, stage};

fn check(project: &Project, scope: &[&str]) -> (i32, String) {
    let mut args = vec!["state", "check"];
    args.extend_from_slice(scope);
    let run = project.baton(&args);
    (run.code, format!("{}{}", run.stdout, run.stderr))
}

fn summary(project: &Project, scope: &[&str]) -> Value {
    let mut args = vec!["state", "summary", "--json"];
    args.extend_from_slice(scope);
    let value = project.json(&args);
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/schemas/workflow-state-summary.schema.json"
        ))
        .expect("schema"),
    )
    .expect("schema JSON");
    let errors = baton_engine::checks::check_schema(&value, &schema);
    assert!(errors.is_empty(), "{errors:?}\n{value:#}");
    value
}

fn record(project: &Project, event: &[&str]) -> baton_test_support::Run {
    let mut args = vec!["state", "record", "--task", "t", "--as", "claude"];
    args.extend_from_slice(event);
    project.baton(&args)
}

fn ok(project: &Project, event: &[&str]) {
    let run = record(project, event);
    assert_eq!(run.code, 0, "{event:?}: {}", run.stderr);
}

fn words(summary: &Value) -> (String, String) {
    (
        summary["transition_decision"]["decision"]
            .as_str()
            .expect("transition word")
            .to_owned(),
        summary["closure_decision"]["decision"]
            .as_str()
            .expect("closure word")
            .to_owned(),
    )
}

#[test]
fn a_workflow_without_validation_passes_state_check() {
    let project = Project::new();
    let stages = format!(
        "{}{}",
        stage(
            "a",
            "echo a > outputs/a.txt",
            "    writes_to: [outputs/a.txt]\n"
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
    let (code, said) = check(&project, &["--run", &id]);
    assert_eq!((code, said.as_str()), (0, "ok: no rule violated\n"));
    let summary = summary(&project, &["--run", &id]);
    assert_eq!(summary["validation_freshness"]["status"], "not claimed");
    assert_eq!(summary["validation_freshness"]["claimed"], false);
    // Nothing claimed is not the same as reviewed: closure still says so.
    assert_eq!(summary["closure_decision"]["decision"], "needs review");
    let shown = project.baton(&["state", "show", "--run", &id]);
    assert!(
        shown.stdout.contains("validation: not claimed"),
        "{}",
        shown.stdout
    );
}

#[test]
fn a_hooked_session_that_reads_edits_and_tests_breaks_no_rule() {
    let project = crate::hooks::project();
    recorded(&project, "post-tool-use-read.json");
    recorded(&project, "post-tool-use-edit.json");
    recorded(&project, "post-tool-use-bash-test-pass.json");
    let scope = ["--session", SESSION];
    let (code, said) = check(&project, &scope);
    assert_eq!((code, said.as_str()), (0, "ok: no rule violated\n"));
    let summary = summary(&project, &scope);
    assert_eq!(summary["mode_selected"]["mode"], "agent_session");
    assert_eq!(summary["transition_decision"]["decision"], "allowed");
    assert_eq!(summary["validation_freshness"]["status"], "fresh");
    // What hooks can see is still judged: an edit with nothing read first.
    let other = Project::new();
    let edit = fixture("post-tool-use-write.json")
        .replace(SESSION, "blind")
        .replace(RECORDED_CWD, other.path().to_str().expect("UTF-8"));
    assert_eq!(hook_raw(&other, "PostToolUse", &edit).0, 0);
    let (code, said) = check(&other, &["--session", "blind"]);
    assert_eq!(code, 3, "{said}");
    assert!(said.contains("violated: missing_evidence"), "{said}");
    assert!(said.contains("record `inspected PATH`"), "{said}");
    assert!(!said.contains("illegal_transition"), "{said}");
}

#[test]
fn refusals_say_what_is_missing_and_how_to_record_it() {
    let project = Project::new();
    let released = record(&project, &["released"]);
    assert_eq!(released.code, 3, "{}", released.stderr);
    assert!(
        released.stderr.contains(
            "refused (illegal_transition): Release needs a clarified request, inspected context, a plan that says how the work will be validated, a validation and an independent review first: record `clarified`, then `inspected PATH`, then `planned --intent TEXT`, then `validated --command CMD --exit-code N`, then `reviewed --reviewer PROFILE` by someone other than the owner."
        ),
        "{}",
        released.stderr
    );
    assert!(!released.stderr.contains("cannot follow"));
}

#[test]
fn the_summary_states_transition_and_closure_in_words() {
    let project = Project::new();
    project.write("a.rs", "fn a() {}\n");
    ok(&project, &["clarified"]);
    ok(&project, &["inspected", "a.rs"]);
    ok(&project, &["planned", "--intent", "cargo test"]);
    ok(&project, &["edited", "a.rs"]);
    let scope = ["--task", "t"];
    let mut seen = vec![words(&summary(&project, &scope))];
    ok(
        &project,
        &["validated", "--command", "cargo test", "--exit-code", "0"],
    );
    seen.push(words(&summary(&project, &scope)));
    ok(
        &project,
        &["reviewed", "--reviewer", "codex", "--finding", "leak"],
    );
    seen.push(words(&summary(&project, &scope)));
    ok(&project, &["repaired", "0"]);
    seen.push(words(&summary(&project, &scope)));
    ok(
        &project,
        &["re-reviewed", "0", "--reviewer", "codex", "--resolved"],
    );
    seen.push(words(&summary(&project, &scope)));
    let expected = [
        ("stale", "needs validation"),
        ("allowed", "needs review"),
        ("allowed", "blocked"),
        ("needs re-review", "needs review"),
        ("allowed", "ready"),
    ]
    .map(|(t, c)| (t.to_owned(), c.to_owned()));
    assert_eq!(seen, expected);
}

#[test]
fn a_third_identical_failing_command_is_blocked() {
    let project = Project::new();
    project.write("a.rs", "fn a() {}\n");
    for event in [
        &["clarified"][..],
        &["inspected", "a.rs"],
        &["planned", "--intent", "cargo test"],
        &["edited", "a.rs"],
    ] {
        ok(&project, event);
    }
    let failing = ["validated", "--command", "cargo test", "--exit-code", "101"];
    ok(&project, &failing);
    ok(&project, &failing);
    let third = record(&project, &failing);
    assert_eq!(third.code, 3, "{}", third.stderr);
    assert!(
        third.stderr.contains(
            "refused (third_attempt): `cargo test` failed with exit code 101 twice already; record new evidence or a changed route"
        ),
        "{}",
        third.stderr
    );
    // Hooks observe it: the third failure is listed as a broken rule.
    let hooked = crate::hooks::project();
    recorded(&hooked, "post-tool-use-read.json");
    recorded(&hooked, "post-tool-use-edit.json");
    for _ in 0..3 {
        recorded(&hooked, "post-tool-use-bash-test-fail.json");
    }
    let (code, said) = check(&hooked, &["--session", SESSION]);
    assert_eq!(code, 3, "{said}");
    assert!(
        said.contains("violated: third_attempt: event 5: `cargo test --workspace` failed"),
        "{said}"
    );
    let summary = summary(&hooked, &["--session", SESSION]);
    assert_eq!(
        summary["tool_permission_adapter_limits"]["blocked_commands"][0]["command"],
        "cargo test --workspace"
    );
}

#[test]
fn the_usual_test_runners_count_as_tests_by_default() {
    let project = crate::hooks::project();
    let path = project.path().to_str().expect("UTF-8").to_owned();
    let runners = ["make test", "pnpm test", "yarn test", "./scripts/test"];
    for runner in runners {
        let payload = fixture("post-tool-use-bash-test-pass.json")
            .replace("cargo test --workspace", runner)
            .replace(RECORDED_CWD, &path);
        assert_eq!(hook_raw(&project, "PostToolUse", &payload).0, 0, "{runner}");
    }
    let shown = project.json(&["state", "show", "--session", SESSION, "--json"]);
    let commands: Vec<&str> = shown["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["payload"]["command"].as_str())
        .collect();
    assert_eq!(commands, runners);
}

/// `baton ARGS` with no `$USER` or `$LOGNAME`, and a `$HOME` with no git
/// configuration; returns its stdout.
fn anonymous(project: &Project, home: &std::path::Path, args: &[&str]) -> String {
    let output = project
        .command(args)
        .env_remove("USER")
        .env_remove("LOGNAME")
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("baton runs");
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn recorded_by(project: &Project) -> String {
    let shown = project.json(&["state", "show", "--task", "t", "--json"]);
    shown["events"][0]["profile"]
        .as_str()
        .expect("profile")
        .to_owned()
}

#[test]
fn without_user_a_person_is_named_by_git_then_by_the_system() {
    let home = tempfile::tempdir().expect("home");
    // A project whose git configuration names its user.
    let project = Project::new();
    git_repository(project.path(), &[("README", "r\n")]);
    std::fs::write(
        project.path().join(".git/config"),
        format!(
            "{}[user]\n\tname = Ada Lovelace\n",
            std::fs::read_to_string(project.path().join(".git/config")).expect("config")
        ),
    )
    .expect("config");
    anonymous(
        &project,
        home.path(),
        &["state", "record", "--task", "t", "clarified"],
    );
    assert_eq!(recorded_by(&project), "person:Ada Lovelace");
    // A gate decided without --as names the same person.
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}{}",
            stage(
                "review",
                "echo '{}' > outputs/plan.json",
                "    writes_to: [outputs/plan.json]\n    human_gate: true\n"
            )
        ),
    );
    let run = project.baton(&["run", "wf.yaml", "--json"]);
    let id = run_id(&run);
    let decided: Value = serde_json::from_str(&anonymous(
        &project,
        home.path(),
        &["gate", "approve", &id, "review", "--json"],
    ))
    .expect("JSON");
    assert_eq!(decided["decided_by"], "Ada Lovelace");
    // No git user either: the system's name for this account.
    let bare = Project::new();
    anonymous(
        &bare,
        home.path(),
        &["state", "record", "--task", "t", "clarified"],
    );
    let system = baton_executor::user::os_user_name().expect("an account name");
    assert_eq!(recorded_by(&bare), format!("person:{system}"));
    assert_ne!(system, "unknown");
}

fn task_events(project: &Project, task: &str) -> Vec<Value> {
    let shown = project.json(&["state", "show", "--task", task, "--json"]);
    shown["events"].as_array().expect("events").clone()
}

#[test]
fn a_task_run_records_into_the_tasks_ledger_with_the_verdict_as_a_review() {
    use crate::tasks::{FAIL, PASS, project_with, referee};
    let (role, directive) = referee(PASS);
    let project = project_with(&[(role, &directive)]);
    project.baton(&["task", "new", "Add user auth"]);
    let run = project.baton(&["task", "run", "add-user-auth"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let events = task_events(&project, "add-user-auth");
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "clarified",
            "inspected",
            "planned",
            "edited",
            "edited",
            "edited",
            "edited",
            "edited",
            "validated",
            "reviewed"
        ],
        "{events:#?}"
    );
    // The implementer owns the work; each phase edits under its identity.
    assert_eq!(events[0]["profile"], "fake");
    assert_eq!(events[3]["payload"]["path"], "tasks/add-user-auth/SPEC.md");
    assert_eq!(
        events[3]["payload"]["hash"].as_str().map(str::len),
        Some(64)
    );
    // The verdict: a passing validation and a review by the referee's profile.
    assert_eq!(events[8]["payload"]["exit_code"], 0);
    assert_eq!(events[9]["profile"], "referee");
    assert_eq!(events[9]["payload"]["reviewer"]["profile"], "referee");
    assert_eq!(events[9]["payload"]["findings"], Value::Array(Vec::new()));
    let scope = ["--task", "add-user-auth"];
    let (code, said) = check(&project, &scope);
    assert_eq!((code, said.as_str()), (0, "ok: no rule violated\n"));
    let summarised = summary(&project, &scope);
    assert_eq!(
        summarised["owner_review_map"]["independently_reviewed"],
        true
    );
    assert_eq!(summarised["closure_decision"]["decision"], "ready");

    // A failing verdict's findings are the review's findings, left open.
    let (role, directive) = referee(FAIL);
    let failing = project_with(&[(role, &directive)]);
    failing.baton(&["task", "new", "Parse input"]);
    assert_eq!(failing.baton(&["task", "run", "parse-input"]).code, 0);
    let events = task_events(&failing, "parse-input");
    let review = events.last().expect("the review");
    assert_eq!(review["kind"], "reviewed");
    assert_eq!(
        review["payload"]["findings"].as_array().map(Vec::len),
        Some(2),
        "{review}"
    );
    assert_eq!(events[events.len() - 2]["payload"]["exit_code"], 1);
    assert_eq!(
        summary(&failing, &["--task", "parse-input"])["closure_decision"]["decision"],
        "blocked"
    );
}
