//! `baton state …` and `baton hook …` arguments.

use clap::{ArgGroup, Args, Subcommand, ValueEnum};

use super::format::FormatArgs;

/// `baton state …`.
#[derive(Debug, Subcommand)]
pub(crate) enum StateCommand {
    /// The current stage, what may follow, freshness, findings and the ledger.
    #[command(
        after_help = "Examples:\n  baton state show --session 3f2c…      # a hooked Claude Code session\n  baton state show --run RUN --json\n  baton state show --task add-user-auth"
    )]
    Show(ScopeFormatArgs),
    /// Exit non-zero when a rule is violated, listing every violated rule.
    ///
    /// Violations are the rules the ledger broke (an edit before a plan, a
    /// self-review, a third attempt), validation that is stale after the
    /// last edit or failed, and findings open or repaired without re-review.
    #[command(
        after_help = "Examples:\n  baton state check --session 3f2c…\n  baton state check --run RUN --json\n\nExit codes: 0 no rule violated, 3 rules violated (listed), 4 store unavailable."
    )]
    Check(ScopeFormatArgs),
    /// Append an event to a ledger, if the governance rules allow it.
    ///
    /// The event is checked against the state folded from the ledger; a
    /// refused event is not written, and the reason is printed.
    #[command(
        after_help = "Examples:\n  baton state record --task t clarified --note \"scope agreed\"\n  baton state record --task t inspected src/lib.rs\n  baton state record --task t planned --intent \"cargo test -p core\"\n  baton state record --task t edited src/lib.rs          # hash read from the file\n  baton state record --task t validated --command \"cargo test\" --exit-code 0 --covers src\n  baton state record --task t reviewed --reviewer codex --finding \"leaks a handle\"\n  baton state record --task t repaired 0\n  baton state record --task t re-reviewed 0 --reviewer codex --resolved\n  baton state record --task t released\n  baton state record --task t closed --proven \"tests pass\" --not-proven \"load\" \\\n      --residual-risk low --next-owner maintainers\n\nExit codes: 0 recorded, 2 usage error (a file to hash is missing), 3 refused by a rule (nothing written), 4 store unavailable."
    )]
    Record(RecordArgs),
    /// The workflow_state_summary object (docs/governance.md), as JSON or text.
    #[command(
        after_help = "Example:\n  baton state summary --session 3f2c… --json | jq .validation_freshness\n\nThe JSON's shape is docs/schemas/workflow-state-summary.schema.json."
    )]
    Summary(ScopeFormatArgs),
    /// Every ledger: its kind, key and number of events.
    #[command(after_help = "Example:\n  baton state list --json")]
    List(FormatArgs),
}

/// One of `--run`, `--task`, `--session`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("scope").required(true).args(["run", "task", "session"])))]
pub(crate) struct ScopeArgs {
    /// A workflow run's ledger.
    #[arg(long, value_name = "RUN_ID")]
    pub(crate) run: Option<String>,
    /// A task's ledger.
    #[arg(long, value_name = "NAME")]
    pub(crate) task: Option<String>,
    /// A free agent session's ledger (a Claude Code `session_id`).
    #[arg(long, value_name = "ID")]
    pub(crate) session: Option<String>,
}

/// A scope and a format.
#[derive(Debug, Args)]
pub(crate) struct ScopeFormatArgs {
    #[command(flatten)]
    pub(crate) scope: ScopeArgs,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}

/// `baton state record`.
#[derive(Debug, Args)]
pub(crate) struct RecordArgs {
    #[command(flatten)]
    pub(crate) scope: ScopeArgs,
    /// Who acts: the agent profile (default: the user running baton).
    #[arg(long = "as", value_name = "PROFILE", global = true)]
    pub(crate) as_profile: Option<String>,
    /// Who acts: the model, when one is configured.
    #[arg(long, global = true)]
    pub(crate) model: Option<String>,
    /// Who acts: the session (default: the session of --session, else "cli").
    #[arg(long = "actor-session", value_name = "ID", global = true)]
    pub(crate) actor_session: Option<String>,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
    /// The event.
    #[command(subcommand)]
    pub(crate) event: RecordEvent,
}

/// A reviewer's identity.
#[derive(Debug, Args)]
pub(crate) struct ReviewerArgs {
    /// The reviewer's agent profile.
    #[arg(long)]
    pub(crate) reviewer: String,
    /// The reviewer's model.
    #[arg(long)]
    pub(crate) reviewer_model: Option<String>,
    /// The reviewer's session.
    #[arg(long, default_value = "")]
    pub(crate) reviewer_session: String,
}

/// The events `record` appends (the governance state machine's events).
#[derive(Debug, Subcommand)]
pub(crate) enum RecordEvent {
    /// The request is clarified.
    #[command(
        after_help = "Example:\n  baton state record --task t clarified --note \"scope agreed\""
    )]
    Clarified {
        /// What was settled.
        #[arg(long)]
        note: Option<String>,
    },
    /// A file was inspected.
    #[command(after_help = "Example:\n  baton state record --task t inspected src/lib.rs")]
    Inspected {
        /// The file.
        path: String,
    },
    /// A plan, with how the work will be validated.
    #[command(
        after_help = "Example:\n  baton state record --task t planned --intent \"cargo test -p core\""
    )]
    Planned {
        /// The validation intent.
        #[arg(long)]
        intent: String,
    },
    /// A file was edited; its content hash is read from the file unless given.
    #[command(after_help = "Example:\n  baton state record --task t edited src/lib.rs")]
    Edited {
        /// The file.
        path: String,
        /// The content hash (hex SHA-256).
        #[arg(long)]
        hash: Option<String>,
    },
    /// A validation command ran.
    #[command(
        after_help = "Example:\n  baton state record --task t validated --command \"cargo test\" --exit-code 0 --covers src"
    )]
    Validated {
        /// The command.
        #[arg(long)]
        command: String,
        /// Its exit code; 0 passes.
        #[arg(long, allow_hyphen_values = true)]
        exit_code: i32,
        /// A path it covers (repeatable; none covers every path).
        #[arg(long = "covers", value_name = "PATH")]
        covered: Vec<String>,
    },
    /// A review by someone other than the owner, with its findings.
    #[command(
        after_help = "Example:\n  baton state record --task t reviewed --reviewer codex --finding \"leaks a handle\""
    )]
    Reviewed {
        #[command(flatten)]
        reviewer: ReviewerArgs,
        /// A finding (repeatable); findings are numbered from 0 in order.
        #[arg(long = "finding", value_name = "TEXT")]
        findings: Vec<String>,
    },
    /// A finding was repaired; it then needs a re-review.
    #[command(after_help = "Example:\n  baton state record --task t repaired 0")]
    Repaired {
        /// The finding's number.
        finding: usize,
    },
    /// A re-review of a repaired finding.
    #[command(
        after_help = "Example:\n  baton state record --task t re-reviewed 0 --reviewer codex --resolved"
    )]
    ReReviewed {
        /// The finding's number.
        finding: usize,
        #[command(flatten)]
        reviewer: ReviewerArgs,
        /// The repair resolves the finding.
        #[arg(
            long,
            conflicts_with = "rejected",
            required_unless_present = "rejected"
        )]
        resolved: bool,
        /// The repair does not resolve it; the finding is open again.
        #[arg(long)]
        rejected: bool,
    },
    /// New evidence or a changed route for a path that failed twice.
    #[command(
        after_help = "Example:\n  baton state record --task t new-evidence src/lib.rs --note \"the flaky test is pinned\""
    )]
    NewEvidence {
        /// The path.
        path: String,
        /// What is new.
        #[arg(long)]
        note: String,
    },
    /// The work is released.
    #[command(after_help = "Example:\n  baton state record --task t released")]
    Released,
    /// The work is handed to its next owner.
    #[command(
        after_help = "Example:\n  baton state record --task t handed-off --next-owner maintainers"
    )]
    HandedOff {
        /// The next owner.
        #[arg(long)]
        next_owner: String,
    },
    /// The work is closed with its statement.
    #[command(
        after_help = "Example:\n  baton state record --task t closed --proven \"tests pass\" --not-proven \"load\" --residual-risk low --next-owner maintainers"
    )]
    Closed {
        /// What the evidence proves.
        #[arg(long)]
        proven: String,
        /// What it does not prove.
        #[arg(long)]
        not_proven: String,
        /// The risk that remains.
        #[arg(long)]
        residual_risk: String,
        /// Who owns what comes next.
        #[arg(long)]
        next_owner: String,
    },
}

/// `baton hook …`.
#[derive(Debug, Subcommand)]
pub(crate) enum HookCommand {
    /// Handle one Claude Code hook event: the hook's JSON is read on stdin.
    ///
    /// PostToolUse records Edit/Write/MultiEdit as edits (paths and content
    /// hashes), Read/Grep/Glob as inspections, and Bash commands that match
    /// the test commands as validations, in the ledger of the payload's
    /// session_id. Stop and SubagentStop exit 2 with the reason on stderr
    /// when validation is stale after an edit or findings are open, which
    /// makes Claude continue instead of stopping. Other events are accepted
    /// and ignored.
    #[command(
        name = "claude-code",
        after_help = "Installed by `baton hook install claude-code`.\n\nExample (by hand):\n  echo '{\"session_id\":\"s\",\"hook_event_name\":\"Stop\",\"cwd\":\".\"}' | baton hook claude-code Stop\n\nExit codes: 0 recorded or allowed, 2 blocked (the reason is on stderr) or the payload could not be handled."
    )]
    ClaudeCode {
        /// The hook event as Claude Code spells it: PostToolUse, Stop, SubagentStop, …
        event: String,
    },
    /// Write baton's hooks into .claude/settings.json (merged, idempotent).
    #[command(
        after_help = "Example:\n  baton hook install claude-code    # prints the hooks it wrote\n\nExit codes: 0 written (or already there), 2 the settings file is not valid JSON."
    )]
    Install {
        /// The agent CLI.
        target: HookTarget,
    },
}

/// Agent CLIs with hooks baton plugs into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum HookTarget {
    /// Claude Code.
    ClaudeCode,
}
