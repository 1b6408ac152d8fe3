//! The I/O half of governance (docs/governance.md): a scope's ledger read from the
//! store and folded through `baton_lifecycle::governance`, and events
//! appended to it — checked against the state machine when a person or an
//! agent asks to record one, or as facts when baton observed them (a
//! workflow run, a hooked agent session).

mod codec;
mod fold;
mod runs;
mod summary;

use baton_lifecycle::governance::{Refusal, apply};
use baton_store::{NewLedgerEvent, Store};

pub use baton_lifecycle::governance::{
    Closure, FindingStatus, Identity, RefusalKind, Stage, Visibility,
};
pub use codec::{Entry, Who};
pub use fold::{Freshness, Recorded, Report, Violation, decode, fold, owner, rule_name};
pub(crate) use runs::RunLedger;
pub(crate) use runs::validator_roles;
pub(crate) use runs::{ENGINE, stage_identity};
pub use runs::{SelfReviewConflict, preflight, self_reviews};
pub use summary::summary;

/// A stage's name in reports and JSON (`re_review`, `handoff`, …).
pub fn stage_name(stage: Stage) -> &'static str {
    match stage {
        Stage::Clarify => "clarify",
        Stage::Read => "read",
        Stage::Plan => "plan",
        Stage::Edit => "edit",
        Stage::Test => "test",
        Stage::Review => "review",
        Stage::Repair => "repair",
        Stage::ReReview => "re_review",
        Stage::Release => "release",
        Stage::Handoff => "handoff",
        Stage::Closed => "closed",
    }
}

/// What a ledger belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScopeKind {
    /// A workflow run (key: the run id).
    Run,
    /// A task of the lifecycle (key: its name).
    Task,
    /// A free agent session (key: the session id).
    Session,
}

impl ScopeKind {
    /// What a ledger of this kind sees: a free agent session is fed by
    /// hooks, which see its tool calls but never a clarification or a plan
    /// (docs/hooks.md); runs and tasks record everything on purpose.
    pub fn visibility(self) -> Visibility {
        match self {
            ScopeKind::Session => Visibility::ToolCalls,
            ScopeKind::Run | ScopeKind::Task => Visibility::Everything,
        }
    }

    /// The name stored in the ledger.
    pub fn as_str(self) -> &'static str {
        match self {
            ScopeKind::Run => "run",
            ScopeKind::Task => "task",
            ScopeKind::Session => "session",
        }
    }
}

/// A ledger's scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// Run, task or session.
    pub kind: ScopeKind,
    /// Its key.
    pub key: String,
}

/// Governance failures (a refusal is not one: see [`Recording::Refused`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] baton_store::Error),
    /// A ledger row cannot be read.
    #[error("{0}")]
    Corrupt(String),
}

/// What [`record`] did.
#[derive(Debug, Clone)]
pub enum Recording {
    /// Appended with this sequence number.
    Appended(i64),
    /// The state machine refused it; nothing was written.
    Refused(Refusal),
}

/// Loads and folds a scope. `fallback` owns an empty scope.
///
/// # Errors
///
/// The store fails or a row cannot be read.
pub async fn load(store: &Store, scope: &Scope, fallback: &Identity) -> Result<Report, Error> {
    let rows = store.ledger_events(scope.kind.as_str(), &scope.key).await?;
    let entries = decode(&rows).map_err(Error::Corrupt)?;
    let owner = owner(&entries, fallback);
    let mut report = fold(entries, owner, scope.kind.visibility());
    if scope.kind == ScopeKind::Run {
        // A run's stages are ordered by its DAG, which the engine enforces;
        // the stage table of one piece of work does not apply between them.
        report.violations.retain(|v| v.rule != "illegal_transition");
    }
    Ok(report)
}

/// Records `entry` if the state machine allows it after the scope's ledger
/// (a waiver is always allowed). The append requires the ledger to be
/// unchanged since it was folded, so two concurrent records cannot both be
/// checked against the same state; a lost race folds again.
///
/// # Errors
///
/// The store fails or a row cannot be read.
pub async fn record(
    store: &Store,
    scope: &Scope,
    entry: &Entry,
    identity: &Identity,
    now: i64,
) -> Result<Recording, Error> {
    loop {
        let report = load(store, scope, identity).await?;
        if let Some(event) = entry.event()
            && let Err(refusal) = apply(&report.state, &event)
        {
            return Ok(Recording::Refused(refusal));
        }
        let last = report.entries.last().map_or(0, |r| r.seq);
        match store
            .append_ledger(&new_event(scope, entry, identity, now), Some(last))
            .await
        {
            Ok(seq) => return Ok(Recording::Appended(seq)),
            Err(baton_store::Error::LedgerMoved { .. }) => {}
            Err(error) => return Err(error.into()),
        }
    }
}

/// Appends `entry` as a fact, unchecked: what baton observed happened.
///
/// # Errors
///
/// The store fails.
pub async fn observe(
    store: &Store,
    scope: &Scope,
    entry: &Entry,
    identity: &Identity,
    now: i64,
) -> Result<i64, Error> {
    Ok(store
        .append_ledger(&new_event(scope, entry, identity, now), None)
        .await?)
}

fn new_event(scope: &Scope, entry: &Entry, identity: &Identity, now: i64) -> NewLedgerEvent {
    let (kind, payload) = entry.encode();
    NewLedgerEvent {
        scope_kind: scope.kind.as_str().to_owned(),
        scope_key: scope.key.clone(),
        kind,
        payload,
        profile: identity.profile.clone(),
        model: identity.model.clone(),
        session: identity.session.clone(),
        recorded_at: now,
    }
}
