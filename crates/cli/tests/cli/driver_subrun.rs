//! Sub-workflow stages through the driver protocol: the child run's
//! entries are handed out as `<stage>/<entry>` by the parent's `next`,
//! completed through the parent, and the stage ends with the child, as in
//! `baton run`.

use crate::driver::{create, drive};
use crate::driver_parity::{recorded, stand_in_agents};
use crate::project::{HEADER, Project};

/// A parent whose `child` stage runs `flows/child.yaml` (an agent stage
/// and a script reading it), then an agent stage reading the child's
/// output; `gate` adds a human gate to the child.
fn workflows(project: &Project, gate: bool) {
    std::fs::create_dir_all(project.path().join("flows")).expect("mkdir");
    let gate = if gate { "    human_gate: true\n" } else { "" };
    project.write(
        "flows/child.yaml",
        &format!(
            "{}  - name: draft\n    kind: propose\n    description: Draft it.\n    agent: {{role: writer}}\n    writes_to: [draft.md]\n{gate}  - name: copy\n    kind: execute\n    description: d\n    executor: inline\n    depends_on: [draft]\n    script: cp outputs/draft.md outputs/copy.md\n    writes_to: [copy.md]\n",
            HEADER.replace("name: t", "name: child")
        ),
    );
    project.write(
        "parent.yaml",
        &format!(
            "{HEADER}  - name: child\n    kind: sub-workflow\n    description: runs the child\n    agent: {{role: orchestrator}}\n    sub_workflow: flows/child.yaml\n  - name: review\n    kind: validate\n    description: Review {{workspace}}/sub/child/outputs/copy.md.\n    agent: {{role: reviewer}}\n    depends_on: [child]\n    writes_to: [review.md]\n"
        ),
    );
}

/// A project with [`workflows`], the parent's run created and its first
/// `next` called, which handed out the child's `draft`.
fn started() -> (Project, String) {
    let project = Project::new();
    workflows(&project, false);
    let (id, _) = create(&project, "parent.yaml");
    let ready = project.json(&["next", &id, "--json"]);
    assert_eq!(ready[0]["stage"], "child/draft", "{ready}");
    (project, id)
}

fn child_of(run: &str) -> String {
    format!("{run}-child")
}

#[test]
fn a_sub_workflow_runs_through_the_protocol_as_through_baton_run() {
    let (external, builtin) = (Project::new(), Project::new());
    workflows(&external, false);
    workflows(&builtin, false);
    builtin.write("baton.toml", &stand_in_agents());

    let (id, _) = create(&external, "parent.yaml");
    let driven = drive(&external, &id, &|_, _| None);
    assert_eq!(driven.status, "success");
    assert_eq!(driven.handed, ["child/draft", "review"]);

    let ran = builtin.json(&["run", "parent.yaml", "--json"]);
    assert_eq!(ran["status"], "success", "{ran}");
    let builtin_id = ran["run_id"].as_str().expect("id");
    for (left, right) in [
        (id.clone(), builtin_id.to_owned()),
        (child_of(&id), child_of(builtin_id)),
    ] {
        assert_eq!(
            recorded(&external, &left),
            recorded(&builtin, &right),
            "the protocol (left) and `baton run` (right) differ"
        );
    }
}

#[test]
fn the_sub_workflow_stage_itself_is_not_completed_and_resume_names_its_child_s_entries() {
    let (project, id) = started();
    let refused = project.baton(&["complete", &id, "child"]);
    assert_eq!(refused.code, 3, "{}", refused.stderr);
    assert!(refused.stderr.contains("'child/…'"), "{}", refused.stderr);
    // A resume names the child's entry, not the stage.
    let resumed = project.json(&["resume", &id, "--json"]);
    assert_eq!(
        resumed["ready"],
        serde_json::json!(["child/draft"]),
        "{resumed}"
    );
}

/// A child stopped at its gate fails the parent's stage with the way on;
/// once the child's gate is approved, the stage reset and handed out
/// again, the same child goes on and the parent ends well.
#[test]
fn a_child_at_its_gate_fails_the_stage_until_decided_and_rerun() {
    let project = Project::new();
    workflows(&project, true);
    let (id, _) = create(&project, "parent.yaml");
    let child = child_of(&id);
    let ready = project.json(&["next", &id, "--json"]);
    assert_eq!(ready[0]["stage"], "child/draft", "{ready}");
    let workspace = std::path::Path::new(ready[0]["dispatch_file"].as_str().expect("file"))
        .parent()
        .and_then(std::path::Path::parent)
        .expect("the child's workspace")
        .to_owned();
    std::fs::write(workspace.join("outputs/draft.md"), "a draft\n").expect("write");
    let completed = project.baton(&["complete", &id, "child/draft"]);
    assert_eq!(completed.code, 0, "{}", completed.stderr);

    let next = project.baton(&["next", &id, "--json"]);
    assert_eq!(next.code, 0, "{}", next.stderr);
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "failed", "{status}");
    let error = status["error"].as_str().unwrap_or_default().to_owned();
    assert!(
        error.contains(&format!("gate approve {child} draft"))
            && error.contains(&format!("`baton rerun {id} child`")),
        "{error}"
    );

    let approved = project.baton(&["gate", "approve", &child, "draft"]);
    assert_eq!(approved.code, 0, "{}", approved.stderr);
    let reset = project.baton(&["rerun", &id, "child"]);
    assert_eq!(reset.code, 0, "{}", reset.stderr);
    let driven = drive(&project, &id, &|_, _| None);
    assert_eq!(driven.status, "success");
    assert_eq!(driven.handed, ["review"], "the child's draft stood");
    let copied = std::fs::read_to_string(workspace.join("outputs/copy.md")).expect("copy");
    assert_eq!(copied, "a draft\n");
}

/// `baton cancel` of the parent cancels the child run it started, as a
/// live `baton run` cancels its children.
#[test]
fn cancelling_the_parent_cancels_its_child() {
    let (project, id) = started();
    let cancelled = project.baton(&["cancel", &id]);
    assert_eq!(cancelled.code, 0, "{}", cancelled.stderr);
    for run in [id.clone(), child_of(&id)] {
        let status = project.json(&["status", &run, "--json"]);
        assert_eq!(status["status"], "cancelled", "{status}");
    }
}

/// A child run whose script outlasts the run's lease (10 s): the parent's
/// `next` keeps its lease while it waits, so a `complete` of another stage
/// made meanwhile waits its turn instead of taking the run over.
#[test]
fn a_long_child_keeps_the_parent_s_lease() {
    let project = Project::new();
    std::fs::create_dir_all(project.path().join("flows")).expect("mkdir");
    project.write(
        "flows/slow.yaml",
        &format!(
            "{}{}",
            HEADER.replace("name: t", "name: slow"),
            crate::project::stage(
                "wait",
                "sleep 12\necho done > outputs/wait.txt",
                "    writes_to: [wait.txt]\n"
            )
        ),
    );
    project.write(
        "parent.yaml",
        &format!(
            "{HEADER}  - name: a\n    kind: propose\n    description: d\n    agent: {{role: writer}}\n    writes_to: [a.md]\n  - name: child\n    kind: sub-workflow\n    description: runs the slow child\n    agent: {{role: orchestrator}}\n    sub_workflow: flows/slow.yaml\n"
        ),
    );
    let (id, workspace) = create(&project, "parent.yaml");
    let next = project
        .command(&["next", &id, "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("next starts");
    // `a` is recorded as started (its snapshot is written first) before the
    // child's script runs.
    let handed = workspace.join("dispatch/000-a.before.json");
    crate::project::wait_for("a handed out", std::time::Duration::from_secs(60), || {
        handed.is_file()
    });
    std::fs::write(workspace.join("outputs/a.md"), "a\n").expect("write");
    let completed = project.baton(&["complete", &id, "a"]);
    assert_eq!(completed.code, 0, "{}", completed.stderr);
    let output = next.wait_with_output().expect("next ends");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "success", "{status}");
}

/// A run rejected at a gate while a sub-workflow stage's child is out ends
/// the child too: nothing is left running that no call goes on with.
#[test]
fn a_rejected_parent_cancels_the_child_it_left_running() {
    let project = Project::new();
    workflows(&project, false);
    let parent = std::fs::read_to_string(project.path().join("parent.yaml")).expect("read");
    project.write(
        "parent.yaml",
        &parent.replace(
            "stages:\n",
            "stages:\n  - name: g\n    kind: propose\n    description: d\n    agent: {role: writer}\n    writes_to: [g.md]\n    human_gate: true\n",
        ),
    );
    let (id, workspace) = create(&project, "parent.yaml");
    let ready = project.json(&["next", &id, "--json"]);
    let names: Vec<&str> = ready
        .as_array()
        .expect("ready")
        .iter()
        .filter_map(|entry| entry["stage"].as_str())
        .collect();
    assert_eq!(names, ["g", "child/draft"], "{ready}");
    std::fs::write(workspace.join("outputs/g.md"), "g\n").expect("write");
    let completed = project.baton(&["complete", &id, "g"]);
    assert_eq!(completed.code, 0, "{}", completed.stderr);
    let rejected = project.baton(&["gate", "reject", &id, "g", "--comment", "no"]);
    assert_eq!(rejected.code, 0, "{}", rejected.stderr);
    for (run, status) in [(id.clone(), "rejected"), (child_of(&id), "cancelled")] {
        let shown = project.json(&["status", &run, "--json"]);
        assert_eq!(shown["status"], status, "{shown}");
    }
}

/// A child that cannot go on (its workflow was edited since it started)
/// fails its stage, saying why, rather than every later call of the parent.
#[test]
fn a_child_that_cannot_go_on_fails_its_stage() {
    let (project, id) = started();
    let child = std::fs::read_to_string(project.path().join("flows/child.yaml")).expect("read");
    project.write(
        "flows/child.yaml",
        &child.replace("Draft it.", "Draft it again."),
    );
    let next = project.baton(&["next", &id, "--json"]);
    assert_eq!(next.code, 0, "{}", next.stderr);
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "failed", "{status}");
    let error = status["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&format!("sub-workflow run {}", child_of(&id))),
        "{error}"
    );
}

/// A sub-workflow stage with validation would have to run its child as
/// its main unit, which the protocol does not: the run is refused before
/// anything is recorded, not half-way.
#[test]
fn a_validated_sub_workflow_is_refused_before_the_run_is_recorded() {
    let project = Project::new();
    workflows(&project, false);
    let parent = std::fs::read_to_string(project.path().join("parent.yaml")).expect("read");
    project.write(
        "parent.yaml",
        &parent.replace(
            "    sub_workflow: flows/child.yaml\n",
            "    sub_workflow: flows/child.yaml\n    writes_to: [summary.md]\n    validation: {strategy: unit}\n",
        ),
    );
    let created = project.baton(&["run", "parent.yaml", "--driver", "external", "--json"]);
    assert_eq!(created.code, 3, "{}", created.stderr);
    assert!(
        created
            .stderr
            .contains("stage 'child' is a sub-workflow whose result is validated"),
        "{}",
        created.stderr
    );
    assert_eq!(project.json(&["runs", "--json"]), serde_json::json!([]));
}
