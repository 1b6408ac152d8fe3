//! `baton hook claude-code`, driven with recorded Claude Code hook payloads
//! (`tests/fixtures/claude-code/`): each fixture's project path is replaced
//! by a scratch project, whose store the hook writes as Claude Code would
//! run it there.

use std::io::Write;
use std::process::Stdio;

use serde_json::Value;

use crate::project::Project;

/// The project path the fixtures were recorded in.
pub(crate) const RECORDED_CWD: &str = "/home/user/project";
/// Their session.
pub(crate) const SESSION: &str = "8d1f6c2e-4b7a-4d0e-9a51-2f3c7b6e1a90";

pub(crate) fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/claude-code/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"))
}

/// A project with the files the fixtures touch.
pub(crate) fn project() -> Project {
    let project = Project::new();
    std::fs::create_dir_all(project.path().join("src")).expect("mkdir");
    project.write(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    );
    project
}

/// Runs `baton hook claude-code EVENT` with `stdin`; returns (code, stderr).
pub(crate) fn hook_raw(project: &Project, event: &str, stdin: &str) -> (i32, String) {
    let mut child = project
        .command(&["hook", "claude-code", event])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start baton");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write the payload");
    let output = child.wait_with_output().expect("wait for baton");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Feeds a fixture, as recorded, to the hook named by its `hook_event_name`.
pub(crate) fn hook(project: &Project, name: &str) -> (i32, String) {
    let path = project.path().to_str().expect("UTF-8 path");
    let payload = fixture(name).replace(RECORDED_CWD, path);
    let event: Value = serde_json::from_str(&payload).expect("fixture JSON");
    let event = event["hook_event_name"]
        .as_str()
        .expect("event name")
        .to_owned();
    hook_raw(project, &event, &payload)
}

pub(crate) fn recorded(project: &Project, name: &str) {
    let (code, stderr) = hook(project, name);
    assert_eq!(code, 0, "{name}: {stderr}");
}

fn ledger(project: &Project) -> Vec<Value> {
    let shown = project.json(&["state", "show", "--session", SESSION, "--json"]);
    shown["events"].as_array().expect("events").clone()
}

#[test]
fn an_edit_after_the_last_test_blocks_stop_with_the_reason() {
    let project = project();
    recorded(&project, "post-tool-use-read.json");
    recorded(&project, "post-tool-use-edit.json");
    recorded(&project, "post-tool-use-bash-test-pass.json");
    assert_eq!(hook(&project, "stop.json").0, 0, "fresh after the test");
    project.write(
        "src/lib.rs",
        "pub fn add(a: i64, b: i64) -> i64 { a + b }\n",
    );
    recorded(&project, "post-tool-use-multi-edit.json");
    let (code, stderr) = hook(&project, "stop.json");
    assert_eq!(code, 2, "{stderr}");
    let edited = project.path().join("src/lib.rs");
    assert!(
        stderr.contains(&format!(
            "validation is stale: {} was edited after its last validation",
            edited.display()
        )),
        "{stderr}"
    );
    // The ledger holds what happened, in order, with the file's new hash.
    let events = ledger(&project);
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["kind"].as_str()).collect();
    assert_eq!(kinds, ["inspected", "edited", "validated", "edited"]);
    assert_ne!(events[1]["payload"]["hash"], events[3]["payload"]["hash"]);
    assert_eq!(events[3]["profile"], "claude-code");
    // A subagent may not stop either; a fresh test lets both stop.
    assert_eq!(hook(&project, "subagent-stop.json").0, 2);
    recorded(&project, "post-tool-use-bash-test-pass.json");
    assert_eq!(hook(&project, "stop.json").0, 0);
    assert_eq!(hook(&project, "subagent-stop.json").0, 0);
}

#[test]
fn a_fresh_test_lets_stop_exit_zero() {
    let project = project();
    recorded(&project, "post-tool-use-write.json");
    recorded(&project, "post-tool-use-edit.json");
    recorded(&project, "post-tool-use-bash-test-pass.json");
    let (code, stderr) = hook(&project, "stop.json");
    assert_eq!((code, stderr.as_str()), (0, ""));
    // A session that edited nothing may always stop.
    let other = Project::new();
    let stop = fixture("stop.json").replace(SESSION, "quiet");
    assert_eq!(hook_raw(&other, "Stop", &stop).0, 0);
}

#[test]
fn a_failing_test_does_not_count_as_fresh_validation() {
    let project = project();
    recorded(&project, "post-tool-use-edit.json");
    recorded(&project, "post-tool-use-bash-test-fail.json");
    let (code, stderr) = hook(&project, "stop.json");
    assert_eq!(code, 2);
    assert!(stderr.contains("failed with exit code 101"), "{stderr}");
    // A pass, then a failure reported through PostToolUseFailure (no exit
    // code in the payload): the latest run decides.
    recorded(&project, "post-tool-use-bash-test-pass.json");
    assert_eq!(hook(&project, "stop.json").0, 0);
    recorded(&project, "post-tool-use-failure-bash-test.json");
    let (code, stderr) = hook(&project, "stop.json");
    assert_eq!(code, 2);
    assert!(
        stderr.contains("(`pytest -q`) failed with exit code 1"),
        "{stderr}"
    );
}

#[test]
fn an_open_finding_blocks_stop_until_repaired_and_re_reviewed() {
    let project = project();
    recorded(&project, "post-tool-use-edit.json");
    recorded(&project, "post-tool-use-bash-test-pass.json");
    let review = project.baton(&[
        "state",
        "record",
        "--session",
        SESSION,
        "--as",
        "codex",
        "reviewed",
        "--reviewer",
        "codex",
        "--finding",
        "overflow: add wraps silently",
    ]);
    assert_eq!(review.code, 0, "{}", review.stderr);
    let (code, stderr) = hook(&project, "stop.json");
    assert_eq!(code, 2);
    assert!(
        stderr.contains("finding 0 (overflow: add wraps silently) is open"),
        "{stderr}"
    );
    let repair = project.baton(&["state", "record", "--session", SESSION, "repaired", "0"]);
    assert_eq!(repair.code, 0, "{}", repair.stderr);
    let (code, stderr) = hook(&project, "stop.json");
    assert_eq!(code, 2);
    assert!(stderr.contains("repaired but not re-reviewed"), "{stderr}");
    let rereview = project.baton(&[
        "state",
        "record",
        "--session",
        SESSION,
        "re-reviewed",
        "0",
        "--reviewer",
        "codex",
        "--resolved",
    ]);
    assert_eq!(rereview.code, 0, "{}", rereview.stderr);
    assert_eq!(hook(&project, "stop.json").0, 0);
}

#[test]
fn malformed_payloads_and_internal_errors_block_with_a_clear_message() {
    let project = project();
    let (code, stderr) = hook_raw(&project, "Stop", "{not json");
    assert_eq!(code, 2);
    assert!(
        stderr.contains("the hook payload on stdin is not JSON"),
        "{stderr}"
    );
    let (code, stderr) = hook_raw(&project, "PostToolUse", r#"{"tool_name":"Edit"}"#);
    assert_eq!(code, 2);
    assert!(stderr.contains("has no session_id"), "{stderr}");
    // A store that cannot be opened blocks too: a hook that fails open
    // would prove nothing. Here `.baton` is a file, not a folder.
    project.write(".baton", "not a folder");
    let (code, stderr) = hook(&project, "stop.json");
    assert_eq!(code, 2);
    assert!(
        stderr.contains("baton hook error: cannot create"),
        "{stderr}"
    );
}

#[test]
fn only_test_commands_count_and_they_are_configurable() {
    let project = project();
    recorded(&project, "post-tool-use-bash-other.json");
    assert!(ledger(&project).is_empty(), "git status is not a test");
    project.write(
        "baton.toml",
        "[governance]\ntest_commands = [\"make check\"]\n",
    );
    recorded(&project, "post-tool-use-edit.json");
    recorded(&project, "post-tool-use-bash-test-pass.json");
    assert_eq!(ledger(&project).len(), 1, "cargo test is not configured");
    assert_eq!(hook(&project, "stop.json").0, 2);
    let make = fixture("post-tool-use-bash-test-pass.json")
        .replace("cargo test --workspace", "make check")
        .replace(RECORDED_CWD, project.path().to_str().expect("UTF-8"));
    assert_eq!(hook_raw(&project, "PostToolUse", &make).0, 0);
    assert_eq!(hook(&project, "stop.json").0, 0);
}

#[test]
fn install_writes_the_settings_once_and_keeps_the_rest() {
    let project = Project::new();
    std::fs::create_dir_all(project.path().join(".claude")).expect("mkdir");
    project.write(
        ".claude/settings.json",
        r#"{"model": "opus", "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]}}"#,
    );
    let first = project.baton(&["hook", "install", "claude-code"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(
        first.stdout.contains("Stop: baton hook claude-code Stop"),
        "{}",
        first.stdout
    );
    let read = || -> Value {
        serde_json::from_str(
            &std::fs::read_to_string(project.path().join(".claude/settings.json")).expect("read"),
        )
        .expect("JSON")
    };
    let settings = read();
    assert_eq!(settings["model"], "opus");
    let stop = settings["hooks"]["Stop"].as_array().expect("Stop hooks");
    assert_eq!(stop.len(), 2, "the user's Stop hook is kept");
    assert_eq!(
        settings["hooks"]["PostToolUse"][0]["hooks"][0]["command"],
        "baton hook claude-code PostToolUse"
    );
    assert!(
        settings["hooks"]["PostToolUse"][0]["matcher"]
            .as_str()
            .is_some_and(|m| m.contains("Edit|Write|MultiEdit") && m.contains("Bash"))
    );
    let again = project.baton(&["hook", "install", "claude-code"]);
    assert_eq!(again.code, 0);
    assert!(again.stdout.contains("already"), "{}", again.stdout);
    assert_eq!(read(), settings, "installing twice changes nothing");
}
