//! baton's durable store: the source of truth for runs.
//!
//! One [`Store`] API over SQLite (the embedded default, one file in WAL mode
//! with `synchronous=FULL`, writes in `BEGIN IMMEDIATE` transactions) and
//! PostgreSQL (for many machines). It holds runs, their stages, every
//! attempt, the hashes of recorded outputs and an append-only event log.
//!
//! Ownership of a run is a lease with a fencing epoch: [`Store::acquire`]
//! bumps the epoch, and every later write through [`Store::apply`] checks it
//! inside the same transaction, so a process that lost its lease (paused,
//! partitioned, presumed dead) can never overwrite the new owner's state.
//! A batch of transitions is one transaction: the engine groups the
//! transitions that arrive together into one commit.
//!
//! This crate is the only one that speaks SQL. It does not run stages or read
//! workflow files.

#![forbid(unsafe_code)]

mod attempts;
mod backend;
mod bulk;
pub mod failpoint;
mod gates;
mod ledger;
mod migrate;
mod model;
mod prune;
pub mod queue;
mod unit_writes;
mod units;
mod usage;

pub use backend::Store;
pub use gates::{ArtifactEdit, GateDecided, GateDecisionRow, NewGateDecision};
pub use ledger::{LedgerEventRow, LedgerScope, NewLedgerEvent};
pub use model::{
    ArtifactRow, AttemptRow, EventRow, FindingRow, Lease, LeaseHolder, NewRun, NewUnit, RunRow,
    StageRow, Transition, UnitRow,
};
pub use prune::{FINISHED_STATUSES, RunTally};
pub use queue::{
    ClaimRequest, Completion, Enqueued, JobFilter, JobOutcome, JobRow, NewJob, QueueCounters,
    Settled,
};
pub use usage::UsageRow;

/// Store errors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database could not be opened or reached.
    #[error("cannot open the store at {location}")]
    Unavailable {
        /// The file or URL (password removed).
        location: String,
        /// The driver's error.
        #[source]
        source: sqlx::Error,
    },
    /// The SQLite file this store opened was deleted or replaced since:
    /// what is written now would be lost.
    #[error(
        "the store at {location} was deleted or replaced while baton used it; nothing more is recorded there (check what removed it, then `baton resume` the run from a store that has it)"
    )]
    Gone {
        /// The file.
        location: String,
    },
    /// A query failed.
    #[error("store query failed: {what}")]
    Query {
        /// What baton was doing.
        what: &'static str,
        /// The driver's error.
        #[source]
        source: sqlx::Error,
    },
    /// Another process holds the run's lease.
    #[error("run {run_id} is driven by {owner} until its lease expires")]
    Held {
        /// The run.
        run_id: String,
        /// Who holds it (host, pid).
        owner: String,
        /// When the lease expires (ms since the epoch).
        until: i64,
    },
    /// This process no longer holds the run's lease: another took over.
    #[error(
        "lost ownership of run {run_id}: another baton process took it over (epoch {epoch} is stale)"
    )]
    LostLease {
        /// The run.
        run_id: String,
        /// The stale epoch this process held.
        epoch: i64,
    },
    /// No run with that id.
    #[error("no run with id {0}")]
    NoSuchRun(String),
    /// No queue job with that id.
    #[error("no job with id {0}")]
    NoSuchJob(i64),
    /// A run with that id exists already.
    #[error("a run with id {0} exists already")]
    Duplicate(String),
    /// The database's schema is newer than this baton.
    #[error("the store's schema version {found} is newer than this baton understands ({known})")]
    TooNew {
        /// The version in the database.
        found: i64,
        /// The newest version this baton knows.
        known: i64,
    },
    /// A ledger append that expected the scope to end at one event found
    /// more: someone appended in between.
    #[error("the ledger of {scope} moved: expected {expected} events, found {found}")]
    LedgerMoved {
        /// The scope (kind and key).
        scope: String,
        /// How many events the caller had read.
        expected: i64,
        /// How many the scope holds.
        found: i64,
    },
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
