//! Queue stages through the driver protocol: `next` enqueues a queue
//! stage's job and waits for it, as `baton run` does, working it with a
//! queue worker of its own unless told to leave it to `baton worker`.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use crate::driver::create;
use crate::project::{HEADER, Project, wait_for};

/// An externally driven run of one queue stage `q` running `script`
/// (which writes `outputs/q.txt`); its id.
fn queue_run(project: &Project, script: &str) -> String {
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}  - name: q\n    kind: execute\n    description: d\n    executor: worker_queue\n    agent: {{role: inline}}\n    script: '{script}'\n    writes_to: [q.txt]\n"
        ),
    );
    create(project, "wf.yaml").0
}

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
    let id = queue_run(
        &project,
        "echo ran >> \"$BATON_PROJECT_DIR/runs.log\" && printf done > outputs/q.txt",
    );
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

/// The worker a `next` runs works only its own run's jobs: another's (and
/// one enqueued by hand) stay queued for their own workers, so the call
/// neither runs them nor waits for them.
#[test]
fn the_worker_of_next_leaves_other_jobs_alone() {
    let project = Project::new();
    let other = project.baton(&[
        "queue",
        "enqueue",
        "--script",
        "touch \"$BATON_PROJECT_DIR/other-ran\"",
        "--key",
        "someone-else/q/-/1",
    ]);
    assert_eq!(other.code, 0, "{}", other.stderr);
    let id = queue_run(&project, "printf done > outputs/q.txt");
    assert_eq!(project.json(&["next", &id, "--json"]), json!([]));
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "success", "{status}");
    let statuses: Vec<(String, String)> = jobs(&project)
        .iter()
        .map(|job| {
            let key = job["idempotency_key"].as_str().unwrap_or_default();
            (
                key.to_owned(),
                job["status"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert!(
        statuses.contains(&("someone-else/q/-/1".to_owned(), "available".to_owned())),
        "{statuses:?}"
    );
    assert!(!project.path().join("other-ran").exists());
}

/// A `next` killed while its own worker ran the stage's job: the next
/// `next` kills what that job left running and runs it again at once,
/// rather than waiting for its lease to expire and running it beside the
/// first copy.
#[test]
fn a_job_whose_worker_died_with_next_runs_again_alone() {
    let project = Project::new();
    // The first copy writes its pid and sleeps; the second finishes at once.
    project.write(
        "job.sh",
        "log=\"$BATON_PROJECT_DIR/runs.log\"\nif [ -e \"$log\" ]; then\n  echo again >> \"$log\"\nelse\n  echo $$ > \"$BATON_PROJECT_DIR/first.pid\"\n  echo first >> \"$log\"\n  sleep 60\n  echo first-ended >> \"$log\"\nfi\nprintf done > outputs/q.txt\n",
    );
    let id = queue_run(&project, "bash \"$BATON_PROJECT_DIR/job.sh\"");
    let pid_file = project.path().join("first.pid");
    let mut first = project
        .command(&["next", &id, "--json"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("next starts");
    wait_for("the job's start", Duration::from_secs(30), || {
        std::fs::read_to_string(&pid_file).is_ok_and(|pid| pid.ends_with('\n'))
    });
    first.kill().expect("kill -9 of next");
    first.wait().expect("reaped");

    // Well within the job's 30 s lease: the job is given back at once.
    let started = std::time::Instant::now();
    let again = project.json(&["next", &id, "--json"]);
    assert_eq!(again, json!([]));
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "{:?}",
        started.elapsed()
    );
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "success", "{status}");
    // The first copy was killed, not left running beside the second.
    let pid = std::fs::read_to_string(&pid_file).expect("pid");
    let state = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
        .ok()
        .and_then(|stat| {
            stat.rsplit(')')
                .next()
                .map(|rest| rest.trim().chars().next())
        })
        .flatten();
    assert!(
        matches!(state, None | Some('Z')),
        "the first copy still runs: {state:?}"
    );
    let log = std::fs::read_to_string(project.path().join("runs.log")).expect("log");
    assert_eq!(log, "first\nagain\n");
    let jobs = jobs(&project);
    assert_eq!(jobs.len(), 1, "{jobs:?}");
}
