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

/// Stages start one after another, every few milliseconds; once `baton
/// cancel` has returned, the run is recorded cancelled and not one more
/// stage starts.
#[test]
fn once_cancel_returns_no_stage_starts() {
    let project = Project::new();
    let witness = "echo \"$BATON_STAGE\" >> \"$BATON_PROJECT_DIR/witness.txt\"";
    let mut workflow = HEADER.to_owned();
    for index in 0..200 {
        let extra = if index == 0 {
            String::new()
        } else {
            format!("    depends_on: [s{}]\n", index - 1)
        };
        workflow.push_str(&stage(
            &format!("s{index}"),
            &format!("{witness}\nsleep 0.02"),
            &extra,
        ));
    }
    project.write("wf.yaml", &workflow);
    let mut driver = project.spawn(&["run", "wf.yaml"]);
    wait_for("five stages to start", Duration::from_secs(30), || {
        project.witness().len() >= 5
    });
    let id = project.run_ids()[0].clone();
    let asked = Instant::now();
    let cancel = project.baton(&["cancel", &id]);
    let took = asked.elapsed();
    assert_eq!(cancel.code, 0, "{}", cancel.stderr);
    assert!(cancel.stderr.contains("stopped it"), "{}", cancel.stderr);
    let started = project.witness().len();
    eprintln!(
        "cancel returned after {} ms, {started} stages had started",
        took.as_millis()
    );
    assert!(
        took < Duration::from_secs(5),
        "cancel took {} ms",
        took.as_millis()
    );
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "cancelled", "{status}");
    assert!(started < 200, "the whole chain ran before the cancel");

    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        project.witness().len(),
        started,
        "a stage started after `baton cancel` returned: {:?}",
        &project.witness()[started..]
    );
    let exited = Instant::now();
    while driver.try_wait().expect("wait").is_none() {
        assert!(
            exited.elapsed() < Duration::from_secs(10),
            "the driver still runs after the run was cancelled"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
