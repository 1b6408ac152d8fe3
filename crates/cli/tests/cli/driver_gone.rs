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
