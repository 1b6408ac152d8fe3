//! Append-only schema migrations, applied under an exclusive lock so that
//! several baton processes opening a fresh store at once is safe.
//!
//! SQLite tracks the version in `PRAGMA user_version` and takes the write
//! lock with `BEGIN IMMEDIATE`; PostgreSQL keeps a one-row `baton_schema`
//! table and serialises on a transaction-level advisory lock.

use sqlx::{PgPool, Row, SqlitePool};

use crate::{Error, Result};

/// Migrations per backend, in order; the position (from 1) is the version.
const SQLITE: &[&str] = &[
    include_str!("../migrations/sqlite/0001_runs.sql"),
    include_str!("../migrations/sqlite/0002_units_gates_findings.sql"),
    include_str!("../migrations/sqlite/0003_jobs.sql"),
    include_str!("../migrations/sqlite/0004_usage.sql"),
    include_str!("../migrations/sqlite/0005_governance.sql"),
    include_str!("../migrations/sqlite/0006_run_documents.sql"),
];
const POSTGRES: &[&str] = &[
    include_str!("../migrations/postgres/0001_runs.sql"),
    include_str!("../migrations/postgres/0002_units_gates_findings.sql"),
    include_str!("../migrations/postgres/0003_jobs.sql"),
    include_str!("../migrations/postgres/0004_usage.sql"),
    include_str!("../migrations/postgres/0005_governance.sql"),
    include_str!("../migrations/postgres/0006_run_documents.sql"),
];

/// The schema the SQLite migrations build, for a new store (see the file's
/// header).
const SQLITE_SCHEMA: &str = include_str!("../migrations/sqlite/schema.sql");

/// An arbitrary constant naming baton's advisory lock.
const LOCK_KEY: i64 = 0x6261_746f_6e00;

fn query_error(what: &'static str) -> impl FnOnce(sqlx::Error) -> Error {
    move |source| Error::Query { what, source }
}

fn known() -> i64 {
    i64::try_from(SQLITE.len()).expect("few migrations")
}

pub(crate) async fn sqlite(pool: &SqlitePool) -> Result<()> {
    let mut tx = pool
        .begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(query_error("lock the schema"))?;
    let version: i64 = sqlx::query("PRAGMA user_version")
        .fetch_one(&mut *tx)
        .await
        .and_then(|row| row.try_get(0))
        .map_err(query_error("read the schema version"))?;
    if version > known() {
        return Err(Error::TooNew {
            found: version,
            known: known(),
        });
    }
    if version == 0 {
        // A new store: the whole schema at once, rather than its history.
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "{SQLITE_SCHEMA}\nPRAGMA user_version = {};",
            known()
        )))
        .execute(&mut *tx)
        .await
        .map_err(query_error("create the schema"))?;
    } else {
        replay_sqlite(&mut tx, version).await?;
    }
    tx.commit().await.map_err(query_error("commit the schema"))
}

/// Applies the SQLite migrations after `version`, each followed by its
/// version number.
async fn replay_sqlite(tx: &mut sqlx::SqliteConnection, version: i64) -> Result<()> {
    for (position, sql) in SQLITE
        .iter()
        .enumerate()
        .skip(usize::try_from(version).unwrap_or(0))
    {
        sqlx::raw_sql(sqlx::AssertSqlSafe(*sql))
            .execute(&mut *tx)
            .await
            .map_err(query_error("migrate the schema"))?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "PRAGMA user_version = {}",
            position + 1
        )))
        .execute(&mut *tx)
        .await
        .map_err(query_error("record the schema version"))?;
    }
    Ok(())
}

pub(crate) async fn postgres(pool: &PgPool) -> Result<()> {
    let mut tx = pool.begin().await.map_err(query_error("lock the schema"))?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(LOCK_KEY)
        .execute(&mut *tx)
        .await
        .map_err(query_error("lock the schema"))?;
    sqlx::raw_sql("CREATE TABLE IF NOT EXISTS baton_schema (version BIGINT NOT NULL)")
        .execute(&mut *tx)
        .await
        .map_err(query_error("create the schema table"))?;
    let version: i64 = sqlx::query("SELECT COALESCE(MAX(version), 0) FROM baton_schema")
        .fetch_one(&mut *tx)
        .await
        .and_then(|row| row.try_get(0))
        .map_err(query_error("read the schema version"))?;
    if version > known() {
        return Err(Error::TooNew {
            found: version,
            known: known(),
        });
    }
    for (position, sql) in POSTGRES
        .iter()
        .enumerate()
        .skip(usize::try_from(version).unwrap_or(0))
    {
        sqlx::raw_sql(sqlx::AssertSqlSafe(*sql))
            .execute(&mut *tx)
            .await
            .map_err(query_error("migrate the schema"))?;
        sqlx::query("INSERT INTO baton_schema (version) VALUES ($1)")
            .bind(i64::try_from(position + 1).expect("few migrations"))
            .execute(&mut *tx)
            .await
            .map_err(query_error("record the schema version"))?;
    }
    tx.commit().await.map_err(query_error("commit the schema"))
}

#[cfg(test)]
mod tests {
    use sqlx::sqlite::SqlitePoolOptions;

    use super::*;

    async fn memory() -> SqlitePool {
        SqlitePoolOptions::new()
            .max_connections(1)
            .connect("sqlite::memory:")
            .await
            .expect("an in-memory database")
    }

    /// Every object SQLite keeps, with the text it keeps for it.
    async fn objects(pool: &SqlitePool) -> Vec<(String, String, String, Option<String>)> {
        sqlx::query_as("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name")
            .fetch_all(pool)
            .await
            .expect("the schema is readable")
    }

    async fn version(pool: &SqlitePool) -> i64 {
        sqlx::query_scalar("PRAGMA user_version")
            .fetch_one(pool)
            .await
            .expect("a version")
    }

    #[tokio::test]
    async fn a_new_store_gets_the_schema_the_migrations_build() {
        let created = memory().await;
        sqlite(&created).await.expect("created from the schema");
        let replayed = memory().await;
        let mut connection = replayed.acquire().await.expect("a connection");
        replay_sqlite(&mut connection, 0)
            .await
            .expect("every migration");
        drop(connection);

        let objects_created = objects(&created).await;
        assert!(objects_created.len() > 10, "{objects_created:?}");
        assert_eq!(objects_created, objects(&replayed).await);
        assert_eq!(version(&created).await, known());
        assert_eq!(version(&replayed).await, known());
    }
}
