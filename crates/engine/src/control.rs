//! Acting on a run from outside its driver: `rerun` and `cancel`.

use std::collections::HashSet;
use std::time::Duration;

use baton_store::{Error as StoreError, Lease, Store, Transition};

use indexmap::IndexMap;

use crate::create;
use crate::run_options::{DriverMode, RunOptions, is_external};
use crate::{Error, Result, clock, owner, reconcile};

/// A short lease for a one-off change.
pub(crate) const TTL_MS: i64 = 10_000;

/// Takes the lease for a quick change: free, expired, or held by a dead process.
pub(crate) async fn take(store: &Store, run_id: &str) -> Result<Lease> {
    let me = owner::me();
    let mut taken = store
        .acquire(run_id, &me, clock::now_ms(), TTL_MS, None)
        .await;
    if let Err(StoreError::Held { owner, .. }) = &taken
        && owner::provably_dead(owner)
    {
        // Someone else may take the run from the dead holder first.
        let dead = owner.clone();
        taken = store
            .acquire(run_id, &me, clock::now_ms(), TTL_MS, Some(&dead))
            .await;
    }
    taken.map_err(|error| match error {
        StoreError::Held { owner, .. } => Error::Owned {
            run_id: run_id.to_owned(),
            owner,
        },
        other => other.into(),
    })
}

/// Sets a stage and every stage that depends on it (transitively) back to
/// pending. Returns their names.
///
/// Everything that can refuse is checked before the first write, the
/// workflow too (the drive that follows compiles it again): a refused
/// rerun leaves the run as it was.
///
/// # Errors
///
/// No such run or stage, a workflow that no longer compiles or changed
/// since the run started (unless `accept_changes`), or a live process
/// drives the run.
pub async fn invalidate(
    store: &Store,
    run_id: &str,
    stage_name: &str,
    accept_changes: bool,
) -> Result<Vec<String>> {
    let run = store.run(run_id).await?;
    let stages = store.stages(run_id).await?;
    if !stages.iter().any(|stage| stage.name == stage_name) {
        return Err(Error::NoSuchStage {
            run_id: run_id.to_owned(),
            stage: stage_name.to_owned(),
        });
    }
    unchanged_workflow(&run, accept_changes)?;
    let dependants = crate::verify::dependants(&run.plan);
    let mut reset: HashSet<String> = HashSet::new();
    let mut queue = vec![stage_name.to_owned()];
    while let Some(name) = queue.pop() {
        if reset.insert(name.clone()) {
            queue.extend(dependants.get(&name).cloned().unwrap_or_default());
        }
    }
    let lease = take(store, run_id).await?;
    let mut transitions: Vec<Transition> = stages
        .iter()
        .filter(|stage| reset.contains(&stage.name))
        .flat_map(|stage| {
            [
                Transition::StageReset {
                    index: stage.index,
                    note: if stage.name == stage_name {
                        "rerun requested".to_owned()
                    } else {
                        format!("rerun: depends on {stage_name}")
                    },
                },
                // A rerun starts the stage's work from scratch: fan-out
                // children, validation cycles and all.
                Transition::UnitsCleared { index: stage.index },
            ]
        })
        .collect();
    transitions.push(Transition::RunStatus {
        status: "pending".to_owned(),
        at: clock::now_ms(),
        error: None,
    });
    let applied = store.apply(&lease, &transitions).await;
    store.release(&lease).await?;
    applied?;
    Ok(stages
        .into_iter()
        .filter(|stage| reset.contains(&stage.name))
        .map(|stage| stage.name)
        .collect())
}

/// Refuses a rerun whose drive would refuse the run's workflow: one that no
/// longer compiles, or changed since the run started (unless
/// `accept_changes`; an externally driven run's `baton next` never accepts
/// changes).
fn unchanged_workflow(run: &baton_store::RunRow, accept_changes: bool) -> Result<()> {
    let options: RunOptions = serde_json::from_str(&run.options).map_err(|_| {
        Error::Refused(format!(
            "run {} has unreadable options; it cannot be run again",
            run.run_id
        ))
    })?;
    if accept_changes && options.driver == DriverMode::External {
        return Err(Error::Refused(format!(
            "run {} is driven externally, and `baton next` hands out the workflow as the run recorded it: --accept-changes cannot apply; start a new run with the changed workflow",
            run.run_id
        )));
    }
    let params: IndexMap<String, String> = serde_json::from_str(&run.params).unwrap_or_default();
    create::recompile(run, &options, &params, accept_changes).map(|_| ())
}

/// Cancels a run: asks its live driver to stop, or, when nobody drives it,
/// kills what a dead driver left and marks the run cancelled. The child
/// runs of its sub-workflow stages stop with it: its live driver stops
/// them; otherwise they are cancelled here first (also those of a run that
/// ended while they went on), so that a cancel cut short leaves the parent
/// to be cancelled again, and them with it.
///
/// # Errors
///
/// No such run, or the store fails.
pub async fn cancel(store: &Store, run_id: &str) -> Result<String> {
    let run = store.run(run_id).await?;
    if ended(&run.status) {
        let children = cancel_children(store, run_id, true).await?;
        return Ok(format!(
            "run {run_id} has already ended ({}){}",
            run.status,
            if children > 0 {
                format!("; cancelled {children} child run(s) still in progress")
            } else {
                String::new()
            }
        ));
    }
    if let Some(holder) = store.lease_holder(run_id, clock::now_ms()).await?
        && !owner::provably_dead(&holder.owner)
    {
        store.request_cancel(run_id, clock::now_ms()).await?;
        return wait_for_driver(store, run_id, &holder.owner).await;
    }
    cancel_children(store, run_id, true).await?;
    let lease = take(store, run_id).await?;
    let marked = mark_cancelled(store, &lease).await;
    store.release(&lease).await?;
    let killed = marked?;
    Ok(format!(
        "cancelled run {run_id}{}",
        if killed > 0 {
            format!(" (killed {killed} leftover process(es))")
        } else {
            String::new()
        }
    ))
}

/// Ends the run `lease` holds as cancelled: kills what carries its marker,
/// records its running attempts as interrupted; returns how many processes
/// were killed. Its children are the caller's (see [`cancel_children`]).
pub(crate) async fn mark_cancelled(store: &Store, lease: &Lease) -> Result<usize> {
    let run_id = &lease.run_id;
    let killed = reconcile::kill_leftovers(run_id);
    let now = clock::now_ms();
    let mut transitions: Vec<Transition> = store
        .attempts(run_id)
        .await?
        .into_iter()
        .filter(|attempt| attempt.status == "running")
        .map(|attempt| Transition::AttemptInterrupted {
            index: attempt.index,
            attempt: attempt.attempt,
            at: now,
        })
        .collect();
    transitions.push(Transition::RunStatus {
        status: "cancelled".to_owned(),
        at: now,
        error: Some("cancelled".to_owned()),
    });
    store.apply(lease, &transitions).await?;
    Ok(killed)
}

/// Cancels the runs that `run_id`'s sub-workflow stages started and that
/// have not ended (`waiting`: those waiting at a gate too); returns how
/// many.
pub(crate) async fn cancel_children(store: &Store, run_id: &str, waiting: bool) -> Result<usize> {
    let runs = store.child_runs().await?;
    let children: Vec<String> = runs
        .into_iter()
        .filter(|run| {
            let options: serde_json::Value = serde_json::from_str(&run.options).unwrap_or_default();
            options["parent_run"] == run_id
                && !ended(&run.status)
                && (waiting || run.status != "awaiting_human")
        })
        .map(|run| run.run_id)
        .collect();
    for child in &children {
        Box::pin(cancel(store, child)).await?;
    }
    Ok(children.len())
}

fn ended(status: &str) -> bool {
    matches!(status, "success" | "failed" | "cancelled" | "rejected")
}

/// How long `cancel` waits for a live driver to stop the run.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

/// Waits until the driver asked to cancel has stopped the run, so that when
/// `baton cancel` returns no stage of the run runs or starts any more. A
/// driver that does not answer in time (hung, or on a machine that cannot
/// be reached) is reported, not waited for.
async fn wait_for_driver(store: &Store, run_id: &str, driver: &str) -> Result<String> {
    let asked = std::time::Instant::now();
    loop {
        let run = store.run(run_id).await?;
        let driven = store.lease_holder(run_id, clock::now_ms()).await?.is_some();
        if run.status == "cancelled" && !driven {
            // A run driven through the protocol goes on by its stages being
            // reset for `next`; `resume` would only say where it stands.
            let go_on = if is_external(&run) {
                format!("`baton rerun {run_id} STAGE` resets a stage for `baton next`")
            } else {
                format!("`baton resume {run_id}` continues it")
            };
            return Ok(format!(
                "cancelled run {run_id}: {driver} stopped it; {go_on}"
            ));
        }
        if matches!(run.status.as_str(), "success" | "failed" | "rejected") {
            return Ok(format!(
                "run {run_id} ended ({}) before the cancel took effect",
                run.status
            ));
        }
        if !driven && run.status != "running" {
            return Ok(format!("cancelled run {run_id} ({})", run.status));
        }
        if !driven {
            // A call of the driver protocol held it for a moment and let
            // go: nobody drives it now.
            return Box::pin(cancel(store, run_id)).await;
        }
        if asked.elapsed() >= CANCEL_WAIT {
            return Ok(format!(
                "asked {driver} to cancel run {run_id}; it has not stopped within {} s \
                 (it may be hung or on another machine). Once its lease expires, \
                 `baton cancel {run_id}` again cancels the run directly",
                CANCEL_WAIT.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether a run recorded as running — or still pending, when its driver
/// died before its first commit — has nobody driving it (not driven from
/// outside, and its lease expired or is held by a process on this host
/// that has ended): a crashed or killed driver. `baton resume` continues
/// such a run.
///
/// # Errors
///
/// No such run, or the store fails.
pub async fn driver_gone(store: &Store, run_id: &str) -> Result<bool> {
    let run = store.run(run_id).await?;
    if !matches!(run.status.as_str(), "running" | "pending") || is_external(&run) {
        return Ok(false);
    }
    Ok(match store.lease_holder(run_id, clock::now_ms()).await? {
        None => true,
        Some(holder) => owner::provably_dead(&holder.owner),
    })
}
