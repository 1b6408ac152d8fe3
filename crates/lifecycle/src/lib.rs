//! The task lifecycle and governance rules of baton, as pure decisions.
//!
//! * [`phase`] decides a task's phase from the artifacts in its folder
//!   (docs/tasks.md), counting an artifact only when it is non-empty and
//!   newer than the artifacts it depends on.
//! * [`verdict`] reads `VERDICT.md` and names the follow-up tasks a verdict
//!   calls for.
//! * [`next`] says which phases a task still has to run and what its
//!   verdict decides in manual and autopilot mode; [`decomposition`] reads
//!   `DECOMPOSITION.md`.
//! * [`governance`] is the governance state machine (docs/governance.md): one
//!   transition function, [`governance::apply`], that either moves to a new
//!   state with actions or refuses with a reason.
//!
//! This crate does no I/O: it never reads files, the clock or the
//! environment, and starts no threads. Callers (the engine and the CLI)
//! gather the facts — file sizes and times, ledger events — and act on the
//! decisions returned here.

pub mod decomposition;
#[doc(hidden)]
pub mod fuzz;
pub mod governance;
pub mod next;
pub mod phase;
pub mod verdict;
