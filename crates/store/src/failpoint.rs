//! Counted crash points on every write that changes the store, for the
//! failpoint sweep: a test counts the writes of an undisturbed command,
//! then makes the process abort just before (or just after) its Nth write
//! commits, for every N, and checks that `baton resume` ends where the
//! undisturbed run did.
//!
//! A write is one commit: a transaction (`Store::begin` to `Tx::commit`), a statement
//! run on its own (a lease released, a cancel cleared, job leases renewed),
//! the schema built or migrated. Writes are numbered from 1 in the order
//! they reach their commit, across every `Store` of the
//! process.
//!
//! Only the engine arms the points, for the CLI, which reads
//! `BATON_FAILPOINT`; this crate never reads the environment. Unarmed, a
//! point costs one relaxed atomic load.

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

/// What the write points do once armed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WritePoint {
    /// Count the writes; [`writes`] says how many there were.
    Count,
    /// Abort the process just before the `n`th write (from 1) commits:
    /// nothing of it is in the store.
    Before(u64),
    /// Abort the process just after the `n`th write committed, before the
    /// caller learns that it did.
    After(u64),
}

const OFF: u8 = 0;
const COUNT: u8 = 1;
const BEFORE: u8 = 2;
const AFTER: u8 = 3;

static MODE: AtomicU8 = AtomicU8::new(OFF);
static TARGET: AtomicU64 = AtomicU64::new(0);
static WRITES: AtomicU64 = AtomicU64::new(0);

/// Arms the write points for the rest of the process. Meant to be called
/// once, before the first write.
pub fn arm(point: WritePoint) {
    let (mode, target) = match point {
        WritePoint::Count => (COUNT, 0),
        WritePoint::Before(n) => (BEFORE, n),
        WritePoint::After(n) => (AFTER, n),
    };
    TARGET.store(target, Ordering::Relaxed);
    MODE.store(mode, Ordering::Relaxed);
}

/// How many writes reached their commit since the points were armed.
pub fn writes() -> u64 {
    WRITES.load(Ordering::Relaxed)
}

/// Called just before a write commits; returns its number (0 when the
/// points are not armed), for [`after`].
#[inline]
pub(crate) fn before() -> u64 {
    if MODE.load(Ordering::Relaxed) == OFF {
        return 0;
    }
    counted()
}

#[cold]
fn counted() -> u64 {
    let number = WRITES.fetch_add(1, Ordering::Relaxed) + 1;
    if MODE.load(Ordering::Relaxed) == BEFORE && number == TARGET.load(Ordering::Relaxed) {
        std::process::abort();
    }
    number
}

/// Called just after the write numbered `number` (by [`before`]) committed.
#[inline]
pub(crate) fn after(number: u64) {
    if number != 0
        && MODE.load(Ordering::Relaxed) == AFTER
        && number == TARGET.load(Ordering::Relaxed)
    {
        std::process::abort();
    }
}

/// Runs one write: `commit` (a future that commits, or does nothing)
/// between the points.
pub(crate) async fn write<T, E>(
    commit: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let number = before();
    let out = commit.await;
    if out.is_ok() {
        after(number);
    }
    out
}
