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

// Shared by both databases: the model, bound values and row decoding,
// event shapes, the SQL fragments that differ, batch grouping.
mod attempts;
mod batch;
mod columns;
mod dialect;
mod error;
mod events;
pub mod failpoint;
mod migrate;
mod model;
mod unit_writes;

// Each database's own code.
mod postgres;
mod sqlite;

// The handle, and the queries written once over it.
mod apply;
mod gate_outputs;
mod gates;
mod leases;
mod ledger;
mod prune;
pub mod queue;
mod runs;
mod stages;
mod store;
mod tokens;
mod tx;
mod units;
mod usage;

pub use error::{Error, Result};
pub use gate_outputs::DecidedOutput;
pub use gates::{ArtifactEdit, GateDecided, GateDecisionRow, NewGateDecision};
pub use ledger::{LedgerEventRow, LedgerScope};
pub use model::{
    ArtifactRow, AttemptRow, EventRow, FindingRow, Lease, LeaseHolder, NewLedgerEvent, NewRun,
    NewUnit, RunRow, StageRow, Transition, UnitRow, UsageRow,
};
pub use prune::{FINISHED_STATUSES, RunTally};
pub use queue::{
    ClaimRequest, Completion, Enqueued, JobFilter, JobOutcome, JobRow, NewJob, QueueCounters,
    Settled,
};
pub use store::Store;
pub use tokens::TokenRow;
