//! `baton check WORKFLOW` (and `baton run --dry-run`): the workflow is
//! linted, and every agent it needs is resolved to a profile and checked
//! as `baton agents check` checks it, before anything runs or is recorded.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::Value;

use crate::baton;

const WORKFLOW: &str = "name: t\nversion: '1'\ndescription: d\ntrigger: {source: manual}\nstages:\n  - name: prepare\n    kind: execute\n    description: d\n    executor: inline\n    script: touch prepared.txt\n    writes_to: [prepared.txt]\n  - name: review\n    kind: execute\n    description: d\n    depends_on: [prepare]\n    agent: {role: reviewer, access: read-only}\n    writes_to: [review.md]\n";

fn project(settings: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("wf.yaml"), WORKFLOW).expect("write");
    std::fs::write(dir.path().join("baton.toml"), settings).expect("write");
    dir
}

/// An executable script at `dir/name`.
fn script(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path.display().to_string()
}

#[test]
fn a_ready_workflow_passes_with_its_agents_listed() {
    let dir = project("");
    let cli = script(dir.path(), "fake-cli", "echo 'fake-cli 1.2.3'");
    std::fs::write(
        dir.path().join("baton.toml"),
        format!("[agents.default]\nprofile = \"fake\"\n\n[profiles.fake]\nprogram = \"{cli}\"\n"),
    )
    .expect("write");
    let check = baton(dir.path(), &["check", "wf.yaml"]);
    assert_eq!(check.code, 0, "{}\n{}", check.stdout, check.stderr);
    assert!(
        check
            .stdout
            .contains("wf.yaml: valid workflow, 2 stages, 0 errors, 0 warnings"),
        "{}",
        check.stdout
    );
    assert!(
        check
            .stdout
            .contains("review  agent  reviewer  fake     yes"),
        "{}",
        check.stdout
    );
    assert!(
        check
            .stderr
            .contains("ready: `baton run wf.yaml` would start"),
        "{}",
        check.stderr
    );
    assert!(!dir.path().join("prepared.txt").exists());
    assert!(!dir.path().join(".baton").exists(), "nothing is recorded");
}

#[test]
fn a_missing_program_fails_naming_the_stage_the_role_and_the_program() {
    let dir = project(
        "[agents.default]\nprofile = \"ghost\"\n\n[profiles.ghost]\nprogram = \"no-such-agent-cli\"\n",
    );
    let check = baton(dir.path(), &["check", "wf.yaml", "--json"]);
    assert_eq!(check.code, 3, "{}\n{}", check.stdout, check.stderr);
    let json: Value = serde_json::from_str(&check.stdout).expect("JSON");
    assert_eq!(json["valid"], true);
    assert_eq!(json["ready"], false);
    assert_eq!(
        json["agents"],
        serde_json::json!([{"stage": "review", "duty": "agent", "role": "reviewer", "profile": "ghost", "ready": false}])
    );
    assert!(
        check.stderr.contains(
            "error: stage `review` runs an agent (agent, role `reviewer`) with profile `ghost`, whose program `no-such-agent-cli` is not installed here"
        ),
        "{}",
        check.stderr
    );
    assert!(!dir.path().join("prepared.txt").exists());
    assert!(!dir.path().join(".baton").exists(), "nothing is recorded");
}

/// A program on PATH that does not answer `--version` cannot start: `run`
/// alone only looks along PATH, `check` and `run --dry-run` ask it.
#[test]
fn a_program_that_fails_its_version_check_is_not_ready() {
    let dir = project("");
    let cli = script(
        dir.path(),
        "broken-cli",
        "echo 'cannot load its bundle' >&2; exit 1",
    );
    std::fs::write(
        dir.path().join("baton.toml"),
        format!(
            "[agents.reviewer]\nprofile = \"broken\"\n\n[profiles.broken]\nprogram = \"{cli}\"\n"
        ),
    )
    .expect("write");
    for args in [&["check", "wf.yaml"][..], &["run", "wf.yaml", "--dry-run"]] {
        let run = baton(dir.path(), args);
        assert_eq!(run.code, 3, "{args:?}: {}\n{}", run.stdout, run.stderr);
        assert!(
            run.stderr.contains(
                "error: stage `review` runs an agent (agent, role `reviewer`) with profile `broken`, which cannot start here: `"
            ) && run.stderr.contains("--version` failed"),
            "{args:?}: {}",
            run.stderr
        );
    }
}

#[test]
fn missing_credentials_are_a_note_not_a_failure() {
    let dir = project("");
    let cli = script(dir.path(), "keyed-cli", "echo 'keyed-cli 1.0'");
    std::fs::write(
        dir.path().join("baton.toml"),
        format!(
            "[agents.default]\nprofile = \"keyed\"\n\n[profiles.keyed]\nprogram = \"{cli}\"\nenv_passthrough = [\"KEYED_API_KEY\", \"HOME\"]\n"
        ),
    )
    .expect("write");
    let check = baton(dir.path(), &["check", "wf.yaml"]);
    assert_eq!(check.code, 0, "{}\n{}", check.stdout, check.stderr);
    assert!(
        check.stderr.contains(
            "note: profile `keyed` may need KEYED_API_KEY set (unless its CLI is logged in through its own files)"
        ),
        "{}",
        check.stderr
    );
}

#[test]
fn lint_errors_fail_and_warnings_are_shown_or_fail_under_strict() {
    let dir = project("");
    std::fs::write(
        dir.path().join("wf.yaml"),
        WORKFLOW.replace("depends_on: [prepare]", "depnds_on: [prepare]"),
    )
    .expect("write");
    // No agent is mapped, but a warning alone does not fail: the agent does.
    let check = baton(dir.path(), &["check", "wf.yaml"]);
    assert_eq!(check.code, 3, "{}\n{}", check.stdout, check.stderr);
    assert!(check.stderr.contains("depnds_on"), "{}", check.stderr);
    assert!(
        check.stderr.contains("did you mean `depends_on`"),
        "{}",
        check.stderr
    );
    assert!(check.stdout.contains("1 warnings"), "{}", check.stdout);

    let strict = baton(dir.path(), &["check", "wf.yaml", "--strict"]);
    assert_eq!(strict.code, 1, "{}\n{}", strict.stdout, strict.stderr);
    assert!(
        strict.stdout.contains("invalid workflow"),
        "{}",
        strict.stdout
    );

    std::fs::write(dir.path().join("wf.yaml"), "name: t\nstages: nope\n").expect("write");
    let invalid = baton(dir.path(), &["check", "wf.yaml"]);
    assert_eq!(invalid.code, 1, "{}\n{}", invalid.stdout, invalid.stderr);
}

#[test]
fn a_workflow_without_agents_needs_no_baton_toml() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("wf.yaml"),
        "name: t\nversion: '1'\ndescription: d\ntrigger: {source: manual}\nstages:\n  - name: a\n    kind: execute\n    description: d\n    executor: inline\n    script: touch out.txt\n    writes_to: [out.txt]\n",
    )
    .expect("write");
    let check = baton(dir.path(), &["check", "wf.yaml"]);
    assert_eq!(check.code, 0, "{}\n{}", check.stdout, check.stderr);
    assert!(
        check
            .stdout
            .contains("agents: none (no stage runs an agent)"),
        "{}",
        check.stdout
    );
}

/// `--probe` with the real Claude Code against the fake model: the
/// workflow's profile answers; when the model answers 401, the check fails
/// naming the profile and role, in the CLI's own words.
#[test]
fn probe_asks_the_workflow_s_profiles_for_an_answer() {
    let Some(setup) = crate::real_agents::Setup::new("claude") else {
        return;
    };
    std::fs::write(
        setup.dir().join("wf.yaml"),
        "name: t\nversion: '1'\ndescription: d\ntrigger: {source: manual}\nstages:\n  - name: review\n    kind: execute\n    description: d\n    agent: {role: reviewer, access: read-only}\n    writes_to: [review.md]\n",
    )
    .expect("write");
    let check = setup.baton(&["check", "wf.yaml", "--probe", "--timeout", "120s", "--json"]);
    assert_eq!(check.code, 0, "{}\n{}", check.stdout, check.stderr);
    let json: Value = serde_json::from_str(&check.stdout).expect("JSON");
    let probes = json["probe"].as_array().expect("probed");
    assert!(!probes.is_empty(), "{json:#}");
    assert!(probes.iter().all(|probe| probe["ok"] == true), "{json:#}");

    setup
        .server
        .set_mode(baton_test_support::model_server::Mode::Status(401));
    let check = setup.baton(&["check", "wf.yaml", "--probe", "--timeout", "120s"]);
    assert_eq!(check.code, 3, "{}\n{}", check.stdout, check.stderr);
    assert!(
        check
            .stderr
            .contains("error: profile `claude` (role default")
            && check
                .stderr
                .contains("did not answer its probe: the agent reported: "),
        "{}",
        check.stderr
    );
    assert!(!setup.dir().join(".baton/runs").exists(), "nothing ran");
}
