//! `baton task …` on task folders without agents: status and its JSON,
//! stale and empty artifacts, names and suffixes, unreadable verdicts and
//! records.

use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::project::Project;
use crate::tasks::{names, task_dir};

/// Writes artifacts one second apart (oldest first), by hand.
pub(crate) fn write_aged(dir: &Path, files: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).expect("dir");
    let start = SystemTime::now() - Duration::from_secs(100);
    for (n, (name, text)) in files.iter().enumerate() {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write");
        let file = std::fs::File::options()
            .write(true)
            .open(&path)
            .expect("open");
        file.set_modified(start + Duration::from_secs(n as u64))
            .expect("set the time");
    }
}

#[test]
fn status_json_shapes_and_stale_artifacts() {
    let project = Project::new();
    project.baton(&["task", "new", "First"]);
    project.baton(&["task", "new", "Second"]);
    // A bug report older than the implementation does not count.
    write_aged(
        &task_dir(&project, "first"),
        &[
            ("SPEC.md", "s"),
            ("BUG_REPORT.md", "b"),
            ("IMPLEMENTATION.md", "i"),
        ],
    );
    let one = project.json(&["task", "status", "first", "--format", "json"]);
    let keys: Vec<&String> = one.as_object().expect("an object").keys().collect();
    assert_eq!(keys, ["task", "phase", "signal", "next_phase", "why"]);
    assert_eq!(one["phase"], "Implementation");
    assert_eq!(one["signal"], serde_json::json!(["IMPLEMENTATION.md"]));
    assert_eq!(one["next_phase"], "Bug find");
    let why = one["why"].as_str().expect("why");
    assert!(
        why.contains("BUG_REPORT.md does not count: it is not newer than IMPLEMENTATION.md"),
        "{why}"
    );
    let all = project.json(&["task", "status", "--json"]);
    let all = all.as_array().expect("a list for every active task");
    assert_eq!(all.len(), 2);
    assert_eq!(all[1]["task"], "second");
    assert_eq!(all[1]["phase"], "New");
    assert_eq!(all[1]["next_phase"], "Research");
    // An empty artifact does not count either.
    write_aged(&task_dir(&project, "second"), &[("SPEC.md", "  \n")]);
    let second = project.json(&["task", "status", "second", "--json"]);
    assert_eq!(second["phase"], "New");
    // Unknown tasks and names that would leave tasks/ are errors.
    let missing = project.baton(&["task", "status", "nope"]);
    assert_eq!(missing.code, 1);
    assert!(
        missing.stderr.contains("no active task 'nope'"),
        "{}",
        missing.stderr
    );
    let escape = project.baton(&["task", "run", "../x"]);
    assert_eq!(escape.code, 2);
    assert!(
        escape.stderr.contains("is not a task name"),
        "{}",
        escape.stderr
    );
}

#[test]
fn names_collide_into_suffixes_and_archived_names_stay_taken() {
    let project = Project::new();
    for expected in ["add-user-auth", "add-user-auth-2", "add-user-auth-3"] {
        let created = project.json(&["task", "new", "Add user auth!", "--json"]);
        assert_eq!(created["task"], expected);
    }
    let archived = project.baton(&["task", "archive", "add-user-auth"]);
    assert_eq!(archived.code, 0, "{}", archived.stderr);
    assert_eq!(archived.stdout.trim(), "tasks/archive/add-user-auth");
    let next = project.json(&["task", "new", "add user AUTH", "--json"]);
    assert_eq!(next["task"], "add-user-auth-4");
    assert_eq!(names(&project, true), ["add-user-auth"]);
    // "archive" is the archive's folder, never a task.
    assert_eq!(
        project.json(&["task", "new", "Archive", "--json"])["task"],
        "archive-2"
    );
    let empty = project.baton(&["task", "new", "!!!"]);
    assert_eq!(empty.code, 2);
}

#[test]
fn an_unreadable_verdict_is_an_error_naming_the_file() {
    let project = Project::new();
    project.baton(&["task", "new", "Odd verdict"]);
    write_aged(
        &task_dir(&project, "odd-verdict"),
        &[
            ("SPEC.md", "s"),
            ("IMPLEMENTATION.md", "i"),
            ("BUG_REPORT.md", "b"),
            ("ADVERSARIAL_BUG_REPORT.md", "a"),
            ("DOC_REVIEW.md", "d"),
            ("VERDICT.md", "Looks fine to me, mostly.\n"),
        ],
    );
    let run = project.baton(&["task", "run", "odd-verdict"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains("VERDICT.md: read the verdict: no line says PASS, FAIL or NEEDS_REVIEW"),
        "{}",
        run.stderr
    );
    assert_eq!(names(&project, false), ["odd-verdict"]);
}

#[test]
fn a_damaged_record_is_an_error_naming_it() {
    let project = Project::new();
    project.baton(&["task", "new", "Damaged"]);
    std::fs::write(task_dir(&project, "damaged").join("task.json"), "{not json").expect("write");
    for args in [
        &["task", "status", "damaged"][..],
        &["task", "run", "damaged"],
    ] {
        let run = project.baton(args);
        assert_eq!(run.code, 1, "{args:?}: {}", run.stderr);
        assert!(
            run.stderr.contains("damaged/task.json: not a task record"),
            "{}",
            run.stderr
        );
    }
    // A folder made by hand, without a record, is a task.
    std::fs::create_dir_all(task_dir(&project, "by-hand")).expect("dir");
    let status = project.json(&["task", "status", "by-hand", "--json"]);
    assert_eq!(status["phase"], "New");
}
