//! `baton gate push-back`: the gate's stage runs again with the
//! reviewer's comment in its agent's prompt, then the gate waits for a
//! decision on the new outputs — under a `run --wait-gates` that waits at
//! the gate, and through `resume` when nobody drives the run.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::project::{HEADER, Project, run_id, stage, wait_bounded, wait_for};

const COMMENT: &str = "split step 3 into a migration\nand a backfill";

/// A fake agent stage `draft` behind a gate (it keeps the prompt it was
/// given in `seen.md` of the workspace), then a script stage `after`.
fn project() -> Project {
    let project = Project::new();
    let fake = Path::new(env!("CARGO_BIN_EXE_baton")).with_file_name("baton-fake-agent");
    project.write(
        "baton.toml",
        &format!(
            "[agents.default]\nprofile = \"fake\"\n\n[profiles.fake]\nprogram = \"{}\"\nprompt = {{ via = \"stdin\" }}\nenv_passthrough = [\"PATH\", \"HOME\"]\nenv = {{ BATON_FAKE_WITNESS = \"{}\" }}\n",
            fake.display(),
            project.path().join("witness.txt").display()
        ),
    );
    let draft = "  - name: draft\n    kind: execute\n    description: |\n      Write the plan.\n      FAKE-AGENT: write-prompt $BATON_WORKSPACE/seen.md\n      FAKE-AGENT: write-listed\n    agent: {role: planner, access: read-write}\n    writes_to: [draft.md]\n    human_gate: true\n";
    let after = stage(
        "after",
        "cp outputs/draft.md outputs/final.md",
        "    depends_on: [draft]\n    writes_to: [final.md]\n",
    );
    project.write("wf.yaml", &format!("{HEADER}{draft}{after}"));
    project
}

fn attempts_of_draft(project: &Project) -> usize {
    project
        .witness()
        .iter()
        .filter(|line| line.split(' ').nth(1) == Some("draft"))
        .count()
}

fn gate(project: &Project, id: &str) -> Value {
    let list = project.json(&["gate", "list", id, "--json"]);
    list.as_array()
        .and_then(|gates| gates.first())
        .cloned()
        .unwrap_or_else(|| panic!("no gate in {list}"))
}

fn seen_prompt(project: &Project, id: &str) -> String {
    let status = project.json(&["status", id, "--json"]);
    let workspace = status["workspace"].as_str().expect("workspace");
    std::fs::read_to_string(Path::new(workspace).join("seen.md"))
        .expect("the agent kept its prompt")
}

fn stage_status(project: &Project, id: &str, name: &str) -> String {
    let status = project.json(&["status", id, "--json"]);
    status["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .find(|stage| stage["stage"] == name)
        .and_then(|stage| stage["status"].as_str())
        .expect("the stage")
        .to_owned()
}

/// What a pushed-back prompt says: who, and the comment quoted line by line.
fn assert_pushed_back(prompt: &str) {
    assert_eq!(
        prompt.matches("## Pushed back at the gate").count(),
        1,
        "{prompt}"
    );
    assert!(prompt.contains("alice reviewed"), "{prompt}");
    assert!(
        prompt.contains("> split step 3 into a migration\n> and a backfill\n"),
        "{prompt}"
    );
    assert!(
        prompt.contains("Write the plan."),
        "the task is still there: {prompt}"
    );
}

#[test]
fn a_push_back_runs_the_stage_again_on_resume_with_the_comment_then_the_gate_waits() {
    let project = project();
    let run = project.baton(&["run", "wf.yaml", "--json"]);
    let id = run_id(&run);
    assert_eq!(
        project.json(&["status", &id, "--json"])["status"],
        "awaiting_human"
    );
    assert!(!seen_prompt(&project, &id).contains("Pushed back"));

    // A push-back without a comment is refused, and records nothing.
    let bare = project.baton(&["gate", "push-back", &id, "draft", "--as", "alice"]);
    assert_ne!(bare.code, 0, "{}", bare.stderr);
    assert!(bare.stderr.contains("needs a comment"), "{}", bare.stderr);
    assert_eq!(gate(&project, &id)["status"], "awaiting");

    let pushed = project.baton(&[
        "gate",
        "push-back",
        &id,
        "draft",
        "--as",
        "alice",
        "--comment",
        COMMENT,
    ]);
    assert_eq!(pushed.code, 0, "{}", pushed.stderr);
    assert!(
        pushed
            .stderr
            .contains(&format!("`baton resume {id}` runs 'draft' again")),
        "{}",
        pushed.stderr
    );
    assert_eq!(
        project.json(&["status", &id, "--json"])["status"],
        "pending"
    );
    assert_eq!(stage_status(&project, &id, "draft"), "pending");
    // Decided once: the same outputs cannot be decided on again.
    let again = project.baton(&["gate", "approve", &id, "draft"]);
    assert_ne!(again.code, 0, "{}", again.stderr);

    let resumed = project.baton(&["resume", &id, "--json"]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert_eq!(
        project.json(&["status", &id, "--json"])["status"],
        "awaiting_human"
    );
    assert_eq!(attempts_of_draft(&project), 2, "{:?}", project.witness());
    assert_pushed_back(&seen_prompt(&project, &id));
    let waiting = gate(&project, &id);
    assert_eq!(waiting["status"], "awaiting", "{waiting}");
    assert_eq!(waiting["attempt"], 2, "{waiting}");
    assert_eq!(stage_status(&project, &id, "after"), "pending");

    assert_eq!(
        project
            .baton(&["gate", "approve", &id, "draft", "--as", "bob"])
            .code,
        0
    );
    let finished = project.baton(&["resume", &id, "--json"]);
    assert_eq!(finished.code, 0, "{}", finished.stderr);
    assert_eq!(
        project.json(&["status", &id, "--json"])["status"],
        "success"
    );
    assert_eq!(
        attempts_of_draft(&project),
        2,
        "approved outputs are not rewritten"
    );
}

#[test]
fn a_run_waiting_at_the_gate_runs_the_pushed_back_stage_again_and_waits_for_the_new_outputs() {
    let project = project();
    let mut child = project.spawn(&["run", "wf.yaml", "--wait-gates"]);
    let id = || project.run_ids().first().cloned();
    wait_for(
        "the run to wait at its gate",
        Duration::from_secs(60),
        || {
            id().is_some_and(|id| {
                project.json(&["status", &id, "--json"])["status"] == "awaiting_human"
            })
        },
    );
    let id = id().expect("the run");
    let pushed = project.baton(&[
        "gate",
        "push-back",
        &id,
        "draft",
        "--as",
        "alice",
        "--comment",
        COMMENT,
    ]);
    assert_eq!(pushed.code, 0, "{}", pushed.stderr);
    assert!(
        pushed
            .stderr
            .contains("the run waiting at the gate runs 'draft' again"),
        "{}",
        pushed.stderr
    );
    wait_for(
        "the stage to run again and its gate to wait",
        Duration::from_secs(60),
        || {
            let gate = gate(&project, &id);
            gate["attempt"] == 2
                && gate["status"] == "awaiting"
                && gate["run_status"] == "awaiting_human"
        },
    );
    assert!(
        child.try_wait().expect("poll").is_none(),
        "the run still waits"
    );
    assert_eq!(attempts_of_draft(&project), 2, "{:?}", project.witness());
    assert_pushed_back(&seen_prompt(&project, &id));
    assert_eq!(
        project
            .baton(&["gate", "approve", &id, "draft", "--as", "bob"])
            .code,
        0
    );
    assert_eq!(
        wait_bounded(&mut child, "the run to finish", Duration::from_secs(60)),
        0
    );
    assert_eq!(
        project.json(&["status", &id, "--json"])["status"],
        "success"
    );
    assert_eq!(stage_status(&project, &id, "after"), "success");
}

#[test]
fn a_push_back_cut_short_before_the_stage_is_set_back_is_carried_out_by_the_next_resume() {
    let project = project();
    let run = project.baton(&["run", "wf.yaml", "--json"]);
    let id = run_id(&run);
    // The decision is the push-back's first store write; the crash comes
    // before the write that sets the stage back.
    let crashed = project
        .command(&[
            "gate",
            "push-back",
            &id,
            "draft",
            "--as",
            "alice",
            "--comment",
            COMMENT,
        ])
        .env("BATON_FAILPOINT", "store-write:2")
        .output()
        .expect("baton runs");
    assert!(!crashed.status.success(), "the failpoint crashes it");
    assert_eq!(gate(&project, &id)["status"], "pushed_back");
    assert_eq!(stage_status(&project, &id, "draft"), "success");

    let resumed = project.baton(&["resume", &id, "--json"]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert!(
        resumed.stderr.contains("gate 'draft' pushed back by alice"),
        "{}",
        resumed.stderr
    );
    assert_eq!(attempts_of_draft(&project), 2, "{:?}", project.witness());
    assert_pushed_back(&seen_prompt(&project, &id));
    assert_eq!(gate(&project, &id)["status"], "awaiting");
}

#[test]
fn a_push_back_after_later_stages_ran_on_the_outputs_is_refused_pointing_at_rerun() {
    let project = project();
    let id = run_id(&project.baton(&["run", "wf.yaml", "--json"]));
    assert_eq!(project.baton(&["gate", "approve", &id, "draft"]).code, 0);
    assert_eq!(project.baton(&["resume", &id]).code, 0);
    // Edited after `after` used it: the approval is stale, the gate open
    // to a decision again.
    let status = project.json(&["status", &id, "--json"]);
    let workspace = Path::new(status["workspace"].as_str().expect("workspace"));
    std::fs::write(workspace.join("outputs/draft.md"), "changed by hand\n").expect("edit");
    let refused = project.baton(&[
        "gate",
        "push-back",
        &id,
        "draft",
        "--as",
        "alice",
        "--comment",
        COMMENT,
    ]);
    assert_eq!(refused.code, 3, "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains("stage 'after' already ran on the outputs of gate 'draft'")
            && refused
                .stderr
                .contains(&format!("`baton rerun {id} draft`")),
        "{}",
        refused.stderr
    );
    assert_eq!(stage_status(&project, &id, "draft"), "success");
    assert_eq!(attempts_of_draft(&project), 1);
}
