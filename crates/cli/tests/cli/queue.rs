//! The queue suite (S3): thousands of shell jobs worked by several
//! `baton worker` processes while a nemesis `kill -9`s workers (and
//! restarts them) and SIGSTOPs one for longer than the lease.
//!
//! Each job appends `job-id epoch worker-pid` to a file of its own. After
//! the run: every job succeeded exactly once in the store, none is lost,
//! every job's side effect happened, the recorded outcome is the current
//! epoch's, and every extra execution was by a worker the nemesis killed or
//! stopped. Rejected stale completions are counted and reported.
//!
//! Mixed into the run (enqueued between the two halves of the healthy
//! jobs, so they are claimed while healthy jobs flow and the nemesis acts):
//! a few poison jobs that always exit 1. Each must end `error` after
//! exactly `max_attempts` claims, each claim's run leaving one line.
//!
//! SQLite always (2 000 jobs, 4 workers); PostgreSQL when
//! `BATON_TEST_DATABASE_URL` is set (5 000 jobs, 8 workers; see
//! `baton_test_support::needs`). `BATON_QUEUE_JOBS` overrides the job count (scripts/soak).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Poison jobs mixed into a suite run, and their attempt limit.
const POISON_JOBS: usize = 5;
const POISON_ATTEMPTS: i64 = 3;

/// Test timings, generous enough for a busy two-core machine.
pub(crate) const TIMINGS: [(&str, &str); 6] = [
    ("BATON_WORKER_LEASE_MS", "2000"),
    ("BATON_WORKER_HEARTBEAT_MS", "500"),
    ("BATON_WORKER_SWEEP_MS", "1000"),
    ("BATON_WORKER_POLL_MS", "100"),
    ("BATON_WORKER_GRACE_MS", "1000"),
    ("BATON_WORKER_BACKOFF_MS", "100"),
];

pub(crate) struct Suite {
    pub(crate) dir: PathBuf,
    pub(crate) database_url: Option<String>,
    pub(crate) queue: String,
}

impl Suite {
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        #[expect(
            clippy::disallowed_methods,
            reason = "the suite runs, kills and pauses worker processes"
        )]
        let mut command = Command::new(env!("CARGO_BIN_EXE_baton"));
        command.args(args).current_dir(&self.dir);
        command.env_remove("BATON_DATABASE_URL");
        if let Some(url) = &self.database_url {
            command.env("BATON_DATABASE_URL", url);
        }
        for (name, value) in TIMINGS {
            command.env(name, value);
        }
        command
    }

    pub(crate) fn json(&self, args: &[&str]) -> Value {
        let output = self.command(args).output().expect("run baton");
        assert!(
            output.status.success(),
            "baton {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).expect("JSON output")
    }

    pub(crate) fn start_worker(&self) -> Child {
        self.command(&[
            "worker",
            "--queue",
            &self.queue,
            "--concurrency",
            "4",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start a worker")
    }

    fn succeeded(&self) -> usize {
        self.count("succeeded")
    }

    fn count(&self, status: &str) -> usize {
        self.try_count(status).expect("baton queue list")
    }

    /// Jobs of the suite's queue in `status`; `None` while the store is
    /// unreachable.
    pub(crate) fn try_count(&self, status: &str) -> Option<usize> {
        let output = self
            .command(&[
                "queue",
                "list",
                "--queue",
                &self.queue,
                "--status",
                status,
                "--json",
            ])
            .output()
            .ok()?;
        if !output.status.success() {
            return None;
        }
        let jobs: Value = serde_json::from_slice(&output.stdout).ok()?;
        Some(jobs.as_array().map_or(0, Vec::len))
    }
}

/// `baton worker` processes that a failed assertion cannot leak: whatever
/// is still running when the pool is dropped (the test ended, or unwound)
/// is killed and reaped, so no worker outlives its test.
pub(crate) struct Workers(Vec<Child>);

impl Workers {
    pub(crate) fn start(suite: &Suite, count: usize) -> Workers {
        Workers((0..count).map(|_| suite.start_worker()).collect())
    }

    /// Sends SIGTERM to every worker and waits for each, in order: their
    /// pids and outputs.
    pub(crate) fn stop(mut self) -> Vec<(u32, std::process::Output)> {
        for child in &self.0 {
            signal(child.id(), "-TERM");
        }
        std::mem::take(&mut self.0)
            .into_iter()
            .map(|child| (child.id(), child.wait_with_output().expect("worker exits")))
            .collect()
    }
}

impl std::ops::Deref for Workers {
    type Target = Vec<Child>;
    fn deref(&self) -> &Vec<Child> {
        &self.0
    }
}

impl std::ops::DerefMut for Workers {
    fn deref_mut(&mut self) -> &mut Vec<Child> {
        &mut self.0
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

pub(crate) fn signal(pid: u32, name: &str) {
    #[expect(clippy::disallowed_methods, reason = "the nemesis signals workers")]
    let _ = Command::new("kill").args([name, &pid.to_string()]).status();
}

fn queue_suite(
    database_url: Option<String>,
    backend: &str,
    jobs: usize,
    workers: usize,
    seed: u64,
) {
    let jobs = std::env::var("BATON_QUEUE_JOBS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(jobs);
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let suite = Suite {
        dir: dir.path().to_owned(),
        database_url,
        queue: format!("s3-{backend}-{}-{seed:x}", std::process::id()),
    };
    let script = format!(
        "echo \"$BATON_JOB_ID $BATON_JOB_EPOCH $BATON_WORKER_PID\" >> {}/\"$BATON_JOB_ID\"; sleep 0.0$((RANDOM % 5))",
        out.display()
    );
    // The side effect first, then the exit: every run of a poison job
    // leaves its line.
    let poison_script = format!(
        "echo \"$BATON_JOB_ID $BATON_JOB_EPOCH $BATON_WORKER_PID\" >> {}/\"$BATON_JOB_ID\"; echo poisoned >&2; exit 1",
        out.display()
    );
    let enqueue = |script: &str, count: usize, max_attempts: i64| -> Vec<i64> {
        let enqueued = suite.json(&[
            "queue",
            "enqueue",
            "--queue",
            &suite.queue,
            "--script",
            script,
            "--max-attempts",
            &max_attempts.to_string(),
            "--count",
            &count.to_string(),
            "--json",
        ]);
        assert_eq!(enqueued["created"].as_u64(), Some(count as u64));
        enqueued["ids"]
            .as_array()
            .expect("ids")
            .iter()
            .map(|id| id.as_i64().expect("an id"))
            .collect()
    };
    enqueue(&script, jobs / 2, 50);
    let poison: HashSet<i64> = enqueue(&poison_script, POISON_JOBS, POISON_ATTEMPTS)
        .into_iter()
        .collect();
    enqueue(&script, jobs - jobs / 2, 50);

    // Generous: the soak runs ten times the jobs on a loaded machine.
    let limit = Duration::from_secs(120 + jobs as u64 / 50);
    let started = Instant::now();
    let mut pool = Workers::start(&suite, workers);
    let mut rng = Rng(seed);
    let mut killed: HashSet<u32> = HashSet::new();
    let mut stopped: HashSet<u32> = HashSet::new();
    let mut finished_reports = Vec::new();
    let mut next_fault = Instant::now() + Duration::from_millis(800);
    let mut last_check = Instant::now();
    loop {
        assert!(
            started.elapsed() < limit,
            "{backend}: the queue did not drain in {limit:?} ({} of {jobs} succeeded)",
            suite.succeeded()
        );
        if Instant::now() >= next_fault {
            // The paused worker is spared afterwards: its report carries
            // the rejected late outcomes.
            let victim = loop {
                let candidate = rng.below(pool.len() as u64) as usize;
                if !stopped.contains(&pool[candidate].id()) {
                    break candidate;
                }
            };
            let pid = pool[victim].id();
            if stopped.is_empty() && rng.below(3) == 0 {
                // Paused past the lease: its jobs are taken over, and its
                // late outcomes must be rejected once it resumes.
                signal(pid, "-STOP");
                // Lease 2 s + sweep 1 s + a heartbeat: surely reaped and taken over.
                std::thread::sleep(Duration::from_millis(4500));
                signal(pid, "-CONT");
                stopped.insert(pid);
            } else {
                signal(pid, "-KILL");
                let _ = pool[victim].wait();
                killed.insert(pid);
                pool[victim] = suite.start_worker();
            }
            next_fault = Instant::now() + Duration::from_millis(500 + rng.below(1000));
        }
        if last_check.elapsed() > Duration::from_millis(700) {
            last_check = Instant::now();
            if suite.succeeded() == jobs && suite.count("error") == POISON_JOBS {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let elapsed = started.elapsed();
    for (pid, output) in pool.stop() {
        assert!(output.status.success(), "a worker failed at SIGTERM");
        let report = serde_json::from_slice::<Value>(&output.stdout).expect("report");
        finished_reports.push((pid, report));
    }
    let stale: u64 = finished_reports
        .iter()
        .map(|(_, report)| report["stale"].as_u64().unwrap_or(0))
        .sum();
    // Jobs a worker stopped itself because a heartbeat found their lease
    // taken over (so no late outcome was even attempted).
    let lost: u64 = finished_reports
        .iter()
        .map(|(_, report)| report["lost"].as_u64().unwrap_or(0))
        .sum();

    // The store: each job once, succeeded, its recorded outcome the
    // current claim's.
    let all = suite.json(&["queue", "list", "--queue", &suite.queue, "--json"]);
    let all = all.as_array().expect("a list");
    assert_eq!(all.len(), jobs + POISON_JOBS, "lost or unexpected jobs");
    let mut seen = HashSet::new();
    let mut duplicates = 0;
    let mut unexplained = Vec::new();
    let mut poison_runs = 0;
    for job in all {
        let id = job["id"].as_i64().unwrap();
        assert!(seen.insert(id), "job {id} listed twice");
        if poison.contains(&id) {
            poison_runs += check_poison(job, &read_lines(&out.join(id.to_string())), &killed);
            continue;
        }
        for (line_epoch, pid) in check_succeeded(job, &read_lines(&out.join(id.to_string()))) {
            duplicates += 1;
            if !killed.contains(&pid) && !stopped.contains(&pid) {
                unexplained.push((id, line_epoch, pid));
            }
        }
    }
    if !unexplained.is_empty() {
        let culprits: HashSet<u32> = unexplained.iter().map(|(_, _, pid)| *pid).collect();
        let reports: Vec<_> = finished_reports
            .iter()
            .filter(|(pid, _)| culprits.contains(pid))
            .collect();
        let jobs: Vec<_> = all
            .iter()
            .filter(|job| {
                unexplained
                    .iter()
                    .any(|(id, _, _)| job["id"].as_i64() == Some(*id))
            })
            .collect();
        panic!(
            "{backend}: duplicate executions by workers the nemesis never touched: {unexplained:?} (job id, epoch, worker pid)\nthose workers' reports: {reports:?}\nthe jobs: {jobs:?}"
        );
    }
    eprintln!(
        "{backend}: {jobs} jobs, {workers} workers, {:.1} s ({:.0} jobs/s under faults); {} kills, {} stops; {stale} stale completions rejected, {lost} jobs stopped on a lost lease; {duplicates} duplicate executions, all by killed or stopped workers; {POISON_JOBS} poison jobs dead after {poison_runs} runs",
        elapsed.as_secs_f64(),
        jobs as f64 / elapsed.as_secs_f64(),
        killed.len(),
        stopped.len()
    );
    assert!(!killed.is_empty(), "the nemesis killed no worker");
    if !stopped.is_empty() {
        // The pause outlived the lease, so the paused worker's jobs were
        // taken over and ran again — unless it was paused holding SQLite's
        // write lock, which stalls every worker alike. Each job taken over
        // must have been noticed: its late outcome rejected by the fence
        // (a heartbeat that finds the lease gone stops the job, whose
        // outcome is then rejected too).
        let taken_over = superseded_runs(all, &out, &poison, &stopped);
        let rejected: u64 = finished_reports
            .iter()
            .filter(|(pid, _)| stopped.contains(pid))
            .map(|(_, report)| report["stale"].as_u64().unwrap_or(0))
            .sum();
        assert!(
            rejected >= taken_over,
            "{backend}: the paused worker lost {taken_over} leases but only {rejected} of its late outcomes were rejected; reports (pid, report): {finished_reports:?}"
        );
        eprintln!(
            "{backend}: the paused worker's jobs taken over: {taken_over}; its late outcomes rejected: {rejected}"
        );
    }
}

/// Executions by the workers in `pids` that the store superseded: a later
/// claim of the same job recorded the outcome.
fn superseded_runs(all: &[Value], out: &Path, poison: &HashSet<i64>, pids: &HashSet<u32>) -> u64 {
    let mut count = 0;
    for job in all {
        let id = job["id"].as_i64().unwrap();
        if poison.contains(&id) {
            continue;
        }
        let epoch = job["lease_epoch"].as_i64().unwrap();
        count += read_lines(&out.join(id.to_string()))
            .iter()
            .filter(|(line_epoch, pid)| *line_epoch != epoch && pids.contains(pid))
            .count() as u64;
    }
    count
}

/// A healthy job after the run: succeeded once in the store with the
/// outcome of its current claim, whose run left its line (`lines`: the
/// job's side effects, `(epoch, worker pid)`); no claim ran twice. Returns
/// the extra runs: those of earlier claims.
pub(crate) fn check_succeeded(job: &Value, lines: &[(i64, u32)]) -> Vec<(i64, u32)> {
    let id = &job["id"];
    assert_eq!(job["status"], "succeeded", "job {id}");
    let epoch = job["lease_epoch"].as_i64().unwrap();
    assert_eq!(
        job["result"]["epoch"].as_i64(),
        Some(epoch),
        "job {id}: an outcome from a stale epoch was recorded"
    );
    assert!(
        !lines.is_empty(),
        "job {id}: its side effect never happened"
    );
    let epochs: Vec<i64> = lines.iter().map(|(e, _)| *e).collect();
    assert!(
        epochs.contains(&epoch),
        "job {id}: the recorded epoch {epoch} never ran"
    );
    let unique: HashSet<i64> = epochs.iter().copied().collect();
    assert_eq!(unique.len(), epochs.len(), "job {id}: one claim ran twice");
    lines
        .iter()
        .filter(|(line_epoch, _)| *line_epoch != epoch)
        .copied()
        .collect()
}

/// A poison job: dead after exactly its `max_attempts` claims (epochs
/// 1..=max_attempts, nothing else releases or defers it), each of which ran
/// once. Only a worker killed between its claim's commit and the job's
/// start can leave a claim without a run. Returns the runs.
fn check_poison(job: &Value, lines: &[(i64, u32)], killed: &HashSet<u32>) -> usize {
    let id = &job["id"];
    assert_eq!(job["status"], "error", "poison job {id}: {job}");
    assert_eq!(
        job["attempts"].as_i64(),
        Some(POISON_ATTEMPTS),
        "poison job {id}: {job}"
    );
    assert_eq!(
        job["lease_epoch"].as_i64(),
        Some(POISON_ATTEMPTS),
        "poison job {id}: {job}"
    );
    let epochs: HashSet<i64> = lines.iter().map(|(epoch, _)| *epoch).collect();
    assert_eq!(
        epochs.len(),
        lines.len(),
        "poison job {id}: a claim ran twice: {lines:?}"
    );
    assert!(
        epochs
            .iter()
            .all(|epoch| (1..=POISON_ATTEMPTS).contains(epoch)),
        "poison job {id} ran past its attempts: {lines:?}"
    );
    let missing = POISON_ATTEMPTS as usize - lines.len();
    assert!(
        missing == 0 || missing <= killed.len(),
        "poison job {id}: {missing} of its claims never ran: {lines:?}"
    );
    lines.len()
}

pub(crate) fn read_lines(path: &Path) -> Vec<(i64, u32)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let _id = words.next()?;
            Some((words.next()?.parse().ok()?, words.next()?.parse().ok()?))
        })
        .collect()
}

#[test]
fn queue_survives_kills_and_pauses_on_sqlite() {
    queue_suite(None, "sqlite", 3000, 4, 0x5eed_0301);
}

#[test]
fn queue_survives_kills_and_pauses_on_postgres() {
    if let Some(url) = baton_test_support::needs::postgres_url() {
        queue_suite(Some(url), "postgres", 5000, 8, 0x5eed_0302);
    }
}
