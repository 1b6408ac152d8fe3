//! Points where a test can make baton crash (`abort`), to prove that a
//! crash there loses nothing. The CLI arms one point from
//! `BATON_FAILPOINT` for the whole process; nothing else arms them.
//!
//! * `gate-edit:written`, `gate-edit:swapped`, `gate-edit:renamed`: the
//!   steps of a gate edit (`gate/edit.rs`).
//! * `store-write:N`: just before the process's Nth store write commits;
//!   `store-written:N`: just after it committed (every commit counts, see
//!   the store's `failpoint` module). `store-write:count` only counts. With
//!   any of these, a process that ends prints how many writes it made to
//!   stderr at exit, as `baton: store writes: K`.
//!
//! The failpoint sweep (`crates/cli/tests/cli/failpoint_sweep.rs`) counts
//! the writes of each command of an undisturbed run and crashes it at every
//! one of them, before and after: `cargo nextest run -p baton-cli --test
//! cli failpoint_sweep::` (PostgreSQL too with `BATON_TEST_DATABASE_URL`);
//! `BATON_SWEEP_ROUNDS=R` repeats it, going on past the undisturbed count,
//! as `scripts/soak` does.
//!
//! The driver's process starts need no points of their own: a start that
//! waits for its commit follows it at once, so `store-written:N` of that
//! commit is the crash between the two; a start that goes ahead of its
//! commit (a plain process) is cut off by `store-write:N` of the commit
//! that would record it. Likewise `store-written:N` is the crash before
//! anything that follows a commit: result envelopes, worktrees, queue jobs.
//! (A crash in the middle of those is `crash.rs`'s, by random `kill -9`.)

use std::sync::OnceLock;

use baton_store::failpoint::WritePoint;

static ARMED: OnceLock<String> = OnceLock::new();

/// The named points.
const NAMED: &[&str] = &[
    "gate-edit:written",
    "gate-edit:swapped",
    "gate-edit:renamed",
];

/// A `BATON_FAILPOINT` that names no point.
#[derive(Debug, thiserror::Error)]
#[error(
    "unknown failpoint '{0}': use one of {named}, store-write:N or store-written:N (N from 1), or store-write:count",
    named = NAMED.join(", ")
)]
pub struct UnknownFailpoint(pub String);

/// Arms the point `name`: reaching it aborts the process.
///
/// # Errors
///
/// [`UnknownFailpoint`] when `name` is none of the points above; nothing
/// is armed then.
pub fn arm(name: &str) -> Result<(), UnknownFailpoint> {
    if NAMED.contains(&name) {
        let _ = ARMED.set(name.to_owned());
        return Ok(());
    }
    let number = |text: &str| text.parse::<u64>().ok().filter(|n| *n > 0);
    let point = match name.split_once(':') {
        Some(("store-write", "count")) => Some(WritePoint::Count),
        Some(("store-write", n)) => number(n).map(WritePoint::Before),
        Some(("store-written", n)) => number(n).map(WritePoint::After),
        _ => None,
    };
    let point = point.ok_or_else(|| UnknownFailpoint(name.to_owned()))?;
    baton_store::failpoint::arm(point);
    let _ = ARMED.set(name.to_owned());
    Ok(())
}

/// The number of store writes so far, when a store point is armed: the
/// count asked for, or how far a process that never reached its point got.
pub fn counted_writes() -> Option<u64> {
    ARMED
        .get()
        .is_some_and(|armed| armed.starts_with("store-writ"))
        .then(baton_store::failpoint::writes)
}

/// Aborts the process if the point `name` is armed.
pub(crate) fn hit(name: &str) {
    if ARMED.get().is_some_and(|armed| armed == name) {
        std::process::abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_are_no_point_are_refused() {
        for name in [
            "gate-edit:writen",
            "store-write:0",
            "store-write:x",
            "store-write:",
            "store-written:count",
            "store-write:-1",
            "",
        ] {
            let error = arm(name).expect_err(name).to_string();
            assert!(error.contains("store-write:N"), "{error}");
        }
        assert!(ARMED.get().is_none());
    }
}
