//! `baton task …`: the task lifecycle of docs/tasks.md.

use clap::{Args, Subcommand};

use super::format::FormatArgs;

/// `baton task …`.
#[derive(Debug, Subcommand)]
pub(crate) enum TaskCommand {
    /// Create a task folder `tasks/<kebab-case-name>/` holding `task.json`.
    #[command(
        after_help = "The name is the description in kebab case; a taken name gets -2, -3, ….\nOptional phases run only when asked for: --decompose (sub-tasks), --design, --test-plan.\n\nExamples:\n  baton task new \"Add user auth\"                 # tasks/add-user-auth/\n  baton task new \"Split the importer\" --decompose\n  baton task new \"Add rate limits\" --design --test-plan --json"
    )]
    New(NewArgs),
    /// List the active tasks with their phase (`--archived`: the archived ones).
    #[command(
        after_help = "Examples:\n  baton task list\n  baton task list --archived\n  baton task list --json"
    )]
    List(ListArgs),
    /// Show a task's phase, the artifacts that signal it, what comes next and why.
    #[command(
        after_help = "An artifact counts only when it is non-empty and newer than the artifacts it depends on:\na BUG_REPORT.md older than IMPLEMENTATION.md does not advance the task.\n\nExamples:\n  baton task status                   # every active task\n  baton task status add-user-auth --json   # {task, phase, signal, next_phase, why}"
    )]
    Status(StatusArgs),
    /// Show the next phase of a task and the prompt its agent would get.
    #[command(
        after_help = "Examples:\n  baton task next add-user-auth\n  baton task next add-user-auth --json"
    )]
    Next(NameArgs),
    /// Run a task's remaining phases as a workflow, then act on its verdict.
    ///
    /// Each phase is an agent stage whose role (researcher, implementer,
    /// bug-finder, adversary, doc-reviewer, referee, …) maps to an agent
    /// profile in baton.toml ([agents.<role>], else [agents.default]). An
    /// artifact already present and fresh is not dispatched again. An
    /// interrupted run is resumed by the next `task run`.
    ///
    /// At the verdict, manual mode (the default) creates the fix, review
    /// and tie-break tasks and archives a task that passed; --autopilot
    /// creates nothing and stops for a person unless the verdict is a clean
    /// PASS. A decomposed task waits for its sub-tasks: manual mode leaves
    /// them to you, autopilot runs them first.
    #[command(
        after_help = "Examples:\n  baton task run add-user-auth\n  baton task run add-user-auth --autopilot\n  baton task run add-user-auth --json\n\nExit codes: 0 done (verdict acted on, or phases run), 1 no such task or an unreadable VERDICT.md / DECOMPOSITION.md, 2 a phase failed (run it again to resume), 3 another task run works on the task, 4 store unavailable, 5 a person must decide on the verdict, 6 waiting for sub-tasks."
    )]
    Run(RunArgs),
    /// Move a task to tasks/archive/ (it is never deleted).
    #[command(after_help = "Example:\n  baton task archive add-user-auth")]
    Archive(NameArgs),
}

/// `baton task new`.
#[derive(Debug, Args)]
pub(crate) struct NewArgs {
    /// What the task is about; its kebab case names the folder.
    pub(crate) description: String,
    /// Run Decomposition after Research: DECOMPOSITION.md's list becomes sub-tasks.
    #[arg(long)]
    pub(crate) decompose: bool,
    /// Run Design after Research.
    #[arg(long)]
    pub(crate) design: bool,
    /// Run Test design after Design (implies --design).
    #[arg(long)]
    pub(crate) test_plan: bool,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}

/// `baton task list`.
#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    /// List the archived tasks instead.
    #[arg(long)]
    pub(crate) archived: bool,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}

/// `baton task status`.
#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// The task (default: every active task).
    pub(crate) name: Option<String>,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}

/// A task name and a format.
#[derive(Debug, Args)]
pub(crate) struct NameArgs {
    /// The task's folder name (see `baton task list`).
    pub(crate) name: String,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}

/// `baton task run`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The task's folder name.
    pub(crate) name: String,
    /// Create no follow-up tasks: stop for a person at any verdict but a
    /// clean PASS. Sub-tasks of a decomposition are run too, then the parent.
    #[arg(long)]
    pub(crate) autopilot: bool,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}
