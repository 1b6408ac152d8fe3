//! Read-only agents, contained: hostile ones cannot change the repository
//! (through a shell, `.git/hooks`, an ignored file or a daemon) and fail
//! naming what they tried; honest ones never fail for what others change.
//! The stand-in agent plays both.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::baton;

const HEADER: &str = "name: t\nversion: '1'\ndescription: d\ntrigger: {source: manual}\nstages:\n";

/// A git repository with a tracked file, an ignored one, and a `baton.toml`
/// whose agents are the stand-in; `None` (after saying why) where this
/// machine cannot contain a process, which under `CI=true` fails instead.
fn project() -> Option<tempfile::TempDir> {
    let baton_binary = Path::new(env!("CARGO_BIN_EXE_baton"));
    if let Err(reason) = baton_executor::contain::check(baton_binary) {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must be able to contain agents: {reason}"
        );
        eprintln!("SKIPPED: this machine cannot contain agents: {reason}");
        return None;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    crate::project::git_repository(
        dir.path(),
        &[("hello.txt", "hello\n"), (".gitignore", "*.log\n.baton/\n")],
    );
    write(dir.path(), "debug.log", "ignored\n");
    let fake = baton_binary.with_file_name("baton-fake-agent");
    write(
        dir.path(),
        "baton.toml",
        &format!(
            "[agents.default]\nprofile = \"fake\"\n\n[profiles.fake]\nprogram = \"{}\"\nprompt = {{ via = \"stdin\" }}\nenv_passthrough = [\"PATH\", \"HOME\"]\n",
            fake.display()
        ),
    );
    Some(dir)
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).expect("write");
}

fn read(dir: &Path, name: &str) -> Option<String> {
    std::fs::read_to_string(dir.join(name)).ok()
}

/// An agent stage whose prompt carries stand-in directives, one per line.
fn agent(name: &str, access: &str, directives: &[&str]) -> String {
    let lines: String = directives
        .iter()
        .map(|directive| format!("      FAKE-AGENT: {directive}\n"))
        .collect();
    format!(
        "  - name: {name}\n    kind: execute\n    description: |\n{lines}      FAKE-AGENT: write-listed\n    agent: {{role: code-writer, access: {access}}}\n    required: false\n    writes_to: [{name}.md]\n"
    )
}

fn stages(dir: &Path, run: &baton_test_support::Run) -> Vec<Value> {
    let value: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}\n{}", run.stdout, run.stderr));
    let id = value["run_id"].as_str().expect("run_id");
    let status = baton(dir, &["status", id, "--json"]);
    let status: Value = serde_json::from_str(&status.stdout).expect("status JSON");
    status["stages"].as_array().expect("stages").clone()
}

/// Processes whose command line contains `needle`.
fn processes_with(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline"))
            && String::from_utf8_lossy(&cmdline).contains(needle)
        {
            found.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    found
}

#[test]
fn a_hostile_read_only_agent_changes_nothing_and_leaves_nothing_running() {
    let Some(dir) = project() else { return };
    let dir = dir.path();
    // The daemon's marker: a sleep no other process on the machine runs.
    let marker = format!("98765.{}", std::process::id());
    let workflow = [
        agent("shell-writer", "read-only", &["shell echo changed > hello.txt"]),
        agent(
            "hook-planter",
            "read-only",
            &["shell printf '#!/bin/sh\\necho pwned\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit"],
        ),
        agent("ignored-writer", "read-only", &["shell echo changed >> debug.log"]),
        agent(
            "daemon",
            "read-only",
            &[
                &format!(
                    "shell env -i PATH=/usr/bin:/bin setsid sh -c 'echo pwned > daemon.txt; exec sleep {marker}' > /dev/null 2>&1 < /dev/null &"
                ),
                // The agent ends once its daemon has written: the write is
                // certain, and the daemon still runs when the agent exits.
                "shell while [ ! -e daemon.txt ]; do sleep 0.05; done",
            ],
        ),
    ]
    .concat();
    write(dir, "wf.yaml", &format!("{HEADER}{workflow}"));
    let run = baton(dir, &["run", "wf.yaml", "--json"]);
    assert_eq!(run.code, 0, "optional stages: {}", run.stderr);
    for (stage, file) in [
        ("shell-writer", "hello.txt"),
        ("hook-planter", ".git/hooks/pre-commit"),
        ("ignored-writer", "debug.log"),
        ("daemon", "daemon.txt"),
    ] {
        let found = stages(dir, &run)
            .into_iter()
            .find(|found| found["stage"] == stage)
            .expect("stage");
        assert_eq!(found["status"], "failed", "{found}");
        let error = found["error"].as_str().expect("error");
        assert!(
            error.contains(&format!("wrote outside its workspace: {file}"))
                && error.contains("discarded"),
            "{stage}: {error}"
        );
    }
    assert_eq!(read(dir, "hello.txt").as_deref(), Some("hello\n"));
    assert_eq!(read(dir, "debug.log").as_deref(), Some("ignored\n"));
    assert!(!dir.join(".git/hooks/pre-commit").exists());
    assert!(!dir.join("daemon.txt").exists());
    assert_eq!(
        processes_with(&marker),
        Vec::<String>::new(),
        "the daemon outlived its stage"
    );
}

#[test]
fn an_honest_read_only_agent_is_not_blamed_for_what_others_change() {
    let Some(dir) = project() else { return };
    let dir = dir.path();
    // The writer changes the repository while the reader runs (each waits
    // for the other); the run's own output goes to a file in the
    // repository.
    let workflow = [
        agent(
            "writer",
            "read-write",
            &[
                "shell while [ ! -e \"$BATON_WORKSPACE/reader-started\" ]; do sleep 0.05; done",
                "shell echo new > notes.txt",
                "shell touch \"$BATON_WORKSPACE/writer-done\"",
            ],
        ),
        agent(
            "reader",
            "read-only",
            &[
                "shell cat hello.txt",
                "shell touch \"$BATON_WORKSPACE/reader-started\"",
                "shell while [ ! -e \"$BATON_WORKSPACE/writer-done\" ]; do sleep 0.05; done",
                "shell git status --short > /dev/null",
            ],
        ),
    ]
    .concat()
    .replace("required: false", "required: true");
    write(dir, "wf.yaml", &format!("{HEADER}{workflow}"));
    let log = std::fs::File::create(dir.join("run.log")).expect("run.log");
    #[expect(
        clippy::disallowed_methods,
        reason = "the run writes into the repository"
    )]
    let status = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["run", "wf.yaml", "--max-parallel", "2"])
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .stdout(log.try_clone().expect("dup"))
        .stderr(log)
        .status()
        .expect("baton runs");
    let output = read(dir, "run.log").unwrap_or_default();
    assert!(status.success(), "{output}");
    assert!(output.contains("reader"), "{output}");
    assert_eq!(read(dir, "notes.txt").as_deref(), Some("new\n"));
}

/// A hook payload as Claude Code sends it after a Write, for `session`.
fn write_hook(dir: &Path, session: &str) -> String {
    let payload = serde_json::json!({
        "session_id": session,
        "cwd": dir,
        "hook_event_name": "PostToolUse",
        "tool_name": "Write",
        "tool_input": {"file_path": dir.join("hello.txt"), "content": "x"},
        "tool_response": {"type": "update"},
        "tool_use_id": "toolu_1",
    });
    format!(
        "shell printf '%s' '{payload}' | {} hook claude-code PostToolUse",
        env!("CARGO_BIN_EXE_baton")
    )
}

#[test]
fn no_agent_can_write_baton_state_but_its_hooks_still_record() {
    let Some(dir) = project() else { return };
    let dir = dir.path();
    std::fs::create_dir_all(dir.join(".baton")).expect(".baton");
    let workflow = [
        agent(
            "planter",
            "read-write",
            &["shell echo x > .baton/planted.txt"],
        ),
        agent(
            "other-run",
            "read-write",
            &["shell mkdir -p .baton/runs/elsewhere && echo x > .baton/runs/elsewhere/x"],
        ),
        agent("editor", "read-write", &["shell echo edited > hello.txt"]),
        agent("rw-hooked", "read-write", &[&write_hook(dir, "rw-session")]),
        agent("ro-hooked", "read-only", &[&write_hook(dir, "ro-session")]),
    ]
    .concat();
    write(dir, "wf.yaml", &format!("{HEADER}{workflow}"));
    let run = baton(dir, &["run", "wf.yaml", "--json"]);
    assert_eq!(run.code, 0, "optional stages: {}", run.stderr);
    let stages = stages(dir, &run);
    let status = |name: &str| {
        let found = stages
            .iter()
            .find(|found| found["stage"] == name)
            .expect("stage");
        (found["status"].clone(), found["error"].clone())
    };
    for refused in ["planter", "other-run"] {
        let (status, error) = status(refused);
        assert_eq!(status, "failed", "{refused}: {error}");
    }
    assert!(!dir.join(".baton/planted.txt").exists());
    assert!(!dir.join(".baton/runs/elsewhere").exists());
    // A read-write agent still changes the repository, and baton's own
    // hooks record into the store from inside either kind of agent.
    for allowed in ["editor", "rw-hooked", "ro-hooked"] {
        let (status, error) = status(allowed);
        assert_eq!(status, "success", "{allowed}: {error}");
    }
    assert_eq!(read(dir, "hello.txt").as_deref(), Some("edited\n"));
    for session in ["rw-session", "ro-session"] {
        let shown = baton(dir, &["state", "show", "--session", session, "--json"]);
        assert_eq!(shown.code, 0, "{}", shown.stderr);
        assert!(
            shown.stdout.contains("hello.txt"),
            "{session}: {}",
            shown.stdout
        );
    }
}
