//! Errors about a workflow file quote at most the offending line, bounded,
//! and nothing of a file that is not a regular file.

use std::time::Duration;

use crate::project::{HEADER, Project, stage};

const MARKER: &str = "hunter2-marker";

/// `baton ARGS` with a secret in its environment, text and JSON.
fn both_formats(project: &Project, args: &[&str]) -> [baton_test_support::Run; 2] {
    let run = |extra: &[&str]| {
        let args: Vec<&str> = args.iter().chain(extra).copied().collect();
        baton_test_support::run_bounded_with(
            std::path::Path::new(env!("CARGO_BIN_EXE_baton")),
            project.path(),
            &args,
            &[("BATON_TEST_SECRET".to_owned(), MARKER.to_owned())],
            Duration::from_secs(30),
        )
    };
    [run(&[]), run(&["--format", "json"])]
}

fn including(project: &Project, path: &str) {
    project.write(
        "wf.yaml",
        &format!(
            "{}include:\n  - path: {path}\n",
            HEADER.replace("stages:\n", &format!("stages:\n{}", stage("a", "true", "")))
        ),
    );
}

#[test]
fn an_include_of_proc_self_environ_is_refused_without_quoting_it() {
    let project = Project::new();
    including(&project, "/proc/self/environ");
    for run in both_formats(&project, &["compile", "wf.yaml"]) {
        assert_eq!(run.code, 1, "{run:?}");
        assert!(
            run.stderr
                .contains("/proc/self/environ is not a regular file"),
            "{}",
            run.stderr
        );
        assert!(run.stderr.contains("wf.yaml"), "located: {}", run.stderr);
        assert!(!run.stderr.contains(MARKER), "{}", run.stderr);
        assert!(!run.stdout.contains(MARKER), "{}", run.stdout);
    }
}

#[test]
fn an_include_of_a_fifo_is_refused_without_waiting_for_a_writer() {
    let project = Project::new();
    #[expect(clippy::disallowed_methods, reason = "the test makes a FIFO")]
    let made = std::process::Command::new("mkfifo")
        .arg(project.path().join("pipe.yaml"))
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    including(&project, "pipe.yaml");
    for run in both_formats(&project, &["compile", "wf.yaml"]) {
        assert_eq!(run.code, 1, "{run:?}");
        assert!(
            run.stderr.contains("pipe.yaml is not a regular file"),
            "{}",
            run.stderr
        );
    }
}

#[test]
fn a_long_line_that_fails_to_parse_is_quoted_in_a_bounded_slice() {
    let project = Project::new();
    let long = format!("{}: [", "k".repeat(10_000));
    project.write("wf.yaml", &format!("{HEADER}{long}\n"));
    for run in both_formats(&project, &["compile", "wf.yaml"]) {
        assert_eq!(run.code, 1, "{run:?}");
        let quoted = run
            .stderr
            .split(|c: char| c != 'k')
            .map(str::len)
            .max()
            .unwrap_or(0);
        assert!(quoted <= 200, "quotes {quoted} characters: {}", run.stderr);
        assert!(run.stderr.len() < 4_000, "{}", run.stderr.len());
    }
}
