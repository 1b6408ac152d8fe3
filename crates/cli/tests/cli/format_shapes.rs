//! Shapes orchestrators read: the per-stage facts in `compile --format
//! json`'s `resolutions`, `isolation` in dispatch files, `resume` and
//! `verify` naming a run by its workspace, and a finished run whose outputs
//! changed since they were recorded.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::project::{HEADER, Project, run_id, stage};

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

/// Runs `stages` to the end; returns the run id and its workspace.
fn finished_run(project: &Project, stages: &str) -> (String, PathBuf) {
    project.write("wf.yaml", &format!("{HEADER}{stages}"));
    let run = project.baton(&["run", "wf.yaml", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let id = run_id(&run);
    let status = project.json(&["status", &id, "--json"]);
    let workspace = PathBuf::from(status["workspace"].as_str().expect("workspace"));
    (id, workspace)
}

/// Three stages that count their runs in `runs-<name>` of the project:
/// `b` depends on `a`; `c` on nothing.
fn counted() -> String {
    ["a", "b", "c"]
        .iter()
        .map(|name| {
            let depends = if *name == "b" {
                "    depends_on: [a]\n"
            } else {
                ""
            };
            stage(
                name,
                &format!(
                    "echo run >> \"$BATON_PROJECT_DIR/runs-{name}\"\necho {name} > outputs/{name}.txt"
                ),
                &format!("    writes_to: [{name}.txt]\n{depends}"),
            )
        })
        .collect()
}

fn runs_of(project: &Project, name: &str) -> usize {
    std::fs::read_to_string(project.path().join(format!("runs-{name}")))
        .map_or(0, |text| text.lines().count())
}

#[test]
fn resume_takes_the_run_s_workspace_and_refuses_a_directory_of_no_run() {
    let project = Project::new();
    let script =
        "if [ ! -f \"$BATON_PROJECT_DIR/ready\" ]; then exit 1; fi\necho done > outputs/late.txt";
    let stages = stage("late", script, "    writes_to: [late.txt]\n");
    project.write("wf.yaml", &format!("{HEADER}{stages}"));
    let run = project.baton(&["run", "wf.yaml", "--json"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let id = run_id(&run);
    let status = project.json(&["status", &id, "--json"]);
    let workspace = status["workspace"].as_str().expect("workspace").to_owned();
    project.write("ready", "");
    // A directory inside the workspace names its run too.
    let inside = format!("{workspace}/outputs");
    let resumed = project.baton(&["resume", &inside, "--json"]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    let outcome: Value = serde_json::from_str(&resumed.stdout).expect("JSON");
    assert_eq!(outcome["run_id"], id.as_str());
    assert_eq!(outcome["status"], "success");
    let again = project.baton(&["resume", &workspace]);
    assert_eq!(again.code, 0, "{}", again.stderr);

    std::fs::create_dir(project.path().join("elsewhere")).expect("dir");
    let refused = project.baton(&["resume", "elsewhere"]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains("elsewhere is not the workspace of any run in this store"),
        "{}",
        refused.stderr
    );
    assert!(refused.stderr.contains("hint: "), "{}", refused.stderr);
    let missing = project.baton(&["resume", "./gone/run"]);
    assert_eq!(missing.code, 1, "{}", missing.stderr);
    assert!(
        missing
            .stderr
            .contains("no run has the id './gone/run', and there is no directory ./gone/run"),
        "{}",
        missing.stderr
    );
}

#[test]
fn verify_reports_deleted_and_changed_outputs_and_what_a_resume_reruns() {
    let project = Project::new();
    let (id, workspace) = finished_run(&project, &counted());
    let intact = project.baton(&["verify", &id]);
    assert_eq!(intact.code, 0, "{}{}", intact.stdout, intact.stderr);
    assert!(
        intact.stdout.contains("all 3 recorded output(s) intact"),
        "{}",
        intact.stdout
    );

    std::fs::remove_file(workspace.join("outputs/a.txt")).expect("delete");
    std::fs::write(workspace.join("outputs/c.txt"), "edited\n").expect("change");
    let report = project.baton(&["verify", &workspace.to_string_lossy(), "--json"]);
    assert_eq!(report.code, 3, "{}", report.stderr);
    let report: Value = serde_json::from_str(&report.stdout).expect("JSON");
    assert_eq!(report["run_id"], id.as_str());
    assert_eq!(report["status"], "success");
    assert_eq!(report["intact"], false);
    let states: Vec<(&str, &str, &str)> = report["outputs"]
        .as_array()
        .expect("outputs")
        .iter()
        .map(|output| {
            (
                output["stage"].as_str().expect("stage"),
                output["path"].as_str().expect("path"),
                output["state"].as_str().expect("state"),
            )
        })
        .collect();
    // In stage order: a and c are in the first group, b after a.
    assert_eq!(
        states,
        [
            ("a", "outputs/a.txt", "deleted"),
            ("c", "outputs/c.txt", "changed"),
            ("b", "outputs/b.txt", "intact")
        ]
    );
    let rerun: Vec<(&str, &str)> = report["rerun"]
        .as_array()
        .expect("rerun")
        .iter()
        .map(|rerun| {
            (
                rerun["stage"].as_str().expect("stage"),
                rerun["why"].as_str().expect("why"),
            )
        })
        .collect();
    assert_eq!(
        rerun,
        [
            (
                "a",
                "recorded output outputs/a.txt was deleted since it was recorded"
            ),
            (
                "c",
                "recorded output outputs/c.txt changed since it was recorded"
            ),
            ("b", "depends on a, which reruns")
        ]
    );
    // Verifying ran and changed nothing.
    assert_eq!([runs_of(&project, "a"), runs_of(&project, "b")], [1, 1]);
    assert!(!workspace.join("outputs/a.txt").exists());
    let plain = project.baton(&["verify", &id]);
    assert_eq!(plain.code, 3);
    assert!(
        plain
            .stdout
            .contains(&format!("`baton resume {id}` runs again: a, c, b")),
        "{}",
        plain.stdout
    );
    let unknown = project.baton(&["verify", "no-such-run"]);
    assert_eq!(unknown.code, 1, "{}", unknown.stderr);
    assert!(unknown.stderr.contains("no run with id no-such-run"));
}

#[test]
fn resuming_a_finished_run_reruns_the_stages_whose_outputs_went_and_their_dependants() {
    let project = Project::new();
    let (id, workspace) = finished_run(&project, &counted());
    // Nothing changed: a resume of the finished run runs nothing.
    let idle = project.baton(&["resume", &id]);
    assert_eq!(idle.code, 0, "{}", idle.stderr);
    assert_eq!(
        ["a", "b", "c"].map(|name| runs_of(&project, name)),
        [1, 1, 1]
    );

    std::fs::remove_file(workspace.join("outputs/a.txt")).expect("delete");
    let resumed = project.baton(&["resume", &id]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert!(
        resumed
            .stderr
            .contains("rerun: recorded output outputs/a.txt was deleted"),
        "{}",
        resumed.stderr
    );
    assert_eq!(
        ["a", "b", "c"].map(|name| runs_of(&project, name)),
        [2, 2, 1],
        "a and its dependant b ran again; c did not"
    );
    assert_eq!(
        std::fs::read_to_string(workspace.join("outputs/a.txt")).expect("restored"),
        "a\n"
    );
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "success", "{status}");
    assert_eq!(project.baton(&["verify", &id]).code, 0);
}

/// A workspace names its run for every command that takes one, not only
/// `resume`: `status` of the run's workspace is the run's status.
#[test]
fn status_takes_the_run_s_workspace_too() {
    let project = Project::new();
    project.write(
        "wf.yaml",
        &format!("{HEADER}  - name: a\n    kind: execute\n    description: d\n    executor: inline\n    script: 'true'\n"),
    );
    let run = project.baton(&["run", "wf.yaml", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let id = run_id(&run);
    let workspace = format!(".baton/runs/{id}");
    let status = project.json(&["status", &workspace, "--json"]);
    assert_eq!(status["run_id"], id.as_str(), "{status}");
}
