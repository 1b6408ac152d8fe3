//! The store's hot write, a stage's commit, on SQLite through two drivers.
//!
//! Each transaction is what `Store::apply` does for a batch of finished
//! stages: `BEGIN IMMEDIATE`, the lease fence, one many-row upsert of stage
//! rows, one many-row insert of attempts, one of events, `COMMIT`, on a file
//! in WAL mode with `synchronous=FULL`. `sqlx` runs it as the store does
//! (a pool of one connection, whose own thread runs the statements);
//! `rusqlite` hands one closure per transaction to a thread that owns the
//! connection and answers on a oneshot channel.
//!
//! Usage: `sqlite-drivers sqlx|rusqlite DIR TRANSACTIONS WRITERS ROWS`
//! prints one line: driver, transactions, writers, rows, wall ms, cpu ms.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Instant;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS leases (run_id TEXT PRIMARY KEY, epoch INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS stages (
  run_id TEXT NOT NULL, idx INTEGER NOT NULL, status TEXT NOT NULL,
  attempt INTEGER NOT NULL, started_at INTEGER, ended_at INTEGER, output_hash TEXT,
  PRIMARY KEY (run_id, idx));
CREATE TABLE IF NOT EXISTS attempts (
  run_id TEXT NOT NULL, idx INTEGER NOT NULL, attempt INTEGER NOT NULL,
  pid INTEGER, exit_code INTEGER, error TEXT,
  PRIMARY KEY (run_id, idx, attempt));
CREATE TABLE IF NOT EXISTS events (
  id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, at INTEGER NOT NULL,
  kind TEXT NOT NULL, detail TEXT NOT NULL);
INSERT OR IGNORE INTO leases VALUES ('run-1', 7);
";

const FENCE: &str = "SELECT 1 FROM leases WHERE run_id = ? AND epoch = ?";

fn values(rows: usize, columns: usize) -> String {
    let one = format!("({})", vec!["?"; columns].join(", "));
    vec![one; rows].join(", ")
}

fn upsert_stages(rows: usize) -> String {
    format!(
        "INSERT INTO stages (run_id, idx, status, attempt, started_at, ended_at, output_hash) \
         VALUES {} ON CONFLICT (run_id, idx) DO UPDATE SET status = excluded.status, \
         attempt = excluded.attempt, ended_at = excluded.ended_at, \
         output_hash = excluded.output_hash",
        values(rows, 7)
    )
}

fn insert_attempts(rows: usize) -> String {
    format!(
        "INSERT OR REPLACE INTO attempts (run_id, idx, attempt, pid, exit_code, error) VALUES {}",
        values(rows, 6)
    )
}

fn insert_events(rows: usize) -> String {
    format!(
        "INSERT INTO events (run_id, at, kind, detail) VALUES {}",
        values(rows, 4)
    )
}

/// The values of one transaction's rows, transaction `tx`, `rows` stages.
struct Batch {
    first: i64,
    rows: usize,
}

const HASH: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
const DETAIL: &str = r#"{"stage":"build","attempt":1,"status":"succeeded"}"#;

mod with_sqlx {
    use super::*;
    use sqlx::sqlite::SqliteSynchronous;
    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};
    use sqlx::{AssertSqlSafe, Executor};

    pub async fn open(path: &Path) -> SqlitePool {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .test_before_acquire(false)
            .connect_with(options)
            .await
            .unwrap();
        pool.execute(SCHEMA).await.unwrap();
        pool
    }

    pub async fn commit(pool: &SqlitePool, batch: Batch) {
        let mut tx = pool.begin_with("BEGIN IMMEDIATE").await.unwrap();
        let fenced = sqlx::query(FENCE)
            .bind("run-1")
            .bind(7_i64)
            .fetch_optional(&mut *tx)
            .await
            .unwrap();
        assert!(fenced.is_some());
        let sql = upsert_stages(batch.rows);
        let mut query = sqlx::query(AssertSqlSafe(sql));
        for i in 0..batch.rows as i64 {
            let idx = batch.first + i;
            query = query
                .bind("run-1")
                .bind(idx)
                .bind("succeeded")
                .bind(1_i64)
                .bind(idx)
                .bind(idx + 1)
                .bind(HASH);
        }
        query.execute(&mut *tx).await.unwrap();
        let sql = insert_attempts(batch.rows);
        let mut query = sqlx::query(AssertSqlSafe(sql));
        for i in 0..batch.rows as i64 {
            let idx = batch.first + i;
            query = query
                .bind("run-1")
                .bind(idx)
                .bind(1_i64)
                .bind(4242_i64)
                .bind(0_i64)
                .bind(Option::<&str>::None);
        }
        query.execute(&mut *tx).await.unwrap();
        let sql = insert_events(batch.rows * 2);
        let mut query = sqlx::query(AssertSqlSafe(sql));
        for i in 0..(batch.rows * 2) as i64 {
            query = query
                .bind("run-1")
                .bind(batch.first + i)
                .bind("stage")
                .bind(DETAIL);
        }
        query.execute(&mut *tx).await.unwrap();
        tx.commit().await.unwrap();
    }
}

mod with_rusqlite {
    use super::*;
    use rusqlite::{Connection, TransactionBehavior, params};

    type Job = Box<dyn FnOnce(&mut Connection) + Send>;

    /// The writer: a thread that owns the connection and runs each job.
    #[derive(Clone)]
    pub struct Writer(mpsc::Sender<Job>);

    pub fn open(path: &Path) -> Writer {
        let mut connection = Connection::open(path).unwrap();
        connection
            .execute_batch(
                "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;",
            )
            .unwrap();
        connection.execute_batch(SCHEMA).unwrap();
        let (sender, receiver) = mpsc::channel::<Job>();
        std::thread::spawn(move || {
            for job in receiver {
                job(&mut connection);
            }
        });
        Writer(sender)
    }

    impl Writer {
        async fn run<R: Send + 'static>(
            &self,
            job: impl FnOnce(&mut Connection) -> R + Send + 'static,
        ) -> R {
            let (answer, answered) = tokio::sync::oneshot::channel();
            self.0
                .send(Box::new(move |connection| {
                    let _ = answer.send(job(connection));
                }))
                .unwrap();
            answered.await.unwrap()
        }
    }

    pub async fn commit(writer: &Writer, batch: Batch) {
        writer
            .run(move |connection| {
                let tx = connection
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .unwrap();
                let fenced = tx
                    .prepare_cached(FENCE)
                    .unwrap()
                    .exists(params!["run-1", 7_i64])
                    .unwrap();
                assert!(fenced);
                {
                    let mut statement = tx.prepare_cached(&upsert_stages(batch.rows)).unwrap();
                    let mut args: Vec<Box<dyn rusqlite::ToSql>> = Vec::new();
                    for i in 0..batch.rows as i64 {
                        let idx = batch.first + i;
                        args.push(Box::new("run-1"));
                        args.push(Box::new(idx));
                        args.push(Box::new("succeeded"));
                        args.push(Box::new(1_i64));
                        args.push(Box::new(idx));
                        args.push(Box::new(idx + 1));
                        args.push(Box::new(HASH));
                    }
                    statement
                        .execute(rusqlite::params_from_iter(args.iter()))
                        .unwrap();
                }
                {
                    let mut statement = tx.prepare_cached(&insert_attempts(batch.rows)).unwrap();
                    let mut args: Vec<Box<dyn rusqlite::ToSql>> = Vec::new();
                    for i in 0..batch.rows as i64 {
                        args.push(Box::new("run-1"));
                        args.push(Box::new(batch.first + i));
                        args.push(Box::new(1_i64));
                        args.push(Box::new(4242_i64));
                        args.push(Box::new(0_i64));
                        args.push(Box::new(Option::<&str>::None));
                    }
                    statement
                        .execute(rusqlite::params_from_iter(args.iter()))
                        .unwrap();
                }
                {
                    let mut statement = tx.prepare_cached(&insert_events(batch.rows * 2)).unwrap();
                    let mut args: Vec<Box<dyn rusqlite::ToSql>> = Vec::new();
                    for i in 0..(batch.rows * 2) as i64 {
                        args.push(Box::new("run-1"));
                        args.push(Box::new(batch.first + i));
                        args.push(Box::new("stage"));
                        args.push(Box::new(DETAIL));
                    }
                    statement
                        .execute(rusqlite::params_from_iter(args.iter()))
                        .unwrap();
                }
                tx.commit().unwrap();
            })
            .await
    }
}

fn cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split(' ').collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks * 10.0
}

/// The store opened through one of the drivers.
#[derive(Clone)]
enum Db {
    Sqlx(sqlx::SqlitePool),
    Rusqlite(with_rusqlite::Writer),
}

impl Db {
    async fn commit(&self, batch: Batch) {
        match self {
            Db::Sqlx(pool) => with_sqlx::commit(pool, batch).await,
            Db::Rusqlite(writer) => with_rusqlite::commit(writer, batch).await,
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, driver, dir, transactions, writers, rows] = &args[..] else {
        eprintln!("usage: sqlite-drivers sqlx|rusqlite DIR TRANSACTIONS WRITERS ROWS");
        std::process::exit(2);
    };
    let transactions: usize = transactions.parse().unwrap();
    let writers: usize = writers.parse().unwrap();
    let rows: usize = rows.parse().unwrap();
    let path: PathBuf = Path::new(dir).join(format!("{driver}.db"));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let db = match driver.as_str() {
        "sqlx" => Db::Sqlx(with_sqlx::open(&path).await),
        "rusqlite" => Db::Rusqlite(with_rusqlite::open(&path)),
        other => panic!("no driver {other}"),
    };
    let each = transactions / writers;
    let (start, cpu) = (Instant::now(), cpu_ms());
    let mut tasks = Vec::new();
    for w in 0..writers {
        let db = db.clone();
        tasks.push(tokio::spawn(async move {
            for t in 0..each {
                let first = ((w * each + t) * rows) as i64;
                db.commit(Batch { first, rows }).await;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let (wall, cpu) = (start.elapsed(), cpu_ms() - cpu);
    println!(
        "{driver} {transactions} {writers} {rows} {:.1} {:.1}",
        wall.as_secs_f64() * 1000.0,
        cpu
    );
}
