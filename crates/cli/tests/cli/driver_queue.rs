//! Queue stages through the driver protocol: `next` enqueues a queue
//! stage's job and waits for it, as `baton run` does, working it with a
//! queue worker of its own unless told to leave it to `baton worker`.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use crate::project::{HEADER, Project, wait_for};

/// The jobs in the project's queue.
fn jobs(project: &Project) -> Vec<Value> {
    let jobs = project.json(&["queue", "list", "--json"]);
    jobs.as_array().expect("jobs").clone()
}

/// A `next` killed while its queue stage's job waited for a worker left
/// the job queued and the stage running. The next `next` waits for that
/// job instead of enqueuing another: the script runs once, and the stage
/// succeeds with what it wrote.
#[test]
fn a_queue_stage_left_by_a_killed_next_has_its_one_job_run_once() {
    let project = Project::new();
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}  - name: q\n    kind: execute\n    description: d\n    executor: worker_queue\n    agent: {{role: inline}}\n    script: 'echo ran >> \"$BATON_PROJECT_DIR/runs.log\" && printf done > outputs/q.txt'\n    writes_to: [q.txt]\n"
        ),
    );
    let created = project.json(&["run", "wf.yaml", "--driver", "external", "--json"]);
    let id = created["run_id"].as_str().expect("id").to_owned();
    // No worker of its own: the job waits in the queue.
    let mut first = project
        .command(&["next", &id, "--no-local-worker", "--json"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("next starts");
    wait_for("the stage's job", Duration::from_secs(30), || {
        !jobs(&project).is_empty()
    });
    first.kill().expect("kill -9 of next");
    first.wait().expect("reaped");
    assert!(!project.path().join("runs.log").exists());

    let again = project.json(&["next", &id, "--json"]);
    assert_eq!(again, json!([]), "nothing for an agent");
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "success", "{status}");
    let jobs = jobs(&project);
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(jobs[0]["status"], "succeeded", "{jobs:?}");
    let log = std::fs::read_to_string(project.path().join("runs.log")).expect("log");
    assert_eq!(log, "ran\n");
}
