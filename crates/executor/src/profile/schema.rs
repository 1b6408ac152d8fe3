//! The shape of one profile, as written in TOML.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

/// One agent profile. Field names are the TOML keys.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Profile {
    /// What the profile drives; a CLI unless stated.
    pub kind: Kind,
    /// The profile this one was merged over (kept for display).
    pub extends: Option<String>,
    /// The program to run (CLI profiles).
    pub program: Option<String>,
    /// Fixed arguments, always passed. They may use `{cwd}`, `{script}`
    /// (the prompt text, for the shell profile) and `{prompt_file}`.
    pub args: Vec<String>,
    /// Arguments added after `args`, the access arguments and the options,
    /// so a project can add flags without copying the built-in list.
    pub args_extra: Vec<String>,
    /// How the prompt reaches the program.
    pub prompt: Prompt,
    /// The working directory: `{project}` (the project directory, or the
    /// stage's worktree; `{worktree}` is another name for it) unless set.
    /// An access rule's own `cwd` wins.
    pub cwd: Option<String>,
    /// Variables copied from baton's environment; everything else is
    /// cleared. A name ending in `*` passes every variable with that
    /// prefix (`AWS_*`).
    pub env_passthrough: Vec<String>,
    /// Passed through as well, so a project can add variables without
    /// copying the built-in list.
    pub env_passthrough_extra: Vec<String>,
    /// Variables set explicitly.
    pub env: BTreeMap<String, String>,
    /// Default limits.
    pub limits: Limits,
    /// At most this many attempts of a run use the profile at once (a
    /// provider's concurrency limit); others wait for a free slot.
    pub max_concurrent: Option<usize>,
    /// Retries of an attempt whose agent reported a rate limit or a server
    /// error.
    pub retry: Retry,
    /// When an attempt counts as successful.
    pub success: Success,
    /// Features a stage may rely on.
    pub capabilities: Vec<Capability>,
    /// How each `agent.access` maps to the CLI's own permission system:
    /// `read-only`, `read-write` and `worktree` (a read-write stage in a
    /// worktree of its own).
    pub access: BTreeMap<AccessMode, AccessRule>,
    /// How a stage's `agent.tools` reach a CLI that takes no list of
    /// allowed tools as a flag (see [`ToolRule`]).
    pub tools: Option<ToolRule>,
    /// Hook integration, for CLIs that have hooks.
    pub hooks: Option<Hooks>,
    /// How the CLI continues a session it reported; used only while the
    /// profile declares the `resume` capability.
    pub resume: Option<ResumeRule>,
    /// Optional flags by name, each an argv template rendered only when the
    /// request sets that option (see [`command_line`](super::command_line)).
    pub options: BTreeMap<String, Vec<String>>,
    /// How to read the output: `format` (`json`, `jsonl` or `text`) and the
    /// extraction rules of docs/agents.md, kept as written for the
    /// output parser.
    pub output: Option<toml::Table>,
    /// The endpoint of an `openai-chat` profile.
    pub base_url: Option<String>,
    /// The model an `openai-chat` profile asks for, unless the role or the
    /// stage names one.
    pub model: Option<String>,
    /// The variable holding the API key of an `openai-chat` profile
    /// (optional: local servers often need none).
    pub api_key_env: Option<String>,
}

/// What a profile drives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A command-line program.
    #[default]
    Cli,
    /// An OpenAI-compatible chat-completions endpoint.
    OpenaiChat,
}

/// What a stage may change, as far as its agent's permissions go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AccessMode {
    /// The repository is read-only; the run's workspace is writable.
    ReadOnly,
    /// The repository and the workspace are writable.
    ReadWrite,
    /// A read-write stage in a git worktree of its own.
    Worktree,
}

impl AccessMode {
    /// The TOML key.
    pub fn as_str(self) -> &'static str {
        match self {
            AccessMode::ReadOnly => "read-only",
            AccessMode::ReadWrite => "read-write",
            AccessMode::Worktree => "worktree",
        }
    }
}

/// How one access mode launches the CLI. Every text may use `{workspace}`
/// (the run's workspace), `{project}` (the project directory, or the
/// stage's worktree; also spelled `{worktree}`), `{workspace_rel}` (the
/// workspace relative to the working directory) and `{file:NAME}` (the path
/// of the file `files.NAME` is written to), with filters `|json`, `|regex`
/// and `|toml` that escape a value for those syntaxes (they chain:
/// `{workspace|json|regex|toml}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AccessRule {
    /// The working directory, instead of the profile's.
    pub cwd: Option<String>,
    /// Arguments added after the profile's `args`.
    pub args: Vec<String>,
    /// Tools added to the `allowed_tools` option (with the stage's own).
    pub tools: Vec<String>,
    /// Variables set for the CLI.
    pub env: BTreeMap<String, String>,
    /// Files written beside the attempt's prompt before the launch (a
    /// policy file the CLI is pointed at), by name.
    pub files: BTreeMap<String, String>,
    /// Paths in the repository (relative to its top; a directory ends with
    /// `/`) that the CLI keeps for itself, such as opencode's
    /// `.git/opencode`: a contained read-only stage that changes them does
    /// not fail for it (its changes are discarded like any other).
    pub own_files: Vec<String>,
}

/// How a stage's `agent.tools` (the workflow's tool names: `Bash`, `Read`,
/// `Grep`, …) become a CLI's own permissions: the rule allows the CLI's
/// tools for the names listed and refuses those for the other names it
/// knows. Its texts render as an access rule's do, with `{allowed}` and
/// `{denied}` (the CLI's tool names; `|json` makes a JSON array, else they
/// are joined with commas) and `{decisions}` (a JSON object, each CLI tool
/// name to `"allow"` or `"deny"`). It applies when a stage lists tools
/// (with an access request, which gives its files a place).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolRule {
    /// The CLI's tool name (or names) for each workflow tool name.
    pub names: BTreeMap<String, ToolNames>,
    /// Workflow tool names whose use the stage's access decides instead
    /// (the editing tools): listed or not, the rule leaves them alone.
    pub by_access: Vec<String>,
    /// Arguments added after the access rule's.
    pub args: Vec<String>,
    /// Variables set for the CLI.
    pub env: BTreeMap<String, String>,
    /// Files written beside the attempt's prompt before the launch, by name
    /// (`{file:NAME}` is the path).
    pub files: BTreeMap<String, String>,
}

/// One CLI tool name, or several.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum ToolNames {
    /// One name.
    One(String),
    /// Several names.
    Many(Vec<String>),
}

impl ToolNames {
    /// The names.
    pub fn names(&self) -> &[String] {
        match self {
            ToolNames::One(name) => std::slice::from_ref(name),
            ToolNames::Many(names) => names,
        }
    }
}

impl ToolRule {
    /// The CLI tool names the rule allows and those it refuses for a
    /// stage listing `tools`, each sorted and without repeats.
    pub fn decide(&self, tools: &[String]) -> (Vec<String>, Vec<String>) {
        let mut allowed = std::collections::BTreeSet::new();
        let mut denied = std::collections::BTreeSet::new();
        for (tool, names) in &self.names {
            let target = if tools.contains(tool) {
                &mut allowed
            } else {
                &mut denied
            };
            target.extend(names.names().iter().cloned());
        }
        // A CLI tool two workflow names share is allowed if either is listed.
        denied.retain(|name| !allowed.contains(name));
        (allowed.into_iter().collect(), denied.into_iter().collect())
    }

    /// The listed tools the rule can neither pass nor leave to the access.
    pub fn unknown<'t>(&self, tools: &'t [String]) -> Vec<&'t str> {
        tools
            .iter()
            .filter(|tool| !self.names.contains_key(*tool) && !self.by_access.contains(tool))
            .map(String::as_str)
            .collect()
    }
}

/// How a CLI continues one of its sessions (docs/agents.md, "Sessions").
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ResumeRule {
    /// Arguments added after all the others (and before the prompt's own
    /// flag, so that a subcommand such as Codex's `resume` follows the
    /// options it belongs after); `{session}` is the session's id.
    pub args: Vec<String>,
    /// Texts of the CLI's own error when it has no session of that id,
    /// looked for in what it printed on stderr: a resume that fails so
    /// runs again once in a fresh session.
    pub not_found: Vec<String>,
}

/// How the prompt is delivered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Prompt {
    /// The channel.
    pub via: PromptVia,
    /// For `arg`: the flag before the prompt (none: positional). For `file`:
    /// the flag before the file's path (none: positional). For `stdin`: an
    /// argument, last, that tells the program to read its stdin (`-`).
    pub flag: Option<String>,
}

/// The channel a prompt takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PromptVia {
    /// Written to stdin (no argv length limit; the preferred channel).
    #[default]
    Stdin,
    /// Passed as an argument.
    Arg,
    /// Written to a file whose path is passed.
    File,
    /// Not passed (the shell profile runs the prompt as its script).
    None,
}

/// Default limits of a profile; a stage may set its own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Wall-clock limit.
    #[serde(deserialize_with = "duration")]
    pub wall: Option<Duration>,
    /// Limit on time without output.
    #[serde(deserialize_with = "duration")]
    pub idle: Option<Duration>,
    /// Time between SIGTERM and SIGKILL.
    #[serde(deserialize_with = "duration")]
    pub kill_grace: Option<Duration>,
}

/// Retries of an attempt whose agent reported a rate limit or a server
/// error (429, 5xx, "overloaded"): the CLIs' own retries give up within
/// seconds or minutes, a provider's limit can last longer, and a run of
/// many stages should not fail for one busy minute.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Retry {
    /// How many times (default 2; 0 never retries).
    pub attempts: Option<u32>,
    /// The wait before the first retry (default 10s), doubled for each
    /// next one; a longer wait that the agent's error asks for wins.
    #[serde(deserialize_with = "duration")]
    pub delay: Option<Duration>,
    /// The longest wait (default 2m).
    #[serde(deserialize_with = "duration")]
    pub max_delay: Option<Duration>,
}

impl Profile {
    /// How the profile continues a session, when it declares the `resume`
    /// capability and says how.
    pub fn resumes(&self) -> Option<&ResumeRule> {
        let rule = self.resume.as_ref()?;
        (self.capabilities.contains(&Capability::Resume) && !rule.args.is_empty()).then_some(rule)
    }
}

impl Retry {
    /// How many retries an attempt gets.
    pub fn attempts(&self) -> u32 {
        self.attempts.unwrap_or(2)
    }

    /// The wait before retry number `retry` (0 for the first), given the
    /// wait the agent's error asked for.
    pub fn wait(&self, retry: u32, asked: Option<Duration>) -> Duration {
        let max = self.max_delay.unwrap_or(Duration::from_secs(120));
        let backoff = self
            .delay
            .unwrap_or(Duration::from_secs(10))
            .saturating_mul(2u32.saturating_pow(retry));
        backoff.max(asked.unwrap_or_default()).min(max)
    }
}

/// When an attempt counts as successful (besides the output contract).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Success {
    /// Exit codes that mean success.
    pub exit_codes: Vec<i32>,
    /// The value the output's error flag must have, when the output has one.
    pub is_error: Option<bool>,
}

impl Default for Success {
    fn default() -> Success {
        Success {
            exit_codes: vec![0],
            is_error: None,
        }
    }
}

/// A feature a stage may need from its agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    /// Enforces a JSON Schema on the final answer.
    JsonSchema,
    /// Stops at a spending limit.
    Budget,
    /// Resumes a session.
    Resume,
    /// Runs hooks baton installs.
    Hooks,
    /// Reaches MCP servers.
    Mcp,
}

/// Hook integration.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hooks {
    /// Which adapter writes the CLI's hook configuration.
    pub adapter: String,
}

/// Reads `"90s"`, `"15m"`, `"1h30m"`, `"500ms"` or a number of seconds.
fn duration<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Duration>, D::Error> {
    struct Visitor;

    impl serde::de::Visitor<'_> for Visitor {
        type Value = Duration;

        fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            formatter
                .write_str("a duration such as 90s, 15m, 1h30m or 500ms, or a number of seconds")
        }

        fn visit_u64<E: serde::de::Error>(self, seconds: u64) -> Result<Duration, E> {
            Ok(Duration::from_secs(seconds))
        }

        fn visit_i64<E: serde::de::Error>(self, seconds: i64) -> Result<Duration, E> {
            u64::try_from(seconds)
                .map(Duration::from_secs)
                .map_err(|_| E::custom("a duration cannot be negative"))
        }

        fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Duration, E> {
            parse_duration(text).ok_or_else(|| {
                E::custom(format!(
                    "invalid duration `{text}`: expected a number with a unit, such as 90s, 15m, 1h30m or 500ms"
                ))
            })
        }
    }

    deserializer.deserialize_any(Visitor).map(Some)
}

/// Parses a sequence of `<number><unit>` with units `ms`, `s`, `m`, `h`
/// (`90s`, `1h30m`, `500ms`).
pub fn parse_duration(text: &str) -> Option<Duration> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let number: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let (unit, length) = if rest.starts_with("ms") {
            (Duration::from_millis(1), 2)
        } else if rest.starts_with('s') {
            (Duration::from_secs(1), 1)
        } else if rest.starts_with('m') {
            (Duration::from_secs(60), 1)
        } else if rest.starts_with('h') {
            (Duration::from_secs(3600), 1)
        } else {
            return None;
        };
        total = total.checked_add(unit.checked_mul(u32::try_from(number).ok()?)?)?;
        rest = &rest[length..];
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("15m"), Some(Duration::from_secs(900)));
        assert_eq!(parse_duration("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        for bad in ["", "5", "m", "5x", "-5s", "1.5h"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }
}
