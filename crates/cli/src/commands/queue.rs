//! `baton worker` and `baton queue …`: thin adapters over
//! `baton_engine::queue` and the store's queue queries.

use std::time::Duration;

use baton_engine::queue::{self, ScriptJob, WorkerOptions, WorkerReport};
use baton_store::Store;
use serde_json::json;

use super::errors::{chain, unavailable};
use super::runtime::{block_on_exit, open_store};
use crate::args::Format;
use crate::args::queue::{EnqueueArgs, JobRef, PurgeArgs, QueueCommand, RequeueArgs, WorkerArgs};
use crate::{exit_code, output};

mod list;

use baton_engine::view::queue::job_json;

/// Test and tuning overrides of the worker's timings, in milliseconds.
/// Suites run with a 2 s lease and 0.5 s heartbeats; the shipped lease is
/// 30 s.
const LEASE_MS: &str = "BATON_WORKER_LEASE_MS";
const HEARTBEAT_MS: &str = "BATON_WORKER_HEARTBEAT_MS";
const SWEEP_MS: &str = "BATON_WORKER_SWEEP_MS";
const POLL_MS: &str = "BATON_WORKER_POLL_MS";
const GRACE_MS: &str = "BATON_WORKER_GRACE_MS";
const BACKOFF_MS: &str = "BATON_WORKER_BACKOFF_MS";

/// A worker's options: shipped defaults, then the timing overrides from
/// the environment. Used by `baton worker` and by the local worker of
/// `baton run`.
pub(crate) fn worker_options(queue: &str, concurrency: usize, once: bool) -> WorkerOptions {
    let cwd = super::project_dir();
    let owner = baton_engine::queue::worker_name();
    let mut options = WorkerOptions::new(owner, cwd.join(".baton").join("jobs"), cwd);
    options.queue = queue.to_owned();
    options.concurrency = concurrency.max(1);
    options.once = once;
    if let Some(lease) = crate::settings::millis(LEASE_MS) {
        options.lease = lease;
        options.heartbeat = lease / 3;
    }
    options.heartbeat = crate::settings::millis(HEARTBEAT_MS).unwrap_or(options.heartbeat);
    options.sweep = crate::settings::millis(SWEEP_MS).unwrap_or(options.sweep);
    options.poll = crate::settings::millis(POLL_MS).unwrap_or(options.poll);
    options.grace = crate::settings::millis(GRACE_MS).unwrap_or(options.grace);
    options.backoff_base = crate::settings::millis(BACKOFF_MS).unwrap_or(options.backoff_base);
    options
}

/// Runs `baton worker`.
pub(crate) fn worker(args: &WorkerArgs) -> u8 {
    let options = worker_options(
        &args.queue,
        usize::try_from(args.concurrency).unwrap_or(1),
        args.once,
    );
    let format = args.format.format();
    block_on_exit(async move {
        let store = open_store().await?;
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        // SIGTERM and Ctrl-C both ask for a graceful stop.
        tokio::spawn(async move {
            use tokio::signal::unix::{SignalKind, signal};
            let mut term = signal(SignalKind::terminate()).ok();
            let mut interrupt = signal(SignalKind::interrupt()).ok();
            // A job's process starts knowing which handlers to reset.
            baton_executor::signal_handlers_changed();
            if term.is_none() && interrupt.is_none() {
                return;
            }
            tokio::select! {
                () = received(term.as_mut()) => {}
                () = received(interrupt.as_mut()) => {}
            }
            let _ = stop_tx.send(true);
        });
        let report = queue::work(&store, &options, stop_rx)
            .await
            .map_err(|error| unavailable(&error))?;
        print_report(&report, &options.owner, format);
        Ok(exit_code::SUCCESS)
    })
}

/// Resolves at the listener's next signal, or never without a listener.
async fn received(listener: Option<&mut tokio::signal::unix::Signal>) {
    match listener {
        Some(listener) => {
            listener.recv().await;
        }
        None => std::future::pending().await,
    }
}

fn print_report(report: &WorkerReport, owner: &str, format: Format) {
    let value = json!({
        "worker": owner,
        "claimed": report.claimed,
        "succeeded": report.succeeded,
        "failed": report.failed,
        "dead": report.dead,
        "requeued": report.requeued,
        "stale": report.stale,
        "lost": report.lost,
        "reaped": report.reaped,
        "store_errors": report.store_errors,
    });
    match format {
        Format::Json | Format::Yaml => output::stdout(&output::json_or_yaml(format, &value)),
        Format::Table => output::stderr_line(&format!(
            "worker {owner}: {} claimed, {} succeeded, {} failed, {} dead, {} requeued, {} stale outcomes rejected, {} leases lost, {} expired leases reaped, {} store errors retried",
            report.claimed,
            report.succeeded,
            report.failed,
            report.dead,
            report.requeued,
            report.stale,
            report.lost,
            report.reaped,
            report.store_errors
        )),
    }
}

/// Runs a `baton queue` subcommand.
pub(crate) fn run(command: &QueueCommand) -> u8 {
    block_on_exit(async {
        let store = open_store().await?;
        let outcome = match command {
            QueueCommand::List(args) => list::list(&store, args).await,
            QueueCommand::Show(args) => show(&store, args).await,
            QueueCommand::Enqueue(args) => enqueue(&store, args).await,
            QueueCommand::Retry(args) => retry(&store, args).await,
            QueueCommand::RequeueErrors(args) => requeue(&store, args).await,
            QueueCommand::Purge(args) => purge(&store, args).await,
        };
        outcome.map_err(|error| {
            output::stderr_line(&format!("error: {}", chain(&error)));
            match error {
                baton_engine::Error::Store(baton_store::Error::NoSuchJob(_)) => {
                    output::stderr_line("hint: `baton queue list` shows the jobs");
                    exit_code::INVALID_WORKFLOW
                }
                _ => exit_code::STORE_UNAVAILABLE,
            }
        })
    })
}

async fn show(store: &Store, args: &JobRef) -> Result<u8, baton_engine::Error> {
    let job = store.job(args.id).await?;
    let value = job_json(&job);
    output::print(args.format.format(), &value, || output::yaml(&value));
    Ok(exit_code::SUCCESS)
}

async fn enqueue(store: &Store, args: &EnqueueArgs) -> Result<u8, baton_engine::Error> {
    let jobs: Vec<ScriptJob> = (1..=args.count)
        .map(|n| {
            let mut job = ScriptJob::shell(args.script.clone());
            job.queue = args.queue.clone();
            job.priority = args.priority;
            job.max_attempts = args.max_attempts;
            job.idempotency_key = args.key.as_ref().map(|key| {
                if args.count == 1 {
                    key.clone()
                } else {
                    format!("{key}-{n}")
                }
            });
            job
        })
        .collect();
    let entries = queue::enqueue_script(store, &jobs).await?;
    if args.count > 1 {
        let created = entries.iter().filter(|entry| entry.created).count();
        let value = json!({
            "ids": entries.iter().map(|entry| entry.id).collect::<Vec<_>>(),
            "created": created,
        });
        output::print(args.format.format(), &value, || {
            format!("enqueued {created} job(s) of {}\n", entries.len())
        });
        return Ok(exit_code::SUCCESS);
    }
    let entry = entries[0];
    let value = json!({ "id": entry.id, "created": entry.created });
    output::print(args.format.format(), &value, || {
        if entry.created {
            format!("enqueued job {}\n", entry.id)
        } else {
            format!("job {} exists with that key; nothing enqueued\n", entry.id)
        }
    });
    Ok(exit_code::SUCCESS)
}

async fn retry(store: &Store, args: &JobRef) -> Result<u8, baton_engine::Error> {
    let changed = store.retry_job(args.id).await?;
    let value = json!({ "id": args.id, "requeued": changed });
    output::print(args.format.format(), &value, || {
        if changed {
            format!("job {} is back in the queue\n", args.id)
        } else {
            format!(
                "job {} is neither dead nor failed; nothing changed\n",
                args.id
            )
        }
    });
    Ok(if changed {
        exit_code::SUCCESS
    } else {
        exit_code::REFUSED
    })
}

async fn requeue(store: &Store, args: &RequeueArgs) -> Result<u8, baton_engine::Error> {
    let count = store.requeue_errors(args.queue.as_deref()).await?;
    let value = json!({ "requeued": count });
    output::print(args.format.format(), &value, || {
        format!("{count} dead job(s) back in the queue\n")
    });
    Ok(exit_code::SUCCESS)
}

async fn purge(store: &Store, args: &PurgeArgs) -> Result<u8, baton_engine::Error> {
    let Some(age) = parse_age(&args.older_than) else {
        output::stderr_line(&format!(
            "error: invalid --older-than '{}': expected a number with s, m, h or d\nhint: for example --older-than 7d",
            args.older_than
        ));
        return Ok(exit_code::USAGE);
    };
    let count = store
        .purge_jobs(i64::try_from(age.as_millis()).unwrap_or(i64::MAX))
        .await?;
    let value = json!({ "purged": count });
    output::print(args.format.format(), &value, || {
        format!("{count} finished job(s) deleted\n")
    });
    Ok(exit_code::SUCCESS)
}

/// `90s`, `15m`, `12h`, `7d`.
fn parse_age(text: &str) -> Option<Duration> {
    let text = text.trim();
    let unit = text.chars().last()?;
    let number: u64 = text[..text.len() - unit.len_utf8()].parse().ok()?;
    let seconds = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        _ => return None,
    };
    Some(Duration::from_secs(number.checked_mul(seconds)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_parse() {
        assert_eq!(parse_age("7d"), Some(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_age("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_age("12h"), Some(Duration::from_secs(12 * 3600)));
        assert_eq!(parse_age("7"), None);
        assert_eq!(parse_age("d"), None);
        assert_eq!(parse_age("-1d"), None);
    }
}
