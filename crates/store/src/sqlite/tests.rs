//! The SQLite store's settings and its write-ahead log.

use std::path::Path;

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Row};

use crate::Store;
use crate::model::{NewRun, Transition};
use crate::store::Inner;

/// Durability settings, read back from every connection of the pool and
/// from the file itself.
#[tokio::test]
async fn sqlite_is_wal_with_full_sync() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/baton.db");
    let store = Store::open_sqlite(&path).await.unwrap();
    let Inner::Sqlite(db) = &store.inner else {
        panic!("a SQLite path opened {}", store.backend());
    };
    let pool = &db.read;

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

/// The SQL both databases share relies on SQLite binding `$n` by number,
/// not by order of appearance.
#[tokio::test]
async fn sqlite_binds_placeholders_by_number() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_sqlite(&dir.path().join("baton.db"))
        .await
        .unwrap();
    let Inner::Sqlite(db) = &store.inner else {
        panic!("a SQLite path opened {}", store.backend());
    };
    let pool = &db.read;
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
