//! Append-only schema migrations, applied under an exclusive lock so that
//! several baton processes opening a fresh store at once is safe.
//!
//! SQLite tracks the version in `PRAGMA user_version` and takes the write
//! lock with `BEGIN IMMEDIATE`; PostgreSQL keeps a one-row `baton_schema`
//! table and serialises on a transaction-level advisory lock.

use std::path::Path;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use sqlx::{Connection, PgPool, Row, SqliteConnection, SqlitePool};

use crate::error::query_error;
use crate::{Error, Result};

/// Migrations per backend, in order; the position (from 1) is the version.
const SQLITE: &[&str] = &[
    include_str!("../migrations/sqlite/0001_runs.sql"),
    include_str!("../migrations/sqlite/0002_units_gates_findings.sql"),
    include_str!("../migrations/sqlite/0003_jobs.sql"),
    include_str!("../migrations/sqlite/0004_usage.sql"),
    include_str!("../migrations/sqlite/0005_governance.sql"),
    include_str!("../migrations/sqlite/0006_run_documents.sql"),
    include_str!("../migrations/sqlite/0007_usage_resumed.sql"),
    include_str!("../migrations/sqlite/0008_tokens.sql"),
    include_str!("../migrations/sqlite/0009_gate_outputs.sql"),
];
const POSTGRES: &[&str] = &[
    include_str!("../migrations/postgres/0001_runs.sql"),
    include_str!("../migrations/postgres/0002_units_gates_findings.sql"),
    include_str!("../migrations/postgres/0003_jobs.sql"),
    include_str!("../migrations/postgres/0004_usage.sql"),
    include_str!("../migrations/postgres/0005_governance.sql"),
    include_str!("../migrations/postgres/0006_run_documents.sql"),
    include_str!("../migrations/postgres/0007_usage_resumed.sql"),
    include_str!("../migrations/postgres/0008_tokens.sql"),
    include_str!("../migrations/postgres/0009_gate_outputs.sql"),
];

/// The schema the SQLite migrations build, for a new store (see the file's
/// header).
const SQLITE_SCHEMA: &str = include_str!("../migrations/sqlite/schema.sql");

/// An arbitrary constant naming baton's advisory lock.
const LOCK_KEY: i64 = 0x6261_746f_6e00;

fn known() -> i64 {
    i64::try_from(SQLITE.len()).expect("few migrations")
}

/// Refuses a schema newer than this baton's; `Ok(true)` when it is current.
fn check_version(version: i64) -> Result<bool> {
    if version > known() {
        return Err(Error::TooNew {
            found: version,
            known: known(),
        });
    }
    Ok(version == known())
}

pub(crate) async fn sqlite(pool: &SqlitePool) -> Result<()> {
    // Migrations only move forward, so a current version read without the
    // write lock stays current: every command but the first on a store is
    // spared taking the lock (and waiting behind a writer for it).
    let version: i64 = sqlx::query("PRAGMA user_version")
        .fetch_one(pool)
        .await
        .and_then(|row| row.try_get(0))
        .map_err(query_error("read the schema version"))?;
    if check_version(version)? {
        return Ok(());
    }
    let mut tx = pool
        .begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(query_error("lock the schema"))?;
    let version: i64 = sqlx::query("PRAGMA user_version")
        .fetch_one(&mut *tx)
        .await
        .and_then(|row| row.try_get(0))
        .map_err(query_error("read the schema version"))?;
    check_version(version)?;
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
    crate::failpoint::write(tx.commit())
        .await
        .map_err(query_error("commit the schema"))
}

/// Creates a SQLite store at `path` when nothing is there yet.
///
/// Built in place, a new store costs seven fsyncs: switching the empty file
/// to WAL goes through a rollback journal (four), and the first WAL commit
/// syncs the log's header and its directory as well as itself. Instead the
/// schema is built in a file beside it, with neither journal nor fsync,
/// switched to WAL, forced to disk once and hard-linked into place, which
/// fails if another process got there first (its store is kept). A crash
/// leaves no store or a whole one, never a half-built one; at worst a stray
/// `<name>.<pid>-<n>.new` file, which the next creation removes once its
/// process is gone ([`remove_strays`]).
///
/// Where hard links are not supported, nothing is done: [`sqlite`] then
/// builds the store in place as before.
pub(crate) async fn create_sqlite(path: &Path) -> std::result::Result<(), sqlx::Error> {
    if std::fs::symlink_metadata(path).is_ok() {
        return Ok(());
    }
    // Unique to this call: stores may be opened from several tasks at once.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}-{call}.new", std::process::id()));
    let aside = path.with_file_name(name);
    let _ = std::fs::remove_file(&aside);
    remove_strays(path);
    let built = build_aside(&aside).await;
    // Linking the store into place is its first write.
    let linked = built.and_then(|()| {
        std::fs::File::open(&aside)?.sync_all()?;
        let number = crate::failpoint::before();
        let linked = std::fs::hard_link(&aside, path);
        if linked.is_ok() {
            crate::failpoint::after(number);
        }
        Ok(linked)
    });
    let _ = std::fs::remove_file(&aside);
    match linked? {
        Ok(()) => {
            let parent = path
                .parent()
                .filter(|parent| !parent.as_os_str().is_empty())
                .unwrap_or_else(|| Path::new("."));
            std::fs::File::open(parent)?.sync_all()?;
            Ok(())
        }
        // Another process linked its store first, or links are not
        // supported here.
        Err(_) => Ok(()),
    }
}

/// Removes the files a creation of `path` left beside it when its process
/// died before it could (`<name>.<pid>-<n>.new`). A file whose process may
/// still run, because `/proc` shows that pid or cannot be read, is kept: it
/// may be a creation going on now.
fn remove_strays(path: &Path) {
    let (Some(parent), Some(name)) = (
        path.parent(),
        path.file_name().and_then(|name| name.to_str()),
    ) else {
        return;
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(pid) = file
            .to_str()
            .and_then(|file| {
                file.strip_prefix(name)?
                    .strip_prefix('.')?
                    .strip_suffix(".new")
            })
            .and_then(|rest| rest.split_once('-'))
            .filter(|(_, call)| call.bytes().all(|byte| byte.is_ascii_digit()))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let gone =
            Path::new("/proc/self").exists() && !Path::new("/proc").join(pid.to_string()).exists();
        if gone {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The whole schema in a new file at `aside`, in WAL mode.
async fn build_aside(aside: &Path) -> std::result::Result<(), sqlx::Error> {
    let options = SqliteConnectOptions::new()
        .filename(aside)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Off)
        .synchronous(SqliteSynchronous::Off);
    let mut connection = SqliteConnection::connect_with(&options).await?;
    let built = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "BEGIN;\n{SQLITE_SCHEMA}\nPRAGMA user_version = {};\nCOMMIT;\nPRAGMA journal_mode = WAL;",
        known()
    )))
    .execute(&mut connection)
    .await;
    // Closing the last connection folds the (empty) log into the file and
    // deletes it.
    connection.close().await?;
    built.map(drop)
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
    let mut connection = pool
        .acquire()
        .await
        .map_err(query_error("read the schema version"))?;
    // As on SQLite, a current version needs no lock; a store without the
    // version table yet fails the query and takes the locked path.
    let current = match sqlx::query("SELECT COALESCE(MAX(version), 0) FROM baton_schema")
        .fetch_one(&mut *connection)
        .await
        .and_then(|row| row.try_get::<i64, _>(0))
    {
        Ok(version) => check_version(version)?,
        Err(_) => false,
    };
    if !current {
        migrate_postgres(&mut connection).await?;
    }
    // Back in the pool before the next acquire: dropped, a connection goes
    // back by a task of its own (after a ping), which on baton's one-thread
    // runtime runs at the next wait, so the store's first query would open
    // a second connection, a new server backend.
    connection.return_to_pool().await;
    Ok(())
}

async fn migrate_postgres(connection: &mut sqlx::PgConnection) -> Result<()> {
    use sqlx::Connection as _;
    let mut tx = connection
        .begin()
        .await
        .map_err(query_error("lock the schema"))?;
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
    check_version(version)?;
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
    crate::failpoint::write(tx.commit())
        .await
        .map_err(query_error("commit the schema"))
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
    async fn a_store_built_aside_is_linked_whole_in_wal_mode() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("baton.db");
        create_sqlite(&path).await.expect("created");
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("listed")
            .map(|entry| entry.expect("an entry").file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["baton.db"], "no journal, log or file aside is left");

        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(SqliteConnectOptions::new().filename(&path))
            .await
            .expect("the store opens");
        let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(&pool)
            .await
            .expect("a mode");
        assert_eq!(mode, "wal");
        assert_eq!(version(&pool).await, known());
        let reference = memory().await;
        sqlite(&reference).await.expect("created from the schema");
        assert_eq!(objects(&pool).await, objects(&reference).await);
        // Opened again, it is migrated already: nothing to do.
        sqlite(&pool).await.expect("nothing to migrate");

        // A file already there is left alone.
        let before = std::fs::read(&path).expect("read");
        create_sqlite(&path).await.expect("kept");
        assert_eq!(std::fs::read(&path).expect("read"), before);
    }

    #[tokio::test]
    async fn a_creation_removes_what_a_dead_one_left_aside() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("baton.db");
        // Pids above the kernel's limit (2^22) never run; this process does.
        let dead = dir.path().join("baton.db.4999999-0.new");
        let live = dir
            .path()
            .join(format!("baton.db.{}-7.new", std::process::id()));
        let other = dir.path().join("other.db.4999999-0.new");
        for file in [&dead, &live, &other] {
            std::fs::write(file, "half a store").expect("written");
        }
        create_sqlite(&path).await.expect("created");
        assert!(!dead.exists(), "left by a process that is gone");
        assert!(live.exists(), "its process may still be building it");
        assert!(other.exists(), "another store's");
        assert!(path.exists());
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
