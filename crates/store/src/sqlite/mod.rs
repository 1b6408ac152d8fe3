//! The store on SQLite: one file in WAL mode with `synchronous=FULL`,
//! written through a single connection in `BEGIN IMMEDIATE` transactions.
//!
//! This module opens the file and runs statements on it; `batch.rs` has
//! its many-row writes (`VALUES` lists), `create.rs` a new run's record and
//! `checkpoint.rs` what it does with the write-ahead log.

mod batch;
mod checkpoint;
mod create;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use sqlx::sqlite::{
    SqliteArguments, SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};
use sqlx::{Executor, SqlSafeStr, Sqlite};

pub(crate) use batch::write as write_rows;

use crate::columns::{Arg, FromColumns};
use crate::error::query_error;
use crate::{Error, Result, migrate};

/// A write transaction on SQLite.
pub(crate) type Transaction = sqlx::Transaction<'static, Sqlite>;

/// An open SQLite store.
///
/// Reads use `read`; write transactions use `write`, a single connection.
/// In-process writers then queue on the pool rather than in SQLite's busy
/// handler, which sleeps between tries, and the writer's page cache stays
/// warm from one commit to the next (another connection's commit would
/// invalidate it).
#[derive(Debug, Clone)]
pub(crate) struct Db {
    pub(crate) read: SqlitePool,
    pub(crate) write: SqlitePool,
    /// Whether this process has checkpointed the write-ahead log yet
    /// (see [`Db::checkpoint_once`]); shared by every clone.
    checkpointed: Arc<AtomicBool>,
    /// The file opened, and its device and inode then: a file deleted or
    /// replaced under a running driver would swallow its commits.
    identity: Arc<(PathBuf, Option<(u64, u64)>)>,
}

/// How long a SQLite connection waits for another's lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

impl Db {
    /// Opens (creating and migrating if needed) the file at `path`.
    pub(crate) async fn open(path: &Path) -> Result<Db> {
        let unavailable = |source| Error::Unavailable {
            location: path.display().to_string(),
            source,
        };
        if let Some(parent) = path
            .parent()
            .filter(|parent| !parent.as_os_str().is_empty())
        {
            std::fs::create_dir_all(parent).map_err(|error| unavailable(sqlx::Error::Io(error)))?;
        }
        migrate::create_sqlite(path).await.map_err(unavailable)?;
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true);
        let write = connect_writer(&options).await.map_err(unavailable)?;
        migrate::sqlite(&write).await?;
        // The read pool opens its connections when a read first needs one:
        // a run that only writes (a new `baton run`) never opens one, and a
        // connection is a thread, an open and a schema parse. The writer has
        // switched the file to WAL by now, so a read connection needs no
        // exclusive lock and no retry.
        let read = SqlitePoolOptions::new()
            .max_connections(4)
            .test_before_acquire(false)
            .connect_lazy_with(options);
        Ok(Db {
            read,
            write,
            checkpointed: Arc::default(),
            identity: Arc::new((path.to_path_buf(), file_identity(path))),
        })
    }

    /// Begins a write transaction, taking the write lock up front (`BEGIN
    /// IMMEDIATE`) so that it never fails half-way on a lock upgrade.
    pub(crate) async fn begin(&self) -> Result<Transaction> {
        self.write
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(query_error("begin a transaction"))
    }

    /// The database file and its write-ahead log and shared memory, those
    /// that exist.
    pub(crate) fn files(&self) -> Vec<PathBuf> {
        let path = &self.identity.0;
        let mut files = vec![path.clone()];
        for suffix in ["-wal", "-shm"] {
            let mut name = path.clone().into_os_string();
            name.push(suffix);
            files.push(PathBuf::from(name));
        }
        files.retain(|file| file.is_file());
        files
    }

    /// Refuses to go on when the file opened is no longer the one at its
    /// path (deleted, or replaced by another): SQLite would keep writing to
    /// the unlinked file, and the run would report a success nobody can
    /// see. One `stat` per commit.
    pub(crate) fn still_there(&self) -> Result<()> {
        let (path, opened) = self.identity.as_ref();
        if opened.is_some() && file_identity(path) != *opened {
            return Err(Error::Gone {
                location: path.display().to_string(),
            });
        }
        Ok(())
    }
}

/// Connects the single writer. Connecting switches a fresh file to WAL,
/// which needs an exclusive lock. Two processes doing that at once can get
/// SQLITE_BUSY without the busy handler ever being called (SQLite's
/// deadlock avoidance), so a busy connect is retried for as long as a busy
/// query would wait.
async fn connect_writer(options: &SqliteConnectOptions) -> sqlx::Result<SqlitePool> {
    let deadline = Instant::now() + BUSY_TIMEOUT;
    loop {
        match SqlitePoolOptions::new()
            .max_connections(1)
            // A ping only checks that the connection's own thread is alive,
            // and costs a round trip to it (sqlx pings again when a
            // connection comes back).
            .test_before_acquire(false)
            .connect_with(options.clone())
            .await
        {
            Ok(pool) => return Ok(pool),
            Err(error) if is_busy(&error) && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(error) => return Err(error),
        }
    }
}

/// Whether a SQLite error is SQLITE_BUSY or SQLITE_LOCKED (any extended code).
fn is_busy(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|error| error.code())
        .and_then(|code| code.parse::<i32>().ok())
        .is_some_and(|code| matches!(code & 0xff, 5 | 6))
}

/// The device and inode of the file at `path`, if there is one.
fn file_identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path)
        .ok()
        .map(|metadata| (metadata.dev(), metadata.ino()))
}

/// A statement on SQLite with its values bound.
type Query<'q> = sqlx::query::Query<'q, Sqlite, SqliteArguments>;

/// `query` with `arg` bound next.
fn bind<'q>(query: Query<'q>, arg: &Arg<'_>) -> Query<'q> {
    match *arg {
        Arg::Int(value) => query.bind(value),
        Arg::Text(value) => query.bind(value),
        Arg::MaybeInt(value) => query.bind(value),
        Arg::MaybeText(value) => query.bind(value),
    }
}

/// `sql` with `args` bound in order.
fn query<'q>(sql: impl SqlSafeStr, args: &[Arg<'_>]) -> Query<'q> {
    args.iter()
        .fold(sqlx::query_with(sql, arguments(args.len())), bind)
}

/// Arguments with room for `count` values, bound without regrowing.
fn arguments(count: usize) -> SqliteArguments {
    let mut arguments = SqliteArguments::default();
    sqlx::Arguments::reserve(&mut arguments, count, 0);
    arguments
}

/// Runs a statement; returns how many rows it changed.
pub(crate) async fn execute<'e>(
    executor: impl Executor<'e, Database = Sqlite>,
    sql: impl SqlSafeStr,
    args: &[Arg<'_>],
    what: &'static str,
) -> Result<u64> {
    let done = query(sql, args).execute(executor).await;
    Ok(done.map_err(query_error(what))?.rows_affected())
}

/// Runs a query; returns every row it returned, decoded.
pub(crate) async fn fetch_all<'e, T: FromColumns>(
    executor: impl Executor<'e, Database = Sqlite>,
    sql: impl SqlSafeStr,
    args: &[Arg<'_>],
    what: &'static str,
) -> Result<Vec<T>> {
    let rows = query(sql, args).fetch_all(executor).await;
    let rows = rows.map_err(query_error(what))?;
    let decoded: sqlx::Result<Vec<T>> = rows.iter().map(T::from_columns).collect();
    decoded.map_err(query_error(what))
}

/// Runs a query; returns its first row, decoded, if it returned one.
pub(crate) async fn fetch_optional<'e, T: FromColumns>(
    executor: impl Executor<'e, Database = Sqlite>,
    sql: impl SqlSafeStr,
    args: &[Arg<'_>],
    what: &'static str,
) -> Result<Option<T>> {
    let row = query(sql, args).fetch_optional(executor).await;
    let row = row.map_err(query_error(what))?;
    let decoded = row.as_ref().map(T::from_columns).transpose();
    decoded.map_err(query_error(what))
}

#[cfg(test)]
mod tests;
