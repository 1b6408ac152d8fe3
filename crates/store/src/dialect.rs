//! The few fragments of SQL text in which the two databases differ.

/// A database's words for what the shared queries need.
#[derive(Debug)]
pub(crate) struct Dialect {
    /// The database's clock in milliseconds since the epoch, as a `BIGINT`.
    pub(crate) now: &'static str,
    /// The clause that lets a claim pass over rows another transaction has
    /// locked (nothing on SQLite, whose `BEGIN IMMEDIATE` already
    /// serialises writers).
    pub(crate) skip_locked: &'static str,
    /// Reads the run's row if the lease's epoch is still `$2`, keeping the
    /// epoch from changing before commit: SQLite's `BEGIN IMMEDIATE`
    /// already holds the write lock, PostgreSQL takes a row lock. Reading
    /// is enough; an update would write the runs row again on every commit.
    pub(crate) fence: &'static str,
}

pub(crate) const SQLITE: Dialect = Dialect {
    now: "CAST(unixepoch('subsec') * 1000 AS BIGINT)",
    skip_locked: "",
    fence: "SELECT 1 FROM runs WHERE run_id = $1 AND lease_epoch = $2",
};

pub(crate) const POSTGRES: Dialect = Dialect {
    now: "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
    skip_locked: "FOR UPDATE SKIP LOCKED",
    fence: "SELECT 1 FROM runs WHERE run_id = $1 AND lease_epoch = $2 FOR NO KEY UPDATE",
};
