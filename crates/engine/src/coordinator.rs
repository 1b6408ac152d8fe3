//! Driving a run: the one loop that owns a run's state.
//!
//! It takes the run's lease, puts the run back in order after a crash, then
//! repeatedly asks the scheduler what may start, records the starts, spawns
//! the attempts, and records their results. Every batch of transitions that
//! arrives together is one store transaction (group commit), fenced by the
//! lease's epoch; the lease is renewed on a timer, and a cancel request
//! (looked for every `CANCEL_POLL` and at renewal) stops every running
//! attempt and starts nothing more.

mod commits;
mod driver;
mod launch;

use std::time::Duration;

use baton_store::{Error as StoreError, Lease, Store};

use crate::create::LEASE_TTL_MS;
use crate::progress::Progress;
use crate::schedule::as_i64;
use crate::stage::Limits;
use crate::{Error, Result, clock, owner, reconcile};

/// How `drive` behaves.
#[derive(Debug, Clone)]
pub struct DriveOptions {
    /// Lease duration; renewed every third of it.
    pub lease_ttl: Duration,
    /// Run even though the workflow or a fragment changed since the run started.
    pub accept_changes: bool,
    /// Finish each isolated stage whose branch failed to merge by merging
    /// the branch as it is now (resolved by hand), without its agent.
    pub accept_merge: bool,
    /// Wait for a lease held on another host to expire, instead of failing.
    pub wait_for_lease: bool,
    /// Override the run's recorded `--max-parallel`.
    pub max_parallel: Option<usize>,
    /// Limits for every stage process.
    pub limits: Limits,
    /// Agent profiles and roles from `baton.toml`; `None` when there is none.
    pub agents: Option<std::sync::Arc<baton_executor::profile::Config>>,
    /// The program that contains read-only agents (the `baton` binary, see
    /// [`baton_executor::contain`]); `None` where the machine cannot, and a
    /// read-only agent's repository is compared before and after instead.
    pub contain_helper: Option<std::path::PathBuf>,
    /// At a human gate, keep the run (and its lease) and wait for a
    /// decision instead of stopping `awaiting_human`.
    pub wait_gates: bool,
    /// A worker for the run's queue jobs, started in this process when the
    /// workflow has `worker_queue` stages or fan-outs; `None` leaves them to
    /// `baton worker` processes.
    pub local_worker: Option<crate::queue::WorkerOptions>,
}

/// How often a driver looks for a cancel request (a cheap read), besides
/// when it renews its lease.
const CANCEL_POLL: Duration = Duration::from_millis(250);

impl Default for DriveOptions {
    fn default() -> Self {
        DriveOptions {
            lease_ttl: Duration::from_millis(LEASE_TTL_MS.unsigned_abs()),
            accept_changes: false,
            accept_merge: false,
            wait_for_lease: true,
            max_parallel: None,
            limits: Limits::default(),
            agents: None,
            contain_helper: None,
            wait_gates: false,
            local_worker: None,
        }
    }
}

/// How a drive ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The run.
    pub run_id: String,
    /// `success`, `failed`, `awaiting_human`, `rejected` or `cancelled`.
    pub status: String,
    /// The gate waited on, if any.
    pub gate: Option<String>,
    /// Why the run failed.
    pub error: Option<String>,
}

/// Drives a run until it succeeds, fails, waits at a gate or is cancelled.
///
/// # Errors
///
/// The store is unavailable, another live process drives the run, the
/// workflow changed, or this process lost the lease.
pub async fn drive(
    store: &Store,
    run_id: &str,
    options: &DriveOptions,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Outcome> {
    {
        let run = store.run(run_id).await?;
        // A cancelled run is driven again (`resume` continues it), without
        // the request it ended with. (Only then: a request that arrives
        // while a drive starts must stop it.)
        if run.status == "cancelled" {
            store.clear_cancel(run_id).await?;
        }
        // A succeeded run is driven again only when outputs it recorded
        // changed or were deleted since: the drive's reconcile runs those
        // stages, and their dependants, again. A rejection stands.
        let rerun = run.status == "success" && reconcile::outputs_changed(store, &run).await?;
        if !rerun && matches!(run.status.as_str(), "success" | "rejected") {
            reconcile::ended(store, &run, options.accept_changes, progress).await?;
            return Ok(Outcome {
                run_id: run_id.to_owned(),
                status: run.status,
                gate: None,
                error: run.error,
            });
        }
    }
    drive_leased(store, run_id, options, progress).await
}

/// Drives a run [`create_run`](crate::create_run) has just created, with
/// the plan it compiled.
///
/// [`drive`] would load and compile the workflow again to check that it did
/// not change since the run started; for a run created a moment ago by this
/// process that check compares the sources with themselves, and the second
/// parse is most of the time a large run spends before its first stage.
///
/// # Errors
///
/// As [`drive`].
pub async fn drive_created(
    store: &Store,
    mut created: crate::Created,
    options: &DriveOptions,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Outcome> {
    let lease = match created.lease.take() {
        Some(mut lease) => {
            // Taken for the default time; held for as long as asked from here.
            if options.lease_ttl != DriveOptions::default().lease_ttl {
                let ttl = i64::try_from(options.lease_ttl.as_millis()).unwrap_or(LEASE_TTL_MS);
                store.renew(&mut lease, clock::now_ms(), ttl).await?;
            }
            lease
        }
        None => acquire(store, &created.run_id, options).await?,
    };
    drive_with_lease(store, lease, Some(created), options, progress).await
}

/// Takes the run's lease and drives it.
async fn drive_leased(
    store: &Store,
    run_id: &str,
    options: &DriveOptions,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Outcome> {
    let lease = acquire(store, run_id, options).await?;
    drive_with_lease(store, lease, None, options, progress).await
}

/// Drives the run under `lease`. A drive that ends gives the lease up in its
/// last commit; one that fails releases it unless it was lost (another
/// driver holds it then).
async fn drive_with_lease(
    store: &Store,
    mut lease: Lease,
    created: Option<crate::Created>,
    options: &DriveOptions,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Outcome> {
    let result = driver::drive_owned(store, &mut lease, created, options, progress).await;
    if matches!(&result, Err(error) if !matches!(error, Error::Store(StoreError::LostLease { .. })))
    {
        let _ = store.release(&lease).await;
    }
    result
}

async fn acquire(store: &Store, run_id: &str, options: &DriveOptions) -> Result<Lease> {
    let me = owner::me();
    let ttl = i64::try_from(options.lease_ttl.as_millis()).unwrap_or(30_000);
    loop {
        let now = clock::now_ms();
        match store.acquire(run_id, &me, now, ttl, None).await {
            Ok(lease) => return Ok(lease),
            Err(StoreError::Held { owner, until, .. }) => {
                if owner::provably_dead(&owner) {
                    match store.acquire(run_id, &me, now, ttl, Some(&owner)).await {
                        // Another process took the run from the dead holder
                        // first: look again, and be refused by it.
                        Err(StoreError::Held { .. }) => continue,
                        taken => return Ok(taken?),
                    }
                }
                let same_host = owner.rsplitn(3, ':').nth(2) == Some(owner::host().as_str());
                if same_host || !options.wait_for_lease {
                    return Err(Error::Owned {
                        run_id: run_id.to_owned(),
                        owner,
                    });
                }
                let wait = u64::try_from((until - now).clamp(100, 5_000)).unwrap_or(1_000);
                tokio::time::sleep(Duration::from_millis(wait)).await;
            }
            Err(other) => return Err(other.into()),
        }
    }
}
