//! What a drive has not committed yet, and how it commits it: group
//! commits that linger for company (`LINGER`), one commit at a time in
//! flight while the loop goes on, the run's ledger extended in the same
//! commits, and each result's envelope and progress line shown once it is
//! recorded.

use std::time::Duration;

use baton_store::{Lease, Store, Transition};
use baton_workflow::Plan;
use baton_workflow::plan::PlanStage;

use crate::attempt::Finished;
use crate::envelopes::{EnvelopeWriter, Ticket};
use crate::governance::RunLedger;
use crate::progress::Progress;
use crate::run_state::RunState;
use crate::work;
use crate::{Error, Result, clock};

/// How long the starts and results of plain processes may wait to be
/// committed, so that the ones that arrive meanwhile share the commit.
///
/// A commit costs about as much CPU as starting a short process, and with
/// stages that start before their start is recorded (`starts_early`) only
/// the coordinator waits for it: waiting a little turns one commit per stage
/// into one per many stages. A crash in that time loses only what a crash
/// just before the commit would: the stages run again on resume. While a
/// commit runs nothing new starts, so fewer commits also mean fewer stalls
/// (bench/README.md has what each wait measured). 50 ms is still under what
/// a person watching progress notices.
const LINGER: Duration = Duration::from_millis(50);

/// Most transitions that wait for one commit.
const MAX_BATCH: usize = 1_000;

/// How long an inline script may run and still count as [`cheap`] (ms).
const CHEAP_MS: i64 = 100;

/// Whether a result of `stage`'s attempt that ran from `started_at` to
/// `now` (ms) is cheap to lose: a short inline script's. Only cheap results
/// wait to share a commit (`LINGER`) and let what depends on them start
/// before they are recorded (`starts_early`); an agent's result, or a long
/// script's, is committed before anything else starts, so a crash never
/// costs that work again.
pub(super) fn cheap(stage: &PlanStage, started_at: i64, now: i64) -> bool {
    stage.spec.runs_script() && now - started_at < CHEAP_MS
}

/// A result committed, to show: its envelope and progress line.
pub(super) struct Announced {
    finished: Finished,
    started_at: i64,
    /// When the result arrived (ms); it is shown once committed, later.
    finished_at: i64,
    /// For a unit: the stage it ran and its label.
    unit: Option<(PlanStage, String)>,
    /// Its envelope when it was written ahead of the commit, to be named
    /// once the commit lands (see [`Commits::last`]).
    envelope: Option<Ticket>,
}

impl Announced {
    /// A result just arrived, to show once committed.
    pub(super) fn arrived(
        finished: Finished,
        (started_at, finished_at): (i64, i64),
        unit: Option<(PlanStage, String)>,
    ) -> Shown {
        Shown::Result(Box::new(Announced {
            finished,
            started_at,
            finished_at,
            unit,
            envelope: None,
        }))
    }

    /// The stage the envelope is of, its status and its times.
    fn envelope_of<'a>(
        &'a self,
        plan: &'a Plan,
    ) -> (&'a PlanStage, &'static str, (Option<i64>, Option<i64>)) {
        let stage = self
            .unit
            .as_ref()
            .map_or(&plan.stages[self.finished.index], |(stage, _)| stage);
        let status = if self.finished.success {
            "success"
        } else {
            "failed"
        };
        (
            stage,
            status,
            (Some(self.started_at), Some(self.finished_at)),
        )
    }
}

/// What is shown once committed, in the order it happened: a stage's end
/// comes before the starts it allowed.
pub(super) enum Shown {
    /// A result: its envelope and progress line.
    Result(Box<Announced>),
    /// A start's progress line.
    Start(Progress),
}

/// A commit of short results and early starts (see `LINGER`) that runs as
/// a task of its own while the coordinator goes on starting stages: a
/// commit of a few hundred transitions takes milliseconds, and nothing
/// that waits for it may start before it lands anyway. What it recorded is
/// shown once it lands. Every other commit, and the next commit of this
/// kind, waits for it first ([`Commits::settle`]), so commits land in the
/// order their transitions happened.
struct InFlight {
    commit: tokio::task::JoinHandle<std::result::Result<(), baton_store::Error>>,
    shown: Vec<Shown>,
}

/// Where a drive's commits go and what they show.
pub(super) struct Sink<'a> {
    pub(super) store: &'a Store,
    pub(super) plan: &'a Plan,
    pub(super) run: &'a RunState,
    pub(super) progress: &'a (dyn Fn(Progress) + Sync),
}

/// Transitions not yet committed, and what to show once they are. The
/// results that arrive together and the starts they make possible are
/// committed as one transaction (group commit); a process's pid is only
/// recorded along with the next commit, since a resume finds leftover
/// processes by the run's marker anyway.
pub(super) struct Commits {
    pub(super) pending: Vec<Transition>,
    pub(super) shown: Vec<Shown>,
    /// When what is pending must be committed at the latest (see `LINGER`).
    commit_by: Option<tokio::time::Instant>,
    /// Whether it holds a result too costly to risk (see [`cheap`]): then
    /// it is committed at once, before anything else starts.
    pub(super) urgent: bool,
    in_flight: Option<InFlight>,
    ledger: RunLedger,
    pub(super) envelopes: EnvelopeWriter,
}

impl Commits {
    pub(super) fn new(
        pending: Vec<Transition>,
        ledger: RunLedger,
        envelopes: EnvelopeWriter,
    ) -> Commits {
        Commits {
            pending,
            shown: Vec::new(),
            commit_by: None,
            urgent: false,
            in_flight: None,
            ledger,
            envelopes,
        }
    }

    /// Commits everything pending, after the commit in flight, and shows it.
    pub(super) async fn now(&mut self, sink: &Sink<'_>, lease: &Lease) -> Result<()> {
        self.settle(sink).await?;
        self.with_ledger(sink);
        sink.store
            .apply(lease, &std::mem::take(&mut self.pending))
            .await?;
        self.commit_by = None;
        self.urgent = false;
        self.announce(sink);
        Ok(())
    }

    /// Nothing can start: commits the results that arrived, at once when
    /// one is costly, else once `LINGER` passed or the batch is full (in
    /// flight, while the loop goes on), so a result is never held back
    /// while other stages run. Process ids alone wait for the next commit
    /// (see `pending`): committing them costs a synchronous commit per stage
    /// for nothing a resume needs.
    pub(super) async fn when_due(&mut self, sink: &Sink<'_>, lease: &Lease) -> Result<()> {
        let only_pids = self
            .pending
            .iter()
            .all(|transition| matches!(transition, Transition::ProcessStarted { .. }));
        if self.shown.is_empty() && only_pids {
            self.commit_by = None;
            return Ok(());
        }
        let now = tokio::time::Instant::now();
        let due = self.urgent
            || *self.commit_by.get_or_insert(now + LINGER) <= now
            || self.pending.len() >= MAX_BATCH;
        if due && self.urgent {
            // Committed before anything else starts (see `cheap`).
            self.now(sink, lease).await?;
        } else if due && self.in_flight.is_none() {
            // One commit at a time, in order; one that comes due while
            // another runs starts when that one is done.
            self.with_ledger(sink);
            let store = sink.store.clone();
            let lease = lease.clone();
            let pending = std::mem::take(&mut self.pending);
            self.in_flight = Some(InFlight {
                commit: tokio::spawn(async move { store.apply(&lease, &pending).await }),
                shown: std::mem::take(&mut self.shown),
            });
            self.commit_by = None;
        }
        Ok(())
    }

    /// Resolves when a commit comes due (`false`): at its deadline, unless
    /// one is in flight, when it waits for that one, not for its deadline
    /// again; or when the commit in flight has landed (`true`).
    pub(super) async fn wake(&mut self) -> Result<bool> {
        let deadline = self.commit_by.filter(|_| self.in_flight.is_none());
        tokio::select! {
            () = baton_executor::process::sleep_until(deadline) => Ok(false),
            landed = self.landing() => landed.map(|()| true),
        }
    }

    /// Resolves when the commit in flight has landed, with its result;
    /// never without one.
    async fn landing(&mut self) -> Result<()> {
        let Some(flight) = &mut self.in_flight else {
            return std::future::pending().await;
        };
        match (&mut flight.commit).await {
            Ok(result) => result.map_err(Error::from),
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            // Cancelled only when the runtime shuts down, with this task.
            Err(_) => std::future::pending().await,
        }
    }

    /// After the commit in flight landed: shows what it recorded.
    pub(super) fn landed(&mut self, sink: &Sink<'_>) {
        if let Some(mut flight) = self.in_flight.take() {
            announce(sink, &self.envelopes, &mut flight.shown);
        }
    }

    /// Waits for the commit in flight, if any, and shows what it recorded.
    async fn settle(&mut self, sink: &Sink<'_>) -> Result<()> {
        if self.in_flight.is_some() {
            self.landing().await?;
            self.landed(sink);
        }
        Ok(())
    }

    /// Shows what the last commit recorded.
    pub(super) fn announce(&mut self, sink: &Sink<'_>) {
        announce(sink, &self.envelopes, &mut self.shown);
    }

    /// The drive's last commit: `pending` with the run's end, given the
    /// lease up with it.
    ///
    /// The envelopes of the results it records are written before it,
    /// without names, and named once it lands. Only the last: naming a file
    /// costs about half of writing it, and what happens after the last
    /// commit is all that is left of a run. Done for every result, the
    /// writing met each next stage's start and delayed it (bench/README.md).
    pub(super) async fn last(&mut self, sink: &Sink<'_>, lease: &Lease) -> Result<()> {
        for shown in &mut self.shown {
            if let Shown::Result(announced) = shown {
                let (stage, status, times) = announced.envelope_of(sink.plan);
                let errors = announced.finished.error.iter().cloned().collect();
                let ticket =
                    self.envelopes
                        .prepare(stage, announced.finished.index, status, times, errors);
                announced.envelope = Some(ticket);
            }
        }
        self.settle(sink).await?;
        self.with_ledger(sink);
        sink.store.apply_and_release(lease, &self.pending).await?;
        self.announce(sink);
        Ok(())
    }

    /// Adds the ledger events of the results pending to them, so they are
    /// committed together.
    fn with_ledger(&mut self, sink: &Sink<'_>) {
        let kind_of = |index: i64, key: &str| {
            let composite = sink.run.composite(usize::try_from(index).ok()?)?;
            Some(composite.unit(key)?.kind.clone())
        };
        let events = self
            .ledger
            .derive(sink.plan, &self.pending, kind_of, clock::now_ms());
        self.pending.extend(events);
    }
}

/// After a commit: the result envelopes and progress lines of the results
/// it recorded.
fn announce(sink: &Sink<'_>, envelopes: &EnvelopeWriter, shown: &mut Vec<Shown>) {
    let mut committed = None;
    for shown in shown.drain(..) {
        let announced = match shown {
            Shown::Result(announced) => *announced,
            Shown::Start(started) => {
                (sink.progress)(started);
                continue;
            }
        };
        match announced.envelope {
            Some(ticket) => committed = Some(ticket),
            None => {
                let (stage, status, times) = announced.envelope_of(sink.plan);
                let errors = announced.finished.error.iter().cloned().collect();
                envelopes.stage(stage, announced.finished.index, status, times, errors);
            }
        }
        let Announced {
            finished: result,
            started_at,
            finished_at,
            unit,
            ..
        } = announced;
        if result.unit.as_deref() == Some(work::MAIN) {
            // Its stage's own line follows (see the starts).
            continue;
        }
        let label = match &unit {
            Some((_, label)) => label.as_str(),
            None => sink.plan.stages[result.index].name(),
        };
        (sink.progress)(Progress::Finished {
            stage: label.to_owned(),
            status: result.status().to_owned(),
            duration_ms: finished_at - started_at,
            error: result.error,
        });
    }
    // Only the last commit's results are prepared, all of them shown here.
    if let Some(envelope) = committed {
        envelopes.publish(envelope);
    }
}
