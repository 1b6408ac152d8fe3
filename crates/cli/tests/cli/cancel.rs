//! `baton cancel` takes effect at once: the driver stops its running stages
//! within a fraction of a second, starts nothing more, and `baton resume`
//! continues the cancelled run to its end.

use std::time::{Duration, Instant};

use crate::project::{HEADER, Project, stage, wait_for};

#[test]
fn a_cancel_stops_the_run_at_once_and_resume_continues_it() {
    let project = Project::new();
    let witness = "echo \"$BATON_STAGE\" >> \"$BATON_PROJECT_DIR/witness.txt\"";
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}{}{}{}",
            stage("long", &format!("{witness}\nsleep 3"), ""),
            stage("quick", &format!("{witness}\nsleep 1"), ""),
            stage("later", witness, "    depends_on: [quick]\n"),
        ),
    );
    let mut driver = project.spawn(&["run", "wf.yaml"]);
    wait_for("both stages to start", Duration::from_secs(30), || {
        project.witness().len() == 2
    });
    let id = project.run_ids()[0].clone();
    let cancel = project.baton(&["cancel", &id]);
    assert_eq!(cancel.code, 0, "{}", cancel.stderr);
    let asked = Instant::now();
    while driver.try_wait().expect("wait").is_none() {
        assert!(
            asked.elapsed() < Duration::from_secs(5),
            "the driver still runs 5 s after the cancel"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    eprintln!(
        "the driver stopped {} ms after the cancel",
        asked.elapsed().as_millis()
    );
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "cancelled", "{status}");
    assert!(
        !project.witness().contains(&"later".to_owned()),
        "a stage started after the cancel: {:?}",
        project.witness()
    );

    let resumed = project.baton(&["resume", &id]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "success", "{status}");
    assert!(project.witness().contains(&"later".to_owned()));
}
