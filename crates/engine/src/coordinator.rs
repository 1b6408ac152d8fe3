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
mod options;
mod outcome;
mod spans;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use baton_store::{Error as StoreError, Lease, Store};

use crate::progress::Progress;
use crate::{Error, Result, clock, owner, reconcile};

pub use options::DriveOptions;
pub use outcome::Outcome;

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
        let rerun =
            run.status == "success" && !crate::verify::verify(store, &run.run_id).await?.intact();
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
                store
                    .renew(&mut lease, clock::now_ms(), options.lease_ttl_ms())
                    .await?;
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
    let result =
        driver::drive_owned(store, &mut lease, created, options, progress, drive_child).await;
    if matches!(&result, Err(error) if !matches!(error, Error::Store(StoreError::LostLease { .. })))
    {
        let _ = store.release(&lease).await;
    }
    result
}

/// [`drive`] as a sub-workflow attempt calls it to drive its child run: the
/// attempt runs below the coordinator, so it is handed this instead of
/// calling back up.
fn drive_child<'a>(
    store: &'a Store,
    run_id: &'a str,
    options: &'a DriveOptions,
    progress: &'a (dyn Fn(Progress) + Sync),
) -> Pin<Box<dyn Future<Output = Result<Outcome>> + 'a>> {
    Box::pin(drive(store, run_id, options, progress))
}

async fn acquire(store: &Store, run_id: &str, options: &DriveOptions) -> Result<Lease> {
    let me = owner::me();
    let ttl = options.lease_ttl_ms();
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
