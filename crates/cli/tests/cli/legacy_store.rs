//! A store written by an earlier baton opens with this one, and the run it
//! left waiting at a human gate resumes to the same end as a run made by
//! this baton from the start.
//!
//! `tests/fixtures/legacy-gate/` holds what `baton run workflow.yaml` and
//! `baton gate drop RUN plan 2` left in `/tmp/legacy-fixture/project`
//! (the store as `store/`, its write-ahead log checkpointed into the
//! database file): a run stopped at the gate `plan`, its list edited. The
//! test copies it into a project of its own and rewrites the recorded
//! paths, the way moving a project to another machine would need.

use std::path::Path;

use serde_json::Value;

use crate::project::Project;

/// Where the fixture's project was when the earlier baton wrote it.
const WRITTEN_AT: &str = "/tmp/legacy-fixture/project";
const RUN: &str = "legacy-20261205-flrufx";

fn fixture() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/legacy-gate")
}

fn copy_tree(from: &Path, to: &Path, project: &str) {
    std::fs::create_dir_all(to).expect("create a directory");
    for entry in std::fs::read_dir(from).expect("read the fixture") {
        let entry = entry.expect("a fixture entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a file type").is_dir() {
            copy_tree(&entry.path(), &target, project);
        } else {
            let bytes = std::fs::read(entry.path()).expect("read a fixture file");
            let bytes = match String::from_utf8(bytes) {
                Ok(text) => text.replace(WRITTEN_AT, project).into_bytes(),
                Err(binary) => binary.into_bytes(),
            };
            std::fs::write(&target, bytes).expect("copy a fixture file");
        }
    }
}

/// Rewrites the project's old location in every text column of the store.
fn move_store(database: &Path, project: &Path) {
    use sqlx::{Connection as _, Row as _, SqliteConnection};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let url = format!("sqlite://{}", database.display());
        let mut connection = SqliteConnection::connect(&url).await.expect("open the store");
        let tables: Vec<String> = sqlx::query(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
        )
        .fetch_all(&mut connection)
        .await
        .expect("list the tables")
        .iter()
        .map(|row| row.get(0))
        .collect();
        for table in tables {
            let columns = sqlx::query("SELECT name, type FROM pragma_table_info(?1)")
                .bind(&table)
                .fetch_all(&mut connection)
                .await
                .expect("list the columns");
            for column in columns {
                let (name, kind): (String, String) = (column.get(0), column.get(1));
                if kind.eq_ignore_ascii_case("TEXT") {
                    // Names from the store's own catalogue, not from input.
                    sqlx::query(sqlx::AssertSqlSafe(format!(
                        "UPDATE \"{table}\" SET \"{name}\" = replace(\"{name}\", ?1, ?2) WHERE instr(\"{name}\", ?1) > 0"
                    )))
                    .bind(WRITTEN_AT)
                    .bind(project.display().to_string())
                    .execute(&mut connection)
                    .await
                    .expect("rewrite a column");
                }
            }
        }
        connection.close().await.expect("close the store");
    });
}

/// Each stage's name and status, and the run's status.
fn outcome(project: &Project, run: &str) -> (String, Vec<(String, String)>) {
    let status = project.json(&["status", run, "--json"]);
    let stages = status["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .map(|stage: &Value| {
            (
                stage["stage"].as_str().expect("a name").to_owned(),
                stage["status"].as_str().expect("a status").to_owned(),
            )
        })
        .collect();
    (
        status["status"].as_str().expect("a status").to_owned(),
        stages,
    )
}

fn outputs(workspace: &Path) -> Vec<(String, String)> {
    ["items.json", "built.txt", "count.txt"]
        .iter()
        .map(|name| {
            let text = std::fs::read_to_string(workspace.join("outputs").join(name))
                .unwrap_or_else(|error| panic!("{name}: {error}"));
            ((*name).to_owned(), text)
        })
        .collect()
}

#[test]
fn a_run_an_earlier_baton_left_at_a_gate_resumes_to_the_same_end() {
    // The run as this baton makes it, undisturbed.
    let fresh = Project::new();
    fresh.write(
        "workflow.yaml",
        &std::fs::read_to_string(fixture().join("workflow.yaml")).expect("the workflow"),
    );
    let run = fresh.baton(&["run", "workflow.yaml", "--json"]);
    let fresh_run = crate::project::run_id(&run);
    assert_eq!(
        fresh.baton(&["gate", "drop", &fresh_run, "plan", "2"]).code,
        0
    );
    assert_eq!(
        fresh.baton(&["gate", "approve", &fresh_run, "plan"]).code,
        0
    );
    let resumed = fresh.baton(&["resume", &fresh_run]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);

    // The same run, left at the gate by an earlier baton.
    let legacy = Project::new();
    legacy.write(
        "workflow.yaml",
        &std::fs::read_to_string(fixture().join("workflow.yaml")).expect("the workflow"),
    );
    let project = legacy.path().display().to_string();
    copy_tree(
        &fixture().join("store"),
        &legacy.path().join(".baton"),
        &project,
    );
    move_store(&legacy.path().join(".baton/baton.db"), legacy.path());
    let listed = legacy.run_ids();
    assert_eq!(listed, [RUN], "the earlier store's run is listed");
    let (status, _) = outcome(&legacy, RUN);
    assert_eq!(status, "awaiting_human");
    let approved = legacy.baton(&["gate", "approve", RUN, "plan"]);
    assert_eq!(approved.code, 0, "{}", approved.stderr);
    let resumed = legacy.baton(&["resume", RUN]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);

    assert_eq!(outcome(&legacy, RUN), outcome(&fresh, &fresh_run));
    let workspace = |project: &Project, run: &str| project.path().join(".baton/runs").join(run);
    assert_eq!(
        outputs(&workspace(&legacy, RUN)),
        outputs(&workspace(&fresh, &fresh_run))
    );
    assert_eq!(
        outputs(&workspace(&legacy, RUN))[1].1,
        "a\n",
        "the item dropped at the gate was not built"
    );
    for (project, run) in [(&legacy, RUN), (&fresh, fresh_run.as_str())] {
        let verified = project.baton(&["verify", run]);
        assert_eq!(
            verified.code, 0,
            "{run}: {}{}",
            verified.stdout, verified.stderr
        );
    }
}
