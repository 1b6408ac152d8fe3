//! Secrets never reach what baton writes or shows: the values of variables
//! named like secrets, and text shaped like an API key, are redacted from
//! logs, errors and dispatch records, whether a script or an agent prints
//! them.

use std::path::Path;

use serde_json::Value;

use crate::project::Project;

const SECRET: &str = "tok-supersecret-1234";
const KEY_SHAPE: &str = "sk-abcdefghijklmnopqrstuvwx0123";

/// Every file under `dir` whose name ends with one of `suffixes`, with its
/// text.
fn files_ending(dir: &Path, suffixes: &[&str]) -> Vec<(String, String)> {
    crate::project::files_under(dir)
        .into_iter()
        .filter(|path| {
            suffixes
                .iter()
                .any(|suffix| path.to_string_lossy().ends_with(suffix))
        })
        .map(|path| {
            let text = String::from_utf8_lossy(&std::fs::read(&path).expect("read")).into_owned();
            (path.display().to_string(), text)
        })
        .collect()
}

#[test]
fn secrets_printed_by_scripts_and_agents_are_redacted_everywhere_baton_writes_them() {
    let project = Project::new();
    let fake = Path::new(env!("CARGO_BIN_EXE_baton")).with_file_name("baton-fake-agent");
    project.write(
        "baton.toml",
        &format!(
            "[agents.default]\nprofile = \"fake\"\n\n[profiles.fake]\nprogram = \"{}\"\nprompt = {{ via = \"stdin\" }}\nenv_passthrough = [\"PATH\", \"HOME\", \"MY_SERVICE_TOKEN\"]\n",
            fake.display()
        ),
    );
    let workflow = r#"name: t
version: '1'
description: d
trigger: {source: manual}
stages:
  - name: script
    kind: execute
    description: d
    executor: inline
    required: false
    script: |
      echo "token=$MY_SERVICE_TOKEN and KEY_SHAPE"
      echo "failing with $MY_SERVICE_TOKEN" >&2
      exit 1
  - name: agent
    kind: execute
    description: |
      Use {note}.
      FAKE-AGENT: shell echo "agent sees $MY_SERVICE_TOKEN"
      FAKE-AGENT: write-listed
    agent: {role: coder, access: read-write}
    writes_to: [agent.md]
"#;
    project.write("wf.yaml", &workflow.replace("KEY_SHAPE", KEY_SHAPE));
    let output = project
        .command(&[
            "run",
            "wf.yaml",
            "--json",
            "--params",
            &format!("note={SECRET}"),
        ])
        .env("MY_SERVICE_TOKEN", SECRET)
        .output()
        .expect("baton runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains(SECRET), "{stderr}");
    let value: Value = serde_json::from_str(&stdout).expect("run JSON");
    let id = value["run_id"].as_str().expect("run id");
    let status = project.baton(&["status", id, "--json"]);
    assert!(!status.stdout.contains(SECRET), "{}", status.stdout);
    assert!(
        status.stdout.contains("failing with [redacted]"),
        "{}",
        status.stdout
    );
    for stage in ["script", "agent"] {
        let logs = project.baton(&["logs", id, stage]);
        assert!(
            !logs.stdout.contains(SECRET) && !logs.stdout.contains(KEY_SHAPE),
            "{stage}: {}",
            logs.stdout
        );
        assert!(
            logs.stdout.contains("[redacted]"),
            "{stage}: {}",
            logs.stdout
        );
    }
    let written = files_ending(
        &project.path().join(".baton"),
        &[".stdout", ".stderr", ".json"],
    );
    assert!(written.iter().any(|(path, _)| path.contains("dispatch")));
    for (path, text) in written {
        assert!(
            !text.contains(SECRET) && !text.contains(KEY_SHAPE),
            "{path}: {text}"
        );
    }
}

/// A project whose workflow is one agent stage described by `description`.
fn one_agent_stage(description: &str) -> Project {
    let project = Project::new();
    project.write(
        "wf.yaml",
        &format!(
            "name: t\nversion: '1'\ndescription: d\ntrigger: {{source: manual}}\nstages:\n  - {{name: agent, kind: execute, description: {description}, agent: {{role: coder}}, writes_to: [agent.md]}}\n"
        ),
    );
    project
}

/// `baton ARGS` with a secret in its environment.
fn with_secret(project: &Project, args: &[&str]) -> std::process::Output {
    project
        .command(args)
        .env("MY_SERVICE_TOKEN", SECRET)
        .output()
        .expect("baton runs")
}

/// The driver protocol hands the orchestrator the prompt as it is (its
/// agent needs it) and keeps the secret out of the dispatch record, as
/// `baton run` does.
#[test]
fn the_driver_protocol_s_dispatch_record_keeps_no_secret() {
    let project = one_agent_stage("'Use {note}.'");
    let baton = |args: &[&str]| {
        let output = with_secret(&project, args);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(output.status.code(), Some(0), "{args:?}: {stderr}");
        serde_json::from_slice::<Value>(&output.stdout).expect("JSON")
    };
    let note = format!("note={SECRET}");
    let created = baton(&[
        "run", "wf.yaml", "--driver", "external", "--json", "--params", &note,
    ]);
    let id = created["run_id"].as_str().expect("run id");
    let handed = baton(&["next", id, "--json"]);
    assert!(
        handed[0]["prompt"]
            .as_str()
            .expect("prompt")
            .contains(SECRET)
    );
    let dispatch = handed[0]["dispatch_file"].as_str().expect("dispatch file");
    let recorded = std::fs::read_to_string(dispatch).expect("the dispatch record");
    assert!(!recorded.contains(SECRET), "{recorded}");
    assert!(recorded.contains("[redacted]"), "{recorded}");
}

/// An orchestrator's reason for `baton fail` is recorded and shown
/// without the secrets it holds, as a process's error is in `baton run`.
#[test]
fn a_reason_given_to_fail_is_recorded_without_its_secret() {
    let project = one_agent_stage("d");
    let baton = |args: &[&str]| with_secret(&project, args);
    let created = baton(&["run", "wf.yaml", "--driver", "external", "--json"]);
    let created: Value = serde_json::from_slice(&created.stdout).expect("JSON");
    let id = created["run_id"].as_str().expect("run id");
    assert!(baton(&["next", id, "--json"]).status.success());
    let reason = format!("the provider refused {SECRET} and {KEY_SHAPE}");
    let failed = baton(&["fail", id, "agent", "--error", &reason, "--json"]);
    let shown = String::from_utf8_lossy(&failed.stdout);
    assert!(
        !shown.contains(SECRET) && !shown.contains(KEY_SHAPE),
        "{shown}"
    );
    let status = project.baton(&["status", id, "--json"]);
    assert!(
        status.stdout.contains("the provider refused [redacted]"),
        "{}",
        status.stdout
    );
    let written = files_ending(&project.path().join(".baton"), &[".json"]);
    for (path, text) in written {
        assert!(
            !text.contains(SECRET) && !text.contains(KEY_SHAPE),
            "{path}: {text}"
        );
    }
}
