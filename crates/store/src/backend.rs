//! The [`Store`] handle and its queries.
//!
//! The SQL is the same text for both databases (`$n` placeholders: on
//! SQLite, sqlx binds `$n` to the n-th argument by its number, whatever the
//! order of first use; a test below pins that), so each method is written
//! once and expanded for both pool types by the `on_pool!` and
//! `in_transaction!` macros. Where the databases differ — how a write
//! transaction takes its lock, the migrations, SQLite's busy retry on
//! connect — the code is per backend.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, Instant};

use sqlx::Row;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::model::{
    ArtifactRow, AttemptRow, EventRow, Lease, LeaseHolder, NewRun, RunRow, StageRow, Transition,
};
use crate::{Error, Result, migrate};

/// A handle on the store; cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    pub(crate) inner: Inner,
}

#[derive(Debug, Clone)]
pub(crate) enum Inner {
    /// Reads use `read`; write transactions use `write`, a single
    /// connection. In-process writers then queue on the pool rather than in
    /// SQLite's busy handler, which sleeps between tries, and the writer's
    /// page cache stays warm from one commit to the next (another
    /// connection's commit would invalidate it).
    Sqlite {
        read: SqlitePool,
        write: SqlitePool,
        /// Whether this process has checkpointed the write-ahead log yet
        /// (see [`Store::checkpoint_once`]); shared by every clone.
        checkpointed: std::sync::Arc<std::sync::atomic::AtomicBool>,
        /// The file opened, and its device and inode then: a file deleted
        /// or replaced under a running driver would swallow its commits.
        identity: std::sync::Arc<(PathBuf, Option<(u64, u64)>)>,
    },
    Postgres(PgPool),
}

/// How long a SQLite connection waits for another's lock.
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// Whether a SQLite error is SQLITE_BUSY or SQLITE_LOCKED (any extended code).
fn is_sqlite_busy(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|error| error.code())
        .and_then(|code| code.parse::<i32>().ok())
        .is_some_and(|code| matches!(code & 0xff, 5 | 6))
}

pub(crate) fn query_error(what: &'static str) -> impl FnOnce(sqlx::Error) -> Error {
    move |source| Error::Query { what, source }
}

/// Runs `$body` with `$pool` bound to whichever pool the store has.
macro_rules! on_pool {
    ($store:expr, |$pool:ident| $body:expr) => {
        match &$store.inner {
            Inner::Sqlite { read: $pool, .. } => $body,
            Inner::Postgres($pool) => $body,
        }
    };
}
pub(crate) use on_pool;

/// Like [`on_pool`] for a single write statement outside a transaction: on
/// SQLite it goes through the writer connection.
macro_rules! on_writer {
    ($store:expr, |$pool:ident| $body:expr) => {
        match &$store.inner {
            Inner::Sqlite { write: $pool, .. } => $body,
            Inner::Postgres($pool) => $body,
        }
    };
}
pub(crate) use on_writer;

/// Runs `$body` in a write transaction `$tx` and commits it. SQLite takes
/// the write lock up front (`BEGIN IMMEDIATE`) so a transaction never fails
/// half-way on a lock upgrade; PostgreSQL row locks do the same job. The
/// commit is a write point (`failpoint.rs`).
macro_rules! in_transaction {
    ($store:expr, |$tx:ident| $body:block) => {
        match &$store.inner {
            Inner::Sqlite { write, .. } => {
                let mut $tx = write
                    .begin_with("BEGIN IMMEDIATE")
                    .await
                    .map_err(query_error("begin a transaction"))?;
                let out = $body;
                crate::failpoint::write_point!($tx.commit().await)
                    .map_err(query_error("commit"))?;
                out
            }
            Inner::Postgres(pool) => {
                let mut $tx = pool
                    .begin()
                    .await
                    .map_err(query_error("begin a transaction"))?;
                let out = $body;
                crate::failpoint::write_point!($tx.commit().await)
                    .map_err(query_error("commit"))?;
                out
            }
        }
    };
}
pub(crate) use in_transaction;

macro_rules! run_row {
    ($row:expr) => {
        RunRow {
            run_id: $row.try_get("run_id")?,
            workflow: $row.try_get("workflow")?,
            workflow_path: $row.try_get("workflow_path")?,
            workspace: $row.try_get("workspace")?,
            status: $row.try_get("status")?,
            created_at: $row.try_get("created_at")?,
            finished_at: $row.try_get("finished_at")?,
            plan: $row.try_get("plan")?,
            params: $row.try_get("params")?,
            sources: $row.try_get("sources")?,
            options: $row.try_get("options")?,
            error: $row.try_get("error")?,
            lease_owner: $row.try_get("lease_owner")?,
            lease_epoch: $row.try_get("lease_epoch")?,
            lease_until: $row.try_get("lease_until")?,
        }
    };
}

/// A run's columns: the runs row joined with its documents ([`RUNS`]).
const RUN_COLUMNS: &str = "r.run_id, r.workflow, r.workflow_path, r.workspace, r.status, r.created_at, r.finished_at, d.plan, d.params, d.sources, d.options, r.error, r.lease_owner, r.lease_epoch, r.lease_until";
/// Runs with their documents, which live apart so that the small row every
/// commit fences on never drags a large plan along (migration 0006).
const RUNS: &str = "runs r JOIN run_documents d ON d.run_id = r.run_id";

impl Store {
    /// Opens (creating if needed) the store at `location`: a
    /// `postgres://` URL, or the path of a SQLite file.
    ///
    /// # Errors
    ///
    /// The database cannot be opened or migrated.
    pub async fn open(location: &str) -> Result<Store> {
        if location.starts_with("postgres://") || location.starts_with("postgresql://") {
            Self::open_postgres(location).await
        } else {
            Self::open_sqlite(Path::new(location)).await
        }
    }

    /// Opens a SQLite file in WAL mode with `synchronous=FULL`.
    ///
    /// # Errors
    ///
    /// The file cannot be created, opened or migrated.
    pub async fn open_sqlite(path: &Path) -> Result<Store> {
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
            .busy_timeout(SQLITE_BUSY_TIMEOUT)
            .foreign_keys(true);
        // Connecting switches a fresh file to WAL, which needs an exclusive
        // lock. Two processes doing that at once can get SQLITE_BUSY without
        // the busy handler ever being called (SQLite's deadlock avoidance),
        // so a busy connect is retried for as long as a busy query would wait.
        let connect = |connections: u32| {
            let options = options.clone();
            async move {
                let deadline = Instant::now() + SQLITE_BUSY_TIMEOUT;
                loop {
                    match SqlitePoolOptions::new()
                        .max_connections(connections)
                        // A ping only checks that the connection's own
                        // thread is alive, and costs a round trip to it
                        // (sqlx pings again when a connection comes back).
                        .test_before_acquire(false)
                        .connect_with(options.clone())
                        .await
                    {
                        Ok(pool) => break Ok(pool),
                        Err(error) if is_sqlite_busy(&error) && Instant::now() < deadline => {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                        Err(error) => break Err(unavailable(error)),
                    }
                }
            }
        };
        let write = connect(1).await?;
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
        Ok(Store {
            inner: Inner::Sqlite {
                read,
                write,
                checkpointed: std::sync::Arc::default(),
                identity: std::sync::Arc::new((path.to_path_buf(), file_identity(path))),
            },
        })
    }

    /// Connects to PostgreSQL.
    ///
    /// # Errors
    ///
    /// The server cannot be reached or the schema cannot be migrated.
    pub async fn open_postgres(url: &str) -> Result<Store> {
        let location = redact(url);
        let options = sqlx::postgres::PgConnectOptions::from_str(url).map_err(|source| {
            Error::Unavailable {
                location: location.clone(),
                source,
            }
        })?;
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await
            .map_err(|source| Error::Unavailable { location, source })?;
        migrate::postgres(&pool).await?;
        Ok(Store {
            inner: Inner::Postgres(pool),
        })
    }

    /// Lets go of the store just before the process exits. The SQLite
    /// connection that closes last checkpoints the write-ahead log into the
    /// database (two more fsyncs) and deletes it, and the next process then
    /// creates the log again and syncs its header and the directory on its
    /// first commit. Every commit is already durable in the log, so the
    /// writer is left for the exit to end, and the next open reads the log
    /// back: what was written since a drive's first commit copied it
    /// ([`Store::checkpoint_once`]), or at most `wal_autocheckpoint` pages.
    /// A PostgreSQL pool is dropped as any other handle.
    pub async fn close_at_exit(self) {
        if let Inner::Sqlite { write, .. } = &self.inner {
            // Held and forgotten, the writer is never closed, however the
            // runtime's remaining tasks are dropped after this. A connection
            // still busy after a moment is left to close as before.
            if let Ok(Ok(connection)) =
                tokio::time::timeout(Duration::from_millis(100), write.acquire()).await
            {
                std::mem::forget(connection);
            }
            std::mem::forget(self);
        }
    }

    /// The files this store keeps its data in (a SQLite database and its
    /// write-ahead log and shared memory, those that exist); none for
    /// PostgreSQL.
    pub fn files(&self) -> Vec<PathBuf> {
        let Inner::Sqlite { identity, .. } = &self.inner else {
            return Vec::new();
        };
        let path = &identity.0;
        let mut files = vec![path.clone()];
        for suffix in ["-wal", "-shm"] {
            let mut name = path.clone().into_os_string();
            name.push(suffix);
            files.push(PathBuf::from(name));
        }
        files.retain(|file| file.is_file());
        files
    }

    /// Which database this is: `sqlite` or `postgres`.
    pub fn backend(&self) -> &'static str {
        match self.inner {
            Inner::Sqlite { .. } => "sqlite",
            Inner::Postgres(_) => "postgres",
        }
    }

    /// Records a new run and its stages, all pending.
    ///
    /// # Errors
    ///
    /// A run with the same id exists, or the write fails.
    pub async fn create_run(&self, run: &NewRun) -> Result<()> {
        self.create(run, None).await.map(drop)
    }

    /// Records a new run as [`Store::create_run`] does and, in the same
    /// transaction, gives its first lease (epoch 1) to `owner` until
    /// `run.created_at + ttl_ms`: what [`Store::acquire`] would do next, one
    /// commit sooner, for a process that drives the run it creates.
    ///
    /// # Errors
    ///
    /// As [`Store::create_run`].
    pub async fn create_leased_run(&self, run: &NewRun, owner: &str, ttl_ms: i64) -> Result<Lease> {
        let lease = self.create(run, Some((owner, ttl_ms))).await?;
        Ok(lease.expect("a lease was asked for"))
    }

    async fn create(&self, run: &NewRun, lease: Option<(&str, i64)>) -> Result<Option<Lease>> {
        let lease = lease.map(|(owner, ttl_ms)| Lease {
            run_id: run.run_id.clone(),
            owner: owner.to_owned(),
            epoch: 1,
            until: run.created_at + ttl_ms,
        });
        if let Inner::Postgres(pool) = &self.inner {
            create_postgres(pool, run, lease.as_ref()).await?;
            return Ok(lease);
        }
        // SQLite from here. Each statement is a round trip to its thread:
        // the run row carries its lease from the start, and its events go
        // in one statement.
        in_transaction!(self, |tx| {
            sqlx::query(
                "INSERT INTO runs (run_id, workflow, workflow_path, workspace, status, created_at, \
                 lease_owner, lease_epoch, lease_until) \
                 VALUES ($1, $2, $3, $4, 'pending', $5, $6, $7, $8)",
            )
            .bind(&run.run_id)
            .bind(&run.workflow)
            .bind(&run.workflow_path)
            .bind(&run.workspace)
            .bind(run.created_at)
            .bind(lease.as_ref().map(|lease| lease.owner.as_str()))
            .bind(lease.as_ref().map_or(0, |lease| lease.epoch))
            .bind(lease.as_ref().map_or(0, |lease| lease.until))
            .execute(&mut *tx)
            .await
            .map_err(|source| insert_run_error(&run.run_id, "insert the run", source))?;
            sqlx::query(
                "INSERT INTO run_documents (run_id, plan, params, sources, options) VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(&run.run_id)
            .bind(&run.plan)
            .bind(&run.params)
            .bind(&run.sources)
            .bind(&run.options)
            .execute(&mut *tx)
            .await
            .map_err(query_error("insert the run's documents"))?;
            crate::bulk::insert_stages(&mut tx, &run.run_id, &run.stages).await?;
            match &lease {
                None => sqlx::query(
                    "INSERT INTO events (run_id, at, kind, detail) VALUES ($1, $2, 'run_created', '{}')",
                )
                .bind(&run.run_id)
                .bind(run.created_at),
                Some(lease) => sqlx::query(
                    "INSERT INTO events (run_id, at, kind, detail) VALUES \
                     ($1, $2, 'run_created', '{}'), ($1, $2, 'lease_acquired', $3)",
                )
                .bind(&run.run_id)
                .bind(run.created_at)
                .bind(lease_acquired_detail(lease)),
            }
            .execute(&mut *tx)
            .await
            .map_err(query_error("log the run"))?;
            // (A `return` here would leave the transaction uncommitted.)
            Ok::<(), Error>(())
        })?;
        Ok(lease)
    }

    /// Every run, oldest first.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn runs(&self) -> Result<Vec<RunRow>> {
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT {RUN_COLUMNS} FROM {RUNS} ORDER BY r.created_at, r.run_id"
        ));
        on_pool!(self, |pool| {
            let rows = sqlx::query(sql)
                .fetch_all(pool)
                .await
                .map_err(query_error("list runs"))?;
            rows.iter()
                .map(|row| Ok(run_row!(row)))
                .collect::<Result<Vec<_>, sqlx::Error>>()
                .map_err(query_error("read runs"))
        })
    }

    /// One run.
    ///
    /// # Errors
    ///
    /// No such run, or the read fails.
    pub async fn run(&self, run_id: &str) -> Result<RunRow> {
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT {RUN_COLUMNS} FROM {RUNS} WHERE r.run_id = $1"
        ));
        on_pool!(self, |pool| {
            let row = sqlx::query(sql)
                .bind(run_id)
                .fetch_optional(pool)
                .await
                .map_err(query_error("read the run"))?
                .ok_or_else(|| Error::NoSuchRun(run_id.to_owned()))?;
            (|| Ok(run_row!(row)))().map_err(query_error("read the run"))
        })
    }

    /// A run's stages in index order.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn stages(&self, run_id: &str) -> Result<Vec<StageRow>> {
        on_pool!(self, |pool| {
            let rows = sqlx::query(
                "SELECT idx, name, status, attempts, started_at, finished_at, error, note FROM stages WHERE run_id = $1 ORDER BY idx",
            )
            .bind(run_id)
            .fetch_all(pool)
            .await
            .map_err(query_error("list stages"))?;
            rows.iter()
                .map(|row| {
                    Ok(StageRow {
                        index: row.try_get("idx")?,
                        name: row.try_get("name")?,
                        status: row.try_get("status")?,
                        attempts: row.try_get("attempts")?,
                        started_at: row.try_get("started_at")?,
                        finished_at: row.try_get("finished_at")?,
                        error: row.try_get("error")?,
                        note: row.try_get("note")?,
                    })
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()
                .map_err(query_error("read stages"))
        })
    }

    /// A run's attempts, by stage and attempt number.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn attempts(&self, run_id: &str) -> Result<Vec<AttemptRow>> {
        on_pool!(self, |pool| {
            let rows = sqlx::query(
                "SELECT idx, attempt, status, pid, pgid, proc_start, started_at, finished_at, exit_code, error \
                 FROM attempts WHERE run_id = $1 ORDER BY idx, attempt",
            )
            .bind(run_id)
            .fetch_all(pool)
            .await
            .map_err(query_error("list attempts"))?;
            rows.iter()
                .map(|row| {
                    Ok(AttemptRow {
                        index: row.try_get("idx")?,
                        attempt: row.try_get("attempt")?,
                        status: row.try_get("status")?,
                        pid: row.try_get("pid")?,
                        pgid: row.try_get("pgid")?,
                        proc_start: row.try_get("proc_start")?,
                        started_at: row.try_get("started_at")?,
                        finished_at: row.try_get("finished_at")?,
                        exit_code: row.try_get("exit_code")?,
                        error: row.try_get("error")?,
                    })
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()
                .map_err(query_error("read attempts"))
        })
    }

    /// A run's recorded outputs.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn artifacts(&self, run_id: &str) -> Result<Vec<ArtifactRow>> {
        on_pool!(self, |pool| {
            let rows = sqlx::query("SELECT idx, path, sha256, bytes FROM artifacts WHERE run_id = $1 ORDER BY idx, path")
                .bind(run_id)
                .fetch_all(pool)
                .await
                .map_err(query_error("list artifacts"))?;
            rows.iter()
                .map(|row| {
                    Ok(ArtifactRow {
                        index: row.try_get("idx")?,
                        path: row.try_get("path")?,
                        sha256: row.try_get("sha256")?,
                        bytes: row.try_get("bytes")?,
                    })
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()
                .map_err(query_error("read artifacts"))
        })
    }

    /// A run's events after `after` (0 for all), oldest first.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn events(&self, run_id: &str, after: i64) -> Result<Vec<EventRow>> {
        self.events_matching(run_id, after, None).await
    }

    /// A run's events of one kind, oldest first.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn events_of_kind(&self, run_id: &str, kind: &str) -> Result<Vec<EventRow>> {
        self.events_matching(run_id, 0, Some(kind)).await
    }

    async fn events_matching(
        &self,
        run_id: &str,
        after: i64,
        kind: Option<&str>,
    ) -> Result<Vec<EventRow>> {
        let sql = if kind.is_some() {
            "SELECT seq, at, kind, detail FROM events WHERE run_id = $1 AND seq > $2 AND kind = $3 ORDER BY seq"
        } else {
            "SELECT seq, at, kind, detail FROM events WHERE run_id = $1 AND seq > $2 ORDER BY seq"
        };
        on_pool!(self, |pool| {
            let mut query = sqlx::query(sql).bind(run_id).bind(after);
            if let Some(kind) = kind {
                query = query.bind(kind);
            }
            let rows = query
                .fetch_all(pool)
                .await
                .map_err(query_error("list events"))?;
            rows.iter()
                .map(|row| {
                    Ok(EventRow {
                        seq: row.try_get("seq")?,
                        at: row.try_get("at")?,
                        kind: row.try_get("kind")?,
                        detail: row.try_get("detail")?,
                    })
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()
                .map_err(query_error("read events"))
        })
    }

    /// Who holds the run's lease, if anyone does and it has not expired.
    ///
    /// # Errors
    ///
    /// No such run, or the read fails.
    pub async fn lease_holder(&self, run_id: &str, now: i64) -> Result<Option<LeaseHolder>> {
        let run = self.run(run_id).await?;
        Ok(run
            .lease_owner
            .filter(|_| run.lease_until > now)
            .map(|owner| LeaseHolder {
                owner,
                until: run.lease_until,
            }))
    }

    /// Takes the run's lease: possible when nobody holds it, it expired, or
    /// the current holder is `take_over_from`, a holder the caller proved
    /// dead. Naming the dead holder matters: of two processes that both saw
    /// it dead, the second finds the first holding the lease and is refused,
    /// instead of taking it from a live driver. The epoch goes up by one,
    /// fencing out the previous holder.
    ///
    /// # Errors
    ///
    /// [`Error::Held`] while a live holder's lease runs; [`Error::NoSuchRun`].
    pub async fn acquire(
        &self,
        run_id: &str,
        owner: &str,
        now: i64,
        ttl_ms: i64,
        take_over_from: Option<&str>,
    ) -> Result<Lease> {
        in_transaction!(self, |tx| {
            // Lock the run before reading its lease, as `apply` does: a
            // concurrent acquirer (PostgreSQL, READ COMMITTED) waits here
            // and then reads the winner's lease instead of the stale one.
            // SQLite already holds the write lock.
            let locked = sqlx::query("UPDATE runs SET lease_epoch = lease_epoch WHERE run_id = $1")
                .bind(run_id)
                .execute(&mut *tx)
                .await
                .map_err(query_error("lock the run"))?;
            if locked.rows_affected() == 0 {
                return Err(Error::NoSuchRun(run_id.to_owned()));
            }
            let row = sqlx::query(
                "SELECT lease_owner, lease_epoch, lease_until FROM runs WHERE run_id = $1",
            )
            .bind(run_id)
            .fetch_one(&mut *tx)
            .await
            .map_err(query_error("read the lease"))?;
            let holder: Option<String> = row
                .try_get("lease_owner")
                .map_err(query_error("read the lease"))?;
            let epoch: i64 = row
                .try_get("lease_epoch")
                .map_err(query_error("read the lease"))?;
            let until: i64 = row
                .try_get("lease_until")
                .map_err(query_error("read the lease"))?;
            if let Some(holder) = holder
                && until > now
                && take_over_from != Some(holder.as_str())
                && holder != owner
            {
                return Err(Error::Held {
                    run_id: run_id.to_owned(),
                    owner: holder,
                    until,
                });
            }
            let lease = Lease {
                run_id: run_id.to_owned(),
                owner: owner.to_owned(),
                epoch: epoch + 1,
                until: now + ttl_ms,
            };
            let taken = sqlx::query(
                "UPDATE runs SET lease_owner = $1, lease_epoch = $2, lease_until = $3 WHERE run_id = $4 AND lease_epoch = $5",
            )
            .bind(&lease.owner)
            .bind(lease.epoch)
            .bind(lease.until)
            .bind(run_id)
            .bind(epoch)
            .execute(&mut *tx)
            .await
            .map_err(query_error("take the lease"))?;
            // Cannot fail while the row is locked; checked so that no change
            // can ever hand out a lease the database does not record.
            if taken.rows_affected() != 1 {
                return Err(Error::LostLease {
                    run_id: run_id.to_owned(),
                    epoch: lease.epoch,
                });
            }
            sqlx::query("INSERT INTO events (run_id, at, kind, detail) VALUES ($1, $2, 'lease_acquired', $3)")
                .bind(run_id)
                .bind(now)
                .bind(format!("{{\"owner\":{},\"epoch\":{}}}", json_string(owner), lease.epoch))
                .execute(&mut *tx)
                .await
                .map_err(query_error("log the lease"))?;
            Ok::<Lease, Error>(lease)
        })
    }

    /// Extends the lease; returns whether a cancel was requested.
    ///
    /// # Errors
    ///
    /// [`Error::LostLease`] when another process took the run over.
    pub async fn renew(&self, lease: &mut Lease, now: i64, ttl_ms: i64) -> Result<bool> {
        let until = now + ttl_ms;
        let cancel = in_transaction!(self, |tx| {
            let row = sqlx::query(
                "UPDATE runs SET lease_until = $1 WHERE run_id = $2 AND lease_epoch = $3 RETURNING cancel_requested",
            )
            .bind(until)
            .bind(&lease.run_id)
            .bind(lease.epoch)
            .fetch_optional(&mut *tx)
            .await
            .map_err(query_error("renew the lease"))?
            .ok_or_else(|| Error::LostLease {
                run_id: lease.run_id.clone(),
                epoch: lease.epoch,
            })?;
            let cancel: i64 = row.try_get(0).map_err(query_error("renew the lease"))?;
            Ok::<bool, Error>(cancel != 0)
        })?;
        lease.until = until;
        Ok(cancel)
    }

    /// Gives the lease up.
    ///
    /// # Errors
    ///
    /// The write fails (a lost lease is not an error here).
    pub async fn release(&self, lease: &Lease) -> Result<()> {
        on_writer!(self, |pool| {
            crate::failpoint::write_point!(
                sqlx::query(RELEASE)
                    .bind(&lease.run_id)
                    .bind(lease.epoch)
                    .execute(pool)
                    .await
            )
            .map_err(query_error("release the lease"))?;
            Ok(())
        })
    }

    /// Whether someone asked to cancel the run (a cheap read the driver
    /// makes often, so a cancel takes effect within a fraction of a second).
    ///
    /// # Errors
    ///
    /// [`Error::Gone`] when the read failed on a SQLite file deleted or
    /// replaced since it was opened; else the read fails.
    pub async fn cancel_requested(&self, run_id: &str) -> Result<bool> {
        let requested: std::result::Result<Option<i64>, sqlx::Error> = on_pool!(self, |pool| {
            sqlx::query_scalar("SELECT cancel_requested FROM runs WHERE run_id = $1")
                .bind(run_id)
                .fetch_optional(pool)
                .await
        });
        match requested {
            Ok(requested) => Ok(requested.unwrap_or(0) != 0),
            // A read connection opens the path when it is first needed: in
            // a file put in the store's place, the table is missing. That
            // is the file having gone, not a failed query.
            Err(source) => {
                self.still_there()?;
                Err(query_error("read the cancel request")(source))
            }
        }
    }

    /// Forgets the cancel a run ended with, so that it can be driven
    /// again (`baton resume` of a cancelled run).
    ///
    /// # Errors
    ///
    /// The write fails.
    pub async fn clear_cancel(&self, run_id: &str) -> Result<()> {
        on_writer!(self, |pool| {
            crate::failpoint::write_point!(
                sqlx::query("UPDATE runs SET cancel_requested = 0 WHERE run_id = $1")
                    .bind(run_id)
                    .execute(pool)
                    .await
            )
            .map_err(query_error("clear the cancel request"))?;
            Ok(())
        })
    }

    /// Asks whoever drives the run to cancel it.
    ///
    /// # Errors
    ///
    /// No such run, or the write fails.
    pub async fn request_cancel(&self, run_id: &str, now: i64) -> Result<()> {
        in_transaction!(self, |tx| {
            let updated = sqlx::query("UPDATE runs SET cancel_requested = 1 WHERE run_id = $1")
                .bind(run_id)
                .execute(&mut *tx)
                .await
                .map_err(query_error("request a cancel"))?;
            if updated.rows_affected() == 0 {
                return Err(Error::NoSuchRun(run_id.to_owned()));
            }
            sqlx::query("INSERT INTO events (run_id, at, kind, detail) VALUES ($1, $2, 'cancel_requested', '{}')")
                .bind(run_id)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(query_error("log the cancel"))?;
            Ok::<(), Error>(())
        })
    }

    /// Applies transitions in one transaction, fenced by the lease's epoch.
    ///
    /// # Errors
    ///
    /// [`Error::LostLease`] (nothing is written) or a failed write (nothing is written).
    pub async fn apply(&self, lease: &Lease, transitions: &[Transition]) -> Result<()> {
        self.commit(lease, transitions, false).await
    }

    /// Refuses to go on when the SQLite file opened is no longer the one at
    /// its path (deleted, or replaced by another): SQLite would keep writing
    /// to the unlinked file, and the run would report a success nobody can
    /// see. One `stat` per commit.
    fn still_there(&self) -> Result<()> {
        let Inner::Sqlite { identity, .. } = &self.inner else {
            return Ok(());
        };
        let (path, opened) = identity.as_ref();
        if opened.is_some() && file_identity(path) != *opened {
            return Err(Error::Gone {
                location: path.display().to_string(),
            });
        }
        Ok(())
    }

    /// [`Store::apply`] for a drive's last transitions, giving the lease up
    /// in the same transaction ([`Store::release`] would be a commit of its
    /// own at the end of every run).
    ///
    /// # Errors
    ///
    /// As [`Store::apply`]; nothing is written, the lease included, when it fails.
    pub async fn apply_and_release(&self, lease: &Lease, transitions: &[Transition]) -> Result<()> {
        self.commit(lease, transitions, true).await
    }

    async fn commit(&self, lease: &Lease, transitions: &[Transition], release: bool) -> Result<()> {
        if transitions.is_empty() && !release {
            return Ok(());
        }
        self.still_there()?;
        let run_id = lease.run_id.as_str();
        // The fence: the write lock SQLite's `BEGIN IMMEDIATE` already holds,
        // or a row lock on PostgreSQL, keeps the epoch from changing before
        // commit, so reading it is enough; an update would write the runs
        // row again on every commit.
        let fence = match self.inner {
            Inner::Sqlite { .. } => "SELECT 1 FROM runs WHERE run_id = $1 AND lease_epoch = $2",
            Inner::Postgres(_) => {
                "SELECT 1 FROM runs WHERE run_id = $1 AND lease_epoch = $2 FOR NO KEY UPDATE"
            }
        };
        let numbered = matches!(self.inner, Inner::Postgres(_));
        in_transaction!(self, |tx| {
            let fenced = sqlx::query(fence)
                .bind(run_id)
                .bind(lease.epoch)
                .fetch_optional(&mut *tx)
                .await
                .map_err(query_error("check the lease"))?;
            if fenced.is_none() {
                return Err(Error::LostLease {
                    run_id: run_id.to_owned(),
                    epoch: lease.epoch,
                });
            }
            let mut events: Vec<(i64, String, String)> = Vec::new();
            // Attempt and unit transitions touch different tables, so the
            // two groups may be written in either order; anything else is
            // written after both.
            let mut group = crate::attempts::Group::default();
            let mut units = crate::unit_writes::Group::default();
            for transition in transitions {
                if crate::attempts::Group::kind_of(transition) {
                    if !group.fits(transition) {
                        group.flush(&mut tx, run_id).await?;
                    }
                    group.add(transition);
                    log_attempt_event(&mut events, transition);
                } else if crate::unit_writes::Group::kind_of(transition) {
                    if !units.fits(transition) {
                        units.flush(&mut tx, run_id).await?;
                    }
                    units.add(transition);
                    log_unit_event(&mut events, transition);
                } else {
                    group.flush(&mut tx, run_id).await?;
                    units.flush(&mut tx, run_id).await?;
                    apply_one!(tx, run_id, transition, events, numbered);
                }
            }
            group.flush(&mut tx, run_id).await?;
            units.flush(&mut tx, run_id).await?;
            crate::bulk::insert_events(&mut tx, run_id, &events).await?;
            if release {
                sqlx::query(RELEASE)
                    .bind(run_id)
                    .bind(lease.epoch)
                    .execute(&mut *tx)
                    .await
                    .map_err(query_error("release the lease"))?;
            }
            Ok::<(), Error>(())
        })?;
        if !release {
            self.checkpoint_once().await;
        }
        Ok(())
    }

    /// Copies the write-ahead log into the database once per process, after
    /// its first commit that does not end a drive.
    ///
    /// The process that opens a store after every connection has closed
    /// reads the whole log back, page by page, to index it: up to the 1 000
    /// pages SQLite lets it reach before its own checkpoint, many runs'
    /// commits. Copied here, in the middle of a drive while its processes
    /// run, the log the next process finds holds only what was written
    /// after this point (21 pages instead of 701 after a 100-stage run; that
    /// run's first stage started 1.1 ms sooner, `baton runs` took 11 ms
    /// instead of 13). The price is the next commit starting the log over,
    /// one more fsync (about 0.3 ms at the end of a short run); at exit the
    /// copy would cost two fsyncs on the way out. A checkpoint that cannot
    /// finish (a reader holds an old snapshot) or fails leaves the log as it
    /// was, for SQLite's own checkpoint to copy later; the commit it follows
    /// has landed either way.
    async fn checkpoint_once(&self) {
        if let Inner::Sqlite {
            write,
            checkpointed,
            ..
        } = &self.inner
            && !checkpointed.swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            let _ = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
                .execute(write)
                .await;
        }
    }
}

/// Gives a lease up, if it is still the one recorded.
const RELEASE: &str =
    "UPDATE runs SET lease_owner = NULL, lease_until = 0 WHERE run_id = $1 AND lease_epoch = $2";

/// Writes one transition inside the transaction `$tx`; attempt transitions
/// are written by [`attempts::Group`](crate::attempts::Group) and unit
/// starts and ends by [`unit_writes::Group`](crate::unit_writes::Group) instead.
macro_rules! apply_one {
    ($tx:ident, $run_id:expr, $transition:expr, $events:ident, $numbered:expr) => {
        match $transition {
            Transition::AttemptStarted { .. }
            | Transition::ProcessStarted { .. }
            | Transition::AttemptFinished { .. }
            | Transition::UnitStarted { .. }
            | Transition::UnitFinished { .. } => {}
            Transition::AttemptInterrupted { index, attempt, at } => {
                sqlx::query("UPDATE attempts SET status = 'interrupted', finished_at = $1 WHERE run_id = $2 AND idx = $3 AND attempt = $4")
                    .bind(at).bind($run_id).bind(index).bind(attempt)
                    .execute(&mut *$tx).await.map_err(query_error("interrupt an attempt"))?;
                sqlx::query("UPDATE stages SET status = 'pending' WHERE run_id = $1 AND idx = $2")
                    .bind($run_id).bind(index)
                    .execute(&mut *$tx).await.map_err(query_error("reset a stage"))?;
                log_event!($events, *at, "attempt_interrupted", format!("{{\"stage\":{index},\"attempt\":{attempt}}}"));
            }
            Transition::StageReset { index, note } => {
                sqlx::query("UPDATE stages SET status = 'pending', started_at = NULL, finished_at = NULL, error = NULL, note = $1 WHERE run_id = $2 AND idx = $3")
                    .bind(note).bind($run_id).bind(index)
                    .execute(&mut *$tx).await.map_err(query_error("reset a stage"))?;
                sqlx::query("DELETE FROM artifacts WHERE run_id = $1 AND idx = $2")
                    .bind($run_id).bind(index)
                    .execute(&mut *$tx).await.map_err(query_error("forget artifacts"))?;
            }
            Transition::StageSkipped { index, at, note } => {
                sqlx::query("UPDATE stages SET status = 'skipped', started_at = $1, finished_at = $2, note = $3 WHERE run_id = $4 AND idx = $5")
                    .bind(at).bind(at).bind(note).bind($run_id).bind(index)
                    .execute(&mut *$tx).await.map_err(query_error("skip a stage"))?;
            }
            Transition::RunStatus { status, at, error } => {
                let terminal = matches!(status.as_str(), "success" | "failed" | "cancelled" | "rejected");
                sqlx::query("UPDATE runs SET status = $1, error = $2, finished_at = $3 WHERE run_id = $4")
                    .bind(status).bind(error).bind(if terminal { Some(*at) } else { None }).bind($run_id)
                    .execute(&mut *$tx).await.map_err(query_error("set the run status"))?;
                log_event!($events, *at, "run_status", format!("{{\"status\":{}}}", json_string(status)));
            }
            Transition::UnitsPlanned { index, units, at } => {
                crate::units::insert_units(&mut $tx, $run_id, *index, units, $numbered).await?;
                log_event!($events, *at, "units_planned", format!("{{\"stage\":{index},\"units\":{}}}", units.len()));
            }
            Transition::UnitsResumed { index } => {
                sqlx::query("UPDATE units SET status = 'pending' WHERE run_id = $1 AND idx = $2 AND status IN ('running', 'failed')")
                    .bind($run_id).bind(index)
                    .execute(&mut *$tx).await.map_err(query_error("resume units"))?;
            }
            Transition::UnitsCleared { index } => {
                sqlx::query("DELETE FROM units WHERE run_id = $1 AND idx = $2")
                    .bind($run_id).bind(index)
                    .execute(&mut *$tx).await.map_err(query_error("clear units"))?;
                sqlx::query("DELETE FROM findings WHERE run_id = $1 AND idx = $2")
                    .bind($run_id).bind(index)
                    .execute(&mut *$tx).await.map_err(query_error("clear findings"))?;
            }
            Transition::FindingsRecorded { index, cycle, findings } => {
                sqlx::query("DELETE FROM findings WHERE run_id = $1 AND idx = $2 AND cycle = $3")
                    .bind($run_id).bind(index).bind(cycle)
                    .execute(&mut *$tx).await.map_err(query_error("replace findings"))?;
                for (position, finding) in findings.iter().enumerate() {
                    sqlx::query("INSERT INTO findings (run_id, idx, cycle, position, finding_id, status, severity, category, claim, expected, actual, source, fix) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)")
                        .bind($run_id).bind(index).bind(cycle).bind(i64::try_from(position).unwrap_or(i64::MAX))
                        .bind(&finding.id).bind(&finding.status).bind(&finding.severity).bind(&finding.category)
                        .bind(&finding.claim).bind(&finding.expected).bind(&finding.actual).bind(&finding.source).bind(&finding.fix)
                        .execute(&mut *$tx).await.map_err(query_error("record a finding"))?;
                }
            }
            Transition::ArtifactsRecorded { index, at, artifacts } => {
                sqlx::query("DELETE FROM artifacts WHERE run_id = $1 AND idx = $2")
                    .bind($run_id).bind(index)
                    .execute(&mut *$tx).await.map_err(query_error("replace artifacts"))?;
                for (path, sha256, bytes) in artifacts {
                    sqlx::query("INSERT INTO artifacts (run_id, idx, path, sha256, bytes) VALUES ($1, $2, $3, $4, $5)")
                        .bind($run_id).bind(index).bind(path).bind(sha256).bind(bytes)
                        .execute(&mut *$tx).await.map_err(query_error("record an artifact"))?;
                }
                log_event!($events, *at, "artifacts_recorded", format!("{{\"stage\":{index},\"artifacts\":{}}}", artifacts.len()));
            }
            Transition::UsageRecorded(usage) => {
                sqlx::query("DELETE FROM usage WHERE run_id = $1 AND idx = $2 AND unit_key = $3 AND attempt = $4")
                    .bind($run_id).bind(usage.index).bind(&usage.unit).bind(usage.attempt)
                    .execute(&mut *$tx).await.map_err(query_error("replace usage"))?;
                sqlx::query("INSERT INTO usage (run_id, idx, unit_key, attempt, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_microusd, turns, session_id, model, resumed_session) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)")
                    .bind($run_id).bind(usage.index).bind(&usage.unit).bind(usage.attempt)
                    .bind(usage.input_tokens).bind(usage.output_tokens).bind(usage.cache_read_tokens).bind(usage.cache_write_tokens)
                    .bind(usage.cost_microusd).bind(usage.turns).bind(&usage.session_id).bind(&usage.model)
                    .bind(&usage.resumed_session)
                    .execute(&mut *$tx).await.map_err(query_error("record usage"))?;
            }
            Transition::Event { at, kind, detail } => {
                log_event!($events, *at, kind.as_str(), detail.clone());
            }
            Transition::LedgerAppended(event) => {
                let seq: i64 = sqlx::query(crate::ledger::NUMBER)
                    .bind(&event.scope_kind).bind(&event.scope_key).bind(event.recorded_at)
                    .fetch_one(&mut *$tx).await.and_then(|row| row.try_get(0))
                    .map_err(query_error("number a ledger event"))?;
                sqlx::query(crate::ledger::INSERT)
                    .bind(&event.scope_kind).bind(&event.scope_key).bind(seq).bind(&event.kind)
                    .bind(&event.payload).bind(&event.profile).bind(&event.model).bind(&event.session)
                    .bind(event.recorded_at)
                    .execute(&mut *$tx).await.map_err(query_error("append a ledger event"))?;
            }
        }
    };
}
use apply_one;

/// Queues the event a unit transition logs (only a failed end logs one),
/// in batch order.
fn log_unit_event(events: &mut Vec<(i64, String, String)>, transition: &Transition) {
    if let Transition::UnitFinished {
        index,
        key,
        status,
        at,
        ..
    } = transition
        && status != "success"
    {
        log_event!(
            events,
            *at,
            "unit_failed",
            format!("{{\"stage\":{index},\"unit\":{}}}", json_string(key))
        );
    }
}

/// Queues the event an attempt transition logs, in batch order.
fn log_attempt_event(events: &mut Vec<(i64, String, String)>, transition: &Transition) {
    match transition {
        Transition::AttemptStarted { index, attempt, at } => {
            log_event!(
                events,
                *at,
                "attempt_started",
                format!("{{\"stage\":{index},\"attempt\":{attempt}}}")
            );
        }
        Transition::AttemptFinished {
            index,
            attempt,
            status,
            at,
            ..
        } => {
            log_event!(
                events,
                *at,
                "attempt_finished",
                format!(
                    "{{\"stage\":{index},\"attempt\":{attempt},\"status\":{}}}",
                    json_string(status)
                )
            );
        }
        _ => {}
    }
}

/// Queues an event of the batch being applied; [`insert_events`] writes
/// them all with one statement.
macro_rules! log_event {
    ($events:ident, $at:expr, $kind:expr, $detail:expr) => {
        $events.push(($at, String::from($kind), $detail));
    };
}
use log_event;

/// What [`Store::create`] writes, on PostgreSQL as one statement: each
/// statement there is a round trip to the server, and on a new connection
/// (every `baton run`'s) a second one to parse it, so the run, its
/// documents, stages and events and the transaction around them took ten.
/// A single statement is atomic; the foreign keys are checked at its end,
/// when the run row is there; a run id already taken fails on the runs
/// table's key as before.
async fn create_postgres(pool: &PgPool, run: &NewRun, lease: Option<&Lease>) -> Result<()> {
    let mut kinds = vec!["run_created".to_owned()];
    let mut details = vec!["{}".to_owned()];
    if let Some(lease) = lease {
        kinds.push("lease_acquired".to_owned());
        details.push(lease_acquired_detail(lease));
    }
    let statement = sqlx::query(
        "WITH run AS (\
           INSERT INTO runs (run_id, workflow, workflow_path, workspace, status, created_at, \
             lease_owner, lease_epoch, lease_until) \
           VALUES ($1, $2, $3, $4, 'pending', $5, $6, $7, $8)), \
         documents AS (\
           INSERT INTO run_documents (run_id, plan, params, sources, options) \
           VALUES ($1, $9, $10, $11, $12)), \
         stage_rows AS (\
           INSERT INTO stages (run_id, idx, name, status) \
           SELECT $1, s.ordinality - 1, s.name, 'pending' \
           FROM UNNEST($13::TEXT[]) WITH ORDINALITY AS s(name, ordinality)) \
         INSERT INTO events (run_id, at, kind, detail) \
         SELECT $1, $5, e.kind, e.detail \
         FROM UNNEST($14::TEXT[], $15::TEXT[]) WITH ORDINALITY AS e(kind, detail, ordinality) \
         ORDER BY e.ordinality",
    )
    .bind(&run.run_id)
    .bind(&run.workflow)
    .bind(&run.workflow_path)
    .bind(&run.workspace)
    .bind(run.created_at)
    .bind(lease.map(|lease| lease.owner.as_str()))
    .bind(lease.map_or(0, |lease| lease.epoch))
    .bind(lease.map_or(0, |lease| lease.until))
    .bind(&run.plan)
    .bind(&run.params)
    .bind(&run.sources)
    .bind(&run.options)
    .bind(&run.stages)
    .bind(kinds)
    .bind(details);
    crate::failpoint::write_point!(statement.execute(pool).await)
        .map_err(|source| insert_run_error(&run.run_id, "record the run", source))?;
    Ok(())
}

/// A failed insert of a run's row: the primary key is the check for an
/// existing run (on PostgreSQL a check before the insert could race a
/// concurrent create of the same id anyway).
fn insert_run_error(run_id: &str, what: &'static str, source: sqlx::Error) -> Error {
    if source
        .as_database_error()
        .is_some_and(|error| error.is_unique_violation())
    {
        Error::Duplicate(run_id.to_owned())
    } else {
        Error::Query { what, source }
    }
}

/// The detail of a run's `lease_acquired` event.
fn lease_acquired_detail(lease: &Lease) -> String {
    format!(
        "{{\"owner\":{},\"epoch\":{}}}",
        json_string(&lease.owner),
        lease.epoch
    )
}

/// A JSON string literal.
fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for character in text.chars() {
        match character {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The URL without its password, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            let user = credentials.split(':').next().unwrap_or("");
            format!("{}{}@{}", &url[..scheme + 3], user, &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

/// The device and inode of the file at `path`, if there is one.
fn file_identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path)
        .ok()
        .map(|metadata| (metadata.dev(), metadata.ino()))
}

#[cfg(test)]
mod tests {
    use sqlx::ConnectOptions;

    use super::*;

    /// Durability settings, read back from every connection of the pool and
    /// from the file itself.
    #[tokio::test]
    async fn sqlite_is_wal_with_full_sync() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/baton.db");
        let store = Store::open_sqlite(&path).await.unwrap();
        let Inner::Sqlite { read: pool, .. } = &store.inner else {
            panic!("a SQLite path opened {}", store.backend());
        };

        // Holding as many connections as the pool allows makes it open all of them.
        let mut connections = Vec::new();
        for _ in 0..pool.options().get_max_connections() {
            connections.push(pool.acquire().await.unwrap());
        }
        assert_eq!(connections.len(), 4);
        for connection in &mut connections {
            let journal: String = sqlx::query_scalar("PRAGMA journal_mode")
                .fetch_one(&mut **connection)
                .await
                .unwrap();
            let synchronous: i64 = sqlx::query_scalar("PRAGMA synchronous")
                .fetch_one(&mut **connection)
                .await
                .unwrap();
            let foreign_keys: i64 = sqlx::query_scalar("PRAGMA foreign_keys")
                .fetch_one(&mut **connection)
                .await
                .unwrap();
            let busy_timeout: i64 = sqlx::query_scalar("PRAGMA busy_timeout")
                .fetch_one(&mut **connection)
                .await
                .unwrap();
            assert_eq!(journal, "wal");
            assert_eq!(synchronous, 2, "synchronous=FULL");
            assert_eq!(foreign_keys, 1);
            assert_eq!(busy_timeout, 30_000);
        }
        drop(connections);

        // WAL is a property of the file: a plain connection sees it too.
        let mut plain = SqliteConnectOptions::new()
            .filename(&path)
            .connect()
            .await
            .unwrap();
        let journal: String = sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(&mut plain)
            .await
            .unwrap();
        assert_eq!(journal, "wal");
    }

    /// Pages in a SQLite store's write-ahead log, as a new connection finds
    /// it (the pragma copies them into the database as it counts them).
    async fn log_pages(path: &Path) -> i64 {
        let mut plain = SqliteConnectOptions::new()
            .filename(path)
            .connect()
            .await
            .unwrap();
        let row = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
            .fetch_one(&mut plain)
            .await
            .unwrap();
        row.try_get(1).unwrap()
    }

    fn wide_run() -> NewRun {
        let stages: Vec<String> = (0..300).map(|i| format!("stage-{i}")).collect();
        NewRun {
            run_id: "wide".to_owned(),
            workflow: "wide".to_owned(),
            workflow_path: "wide.yaml".to_owned(),
            workspace: "/w/wide".to_owned(),
            created_at: 1,
            plan: format!("{{\"stages\":{stages:?}}}"),
            params: "{}".to_owned(),
            sources: "{}".to_owned(),
            options: "{}".to_owned(),
            stages,
        }
    }

    /// A drive's first commit that keeps its lease copies the log into the
    /// database, so the next process to open the store indexes only what was
    /// written after it rather than every earlier run's commits.
    #[tokio::test]
    async fn sqlite_checkpoints_the_log_after_a_drives_first_commit() {
        let dir = tempfile::tempdir().unwrap();
        let running = |at| {
            [Transition::RunStatus {
                status: "running".to_owned(),
                at,
                error: None,
            }]
        };

        // Only recorded: the record is all in the log.
        let recorded = dir.path().join("recorded.db");
        let store = Store::open_sqlite(&recorded).await.unwrap();
        store
            .create_leased_run(&wide_run(), "me", 60_000)
            .await
            .unwrap();
        let record_pages = log_pages(&recorded).await;

        // Recorded and committed twice: the first commit's checkpoint
        // copied the record, and the second commit started the log over.
        let driven = dir.path().join("driven.db");
        let store = Store::open_sqlite(&driven).await.unwrap();
        let lease = store
            .create_leased_run(&wide_run(), "me", 60_000)
            .await
            .unwrap();
        store.apply(&lease, &running(2)).await.unwrap();
        store.apply(&lease, &running(3)).await.unwrap();
        let driven_pages = log_pages(&driven).await;

        assert!(
            driven_pages < record_pages,
            "the log holds {driven_pages} pages after two commits, the record alone wrote {record_pages}"
        );
        assert_eq!(store.stages("wide").await.unwrap().len(), 300);
    }

    /// The shared SQL relies on SQLite binding `$n` by number, not by order
    /// of appearance.
    #[tokio::test]
    async fn sqlite_binds_placeholders_by_number() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_sqlite(&dir.path().join("baton.db"))
            .await
            .unwrap();
        let Inner::Sqlite { read: pool, .. } = &store.inner else {
            panic!("a SQLite path opened {}", store.backend());
        };
        let row = sqlx::query("SELECT $3, $1, $2, $1 + $3")
            .bind(1_i64)
            .bind("two")
            .bind(3_i64)
            .fetch_one(pool)
            .await
            .unwrap();
        let values: (i64, i64, String, i64) = (
            row.try_get(0).unwrap(),
            row.try_get(1).unwrap(),
            row.try_get(2).unwrap(),
            row.try_get(3).unwrap(),
        );
        assert_eq!(values, (3, 1, "two".to_owned(), 4));
    }

    #[test]
    fn redact_drops_the_password() {
        assert_eq!(
            redact("postgres://baton:secret@db:5432/baton"),
            "postgres://baton@db:5432/baton"
        );
        assert_eq!(redact("postgres://db/baton"), "postgres://db/baton");
    }

    #[test]
    fn json_string_escapes() {
        assert_eq!(json_string("a\"b\\c\nd\u{1}"), r#""a\"b\\c\nd\u0001""#);
    }
}
