//! What some tests need from outside the repository — a PostgreSQL server,
//! the compat corpus, the agent CLIs' help texts, a browser, schemathesis —
//! and what happens when it is missing.
//!
//! A missing need fails the test with a message that says how to provide
//! it. It skips the test (saying so on stderr) only when `BATON_TEST_SKIP`
//! lists it: `./scripts/test` sets that, after saying which tests it skips
//! and why, when it cannot provide something outside CI. A plain `cargo
//! test` on a machine without PostgreSQL therefore fails loudly instead of
//! reporting tests as passed that never ran.

use std::path::PathBuf;

/// Something a test needs that the repository does not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// A PostgreSQL server: `BATON_TEST_DATABASE_URL`.
    Postgres,
    /// The reference corpus of workflows and outputs: `BATON_COMPAT_DIR`.
    Corpus,
    /// The agent CLIs' captured `--help` texts: `BATON_AGENT_CLIS_DIR`.
    AgentHelp,
    /// The pinned agent CLIs themselves: `BATON_TEST_AGENT_CLIS`.
    AgentClis,
    /// Chromium and playwright-core: `BATON_TEST_CHROMIUM`,
    /// `BATON_TEST_PLAYWRIGHT`.
    Browser,
    /// Schemathesis, the API contract tests' tool: `BATON_TEST_SCHEMATHESIS`.
    Schemathesis,
    /// cgroup v2, with the right to make cgroups beside the test's own.
    Cgroups,
}

impl Need {
    /// The word `BATON_TEST_SKIP` lists it by.
    #[must_use]
    pub fn word(self) -> &'static str {
        match self {
            Self::Postgres => "postgres",
            Self::Corpus => "corpus",
            Self::AgentHelp => "agent-help",
            Self::AgentClis => "agent-clis",
            Self::Browser => "browser",
            Self::Schemathesis => "schemathesis",
            Self::Cgroups => "cgroups",
        }
    }

    fn how_to_provide(self) -> &'static str {
        match self {
            Self::Postgres => {
                "set BATON_TEST_DATABASE_URL to a server the tests may create databases on, or run ./scripts/test, which starts one"
            }
            Self::Corpus => {
                "set BATON_COMPAT_DIR to the compat corpus (a directory holding workflows/)"
            }
            Self::AgentHelp => {
                "set BATON_AGENT_CLIS_DIR to the directory of the agent CLIs' --help texts"
            }
            Self::AgentClis => {
                "run ./scripts/test, which installs them, or set BATON_TEST_AGENT_CLIS to a directory holding claude, codex, gemini and opencode"
            }
            Self::Browser => {
                "run ./scripts/test, which installs them (scripts/lib/chromium.sh), or set BATON_TEST_CHROMIUM to a Chromium and BATON_TEST_PLAYWRIGHT to a node_modules directory holding playwright-core"
            }
            Self::Schemathesis => {
                "run ./scripts/test, which installs it (scripts/lib/schemathesis.sh), or set BATON_TEST_SCHEMATHESIS to its `st` program"
            }
            Self::Cgroups => {
                "run the tests where cgroup v2 is mounted and they may make cgroups beside their own (as root, or in a systemd unit with Delegate=yes)"
            }
        }
    }
}

/// Whether `BATON_TEST_SKIP` (a comma-separated list) names `need`.
fn skipped(need: Need) -> bool {
    std::env::var("BATON_TEST_SKIP")
        .unwrap_or_default()
        .split(',')
        .any(|word| word.trim() == need.word())
}

/// Called by a test whose `need` is missing (`what` says what was looked
/// for): returns, after saying so on stderr, when `BATON_TEST_SKIP` lists
/// the need; panics with how to provide it otherwise.
///
/// # Panics
///
/// Unless `BATON_TEST_SKIP` lists `need`.
pub fn missing(need: Need, what: &str) {
    assert!(
        skipped(need),
        "this test needs {what}: {}; or set BATON_TEST_SKIP={} to skip the tests that need it",
        need.how_to_provide(),
        need.word()
    );
    #[expect(clippy::print_stderr, reason = "a skipped test must be seen")]
    {
        eprintln!(
            "SKIPPED: {what} is missing and BATON_TEST_SKIP lists {}",
            need.word()
        );
    }
}

/// `BATON_TEST_DATABASE_URL`, or `None` when it is unset and
/// `BATON_TEST_SKIP` lists `postgres`.
///
/// # Panics
///
/// When it is unset and not to be skipped.
#[must_use]
pub fn postgres_url() -> Option<String> {
    match std::env::var("BATON_TEST_DATABASE_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            missing(
                Need::Postgres,
                "a PostgreSQL server (BATON_TEST_DATABASE_URL)",
            );
            None
        }
    }
}

/// `dir` when `present` says it holds what it should, else `None` after
/// [`missing`].
pub(crate) fn dir_or_missing(
    need: Need,
    dir: PathBuf,
    present: impl Fn(&PathBuf) -> bool,
) -> Option<PathBuf> {
    if present(&dir) {
        return Some(dir);
    }
    missing(
        need,
        &format!("{} (not found at {})", need_name(need), dir.display()),
    );
    None
}

fn need_name(need: Need) -> &'static str {
    match need {
        Need::Postgres => "a PostgreSQL server",
        Need::Corpus => "the compat corpus",
        Need::AgentHelp => "the agent CLIs' --help texts",
        Need::AgentClis => "the pinned agent CLIs",
        Need::Browser => "Chromium and playwright-core",
        Need::Schemathesis => "schemathesis",
        Need::Cgroups => "a cgroup v2 hierarchy the tests may write to",
    }
}
