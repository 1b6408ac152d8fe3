//! `run`: exit statuses, timeouts, kill escalation, group kills, output
//! capture and cancellation.

use std::path::Path;
use std::time::{Duration, Instant};

use baton_executor::{Error, KillReason, ProcessSpec, Stdin, kill_group_if_alive, run};
use tokio::sync::watch;

use crate::support::{
    WITNESS_VAR, kill_all_with_env, memory, reset_peak_memory, run_to_end, sh, survivors_after,
    unique,
};

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

fn with_witness(mut spec: ProcessSpec, witness: &str) -> ProcessSpec {
    spec.env.push((WITNESS_VAR.into(), witness.into()));
    spec
}

#[tokio::test]
async fn records_exit_code_output_and_stderr_tail() {
    let dir = tempdir();
    let (outcome, started) =
        run_to_end(sh("printf out; printf 'err\\n' >&2; exit 3", dir.path())).await;
    assert_eq!(outcome.exit_code, Some(3));
    assert_eq!(outcome.signal, None);
    assert_eq!(outcome.killed, None);
    assert!(!outcome.success());
    assert_eq!((outcome.stdout_bytes, outcome.stderr_bytes), (3, 4));
    assert!(!outcome.stdout_truncated && !outcome.stderr_truncated);
    assert_eq!(outcome.stderr_tail, "err\n");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("logs/stdout.log")).unwrap(),
        "out"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("logs/stderr.log")).unwrap(),
        "err\n"
    );
    assert_eq!(started.pgid, started.pid);
    assert!(started.start_time > 0);
}

#[tokio::test]
async fn success_means_exit_zero() {
    let dir = tempdir();
    let (outcome, _) = run_to_end(sh("true", dir.path())).await;
    assert!(outcome.success());
}

#[tokio::test]
async fn records_the_signal_that_ended_the_process() {
    let dir = tempdir();
    let (outcome, _) = run_to_end(sh("kill -USR1 $$", dir.path())).await;
    assert_eq!(outcome.exit_code, None);
    assert_eq!(
        outcome.signal,
        Some(nix::sys::signal::Signal::SIGUSR1 as i32)
    );
    assert_eq!(outcome.killed, None);
    assert!(!outcome.success());
}

#[tokio::test]
async fn stdin_is_dev_null_unless_bytes_are_given() {
    let dir = tempdir();
    let (outcome, _) = run_to_end(sh("cat", dir.path())).await;
    assert!(outcome.success());
    assert_eq!(outcome.stdout_bytes, 0);

    let mut spec = sh("cat; echo", dir.path());
    spec.stdin = Stdin::Bytes(b"the prompt".to_vec());
    let (outcome, _) = run_to_end(spec).await;
    assert!(outcome.success());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("logs/stdout.log")).unwrap(),
        "the prompt\n"
    );
}

#[tokio::test]
async fn a_child_that_ignores_its_stdin_bytes_is_fine() {
    let dir = tempdir();
    let mut spec = sh("exit 0", dir.path());
    spec.stdin = Stdin::Bytes(vec![b'x'; 1 << 20]);
    let (outcome, _) = run_to_end(spec).await;
    assert!(outcome.success());
}

#[tokio::test]
async fn environment_is_cleared_passed_through_and_marked() {
    let dir = tempdir();
    let mut spec = sh("env | sort", dir.path());
    spec.clear_env = true;
    spec.env = vec![
        ("EXPLICIT".into(), "1".into()),
        ("PATH".into(), "/usr/bin:/bin".into()),
    ];
    spec.env_passthrough = vec!["HOME".into(), "BATON_SURELY_UNSET_VARIABLE".into()];
    spec.marker = Some(("BATON_MARKER".into(), "m-1".into()));
    let (outcome, _) = run_to_end(spec).await;
    assert!(outcome.success());
    let env = std::fs::read_to_string(dir.path().join("logs/stdout.log")).unwrap();
    let names: Vec<&str> = env
        .lines()
        .filter_map(|line| line.split('=').next())
        .filter(|name| *name != "PWD" && *name != "SHLVL" && *name != "_")
        .collect();
    let mut expected = vec!["BATON_MARKER", "EXPLICIT", "PATH"];
    if std::env::var_os("HOME").is_some() {
        expected.insert(2, "HOME");
    }
    assert_eq!(names, expected, "{env}");
    assert!(env.contains("BATON_MARKER=m-1\n"));
}

#[tokio::test]
async fn a_missing_program_is_an_error_before_anything_starts() {
    let dir = tempdir();
    let mut spec = sh("", dir.path());
    spec.program = "baton-no-such-program".into();
    let (_never, cancel) = watch::channel(false);
    let mut called = false;
    let result = run(spec, cancel, |_| called = true).await;
    assert!(
        matches!(result, Err(Error::ProgramNotFound { .. })),
        "{result:?}"
    );
    assert!(!called);
}

#[tokio::test]
async fn program_paths_are_relative_to_cwd() {
    let dir = tempdir();
    std::fs::write(dir.path().join("tool.sh"), "#!/bin/sh\necho tool \"$@\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(
        dir.path().join("tool.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let mut spec = sh("", dir.path());
    spec.program = "./tool.sh".into();
    spec.args = vec!["arg".into()];
    let (outcome, _) = run_to_end(spec).await;
    assert!(outcome.success());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("logs/stdout.log")).unwrap(),
        "tool arg\n"
    );
}

#[tokio::test]
async fn wall_timeout_kills_the_whole_group() {
    let dir = tempdir();
    let witness = unique("wall");
    let mut spec = with_witness(sh("sleep 1000 & sleep 1000", dir.path()), &witness);
    spec.wall_timeout = Some(Duration::from_millis(300));
    let begin = Instant::now();
    let (outcome, _) = run_to_end(spec).await;
    let took = begin.elapsed();
    assert_eq!(outcome.killed, Some(KillReason::WallTimeout));
    assert_eq!(
        outcome.signal,
        Some(nix::sys::signal::Signal::SIGTERM as i32)
    );
    assert!(outcome.elapsed >= Duration::from_millis(300));
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert_eq!(
        survivors_after(WITNESS_VAR, &witness, Duration::from_millis(500)),
        Vec::<u32>::new()
    );
    eprintln!("wall timeout 300 ms: run returned after {took:?}");
}

#[tokio::test]
async fn idle_timeout_fires_only_without_output() {
    let dir = tempdir();
    let witness = unique("idle");
    let mut spec = with_witness(
        sh("echo started; sleep 1000 & sleep 1000", dir.path()),
        &witness,
    );
    spec.idle_timeout = Some(Duration::from_millis(300));
    let begin = Instant::now();
    let (outcome, _) = run_to_end(spec).await;
    let took = begin.elapsed();
    assert_eq!(outcome.killed, Some(KillReason::IdleTimeout));
    assert_eq!(outcome.stdout_bytes, 8);
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert_eq!(
        survivors_after(WITNESS_VAR, &witness, Duration::from_millis(500)),
        Vec::<u32>::new()
    );

    // Output every 100 ms keeps a 1 s idle timeout from firing.
    let mut spec = sh(
        "for i in 1 2 3 4 5 6 7 8 9 10; do echo $i; sleep 0.1; done",
        dir.path(),
    );
    spec.idle_timeout = Some(Duration::from_secs(1));
    let (outcome, _) = run_to_end(spec).await;
    assert!(outcome.success(), "{outcome:?}");
}

#[tokio::test]
async fn sigterm_ignored_gets_sigkill_after_the_grace_period() {
    let dir = tempdir();
    let witness = unique("term");
    // `trap '' TERM` sets SIG_IGN, which the sleep inherits across exec.
    let mut spec = with_witness(
        sh("trap '' TERM; sleep 1000 & sleep 1000", dir.path()),
        &witness,
    );
    spec.wall_timeout = Some(Duration::from_millis(200));
    spec.kill_grace = Duration::from_millis(400);
    let begin = Instant::now();
    let (outcome, _) = run_to_end(spec).await;
    let took = begin.elapsed();
    assert_eq!(outcome.killed, Some(KillReason::WallTimeout));
    assert_eq!(
        outcome.signal,
        Some(nix::sys::signal::Signal::SIGKILL as i32)
    );
    assert!(
        outcome.elapsed >= Duration::from_millis(600),
        "{:?}",
        outcome.elapsed
    );
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert_eq!(
        survivors_after(WITNESS_VAR, &witness, Duration::from_millis(500)),
        Vec::<u32>::new()
    );
    eprintln!("timeout 200 ms + grace 400 ms: run returned after {took:?}");
}

#[tokio::test]
async fn a_background_grandchild_holding_stdout_does_not_delay_the_end() {
    let dir = tempdir();
    let witness = unique("bg");
    let spec = with_witness(sh("sleep 1000 & echo done", dir.path()), &witness);
    let begin = Instant::now();
    let (outcome, _) = run_to_end(spec).await;
    let took = begin.elapsed();
    assert!(outcome.success());
    assert!(!outcome.stdout_truncated);
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert_eq!(
        survivors_after(WITNESS_VAR, &witness, Duration::from_millis(500)),
        Vec::<u32>::new()
    );
}

/// Without cgroups, a grandchild that left the group and carries no marker
/// is not killed; holding stdout, it is waited for no longer than the
/// bound. (With a cgroup it dies with its stage, and the pipes close.)
#[tokio::test]
async fn a_setsid_grandchild_holding_stdout_is_abandoned_within_the_bound() {
    // For this process alone: nextest runs each test in a process of its own.
    baton_executor::cgroup::set_enabled(false);
    let dir = tempdir();
    let witness = unique("setsid");
    let spec = with_witness(
        sh("setsid sleep 30 & sleep 0.2; echo done", dir.path()),
        &witness,
    );
    let begin = Instant::now();
    let (outcome, _) = run_to_end(spec).await;
    let took = begin.elapsed();
    kill_all_with_env(WITNESS_VAR, &witness);
    assert!(outcome.success());
    assert!(
        outcome.stdout_truncated,
        "an abandoned reader may have missed bytes"
    );
    assert!(
        took >= baton_executor::PIPE_DRAIN_TIMEOUT
            && took < baton_executor::PIPE_DRAIN_TIMEOUT + Duration::from_secs(3),
        "took {took:?}"
    );
}

#[tokio::test]
async fn the_marker_sweep_kills_setsid_escapees() {
    let dir = tempdir();
    let marker = unique("marker");
    let mut spec = sh(
        "setsid sleep 1000 & setsid sh -c 'sleep 1000 & sleep 1000' & sleep 1000",
        dir.path(),
    );
    spec.wall_timeout = Some(Duration::from_millis(300));
    spec.marker = Some(("BATON_TEST_MARKER".into(), marker.clone()));
    let begin = Instant::now();
    let (outcome, _) = run_to_end(spec).await;
    let took = begin.elapsed();
    assert_eq!(outcome.killed, Some(KillReason::WallTimeout));
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert_eq!(
        survivors_after("BATON_TEST_MARKER", &marker, Duration::from_millis(500)),
        Vec::<u32>::new()
    );
}

/// The sweep reads the pids handed out since the leader one by one while
/// they are few, and lists `/proc` once they are many: both find escapees.
#[tokio::test]
async fn the_marker_sweep_finds_escapees_after_many_other_processes() {
    let dir = tempdir();
    let marker = unique("marker");
    let mut spec = sh(
        "for i in $(seq 100); do /bin/true; done; setsid sleep 1000 & sleep 1000",
        dir.path(),
    );
    spec.wall_timeout = Some(Duration::from_millis(1500));
    spec.marker = Some(("BATON_TEST_MARKER".into(), marker.clone()));
    let (outcome, _) = run_to_end(spec).await;
    assert_eq!(outcome.killed, Some(KillReason::WallTimeout));
    assert_eq!(
        survivors_after("BATON_TEST_MARKER", &marker, Duration::from_millis(500)),
        Vec::<u32>::new()
    );
}

/// A daemon that double-forked into a session of its own outlives its
/// parents but not its stage: it carries the marker, comes back to baton
/// as an orphan, and is killed and reaped before `run` returns.
#[tokio::test]
async fn a_double_forked_daemon_is_killed_and_reaped_when_its_stage_ends() {
    let dir = tempdir();
    let mut spec = sh(
        "setsid sh -c 'sleep 1000 >/dev/null 2>&1 & echo $! > daemon.pid'; echo done",
        dir.path(),
    );
    spec.marker = Some(("BATON_TEST_MARKER".into(), unique("marker")));
    let (outcome, _) = run_to_end(spec).await;
    assert!(outcome.success(), "{outcome:?}");
    let daemon = read_pid(&dir.path().join("daemon.pid"));
    assert!(
        !Path::new(&format!("/proc/{daemon}")).exists(),
        "the daemon {daemon} is still there, not even reaped"
    );
}

/// Without cgroups, a process that left its stage's group and dropped the
/// marker survives the stage (nothing says it was the stage's). When it
/// exits, it is baton's child, and the next stage's end reaps it rather
/// than leaving a zombie for as long as baton lives.
#[tokio::test]
async fn a_stray_that_exits_after_its_stage_is_reaped_at_the_next_end() {
    // For this process alone: nextest runs each test in a process of its own.
    baton_executor::cgroup::set_enabled(false);
    let dir = tempdir();
    let mut spec = sh(
        "setsid env -i sh -c 'echo $$ > stray.pid; exec sleep 0.5' >/dev/null 2>&1 & \
         while [ ! -s stray.pid ]; do sleep 0.01; done",
        dir.path(),
    );
    spec.marker = Some(("BATON_TEST_MARKER".into(), unique("marker")));
    let (outcome, _) = run_to_end(spec).await;
    assert!(outcome.success(), "{outcome:?}");
    let stray = read_pid(&dir.path().join("stray.pid"));
    let deadline = Instant::now() + Duration::from_secs(20);
    let stat = Path::new("/proc").join(stray.to_string()).join("stat");
    let fields = loop {
        let text = std::fs::read_to_string(&stat).expect("the stray is there, alive or a zombie");
        let fields: Vec<String> = text[text.rfind(')').expect("a stat line") + 1..]
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        if fields[0] == "Z" || Instant::now() >= deadline {
            break fields;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(fields[0], "Z", "the stray has not exited: {fields:?}");
    assert_eq!(
        fields[1],
        std::process::id().to_string(),
        "adopted by baton"
    );
    let (outcome, _) = run_to_end(sh("true", dir.path())).await;
    assert!(outcome.success(), "{outcome:?}");
    assert!(!stat.exists(), "the stray {stray} is still a zombie");
}

/// Dropping `run` (a cancelled drive) kills the group at once; once the
/// leader has exited, a daemon it left in a session of its own is killed
/// and reaped too, not left running or a zombie.
#[tokio::test]
async fn dropping_the_run_kills_and_reaps_a_double_forked_daemon() {
    let dir = tempdir();
    let mut spec = sh(
        "setsid sh -c 'sleep 1000 >/dev/null 2>&1 & echo $! > daemon.pid'; sleep 1000",
        dir.path(),
    );
    spec.marker = Some(("BATON_TEST_MARKER".into(), unique("marker")));
    let daemon = drop_once_written(spec, &dir.path().join("daemon.pid")).await;
    let gone = Instant::now() + Duration::from_secs(10);
    while Path::new(&format!("/proc/{daemon}")).exists() && Instant::now() < gone {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        !Path::new(&format!("/proc/{daemon}")).exists(),
        "the daemon {daemon} outlived the dropped run"
    );
}

/// With cgroups (the default), dropping `run` kills at once everything the stage
/// started, a process that left the group and scrubbed the marker from its
/// environment included; the attempt's cgroup is left empty.
#[tokio::test]
async fn with_cgroups_a_dropped_run_kills_what_the_group_and_the_marker_miss() {
    let Some(cgroups) = baton_executor::cgroup::directory() else {
        baton_test_support::needs::missing(
            baton_test_support::needs::Need::Cgroups,
            "a cgroup v2 hierarchy the test may make cgroups in",
        );
        return;
    };
    let dir = tempdir();
    let mut spec = sh(
        "setsid env -i sh -c 'echo $$ > escapee.pid; exec sleep 1000' >/dev/null 2>&1 & sleep 1000",
        dir.path(),
    );
    spec.marker = Some(("BATON_TEST_MARKER".into(), unique("marker")));
    let escapee = drop_once_written(spec, &dir.path().join("escapee.pid")).await;
    let ours = format!("baton-{}-", std::process::id());
    let gone = Instant::now() + Duration::from_secs(10);
    let left = || {
        let alive = Path::new(&format!("/proc/{escapee}")).exists();
        let held: Vec<String> = std::fs::read_dir(cgroups)
            .expect("the cgroup directory")
            .flatten()
            .filter(|entry| entry.file_name().to_string_lossy().starts_with(&ours))
            .filter_map(|entry| std::fs::read_to_string(entry.path().join("cgroup.procs")).ok())
            .filter(|procs| !procs.trim().is_empty())
            .collect();
        (alive, held)
    };
    while left() != (false, Vec::new()) && Instant::now() < gone {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        left(),
        (false, Vec::new()),
        "the escapee {escapee} and what baton's cgroups hold"
    );
}

/// A stage leaves an escapee only its cgroup finds, which is killed at the
/// stage's end; the next stages start and run (some kernels kill every
/// child later started into a cgroup once killed, so that cgroup is not
/// given to another attempt).
#[tokio::test]
async fn the_stages_after_one_whose_cgroup_was_killed_run() {
    if baton_executor::cgroup::directory().is_none() {
        baton_test_support::needs::missing(
            baton_test_support::needs::Need::Cgroups,
            "a cgroup v2 hierarchy the test may make cgroups in",
        );
        return;
    }
    let dir = tempdir();
    let escapes = "setsid env -i sh -c 'echo $$ > escapee.pid; exec sleep 1000' >/dev/null 2>&1 &\nwhile [ ! -s escapee.pid ]; do sleep 0.01; done";
    let (outcome, _) = run_to_end(sh(escapes, dir.path())).await;
    assert!(outcome.success(), "{outcome:?}");
    let escapee = read_pid(&dir.path().join("escapee.pid"));
    assert!(
        !Path::new(&format!("/proc/{escapee}")).exists(),
        "the escapee {escapee} outlived its stage"
    );
    for _ in 0..3 {
        let (outcome, _) = run_to_end(sh("echo ran", dir.path())).await;
        assert!(outcome.success(), "{outcome:?}");
        assert_eq!(outcome.stdout_bytes, 4);
    }
}

/// Runs `spec` until it has written a pid to `pid_file`, drops the run,
/// and returns that pid.
async fn drop_once_written(spec: ProcessSpec, pid_file: &Path) -> u32 {
    let (_never, cancel) = watch::channel(false);
    tokio::select! {
        outcome = run(spec, cancel, |_| {}) => panic!("the stage ended by itself: {outcome:?}"),
        () = async {
            while std::fs::metadata(pid_file).map_or(true, |file| file.len() == 0) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        } => {}
    }
    read_pid(pid_file)
}

fn read_pid(path: &Path) -> u32 {
    std::fs::read_to_string(path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
        .trim()
        .parse()
        .expect("a pid")
}

#[tokio::test]
async fn a_gigabyte_flood_is_capped_counted_and_memory_bounded() {
    const GIB: u64 = 1 << 30;
    const CAP: u64 = 1 << 20;
    let dir = tempdir();
    let mut spec = sh(
        &format!("head -c {GIB} /dev/zero; head -c {GIB} /dev/zero >&2"),
        dir.path(),
    );
    spec.log_cap_bytes = CAP;
    spec.wall_timeout = Some(Duration::from_secs(50));
    let reset = reset_peak_memory();
    let (peak_before, rss_before) = memory();
    let begin = Instant::now();
    let (outcome, _) = run_to_end(spec).await;
    let took = begin.elapsed();
    let (peak_after, _) = memory();
    assert!(outcome.success(), "{outcome:?}");
    assert_eq!((outcome.stdout_bytes, outcome.stderr_bytes), (GIB, GIB));
    assert!(outcome.stdout_truncated && outcome.stderr_truncated);
    // The cap's worth of the stream, then a line that says the rest was cut.
    let mark = format!(
        "\n[baton: this log stops at {CAP} bytes; {} more were not kept]\n",
        GIB - CAP
    );
    for log in ["logs/stdout.log", "logs/stderr.log"] {
        let bytes = std::fs::read(dir.path().join(log)).unwrap();
        assert_eq!(bytes.len() as u64, CAP + mark.len() as u64, "{log}");
        assert!(bytes.ends_with(mark.as_bytes()), "{log}");
    }
    assert_eq!(outcome.stderr_tail.len(), baton_executor::STDERR_TAIL_BYTES);
    let base = if reset { rss_before } else { peak_before };
    let growth = peak_after.saturating_sub(base);
    eprintln!(
        "2 GiB flood in {took:?}; VmHWM {} MiB -> {} MiB (growth {} KiB, clear_refs reset: {reset})",
        base >> 20,
        peak_after >> 20,
        growth >> 10
    );
    assert!(growth < 64 << 20, "peak RSS grew by {growth} bytes");
}

#[tokio::test]
async fn kill_after_bytes_kills_a_flood() {
    let dir = tempdir();
    let mut spec = sh("yes", dir.path());
    spec.kill_after_bytes = Some(10 << 20);
    let (outcome, _) = run_to_end(spec).await;
    assert_eq!(outcome.killed, Some(KillReason::OutputFlood));
    assert!(outcome.stdout_bytes > 10 << 20);
    assert!(outcome.stdout_bytes < 200 << 20, "{}", outcome.stdout_bytes);
    assert!(outcome.stdout_truncated);
    assert_eq!(
        outcome.signal,
        Some(nix::sys::signal::Signal::SIGTERM as i32)
    );
}

#[tokio::test]
async fn cancel_kills_the_group() {
    let dir = tempdir();
    let witness = unique("cancel");
    let spec = with_witness(sh("sleep 1000 & sleep 1000", dir.path()), &witness);
    let (sender, cancel) = watch::channel(false);
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        sender.send(true).expect("run is listening");
        // Keep the sender alive until run has seen it.
        tokio::time::sleep(Duration::from_secs(5)).await;
    });
    let begin = Instant::now();
    let outcome = run(spec, cancel, |_| {}).await.expect("starts");
    let took = begin.elapsed();
    assert_eq!(outcome.killed, Some(KillReason::Cancelled));
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert_eq!(
        survivors_after(WITNESS_VAR, &witness, Duration::from_millis(500)),
        Vec::<u32>::new()
    );
    eprintln!("cancel after 200 ms: run returned after {took:?}");
}

#[tokio::test]
async fn an_already_cancelled_run_is_killed_at_once() {
    let dir = tempdir();
    let (_sender, cancel) = watch::channel(true);
    let begin = Instant::now();
    let outcome = run(sh("sleep 1000", dir.path()), cancel, |_| {})
        .await
        .expect("starts");
    assert_eq!(outcome.killed, Some(KillReason::Cancelled));
    assert!(begin.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn dropping_the_future_kills_the_group() {
    let dir = tempdir();
    let witness = unique("drop");
    let spec = with_witness(sh("sleep 1000 & sleep 1000", dir.path()), &witness);
    let (_never, cancel) = watch::channel(false);
    let result = tokio::time::timeout(Duration::from_millis(300), run(spec, cancel, |_| {})).await;
    assert!(result.is_err(), "the run was still going");
    assert_eq!(
        survivors_after(WITNESS_VAR, &witness, Duration::from_secs(1)),
        Vec::<u32>::new()
    );
}

#[tokio::test]
#[expect(
    clippy::disallowed_methods,
    reason = "a process started apart from baton, as another program's"
)]
async fn kill_group_if_alive_checks_the_start_time() {
    let dir = tempdir();
    let witness = unique("rekill");
    let mut child = tokio::process::Command::new("sh")
        .args(["-c", "sleep 1000 & sleep 1000"])
        .env(WITNESS_VAR, &witness)
        .current_dir(dir.path())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    let pid = child.id().expect("pid");
    let start_time = baton_executor::process_start_time(pid).expect("start time");
    tokio::time::sleep(Duration::from_millis(100)).await;

    assert!(
        !kill_group_if_alive(pid, pid, start_time + 1),
        "a mismatched start time is refused"
    );
    assert_eq!(
        baton_test_support::procs::processes_with_env(WITNESS_VAR, &witness).len(),
        3
    );

    let begin = Instant::now();
    assert!(kill_group_if_alive(pid, pid, start_time));
    assert_eq!(
        survivors_after(WITNESS_VAR, &witness, Duration::from_secs(1)),
        Vec::<u32>::new()
    );
    eprintln!("kill_group_if_alive returned after {:?}", begin.elapsed());
    // The leader was reaped by kill_group_if_alive.
    assert!(baton_executor::process_start_time(pid).is_none_or(|t| t != start_time));
    let _ = child.start_kill();
}
