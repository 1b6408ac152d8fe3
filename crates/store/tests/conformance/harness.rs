//! Fresh databases for the conformance tests, and helpers shared by them.
//!
//! Every test gets an empty database of its own: a SQLite file in a
//! temporary directory, or a PostgreSQL database created for it through the
//! server named by `BATON_TEST_DATABASE_URL` and dropped when it ends
//! (whether it passed or not).

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use baton_store::{ArtifactRow, AttemptRow, EventRow, NewRun, RunRow, StageRow, Store};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection, PgConnection, Row};

/// The variable naming a PostgreSQL server the tests may create databases on.
pub(crate) const DATABASE_URL_VAR: &str = "BATON_TEST_DATABASE_URL";

/// How long one test may take before it counts as hung.
const TEST_TIMEOUT: Duration = Duration::from_secs(120);

/// Which database a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    Sqlite,
    Postgres,
}

/// An empty database of the test's own. Clones share it.
#[derive(Debug, Clone)]
pub(crate) struct Fresh {
    backend: Backend,
    location: String,
}

impl Fresh {
    /// The backend.
    pub(crate) fn backend(&self) -> Backend {
        self.backend
    }

    /// What [`Store::open`] takes: a file path or a `postgres://` URL.
    pub(crate) fn location(&self) -> &str {
        &self.location
    }

    /// Opens (and so migrates) the store.
    pub(crate) async fn open(&self) -> Store {
        let store = Store::open(&self.location).await.expect("open the store");
        let expected = match self.backend {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        };
        assert_eq!(store.backend(), expected);
        store
    }

    /// Runs one query returning a single integer on a connection of its own,
    /// outside the store.
    pub(crate) async fn query_i64(&self, sql: &'static str) -> i64 {
        match self.backend {
            Backend::Sqlite => {
                let mut connection = SqliteConnectOptions::new()
                    .filename(&self.location)
                    .connect()
                    .await
                    .expect("connect to the SQLite file");
                let value = sqlx::query(sql)
                    .fetch_one(&mut connection)
                    .await
                    .and_then(|row| row.try_get(0))
                    .unwrap_or_else(|error| panic!("{sql}: {error}"));
                connection.close().await.expect("close the connection");
                value
            }
            Backend::Postgres => {
                let mut connection = PgConnection::connect(&self.location)
                    .await
                    .expect("connect to PostgreSQL");
                let value = sqlx::query(sql)
                    .fetch_one(&mut connection)
                    .await
                    .and_then(|row| row.try_get(0))
                    .unwrap_or_else(|error| panic!("{sql}: {error}"));
                connection.close().await.expect("close the connection");
                value
            }
        }
    }

    /// Runs one statement on a connection of its own, outside the store.
    pub(crate) async fn execute(&self, sql: &'static str) {
        match self.backend {
            Backend::Sqlite => {
                let mut connection = SqliteConnectOptions::new()
                    .filename(&self.location)
                    .connect()
                    .await
                    .expect("connect to the SQLite file");
                sqlx::raw_sql(sql)
                    .execute(&mut connection)
                    .await
                    .unwrap_or_else(|error| panic!("{sql}: {error}"));
                connection.close().await.expect("close the connection");
            }
            Backend::Postgres => {
                let mut connection = PgConnection::connect(&self.location)
                    .await
                    .expect("connect to PostgreSQL");
                sqlx::raw_sql(sql)
                    .execute(&mut connection)
                    .await
                    .unwrap_or_else(|error| panic!("{sql}: {error}"));
                connection.close().await.expect("close the connection");
            }
        }
    }

    /// The schema version as the migrations record it.
    pub(crate) async fn schema_version(&self) -> i64 {
        match self.backend {
            Backend::Sqlite => self.query_i64("PRAGMA user_version").await,
            Backend::Postgres => {
                // Exactly one row per applied migration.
                let rows = self.query_i64("SELECT COUNT(*) FROM baton_schema").await;
                let distinct = self
                    .query_i64("SELECT COUNT(DISTINCT version) FROM baton_schema")
                    .await;
                assert_eq!(rows, distinct, "a migration was recorded twice");
                self.query_i64("SELECT COALESCE(MAX(version), 0) FROM baton_schema")
                    .await
            }
        }
    }
}

/// Runs `test` on a fresh database of `backend`, then removes the database.
///
/// Without `BATON_TEST_DATABASE_URL` the PostgreSQL half fails, unless
/// `BATON_TEST_SKIP` lists `postgres`.
pub(crate) async fn run<F, Fut>(backend: Backend, test: F)
where
    F: FnOnce(Fresh) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    match backend {
        Backend::Sqlite => {
            let dir = tempfile::tempdir().expect("create a temporary directory");
            let path: PathBuf = dir.path().join("baton.db");
            let fresh = Fresh {
                backend,
                location: path.to_str().expect("temporary paths are UTF-8").to_owned(),
            };
            let outcome = supervise(test(fresh)).await;
            drop(dir);
            finish(outcome);
        }
        Backend::Postgres => {
            let Some(url) = postgres_url() else {
                return;
            };
            let name = database_name();
            let mut admin = PgConnection::connect(&url)
                .await
                .unwrap_or_else(|error| panic!("connect to {DATABASE_URL_VAR}: {error}"));
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                .execute(&mut admin)
                .await
                .unwrap_or_else(|error| panic!("create database {name}: {error}"));
            let fresh = Fresh {
                backend,
                location: with_database(&url, &name),
            };
            let outcome = supervise(test(fresh)).await;
            // FORCE: a test that failed may have left connections open.
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
            )))
            .execute(&mut admin)
            .await
            .unwrap_or_else(|error| panic!("drop database {name}: {error}"));
            admin
                .close()
                .await
                .expect("close the maintenance connection");
            finish(outcome);
        }
    }
}

/// Runs the test body as a task of its own, so a panic (a failed assertion)
/// or a hang comes back here and the database is still cleaned up.
async fn supervise<Fut>(body: Fut) -> Result<(), Box<dyn std::any::Any + Send>>
where
    Fut: Future<Output = ()> + Send + 'static,
{
    let task = tokio::spawn(body);
    let abort = task.abort_handle();
    match tokio::time::timeout(TEST_TIMEOUT, task).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) if error.is_panic() => Err(error.into_panic()),
        Ok(Err(error)) => Err(Box::new(format!("the test task failed: {error}"))),
        Err(_) => {
            abort.abort();
            Err(Box::new(format!("the test hung for {TEST_TIMEOUT:?}")))
        }
    }
}

fn finish(outcome: Result<(), Box<dyn std::any::Any + Send>>) {
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// `BATON_TEST_DATABASE_URL`, or `None` when it is unset and
/// `BATON_TEST_SKIP` lists `postgres`.
fn postgres_url() -> Option<String> {
    baton_test_support::needs::postgres_url()
}

/// A database name no other test (or earlier run) uses.
fn database_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|since| since.as_nanos() % 1_000_000_000_000)
        .unwrap_or(0);
    format!(
        "baton_test_{}_{}_{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// `url` with its database replaced by `database`, options kept.
fn with_database(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let authority_start = base.find("://").map_or(0, |scheme| scheme + 3);
    let authority_end = base[authority_start..]
        .find('/')
        .map_or(base.len(), |slash| authority_start + slash);
    let mut out = format!("{}/{database}", &base[..authority_end]);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    out
}

/// A run with the given stages, created at `created_at`.
pub(crate) fn new_run(run_id: &str, created_at: i64, stages: &[&str]) -> NewRun {
    NewRun {
        run_id: run_id.to_owned(),
        workflow: "demo".to_owned(),
        workflow_path: "workflows/demo.yaml".to_owned(),
        workspace: format!("/tmp/baton/{run_id}"),
        created_at,
        plan: r#"{"stages":[]}"#.to_owned(),
        params: r#"{"who":"world"}"#.to_owned(),
        sources: r#"{"workflows/demo.yaml":"sha256:00"}"#.to_owned(),
        options: r#"{"max_parallel":2}"#.to_owned(),
        stages: stages.iter().map(|&stage| stage.to_owned()).collect(),
    }
}

/// Everything the store holds about one run, to compare before and after.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Snapshot {
    pub(crate) run: RunRow,
    pub(crate) stages: Vec<StageRow>,
    pub(crate) attempts: Vec<AttemptRow>,
    pub(crate) artifacts: Vec<ArtifactRow>,
    pub(crate) events: Vec<EventRow>,
}

/// Reads every row of `run_id`.
pub(crate) async fn snapshot(store: &Store, run_id: &str) -> Snapshot {
    Snapshot {
        run: store.run(run_id).await.expect("read the run"),
        stages: store.stages(run_id).await.expect("read the stages"),
        attempts: store.attempts(run_id).await.expect("read the attempts"),
        artifacts: store.artifacts(run_id).await.expect("read the artifacts"),
        events: store.events(run_id, 0).await.expect("read the events"),
    }
}

/// The kinds of a run's events, oldest first.
pub(crate) async fn event_kinds(store: &Store, run_id: &str) -> Vec<String> {
    store
        .events(run_id, 0)
        .await
        .expect("read the events")
        .into_iter()
        .map(|event| event.kind)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn with_database_replaces_only_the_database() {
        assert_eq!(
            with_database("postgres://baton@127.0.0.1:5432/baton_test", "t1"),
            "postgres://baton@127.0.0.1:5432/t1"
        );
        assert_eq!(
            with_database("postgres://u:p@h/db?sslmode=disable&options=-c%20x", "t1"),
            "postgres://u:p@h/t1?sslmode=disable&options=-c%20x"
        );
        assert_eq!(
            with_database("postgresql://h:1", "t1"),
            "postgresql://h:1/t1"
        );
        assert_eq!(
            with_database("postgres://h?sslmode=disable", "t1"),
            "postgres://h/t1?sslmode=disable"
        );
    }
}
