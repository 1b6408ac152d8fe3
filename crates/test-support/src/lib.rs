//! Helpers shared by baton's tests: locating the reference corpus and the
//! agent CLIs' help texts, and running the `baton` binary with its output
//! captured. The `baton-fake-agent` binary stands in for agent CLIs, and
//! [`openai::FakeOpenAi`] for an OpenAI-compatible server.
//!
//! Test-only: nothing here ships in the binary.

#![forbid(unsafe_code)]

pub mod openai;

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
/// to the checkout. `None` when it is absent outside CI.
///
/// # Panics
///
/// When `CI=true` and the corpus is missing: conformance must fail loudly
/// there, never skip.
pub fn compat_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("BATON_COMPAT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("../shared/compat"));
    if dir.join("workflows").is_dir() {
        return Some(dir.canonicalize().unwrap_or(dir));
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "the compat corpus is missing at {} (set BATON_COMPAT_DIR); CI must not skip conformance",
        dir.display()
    );
    None
}

/// The captured `--help` texts of the agent CLIs:
/// `$BATON_AGENT_CLIS_DIR`, else `../shared/agent-clis` next to the
/// checkout. `None` when absent outside CI.
///
/// # Panics
///
/// When `CI=true` and the directory is missing.
pub fn agent_clis_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("BATON_AGENT_CLIS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("../shared/agent-clis"));
    if dir.join("claude.help").is_file() {
        return Some(dir);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "the agent CLI help texts are missing at {} (set BATON_AGENT_CLIS_DIR); CI must not skip them",
        dir.display()
    );
    None
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
