//! `baton agents check`: is a profile's CLI installed, which version, and
//! which credentials are missing.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::schema::{Kind, Profile};
use crate::group::{register_live, signal_group, unregister_live};
use crate::program::find_program;

/// How long `<program> --version` may take: a Node CLI loading its
/// bundle on a busy machine takes several seconds.
pub const VERSION_TIMEOUT: Duration = Duration::from_secs(20);

/// Output of `--version` beyond this is not read.
const VERSION_OUTPUT_CAP: u64 = 64 * 1024;

/// The result of checking one profile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckResult {
    /// The program is on `PATH` and `--version` exited 0 in time.
    pub available: bool,
    /// Where the program was found.
    pub program_path: Option<PathBuf>,
    /// The line of `--version`'s output that names the version (the first
    /// non-empty one that is not a warning and has a digit, else the first).
    pub version: Option<String>,
    /// Credential-like variables of `env_passthrough` (`*_API_KEY`,
    /// `*_TOKEN`) that are unset or empty. Informational: a CLI may also be
    /// logged in through its own files.
    pub missing_credentials: Vec<String>,
    /// One of the profile's credential-like variables is set: any one of
    /// them is usually enough (`ANTHROPIC_API_KEY` or
    /// `ANTHROPIC_AUTH_TOKEN`; opencode takes any provider's key).
    pub credential_set: bool,
    /// Why the profile is not available, when it is not.
    pub detail: Option<String>,
}

/// Checks `profile` against baton's own environment (see [`check_with`]).
pub fn check(profile: &Profile) -> CheckResult {
    check_with(profile, crate::environment::var, VERSION_TIMEOUT)
}

/// Checks `profile`: finds its program on the `PATH` that `env` returns,
/// runs `<program> --version` (killed after `timeout`), and lists missing
/// credentials.
pub fn check_with(
    profile: &Profile,
    env: impl Fn(&str) -> Option<OsString>,
    timeout: Duration,
) -> CheckResult {
    let credentials: Vec<&String> = profile
        .env_passthrough
        .iter()
        .filter(|name| name.ends_with("_API_KEY") || name.ends_with("_TOKEN"))
        .collect();
    let missing_credentials: Vec<String> = credentials
        .iter()
        .filter(|name| env(name).is_none_or(|value| value.is_empty()))
        .map(|name| (*name).clone())
        .collect();
    let mut result = CheckResult {
        credential_set: missing_credentials.len() < credentials.len(),
        missing_credentials,
        ..CheckResult::default()
    };
    let program = match (profile.kind, &profile.program) {
        (Kind::Cli, Some(program)) => program,
        (Kind::OpenaiChat, _) => {
            check_endpoint(profile, &env, timeout, &mut result);
            return result;
        }
        (Kind::Cli, None) => {
            result.detail = Some("the profile names no program".to_owned());
            return result;
        }
    };
    let path = env("PATH");
    let Some(program_path) = find_program(program, path.as_deref(), std::path::Path::new("/"))
    else {
        result.detail = Some(format!("`{program}` is not on PATH"));
        return result;
    };
    result.program_path = Some(program_path.clone());
    match version(&program_path, timeout) {
        Ok(version) => {
            result.available = true;
            result.version = version;
        }
        Err(detail) => result.detail = Some(detail),
    }
    result
}

/// Runs `program --version`; the first non-empty line of its output.
/// An endpoint is usable when `GET {base_url}/models` answers.
fn check_endpoint(
    profile: &Profile,
    env: &impl Fn(&str) -> Option<OsString>,
    timeout: Duration,
    result: &mut CheckResult,
) {
    let Some(base_url) = &profile.base_url else {
        result.detail = Some("the profile has no base_url".to_owned());
        return;
    };
    let key = profile
        .api_key_env
        .as_deref()
        .and_then(env)
        .map(|key| key.to_string_lossy().into_owned())
        .filter(|key| !key.is_empty());
    // `agents check` is synchronous; one small runtime for one request.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            result.detail = Some(format!("cannot start an HTTP client: {error}"));
            return;
        }
    };
    match runtime.block_on(crate::endpoint::models(base_url, key.as_deref(), timeout)) {
        Ok(models) => {
            result.available = true;
            result.detail = Some(if models.is_empty() {
                format!("{base_url} is reachable")
            } else {
                format!("{base_url} is reachable; models: {}", models.join(", "))
            });
        }
        Err(detail) => result.detail = Some(detail),
    }
}

fn version(program: &std::path::Path, timeout: Duration) -> Result<Option<String>, String> {
    let (reader, writer) =
        std::io::pipe().map_err(|error| format!("cannot create a pipe: {error}"))?;
    let stderr_writer = writer
        .try_clone()
        .map_err(|error| format!("cannot create a pipe: {error}"))?;
    #[expect(
        clippy::disallowed_methods,
        reason = "the executor is the crate that starts processes"
    )]
    let mut command = Command::new(program);
    command
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(stderr_writer)
        .process_group(0);
    let mut child = command
        .spawn()
        .map_err(|error| format!("cannot start `{}`: {error}", program.display()))?;
    // Drop our copies of the write end, or the reader never sees the end.
    drop(command);
    let pid = child.id();
    // A leader of its own group: a sweep must not take it for a stage's
    // leftover and reap it.
    register_live(pid);
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut output = Vec::new();
        let _ = reader.take(VERSION_OUTPUT_CAP).read_to_end(&mut output);
        let _ = sender.send(output);
    });

    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() >= deadline => break None,
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(error) => return Err(format!("cannot wait for `{}`: {error}", program.display())),
        }
    };
    // Whatever the outcome, nothing of the probe may keep running. The
    // leader is reaped only below, so its group id is still ours.
    signal_group(pid, Signal::SIGKILL);
    let _ = child.wait();
    unregister_live(pid);
    let Some(status) = status else {
        return Err(format!(
            "`{} --version` did not finish within {timeout:?}",
            program.display()
        ));
    };
    // The pipe closes when the group is dead; a descendant that left the
    // group could hold it, so the wait is bounded.
    let output = receiver
        .recv_timeout(Duration::from_secs(1))
        .unwrap_or_default();
    if !status.success() {
        return Err(format!(
            "`{} --version` failed ({status})",
            program.display()
        ));
    }
    // Some CLIs print warnings first (Codex: "WARNING: proceeding, even
    // though we could not create PATH aliases…"); the version is the first
    // other line with a digit in it.
    let text = String::from_utf8_lossy(&output);
    let lines = || text.lines().map(str::trim).filter(|line| !line.is_empty());
    Ok(lines()
        .find(|line| {
            !line.to_ascii_lowercase().starts_with("warning")
                && line.chars().any(|c| c.is_ascii_digit())
        })
        .or_else(|| lines().next())
        .map(str::to_owned))
}
