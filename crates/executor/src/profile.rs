//! Agent profiles: how to drive each coding-agent CLI.
//!
//! A [`Profile`] says which program to run, with which fixed arguments, how
//! the prompt gets in (stdin, an argument, or a file), which optional flags
//! exist and how they render, which environment variables pass through,
//! the default limits, how the output is read, and how a stage's access
//! maps onto the CLI's own permissions (docs/agents.md). Profiles are data,
//! in TOML: the built-in ones ship in `profile/builtin.toml` (claude, codex,
//! gemini, aider, opencode, goose, and `local-llm`, which is an
//! OpenAI-compatible endpoint rather than a CLI), and `baton.toml`
//! overrides or extends them:
//!
//! ```toml
//! [agents.default]
//! profile = "claude"
//! model = "sonnet"
//!
//! [agents.reviewer]
//! profile = "codex"
//!
//! [profiles.claude]            # merged over the built-in claude
//! limits = { wall = "30m" }
//!
//! [profiles.claude-bedrock]
//! extends = "claude"
//! env = { CLAUDE_CODE_USE_BEDROCK = "1" }
//! ```
//!
//! [`Config`] loads and merges those tables and resolves a role to a
//! profile and model; [`command_line`] renders a profile and an
//! [`AgentRequest`] into the argv, stdin and prompt file of one launch;
//! [`check()`] answers `baton agents check` (installed? version? credentials
//! missing?).
//!
//! [`command_line`] refuses profiles that are not CLIs: an `openai-chat`
//! profile is driven over HTTP by [`crate::endpoint`], and `agents check`
//! asks its server for `/models`. [`parse_usage`] reads tokens and cost
//! from an attempt's output by the profile's `[output]` rules.

mod check;
mod config;
mod failure;
mod render;
mod schema;
pub mod transcript;
mod usage;

pub use check::{CheckResult, VERSION_TIMEOUT, check, check_with};
pub use config::{Agent, AgentChoice, Config, Governance, Price, SelfReview};
pub use failure::{parse_error, transient};
pub use render::{
    AccessRequest, AgentRequest, OptionValue, ProcessCommand, command_line, unsupported_options,
};
pub use schema::{
    AccessMode, AccessRule, Capability, Hooks, Kind, Limits, Profile, Prompt, PromptVia,
    ResumeRule, Retry, Success, ToolNames, ToolRule, parse_duration,
};
pub use usage::{Usage, parse_usage, reports_cost};

use std::path::PathBuf;

/// Why profiles could not be loaded or used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `baton.toml` is not valid TOML.
    #[error("cannot parse the agent settings in baton.toml")]
    Toml {
        /// The parser's error, with line and column.
        #[source]
        source: toml::de::Error,
    },

    /// A table under `[profiles]` or `[agents]` is not a table.
    #[error("`{key}` in baton.toml must be a table")]
    NotATable {
        /// The dotted key.
        key: String,
    },

    /// A profile's fields do not deserialize.
    #[error("invalid profile `{name}`")]
    Invalid {
        /// The profile.
        name: String,
        /// What was wrong, with the field.
        #[source]
        source: toml::de::Error,
    },

    /// A profile lacks a field its kind requires.
    #[error("profile `{name}` has no `{field}`")]
    MissingField {
        /// The profile.
        name: String,
        /// The missing field.
        field: &'static str,
    },

    /// An `extends` or an `[agents.*]` entry names no known profile.
    #[error("unknown profile `{name}` (used by {used_by})")]
    UnknownProfile {
        /// The name that was not found.
        name: String,
        /// Where it was referenced.
        used_by: String,
    },

    /// Profiles extend each other in a circle.
    #[error("profiles extend each other in a cycle: {cycle}")]
    ExtendsCycle {
        /// The cycle, `a -> b -> a`.
        cycle: String,
    },

    /// An `[agents.*]` entry does not deserialize.
    #[error("invalid agent settings `[agents.{role}]`")]
    InvalidAgent {
        /// The role.
        role: String,
        /// What was wrong.
        #[source]
        source: toml::de::Error,
    },

    /// Neither `[agents.<role>]` nor `[agents.default]` names a profile.
    #[error(
        "no agent profile for role `{role}`: set `[agents.{role}]` or `[agents.default]` in baton.toml"
    )]
    NoAgent {
        /// The role.
        role: String,
    },

    /// The profile is not a CLI (for example `kind = "openai-chat"`).
    #[error("profile `{name}` is not a command-line agent")]
    NotACommand {
        /// The profile.
        name: String,
    },

    /// The prompt goes into a file but the request names none.
    #[error("profile `{name}` passes the prompt in a file, but no prompt file was given")]
    NoPromptFile {
        /// The profile.
        name: String,
    },

    /// A request asks to continue a session, and the profile cannot.
    #[error(
        "profile `{name}` cannot continue a session: it needs the `resume` capability and `[profiles.{name}.resume] args`"
    )]
    CannotResume {
        /// The profile.
        name: String,
    },

    /// The prompt file path is not valid UTF-8 and cannot be an argument.
    #[error("the prompt file path {path} is not valid UTF-8")]
    NonUtf8Path {
        /// The path.
        path: PathBuf,
    },
}
