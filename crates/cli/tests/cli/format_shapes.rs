//! Shapes orchestrators read: the per-stage facts in `compile --format
//! json`'s `resolutions`, and `isolation` in dispatch files.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::project::{HEADER, Project, stage};

fn resolution<'a>(plan: &'a Value, name: &str) -> &'a Value {
    plan["resolutions"]
        .as_array()
        .expect("resolutions")
        .iter()
        .find(|resolution| resolution["stage"] == name)
        .unwrap_or_else(|| panic!("no resolution for {name}: {plan}"))
}

#[test]
fn compile_resolutions_carry_what_dispatching_a_stage_needs() {
    let project = Project::new();
    project.write(
        "child.yaml",
        &format!("{HEADER}{}", stage("only", "true", "")),
    );
    let stages = "  - name: research
    kind: gather
    description: d
    agent: {role: researcher, model: opus, isolation: worktree, access: read-write}
    writes_to: [notes.md]
  - name: review
    kind: propose
    description: d
    agent: {role: reviewer}
    human_gate: true
    depends_on: [research]
  - name: build
    kind: sub-workflow
    description: d
    agent: {role: orchestrator}
    sub_workflow: child.yaml
    depends_on: [review]
  - name: queued
    kind: execute
    description: d
    agent: {role: worker}
    executor: worker_queue
    script: 'true'
    depends_on: [review]
";
    project.write("wf.yaml", &format!("{HEADER}{stages}"));
    let plan = project.json(&["compile", "wf.yaml", "--format", "json"]);
    let keys: Vec<&str> = resolution(&plan, "research")
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "stage",
            "template_resolved",
            "guide_resolved",
            "cli_commands",
            "index",
            "kind",
            "executor",
            "human_gate",
            "sub_workflow",
            "agent_role",
            "agent_model",
            "agent_isolation"
        ]
    );
    let facts = |name: &str| {
        let found = resolution(&plan, name);
        (
            found["index"].as_u64(),
            found["kind"].as_str(),
            found["executor"].as_str(),
            found["human_gate"].as_bool(),
            found["sub_workflow"].as_str(),
            found["agent_role"].as_str(),
            found["agent_model"].as_str(),
            found["agent_isolation"].as_str(),
        )
    };
    assert_eq!(
        facts("research"),
        (
            Some(0),
            Some("gather"),
            Some("agent"),
            Some(false),
            None,
            Some("researcher"),
            Some("opus"),
            Some("worktree")
        )
    );
    assert_eq!(
        facts("review"),
        (
            Some(1),
            Some("propose"),
            Some("agent"),
            Some(true),
            None,
            Some("reviewer"),
            None,
            Some("work-dir")
        )
    );
    assert_eq!(facts("build").1, Some("sub-workflow"));
    assert_eq!(facts("build").4, Some("child.yaml"));
    assert_eq!(facts("queued").2, Some("worker_queue"));
    // Unknown to the plan: null, not absent.
    assert!(resolution(&plan, "review")["agent_model"].is_null());
    assert!(resolution(&plan, "review")["sub_workflow"].is_null());
}

/// `git ARGS` in `dir`; panics when git fails.
fn git(dir: &Path, args: &[&str]) {
    #[expect(clippy::disallowed_methods, reason = "the test sets up a repository")]
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn dispatch_files_say_whether_the_agent_works_in_a_worktree() {
    let project = Project::new();
    let dir = project.path();
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.name", "test"]);
    git(dir, &["config", "user.email", "test@localhost"]);
    project.write("README", "r\n");
    git(dir, &["add", "README"]);
    git(dir, &["commit", "-q", "-m", "start"]);
    let stages = "  - name: isolated
    kind: execute
    description: d
    agent: {role: coder, access: read-write, isolation: worktree}
    writes_to: [isolated.md]
  - name: shared
    kind: gather
    description: d
    agent: {role: researcher}
    writes_to: [shared.md]
";
    project.write("wf.yaml", &format!("{HEADER}{stages}"));
    let created = project.json(&["run", "wf.yaml", "--driver", "external", "--json"]);
    let id = created["run_id"].as_str().expect("run id");
    let ready = project.json(&["next", id, "--json"]);
    let ready = ready.as_array().expect("ready stages");
    assert_eq!(ready.len(), 2, "{ready:?}");
    for item in ready {
        let file = PathBuf::from(item["dispatch_file"].as_str().expect("a dispatch file"));
        let dispatch: Value =
            serde_json::from_str(&std::fs::read_to_string(&file).expect("readable")).expect("JSON");
        let expected = if item["stage"] == "isolated" {
            assert!(item["worktree"].is_string(), "{item}");
            "worktree"
        } else {
            assert!(item["worktree"].is_null(), "{item}");
            "work-dir"
        };
        assert_eq!(dispatch["isolation"], expected, "{}", file.display());
    }
}
