//! A `baton run` on SQLite leaves the write-ahead log in place when it exits
//! instead of checkpointing it on close (`Store::close_at_exit`). The next
//! process reads the log back: `baton status` and another SQLite library see
//! every commit, and the database passes `PRAGMA integrity_check`.

use std::process::Command;

use crate::project::{HEADER, Project, run_id, stage};

/// python3's sqlite3 module, a separate SQLite library, answering one query.
fn python_sqlite(database: &std::path::Path, query: &str) -> String {
    #[expect(
        clippy::disallowed_methods,
        reason = "another SQLite library reads the store"
    )]
    let output = Command::new("python3")
        .args([
            "-c",
            "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchone()[0])",
            database.to_str().expect("utf-8 path"),
            query,
        ])
        .output()
        .expect("python3 runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

#[test]
fn a_run_leaves_its_log_and_the_next_process_reads_every_commit() {
    let project = Project::new();
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}{}{}",
            stage("first", "true", ""),
            stage("second", "true", "    depends_on: [first]\n")
        ),
    );
    let first = project.baton(&["run", "wf.yaml", "--json"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let log = project.path().join(".baton/baton.db-wal");
    let size = std::fs::metadata(&log).map_or(0, |meta| meta.len());
    assert!(
        size > 0,
        "the log is left for the next process ({size} bytes)"
    );

    let id = run_id(&first);
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "success", "{status}");
    for stage in status["stages"].as_array().expect("stages") {
        assert_eq!(stage["status"], "success", "{stage}");
    }

    let second = project.baton(&["run", "wf.yaml", "--json"]);
    assert_eq!(second.code, 0, "{}", second.stderr);
    let database = project.path().join(".baton/baton.db");
    assert_eq!(
        python_sqlite(
            &database,
            "SELECT count(*) FROM runs WHERE status = 'success'"
        ),
        "2"
    );
    assert_eq!(python_sqlite(&database, "PRAGMA integrity_check"), "ok");
}
