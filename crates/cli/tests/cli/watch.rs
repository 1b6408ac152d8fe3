//! `baton status RUN --watch`: follows a run until it stops; one line per
//! change off a terminal, the table redrawn on one; the exit code says how
//! the run stopped.

use std::process::Command;
use std::time::Duration;

use crate::project::{HEADER, Project, stage, wait_for};

const WITNESS: &str = "echo \"$BATON_STAGE\" >> \"$BATON_PROJECT_DIR/witness.txt\"";

/// `a → b → c`, each taking `seconds`; `b` exits with `b_exit`.
fn chain(project: &Project, seconds: &str, b_exit: u8) {
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}{}{}{}",
            stage("a", &format!("{WITNESS}\nsleep {seconds}"), ""),
            stage(
                "b",
                &format!("{WITNESS}\nsleep {seconds}\nexit {b_exit}"),
                "    depends_on: [a]\n"
            ),
            stage(
                "c",
                &format!("{WITNESS}\nsleep {seconds}"),
                "    depends_on: [b]\n"
            ),
        ),
    );
}

/// The watch's lines about `stage`, in order: their status words.
fn statuses_of(stdout: &str, stage: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace().skip(1);
            let status = words.next()?;
            (words.next() == Some(stage)).then(|| status.to_owned())
        })
        .collect()
}

#[test]
fn off_a_terminal_each_change_is_a_line_until_the_run_ends() {
    let project = Project::new();
    chain(&project, "1.5", 0);
    let mut driver = project.spawn(&["run", "wf.yaml"]);
    wait_for("a to start", Duration::from_secs(30), || {
        !project.witness().is_empty()
    });
    let watch = project.baton(&["status", "latest", "--watch", "--interval", "100ms"]);
    assert_eq!(watch.code, 0, "{}\n{}", watch.stdout, watch.stderr);
    // Seen while it ran, then seen to succeed: one line per change.
    let c = statuses_of(&watch.stdout, "c");
    assert_eq!(
        c.last().map(String::as_str),
        Some("success"),
        "{}",
        watch.stdout
    );
    assert!(
        c.len() >= 2,
        "c was watched before it ran: {}",
        watch.stdout
    );
    assert_eq!(
        c.iter().filter(|status| *status == "success").count(),
        1,
        "{}",
        watch.stdout
    );
    for name in ["a", "b"] {
        assert_eq!(
            statuses_of(&watch.stdout, name).last().map(String::as_str),
            Some("success"),
            "{}",
            watch.stdout
        );
    }
    assert!(
        watch.stderr.contains(" success: 3 succeeded in "),
        "{}",
        watch.stderr
    );
    assert!(driver.wait().expect("driver").success());
}

#[test]
fn a_failed_run_ends_the_watch_with_exit_2_and_json_lines_parse() {
    let project = Project::new();
    chain(&project, "0.5", 3);
    let mut driver = project.spawn(&["run", "wf.yaml"]);
    wait_for("a to start", Duration::from_secs(30), || {
        !project.witness().is_empty()
    });
    let watch = project.baton(&[
        "status",
        "latest",
        "--watch",
        "--interval",
        "100ms",
        "--format",
        "json",
    ]);
    assert_eq!(watch.code, 2, "{}\n{}", watch.stdout, watch.stderr);
    let lines: Vec<serde_json::Value> = watch
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    let last = lines.last().expect("a last line");
    assert_eq!(last["status"], "failed", "{}", watch.stdout);
    assert_eq!(last["summary"]["stages"]["failed"], 1, "{}", watch.stdout);
    assert!(
        lines
            .iter()
            .any(|line| line["stage"] == "b" && line["status"] == "failed"),
        "{}",
        watch.stdout
    );
    let _ = driver.wait();
}

#[test]
fn a_dead_driver_ends_the_watch_pointing_at_resume() {
    let project = Project::new();
    chain(&project, "2", 0);
    let mut driver = project.spawn(&["run", "wf.yaml"]);
    wait_for("a to start", Duration::from_secs(30), || {
        !project.witness().is_empty()
    });
    driver.kill().expect("kill -9 the driver");
    let _ = driver.wait();
    let watch = project.baton(&["status", "latest", "--watch", "--interval", "100ms"]);
    assert_eq!(watch.code, 2, "{}\n{}", watch.stdout, watch.stderr);
    assert!(
        watch.stderr.contains("driver gone") && watch.stderr.contains("`baton resume "),
        "{}",
        watch.stderr
    );
}

#[test]
fn on_a_terminal_the_table_is_redrawn() {
    let project = Project::new();
    chain(&project, "0", 0);
    let run = project.baton(&["run", "wf.yaml"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let line = format!(
        "stty cols 120 rows 40 2>/dev/null; exec '{}' status latest --watch",
        env!("CARGO_BIN_EXE_baton")
    );
    #[expect(
        clippy::disallowed_methods,
        reason = "script(1) gives baton a pseudo-terminal"
    )]
    let output = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .current_dir(project.path())
        .env("TERM", "xterm-256color")
        .env("NO_COLOR", "1")
        .env_remove("BATON_DATABASE_URL")
        .output()
        .expect("script(1) from util-linux is needed to test the terminal display");
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(
        text.contains("\u{1b}[H\u{1b}[2J"),
        "cleared and redrawn: {text:?}"
    );
    assert!(text.contains("index") && text.contains("stage"), "{text}");
    assert!(text.contains("watching run "), "{text}");
    assert!(text.contains(" success: 3 succeeded in "), "{text}");
}
