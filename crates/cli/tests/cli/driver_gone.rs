//! A run whose driver was killed says so: `status` names the way on, and
//! `logs --follow` ends instead of waiting for ever.

use std::time::Duration;

use crate::project::{HEADER, Project, stage, wait_for};

#[test]
fn a_run_whose_driver_died_says_so_and_logs_follow_ends() {
    let project = Project::new();
    project.write(
        "wf.yaml",
        &format!("{HEADER}{}", stage("slow", "echo started\nsleep 30", "")),
    );
    let mut driver = project.spawn(&["run", "wf.yaml"]);
    wait_for("the run to start", Duration::from_secs(30), || {
        project.run_ids().first().is_some_and(|id| {
            project.json(&["status", id, "--json"])["stages"][0]["status"] == "running"
        })
    });
    let id = project.run_ids()[0].clone();
    let alive = project.json(&["status", &id, "--json"]);
    assert_eq!(alive["driver_gone"], false, "{alive}");
    let _ = driver.kill();
    let _ = driver.wait();

    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "running");
    assert_eq!(status["driver_gone"], true, "{status}");
    let table = project.baton(&["status", &id]);
    assert!(
        table
            .stdout
            .contains(&format!("driver gone — `baton resume {id}`")),
        "{}",
        table.stdout
    );
    let follow = project.baton(&["logs", &id, "--follow"]);
    assert_eq!(follow.code, 2, "{}", follow.stderr);
    assert!(
        follow.stdout.contains("slow | stdout | started"),
        "{}",
        follow.stdout
    );
    assert!(
        follow
            .stderr
            .contains(&format!("`baton resume {id}` continues it")),
        "{}",
        follow.stderr
    );
    // The driver's leftover stage process goes with the run.
    let cancelled = project.baton(&["cancel", &id]);
    assert_eq!(cancelled.code, 0, "{}", cancelled.stderr);
}

/// The store's file deleted (or replaced) while a run goes on: the driver
/// stops with exit 4 at its next commit instead of reporting a success that
/// no store holds.
#[test]
fn a_store_deleted_mid_run_stops_the_run_with_exit_four() {
    for replace in [false, true] {
        let project = Project::new();
        project.write(
            "wf.yaml",
            &format!(
                "{HEADER}{}{}",
                stage("first", "touch first-ran\nsleep 1", ""),
                stage("second", "true", "    depends_on: [first]\n")
            ),
        );
        let driver = project
            .command(&["run", "wf.yaml"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("baton starts");
        wait_for("the first stage", Duration::from_secs(30), || {
            project.path().join(".baton").exists()
                && std::fs::read_dir(project.path().join(".baton/runs"))
                    .into_iter()
                    .flatten()
                    .flatten()
                    .any(|run| run.path().join("first-ran").exists())
        });
        let database = project.path().join(".baton/baton.db");
        std::fs::remove_file(&database).expect("delete the store");
        if replace {
            std::fs::write(&database, b"").expect("a new file in its place");
        }
        let output = driver.wait_with_output().expect("baton ends");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(4), "replace={replace}: {stderr}");
        assert!(stderr.contains("was deleted or replaced"), "{stderr}");
    }
}
