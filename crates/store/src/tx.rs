//! A write transaction on either database: the shared code writes through
//! [`Tx`], which hands each statement to the database's own module.
//!
//! A transaction begun by [`Store::begin`](crate::Store) and dropped
//! without [`Tx::commit`] (an early `return` or `?`) is rolled back.

use sqlx::SqlSafeStr;

use crate::columns::{Arg, FromColumns};
use crate::dialect::{self, Dialect};
use crate::error::query_error;
use crate::model::NewUnit;
use crate::{Result, attempts, postgres, sqlite, unit_writes};

/// An open write transaction.
pub(crate) enum Tx {
    Sqlite(sqlite::Transaction),
    Postgres(postgres::Transaction),
}

impl Tx {
    /// The database's SQL fragments.
    pub(crate) fn dialect(&self) -> &'static Dialect {
        match self {
            Tx::Sqlite(_) => &dialect::SQLITE,
            Tx::Postgres(_) => &dialect::POSTGRES,
        }
    }

    /// Runs a statement; returns how many rows it changed.
    pub(crate) async fn execute(
        &mut self,
        sql: impl SqlSafeStr,
        args: &[Arg<'_>],
        what: &'static str,
    ) -> Result<u64> {
        match self {
            Tx::Sqlite(tx) => sqlite::execute(&mut **tx, sql, args, what).await,
            Tx::Postgres(tx) => postgres::execute(&mut **tx, sql, args, what).await,
        }
    }

    /// Runs a query; returns its first row, decoded, if it returned one.
    pub(crate) async fn fetch_optional<T: FromColumns>(
        &mut self,
        sql: impl SqlSafeStr,
        args: &[Arg<'_>],
        what: &'static str,
    ) -> Result<Option<T>> {
        match self {
            Tx::Sqlite(tx) => sqlite::fetch_optional(&mut **tx, sql, args, what).await,
            Tx::Postgres(tx) => postgres::fetch_optional(&mut **tx, sql, args, what).await,
        }
    }

    /// Runs a query that returns a row; returns it, decoded.
    pub(crate) async fn fetch_one<T: FromColumns>(
        &mut self,
        sql: impl SqlSafeStr,
        args: &[Arg<'_>],
        what: &'static str,
    ) -> Result<T> {
        let row = self.fetch_optional(sql, args, what).await?;
        row.ok_or_else(|| query_error(what)(sqlx::Error::RowNotFound))
    }

    /// Runs a query; returns every row it returned, decoded.
    pub(crate) async fn fetch_all<T: FromColumns>(
        &mut self,
        sql: impl SqlSafeStr,
        args: &[Arg<'_>],
        what: &'static str,
    ) -> Result<Vec<T>> {
        match self {
            Tx::Sqlite(tx) => sqlite::fetch_all(&mut **tx, sql, args, what).await,
            Tx::Postgres(tx) => postgres::fetch_all(&mut **tx, sql, args, what).await,
        }
    }

    /// Appends a batch's events to the run's log, in order.
    pub(crate) async fn insert_events(
        &mut self,
        run_id: &str,
        events: &[(i64, String, String)],
    ) -> Result<()> {
        match self {
            Tx::Sqlite(tx) => sqlite::insert_events(tx, run_id, events).await,
            Tx::Postgres(tx) => postgres::insert_events(tx, run_id, events).await,
        }
    }

    /// Inserts a stage's planned units (keys it has already are left).
    pub(crate) async fn insert_units(
        &mut self,
        run_id: &str,
        index: i64,
        units: &[NewUnit],
    ) -> Result<()> {
        match self {
            Tx::Sqlite(tx) => sqlite::insert_units(tx, run_id, index, units).await,
            Tx::Postgres(tx) => postgres::insert_units(tx, run_id, index, units).await,
        }
    }

    /// Writes a group of attempt transitions and empties it.
    pub(crate) async fn flush_attempts(
        &mut self,
        run_id: &str,
        group: &mut attempts::Group<'_>,
    ) -> Result<()> {
        let nets = group.take();
        if nets.is_empty() {
            return Ok(());
        }
        match self {
            Tx::Sqlite(tx) => sqlite::write_attempts(tx, run_id, &nets).await,
            Tx::Postgres(tx) => postgres::write_attempts(tx, run_id, &nets).await,
        }
    }

    /// Writes a group of unit transitions and empties it.
    pub(crate) async fn flush_units(
        &mut self,
        run_id: &str,
        group: &mut unit_writes::Group<'_>,
    ) -> Result<()> {
        let (starts, ends) = group.take();
        if starts.is_empty() && ends.is_empty() {
            return Ok(());
        }
        match self {
            Tx::Sqlite(tx) => sqlite::write_units(tx, run_id, &starts, &ends).await,
            Tx::Postgres(tx) => postgres::write_units(tx, run_id, &starts, &ends).await,
        }
    }

    /// Commits: a write point (`failpoint.rs`).
    pub(crate) async fn commit(self) -> Result<()> {
        let committed = match self {
            Tx::Sqlite(tx) => crate::failpoint::write(tx.commit()).await,
            Tx::Postgres(tx) => crate::failpoint::write(tx.commit()).await,
        };
        committed.map_err(query_error("commit"))
    }
}
