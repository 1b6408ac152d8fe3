//! Helpers shared by baton's tests: locating the reference corpus and the
//! agent CLIs' help texts, and running the `baton` binary with its output
//! captured. The `baton-fake-agent` binary stands in for agent CLIs,
//! [`openai::FakeOpenAi`] for an OpenAI-compatible server, and
//! [`model_server::ModelServer`] for the model behind the real agent CLIs
//! (also runnable as the `baton-fake-model` binary).
//!
//! Test-only: nothing here ships in the binary.

#![forbid(unsafe_code)]

pub mod agent_clis;
pub mod browser;
pub mod http;
pub mod layered;
pub mod model_server;
pub mod needs;
pub mod openai;
pub mod procs;
pub mod schemathesis;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The workspace root (the directory holding the root `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/test-support sits two levels below the root")
        .to_path_buf()
}

/// The reference corpus: `$BATON_COMPAT_DIR`, else `../shared/compat` next
/// to the checkout. `None` when it is missing and `BATON_TEST_SKIP` lists
/// `corpus` ([`needs`]).
///
/// # Panics
///
/// When it is missing and not to be skipped.
pub fn compat_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("BATON_COMPAT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("../shared/compat"));
    needs::dir_or_missing(needs::Need::Corpus, dir, |dir| {
        dir.join("workflows").is_dir()
    })
    .map(|dir| dir.canonicalize().unwrap_or(dir))
}

/// The captured `--help` texts of the agent CLIs:
/// `$BATON_AGENT_CLIS_DIR`, else `../shared/agent-clis` next to the
/// checkout. `None` when they are missing and `BATON_TEST_SKIP` lists
/// `agent-help` ([`needs`]).
///
/// # Panics
///
/// When they are missing and not to be skipped.
pub fn agent_clis_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("BATON_AGENT_CLIS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("../shared/agent-clis"));
    needs::dir_or_missing(needs::Need::AgentHelp, dir, |dir| {
        dir.join("claude.help").is_file()
    })
}

/// The committed inputs of a fuzz target, `fuzz/corpus/<target>/*`, as
/// (file name, bytes), sorted by name.
///
/// # Panics
///
/// When the directory is missing or empty (it is part of the repository),
/// or a file cannot be read.
pub fn fuzz_corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = workspace_root().join("fuzz/corpus").join(target);
    let mut files: Vec<(String, Vec<u8>)> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .map(|entry| {
                let path = entry.expect("a corpus directory entry").path();
                let bytes = std::fs::read(&path)
                    .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
                (
                    path.file_name()
                        .expect("a file name")
                        .to_string_lossy()
                        .into_owned(),
                    bytes,
                )
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    assert!(
        !files.is_empty(),
        "the fuzz corpus {} is missing or empty",
        dir.display()
    );
    files.sort();
    files
}

/// Runs `check` on every input of `target`'s committed corpus (see
/// [`fuzz_corpus`]), then fails naming each input whose check panicked.
///
/// # Panics
///
/// When a check panics, or as [`fuzz_corpus`] does.
pub fn replay_fuzz_corpus(target: &str, check: impl Fn(&[u8])) {
    let files = fuzz_corpus(target);
    let failed: Vec<&str> = files
        .iter()
        .filter(|(_, bytes)| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(bytes))).is_err()
        })
        .map(|(name, _)| name.as_str())
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} inputs of fuzz/corpus/{target} fail their check (panics above): {failed:?}",
        failed.len(),
        files.len()
    );
}

/// The captured result of one `baton` invocation.
#[derive(Debug)]
pub struct Run {
    /// Exit code (`-1` if killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(output: Output) -> Self {
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

/// Runs a binary with arguments in a directory, colour off, and captures it.
///
/// # Panics
///
/// When the binary cannot be started.
pub fn run(binary: &Path, cwd: &Path, args: &[&str]) -> Run {
    #[expect(clippy::disallowed_methods, reason = "tests run the baton binary")]
    let mut command = Command::new(binary);
    command
        .args(args)
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .env_remove("CLICOLOR_FORCE")
        .output()
        .unwrap_or_else(|error| panic!("cannot run {}: {error}", binary.display()))
        .into()
}

/// Like [`run`], but a run that outlives `limit` is killed and the call
/// panics with what it printed so far (its progress lines on stderr name
/// the stage it was in) and the processes still running below `cwd`: a hung
/// command then fails its test with the evidence, instead of the whole test
/// timing out silently.
///
/// # Panics
///
/// When the binary cannot be started, or it outlives `limit`.
pub fn run_bounded(binary: &Path, cwd: &Path, args: &[&str], limit: std::time::Duration) -> Run {
    run_bounded_with(binary, cwd, args, &[], limit)
}

/// [`run_bounded`] with variables added to the environment.
///
/// # Panics
///
/// As [`run_bounded`].
pub fn run_bounded_with(
    binary: &Path,
    cwd: &Path,
    args: &[&str],
    env: &[(String, String)],
    limit: std::time::Duration,
) -> Run {
    run_bounded_input(binary, cwd, args, env, None, limit)
}

/// [`run_bounded_with`], with `input` on stdin (else `/dev/null`).
///
/// # Panics
///
/// As [`run_bounded`].
pub fn run_bounded_input(
    binary: &Path,
    cwd: &Path,
    args: &[&str],
    env: &[(String, String)],
    input: Option<&[u8]>,
    limit: std::time::Duration,
) -> Run {
    // The output goes to files, not pipes: a full pipe must not stall it.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let stem = std::env::temp_dir().join(format!("baton-bounded-{}-{call}", std::process::id()));
    let out_path = stem.with_extension("stdout");
    let err_path = stem.with_extension("stderr");
    let in_path = stem.with_extension("stdin");
    let file = |path: &Path| std::fs::File::create(path).expect("an output file");
    let stdin = match input {
        None => std::process::Stdio::null(),
        Some(bytes) => {
            std::fs::write(&in_path, bytes).expect("an input file");
            std::fs::File::open(&in_path)
                .expect("the input file")
                .into()
        }
    };
    #[expect(clippy::disallowed_methods, reason = "tests run the baton binary")]
    let mut child = Command::new(binary)
        .args(args)
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .env_remove("CLICOLOR_FORCE")
        .envs(env.iter().map(|(key, value)| (key, value)))
        .stdin(stdin)
        .stdout(file(&out_path))
        .stderr(file(&err_path))
        .spawn()
        .unwrap_or_else(|error| panic!("cannot run {}: {error}", binary.display()));
    let _ = std::fs::remove_file(&in_path);
    let started = std::time::Instant::now();
    let read = |path: &Path| {
        String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default()).into_owned()
    };
    loop {
        if let Some(status) = child.try_wait().expect("wait for baton") {
            let finished = Run {
                code: status.code().unwrap_or(-1),
                stdout: read(&out_path),
                stderr: read(&err_path),
            };
            let _ = std::fs::remove_file(&out_path);
            let _ = std::fs::remove_file(&err_path);
            return finished;
        }
        if started.elapsed() > limit {
            #[expect(clippy::disallowed_methods, reason = "a hung test shows its processes")]
            let processes = Command::new("ps")
                .args(["-eo", "pid,ppid,pgid,stat,etime,args"])
                .output()
                .map(|output| String::from_utf8_lossy(&output.stdout).into_owned())
                .unwrap_or_default();
            let _ = child.kill();
            let _ = child.wait();
            let stderr = read(&err_path);
            let _ = std::fs::remove_file(&out_path);
            let _ = std::fs::remove_file(&err_path);
            let tail: Vec<&str> = stderr.lines().rev().take(40).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            panic!(
                "{args:?} in {} ran longer than {limit:?}; killed. Its stderr ended with:\n{}\nprocesses at the time:\n{processes}",
                cwd.display(),
                tail.join("\n")
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
