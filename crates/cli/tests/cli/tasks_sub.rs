//! `baton task …` with sub-tasks (decomposition in manual and autopilot
//! mode), tie-break tasks, and a task whose recorded run is gone or whose
//! folder was edited under it.

use std::time::Duration;

use serde_json::Value;

use crate::tasks::{FAIL, PASS, config, names, project_with, read, referee, task_dir};

#[test]
fn a_decomposed_task_waits_for_its_sub_tasks_and_its_verdict_considers_theirs() {
    let decomposition = "write-lines $BATON_WORKSPACE/outputs/DECOMPOSITION.md # Sub-tasks\\n- Reader: parse rows\\n- Writer: emit rows";
    let (role, pass) = referee(PASS);
    let (_, fail) = referee(FAIL);
    let project = project_with(&[(role, &pass), ("decomposer", decomposition)]);
    project.baton(&["task", "new", "Importer", "--decompose"]);
    let parent = project.baton(&["task", "run", "importer", "--json"]);
    assert_eq!(parent.code, 6, "{}\n{}", parent.stdout, parent.stderr);
    let result: Value = serde_json::from_str(&parent.stdout).expect("json");
    assert_eq!(
        result["waiting_for"],
        serde_json::json!(["importer-reader", "importer-writer"])
    );
    let reader = task_dir(&project, "importer-reader");
    assert_eq!(
        read(&reader.join("PARENT_SPEC.md")),
        read(&task_dir(&project, "importer").join("SPEC.md"))
    );
    assert_eq!(
        project.json(&["task", "status", "importer-reader", "--json"])["phase"],
        "New"
    );

    // The reader passes (archived); the writer fails, and its failure is
    // left to the parent's verdict.
    let waiting = project.json(&["task", "status", "importer", "--json"]);
    assert_eq!(
        waiting["next_phase"],
        "wait for sub-tasks: importer-reader, importer-writer"
    );
    let next = project.json(&["task", "next", "importer", "--json"]);
    assert_eq!(next["next_phase"], Value::Null, "{next}");
    assert_eq!(next["step"], waiting["next_phase"]);
    assert_eq!(project.baton(&["task", "run", "importer-reader"]).code, 0);
    project.write("baton.toml", &config(&[(role, &fail)]));
    let writer = project.json(&["task", "run", "importer-writer", "--json"]);
    assert_eq!(writer["outcome"], "for-parent", "{writer}");
    assert!(!task_dir(&project, "importer-writer-fix-null-deref").exists());

    // The parent continues at Implementation and, though its own verdict
    // passes, a failed sub-task keeps it active with {parent}-fix-{sub}.
    project.write("baton.toml", &config(&[(role, &pass)]));
    let ready = project.json(&["task", "status", "importer", "--json"]);
    assert_eq!(ready["next_phase"], "Implementation", "{ready}");
    let parent = project.baton(&["task", "run", "importer", "--json"]);
    assert_eq!(parent.code, 0, "{}", parent.stderr);
    assert!(
        parent.stderr.contains("Implementation → Bug find"),
        "{}",
        parent.stderr
    );
    let result: Value = serde_json::from_str(&parent.stdout).expect("json");
    assert_eq!(
        result["created"],
        serde_json::json!(["importer-fix-writer"]),
        "{result}"
    );
    let fix = task_dir(&project, "importer-fix-writer");
    assert_eq!(
        read(&fix.join("BUG_REPORT.md")),
        read(&task_dir(&project, "importer-writer").join("BUG_REPORT.md"))
    );
    assert_eq!(read(&fix.join("IMPLEMENTATION.md")), "");
    assert!(names(&project, false).contains(&"importer".to_owned()));
    assert_eq!(names(&project, true), ["importer-reader"]);
}

#[test]
fn a_bad_decomposition_is_an_error_naming_the_file() {
    let project = project_with(&[(
        "decomposer",
        "write-lines $BATON_WORKSPACE/outputs/DECOMPOSITION.md just prose",
    )]);
    project.baton(&["task", "new", "Importer", "--decompose"]);
    let run = project.baton(&["task", "run", "importer"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("DECOMPOSITION.md: read the decomposition: it lists no sub-tasks"),
        "{}",
        run.stderr
    );
    assert_eq!(names(&project, false), ["importer"]);
}

#[test]
fn autopilot_runs_the_sub_tasks_then_the_parent() {
    let decomposition = "write-lines $BATON_WORKSPACE/outputs/DECOMPOSITION.md - Reader: parse rows\\n- Writer: emit rows";
    let (role, pass) = referee(PASS);
    let project = project_with(&[(role, &pass), ("decomposer", decomposition)]);
    project.baton(&["task", "new", "Importer", "--decompose"]);
    let run = project.baton(&["task", "run", "importer", "--autopilot", "--json"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let result: Value = serde_json::from_str(&run.stdout).expect("json");
    assert_eq!(result["outcome"], "archived", "{result}");
    assert!(names(&project, false).is_empty());
    let mut archived = names(&project, true);
    archived.sort();
    assert_eq!(archived, ["importer", "importer-reader", "importer-writer"]);
    // Each sub-task ran every phase in a run of its own.
    assert_eq!(project.run_ids().len(), 4);
}

#[test]
fn a_tie_break_task_starts_at_research() {
    let verdict =
        "NEEDS_REVIEW\\n## Tasks for Review / Tie-Breaks\\n- API shape: reviewers disagree";
    let (role, review) = referee(verdict);
    let project = project_with(&[(role, &review)]);
    project.baton(&["task", "new", "Api"]);
    let run = project.json(&["task", "run", "api", "--json"]);
    assert_eq!(
        run["created"],
        serde_json::json!(["api-tiebreak-api-shape"]),
        "{run}"
    );
    let tie = task_dir(&project, "api-tiebreak-api-shape");
    assert_eq!(
        read(&tie.join("SPEC.md")),
        read(&task_dir(&project, "api").join("SPEC.md"))
    );
    assert_eq!(read(&tie.join("IMPLEMENTATION.md")), "");
    // SPEC.md counts, yet Research runs again: the question is settled there.
    let status = project.json(&["task", "status", "api-tiebreak-api-shape", "--json"]);
    assert_eq!(status["phase"], "Research");
    assert_eq!(status["next_phase"], "Research", "{status}");
    let next = project.json(&["task", "next", "api-tiebreak-api-shape", "--json"]);
    assert!(
        next["prompt"]
            .as_str()
            .expect("prompt")
            .contains("API shape: reviewers disagree"),
        "{next}"
    );
    let (role, pass) = referee(PASS);
    project.write("baton.toml", &config(&[(role, &pass)]));
    let run = project.baton(&["task", "run", "api-tiebreak-api-shape"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("Research → Implementation"),
        "{}",
        run.stderr
    );
    assert_eq!(names(&project, true), ["api-tiebreak-api-shape"]);
    // The original task's NEEDS_REVIEW keeps it active.
    assert_eq!(names(&project, false), ["api"]);
}

#[test]
fn a_recorded_run_missing_from_the_store_is_replaced() {
    let (role, pass) = referee(PASS);
    let project = project_with(&[(role, &pass)]);
    project.baton(&["task", "new", "Lost run"]);
    let record = task_dir(&project, "lost-run").join("task.json");
    let mut value: Value = serde_json::from_str(&read(&record)).expect("json");
    value["run_id"] = "task-lost-run-gone".into();
    std::fs::write(&record, value.to_string()).expect("write");
    let run = project.baton(&["task", "run", "lost-run"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("is not in the store"), "{}", run.stderr);
    assert_eq!(names(&project, true), ["lost-run"]);
}

#[test]
fn an_artifact_edited_after_its_phase_ended_is_kept_and_a_new_run_starts() {
    let (role, pass) = referee(PASS);
    let project = project_with(&[(role, &pass), ("implementer", "exit 3")]);
    project.baton(&["task", "new", "Edited"]);
    let failed = project.baton(&["task", "run", "edited"]);
    assert_eq!(failed.code, 2, "{}", failed.stderr);
    assert!(
        failed.stderr.contains("`baton task run edited` resumes"),
        "{}",
        failed.stderr
    );
    let first = project.run_ids();
    // A person rewrites the spec and writes the implementation by hand.
    std::thread::sleep(Duration::from_millis(20));
    let dir = task_dir(&project, "edited");
    std::fs::write(dir.join("SPEC.md"), "the spec, by hand\n").expect("write");
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(dir.join("IMPLEMENTATION.md"), "done by hand\n").expect("write");
    project.write("baton.toml", &config(&[(role, &pass)]));
    let run = project.baton(&["task", "run", "edited"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("SPEC.md was edited after run"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("Bug find → Adversarial"),
        "{}",
        run.stderr
    );
    let archived = project.path().join("tasks/archive/edited");
    assert_eq!(read(&archived.join("SPEC.md")), "the spec, by hand\n");
    assert_eq!(read(&archived.join("IMPLEMENTATION.md")), "done by hand\n");
    let runs = project.run_ids();
    assert_eq!(runs.len(), 2);
    // The first run was left as it ended: its implementer ran once.
    let status = project.json(&["status", &first[0], "--json"]);
    assert_eq!(status["status"], "failed");
    assert_eq!(status["stages"][1]["attempts"], 1, "{status}");
}

#[test]
fn an_edit_under_a_killed_run_cancels_it() {
    let (role, pass) = referee(PASS);
    let project = project_with(&[(role, &pass), ("implementer", "hang")]);
    project.baton(&["task", "new", "Edited"]);
    let mut child = project.spawn(&["task", "run", "edited"]);
    let state = project.path().join(".baton/tasks/edited");
    crate::project::wait_for("the implementer to start", Duration::from_secs(20), || {
        std::fs::read_dir(&state).is_ok_and(|entries| {
            entries.filter_map(Result::ok).any(|entry| {
                entry
                    .path()
                    .join("dispatch/001-implementation.json")
                    .is_file()
            })
        })
    });
    child.kill().expect("kill -9");
    let _ = child.wait();
    let first = project.run_ids();
    std::fs::write(task_dir(&project, "edited").join("SPEC.md"), "by hand\n").expect("write");
    project.write("baton.toml", &config(&[(role, &pass)]));
    let run = project.baton(&["task", "run", "edited"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("that run is cancelled"),
        "{}",
        run.stderr
    );
    assert_eq!(
        project.json(&["status", &first[0], "--json"])["status"],
        "cancelled"
    );
    assert_eq!(
        read(&project.path().join("tasks/archive/edited/SPEC.md")),
        "by hand\n"
    );
}
