//! Migrations: idempotent, safe when processes race to open a fresh store,
//! and refusing a schema newer than this baton.

use std::sync::Arc;

use baton_store::{Error, Store};
use tokio::sync::Barrier;

use crate::harness::{Backend, Fresh, new_run};

/// The newest schema version this baton knows.
const VERSION: i64 = 9;

pub(crate) async fn migrations_are_idempotent(fresh: Fresh) {
    let store = fresh.open().await;
    assert_eq!(fresh.schema_version().await, VERSION);
    store
        .create_run(&new_run("r1", 1000, &["build"]))
        .await
        .unwrap();
    drop(store);

    for _ in 0..3 {
        let store = fresh.open().await;
        assert_eq!(fresh.schema_version().await, VERSION);
        let runs = store.runs().await.unwrap();
        assert_eq!(runs.len(), 1, "reopening must keep the data");
        assert_eq!(store.stages("r1").await.unwrap().len(), 1);
    }
}

pub(crate) async fn concurrent_opens_migrate_once(fresh: Fresh) {
    race_opens(fresh.location()).await;
    assert_eq!(fresh.schema_version().await, VERSION);

    // The SQLite race is in the file's first moments (the switch to WAL):
    // try more fresh files. (PostgreSQL serialises on an advisory lock.)
    if fresh.backend() == Backend::Sqlite {
        for round in 0..SQLITE_EXTRA_ROUNDS {
            race_opens(&format!("{}.{round}", fresh.location())).await;
        }
    }
}

/// Extra fresh SQLite files the open race is repeated on.
const SQLITE_EXTRA_ROUNDS: usize = 20;

/// Opens `location` from 8 tasks at once; all must succeed and share one schema.
async fn race_opens(location: &str) {
    const OPENERS: usize = 8;
    let barrier = Arc::new(Barrier::new(OPENERS));
    let tasks: Vec<_> = (0..OPENERS)
        .map(|_| {
            let barrier = Arc::clone(&barrier);
            let location = location.to_owned();
            tokio::spawn(async move {
                barrier.wait().await;
                Store::open(&location).await
            })
        })
        .collect();
    let mut stores = Vec::new();
    for task in tasks {
        let opened = task.await.expect("the opener panicked");
        stores.push(
            opened.unwrap_or_else(|error| panic!("a racing open of {location} failed: {error:?}")),
        );
    }

    // Every handle works on the one schema.
    stores[0]
        .create_run(&new_run("r1", 1000, &["a", "b"]))
        .await
        .unwrap();
    for store in &stores {
        assert_eq!(store.backend(), stores[0].backend());
        assert_eq!(store.runs().await.unwrap().len(), 1);
        assert_eq!(store.stages("r1").await.unwrap().len(), 2);
    }
}

pub(crate) async fn newer_schema_is_refused(fresh: Fresh) {
    drop(fresh.open().await);
    match fresh.backend() {
        // Far ahead of any version this baton will reach.
        Backend::Sqlite => fresh.execute("PRAGMA user_version = 99").await,
        Backend::Postgres => {
            fresh
                .execute("INSERT INTO baton_schema (version) VALUES (99)")
                .await
        }
    }
    let error = Store::open(fresh.location())
        .await
        .expect_err("a newer schema must be refused");
    assert!(
        matches!(
            error,
            Error::TooNew {
                found: 99,
                known: VERSION
            }
        ),
        "unexpected error: {error:?}"
    );
}
