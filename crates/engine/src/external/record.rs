//! Recording results as a run baton drives would: envelopes, stage ends,
//! scripts run during `next`, the run's settled status.

use std::path::Path;

use baton_store::{Lease, Store, Transition};
use baton_workflow::plan::PlanStage;
use tokio::sync::{mpsc, watch};

use super::handing::Script;
use super::{Opened, Ready, Standing};
use crate::attempt::{Finished, Report};
use crate::governance::RunLedger;
use crate::stage;
use crate::{Result, clock, gate};

/// A stage's (or unit's) result envelope, `stages/NNN-name.json`, as the
/// coordinator writes it, so the workspace looks the same however the run
/// was driven. Written once the result is recorded.
pub(super) struct Envelope {
    pub(super) stage: PlanStage,
    pub(super) index: usize,
    pub(super) status: &'static str,
    pub(super) started_at: Option<i64>,
    pub(super) error: Option<String>,
}

pub(super) fn write_envelopes(workspace: &Path, envelopes: Vec<Envelope>) {
    if envelopes.is_empty() {
        return;
    }
    // Dropping the writer writes everything queued.
    let writer = crate::envelopes::EnvelopeWriter::start(workspace);
    let now = clock::now_ms();
    for envelope in envelopes {
        writer.stage(
            &envelope.stage,
            envelope.index,
            envelope.status,
            (envelope.started_at, Some(now)),
            envelope.error.into_iter().collect(),
        );
    }
}

/// Commits `transitions` with the run ledger's entries for them, as `baton
/// run` commits its results: the ledger's opening with the first commit,
/// then each success's edits and checks, each validation cycle, each
/// correction's repairs. Each call is a process of its own, so the ledger
/// is read back from the store every time.
///
/// The orchestrator's agents are unknown to baton: a stage's work is
/// recorded under its role (the `agent_type` it was handed out with).
pub(super) async fn commit(
    store: &Store,
    lease: &Lease,
    opened: &Opened,
    transitions: Vec<Transition>,
) -> Result<()> {
    let run_id = &opened.run.run_id;
    let recorded = store.ledger_events("run", run_id).await?;
    let entries = crate::governance::decode(&recorded).unwrap_or_default();
    let (plan, now) = (&opened.plan, clock::now_ms());
    let path = &opened.run.workflow_path;
    let (mut ledger, opening) = RunLedger::open(run_id, plan, path, None, &entries, &[], now);
    // Opened once: a ledger that does not decode is not opened again.
    let mut batch = if recorded.is_empty() {
        opening
    } else {
        Vec::new()
    };
    let units = store.units(run_id).await?;
    let kind_of = |index: i64, key: &str| {
        let unit = units
            .iter()
            .find(|unit| unit.index == index && unit.key == key);
        unit.map(|unit| unit.kind.clone())
    };
    let events = ledger.derive(plan, &transitions, kind_of, now);
    batch.extend(transitions);
    batch.extend(events);
    store.apply(lease, &batch).await?;
    Ok(())
}

/// Runs an inline script through the executor, renewing the lease while
/// it runs.
pub(super) async fn run_script(
    store: &Store,
    lease: &mut Lease,
    opened: &Opened,
    script: Script,
) -> Result<Finished> {
    let index = script.index;
    let mut attempt = opened.attempt(store, index, script.attempt);
    attempt.params.extend(script.values);
    attempt.adopt_job = script.adopt_job;
    attempt.unit = script.unit;
    attempt.env = script.env;
    attempt.defer_checks = script.defer_checks;
    let (cancel, cancelled) = watch::channel(false);
    let (sender, mut reports) = mpsc::unbounded_channel();
    let task = tokio::spawn(stage::run(script.stage, attempt, cancelled, sender));
    // `baton cancel` asks whoever holds the run: the script is stopped.
    let stop = || {
        let _ = cancel.send(true);
    };
    let finished = renewing(store, lease, stop, async {
        loop {
            match reports.recv().await {
                Some(Report::Finished(finished)) => return Ok(*finished),
                Some(
                    Report::Started { .. }
                    | Report::Note { .. }
                    | Report::Retry(_)
                    | Report::SubRun { .. },
                ) => {}
                None => {
                    return Ok(Finished::before_start(
                        index,
                        None,
                        0,
                        "the script's attempt ended without a result".to_owned(),
                    ));
                }
            }
        }
    })
    .await?;
    let _ = task.await;
    Ok(finished)
}

/// Awaits `work` (a script, a queue job, a child run's `next`) while
/// renewing the run's lease, which would expire under a long one;
/// `on_cancel` runs when a renewal finds a cancel requested.
pub(super) async fn renewing<T>(
    store: &Store,
    lease: &mut Lease,
    on_cancel: impl Fn(),
    work: impl Future<Output = Result<T>>,
) -> Result<T> {
    let ttl = crate::control::TTL_MS;
    let mut renew = clock::every(std::time::Duration::from_millis(
        u64::try_from(ttl / 3).unwrap_or(3_000),
    ));
    let mut work = std::pin::pin!(work);
    loop {
        tokio::select! {
            done = &mut work => return done,
            _ = renew.tick() => {
                if store.renew(lease, clock::now_ms(), ttl).await? {
                    on_cancel();
                }
            }
        }
    }
}

/// Records the run's status as the stages now make it and says where it
/// stands.
pub(super) async fn settle(
    store: &Store,
    lease: &Lease,
    opened: &Opened,
    ready: Vec<Ready>,
    scripts: Vec<(String, String)>,
) -> Result<Standing> {
    let run_id = &opened.run.run_id;
    let (_, mut run) = opened.state(store).await?;
    let (status, error) = run
        .end()
        .map_or(("running", None), |end| (end.status(), end.error()));
    let current = store.run(run_id).await?;
    if current.status != status {
        store
            .apply(
                lease,
                &[Transition::RunStatus {
                    status: status.to_owned(),
                    at: clock::now_ms(),
                    error: error.clone(),
                }],
            )
            .await?;
    }
    if super::ended(status) {
        // A child run of a sub-workflow stage does not go on alone; one
        // waiting at its gate is left to be decided and driven on (its
        // stage failed saying so). After the run's end is recorded: a child
        // held by a call of its own may take a while to stop.
        crate::control::cancel_children(store, run_id, false).await?;
    }
    let mut standing = standing(store, opened, ready, scripts).await?;
    standing.status = status.to_owned();
    standing.error = error;
    Ok(standing)
}

/// Where the run stands as recorded, without changing it.
pub(super) async fn standing(
    store: &Store,
    opened: &Opened,
    ready: Vec<Ready>,
    scripts: Vec<(String, String)>,
) -> Result<Standing> {
    let run = store.run(&opened.run.run_id).await?;
    let rows = store.stages(&run.run_id).await?;
    let gates = gate::Gates::load(store, &run.run_id, &opened.plan, &opened.workspace).await?;
    // The earliest gate that succeeded and is not yet approved.
    let gate = opened
        .plan
        .stages
        .iter()
        .filter(|stage| {
            stage.spec.human_gate
                && rows[stage.index].status == "success"
                && !gates.approved(stage.index)
        })
        .min_by_key(|stage| stage.group)
        .map(|stage| stage.name().to_owned())
        .filter(|_| run.status == "awaiting_human");
    Ok(Standing {
        run_id: run.run_id,
        status: run.status,
        gate,
        error: run.error,
        ready,
        scripts,
    })
}
