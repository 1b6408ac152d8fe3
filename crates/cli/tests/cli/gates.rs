//! `baton gate …` on real runs: list, show, approve then resume, reject,
//! edits of JSON and markdown lists, approvals going stale, `--wait-gates`
//! and many people deciding at once.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::baton;

/// A scratch project with a store of its own and a workflow `wf.yaml`.
struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    fn new(workflow: &str) -> Project {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("wf.yaml"), workflow).expect("write");
        Project { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn baton(&self, args: &[&str]) -> baton_test_support::Run {
        baton(self.path(), args)
    }

    fn json(&self, args: &[&str]) -> Value {
        let run = self.baton(args);
        serde_json::from_str(&run.stdout).unwrap_or_else(|error| {
            panic!(
                "{args:?}: {error}\nstdout: {}\nstderr: {}",
                run.stdout, run.stderr
            )
        })
    }

    /// Starts a run that stops at the gate; returns its id.
    fn run_to_gate(&self) -> String {
        let run = self.baton(&["run", "wf.yaml", "--json"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let outcome: Value = serde_json::from_str(&run.stdout).expect("json");
        assert_eq!(outcome["status"], "awaiting_human", "{}", run.stderr);
        outcome["run_id"].as_str().expect("run_id").to_owned()
    }

    fn workspace(&self, run: &str) -> PathBuf {
        let status = self.json(&["status", run, "--json"]);
        PathBuf::from(status["workspace"].as_str().expect("workspace"))
    }

    fn read(&self, run: &str, path: &str) -> String {
        std::fs::read_to_string(self.workspace(run).join(path)).expect("read an output")
    }

    fn spawn(&self, args: &[&str]) -> Child {
        #[expect(
            clippy::disallowed_methods,
            reason = "tests run baton in the background"
        )]
        Command::new(env!("CARGO_BIN_EXE_baton"))
            .args(args)
            .current_dir(self.path())
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("baton starts")
    }
}

const HEADER: &str = "name: t\nversion: '1'\ndescription: d\ntrigger: {source: manual}\nstages:\n";

/// A gate `review` writing `outputs/plan.json` (an object with `items`),
/// then `after`, which copies it.
fn json_workflow() -> String {
    format!(
        "{HEADER}  - name: review
    kind: execute
    description: d
    executor: inline
    script: |
      printf '%s\\n' '{{\"title\": \"plan\", \"items\": [{{\"id\": \"a\"}}, {{\"id\": \"b\"}}, {{\"id\": \"c\"}}]}}' > outputs/plan.json
    writes_to: [outputs/plan.json]
    human_gate: true
  - name: after
    kind: execute
    description: d
    executor: inline
    script: cp outputs/plan.json outputs/final.json
    depends_on: [review]
    writes_to: [outputs/final.json]
"
    )
}

fn gate_of<'a>(list: &'a Value, run: &str) -> &'a Value {
    list.as_array()
        .expect("a list")
        .iter()
        .find(|gate| gate["run_id"] == run)
        .unwrap_or_else(|| panic!("no gate of {run} in {list}"))
}

fn items(project: &Project, run: &str) -> Vec<Value> {
    let text = project.read(run, "outputs/plan.json");
    let value: Value = serde_json::from_str(&text).expect("the plan stays JSON");
    assert_eq!(value["title"], "plan", "other keys are kept: {text}");
    value["items"].as_array().expect("items").clone()
}

#[test]
fn approve_then_resume_runs_to_the_end() {
    let project = Project::new(&json_workflow());
    let run = project.baton(&["run", "wf.yaml"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let id = run
        .stdout
        .split_whitespace()
        .next()
        .expect("run id")
        .to_owned();
    for hint in [
        format!("baton gate show {id} review"),
        format!("baton gate approve {id} review"),
        format!("baton resume {id}"),
    ] {
        assert!(
            run.stderr.contains(&hint),
            "{hint} missing from:\n{}",
            run.stderr
        );
    }

    let list = project.json(&["gate", "list", "--json"]);
    let gate = gate_of(&list, &id);
    assert_eq!(
        (gate["stage"].as_str(), gate["status"].as_str()),
        (Some("review"), Some("awaiting"))
    );
    assert_eq!(gate["sha256"].as_str().map(str::len), Some(64));

    let shown = project.json(&["gate", "show", &id, "review", "--json"]);
    assert_eq!(shown["outputs"][0]["path"], "outputs/plan.json");
    assert_eq!(shown["outputs"][0]["list"]["kind"], "json");
    assert_eq!(
        shown["outputs"][0]["list"]["items"],
        serde_json::json!([r#"{"id":"a"}"#, r#"{"id":"b"}"#, r#"{"id":"c"}"#])
    );
    let table = project.baton(&["gate", "show", &id, "review"]);
    assert_eq!(table.code, 0, "{}", table.stderr);
    assert!(
        table
            .stdout
            .contains("1. {\"id\":\"a\"}\n2. {\"id\":\"b\"}"),
        "{}",
        table.stdout
    );
    assert!(
        table.stdout.contains("status: awaiting"),
        "{}",
        table.stdout
    );

    // Not a gate, unknown stage, unknown run.
    let wrong = project.baton(&["gate", "approve", &id, "after"]);
    assert_eq!(wrong.code, 2);
    assert!(
        wrong.stderr.contains("not a human gate"),
        "{}",
        wrong.stderr
    );
    let wrong = project.baton(&["gate", "approve", &id, "nope"]);
    assert_eq!(wrong.code, 2);
    assert!(
        wrong.stderr.contains("no stage named 'nope'"),
        "{}",
        wrong.stderr
    );
    assert_eq!(project.baton(&["gate", "list", "no-such-run"]).code, 1);

    let approve = project.baton(&[
        "gate",
        "approve",
        &id,
        "review",
        "--as",
        "alice",
        "--comment",
        "looks right",
        "--json",
    ]);
    assert_eq!(approve.code, 0, "{}", approve.stderr);
    let decided: Value = serde_json::from_str(&approve.stdout).expect("json");
    assert_eq!(
        (
            decided["decision"].as_str(),
            decided["decided_by"].as_str(),
            decided["comment"].as_str()
        ),
        (Some("approve"), Some("alice"), Some("looks right"))
    );
    let again = project.baton(&["gate", "reject", &id, "review", "--as", "bob"]);
    assert_eq!(again.code, 3, "{}", again.stderr);
    assert!(
        again.stderr.contains("already approved by alice at "),
        "{}",
        again.stderr
    );
    let gate = project.json(&["gate", "list", &id, "--json"]);
    assert_eq!(gate[0]["status"], "approved");
    assert_eq!(gate[0]["decided_by"], "alice");

    let resume = project.baton(&["resume", &id, "--json"]);
    assert_eq!(resume.code, 0, "{}", resume.stderr);
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "success", "{status}");
    assert_eq!(
        project.read(&id, "outputs/final.json"),
        project.read(&id, "outputs/plan.json")
    );
    assert_eq!(status["gates"][0]["decided_by"], "alice", "{status}");
}

#[test]
fn reject_ends_the_run_with_the_comment() {
    let project = Project::new(&json_workflow());
    let id = project.run_to_gate();
    let reject = project.baton(&[
        "gate",
        "reject",
        &id,
        "review",
        "--as",
        "bob",
        "--comment",
        "wrong scope",
    ]);
    assert_eq!(reject.code, 0, "{}", reject.stderr);
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "rejected", "{status}");
    assert!(status["finished_at"].is_string(), "{status}");
    assert_eq!(
        status["error"],
        "gate 'review' rejected by bob: wrong scope"
    );

    let resume = project.baton(&["resume", &id]);
    assert_eq!(resume.code, 2, "{}", resume.stderr);
    assert!(
        resume.stderr.contains("rejected by bob: wrong scope"),
        "{}",
        resume.stderr
    );
    let after = project.json(&["status", &id, "--json"]);
    assert_eq!(
        after["stages"][1]["status"], "pending",
        "nothing ran after the gate"
    );
    let late = project.baton(&["gate", "approve", &id, "review"]);
    assert_eq!(late.code, 3, "{}", late.stderr);
    assert!(
        late.stderr.contains("already rejected by bob"),
        "{}",
        late.stderr
    );
}

#[test]
fn drop_edit_add_rewrite_a_json_list() {
    let project = Project::new(&json_workflow());
    let id = project.run_to_gate();
    let ok = |args: &[&str]| {
        let run = project.baton(args);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        run
    };
    ok(&["gate", "drop", &id, "review", "2"]);
    ok(&["gate", "edit", &id, "review", "1", "priority=high"]);
    ok(&["gate", "edit", &id, "review", "2", "score=3"]);
    let added = ok(&[
        "gate",
        "add",
        &id,
        "review",
        "check the migration",
        "--json",
    ]);
    let added: Value = serde_json::from_str(&added.stdout).expect("json");
    assert_eq!(added["items"].as_array().map(Vec::len), Some(3));
    ok(&["gate", "add", &id, "review", r#"{"id": "d"}"#]);
    assert_eq!(
        items(&project, &id),
        serde_json::json!([
            {"id": "a", "priority": "high"},
            {"id": "c", "score": 3},
            {"text": "check the migration"},
            {"id": "d"},
        ])
        .as_array()
        .expect("list")
        .clone()
    );

    let out_of_range = project.baton(&["gate", "drop", &id, "review", "9"]);
    assert_eq!(out_of_range.code, 2);
    assert!(
        out_of_range
            .stderr
            .contains("there is no item 9: the list has 4 items (numbers 1 to 4)"),
        "{}",
        out_of_range.stderr
    );
    let malformed = project.baton(&["gate", "edit", &id, "review", "1", "priority"]);
    assert_eq!(malformed.code, 2);
    assert!(
        malformed.stderr.contains("FIELD=VALUE"),
        "{}",
        malformed.stderr
    );
    assert_eq!(items(&project, &id).len(), 4, "failed edits change nothing");

    // The edit is the recorded output now: resuming does not rerun the
    // gate, and its approval covers the edited list.
    ok(&["gate", "approve", &id, "review"]);
    ok(&["resume", &id]);
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "success");
    assert_eq!(
        status["stages"][0]["attempts"], 1,
        "the gate did not run again"
    );
    let last: Value = serde_json::from_str(&project.read(&id, "outputs/final.json")).expect("json");
    assert_eq!(last["items"][3]["id"], "d");
}

#[test]
fn drop_edit_add_rewrite_a_markdown_list() {
    let workflow = format!(
        "{HEADER}  - name: notes
    kind: execute
    description: d
    executor: inline
    script: |
      printf '%s\\n' 'no list here' > outputs/readme.txt
      printf '# Steps\\n\\n1. fetch\\n2. build\\n   with care\\n3. test\\n\\nDone.\\n' > outputs/steps.md
    writes_to: [outputs/readme.txt, outputs/steps.md]
    human_gate: true
"
    );
    let project = Project::new(&workflow);
    let id = project.run_to_gate();
    let shown = project.json(&["gate", "show", &id, "notes", "--json"]);
    let outputs = shown["outputs"].as_array().expect("outputs");
    let steps = outputs
        .iter()
        .find(|output| output["path"] == "outputs/steps.md")
        .expect("steps.md");
    assert_eq!(steps["list"]["kind"], "markdown");
    assert_eq!(
        steps["list"]["items"],
        serde_json::json!(["fetch", "build", "test"])
    );
    for args in [
        vec!["drop", "2"],
        vec!["edit", "1", "text=fetch everything"],
        vec!["add", "ship"],
    ] {
        let mut full = vec!["gate", args[0], &id, "notes"];
        full.extend(&args[1..]);
        let run = project.baton(&full);
        assert_eq!(run.code, 0, "{full:?}: {}", run.stderr);
    }
    assert_eq!(
        project.read(&id, "outputs/steps.md"),
        "# Steps\n\n1. fetch everything\n2. test\n3. ship\n\nDone.\n"
    );
    let field = project.baton(&["gate", "edit", &id, "notes", "1", "title=x"]);
    assert_eq!(field.code, 2);
    assert!(
        field.stderr.contains("one field, `text`"),
        "{}",
        field.stderr
    );
}

#[test]
fn an_edit_after_the_approval_makes_it_stale() {
    let project = Project::new(&json_workflow());
    let id = project.run_to_gate();
    assert_eq!(
        project
            .baton(&["gate", "approve", &id, "review", "--as", "alice"])
            .code,
        0
    );
    assert_eq!(project.baton(&["gate", "drop", &id, "review", "1"]).code, 0);
    let list = project.json(&["gate", "list", &id, "--json"]);
    assert_eq!(list[0]["status"], "stale", "{list}");

    let resume = project.baton(&["resume", &id, "--json"]);
    assert_eq!(resume.code, 0, "{}", resume.stderr);
    let outcome: Value = serde_json::from_str(&resume.stdout).expect("json");
    assert_eq!(
        outcome["status"], "awaiting_human",
        "the run stops at the gate again"
    );
    assert_eq!(outcome["gate"], "review");

    assert_eq!(
        project
            .baton(&["gate", "approve", &id, "review", "--as", "bob"])
            .code,
        0
    );
    assert_eq!(project.baton(&["resume", &id]).code, 0);
    assert_eq!(
        project.json(&["status", &id, "--json"])["status"],
        "success"
    );
}

#[test]
fn wait_gates_continues_when_another_process_approves() {
    let project = Project::new(&json_workflow());
    let mut child = project.spawn(&["run", "wf.yaml", "--wait-gates", "--json"]);
    // The gate is listed as awaiting from the run's creation on; the run
    // itself shows `awaiting_human` once the waiting drive has committed
    // reaching it (until its first commit a new run shows `pending`, and
    // `running` while the stage before the gate's decision runs).
    let deadline = Instant::now() + Duration::from_secs(60);
    let id = loop {
        let list = project.json(&["gate", "list", "--json"]);
        if let Some(gate) = list.as_array().and_then(|gates| gates.first()) {
            assert_eq!(gate["status"], "awaiting", "{gate}");
            assert!(
                ["pending", "running", "awaiting_human"]
                    .contains(&gate["run_status"].as_str().unwrap_or("")),
                "{gate}"
            );
            if gate["run_status"] == "awaiting_human" {
                break gate["run_id"].as_str().expect("run_id").to_owned();
            }
        }
        assert!(Instant::now() < deadline, "the run never reached its gate");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(child.try_wait().expect("poll").is_none(), "the run waits");
    let approved = Instant::now();
    assert_eq!(project.baton(&["gate", "approve", &id, "review"]).code, 0);
    let status = loop {
        if let Some(status) = child.try_wait().expect("poll") {
            break status;
        }
        assert!(
            approved.elapsed() < Duration::from_secs(30),
            "the run did not continue after the approval"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = child.wait_with_output().expect("output");
    assert_eq!(
        status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let outcome: Value = serde_json::from_slice(&output.stdout).expect("json");
    assert_eq!(outcome["status"], "success");
    assert_eq!(
        project.json(&["status", &id, "--json"])["status"],
        "success"
    );
}

#[test]
fn wait_gates_ends_rejected_when_another_process_rejects() {
    let project = Project::new(&json_workflow());
    let child = project.spawn(&["run", "wf.yaml", "--wait-gates"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let id = loop {
        let list = project.json(&["gate", "list", "--json"]);
        if let Some(gate) = list.as_array().and_then(|gates| gates.first()) {
            break gate["run_id"].as_str().expect("run_id").to_owned();
        }
        assert!(Instant::now() < deadline, "the gate never showed up");
        std::thread::sleep(Duration::from_millis(100));
    };
    let reject = project.baton(&[
        "gate",
        "reject",
        &id,
        "review",
        "--as",
        "eve",
        "--comment",
        "no",
    ]);
    assert_eq!(reject.code, 0, "{}", reject.stderr);
    let output = child.wait_with_output().expect("output");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("gate 'review' rejected by eve: no"),
        "{stderr}"
    );
    assert_eq!(
        project.json(&["status", &id, "--json"])["status"],
        "rejected"
    );
}

#[test]
fn ten_people_deciding_at_once_make_one_decision() {
    let project = Project::new(&json_workflow());
    for round in 0..3 {
        let id = project.run_to_gate();
        let children: Vec<Child> = (0..10)
            .map(|person| {
                let verb = if person % 2 == 0 { "approve" } else { "reject" };
                let name = format!("user{person}");
                project.spawn(&["gate", verb, &id, "review", "--as", &name])
            })
            .collect();
        let codes: Vec<Option<i32>> = children
            .into_iter()
            .map(|child| child.wait_with_output().expect("output").status.code())
            .collect();
        assert_eq!(
            codes.iter().filter(|code| **code == Some(0)).count(),
            1,
            "round {round}: {codes:?}"
        );
        assert_eq!(
            codes.iter().filter(|code| **code == Some(3)).count(),
            9,
            "round {round}: {codes:?}"
        );
        let gate = project.json(&["gate", "list", &id, "--json"]);
        assert!(
            matches!(gate[0]["status"].as_str(), Some("approved" | "rejected")),
            "{gate}"
        );
    }
}

#[test]
fn racing_edits_lose_nothing() {
    let project = Project::new(&json_workflow());
    let id = project.run_to_gate();
    let children: Vec<Child> = (0..10)
        .map(|person| project.spawn(&["gate", "add", &id, "review", &format!("item {person}")]))
        .collect();
    let outputs: Vec<_> = children
        .into_iter()
        .map(|child| child.wait_with_output().expect("output"))
        .collect();
    let won = outputs
        .iter()
        .filter(|output| output.status.code() == Some(0))
        .count();
    for output in &outputs {
        let stderr = String::from_utf8_lossy(&output.stderr);
        match output.status.code() {
            Some(0) => {}
            Some(3) => assert!(stderr.contains("changed meanwhile"), "{stderr}"),
            other => panic!("{other:?}: {stderr}"),
        }
    }
    assert!(won >= 1);
    // Every edit that said it succeeded is in the file, and no other.
    assert_eq!(items(&project, &id).len(), 3 + won);
    // The recorded hash follows the file: a resume does not rerun the gate.
    assert_eq!(project.baton(&["gate", "approve", &id, "review"]).code, 0);
    assert_eq!(project.baton(&["resume", &id]).code, 0);
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "success");
    assert_eq!(status["stages"][0]["attempts"], 1);
}

/// `baton gate drop` killed at every point of its work (written, swapped
/// in the store, renamed into place), then an approval and a resume: the
/// gate stage does not run again, and what the person did survives — the
/// dropped item stays dropped once the store took the edit, and the
/// approval holds.
#[test]
fn a_crash_at_every_point_of_a_gate_edit_keeps_the_edit_and_the_approval() {
    for (point, edited) in [
        ("gate-edit:written", false),
        ("gate-edit:swapped", true),
        ("gate-edit:renamed", true),
    ] {
        let project = Project::new(&json_workflow());
        let id = project.run_to_gate();
        let crashed = baton_test_support::run_bounded_with(
            Path::new(env!("CARGO_BIN_EXE_baton")),
            project.path(),
            &["gate", "drop", &id, "review", "2"],
            &[("BATON_FAILPOINT".to_owned(), point.to_owned())],
            Duration::from_secs(60),
        );
        assert_ne!(crashed.code, 0, "{point}: the edit was cut short");
        let approved = project.baton(&["gate", "approve", &id, "review"]);
        assert_eq!(approved.code, 0, "{point}: {}", approved.stderr);
        let resumed = project.baton(&["resume", &id]);
        assert_eq!(resumed.code, 0, "{point}: {}", resumed.stderr);
        let status = project.json(&["status", &id, "--json"]);
        assert_eq!(status["status"], "success", "{point}: {status}");
        assert_eq!(
            status["stages"][0]["attempts"], 1,
            "{point}: the gate ran again"
        );
        let workspace = PathBuf::from(status["workspace"].as_str().expect("workspace"));
        let final_list =
            std::fs::read_to_string(workspace.join("outputs/final.json")).expect("final.json");
        let expected = if edited {
            ["a", "c"].as_slice()
        } else {
            ["a", "b", "c"].as_slice()
        };
        let ids: Vec<String> = serde_json::from_str::<Value>(&final_list).expect("json")["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|item| item["id"].as_str().expect("id").to_owned())
            .collect();
        assert_eq!(ids, expected, "{point}");
        let leftovers = std::fs::read_dir(workspace.join("outputs"))
            .expect("outputs")
            .flatten()
            .filter(|entry| entry.file_name().to_string_lossy().contains("gate-edit"))
            .count();
        assert_eq!(leftovers, 0, "{point}: a temporary was left");
    }
}

/// Through the driver protocol: an approved gate's output edited by a
/// `baton gate drop` killed after the store took the edit, before the file
/// was renamed into place. `next` finishes the edit before it reads the
/// gate, so the approval is stale and nothing after the gate runs on the
/// text from before the edit.
#[test]
fn next_finishes_a_gate_edit_a_kill_cut_short_before_it_reads_the_gate() {
    let project = Project::new(&json_workflow());
    let created = project.json(&["run", "wf.yaml", "--driver", "external", "--json"]);
    let id = created["run_id"].as_str().expect("run id").to_owned();
    assert_eq!(
        project.json(&["next", &id, "--json"]),
        serde_json::json!([])
    );
    assert_eq!(project.baton(&["gate", "approve", &id, "review"]).code, 0);
    let crashed = baton_test_support::run_bounded_with(
        Path::new(env!("CARGO_BIN_EXE_baton")),
        project.path(),
        &["gate", "drop", &id, "review", "2"],
        &[("BATON_FAILPOINT".to_owned(), "gate-edit:swapped".to_owned())],
        Duration::from_secs(60),
    );
    assert_ne!(crashed.code, 0, "the edit was cut short");
    let next = project.baton(&["next", &id, "--json"]);
    assert_eq!(next.code, 0, "{}", next.stderr);
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "awaiting_human", "{status}");
    let workspace = project.workspace(&id);
    assert!(
        !workspace.join("outputs/final.json").exists(),
        "`after` ran"
    );
    let plan: Value = serde_json::from_str(&project.read(&id, "outputs/plan.json")).expect("JSON");
    assert_eq!(plan["items"].as_array().map(Vec::len), Some(2), "{plan}");
}
