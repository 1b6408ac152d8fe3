//! The store's errors.

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

/// Wraps a driver's error as a failed query doing `what`.
pub(crate) fn query_error(what: &'static str) -> impl FnOnce(sqlx::Error) -> Error {
    move |source| Error::Query { what, source }
}

/// A failed insert of a run's row: the primary key is the check for an
/// existing run (on PostgreSQL a check before the insert could race a
/// concurrent create of the same id anyway).
pub(crate) fn insert_run_error(run_id: &str, what: &'static str, source: sqlx::Error) -> Error {
    if source
        .as_database_error()
        .is_some_and(|error| error.is_unique_violation())
    {
        Error::Duplicate(run_id.to_owned())
    } else {
        Error::Query { what, source }
    }
}
