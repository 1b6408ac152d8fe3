//! What a process leaves running is killed at its end, through the cgroup
//! where the machine allows one and through the subreaper fallback.

use std::path::Path;
use std::time::Duration;

use baton_executor::descendants::cgroups_usable;
use baton_executor::{KillReason, Tracking};

use crate::support::{run_to_end, sh, survivors_after, unique};

/// Whether `pid` is a live process (not a zombie, not gone).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next());
        !matches!(state, Some("Z" | "X"))
    })
}

/// Whether `pid` is gone, polling up to `bound`.
fn gone_within(pid: u32, bound: Duration, gone: impl Fn(u32) -> bool) -> bool {
    let deadline = std::time::Instant::now() + bound;
    while !gone(pid) {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

fn read_pid(path: &Path) -> u32 {
    std::fs::read_to_string(path)
        .expect("the script wrote its pid")
        .trim()
        .parse()
        .expect("a pid")
}

/// Where the cgroup v2 hierarchy is mounted.
fn cgroup2_mount() -> String {
    std::fs::read_to_string("/proc/self/mountinfo")
        .expect("mountinfo")
        .lines()
        .find(|line| {
            line.split(" - ")
                .nth(1)
                .is_some_and(|fs| fs.starts_with("cgroup2 "))
        })
        .and_then(|line| line.split_whitespace().nth(4).map(str::to_owned))
        .expect("a cgroup2 mount")
}

#[tokio::test]
async fn the_cgroup_kills_a_daemon_that_left_the_group_and_scrubbed_its_environment() {
    if !cgroups_usable() {
        eprintln!("skipped: this process may make no cgroup v2 of its own");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = sh(
        "setsid sh -c 'echo $$ > daemon.pid; exec env -i sleep 1000' & sleep 0.3; echo done",
        dir.path(),
    );
    let mut leader_cgroup = String::new();
    let (_never, cancel) = tokio::sync::watch::channel(false);
    let outcome = baton_executor::run(spec, cancel, |started| {
        leader_cgroup = std::fs::read_to_string(format!("/proc/{}/cgroup", started.pid))
            .expect("the leader's cgroup")
            .lines()
            .find_map(|line| line.strip_prefix("0::"))
            .expect("a v2 line")
            .to_owned();
    })
    .await
    .expect("the process starts");
    assert!(outcome.success());
    // The daemon held stdout: it was killed, not waited for.
    assert!(!outcome.stdout_truncated);
    let daemon = read_pid(&dir.path().join("daemon.pid"));
    assert!(
        gone_within(daemon, Duration::from_secs(2), |pid| !alive(pid)),
        "the daemon {daemon} survived"
    );
    assert!(leader_cgroup.contains("/baton-"), "{leader_cgroup}");
    let cgroup = format!("{}{leader_cgroup}", cgroup2_mount());
    assert!(!Path::new(&cgroup).exists(), "{cgroup} was left behind");
}

#[tokio::test]
async fn the_subreaper_kills_marked_daemons_and_reaps_what_it_adopted() {
    let dir = tempfile::tempdir().expect("temp dir");
    let marker = unique("subreaper");
    // The subshells exit at once: their children become the test
    // process's. One ends by itself (an adopted zombie, ours to reap), one
    // would run for ever.
    let mut spec = sh(
        "(setsid sh -c 'echo $$ > adopted.pid; sleep 0.2' &); \
         (setsid sh -c 'echo $$ > daemon.pid; exec sleep 1000' &); sleep 0.8; echo done",
        dir.path(),
    );
    spec.tracking = Tracking::Subreaper;
    spec.marker = Some(("BATON_TEST_MARKER".into(), marker.clone()));
    let (outcome, _) = run_to_end(spec).await;
    assert!(outcome.success());
    assert_eq!(
        survivors_after("BATON_TEST_MARKER", &marker, Duration::from_millis(500)),
        Vec::<u32>::new()
    );
    let daemon = read_pid(&dir.path().join("daemon.pid"));
    assert!(!alive(daemon), "the daemon {daemon} survived");
    // Adopted by this process, and reaped by it: not even a zombie is left.
    let adopted = read_pid(&dir.path().join("adopted.pid"));
    assert!(
        !Path::new(&format!("/proc/{adopted}")).exists(),
        "the adopted {adopted} was left a zombie"
    );
}

#[tokio::test]
async fn the_subreaper_kills_setsid_escapees_on_a_timeout() {
    let dir = tempfile::tempdir().expect("temp dir");
    let marker = unique("marker");
    let mut spec = sh(
        "setsid sleep 1000 & setsid sh -c 'sleep 1000 & sleep 1000' & sleep 1000",
        dir.path(),
    );
    spec.wall_timeout = Some(Duration::from_millis(300));
    spec.marker = Some(("BATON_TEST_MARKER".into(), marker.clone()));
    spec.tracking = Tracking::Subreaper;
    let (outcome, _) = run_to_end(spec).await;
    assert_eq!(outcome.killed, Some(KillReason::WallTimeout));
    assert_eq!(
        survivors_after("BATON_TEST_MARKER", &marker, Duration::from_millis(500)),
        Vec::<u32>::new()
    );
}

#[tokio::test]
async fn dropping_the_future_under_the_subreaper_kills_the_escapees() {
    let dir = tempfile::tempdir().expect("temp dir");
    let marker = unique("drop");
    let mut spec = sh("setsid sleep 1000 & sleep 1000 & sleep 1000", dir.path());
    spec.marker = Some(("BATON_TEST_MARKER".into(), marker.clone()));
    spec.tracking = Tracking::Subreaper;
    let (_never, cancel) = tokio::sync::watch::channel(false);
    let result = tokio::time::timeout(
        Duration::from_millis(300),
        baton_executor::run(spec, cancel, |_| {}),
    )
    .await;
    assert!(result.is_err(), "the run was still going");
    assert_eq!(
        survivors_after("BATON_TEST_MARKER", &marker, Duration::from_secs(2)),
        Vec::<u32>::new()
    );
}
