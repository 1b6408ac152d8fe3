//! `baton hook claude-code <event>` and `baton hook install claude-code`:
//! Claude Code sessions feeding the governance ledger of their `session_id`,
//! in the store of the project, with no server.
//!
//! Claude Code runs a command hook with the event's JSON on stdin; exit code
//! 2 blocks (for Stop and SubagentStop: the agent may not stop yet) and
//! stderr is fed back to the agent, so every failure here — a payload that
//! cannot be read, a store that cannot be opened — also exits 2 with a
//! clear message: a governance hook that fails open would prove nothing.

use std::path::{Path, PathBuf};

use baton_engine::governance::{self, Entry, Identity, Scope, ScopeKind};
use serde_json::Value;

use super::errors::chain;
use super::runtime::block_on;
use crate::args::state::{HookCommand, HookTarget};
use crate::{exit_code, output, settings};

mod install;

/// The commands counted as validation when `[governance] test_commands` is
/// not set.
pub(crate) const DEFAULT_TEST_COMMANDS: &[&str] = &[
    "cargo test",
    "cargo nextest",
    "pytest",
    "npm test",
    "pnpm test",
    "yarn test",
    "go test",
    "make test",
    "./scripts/test",
];

/// The profile name hooked sessions are recorded under.
const PROFILE: &str = "claude-code";

/// Runs a `baton hook` subcommand.
pub(crate) fn run(command: &HookCommand) -> u8 {
    match command {
        HookCommand::ClaudeCode { event } => {
            let mut stdin = String::new();
            if let Err(error) = std::io::Read::read_to_string(&mut std::io::stdin(), &mut stdin) {
                return block(&format!("cannot read the hook payload on stdin: {error}"));
            }
            match claude_code(event, &stdin) {
                Ok(None) => exit_code::SUCCESS,
                Ok(Some(reason)) => {
                    output::stderr_line(&reason);
                    exit_code::HOOK_BLOCKS
                }
                Err(why) => block(&why),
            }
        }
        HookCommand::Install {
            target: HookTarget::ClaudeCode,
        } => install::claude_code(&super::project_dir()),
    }
}

fn block(why: &str) -> u8 {
    output::stderr_line(&format!("baton hook error: {why}"));
    exit_code::HOOK_BLOCKS
}

/// Handles one event; `Ok(Some(reason))` blocks.
fn claude_code(event: &str, stdin: &str) -> Result<Option<String>, String> {
    let payload: Value = serde_json::from_str(stdin).map_err(|error| {
        format!("the hook payload on stdin is not JSON ({error}); baton hook claude-code expects the JSON Claude Code sends")
    })?;
    let session = payload
        .get("session_id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or("the hook payload has no session_id")?;
    let cwd = payload
        .get("cwd")
        .and_then(Value::as_str)
        .map_or_else(super::current_dir, PathBuf::from);
    let scope = Scope {
        kind: ScopeKind::Session,
        key: session.to_owned(),
    };
    let identity = Identity {
        profile: PROFILE.to_owned(),
        model: None,
        session: session.to_owned(),
    };
    let project = super::project_dir();
    match event {
        "PostToolUse" | "PostToolUseFailure" => {
            let failed = event == "PostToolUseFailure";
            let entries = tool_entries(&payload, &cwd, failed, &test_commands(&project)?);
            if entries.is_empty() {
                return Ok(None);
            }
            block_on(async {
                let store = open(&project).await?;
                let now = baton_engine::clock::now_ms();
                for entry in &entries {
                    governance::observe(&store, &scope, entry, &identity, now)
                        .await
                        .map_err(|error| chain(&error))?;
                }
                Ok(None)
            })
        }
        "Stop" | "SubagentStop" => block_on(async {
            let store = open(&project).await?;
            let report = governance::load(&store, &scope, &identity)
                .await
                .map_err(|error| chain(&error))?;
            let blockers = report.stop_blockers();
            if blockers.is_empty() {
                return Ok(None);
            }
            let mut reason = String::from("baton: not done yet —\n");
            for blocker in &blockers {
                reason.push_str(&format!("- {blocker}\n"));
            }
            reason.push_str("Run the tests that cover the edited files (and repair and re-review open findings) before stopping; `baton state show --session ");
            reason.push_str(session);
            reason.push_str("` shows the ledger.");
            Ok(Some(reason))
        }),
        // Other events carry nothing the ledger needs.
        _ => Ok(None),
    }
}

async fn open(project: &Path) -> Result<baton_store::Store, String> {
    let location = settings::store_location(project)?;
    crate::project::keep_state_out_of_git(location.is_in_project())?;
    location.open().await.map_err(|error| chain(&error))
}

/// `[governance] test_commands` from `baton.toml`, else the defaults.
fn test_commands(project: &Path) -> Result<Vec<String>, String> {
    let config = settings::agent_config(project)?;
    Ok(config.governance.test_commands.unwrap_or_else(|| {
        DEFAULT_TEST_COMMANDS
            .iter()
            .map(|c| (*c).to_owned())
            .collect()
    }))
}

/// The ledger entries one tool call makes.
fn tool_entries(payload: &Value, cwd: &Path, failed: bool, tests: &[String]) -> Vec<Entry> {
    let tool = payload
        .get("tool_name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let input = payload.get("tool_input").unwrap_or(&Value::Null);
    let file = || {
        input
            .get("file_path")
            .or_else(|| input.get("path"))
            .and_then(Value::as_str)
            .map(|path| absolute(cwd, path))
    };
    match tool {
        "Edit" | "Write" | "MultiEdit" | "NotebookEdit" => file()
            .map(|path| {
                let hash = std::fs::read(&path).map_or_else(
                    |_| "missing".to_owned(),
                    |b| baton_engine::create::sha256_hex(&b),
                );
                Entry::Edited {
                    path: path.to_string_lossy().into_owned(),
                    hash,
                }
            })
            .into_iter()
            .collect(),
        "Read" | "Grep" | "Glob" => file()
            .or_else(|| Some(cwd.to_path_buf()))
            .map(|path| Entry::Inspected {
                path: path.to_string_lossy().into_owned(),
            })
            .into_iter()
            .collect(),
        "Bash" => {
            let command = input
                .get("command")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if !is_test(command, tests) {
                return Vec::new();
            }
            let reported = payload
                .get("tool_response")
                .and_then(|r| r.get("exit_code"))
                .and_then(Value::as_i64)
                .and_then(|code| i32::try_from(code).ok());
            // Without a reported code, PostToolUseFailure means it failed.
            let exit_code = reported.unwrap_or(i32::from(failed));
            vec![Entry::Validated {
                command: command.to_owned(),
                exit_code,
                covered: vec![cwd.to_string_lossy().into_owned()],
            }]
        }
        _ => Vec::new(),
    }
}

/// Whether a shell command runs one of `tests`: some segment (split at
/// `&&`, `||`, `;` and `|`), after leading `NAME=value` assignments, starts
/// with a test command followed by the end or a space.
pub(crate) fn is_test(command: &str, tests: &[String]) -> bool {
    command
        .split(['&', '|', ';', '\n'])
        .map(|segment| {
            let mut rest = segment.trim();
            while let Some((word, tail)) = rest.split_once(' ')
                && word.contains('=')
                && !word.starts_with('=')
            {
                rest = tail.trim_start();
            }
            rest
        })
        .any(|segment| {
            tests.iter().any(|test| {
                segment
                    .strip_prefix(test.as_str())
                    .is_some_and(|tail| tail.is_empty() || tail.starts_with(char::is_whitespace))
            })
        })
}

/// `path` made absolute against `cwd`, with `.` and `..` resolved
/// lexically, so one file has one name in the ledger.
fn absolute(cwd: &Path, path: &str) -> PathBuf {
    baton_workflow::loader::normalize(&cwd.join(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_commands_are_recognised_in_compound_commands() {
        let tests: Vec<String> = DEFAULT_TEST_COMMANDS
            .iter()
            .map(|c| (*c).to_owned())
            .collect();
        for yes in [
            "cargo test",
            "cargo test -p core",
            "cd crates && cargo nextest run",
            "RUST_LOG=debug cargo test",
            "python -m x; pytest -q",
            "npm test 2>&1 | tail",
            "pnpm test --filter web",
            "yarn test",
            "make test",
            "CI=1 ./scripts/test",
        ] {
            assert!(is_test(yes, &tests), "{yes}");
        }
        for no in [
            "cargo testing",
            "echo cargo test-ish",
            "cargo build",
            "ls",
            "make testdata",
            "./scripts/tests",
        ] {
            assert!(!is_test(no, &tests), "{no}");
        }
    }

    #[test]
    fn paths_are_absolute_and_normal() {
        let cwd = Path::new("/p/q");
        assert_eq!(absolute(cwd, "src/../a.rs"), Path::new("/p/q/a.rs"));
        assert_eq!(absolute(cwd, "/x/./y"), Path::new("/x/y"));
    }
}
