//! The task board of `baton serve`: a project whose tasks stand in several
//! phases, one of them run to a failing verdict by the stand-in agents so
//! that `task run` made its follow-ups, asked over plain HTTP.

use serde_json::Value;

use crate::project::Project;
use crate::serving::Server;
use crate::tasks::{FAIL, project_with, referee, task_dir};
use crate::tasks_status::write_aged;

/// A description holding markup that would run script on a page that
/// placed it as markup.
pub(crate) const HOSTILE: &str = "<script>window.__pwned=1</script> Hostile plan";
/// The task `task new` makes of [`HOSTILE`].
pub(crate) const HOSTILE_TASK: &str = "script-window-pwned-1-script-hostile-plan";
/// The follow-ups `task run parse-input` creates from [`FAIL`].
pub(crate) const FOLLOW_UPS: [&str; 3] = [
    "parse-input-fix-null-deref",
    "parse-input-fix-issue-2",
    "parse-input-review-docs",
];

fn task_new(project: &Project, args: &[&str]) {
    let mut all = vec!["task", "new"];
    all.extend_from_slice(args);
    let made = project.baton(&all);
    assert_eq!(made.code, 0, "{args:?}: {}", made.stderr);
}

/// `parse-input` at its verdict with three follow-ups at Research,
/// `add-user-auth` and the hostile one new, `plan-storage` at Design,
/// `cache-results` at Implementation, and `old-work` archived.
pub(crate) fn board_project() -> Project {
    let (role, directive) = referee(FAIL);
    let project = project_with(&[(role, &directive)]);
    task_new(&project, &["Parse input"]);
    let run = project.baton(&["task", "run", "parse-input", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    task_new(&project, &["Add user auth"]);
    task_new(&project, &[HOSTILE]);
    task_new(&project, &["--design", "Plan storage"]);
    write_aged(
        &task_dir(&project, "plan-storage"),
        &[("SPEC.md", "spec"), ("DESIGN.md", "design")],
    );
    task_new(&project, &["Cache results"]);
    write_aged(
        &task_dir(&project, "cache-results"),
        &[("SPEC.md", "spec"), ("IMPLEMENTATION.md", "done")],
    );
    task_new(&project, &["Old work"]);
    let archived = project.baton(&["task", "archive", "old-work"]);
    assert_eq!(archived.code, 0, "{}", archived.stderr);
    project
}

/// The board's columns in order, each with the tasks of its cards.
fn columns(board: &str) -> Vec<(String, Vec<String>)> {
    board
        .split("<section class=\"column\" data-phase=\"")
        .skip(1)
        .map(|column| {
            let phase = column.split('"').next().unwrap_or_default().to_owned();
            let tasks = column
                .split("data-task=\"")
                .skip(1)
                .map(|card| card.split('"').next().unwrap_or_default().to_owned())
                .collect();
            (phase, tasks)
        })
        .collect()
}

/// The card of `task` on the board, up to its end.
fn card<'a>(board: &'a str, task: &str) -> &'a str {
    let start = board
        .find(&format!("data-task=\"{task}\""))
        .unwrap_or_else(|| panic!("no card of {task}: {board}"));
    let rest = &board[start..];
    &rest[..rest.find("</article>").expect("the card ends")]
}

#[test]
fn the_task_board_shows_each_task_in_its_phase_with_its_origin_and_the_cli_s_json() {
    let project = board_project();
    let server = Server::start(project.path());

    let board = server.get("/tasks");
    assert_eq!(board.status, 200, "{board:?}");
    let mut expected: Vec<(&str, Vec<&str>)> = vec![
        ("New", vec!["add-user-auth", HOSTILE_TASK]),
        (
            "Research",
            vec![
                "parse-input-fix-issue-2",
                "parse-input-fix-null-deref",
                "parse-input-review-docs",
            ],
        ),
        ("Design", vec!["plan-storage"]),
        ("Implementation", vec!["cache-results"]),
        ("Bug find", vec![]),
        ("Adversarial", vec![]),
        ("Doc review", vec![]),
        ("Referee", vec!["parse-input"]),
    ];
    expected
        .iter_mut()
        .for_each(|(_, tasks)| tasks.sort_unstable());
    let seen = columns(&board.body);
    let seen: Vec<(&str, Vec<&str>)> = seen
        .iter()
        .map(|(phase, tasks)| (phase.as_str(), tasks.iter().map(String::as_str).collect()))
        .collect();
    assert_eq!(
        seen, expected,
        "the phases in order, without empty optional ones"
    );
    assert!(!board.body.contains("old-work"), "{}", board.body);
    assert!(board.body.contains("1 archived"), "{}", board.body);

    let fix = card(&board.body, "parse-input-fix-null-deref");
    for shown in [
        "href=\"/tasks/parse-input-fix-null-deref\"",
        "<span class=\"kind\">fix</span>",
        "signal: <code>SPEC.md</code>",
        "next: Implementation",
        "origin: <a class=\"origin\" href=\"/tasks/parse-input\">parse-input</a>",
    ] {
        assert!(fix.contains(shown), "{shown} in {fix}");
    }
    let verdict = card(&board.body, "parse-input");
    assert!(
        verdict.contains("signal: <code>VERDICT.md</code>"),
        "{verdict}"
    );
    assert!(!verdict.contains("origin:"), "{verdict}");
    assert!(card(&board.body, "add-user-auth").contains("signal: <code>empty folder</code>"));

    // Markup in a description is text, on the board and on its page.
    let escaped = "&lt;script&gt;window.__pwned=1&lt;/script&gt; Hostile plan";
    let page = server.get(&format!("/tasks/{HOSTILE_TASK}"));
    for body in [&board.body, &page.body] {
        assert!(body.contains(escaped), "{body}");
        assert!(!body.contains("<script>window"), "{body}");
    }

    // The API answers what the CLI prints.
    assert_eq!(
        server.get("/api/tasks").json(),
        project.json(&["task", "list", "--format", "json"])
    );
    assert_eq!(
        server.get("/api/tasks?archived=true").json(),
        project.json(&["task", "list", "--archived", "--format", "json"])
    );
    for (_, tasks) in &expected {
        for task in tasks {
            let answer = server.get(&format!("/api/tasks/{task}"));
            assert_eq!(answer.status, 200, "{answer:?}");
            assert_eq!(
                answer.json(),
                project.json(&["task", "status", task, "--format", "json"]),
                "{task}"
            );
        }
    }
    assert_eq!(
        server.get("/api/tasks/parse-input/governance").json(),
        project.json(&[
            "state",
            "summary",
            "--task",
            "parse-input",
            "--format",
            "json"
        ])
    );
}

#[test]
fn a_task_s_page_shows_its_status_files_follow_ups_and_governance() {
    let project = board_project();
    let server = Server::start(project.path());
    let page = server.get("/tasks/parse-input");
    assert_eq!(page.status, 200, "{page:?}");
    let status = project.json(&["task", "status", "parse-input", "--format", "json"]);
    for (label, value) in [("phase", "Referee"), ("signal", "VERDICT.md")] {
        assert!(
            page.body
                .contains(&format!("<td data-status=\"{label}\">{value}</td>")),
            "{label} in {}",
            page.body
        );
    }
    let next = status["next_phase"].as_str().expect("next");
    assert!(
        page.body
            .contains(&format!("<td data-status=\"next\">{next}</td>"))
    );
    for file in ["SPEC.md", "IMPLEMENTATION.md", "VERDICT.md", "task.json"] {
        assert!(
            page.body
                .contains(&format!("<td class=\"mono\">{file}</td>")),
            "{file} in {}",
            page.body
        );
    }
    for follow_up in FOLLOW_UPS {
        assert!(
            page.body.contains(&format!(
                "<a class=\"follow-up\" href=\"/tasks/{follow_up}\">{follow_up}</a>"
            )),
            "{follow_up} in {}",
            page.body
        );
    }
    // Every field of `baton state summary --task` is a row of its section.
    let summary = project.json(&[
        "state",
        "summary",
        "--task",
        "parse-input",
        "--format",
        "json",
    ]);
    assert!(
        page.body.contains("<details class=\"governance\" open>"),
        "{}",
        page.body
    );
    for key in summary.as_object().expect("an object").keys() {
        assert!(
            page.body.contains(&format!("<tr><th>{key}</th>")),
            "{key} in {}",
            page.body
        );
    }
    // The follow-up's page links back to where it came from.
    let fix = server.get(&format!("/tasks/{}", FOLLOW_UPS[0]));
    assert!(
        fix.body
            .contains("origin: <a class=\"origin\" href=\"/tasks/parse-input\">parse-input</a>"),
        "{}",
        fix.body
    );
}

#[test]
fn a_name_that_would_leave_tasks_is_refused_and_nothing_outside_is_read() {
    let project = Project::new();
    task_new(&project, &["Real one"]);
    // A folder outside tasks/ that looks like a task, and a link to it.
    let outside = tempfile::tempdir().expect("temp dir");
    std::fs::write(outside.path().join("SPEC.md"), "outside-secret").expect("write");
    std::os::unix::fs::symlink(outside.path(), task_dir(&project, "linked")).expect("symlink");
    std::fs::write(project.path().join("SPEC.md"), "project-secret").expect("write");
    let server = Server::start(project.path());
    for (path, status) in [
        ("/api/tasks/..", 400),
        ("/api/tasks/%2E%2E", 400),
        ("/api/tasks/..%2F..%2Fetc", 400),
        ("/api/tasks/real-one%2F..%2F..", 400),
        ("/api/tasks/archive", 400),
        ("/tasks/..%2F", 400),
        ("/api/tasks/..%2F/governance", 400),
        ("/api/tasks/linked", 404),
        ("/tasks/linked", 404),
        ("/api/tasks/no-such-task", 404),
        ("/api/tasks/no-such-task/governance", 404),
    ] {
        let answer = server.get(path);
        assert_eq!(answer.status, status, "{path}: {answer:?}");
        assert!(!answer.body.contains("secret"), "{path}: {answer:?}");
        assert!(
            !answer.body.contains("nothing at"),
            "{path} reached its handler: {answer:?}"
        );
    }
    let listed = server.get("/api/tasks").json();
    assert_eq!(listed, project.json(&["task", "list", "--format", "json"]));
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(
        server.get("/api/tasks/real-one").json()["phase"],
        Value::from("New")
    );
}
