//! The store on PostgreSQL, for many machines: a pool of connections, row
//! locks where SQLite's single writer serialises.
//!
//! This module connects and runs statements; `batch.rs` has its many-row
//! writes (one array per column) and `create.rs` a new run's record.

mod batch;
mod create;

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgArguments, PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Executor, Postgres, SqlSafeStr};

pub(crate) use batch::write as write_rows;

use crate::columns::{Arg, FromColumns};
use crate::error::query_error;
use crate::{Error, Result, migrate};

/// A write transaction on PostgreSQL.
pub(crate) type Transaction = sqlx::Transaction<'static, Postgres>;

/// A connected PostgreSQL store.
#[derive(Debug, Clone)]
pub(crate) struct Db {
    pub(crate) pool: PgPool,
}

impl Db {
    /// Connects to the server at `url` and migrates its schema.
    pub(crate) async fn open(url: &str) -> Result<Db> {
        let location = redact(url);
        let options = PgConnectOptions::from_str(url).map_err(|source| Error::Unavailable {
            location: location.clone(),
            source,
        })?;
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await
            .map_err(|source| Error::Unavailable { location, source })?;
        migrate::postgres(&pool).await?;
        Ok(Db { pool })
    }

    /// Begins a write transaction; its row locks keep concurrent writers of
    /// the same rows apart.
    pub(crate) async fn begin(&self) -> Result<Transaction> {
        self.pool
            .begin()
            .await
            .map_err(query_error("begin a transaction"))
    }
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

/// A statement on PostgreSQL with its values bound.
type Query<'q> = sqlx::query::Query<'q, Postgres, PgArguments>;

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
    args.iter().fold(sqlx::query(sql), bind)
}

/// Runs a statement; returns how many rows it changed.
pub(crate) async fn execute<'e>(
    executor: impl Executor<'e, Database = Postgres>,
    sql: impl SqlSafeStr,
    args: &[Arg<'_>],
    what: &'static str,
) -> Result<u64> {
    let done = query(sql, args).execute(executor).await;
    Ok(done.map_err(query_error(what))?.rows_affected())
}

/// Runs a query; returns every row it returned, decoded.
pub(crate) async fn fetch_all<'e, T: FromColumns>(
    executor: impl Executor<'e, Database = Postgres>,
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
    executor: impl Executor<'e, Database = Postgres>,
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
mod tests {
    use super::redact;

    #[test]
    fn redact_drops_the_password() {
        assert_eq!(
            redact("postgres://baton:secret@db:5432/baton"),
            "postgres://baton@db:5432/baton"
        );
        assert_eq!(redact("postgres://db/baton"), "postgres://db/baton");
    }
}
