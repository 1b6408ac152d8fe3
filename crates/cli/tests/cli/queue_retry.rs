//! Queue stages can be tried again: after a failure, a rerun or a driver
//! killed mid-run, the next attempt runs a job of its own (or, after a
//! crash, adopts the one the cut-short attempt left) and the run finishes.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::project::{Project, run_id};

/// Short leases, sweeps and backoffs for the run's own worker: a job whose
/// worker was killed is handed out again within a second, not half a
/// minute, and a failing job's retries follow each other quickly.
const WORKER_ENV: [(&str, &str); 5] = [
    ("BATON_WORKER_LEASE_MS", "600"),
    ("BATON_WORKER_HEARTBEAT_MS", "200"),
    ("BATON_WORKER_SWEEP_MS", "100"),
    ("BATON_WORKER_POLL_MS", "20"),
    ("BATON_WORKER_BACKOFF_MS", "10"),
];

fn baton(project: &Project, args: &[&str]) -> baton_test_support::Run {
    let env: Vec<(String, String)> = WORKER_ENV
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect();
    baton_test_support::run_bounded_with(
        std::path::Path::new(env!("CARGO_BIN_EXE_baton")),
        project.path(),
        args,
        &env,
        Duration::from_secs(120),
    )
}

const HEADER: &str = "name: q\nversion: '1'\ndescription: d\ntrigger: {source: manual}\nstages:\n";

/// A queue stage that fails until the file `allow` exists, and records each
/// execution.
const FAILS_UNTIL_ALLOWED: &str = "  - name: q\n    kind: execute\n    description: d\n    executor: worker_queue\n    agent: {role: inline}\n    script: |\n      echo run >> \"$BATON_PROJECT_DIR/executions.txt\"\n      test -e \"$BATON_PROJECT_DIR/allow\"\n      echo done > outputs/q.txt\n    writes_to: [q.txt]\n";

fn executions(project: &Project) -> usize {
    std::fs::read_to_string(project.path().join("executions.txt"))
        .unwrap_or_default()
        .lines()
        .count()
}

fn stage_status(project: &Project, id: &str) -> Value {
    project.json(&["status", id, "--json"])["stages"][0].clone()
}

#[test]
fn a_failed_queue_stage_runs_a_new_job_on_resume_and_on_rerun() {
    let project = Project::new();
    project.write("wf.yaml", &format!("{HEADER}{FAILS_UNTIL_ALLOWED}"));
    let run = baton(&project, &["run", "wf.yaml", "--json"]);
    assert_ne!(run.code, 0, "the job fails every try");
    let id = run_id(&run);
    let failed = executions(&project);
    assert!(failed >= 1);

    project.write("allow", "");
    let resumed = baton(&project, &["resume", &id]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert_eq!(executions(&project), failed + 1, "the resume ran a new job");
    assert_eq!(stage_status(&project, &id)["status"], "success");

    let rerun = baton(&project, &["rerun", &id, "q"]);
    assert_eq!(rerun.code, 0, "{}", rerun.stderr);
    assert_eq!(executions(&project), failed + 2, "the rerun ran a new job");
    assert_eq!(stage_status(&project, &id)["status"], "success");
    let jobs = project.json(&["queue", "list", "--json"]);
    assert_eq!(jobs.as_array().expect("jobs").len(), 3, "{jobs}");
}

/// A queue fan-out of `ITEMS` items, each sleeping a moment.
const ITEMS: usize = 6;

fn fan_out_workflow() -> String {
    let items: Vec<String> = (0..ITEMS).map(|index| format!("\"i{index}\"")).collect();
    format!(
        "{HEADER}  - name: src\n    kind: execute\n    description: d\n    executor: inline\n    script: |\n      echo '{{\"items\": [{}]}}' > outputs/src.json\n    writes_to: [src.json]\n  - name: fan\n    kind: execute\n    description: d\n    executor: inline\n    depends_on: [src]\n    script: 'true'\n    writes_to: ['fan-{{id}}.txt']\n    fan_out: {{source: src, field: items, key: id, mode: worker_queue, script: 'sleep 0.05; printf %s {{id}} > \"outputs/fan-$BATON_ITEM_NAME.txt\"'}}\n",
        items.join(", ")
    )
}

/// `baton run` killed with SIGKILL after a varying delay, then resumed
/// until the run ends: every one of `loops` runs finishes with every item's
/// output, however the kills land.
#[test]
fn a_queue_fan_out_killed_at_any_point_finishes_on_resume() {
    let loops: u64 = std::env::var("BATON_QUEUE_CRASH_LOOPS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(50);
    let project = Project::new();
    project.write("wf.yaml", &fan_out_workflow());
    let mut killed = 0;
    for round in 0..loops {
        let before = project.run_ids();
        let mut child = project
            .command(&["run", "wf.yaml"])
            .envs(WORKER_ENV)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("baton starts");
        // Spread over the run's life (it takes a few hundred ms).
        let delay = Duration::from_millis(30 + (round * 37) % 400);
        let start = Instant::now();
        while start.elapsed() < delay && child.try_wait().expect("wait").is_none() {
            std::thread::sleep(Duration::from_millis(2));
        }
        if child.try_wait().expect("wait").is_none() {
            killed += 1;
        }
        let _ = child.kill();
        let _ = child.wait();
        let Some(id) = project
            .run_ids()
            .into_iter()
            .find(|id| !before.contains(id))
        else {
            continue; // killed before the run was recorded
        };
        let mut status = project.json(&["status", &id, "--json"]);
        for _ in 0..5 {
            if status["status"] == "success" {
                break;
            }
            let resumed = baton(&project, &["resume", &id]);
            assert!(
                resumed.code == 0 || resumed.code == 2,
                "round {round}: {}",
                resumed.stderr
            );
            status = project.json(&["status", &id, "--json"]);
        }
        assert_eq!(status["status"], "success", "round {round}: {status}");
        let workspace = std::path::PathBuf::from(status["workspace"].as_str().expect("workspace"));
        for index in 0..ITEMS {
            let output = workspace.join(format!("outputs/fan-i{index}.txt"));
            assert_eq!(
                std::fs::read_to_string(&output).ok().as_deref(),
                Some(format!("i{index}").as_str()),
                "round {round}"
            );
        }
    }
    eprintln!("{loops} runs, {killed} killed mid-run: every one finished");
    assert!(killed > loops / 2, "most kills land while the run goes on");
}
