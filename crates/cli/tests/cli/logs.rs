//! `baton logs RUN [STAGE]`: plain, `--format json`, and `--follow` while
//! the run goes on.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::project::{HEADER, Project, run_id, stage, wait_bounded, wait_for};

#[test]
fn logs_show_every_stage_or_one_plain_and_as_json() {
    let project = Project::new();
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}{}{}{}",
            stage("one", "echo alpha\necho warning >&2", ""),
            stage("two", "printf 'beta\\ngamma\\n'", "    depends_on: [one]\n"),
            stage(
                "never",
                "echo unseen",
                "    when: '\"{mode}\" contains \"x\"'\n"
            ),
        )
        .replace(
            "trigger: {source: manual}",
            "trigger: {source: manual, params: {mode: y}}",
        ),
    );
    let run = project.baton(&["run", "wf.yaml", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let id = run_id(&run);

    let all = project.baton(&["logs", &id]);
    assert_eq!(all.code, 0, "{}", all.stderr);
    assert_eq!(
        all.stdout,
        "one | stdout | alpha\none | stderr | warning\ntwo | stdout | beta\ntwo | stdout | gamma\n",
        "stages in order, stdout before stderr; a skipped stage has no logs"
    );

    let two = project.baton(&["logs", &id, "two"]);
    assert_eq!(two.code, 0, "{}", two.stderr);
    assert_eq!(two.stdout, "two | stdout | beta\ntwo | stdout | gamma\n");

    let entries = project.json(&["logs", &id, "--format", "json"]);
    assert_eq!(
        entries,
        json!([
            {"stage": "one", "attempt": 1, "transcript": null, "stdout": "alpha\n", "stderr": "warning\n"},
            {"stage": "two", "attempt": 1, "transcript": null, "stdout": "beta\ngamma\n", "stderr": ""},
        ])
    );
    let one = project.json(&["logs", &id, "one", "--json"]);
    assert_eq!(
        one,
        json!([{"stage": "one", "attempt": 1, "transcript": null, "stdout": "alpha\n", "stderr": "warning\n"}])
    );

    let unknown_stage = project.baton(&["logs", &id, "nope"]);
    assert_eq!(unknown_stage.code, 1);
    assert!(
        unknown_stage
            .stderr
            .contains(&format!("run {id} has no stage or unit named 'nope'")),
        "{}",
        unknown_stage.stderr
    );
    let unknown_run = project.baton(&["logs", "no-such-run"]);
    assert_eq!(unknown_run.code, 1);
    assert!(
        unknown_run.stderr.contains("no run with id no-such-run"),
        "{}",
        unknown_run.stderr
    );
}

#[test]
fn logs_follow_prints_lines_as_they_come_and_ends_with_the_run() {
    let project = Project::new();
    // `ready` first; then, once the test has seen it arrive through
    // `--follow` (it touches `go`), a tick every 0.3 s for 1.5 s.
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}{}",
            stage(
                "ticker",
                "echo ready\n\
                 for _ in $(seq 400); do test -f \"$BATON_PROJECT_DIR/go\" && break; sleep 0.05; done\n\
                 for i in 1 2 3 4 5; do echo \"tick $i\"; sleep 0.3; done",
                ""
            )
        ),
    );
    let mut run = project
        .command(&["run", "wf.yaml"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("baton run starts");
    let mut id = String::new();
    wait_for(
        "the run to be recorded",
        Duration::from_secs(20),
        || match project.run_ids().pop() {
            Some(found) => {
                id = found;
                true
            }
            None => false,
        },
    );

    let mut follow = project
        .command(&["logs", &id, "--follow"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("baton logs starts");
    let stdout = follow.stdout.take().expect("stdout");
    let (sender, lines) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if sender.send((Instant::now(), line)).is_err() {
                break;
            }
        }
    });

    let (_, first) = lines
        .recv_timeout(Duration::from_secs(20))
        .expect("--follow shows the first line while the stage runs");
    assert_eq!(first, "ticker | stdout | ready");
    project.write("go", "");

    let mut arrivals = Vec::new();
    while let Ok((at, line)) = lines.recv_timeout(Duration::from_secs(20)) {
        arrivals.push((at, line));
    }
    let texts: Vec<&str> = arrivals.iter().map(|(_, line)| line.as_str()).collect();
    assert_eq!(
        texts,
        (1..=5)
            .map(|i| format!("ticker | stdout | tick {i}"))
            .collect::<Vec<_>>(),
        "every line once, in order"
    );
    let spread = arrivals[4].0 - arrivals[0].0;
    assert!(
        spread >= Duration::from_millis(600),
        "the ticks arrive as they are written (1.2 s apart from first to last), not all at the end: {spread:?}"
    );

    let code = wait_bounded(&mut follow, "baton logs --follow", Duration::from_secs(20));
    let ended_at = Instant::now();
    assert_eq!(code, 0);
    reader.join().expect("the reader ends");
    assert_eq!(
        wait_bounded(&mut run, "baton run", Duration::from_secs(20)),
        0
    );
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "success");
    // It ended because the run did, soon after the last line.
    assert!(
        ended_at - arrivals[4].0 < Duration::from_secs(10),
        "--follow ended {:?} after the last line",
        ended_at - arrivals[4].0
    );
}
