//! How a queue worker runs: its queue, concurrency, lease timings and
//! where its jobs log and run.

use std::path::PathBuf;
use std::time::Duration;

use super::DEFAULT_QUEUE;

/// How a worker runs. [`WorkerOptions::new`] has the shipped defaults;
/// tests shorten the lease, heartbeat and sweep.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// The queue to work.
    pub queue: String,
    /// Jobs run at once.
    pub concurrency: usize,
    /// Stop once nothing is claimable and nothing runs.
    pub once: bool,
    /// The lease taken per claim (shipped: 30 s).
    pub lease: Duration,
    /// Time between heartbeats (shipped: a third of the lease).
    pub heartbeat: Duration,
    /// Time between sweeps for expired leases (shipped: 5 s).
    pub sweep: Duration,
    /// Time between claims while the queue is empty.
    pub poll: Duration,
    /// On stop: how long running jobs may finish before they are killed
    /// and released.
    pub grace: Duration,
    /// First retry delay; doubles per attempt, with jitter.
    pub backoff_base: Duration,
    /// Longest retry delay.
    pub backoff_max: Duration,
    /// A job's wall-clock bound unless its payload sets one.
    pub job_timeout: Duration,
    /// SIGTERM-to-SIGKILL grace for a job's process group.
    pub kill_grace: Duration,
    /// Bytes kept per job log file.
    pub log_cap: u64,
    /// Where job logs go: `<log_dir>/<job id>/<epoch>.stdout|stderr`.
    pub log_dir: PathBuf,
    /// Working directory of jobs whose payload names none.
    pub cwd: PathBuf,
    /// This worker's name in leases; unique per worker process.
    pub owner: String,
    /// Only this run's jobs (a driver's own worker), else any.
    pub only_run: Option<String>,
}

impl WorkerOptions {
    /// The shipped defaults for a worker named `owner` writing logs under
    /// `log_dir` and running jobs in `cwd`.
    pub fn new(owner: String, log_dir: PathBuf, cwd: PathBuf) -> Self {
        let lease = Duration::from_secs(30);
        WorkerOptions {
            queue: DEFAULT_QUEUE.to_owned(),
            concurrency: 4,
            once: false,
            lease,
            heartbeat: lease / 3,
            sweep: Duration::from_secs(5),
            poll: Duration::from_millis(500),
            grace: Duration::from_secs(10),
            backoff_base: Duration::from_secs(1),
            backoff_max: Duration::from_secs(600),
            job_timeout: Duration::from_secs(60 * 60),
            kill_grace: Duration::from_secs(5),
            log_cap: 16 * 1024 * 1024,
            log_dir,
            cwd,
            owner,
            only_run: None,
        }
    }
}
