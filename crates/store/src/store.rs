//! The [`Store`] handle: which database it is on, and the few operations
//! every query goes through — reads on the read side, single writes and
//! transactions on the write side — each handed to that database's module.
//!
//! The queries themselves live in files named for what they hold (`runs.rs`,
//! `leases.rs`, `apply.rs`, …), written once over these operations with
//! the SQL text both databases share; where the databases differ, the code
//! is in `sqlite/` or `postgres/`.

use std::path::{Path, PathBuf};

use sqlx::SqlSafeStr;

use crate::columns::{Arg, FromColumns};
use crate::dialect::{self, Dialect};
use crate::tx::Tx;
use crate::{Result, postgres, sqlite};

/// A handle on the store; cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    pub(crate) inner: Inner,
}

/// The database behind a [`Store`].
#[derive(Debug, Clone)]
pub(crate) enum Inner {
    Sqlite(sqlite::Db),
    Postgres(postgres::Db),
}

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
        let inner = Inner::Sqlite(sqlite::Db::open(path).await?);
        Ok(Store { inner })
    }

    /// Connects to PostgreSQL.
    ///
    /// # Errors
    ///
    /// The server cannot be reached or the schema cannot be migrated.
    pub async fn open_postgres(url: &str) -> Result<Store> {
        let inner = Inner::Postgres(postgres::Db::open(url).await?);
        Ok(Store { inner })
    }

    /// Lets go of the store just before the process exits: a SQLite file's
    /// write-ahead log is left for the next process to read back rather
    /// than copied on the way out (see `sqlite/checkpoint.rs`). A
    /// PostgreSQL pool is dropped as any other handle.
    pub async fn close_at_exit(self) {
        if let Inner::Sqlite(db) = self.inner {
            db.close_at_exit().await;
        }
    }

    /// The files this store keeps its data in (a SQLite database and its
    /// write-ahead log and shared memory, those that exist); none for
    /// PostgreSQL.
    pub fn files(&self) -> Vec<PathBuf> {
        match &self.inner {
            Inner::Sqlite(db) => db.files(),
            Inner::Postgres(_) => Vec::new(),
        }
    }

    /// Which database this is: `sqlite` or `postgres`.
    pub fn backend(&self) -> &'static str {
        match self.inner {
            Inner::Sqlite(_) => "sqlite",
            Inner::Postgres(_) => "postgres",
        }
    }

    /// The database's SQL fragments.
    pub(crate) fn dialect(&self) -> &'static Dialect {
        match self.inner {
            Inner::Sqlite(_) => &dialect::SQLITE,
            Inner::Postgres(_) => &dialect::POSTGRES,
        }
    }

    /// Refuses to go on when the SQLite file opened was deleted or
    /// replaced since ([`crate::Error::Gone`]).
    pub(crate) fn still_there(&self) -> Result<()> {
        match &self.inner {
            Inner::Sqlite(db) => db.still_there(),
            Inner::Postgres(_) => Ok(()),
        }
    }

    /// Begins a write transaction: SQLite takes the write lock up front
    /// (`BEGIN IMMEDIATE`) so a transaction never fails half-way on a lock
    /// upgrade; PostgreSQL row locks do the same job.
    pub(crate) async fn begin(&self) -> Result<Tx> {
        Ok(match &self.inner {
            Inner::Sqlite(db) => Tx::Sqlite(db.begin().await?),
            Inner::Postgres(db) => Tx::Postgres(db.begin().await?),
        })
    }

    /// A read: every row the query returns, decoded.
    pub(crate) async fn fetch_all<T: FromColumns>(
        &self,
        sql: impl SqlSafeStr,
        args: &[Arg<'_>],
        what: &'static str,
    ) -> Result<Vec<T>> {
        match &self.inner {
            Inner::Sqlite(db) => sqlite::fetch_all(&db.read, sql, args, what).await,
            Inner::Postgres(db) => postgres::fetch_all(&db.pool, sql, args, what).await,
        }
    }

    /// A read: the first row the query returns, decoded, if any.
    pub(crate) async fn fetch_optional<T: FromColumns>(
        &self,
        sql: impl SqlSafeStr,
        args: &[Arg<'_>],
        what: &'static str,
    ) -> Result<Option<T>> {
        match &self.inner {
            Inner::Sqlite(db) => sqlite::fetch_optional(&db.read, sql, args, what).await,
            Inner::Postgres(db) => postgres::fetch_optional(&db.pool, sql, args, what).await,
        }
    }

    /// A single write statement outside a transaction (on SQLite through
    /// the writer connection), a write point of its own; returns how many
    /// rows it changed.
    pub(crate) async fn write(
        &self,
        sql: impl SqlSafeStr,
        args: &[Arg<'_>],
        what: &'static str,
    ) -> Result<u64> {
        crate::failpoint::write(async {
            match &self.inner {
                Inner::Sqlite(db) => sqlite::execute(&db.write, sql, args, what).await,
                Inner::Postgres(db) => postgres::execute(&db.pool, sql, args, what).await,
            }
        })
        .await
    }

    /// [`Store::write`] for a statement that returns rows.
    pub(crate) async fn write_returning<T: FromColumns>(
        &self,
        sql: impl SqlSafeStr,
        args: &[Arg<'_>],
        what: &'static str,
    ) -> Result<Vec<T>> {
        crate::failpoint::write(async {
            match &self.inner {
                Inner::Sqlite(db) => sqlite::fetch_all(&db.write, sql, args, what).await,
                Inner::Postgres(db) => postgres::fetch_all(&db.pool, sql, args, what).await,
            }
        })
        .await
    }

    /// After a commit that keeps the lease: SQLite copies its write-ahead
    /// log into the database, once per process (see `sqlite/checkpoint.rs`).
    pub(crate) async fn checkpoint_once(&self) {
        if let Inner::Sqlite(db) = &self.inner {
            db.checkpoint_once().await;
        }
    }
}
