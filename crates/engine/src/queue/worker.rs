//! The worker loop: claim jobs in batches, run them, heartbeat their
//! leases, report their outcomes fenced by epoch, stop gracefully.
//!
//! One coordinating loop claims jobs and records their outcomes; jobs run
//! as tasks that only report back. Outcomes that arrive together are
//! recorded together with the next claim in one transaction
//! ([`Store::settle`]), so a busy worker costs the store one commit per
//! round, not two per job.
//!
//! Leases are renewed by a task of their own: a renewal must never wait
//! behind a claim, a sweep or a lock wait of the loop, or a busy machine
//! lets a healthy worker's leases expire and its jobs run twice.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_store::{ClaimRequest, Completion, JobOutcome, JobRow, Settled, Store};
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, MissedTickBehavior};

use super::job;
use super::options::WorkerOptions;
use crate::clock::millis;

/// What a worker did, for its exit summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerReport {
    /// Jobs claimed.
    pub claimed: u64,
    /// Outcomes recorded as success.
    pub succeeded: u64,
    /// Outcomes recorded as a failure to retry.
    pub failed: u64,
    /// Outcomes that left the job dead.
    pub dead: u64,
    /// Outcomes that deferred or released the job.
    pub requeued: u64,
    /// Outcomes the store rejected: this worker had lost the lease.
    pub stale: u64,
    /// Jobs killed because a heartbeat found their lease lost.
    pub lost: u64,
    /// Expired leases of any worker this one requeued.
    pub reaped: u64,
    /// Claims, outcomes, lease sweeps and heartbeats the store failed, each
    /// tried again: a database that was down or refused for a while.
    pub store_errors: u64,
}

/// How long a finished job's outcome waits for others to share its commit.
const LINGER: Duration = Duration::from_millis(1);

/// A job this worker runs.
struct Running {
    epoch: i64,
    cancel: watch::Sender<bool>,
}

/// The jobs this worker runs, by id: shared by the loop, which adds and
/// removes them, and the heartbeat task, which renews their leases.
type Held = Arc<Mutex<HashMap<i64, Running>>>;

fn lock(held: &Held) -> std::sync::MutexGuard<'_, HashMap<i64, Running>> {
    held.lock().unwrap_or_else(|p| p.into_inner())
}

/// Works `options.queue` until `stop` holds `true` (then finishes or
/// releases its jobs) or, with `options.once`, until nothing is left.
///
/// # Errors
///
/// Only on stop or `once` does the loop end normally. Store errors are
/// retried (a database restart is survived); while the store is
/// unreachable for longer than a lease the worker kills its jobs, because
/// another worker may already have taken them over.
pub async fn work(
    store: &Store,
    options: &WorkerOptions,
    mut stop: watch::Receiver<bool>,
) -> crate::Result<WorkerReport> {
    let options = Arc::new(options.clone());
    let mut report = WorkerReport::default();
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<Completion>();
    let running: Held = Arc::default();
    // Counted by the heartbeat task: jobs it stopped, renewals that failed.
    let (lost, failed_renewals) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let heartbeats = Heartbeats(tokio::spawn(renew_leases(
        store.clone(),
        Arc::clone(&options),
        Arc::clone(&running),
        (Arc::clone(&lost), Arc::clone(&failed_renewals)),
    )));
    let releasing: Arc<Mutex<HashSet<i64>>> = Arc::default();
    let mut pending: Vec<Completion> = Vec::new();
    let mut stopping = *stop.borrow();
    let mut grace_deadline: Option<Instant> = None;
    let mut claim_after = Instant::now();
    let mut idle = false;
    let mut sweep = tokio::time::interval(options.sweep);
    sweep.set_missed_tick_behavior(MissedTickBehavior::Delay);

    loop {
        let free = if stopping {
            0
        } else {
            options.concurrency.saturating_sub(lock(&running).len())
        };
        let want_claim = free > 0 && Instant::now() >= claim_after;
        if !pending.is_empty() || want_claim {
            let request = ClaimRequest {
                queue: options.queue.clone(),
                owner: options.owner.clone(),
                limit: i64::try_from(free).unwrap_or(i64::MAX),
                lease_ms: millis(options.lease),
                key_prefix: options.only_run.as_ref().map(|run| format!("{run}/")),
            };
            match store.settle(&pending, want_claim.then_some(&request)).await {
                Ok((settled, claimed)) => {
                    tally(&mut report, &pending, &settled);
                    pending.clear();
                    // Only a claim that found nothing says the queue is
                    // empty; outcomes recorded since may have requeued jobs.
                    idle = want_claim && claimed.is_empty();
                    if idle {
                        claim_after = Instant::now() + options.poll;
                    }
                    for job in claimed {
                        report.claimed += 1;
                        let (cancel, cancelled) = watch::channel(false);
                        lock(&running).insert(
                            job.id,
                            Running {
                                epoch: job.lease_epoch,
                                cancel,
                            },
                        );
                        spawn_job(job, &options, cancelled, &releasing, &done_tx);
                    }
                }
                Err(_) => {
                    // Kept for the next round: a restarted database or a
                    // dropped connection is worth waiting out.
                    report.store_errors += 1;
                    claim_after = Instant::now() + options.poll;
                    tokio::time::sleep(options.poll).await;
                }
            }
        }
        let nothing_runs = lock(&running).is_empty();
        if nothing_runs && pending.is_empty() && (stopping || (options.once && idle)) {
            drop(heartbeats);
            report.lost = lost.load(Ordering::Relaxed);
            report.store_errors += failed_renewals.load(Ordering::Relaxed);
            return Ok(report);
        }

        let wake_for_claim = free > 0 && !stopping;
        tokio::select! {
            Some(completion) = done_rx.recv() => {
                let others = {
                    let mut held = lock(&running);
                    held.remove(&completion.id);
                    pending.push(completion);
                    while let Ok(more) = done_rx.try_recv() {
                        held.remove(&more.id);
                        pending.push(more);
                    }
                    held.len()
                };
                // Group commit: jobs that end within a moment share this
                // commit instead of each paying one.
                let deadline = Instant::now() + LINGER;
                let mut waited = 0;
                while waited < others {
                    match tokio::time::timeout_at(deadline, done_rx.recv()).await {
                        Ok(Some(more)) => {
                            lock(&running).remove(&more.id);
                            pending.push(more);
                            waited += 1;
                        }
                        _ => break,
                    }
                }
            }
            _ = sweep.tick() => {
                match store.reap_expired().await {
                    Ok(reaped) => {
                        report.reaped += reaped.len() as u64;
                        if !reaped.is_empty() {
                            claim_after = Instant::now();
                        }
                    }
                    Err(_) => report.store_errors += 1,
                }
            }
            _ = tokio::time::sleep_until(claim_after), if wake_for_claim => {}
            changed = stop.changed(), if !stopping => {
                if changed.is_err() || *stop.borrow() {
                    stopping = true;
                    grace_deadline = Some(Instant::now() + options.grace);
                }
            }
            _ = baton_executor::process::sleep_until(grace_deadline), if stopping && !nothing_runs => {
                grace_deadline = None;
                let mut releasing = releasing.lock().unwrap_or_else(|p| p.into_inner());
                for (id, job) in lock(&running).iter() {
                    releasing.insert(*id);
                    let _ = job.cancel.send(true);
                }
            }
        }
    }
}

/// Aborts the heartbeat task when the loop ends, however it ends.
struct Heartbeats(tokio::task::JoinHandle<()>);

impl Drop for Heartbeats {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Renews the leases of the jobs in `running` every `options.heartbeat`,
/// and stops the jobs whose lease is lost: taken over after it expired, or
/// unrenewed for longer than a lease while the store was unreachable (they
/// may run elsewhere by now). `lost` counts them, `failed` the renewals
/// the store failed.
async fn renew_leases(
    store: Store,
    options: Arc<WorkerOptions>,
    running: Held,
    (lost, failed): (Arc<AtomicU64>, Arc<AtomicU64>),
) {
    let mut heartbeat = tokio::time::interval(options.heartbeat);
    heartbeat.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut last_renewed = Instant::now();
    loop {
        heartbeat.tick().await;
        let held: Vec<(i64, i64)> = lock(&running)
            .iter()
            .map(|(id, job)| (*id, job.epoch))
            .collect();
        if held.is_empty() {
            last_renewed = Instant::now();
            continue;
        }
        let stop = |job: &Running| {
            if !*job.cancel.borrow() {
                lost.fetch_add(1, Ordering::Relaxed);
                let _ = job.cancel.send(true);
            }
        };
        match store
            .heartbeat(&options.owner, &held, millis(options.lease))
            .await
        {
            Ok(gone) => {
                last_renewed = Instant::now();
                let running = lock(&running);
                for (id, epoch) in gone {
                    // A job that finished meanwhile is not lost.
                    if let Some(job) = running.get(&id).filter(|job| job.epoch == epoch) {
                        stop(job);
                    }
                }
            }
            Err(_) => {
                failed.fetch_add(1, Ordering::Relaxed);
                if last_renewed.elapsed() > options.lease {
                    lock(&running).values().for_each(stop);
                }
            }
        }
    }
}

fn spawn_job(
    job: JobRow,
    options: &Arc<WorkerOptions>,
    cancelled: watch::Receiver<bool>,
    releasing: &Arc<Mutex<HashSet<i64>>>,
    done: &mpsc::UnboundedSender<Completion>,
) {
    let options = Arc::clone(options);
    let releasing = Arc::clone(releasing);
    let done = done.clone();
    tokio::spawn(async move {
        let id = job.id;
        let is_released = || {
            releasing
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(&id)
        };
        let outcome = job::run(&job, &options, cancelled, is_released).await;
        let _ = done.send(Completion {
            id,
            epoch: job.lease_epoch,
            outcome,
        });
    });
}

/// Adds recorded outcomes to the report.
fn tally(report: &mut WorkerReport, sent: &[Completion], settled: &[Settled]) {
    for (completion, settled) in sent.iter().zip(settled) {
        match settled {
            Settled::Stale => report.stale += 1,
            Settled::Accepted(status) if status == baton_store::queue::status::ERROR => {
                report.dead += 1
            }
            Settled::Accepted(_) => match completion.outcome {
                JobOutcome::Succeeded { .. } => report.succeeded += 1,
                JobOutcome::Failed { .. } => report.failed += 1,
                JobOutcome::Terminal { .. } => report.dead += 1,
                JobOutcome::Deferred { .. } | JobOutcome::Released { .. } => report.requeued += 1,
            },
        }
    }
}
