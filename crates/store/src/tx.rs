//! A write transaction on either database: the shared code writes through
//! [`Tx`], which hands each statement to the database's own module.
//!
//! A transaction begun by `Store::begin` and dropped
//! without [`Tx::commit`] (an early `return` or `?`) is rolled back.

use sqlx::SqlSafeStr;

use crate::batch::{Rows, Statement};
use crate::columns::{Arg, FromColumns};
use crate::dialect::{self, Dialect};
use crate::error::query_error;
use crate::{Result, postgres, sqlite};

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

    /// Writes `rows` of the run with a many-row statement (`batch.rs`).
    pub(crate) async fn write_rows(
        &mut self,
        run_id: &str,
        statement: &Statement,
        rows: &Rows<'_>,
    ) -> Result<()> {
        let what = statement.what;
        match self {
            Tx::Sqlite(tx) => sqlite::write_rows(tx, run_id, &statement.sqlite, what, rows).await,
            Tx::Postgres(tx) => {
                postgres::write_rows(tx, run_id, statement.postgres, what, rows).await
            }
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
