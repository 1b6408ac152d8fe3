//! Helpers shared by the process tests.

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use baton_executor::{Outcome, ProcessSpec, Started, Stdin, run};
use tokio::sync::watch;

/// The variable tests set (explicitly, not as the spec's marker) to find
/// leftover processes in /proc independently of the executor's own sweep.
pub(crate) const WITNESS_VAR: &str = "BATON_EXECUTOR_TEST_WITNESS";

/// A value unique to this test process and call.
pub(crate) fn unique(label: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "{label}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// `sh -c script` with logs in `dir`, a 1 MiB log cap and a short grace.
pub(crate) fn sh(script: &str, dir: &Path) -> ProcessSpec {
    ProcessSpec {
        program: "sh".into(),
        args: vec!["-c".into(), script.into()],
        cwd: dir.to_path_buf(),
        env: Vec::new(),
        env_passthrough: Vec::new(),
        clear_env: false,
        stdin: Stdin::Null,
        stdout_log: dir.join("logs/stdout.log"),
        stderr_log: dir.join("logs/stderr.log"),
        log_cap_bytes: 1 << 20,
        kill_after_bytes: None,
        wall_timeout: Some(Duration::from_secs(20)),
        idle_timeout: None,
        kill_grace: Duration::from_millis(300),
        marker: None,
        contain: None,
    }
}

/// Runs `spec` with a cancel channel nobody raises.
pub(crate) async fn run_to_end(spec: ProcessSpec) -> (Outcome, Started) {
    let (_never, cancel) = watch::channel(false);
    let mut started = None;
    let outcome = run(spec, cancel, |s| started = Some(*s))
        .await
        .expect("the process starts");
    (outcome, started.expect("on_started was called"))
}

/// Waits up to `bound` for no process to carry `name=value`; returns the
/// survivors (empty on success).
pub(crate) fn survivors_after(name: &str, value: &str, bound: Duration) -> Vec<u32> {
    let deadline = std::time::Instant::now() + bound;
    loop {
        let pids = baton_test_support::procs::processes_with_env(name, value);
        if pids.is_empty() || std::time::Instant::now() >= deadline {
            return pids;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGKILLs every process with `name=value` (test cleanup).
pub(crate) fn kill_all_with_env(name: &str, value: &str) {
    for pid in baton_test_support::procs::processes_with_env(name, value) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Peak and current resident set size of this process, in bytes.
pub(crate) fn memory() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map(|kib| kib * 1024)
            .unwrap_or_else(|| panic!("{name} in /proc/self/status"))
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// Resets this process's peak RSS (VmHWM) to its current RSS; returns
/// whether the kernel allowed it.
pub(crate) fn reset_peak_memory() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}
