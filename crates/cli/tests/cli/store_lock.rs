//! A SQLite store locked by another process: `baton runs` and `baton run`
//! wait for the store's busy timeout (30 s), then report the lock and exit 4
//! — no hang, no damage. Once the lock is released everything works and the
//! database passes `PRAGMA integrity_check`.
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
    let (runs_code, runs_took, runs_stderr) = finish(runs, "baton runs on a locked store");
    let (run_code, run_took, run_stderr) = finish(run, "baton run on a locked store");
    eprintln!(
        "locked store: `baton runs` gave up after {runs_took:?}, `baton run` after {run_took:?}"
    );
    for (what, code, stderr) in [
        ("runs", runs_code, &runs_stderr),
        ("run", run_code, &run_stderr),
    ] {
        assert_eq!(code, 4, "baton {what}: {stderr}");
        assert!(
            stderr.contains("database is locked"),
            "baton {what} names the lock: {stderr}"
        );
        assert!(stderr.starts_with("error: "), "baton {what}: {stderr}");
    }
    // It waited for the lock (the busy timeout), and then no longer.
    for took in [runs_took, run_took] {
        assert!(
            took >= BUSY_TIMEOUT - Duration::from_secs(1),
            "waited {took:?}"
        );
        assert!(took < BUSY_TIMEOUT * 2, "waited {took:?}");
    }

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
