//! `baton task …` end to end: real task folders, the real engine and store,
//! and the stand-in agent playing every phase role.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::project::{Project, wait_for};

/// A referee's verdict, as one `write-lines` directive.
pub(crate) const PASS: &str = "PASS";
pub(crate) const FAIL: &str = "# Verdict\\nFAIL\\n## Findings\\n- Null deref: crashes on empty input\\n- off by one somewhere\\n## Remaining Issues\\n- Docs: the README is stale\\n- none";

/// `baton.toml` with the stand-in agent for every role, and for each
/// `(role, directives)` a profile of its own running those directives.
pub(crate) fn config(roles: &[(&str, &str)]) -> String {
    let fake = Path::new(env!("CARGO_BIN_EXE_baton")).with_file_name("baton-fake-agent");
    let profile = |name: &str, env: &str| {
        format!(
            "[profiles.{name}]\nprogram = \"{}\"\nprompt = {{ via = \"stdin\" }}\nenv_passthrough = [\"PATH\", \"HOME\"]\nlimits = {{ wall = \"20s\", kill_grace = \"1s\" }}\n{env}\n",
            fake.display()
        )
    };
    let mut text = format!(
        "[agents.default]\nprofile = \"fake\"\n\n{}",
        profile("fake", "")
    );
    for (role, directives) in roles {
        let escaped = directives.replace('\\', "\\\\").replace('"', "\\\"");
        text.push_str(&format!("[agents.{role}]\nprofile = \"{role}\"\n\n"));
        text.push_str(&profile(
            role,
            &format!("env = {{ BATON_FAKE_AGENT = \"{escaped}\" }}"),
        ));
    }
    text
}

/// A referee writing `verdict`.
pub(crate) fn referee(verdict: &str) -> (&'static str, String) {
    (
        "referee",
        format!("write-lines $BATON_WORKSPACE/outputs/VERDICT.md {verdict}"),
    )
}

pub(crate) fn project_with(roles: &[(&str, &str)]) -> Project {
    let project = Project::new();
    project.write("baton.toml", &config(roles));
    project
}

pub(crate) fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

pub(crate) fn names(project: &Project, archived: bool) -> Vec<String> {
    let mut args = vec!["task", "list", "--json"];
    if archived {
        args.push("--archived");
    }
    project
        .json(&args)
        .as_array()
        .expect("a list")
        .iter()
        .map(|task| task["task"].as_str().expect("name").to_owned())
        .collect()
}

pub(crate) fn task_dir(project: &Project, name: &str) -> PathBuf {
    project.path().join("tasks").join(name)
}

#[test]
fn a_task_runs_from_new_to_pass_and_is_archived() {
    let (role, directive) = referee(PASS);
    let project = project_with(&[(role, &directive)]);
    let created = project.json(&["task", "new", "Add user auth", "--json"]);
    assert_eq!(created["task"], "add-user-auth");
    let run = project.baton(&["task", "run", "add-user-auth", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stderr.contains("note:"), "{}", run.stderr);
    let result: Value = serde_json::from_str(&run.stdout).expect("json");
    assert_eq!(result["outcome"], "archived", "{result}");
    assert!(names(&project, false).is_empty());
    assert_eq!(names(&project, true), ["add-user-auth"]);
    let archived = project.path().join("tasks/archive/add-user-auth");
    for artifact in [
        "SPEC.md",
        "IMPLEMENTATION.md",
        "BUG_REPORT.md",
        "ADVERSARIAL_BUG_REPORT.md",
        "DOC_REVIEW.md",
    ] {
        assert!(
            !read(&archived.join(artifact)).trim().is_empty(),
            "{artifact}"
        );
    }
    assert_eq!(read(&archived.join("VERDICT.md")), "PASS\n");
    // The phases ran as one recorded run of the engine, in table order.
    let runs = project.run_ids();
    assert_eq!(runs.len(), 1);
    let status = project.json(&["status", &runs[0], "--json"]);
    let stages: Vec<&str> = status["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .map(|stage| stage["stage"].as_str().expect("name"))
        .collect();
    assert_eq!(
        stages,
        [
            "research",
            "implementation",
            "bug-find",
            "adversarial",
            "doc-review",
            "referee"
        ]
    );
    // An archived task is not run again.
    let again = project.baton(&["task", "run", "add-user-auth"]);
    assert_eq!(again.code, 1);
    assert!(again.stderr.contains("is archived"), "{}", again.stderr);
}

#[test]
fn a_fail_creates_fix_and_review_tasks_that_start_at_implementation_with_the_reports() {
    let (role, directive) = referee(FAIL);
    let project = project_with(&[(role, &directive)]);
    project.baton(&["task", "new", "Parse input"]);
    let run = project.baton(&["task", "run", "parse-input", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let result: Value = serde_json::from_str(&run.stdout).expect("json");
    assert_eq!(result["outcome"], "follow-ups");
    let expected = [
        "parse-input-fix-null-deref",
        "parse-input-fix-issue-2",
        "parse-input-review-docs",
    ];
    assert_eq!(result["created"], serde_json::json!(expected));
    let origin = task_dir(&project, "parse-input");
    for fix in expected {
        let dir = task_dir(&project, fix);
        for copied in ["SPEC.md", "BUG_REPORT.md", "ADVERSARIAL_BUG_REPORT.md"] {
            assert_eq!(
                read(&dir.join(copied)),
                read(&origin.join(copied)),
                "{fix}/{copied}"
            );
        }
        assert_eq!(read(&dir.join("IMPLEMENTATION.md")), "", "{fix}");
        assert!(!dir.join("VERDICT.md").exists());
        let status = project.json(&["task", "status", fix, "--json"]);
        assert_eq!(status["next_phase"], "Implementation", "{status}");
    }
    let record: Value =
        serde_json::from_str(&read(&task_dir(&project, expected[0]).join("task.json")))
            .expect("json");
    assert_eq!(record["kind"], "fix");
    assert_eq!(record["source"], "Null deref: crashes on empty input");
    let review: Value =
        serde_json::from_str(&read(&task_dir(&project, expected[2]).join("task.json")))
            .expect("json");
    assert_eq!(review["kind"], "review");
    // The failed task stays active; a second run creates nothing twice.
    let again = project.json(&["task", "run", "parse-input", "--json"]);
    assert_eq!(again["created"], serde_json::json!([]), "{again}");
    assert_eq!(again["existing"], serde_json::json!(expected), "{again}");
    let plain = project.baton(&["task", "run", "parse-input"]);
    assert!(
        !plain.stdout.contains("created tasks/")
            && plain
                .stdout
                .contains(&format!("tasks/{} exists already", expected[0])),
        "{}",
        plain.stdout
    );
    let mut active = names(&project, false);
    active.sort();
    assert_eq!(active.len(), 4, "{active:?}");

    // The fix task skips Research: its run starts at implementation, the
    // implementer is told to read the old reports, and the copied spec stays.
    let spec = read(&task_dir(&project, expected[0]).join("SPEC.md"));
    let next = project.json(&["task", "next", expected[0], "--json"]);
    assert_eq!(next["role"], "implementer");
    let prompt = next["prompt"].as_str().expect("prompt");
    assert!(
        prompt.contains("BUG_REPORT.md and ADVERSARIAL_BUG_REPORT.md"),
        "{prompt}"
    );
    assert!(
        prompt.contains("Null deref: crashes on empty input"),
        "{prompt}"
    );
    let fix = project.baton(&["task", "run", expected[0]]);
    assert_eq!(fix.code, 0, "{}", fix.stderr);
    assert!(
        fix.stderr.contains("Implementation → Bug find"),
        "{}",
        fix.stderr
    );
    assert!(!fix.stderr.contains("Research"), "{}", fix.stderr);
    assert_eq!(read(&task_dir(&project, expected[0]).join("SPEC.md")), spec);
}

#[test]
fn autopilot_pauses_at_a_fail_and_creates_nothing() {
    let (role, directive) = referee(FAIL);
    let project = project_with(&[(role, &directive)]);
    project.baton(&["task", "new", "Parse input"]);
    let run = project.baton(&["task", "run", "parse-input", "--autopilot", "--json"]);
    assert_eq!(run.code, 5, "{}\n{}", run.stdout, run.stderr);
    let result: Value = serde_json::from_str(&run.stdout).expect("json");
    assert_eq!(result["outcome"], "decide");
    assert!(
        result["reason"]
            .as_str()
            .expect("reason")
            .contains("a person must decide"),
        "{result}"
    );
    assert_eq!(names(&project, false), ["parse-input"]);
    // The text form says so too, and a verdict present is not dispatched
    // again: no profile is needed to decide (the config is gone).
    std::fs::remove_file(project.path().join("baton.toml")).expect("remove");
    let text = project.baton(&["task", "run", "parse-input", "--autopilot"]);
    assert_eq!(text.code, 5);
    assert!(text.stdout.contains("paused"), "{}", text.stdout);
    assert_eq!(project.run_ids().len(), 1);
    // Manual mode then creates the fix tasks without running anything.
    let manual = project.baton(&["task", "run", "parse-input"]);
    assert_eq!(manual.code, 0, "{}", manual.stderr);
    assert_eq!(names(&project, false).len(), 4);
    assert_eq!(project.run_ids().len(), 1);
}

#[test]
fn a_killed_task_run_resumes_its_run() {
    let (role, directive) = referee(PASS);
    let project = project_with(&[(role, &directive), ("implementer", "hang")]);
    project.baton(&["task", "new", "Slow one"]);
    let mut child = project.spawn(&["task", "run", "slow-one"]);
    let spec = task_dir(&project, "slow-one").join("SPEC.md");
    wait_for("research to finish", Duration::from_secs(20), || {
        spec.is_file()
    });
    // Kill baton while the implementer runs (its dispatch file is written
    // before it starts).
    let state = project.path().join(".baton/tasks/slow-one");
    wait_for("the implementer to start", Duration::from_secs(20), || {
        std::fs::read_dir(&state).is_ok_and(|entries| {
            entries.filter_map(Result::ok).any(|entry| {
                entry
                    .path()
                    .join("dispatch/001-implementation.json")
                    .is_file()
            })
        })
    });
    // A second `task run` meanwhile is refused: one run per task.
    let second = project.baton(&["task", "run", "slow-one"]);
    assert_eq!(second.code, 3, "{}", second.stderr);
    assert!(second.stderr.contains("is running"), "{}", second.stderr);
    child.kill().expect("kill -9");
    let _ = child.wait();
    let record: Value =
        serde_json::from_str(&read(&task_dir(&project, "slow-one").join("task.json")))
            .expect("json");
    let run_id = record["run_id"]
        .as_str()
        .expect("the run is recorded")
        .to_owned();
    project.write("baton.toml", &config(&[(role, &directive)]));
    let resumed = project.baton(&["task", "run", "slow-one", "--json"]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    // The same run finished; research was not run again.
    assert_eq!(project.run_ids(), std::slice::from_ref(&run_id));
    let status = project.json(&["status", &run_id, "--json"]);
    assert_eq!(status["status"], "success");
    let research = status["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .find(|stage| stage["stage"] == "research")
        .expect("research")
        .clone();
    assert_eq!(research["attempts"], 1, "{research}");
    assert_eq!(names(&project, true), ["slow-one"]);
}

#[test]
fn one_profile_for_every_role_is_refused_unless_allowed_and_a_prose_verdict_is_an_error() {
    // The referee would judge the implementer's work under its own profile.
    let project = project_with(&[]);
    project.baton(&["task", "new", "Prose"]);
    let refused = project.baton(&["task", "run", "prose"]);
    assert_eq!(refused.code, 3, "{}", refused.stderr);
    assert!(
        refused.stderr.contains(
            "the referee would judge the implementation under the implementer's own agent profile `fake`"
        ) && refused.stderr.contains("self_review = \"allow\""),
        "{}",
        refused.stderr
    );
    assert!(
        !project.path().join("tasks/prose/SPEC.md").exists(),
        "nothing ran"
    );

    // Allowed: it runs, with a note. The stand-in agent writes one line of
    // prose for VERDICT.md too, which is an error naming the file.
    let mut config = config(&[]);
    config.push_str("\n[governance]\nself_review = \"allow\"\n");
    project.write("baton.toml", &config);
    let run = project.baton(&["task", "run", "prose"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "note: task prose: the referee runs under the implementer's agent profile `fake` (allowed by [governance] self_review)"
        ),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("prose/VERDICT.md: read the verdict: no line says"),
        "{}",
        run.stderr
    );
}
