//! Notices for people (`[notify]` in baton.toml, `--notify CMD`): a gate
//! that starts waiting, a run that fails, a run that ends — posted to a
//! webhook (a real HTTP server here) and given to a command in
//! `BATON_NOTIFY_*` variables; a notice that cannot be sent is a warning.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::project::{HEADER, Project, run_id, stage, wait_bounded, wait_for};

/// A webhook on a free port that answers `status` and keeps the JSON bodies
/// posted to it.
struct Hook {
    url: String,
    bodies: Arc<Mutex<Vec<Value>>>,
}

impl Hook {
    fn start(status: u16) -> Hook {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
        let url = format!("http://{}/hook", listener.local_addr().expect("address"));
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&bodies);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut reader = BufReader::new(stream);
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some((name, value)) = line.split_once(':')
                        && name.eq_ignore_ascii_case("content-length")
                    {
                        length = value.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; length];
                if reader.read_exact(&mut body).is_ok()
                    && let Ok(value) = serde_json::from_slice(&body)
                {
                    kept.lock().expect("lock").push(value);
                }
                let _ = reader.get_mut().write_all(
                    format!(
                        "HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                    )
                    .as_bytes(),
                );
            }
        });
        Hook { url, bodies }
    }

    fn bodies(&self) -> Vec<Value> {
        self.bodies.lock().expect("lock").clone()
    }
}

/// A gate `review`, then `after`.
fn gate_workflow() -> String {
    format!(
        "{HEADER}{}{}",
        stage(
            "review",
            "echo plan > outputs/plan.md",
            "    writes_to: [plan.md]\n    human_gate: true\n"
        ),
        stage("after", "true", "    depends_on: [review]\n")
    )
}

/// What the notify command writes: one line per notice.
const RECORD: &str = r#"printf '%s|%s|%s|%s\n' "$BATON_NOTIFY_EVENT" "$BATON_NOTIFY_STATUS" "${BATON_NOTIFY_STAGE:-}" "$BATON_NOTIFY_TEXT" >> notices.txt"#;

fn notices(project: &Project) -> Vec<String> {
    std::fs::read_to_string(project.path().join("notices.txt"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_waiting_gate_a_failure_and_an_end_reach_the_webhook_with_a_link_to_the_page() {
    let hook = Hook::start(200);
    let project = Project::new();
    project.write(
        "baton.toml",
        &format!(
            "[notify]\nwebhook = \"{}\"\nurl = \"http://baton.example:7777/\"\n",
            hook.url
        ),
    );
    project.write("wf.yaml", &gate_workflow());
    let run = project.baton(&["run", "wf.yaml", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let id = run_id(&run);
    let bodies = hook.bodies();
    assert_eq!(bodies.len(), 1, "{bodies:?}");
    let page = format!("http://baton.example:7777/runs/{id}");
    assert_eq!(bodies[0]["event"], "gate_waiting");
    assert_eq!(bodies[0]["stage"], "review");
    assert_eq!(bodies[0]["run_id"], id.as_str());
    assert_eq!(bodies[0]["url"], page.as_str());
    assert_eq!(
        bodies[0]["text"],
        format!("baton: run {id} waits at gate 'review' for a decision — {page}")
    );

    assert_eq!(project.baton(&["gate", "approve", &id, "review"]).code, 0);
    assert_eq!(project.baton(&["resume", &id]).code, 0);
    let ended = &hook.bodies()[1];
    assert_eq!(ended["event"], "run_ended", "{ended}");
    assert_eq!(ended["status"], "success", "{ended}");
    assert!(ended["stage"].is_null(), "{ended}");

    project.write(
        "bad.yaml",
        &format!("{HEADER}{}", stage("broken", "exit 3", "")),
    );
    let failed = project.baton(&["run", "bad.yaml"]);
    assert_eq!(failed.code, 2, "{}", failed.stderr);
    let notice = &hook.bodies()[2];
    assert_eq!(notice["event"], "run_failed", "{notice}");
    assert!(
        notice["text"]
            .as_str()
            .is_some_and(|text| text.contains("failed: required stage 'broken' failed")),
        "{notice}"
    );
}

#[test]
fn a_run_waiting_at_its_gate_runs_the_notify_command_while_it_waits() {
    let project = Project::new();
    project.write("wf.yaml", &gate_workflow());
    let mut child = project.spawn(&["run", "wf.yaml", "--wait-gates", "--notify", RECORD]);
    wait_for("the gate's notice", Duration::from_secs(60), || {
        !notices(&project).is_empty()
    });
    assert!(
        child.try_wait().expect("poll").is_none(),
        "the run still waits"
    );
    let id = project.run_ids().remove(0);
    assert_eq!(
        notices(&project),
        [format!(
            "gate_waiting|awaiting_human|review|baton: run {id} waits at gate 'review' for a decision"
        )]
    );
    assert_eq!(project.baton(&["gate", "approve", &id, "review"]).code, 0);
    assert_eq!(
        wait_bounded(&mut child, "the run", Duration::from_secs(60)),
        0
    );
    assert_eq!(
        notices(&project)[1],
        format!("run_ended|success||baton: run {id} succeeded")
    );
}

#[test]
fn a_notice_that_cannot_be_sent_is_a_warning_and_the_run_ends_as_it_would() {
    let refusing = Hook::start(500);
    let project = Project::new();
    project.write(
        "baton.toml",
        &format!("[notify]\nwebhook = \"{}\"\n", refusing.url),
    );
    project.write("wf.yaml", &format!("{HEADER}{}", stage("one", "true", "")));
    let run = project.baton(&["run", "wf.yaml", "--notify", "exit 7"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "warning: the notification through the webhook {}: answered 500",
            refusing.url
        )),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("warning: the notification through the command `exit 7`: exited with code 7"),
        "{}",
        run.stderr
    );
    let status: Value = project.json(&["status", "latest", "--json"]);
    assert_eq!(status["status"], "success");
}
