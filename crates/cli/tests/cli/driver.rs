//! The driver protocol end to end: a harness plays the external
//! orchestrator (`baton run --driver external`, then `baton next` → its own
//! agents → `baton complete` / `baton fail`, gates approved with
//! `baton gate approve`). Its "agents" are the stand-in agent, run by the
//! harness with the prompt `next` handed out, in the run's workspace.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use baton_test_support::compat_dir;
use serde_json::Value;

use crate::project::{HEADER, Project};

pub(crate) fn fake_agent() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_baton")).with_file_name("baton-fake-agent")
}

/// Runs the stand-in agent as an orchestrator's agent would run: the prompt
/// on stdin, in the workspace, with `directive` (if any) in its environment.
fn agent(workspace: &Path, prompt: &str, directive: Option<&str>) -> i32 {
    #[expect(
        clippy::disallowed_methods,
        reason = "the harness spawns its own agents, as an orchestrator does"
    )]
    let mut command = Command::new(fake_agent());
    command
        .current_dir(workspace)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(directive) = directive {
        command.env("BATON_FAKE_AGENT", directive);
    }
    let mut child = command.spawn().expect("the stand-in agent starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(prompt.as_bytes())
        .expect("prompt written");
    child
        .wait()
        .expect("the stand-in agent ends")
        .code()
        .unwrap_or(-1)
}

/// Creates an externally driven run of `file`; returns its id and workspace.
pub(crate) fn create(project: &Project, file: &str) -> (String, PathBuf) {
    let created = project.json(&["run", file, "--driver", "external", "--json"]);
    assert_eq!(created["driver"], "external", "{created}");
    (
        created["run_id"].as_str().expect("run id").to_owned(),
        PathBuf::from(created["workspace"].as_str().expect("workspace")),
    )
}

/// What a harness saw while driving a run to its end.
pub(crate) struct Driven {
    pub(crate) status: String,
    gates: Vec<String>,
    pub(crate) handed: Vec<String>,
}

/// Loops `next` → agents → `complete` until the run ends, approving every
/// gate it stops at; `directive` picks the stand-in's behaviour by the
/// role named in each dispatch file and the name handed out.
pub(crate) fn drive(
    project: &Project,
    id: &str,
    directive: &dyn Fn(&str, &str) -> Option<String>,
) -> Driven {
    let mut driven = Driven {
        status: String::new(),
        gates: Vec::new(),
        handed: Vec::new(),
    };
    for _ in 0..100 {
        let next = project.baton(&["next", id, "--json"]);
        assert_eq!(next.code, 0, "next: {}", next.stderr);
        let ready: Vec<Value> = serde_json::from_str(&next.stdout).expect("next prints JSON");
        if ready.is_empty() {
            let status = project.json(&["status", id, "--json"]);
            let run_status = status["status"].as_str().expect("status").to_owned();
            if run_status == "awaiting_human" {
                let gates = project.json(&["gate", "list", id, "--json"]);
                let gate = gates
                    .as_array()
                    .expect("gates")
                    .iter()
                    .find(|gate| gate["status"] == "awaiting")
                    .and_then(|gate| gate["stage"].as_str())
                    .expect("an awaiting gate")
                    .to_owned();
                // Nothing past the gate is handed out before the approval.
                let again = project.json(&["next", id, "--json"]);
                assert_eq!(again, Value::Array(Vec::new()), "held at {gate}");
                let approve = project.baton(&["gate", "approve", id, &gate]);
                assert_eq!(approve.code, 0, "{}", approve.stderr);
                // Driven from outside: the way on is `next`, not `resume`.
                assert!(
                    approve
                        .stderr
                        .contains(&format!("`baton next {id}` hands out"))
                        && !approve.stderr.contains("baton resume"),
                    "{}",
                    approve.stderr
                );
                driven.gates.push(gate);
                continue;
            }
            driven.status = run_status;
            return driven;
        }
        for item in ready {
            let stage = item["stage"].as_str().expect("stage").to_owned();
            assert!(item["worktree"].is_null(), "{item}");
            let dispatch_file = PathBuf::from(item["dispatch_file"].as_str().expect("file"));
            let dispatch: Value =
                serde_json::from_str(&std::fs::read_to_string(&dispatch_file).expect("dispatch"))
                    .expect("dispatch JSON");
            assert_eq!(dispatch["prompt"], item["prompt"], "{stage}");
            let workspace = PathBuf::from(dispatch["workspace_dir"].as_str().expect("workspace"));
            let role = dispatch["agent_type"].as_str().unwrap_or_default();
            let prompt = item["prompt"].as_str().expect("prompt");
            assert_eq!(
                agent(&workspace, prompt, directive(role, &stage).as_deref()),
                0,
                "{stage}"
            );
            let complete = project.baton(&["complete", id, &stage]);
            assert_eq!(complete.code, 0, "complete {stage}: {}", complete.stderr);
            driven.handed.push(stage);
        }
    }
    panic!("run {id} did not end in 100 rounds");
}

pub(crate) fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("readable") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

#[test]
fn an_orchestrator_drives_a_compat_workflow_through_its_gate_and_validators() {
    let Some(corpus) = compat_dir() else { return };
    let project = Project::new();
    copy_tree(&corpus.join("workflows"), &project.path().join("workflows"));
    // No baton.toml: baton spawns no agents for such a run.
    let (id, workspace) = create(&project, "workflows/code/ci-debug.yaml");
    assert!(workspace.join("manifest.json").is_file());
    // A resume spawns nothing and says what is ready.
    let resume = project.baton(&["resume", &id]);
    assert_eq!(resume.code, 0, "{}", resume.stderr);
    assert!(
        resume.stderr.contains("driven externally"),
        "{}",
        resume.stderr
    );
    assert!(
        resume.stderr.contains("fetch-failures"),
        "{}",
        resume.stderr
    );

    let driven = drive(&project, &id, &|_, _| None);
    assert_eq!(driven.status, "success", "{:?}", driven.handed);
    assert_eq!(driven.gates, ["human-gate"]);
    // The validators ran as units handed out under their labels.
    assert!(
        driven
            .handed
            .iter()
            .any(|stage| stage == "verify[v1:unit:1]"),
        "{:?}",
        driven.handed
    );
    let status = project.json(&["status", &id, "--json"]);
    for stage in status["stages"].as_array().expect("stages") {
        assert!(
            stage["status"] == "success" || stage["status"] == "skipped",
            "{stage}"
        );
    }
    // Every handed-out stage has its dispatch file, and the finished run
    // hands out nothing more.
    assert!(workspace.join("dispatch/000-fetch-failures.json").is_file());
    // Result envelopes as a run by baton writes them.
    let envelope: Value = serde_json::from_str(
        &std::fs::read_to_string(workspace.join("stages/000-fetch-failures.json"))
            .expect("envelope"),
    )
    .expect("JSON");
    assert_eq!(envelope["status"], "success", "{envelope}");
    assert_eq!(
        project.json(&["next", &id, "--json"]),
        Value::Array(Vec::new())
    );
}

#[test]
fn a_correction_cycle_runs_through_the_protocol() {
    let project = Project::new();
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}  - name: report\n    kind: propose\n    description: Write the report.\n    agent: {{role: writer}}\n    writes_to: [report.json]\n    validation: {{strategy: cross_unit}}\n  - name: publish\n    kind: execute\n    description: d\n    executor: inline\n    depends_on: [report]\n    script: |\n      cp outputs/report.json outputs/final.json\n    writes_to: [final.json]\n"
        ),
    );
    let (id, workspace) = create(&project, "wf.yaml");
    let driven = drive(&project, &id, &|role, stage| {
        if role == "validator" {
            Some("findings critical-until 1".to_owned())
        } else if stage.contains(":correct") {
            Some("correct".to_owned())
        } else {
            None
        }
    });
    assert_eq!(driven.status, "success", "{:?}", driven.handed);
    assert_eq!(
        driven.handed,
        [
            "report",
            "report[v1:cross]",
            "report[c1:correct]",
            "report[v2:cross]"
        ]
    );
    let applied: Value = serde_json::from_str(
        &std::fs::read_to_string(workspace.join("validation/corrections-applied.json"))
            .expect("corrections log"),
    )
    .expect("JSON");
    assert_eq!(applied.as_array().map(Vec::len), Some(1), "{applied}");
    // The inline script after it was run by baton itself.
    assert!(workspace.join("outputs/final.json").is_file());
    // The ledger holds the cycle, the repair and its re-review, which
    // resolved the finding.
    let shown = project.json(&["state", "show", "--run", &id, "--json"]);
    let kinds: Vec<&str> = shown["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|event| event["kind"].as_str())
        .collect();
    let (repaired, re_reviewed) = (
        kinds.iter().position(|kind| *kind == "repaired"),
        kinds.iter().position(|kind| *kind == "re_reviewed"),
    );
    assert!(repaired.is_some() && repaired < re_reviewed, "{kinds:?}");
    assert_eq!(shown["findings"][0]["status"], "resolved", "{shown}");
}

/// A two-stage agent workflow: `a`, then `b` depending on it.
fn two_stages(project: &Project) -> (String, PathBuf) {
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}  - name: a\n    kind: propose\n    description: d\n    agent: {{role: writer}}\n    writes_to: [a.json]\n  - name: b\n    kind: propose\n    description: d\n    agent: {{role: writer}}\n    depends_on: [a]\n    writes_to: [b.json]\n"
        ),
    );
    create(project, "wf.yaml")
}

#[test]
fn out_of_order_completions_are_refused() {
    let project = Project::new();
    let (id, workspace) = two_stages(&project);

    // Before `next` handed it out.
    let early = project.baton(&["complete", &id, "a"]);
    assert_eq!(early.code, 3, "{}", early.stderr);
    assert!(
        early.stderr.contains("was not handed out"),
        "{}",
        early.stderr
    );
    // A stage whose dependency is not done.
    let blocked = project.baton(&["complete", &id, "b"]);
    assert_eq!(blocked.code, 3, "{}", blocked.stderr);
    assert!(
        blocked.stderr.contains("depends on 'a'"),
        "{}",
        blocked.stderr
    );
    // No such stage.
    assert_eq!(project.baton(&["complete", &id, "zz"]).code, 1);

    let ready = project.json(&["next", &id, "--json"]);
    assert_eq!(ready.as_array().map(Vec::len), Some(1), "{ready}");
    assert_eq!(ready[0]["stage"], "a");
    // `next` again lists the stage handed out and not completed.
    assert_eq!(project.json(&["next", &id, "--json"])[0]["stage"], "a");

    // Nothing written: verification fails like the built-in executor's.
    std::fs::write(workspace.join("outputs/a.json"), "{}").expect("write");
    let ok = project.baton(&["complete", &id, "a"]);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    // `b` is ready now: the hint points at `next`, not "nothing to hand out".
    assert!(
        ok.stderr
            .contains(&format!("`baton next {id}` hands out the stages ready now")),
        "{}",
        ok.stderr
    );
    let twice = project.baton(&["complete", &id, "a"]);
    assert_eq!(twice.code, 3, "{}", twice.stderr);
    assert!(
        twice.stderr.contains("already completed"),
        "{}",
        twice.stderr
    );

    // An output left from before `next` does not count as written.
    std::fs::write(workspace.join("outputs/b.json"), "{}").expect("write");
    assert_eq!(project.json(&["next", &id, "--json"])[0]["stage"], "b");
    let stale = project.baton(&["complete", &id, "b"]);
    assert_eq!(stale.code, 2, "{}", stale.stderr);
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "failed", "{status}");
}

/// A `complete` killed between recording its result and writing the
/// result's envelope leaves the envelope missing: the next `next` writes
/// it, before and after the run's end.
#[test]
fn next_writes_the_envelopes_a_killed_call_left_missing() {
    let project = Project::new();
    let (id, workspace) = two_stages(&project);
    let envelope = |name: &str| workspace.join(format!("stages/{name}.json"));
    for (stage, name) in [("a", "000-a"), ("b", "001-b")] {
        assert_eq!(project.json(&["next", &id, "--json"])[0]["stage"], stage);
        if stage == "b" {
            assert!(
                envelope("000-a").exists(),
                "written again while the run goes on"
            );
        }
        std::fs::write(workspace.join(format!("outputs/{stage}.json")), "{}").expect("write");
        let completed = project.baton(&["complete", &id, stage]);
        assert_eq!(completed.code, 0, "{}", completed.stderr);
        std::fs::remove_file(envelope(name)).expect("the envelope was written");
    }
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "success", "{status}");
    assert_eq!(
        project.json(&["next", &id, "--json"]),
        serde_json::json!([])
    );
    for name in ["000-a", "001-b"] {
        let text = std::fs::read_to_string(envelope(name)).expect("written again");
        let written: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(written["status"], "success", "{text}");
    }
}

#[test]
fn fail_ends_the_run_failed_for_a_required_stage() {
    let project = Project::new();
    let (id, _) = two_stages(&project);
    // Not handed out yet: refused.
    assert_eq!(
        project
            .baton(&["fail", &id, "a", "--error", "agent gave up"])
            .code,
        3
    );
    assert_eq!(project.json(&["next", &id, "--json"])[0]["stage"], "a");
    let fail = project.baton(&["fail", &id, "a", "--error", "agent gave up"]);
    assert_eq!(fail.code, 0, "{}", fail.stderr);
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "failed", "{status}");
    assert!(
        status["error"]
            .as_str()
            .is_some_and(|error| error.contains("agent gave up")),
        "{status}"
    );
    assert_eq!(
        project.json(&["next", &id, "--json"]),
        Value::Array(Vec::new())
    );
}

#[test]
fn a_run_driven_by_baton_refuses_the_protocol() {
    let project = Project::new();
    project.write(
        "wf.yaml",
        &format!("{HEADER}{}", crate::project::stage("s", "true", "")),
    );
    let run = project.json(&["run", "wf.yaml", "--json"]);
    let id = run["run_id"].as_str().expect("id");
    let next = project.baton(&["next", id, "--json"]);
    assert_eq!(next.code, 3, "{}", next.stderr);
    assert!(next.stderr.contains("not externally"), "{}", next.stderr);
}

/// `--accept-merge` finishes a stage baton runs; on a run driven through
/// the protocol it is refused with the way that works there, not ignored.
#[test]
fn resume_accept_merge_of_an_externally_driven_run_is_refused_with_the_way_out() {
    let project = Project::new();
    let (id, _) = two_stages(&project);
    let resumed = project.baton(&["resume", &id, "--accept-merge"]);
    assert_eq!(resumed.code, 3, "{}", resumed.stderr);
    assert!(
        resumed
            .stderr
            .contains(&format!("`baton rerun {id} STAGE`")),
        "{}",
        resumed.stderr
    );
}

#[test]
fn parallel_completions_are_all_recorded() {
    let project = Project::new();
    let stages: String = (1..=4)
        .map(|n| {
            format!(
                "  - name: s{n}\n    kind: propose\n    description: d\n    agent: {{role: writer}}\n    writes_to: [s{n}.json]\n"
            )
        })
        .collect();
    project.write("wf.yaml", &format!("{HEADER}{stages}"));
    let (id, workspace) = create(&project, "wf.yaml");
    let ready = project.json(&["next", &id, "--json"]);
    assert_eq!(ready.as_array().map(Vec::len), Some(4), "{ready}");
    for n in 1..=4 {
        std::fs::write(workspace.join(format!("outputs/s{n}.json")), "{}").expect("write");
    }
    // Parallel agents report at once: every call waits its turn for the
    // run's lease instead of failing.
    let codes: Vec<i32> = std::thread::scope(|scope| {
        let handles: Vec<_> = (1..=4)
            .map(|n| {
                let (project, id) = (&project, &id);
                scope.spawn(move || {
                    let stage = format!("s{n}");
                    let run = project.baton(&["complete", id, &stage]);
                    assert_eq!(run.code, 0, "{stage}: {}", run.stderr);
                    run.code
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().expect("thread"))
            .collect()
    });
    assert_eq!(codes, [0, 0, 0, 0]);
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "success", "{status}");
}

/// Every corpus workflow, each in a project of its own (no `baton.toml`),
/// driven to its end through the protocol, its queue stages included
/// (`next` works their jobs).
#[test]
fn every_compat_workflow_runs_to_success_through_the_protocol() {
    let Some(corpus) = compat_dir() else { return };
    let project = Project::new();
    copy_tree(&corpus.join("workflows"), &project.path().join("workflows"));
    let mut files = Vec::new();
    let mut stack = vec![project.path().join("workflows")];
    while let Some(directory) = stack.pop() {
        for entry in std::fs::read_dir(&directory).expect("readable").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path
                .extension()
                .is_some_and(|extension| extension == "yaml")
            {
                files.push(
                    path.strip_prefix(project.path())
                        .expect("inside")
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
    }
    files.sort();
    let mut succeeded = Vec::new();
    for file in &files {
        let mut args = vec!["run", file.as_str(), "--driver", "external", "--json"];
        if file.ends_with("review-and-fix.yaml") {
            // Its `when` conditions read `{pr_size}`.
            args.extend(["--params", "pr_size=small"]);
        }
        let created = project.baton(&args);
        if created.code != 0 {
            // A fragment, not a runnable workflow.
            continue;
        }
        let created: Value = serde_json::from_str(&created.stdout).expect("JSON");
        let id = created["run_id"].as_str().expect("id").to_owned();
        let driven = drive(&project, &id, &|_, _| None);
        match driven.status.as_str() {
            "success" => succeeded.push(file.clone()),
            other => panic!("{file}: ended {other} after {:?}", driven.handed),
        }
    }
    assert!(succeeded.len() >= 30, "driven: {succeeded:?}");
}

#[test]
fn an_agent_fan_out_is_handed_out_item_by_item_within_its_max_parallel() {
    let project = Project::new();
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}  - name: src\n    kind: execute\n    description: d\n    executor: inline\n    script: |\n      printf '{{\"items\": [{{\"id\": \"a\"}}, {{\"id\": \"b\"}}, {{\"id\": \"c\"}}]}}' > outputs/src.json\n    writes_to: [src.json]\n  - name: fan\n    kind: validate\n    description: Review {{id}}.\n    agent: {{role: reviewer}}\n    depends_on: [src]\n    reads_from: [src]\n    fan_out: {{source: src, field: items, key: id, mode: agent, max_parallel: 2}}\n    writes_to: ['findings/{{id}}.json']\n"
        ),
    );
    let (id, _) = create(&project, "wf.yaml");
    // The script ran in `next`; two of the three children are out at once.
    let first = project.json(&["next", &id, "--json"]);
    assert_eq!(first.as_array().map(Vec::len), Some(2), "{first}");
    // A resume names the children out, spawning nothing.
    let resume = project.baton(&["resume", &id]);
    assert_eq!(resume.code, 0, "{}", resume.stderr);
    let child = first[0]["stage"].as_str().expect("label");
    assert!(child.starts_with("fan["), "{child}");
    assert!(resume.stderr.contains(child), "{}", resume.stderr);
    let driven = drive(&project, &id, &|_, _| None);
    assert_eq!(driven.status, "success", "{:?}", driven.handed);
    let mut children = driven.handed.clone();
    children.sort();
    assert_eq!(children.len(), 3, "{children:?}");
}

#[test]
fn an_agent_fan_out_that_edits_the_checkout_is_handed_out_one_child_at_a_time() {
    let project = Project::new();
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}  - name: src\n    kind: execute\n    description: d\n    executor: inline\n    script: |\n      printf '{{\"items\": [{{\"id\": \"a\"}}, {{\"id\": \"b\"}}]}}' > outputs/src.json\n    writes_to: [src.json]\n  - name: fix\n    kind: execute\n    description: Fix {{id}}.\n    agent: {{role: writer, access: read-write}}\n    depends_on: [src]\n    reads_from: [src]\n    fan_out: {{source: src, field: items, key: id, mode: agent, max_parallel: 2}}\n    writes_to: ['fixed/{{id}}.md']\n"
        ),
    );
    let (id, _) = create(&project, "wf.yaml");
    // Two children would edit the same checkout under each other: one is
    // out, whatever the fan-out's own limit, as when baton drives the run.
    let first = project.json(&["next", &id, "--json"]);
    assert_eq!(first.as_array().map(Vec::len), Some(1), "{first}");
    let driven = drive(&project, &id, &|_, _| None);
    assert_eq!(driven.status, "success", "{:?}", driven.handed);
    assert_eq!(driven.handed.len(), 2, "{:?}", driven.handed);
}

#[test]
fn a_script_left_running_by_a_killed_next_runs_again_alone() {
    let project = Project::new();
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}{}",
            crate::project::stage(
                "slow",
                "echo start >> \"$BATON_PROJECT_DIR/runs.log\"\nsleep 3\necho end >> \"$BATON_PROJECT_DIR/runs.log\"\necho done > outputs/slow.txt",
                "    writes_to: [slow.txt]\n"
            )
        ),
    );
    let (id, _) = create(&project, "wf.yaml");
    let log = project.path().join("runs.log");
    let mut first = project
        .command(&["next", &id, "--json"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("next starts");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !log.is_file() {
        assert!(
            std::time::Instant::now() < deadline,
            "the script never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    first.kill().expect("kill -9 of next");
    first.wait().expect("reaped");

    let again = project.baton(&["next", &id, "--json"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    // The first script's process was killed, not left to finish beside the
    // second: one end for two starts, even after the first would have ended.
    std::thread::sleep(std::time::Duration::from_secs(4));
    let text = std::fs::read_to_string(&log).expect("log");
    assert_eq!(text.matches("start").count(), 2, "{text}");
    assert_eq!(text.matches("end").count(), 1, "{text}");
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "success", "{status}");
}

#[test]
fn a_pushed_back_gate_is_handed_out_again_with_the_comment() {
    let project = Project::new();
    let agent_stage = |name: &str, extra: &str| {
        format!(
            "  - name: {name}\n    kind: execute\n    description: Write {name}.\n    agent: {{role: planner}}\n    writes_to: [{name}.md]\n{extra}"
        )
    };
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}{}{}",
            agent_stage("draft", "    human_gate: true\n"),
            agent_stage(
                "after",
                "    depends_on: [draft]\n    reads_from: [draft]\n"
            )
        ),
    );
    let (id, _) = create(&project, "wf.yaml");
    let hand_out_draft = || {
        let ready = project.json(&["next", &id, "--json"]);
        let item = &ready[0];
        assert_eq!(item["stage"], "draft", "{ready}");
        let prompt = item["prompt"].as_str().expect("prompt").to_owned();
        let dispatch: Value = serde_json::from_str(
            &std::fs::read_to_string(item["dispatch_file"].as_str().expect("file"))
                .expect("dispatch"),
        )
        .expect("dispatch JSON");
        let workspace = PathBuf::from(dispatch["workspace_dir"].as_str().expect("workspace"));
        assert_eq!(agent(&workspace, &prompt, None), 0);
        let complete = project.baton(&["complete", &id, "draft"]);
        assert_eq!(complete.code, 0, "{}", complete.stderr);
        assert_eq!(
            project.json(&["next", &id, "--json"]),
            Value::Array(Vec::new())
        );
        prompt
    };
    assert!(!hand_out_draft().contains("Pushed back"));
    let pushed = project.baton(&[
        "gate",
        "push-back",
        &id,
        "draft",
        "--as",
        "alice",
        "--comment",
        "name the tables",
    ]);
    assert_eq!(pushed.code, 0, "{}", pushed.stderr);
    assert!(
        pushed
            .stderr
            .contains(&format!("`baton next {id}` hands 'draft' out again")),
        "{}",
        pushed.stderr
    );
    let again = hand_out_draft();
    assert!(
        again.contains("## Pushed back at the gate") && again.contains("> name the tables\n"),
        "{again}"
    );
    let driven = drive(&project, &id, &|_, _| None);
    assert_eq!(driven.status, "success");
    assert_eq!(driven.gates, ["draft"]);
    assert_eq!(driven.handed, ["after"]);
}

/// A push-back killed after it was recorded, before the stage was set back
/// (or made while another call held the run): `next` sets the stage back
/// and hands it out again with the comment.
#[test]
fn next_acts_on_a_push_back_that_was_recorded_and_not_acted_on() {
    let project = Project::new();
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}  - name: draft\n    kind: execute\n    description: Write draft.\n    agent: {{role: planner}}\n    writes_to: [draft.md]\n    human_gate: true\n"
        ),
    );
    let (id, workspace) = create(&project, "wf.yaml");
    let hand_out = || {
        let ready = project.json(&["next", &id, "--json"]);
        assert_eq!(ready[0]["stage"], "draft", "{ready}");
        let prompt = ready[0]["prompt"].as_str().expect("prompt").to_owned();
        assert_eq!(agent(&workspace, &prompt, None), 0);
        let complete = project.baton(&["complete", &id, "draft"]);
        assert_eq!(complete.code, 0, "{}", complete.stderr);
        prompt
    };
    hand_out();
    let args = [
        "gate",
        "push-back",
        &id,
        "draft",
        "--as",
        "alice",
        "--comment",
        "shorter",
    ];
    let crashed = baton_test_support::run_bounded_with(
        Path::new(env!("CARGO_BIN_EXE_baton")),
        project.path(),
        &args,
        &[("BATON_FAILPOINT".to_owned(), "store-written:1".to_owned())],
        std::time::Duration::from_secs(60),
    );
    assert_ne!(crashed.code, 0, "the push-back was cut short");
    let gates = project.json(&["gate", "list", &id, "--json"]);
    assert_eq!(gates[0]["status"], "pushed_back", "{gates}");
    let again = hand_out();
    assert!(again.contains("> shorter\n"), "{again}");
}

/// `baton cancel` while a `next` runs a script: the script is stopped, the
/// run ends cancelled (the stage handed out with it interrupted), and the
/// cancel returns once it has, as for a run baton drives.
#[test]
fn a_cancel_stops_the_script_a_next_runs_and_ends_the_run() {
    let project = Project::new();
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}  - name: a\n    kind: propose\n    description: d\n    agent: {{role: writer}}\n    writes_to: [a.md]\n{}",
            crate::project::stage(
                "slow",
                "echo start >> \"$BATON_PROJECT_DIR/runs.log\"\nsleep 60\necho end >> \"$BATON_PROJECT_DIR/runs.log\"",
                ""
            )
        ),
    );
    let (id, _) = create(&project, "wf.yaml");
    let log = project.path().join("runs.log");
    let next = project
        .command(&["next", &id, "--json"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("next starts");
    crate::project::wait_for(
        "the script's start",
        std::time::Duration::from_secs(30),
        || log.is_file(),
    );
    let cancelled = project.baton(&["cancel", &id]);
    assert_eq!(cancelled.code, 0, "{}", cancelled.stderr);
    let said = format!("{}{}", cancelled.stdout, cancelled.stderr);
    assert!(
        said.contains("cancelled run")
            && !said.contains("has not stopped")
            && said.contains(&format!("`baton rerun {id} STAGE`")),
        "{said}"
    );
    // `next` itself ended the run, not the cancel after it let go.
    let next = next.wait_with_output().expect("next ends");
    let told = String::from_utf8_lossy(&next.stderr);
    assert!(
        next.status.success() && told.contains("ended cancelled"),
        "{told}"
    );
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "cancelled", "{status}");
    assert_eq!(std::fs::read_to_string(&log).expect("log"), "start\n");
}
