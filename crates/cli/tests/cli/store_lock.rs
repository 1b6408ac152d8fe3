//! A SQLite store whose write lock another process holds: `baton run` waits
//! for the store's busy timeout (30 s), then reports the lock and exits 4 —
//! no hang, no damage — while `baton runs`, which only reads, answers at once
//! (readers of a WAL database never wait for its writer). Once the lock is
//! released everything works and the database passes `PRAGMA
//! integrity_check`.
//!
//! The lock is held by python3's sqlite3 module, a separate SQLite library in
//! a separate process, as another program sharing the file would hold it.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::project::{HEADER, Project, run_id, stage, wait_bounded};

/// The store's SQLite busy timeout (`crates/store/src/backend.rs`).
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// Holds `BEGIN EXCLUSIVE` on the database until a line arrives on stdin.
const HOLD_LOCK: &str = "\
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute('BEGIN EXCLUSIVE')
print('locked', flush=True)
sys.stdin.readline()
db.execute('ROLLBACK')
db.close()
";

fn python(args: &[&str]) -> Command {
    #[expect(
        clippy::disallowed_methods,
        reason = "another process holds the database lock"
    )]
    let mut command = Command::new("python3");
    command.args(args);
    command
}

/// Waits (bounded) for `child` and collects its output.
fn wait_output(mut child: Child, what: &str, limit: Duration) -> std::process::Output {
    wait_bounded(&mut child, what, limit);
    child.wait_with_output().expect("output")
}

/// Kills the lock holder if the test fails half-way.
struct Holder(Child);

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_locked_sqlite_store_is_reported_with_exit_code_four_and_left_intact() {
    let project = Project::new();
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}{}",
            stage(
                "a",
                "echo \"$BATON_RUN_ID\" >> \"$BATON_PROJECT_DIR/witness.txt\"",
                ""
            )
        ),
    );
    let first = project.baton(&["run", "wf.yaml", "--json"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let first_id = run_id(&first);
    let database = project.path().join(".baton/baton.db");
    assert!(database.is_file());

    let mut holder = Holder(
        python(&["-c", HOLD_LOCK, database.to_str().expect("utf-8 path")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 starts (the test needs it)"),
    );
    let mut ready = String::new();
    BufReader::new(holder.0.stdout.as_mut().expect("stdout"))
        .read_line(&mut ready)
        .expect("read");
    assert_eq!(ready.trim(), "locked", "python3 holds the lock");

    // Both commands at once, so that the test waits out one busy timeout.
    let start = Instant::now();
    let spawn = |args: &[&str]| {
        project
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("baton starts")
    };
    let runs = spawn(&["runs"]);
    let run = spawn(&["run", "wf.yaml"]);
    let limit = BUSY_TIMEOUT * 3;
    let finish = |mut child: Child, what: &str| {
        let code = wait_bounded(&mut child, what, limit);
        let output = child.wait_with_output().expect("output");
        (
            code,
            Instant::now() - start,
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let runs_output = wait_output(runs, "baton runs on a locked store", limit);
    let runs_took = Instant::now() - start;
    let (run_code, run_took, run_stderr) = finish(run, "baton run on a locked store");
    eprintln!(
        "locked store: `baton runs` answered after {runs_took:?}, `baton run` gave up after {run_took:?}"
    );
    assert_eq!(
        runs_output.status.code(),
        Some(0),
        "baton runs: {}",
        String::from_utf8_lossy(&runs_output.stderr)
    );
    assert!(
        String::from_utf8_lossy(&runs_output.stdout).contains(&first_id),
        "baton runs lists the recorded run"
    );
    assert!(
        runs_took < BUSY_TIMEOUT / 2,
        "baton runs waited {runs_took:?}"
    );

    assert_eq!(run_code, 4, "baton run: {run_stderr}");
    assert!(
        run_stderr.contains("database is locked"),
        "baton run names the lock: {run_stderr}"
    );
    assert!(run_stderr.starts_with("error: "), "baton run: {run_stderr}");
    // It waited for the lock (the busy timeout), and then no longer.
    assert!(
        run_took >= BUSY_TIMEOUT - Duration::from_secs(1),
        "waited {run_took:?}"
    );
    assert!(run_took < BUSY_TIMEOUT * 2, "waited {run_took:?}");

    // Release the lock: everything works again, and nothing was damaged.
    holder
        .0
        .stdin
        .as_mut()
        .expect("stdin")
        .write_all(b"\n")
        .expect("release");
    assert_eq!(
        wait_bounded(&mut holder.0, "python3", Duration::from_secs(10)),
        0
    );
    let ids = project.run_ids();
    assert_eq!(
        ids,
        vec![first_id.clone()],
        "the locked-out run recorded nothing"
    );
    let witness = std::fs::read_to_string(project.path().join("witness.txt")).expect("witness");
    assert_eq!(witness.lines().count(), 1, "the locked-out run ran nothing");
    let integrity = python(&[
        "-c",
        "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute('PRAGMA integrity_check').fetchone()[0])",
        database.to_str().expect("utf-8 path"),
    ])
    .output()
    .expect("python3 runs");
    assert_eq!(
        String::from_utf8_lossy(&integrity.stdout).trim(),
        "ok",
        "{}",
        String::from_utf8_lossy(&integrity.stderr)
    );
    let again = project.baton(&["run", "wf.yaml", "--json"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(project.run_ids().len(), 2);
}
