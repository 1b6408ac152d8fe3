//! `baton worker` and `baton queue …` arguments.

use clap::{Args, Subcommand};

use super::format::FormatArgs;

/// `baton worker`.
#[derive(Debug, Args)]
pub(crate) struct WorkerArgs {
    /// Jobs run at once.
    #[arg(long, short = 'c', default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub(crate) concurrency: u32,
    /// Work until nothing is claimable, then exit (an idle worker otherwise waits).
    #[arg(long)]
    pub(crate) once: bool,
    /// The queue to work.
    #[arg(long, default_value = "default", value_name = "NAME")]
    pub(crate) queue: String,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}

/// `baton queue …`.
#[derive(Debug, Subcommand)]
pub(crate) enum QueueCommand {
    /// List jobs, oldest first.
    #[command(
        after_help = "Statuses: available, running, succeeded, failed (a retry is scheduled), error (dead: see `queue show`).\n\nExamples:\n  baton queue list\n  baton queue list --status error --format json\n  baton queue list --status available --limit 20"
    )]
    List(QueueListArgs),
    /// Show one job: its payload, lease, attempts, result and error.
    #[command(after_help = "Example:\n  baton queue show 42 --format json")]
    Show(JobRef),
    /// Add a shell job.
    #[command(
        after_help = "A script failing with stderr starting `terminal-` is dead at once; `deferred-` puts it back for later without counting an attempt.\n\nExamples:\n  baton queue enqueue --script 'make test'\n  baton queue enqueue --script './deploy.sh' --queue deploy --priority 1 --max-attempts 1\n  baton queue enqueue --script 'echo hi' --key nightly-2026-01-01   # enqueued once, whatever the reruns"
    )]
    Enqueue(EnqueueArgs),
    /// Put a dead (or failed) job back in the queue with its attempts reset.
    #[command(after_help = "Example:\n  baton queue retry 42")]
    Retry(JobRef),
    /// Put every dead job back in the queue.
    #[command(
        after_help = "Examples:\n  baton queue requeue-errors\n  baton queue requeue-errors --queue deploy"
    )]
    RequeueErrors(RequeueArgs),
    /// Delete succeeded and dead jobs that finished long enough ago.
    #[command(
        after_help = "Examples:\n  baton queue purge                 # older than 7 days\n  baton queue purge --older-than 12h"
    )]
    Purge(PurgeArgs),
}

/// `baton queue list`.
#[derive(Debug, Args)]
pub(crate) struct QueueListArgs {
    /// Only jobs with this status.
    #[arg(long, value_name = "STATUS", value_parser = ["available", "running", "succeeded", "failed", "error"])]
    pub(crate) status: Option<String>,
    /// Only this queue.
    #[arg(long, value_name = "NAME")]
    pub(crate) queue: Option<String>,
    /// At most this many jobs (the oldest).
    #[arg(long, value_name = "N")]
    pub(crate) limit: Option<u64>,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}

/// One job.
#[derive(Debug, Args)]
pub(crate) struct JobRef {
    /// The job's id (see `baton queue list`).
    pub(crate) id: i64,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}

/// `baton queue enqueue`.
#[derive(Debug, Args)]
pub(crate) struct EnqueueArgs {
    /// The script to run.
    #[arg(long, value_name = "SCRIPT")]
    pub(crate) script: String,
    /// The queue.
    #[arg(long, default_value = "default", value_name = "NAME")]
    pub(crate) queue: String,
    /// Lower runs first.
    #[arg(long, default_value_t = 5)]
    pub(crate) priority: i64,
    /// Claims before the job is dead (lease expiries count).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(i64).range(1..))]
    pub(crate) max_attempts: i64,
    /// An idempotency key: enqueueing it again returns the existing job.
    #[arg(long, value_name = "KEY")]
    pub(crate) key: Option<String>,
    /// Enqueue this many copies in one transaction (keys get `-1`, `-2`, … appended).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub(crate) count: u32,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}

/// `baton queue requeue-errors`.
#[derive(Debug, Args)]
pub(crate) struct RequeueArgs {
    /// Only this queue.
    #[arg(long, value_name = "NAME")]
    pub(crate) queue: Option<String>,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}

/// `baton queue purge`.
#[derive(Debug, Args)]
pub(crate) struct PurgeArgs {
    /// Age of the finished jobs to delete: a number with s, m, h or d.
    #[arg(long, default_value = "7d", value_name = "AGE")]
    pub(crate) older_than: String,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}
