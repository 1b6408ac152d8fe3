//! Each stage's process in a cgroup of its own where baton may make one
//! (unless `BATON_CGROUPS=off`): what a stage leaves running dies at the
//! stage's end even after it left the process group and scrubbed baton's
//! variables from its environment. Without cgroups such a process is not
//! found, and survives the stage.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use crate::project::{HEADER, Project, stage, wait_for};

/// A stage that starts a process in a session of its own with an empty
/// environment, waits until it has written its pid, and ends.
fn leaving_workflow() -> String {
    let script = "cd \"$BATON_PROJECT_DIR\"\n\
                  setsid env -i sh -c 'echo $$ > escapee.pid; exec sleep 1000' \
                  >/dev/null 2>&1 </dev/null &\n\
                  while [ ! -s escapee.pid ]; do sleep 0.01; done";
    format!("{HEADER}{}", stage("leave", script, ""))
}

fn run(project: &Project, cgroups: Option<&str>) -> (Output, u32) {
    let mut command = project.command(&["run", "wf.yaml"]);
    match cgroups {
        Some(value) => command.env("BATON_CGROUPS", value),
        None => command.env_remove("BATON_CGROUPS"),
    };
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("baton starts");
    let pid = child.id();
    // Bounded: the stage ends at once, what it left or not.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("waits").is_none() {
        assert!(std::time::Instant::now() < deadline, "baton run hangs");
        std::thread::sleep(Duration::from_millis(20));
    }
    (child.wait_with_output().expect("output"), pid)
}

fn escapee(project: &Project) -> u32 {
    let path = project.path().join("escapee.pid");
    let text = std::fs::read_to_string(&path).expect("the stage wrote the escapee's pid");
    std::fs::remove_file(path).expect("removes the pid file");
    text.trim().parse().expect("a pid")
}

/// Whether `pid` is a live `sleep 1000` (not a zombie, not a reused pid).
fn sleeping(pid: u32) -> bool {
    let proc = Path::new("/proc").join(pid.to_string());
    let cmdline = std::fs::read(proc.join("cmdline")).unwrap_or_default();
    let stat = std::fs::read_to_string(proc.join("stat")).unwrap_or_default();
    let state = stat
        .rfind(')')
        .and_then(|end| stat[end + 1..].split_whitespace().next());
    cmdline == b"sleep\x001000\x00" && state.is_some_and(|state| state != "Z")
}

#[test]
fn a_stage_s_escapee_dies_with_its_cgroup_and_outlives_it_with_cgroups_off() {
    // What baton sees: the test runs where baton does.
    let Some(directory) = baton_executor::cgroup::directory() else {
        baton_test_support::needs::missing(
            baton_test_support::needs::Need::Cgroups,
            "a cgroup v2 hierarchy baton may make cgroups in",
        );
        return;
    };
    let project = Project::new();
    project.write("wf.yaml", &leaving_workflow());

    let (output, first) = run(&project, None);
    assert!(output.status.success(), "{output:?}");
    let pid = escapee(&project);
    wait_for("the escapee to be killed", Duration::from_secs(10), || {
        !sleeping(pid)
    });
    // The cgroups a baton kept for its next attempts stay, empty, until
    // the next baton that makes cgroups removes them.
    let cgroups_of = |baton: u32| -> Vec<(String, String)> {
        std::fs::read_dir(directory)
            .expect("the cgroup directory")
            .flatten()
            .filter(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                name.starts_with(&format!("baton-{baton}-"))
            })
            .map(|entry| {
                let procs = std::fs::read_to_string(entry.path().join("cgroup.procs"));
                (
                    entry.file_name().to_string_lossy().into_owned(),
                    procs.unwrap_or_default(),
                )
            })
            .collect()
    };
    let kept = cgroups_of(first);
    assert!(kept.iter().all(|(_, procs)| procs.is_empty()), "{kept:?}");
    let (output, _) = run(&project, Some("on"));
    assert!(output.status.success(), "{output:?}");
    assert!(!sleeping(escapee(&project)));
    assert_eq!(
        cgroups_of(first),
        Vec::new(),
        "the first baton's cgroups are removed"
    );

    let (output, _) = run(&project, Some("off"));
    assert!(output.status.success(), "{output:?}");
    let pid = escapee(&project);
    let survived = sleeping(pid);
    // It leads a group of its own (setsid).
    if let Some(start) = baton_executor::process_start_time(pid) {
        baton_executor::kill_group_if_alive(pid, pid, start);
    }
    assert!(survived, "without cgroups nothing names the escapee");
}

#[test]
fn a_bad_baton_cgroups_value_is_refused_with_what_it_takes() {
    let project = Project::new();
    project.write("wf.yaml", &leaving_workflow());
    let (output, _) = run(&project, Some("sometimes"));
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("BATON_CGROUPS=sometimes: expected `auto` (the default), `on` or `off`"),
        "{stderr}"
    );
    assert!(!project.path().join("escapee.pid").exists(), "nothing ran");
}
