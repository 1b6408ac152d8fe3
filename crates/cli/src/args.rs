//! The command line, as clap sees it. Nothing here is interpreted.

use clap::{Args, Parser, Subcommand};

use crate::exit_code;
use deferred::Deferred;

pub(crate) use format::{CompileFormat, Format, FormatArgs};

pub(crate) mod agents;
pub(crate) mod check;
mod deferred;
pub(crate) mod driver;
mod format;
pub(crate) mod init;
pub(crate) mod queue;
pub(crate) mod serve;
pub(crate) mod task;
pub(crate) mod worktree;

pub(crate) mod state;

/// baton runs multi-step AI-agent work on software projects: workflows of
/// stages compiled to a DAG and carried out by deterministic code.
#[derive(Debug, Parser)]
#[command(name = "baton", version, after_help = exit_code::HELP, propagate_version = true)]
pub(crate) struct Cli {
    /// The project to work on (default: the nearest directory up from here
    /// holding .baton/ or baton.toml, else the git root, else here; or
    /// $BATON_PROJECT).
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) project: Option<std::path::PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Parse a workflow and show its stages (includes expanded).
    #[command(
        after_help = "Examples:\n  baton parse workflows/code/ci-debug.yaml\n  baton parse workflows/code/ci-debug.yaml --json\n\nExit codes: 0 the workflow parses, 1 it does not, 2 usage error."
    )]
    Parse(Deferred<FileArgs>),

    /// Check a workflow or fragment for errors and likely mistakes.
    ///
    /// Reports the reference engine's rules (includes exist, the file parses,
    /// undeclared {variables}, a queue fan-out needs a script) and baton's own
    /// (unknown keys, unquoted placeholders in scripts, writes_to outside the
    /// workspace, read-only agents with editing tools, unused parameters,
    /// everything compile would reject).
    #[command(
        after_help = "Examples:\n  baton lint workflows/code/open-pr.yaml\n  baton lint workflows/shared/plan-critic.yaml --format json\n  baton lint workflows/code/open-pr.yaml --strict   # warnings fail too\n\nExit codes: 0 valid, 1 invalid (with --strict: any warning), 2 usage error."
    )]
    Lint(Deferred<LintArgs>),

    /// Start using baton here: a baton.toml mapping roles to the agent CLIs on PATH, and a starter workflow.
    ///
    /// Finds the agent CLIs the built-in profiles drive (Claude Code, Codex,
    /// Gemini CLI, opencode, Aider, Goose) as `baton agents check` does, says
    /// what each still needs, and writes `baton.toml` with only a role →
    /// profile map (the profiles stay built in, so a later baton's defaults
    /// apply) and `workflows/hello.yaml`, one agent stage that writes a file.
    /// Existing files are kept unless --force.
    #[command(
        after_help = "Examples:\n  baton init\n  baton init --force          # rewrite baton.toml and workflows/hello.yaml\n  baton init --format json\n\nExit codes: 0 done (existing files kept are said so), 2 usage error or a file cannot be written."
    )]
    Init(Deferred<init::InitArgs>),

    /// Check that a workflow can run here: lint it, and check every agent it needs.
    ///
    /// Lints the workflow (errors fail, warnings are shown; --strict makes
    /// them fail too), then resolves every agent role its stages and
    /// validators use to a profile in baton.toml and runs the check `baton
    /// agents check` makes on each (`--version`, or the endpoint's
    /// `/models`), naming the stage, role and what is missing. Nothing runs
    /// and nothing is recorded.
    #[command(
        after_help = "Examples:\n  baton check workflows/hello.yaml\n  baton check wf.yaml --params pr_number=42 --strict\n  baton check wf.yaml --probe --timeout 30s   # also ask each profile for a one-word answer\n  baton check wf.yaml --format json\n\nExit codes: 0 ready, 1 invalid workflow (with --strict: any warning), 2 usage error, 3 an agent the workflow needs cannot start here."
    )]
    Check(Deferred<check::CheckArgs>),

    /// Compile a workflow into its execution plan: groups, indices, contracts.
    #[command(
        after_help = "Examples:\n  baton compile workflows/code/ci-debug.yaml\n  baton compile workflows/code/ci-debug.yaml --format json | jq '.groups'\n  baton compile wf.yaml --params pr_number=42 --format mermaid > plan.mmd\n  baton compile wf.yaml --format dot | dot -Tsvg > plan.svg\n\nExit codes: 0 compiled, 1 invalid workflow (with --strict: also any warning), 2 usage error."
    )]
    Compile(Deferred<CompileArgs>),

    /// Run a workflow: record the run, then execute every stage in dependency order.
    ///
    /// The run is recorded in the store (`.baton/baton.db`, or
    /// `$BATON_DATABASE_URL`: a `postgres://` URL, `sqlite://PATH` or a file
    /// path) before anything else happens, so a run interrupted at any moment
    /// can be continued with `baton resume RUN`.
    #[command(
        after_help = "Examples:\n  baton run examples/quickstart/workflow.yaml\n  baton run wf.yaml --params pr_number=42 --max-parallel 8\n  baton run wf.yaml --dry-run      # show the plan and check its agents, run nothing\n\nExit codes: 0 success or waiting at a human gate, 1 invalid workflow, 2 the run failed or is incomplete, 3 an agent the workflow needs cannot start here (nothing ran), 4 store unavailable."
    )]
    Run(Deferred<RunArgs>),

    /// Driver protocol: hand out the ready stages of a run driven externally.
    ///
    /// Lists every stage whose dependencies are done and whose earlier gates
    /// are approved (no --max-parallel bound), with its rendered prompt and
    /// dispatch file, and records each as started; stages handed out before
    /// and not completed are listed again. Inline `script:` stages and queue
    /// stages are run by baton itself here; a sub-workflow stage's child run
    /// is driven from here too, its entries listed as `STAGE/ENTRY`. An empty
    /// list with status `awaiting_human` means a gate waits for `baton gate
    /// approve`; `success` or `failed`: the run ended.
    #[command(
        after_help = "Examples:\n  baton run wf.yaml --driver external          # prints the run id, spawns nothing\n  baton next RUN --json                        # [{stage, prompt, dispatch_file, worktree}]\n  baton complete RUN draft                     # verify draft's outputs and record them\n  baton fail RUN draft --error \"agent gave up\"\n\nExit codes: 0 listed, 1 no such run, 2 the workflow changed since the run started, 3 refused (not an external run), 4 store unavailable."
    )]
    Next(Deferred<driver::NextArgs>),

    /// Driver protocol: verify a handed-out stage's outputs and record its result.
    ///
    /// The same checks as baton's own executor: every declared output exists,
    /// was written after `baton next` handed the stage out, and passes its
    /// output checks. Refuses a stage not handed out, not ready, or already
    /// completed.
    #[command(
        after_help = "Examples:\n  baton complete RUN draft\n  baton complete RUN draft --json\n\nExit codes: 0 recorded as succeeded, 1 no such run or stage, 2 verification failed (recorded as a failure), 3 refused (out of order), 4 store unavailable."
    )]
    Complete(Deferred<driver::CompleteArgs>),

    /// Driver protocol: record a handed-out stage as failed.
    #[command(
        after_help = "Examples:\n  baton fail RUN draft --error \"the agent hit its turn limit\"\n\nExit codes: 0 recorded, 1 no such run or stage, 3 refused (out of order), 4 store unavailable."
    )]
    Fail(Deferred<driver::FailArgs>),

    /// List recorded runs, oldest first: status, duration, stage counts and cost.
    #[command(
        after_help = "Examples:\n  baton runs\n  baton runs --status failed --since 7d\n  baton runs --workflow review --limit 3\n  baton runs --limit 5 --format json\n  baton runs --since 2026-12-01\n\nA run can be named by `latest` or by the start of its id wherever a run id is taken (`baton status latest`, `baton logs 3f2`).\n\nExit codes: 0 listed (even if none), 2 usage error, 4 store unavailable."
    )]
    Runs(Deferred<RunsArgs>),

    /// Show a run's stages with their status and duration.
    #[command(
        after_help = "Examples:\n  baton status latest              # the run created last\n  baton status 3f2                  # any unique start of a run id\n  baton status RUN --format json\n  baton status latest --watch      # follow it until it ends or waits at a gate\n\nWith --watch the exit code says how the run stopped: 0 succeeded or waits at a gate; 2 failed, rejected or cancelled, or its driver is gone (`baton resume RUN`)."
    )]
    Status(Deferred<StatusArgs>),

    /// Show the output of a run's stages (the latest attempt of each); an
    /// agent's stream JSON as its transcript unless --raw.
    #[command(
        after_help = "Each line is `STAGE | STREAM | text`; STREAM is `agent` for an agent's transcript (its messages, the tools it called and their answers), else `stdout` or `stderr`.\n\nExamples:\n  baton logs RUN\n  baton logs RUN review --follow\n  baton logs RUN review --raw\n  baton logs RUN --format json"
    )]
    Logs(Deferred<LogsArgs>),

    /// Continue a run after a crash, a cancel, a failure or a gate decision.
    ///
    /// Stages whose result was recorded are not run again, unless their
    /// recorded outputs changed or were deleted: then those stages and
    /// every stage that depends on them run again, also in a run that had
    /// already succeeded (`baton verify RUN` shows which, running nothing).
    /// Refuses while another live baton drives the run, and when the
    /// workflow or a fragment changed since the run started (unless
    /// --accept-changes).
    #[command(
        after_help = "Examples:\n  baton resume latest\n  baton resume .baton/runs/RUN        # the run's workspace instead of its id\n  baton resume RUN --accept-changes   # continue with the workflow as it is now\n  baton resume RUN --wait-gates       # wait at a gate for a decision\n\nExit codes: 0 success or waiting at a human gate, 1 invalid workflow or no such run (id, prefix or workspace), 2 the run failed or is incomplete, 4 store unavailable."
    )]
    Resume(Deferred<ResumeArgs>),

    /// Check that a run's recorded outputs are as they were recorded.
    ///
    /// Every output of a succeeded stage was hashed (SHA-256) when its result
    /// was recorded; verify hashes the files again and lists those changed or
    /// deleted since, and the stages `baton resume RUN` would run again for
    /// them (with every stage that depends on them). Runs nothing and
    /// records nothing.
    #[command(after_help = "Examples:
  baton verify RUN
  baton verify .baton/runs/RUN --json   # {run_id, status, workspace, intact, outputs, rerun}
  baton verify RUN || baton resume RUN  # rerun what changed

Exit codes: 0 every recorded output is intact, 1 no run has that id or workspace, 3 outputs changed or were deleted, 4 store unavailable.")]
    Verify(Deferred<VerifyArgs>),

    /// Stop a run: its driver kills the running stages within a second; the
    /// command returns once the driver has stopped, and no stage starts
    /// after. `baton resume` continues it.
    #[command(
        after_help = "Examples:\n  baton cancel RUN\n  baton resume RUN    # continue it later"
    )]
    Cancel(Deferred<RunRef>),

    /// Run a stage again, and every stage that depends on it.
    #[command(
        after_help = "Examples:\n  baton rerun latest review     # review and everything after it run again\n  baton rerun RUN review --json\n\nExit codes: 0 success or waiting at a human gate, 2 no such run or stage, or the run failed or is incomplete, 4 store unavailable."
    )]
    Rerun(Deferred<RerunArgs>),

    /// Agent profiles: which CLIs work on this machine.
    #[command(
        subcommand,
        after_help = "Examples:\n  baton agents check                  # installed? version? credentials?\n  baton agents check --probe          # ask each mapped profile a one-word question"
    )]
    Agents(Deferred<agents::AgentsCommand>),

    /// Human gates: see what a gate stage produced, edit it, approve or reject it.
    ///
    /// A run stops at a human gate once the gate's stage succeeds. A decision
    /// is recorded with who made it, when, and the hash of the gate's outputs:
    /// editing them afterwards makes an approval stale, and the run stops at
    /// the gate again. Of people deciding at once, exactly one decision counts.
    #[command(
        subcommand,
        after_help = "Examples:\n  baton gate list                          # every gate waiting or decided\n  baton gate show RUN review               # the gate's outputs, items numbered\n  baton gate drop RUN review 3             # remove item 3 of its list\n  baton gate edit RUN review 2 priority=high\n  baton gate add RUN review \"Also check the migration\"\n  baton gate approve RUN review --comment \"looks right\"\n  baton resume RUN                         # continue after the approval\n  baton gate reject RUN review --comment \"wrong scope\"   # the run ends rejected\n\nExit codes: 0 done, 1 no such run, 2 usage error or the gate cannot be acted on (not a gate, not run yet, no such item), 3 someone decided or changed the gate first, 4 store unavailable."
    )]
    Gate(Deferred<GateCommand>),

    /// The governance ledger of a run, task or agent session: stage, rules, evidence (docs/governance.md).
    ///
    /// Each scope has an append-only ledger of events with their evidence:
    /// files inspected, edits with content hashes, validation commands with
    /// exit codes and covered paths, reviews with the reviewer's identity,
    /// findings, repairs and re-reviews, closure. Folded in order, it gives
    /// the current stage, what may follow, whether validation is fresh after
    /// the last edit, and every rule broken.
    #[command(
        subcommand,
        after_help = "Examples:\n  baton state list\n  baton state show --session 3f2c…\n  baton state check --run RUN            # exit 3 listing violated rules\n  baton state record --task t edited src/lib.rs\n  baton state summary --task t --json    # the workflow_state_summary object\n\nExit codes: 0 done, 1 no such run, 2 usage error, 3 refused or rules violated, 4 store unavailable."
    )]
    State(Deferred<state::StateCommand>),

    /// Agent CLI hooks that feed the governance ledger (docs/hooks.md).
    #[command(
        subcommand,
        after_help = "Examples:\n  baton hook install claude-code\n  baton hook claude-code PostToolUse < payload.json\n  baton hook claude-code Stop < payload.json   # exit 2 with the reason when blocked"
    )]
    Hook(Deferred<state::HookCommand>),

    /// Work queue jobs: claim, run, heartbeat, report; stop gracefully on SIGTERM.
    ///
    /// Any number of workers, on any hosts, may work one store (PostgreSQL
    /// for several machines). A job whose worker dies or pauses past its
    /// lease is taken over; a late answer from the first worker is rejected.
    #[command(
        after_help = "Examples:\n  baton worker                          # the default queue, 4 jobs at once, until SIGTERM\n  baton worker --concurrency 16 --queue deploy\n  baton worker --once                   # drain what is claimable, then exit\n\nJob logs go to .baton/jobs/<id>/<epoch>.stdout|stderr.\n\nExit codes: 0 stopped or drained, 4 store unavailable."
    )]
    Worker(Deferred<queue::WorkerArgs>),

    /// The job queue: list, show, enqueue, retry, requeue dead jobs, purge.
    #[command(
        subcommand,
        after_help = "Examples:\n  baton queue list --status error\n  baton queue enqueue --script 'make test'\n  baton queue retry 42\n  baton queue purge --older-than 12h"
    )]
    Queue(Deferred<queue::QueueCommand>),

    /// The worktrees and branches of isolated stages: list them, prune those of finished runs.
    #[command(
        subcommand,
        after_help = "Examples:\n  baton worktree list\n  baton worktree prune RUN"
    )]
    Worktree(Deferred<worktree::WorktreeCommand>),

    /// Tasks: artifact-driven phases from SPEC.md to VERDICT.md (docs/tasks.md).
    ///
    /// A task is a folder tasks/<name>/; its phase is read from the
    /// artifacts it holds (SPEC.md, IMPLEMENTATION.md, BUG_REPORT.md, …,
    /// VERDICT.md), each counted only when non-empty and newer than what
    /// it depends on. `task run` runs the remaining phases with agents and
    /// acts on the verdict.
    #[command(
        subcommand,
        after_help = "Examples:\n  baton task new \"Add user auth\"      # tasks/add-user-auth/\n  baton task status add-user-auth\n  baton task next add-user-auth        # the next phase and its prompt\n  baton task run add-user-auth         # phases to the verdict; fix tasks on FAIL\n  baton task list --archived\n\nGuide: docs/tasks.md"
    )]
    Task(Deferred<task::TaskCommand>),

    /// Serve the dashboard and the JSON API over HTTP (docs/serve.md).
    ///
    /// Listens on loopback unless --bind says otherwise, and prints the URL
    /// it listens on. Deciding a gate needs a person's token (`baton token
    /// create`); bound beyond loopback, every request does.
    #[command(
        after_help = "Examples:\n  baton serve\n  baton serve --bind 127.0.0.1:0          # any free port; the URL says which\n  baton serve --bind 0.0.0.0:7777 --allow-host build.example\n\nExit codes: 0 stopped (SIGINT or SIGTERM), 2 usage error or the address cannot be bound, 4 store unavailable."
    )]
    Serve(Deferred<serve::ServeArgs>),

    /// Serve MCP (Model Context Protocol) on stdin and stdout, for agent CLIs (docs/mcp.md).
    ///
    /// Started by an agent CLI as one of its MCP servers (`claude mcp add
    /// baton -- baton mcp`). Inside a stage it knows its run and stage from
    /// BATON_RUN_ID and BATON_STAGE; deciding a gate needs a person's token
    /// in BATON_TOKEN. `baton serve` speaks the same at /mcp.
    #[command(after_help = "Examples:
  claude mcp add baton -- baton mcp
  BATON_TOKEN=baton_… baton mcp          # a person's assistant may decide gates

Exit codes: 0 the client closed the session, 2 the session failed, 4 store unavailable.")]
    Mcp,

    /// Tokens for `baton serve`: one per person, its name recorded as who decided.
    #[command(
        subcommand,
        after_help = "Examples:\n  baton token create --name alice      # printed once; only its hash is stored\n  baton token list\n  baton token revoke alice\n\nExit codes: 0 done, 2 usage error or no such token, 3 the name has a token already, 4 store unavailable."
    )]
    Token(Deferred<serve::TokenCommand>),

    /// Delete finished runs older than an age, with their workspaces, logs and worktrees.
    ///
    /// Only runs that ended (success, failed, cancelled, rejected) before
    /// the cutoff are deleted; a run still running, pending or waiting at a
    /// gate is never touched. A run whose worktree has uncommitted changes,
    /// or whose branch its target does not contain, is kept whole, and the
    /// listing says why. A sub-workflow's child run goes with its parent.
    #[command(
        after_help = "Examples:\n  baton prune --older-than 30d --dry-run   # list what would go\n  baton prune --older-than 30d\n  baton prune --older-than 2026-12-01 --format json\n\nExit codes: 0 done (even if nothing matched), 2 usage error, 4 store unavailable."
    )]
    Prune(Deferred<PruneArgs>),

    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(
        after_help = "Examples:\n  baton completions bash > ~/.local/share/bash-completion/completions/baton\n  baton completions zsh > \"${fpath[1]}/_baton\"\n  baton completions fish > ~/.config/fish/completions/baton.fish\n  source <(baton completions bash)     # this shell only"
    )]
    Completions(Deferred<CompletionsArgs>),

    /// List the workflows and fragments under a directory.
    #[command(
        after_help = "Without DIR, lists ./workflows when it exists, else the current directory.\n\nExamples:\n  baton list\n  baton list workflows/code --format json\n\nExit codes: 0 listed (even if empty), 2 usage error."
    )]
    List(Deferred<ListArgs>),
}

/// A workflow file and an output format.
#[derive(Debug, Args)]
pub(crate) struct FileArgs {
    /// The workflow file (includes are resolved from the current directory first).
    pub(crate) file: String,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}

/// `baton lint`.
#[derive(Debug, Args)]
pub(crate) struct LintArgs {
    /// The workflow or fragment file.
    pub(crate) file: String,
    /// Treat warnings as errors.
    #[arg(long)]
    pub(crate) strict: bool,
    /// Parameter values, as `key=value` (repeatable).
    #[arg(long = "params", short = 'p', value_name = "KEY=VALUE")]
    pub(crate) params: Vec<String>,
    /// Output format (default: table).
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}

/// `baton compile`.
#[derive(Debug, Args)]
pub(crate) struct CompileArgs {
    /// The workflow file.
    pub(crate) file: String,
    /// Treat warnings (unknown keys, unknown checks) as errors.
    #[arg(long)]
    pub(crate) strict: bool,
    /// Parameter values, as `key=value` (repeatable); they override
    /// `trigger.params`, which override the built-in `work_dir`.
    #[arg(long = "params", short = 'p', value_name = "KEY=VALUE")]
    pub(crate) params: Vec<String>,
    /// Output format.
    #[arg(long, short = 'f', value_enum, default_value_t = CompileFormat::Table)]
    pub(crate) format: CompileFormat,
    /// Same as `--format json`.
    #[arg(long, conflicts_with = "format")]
    pub(crate) json: bool,
}

/// `baton list`.
#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    /// Directory to search (recursively) for `*.yaml` files.
    pub(crate) dir: Option<String>,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}

/// `baton prune`.
#[derive(Debug, Args)]
pub(crate) struct PruneArgs {
    /// Delete runs that finished before then: an age (30d, 12h, 2w) or a
    /// UTC date (2026-12-01).
    #[arg(long, value_name = "DURATION|DATE", value_parser = baton_engine::cutoff::parse)]
    pub(crate) older_than: baton_engine::cutoff::Cutoff,
    /// List what would be deleted, and what kept; delete nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}

/// `baton completions`.
#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub(crate) shell: clap_complete::Shell,
}

/// `baton runs`.
#[derive(Debug, Args)]
pub(crate) struct RunsArgs {
    /// Only runs with this status.
    #[arg(long, value_name = "STATUS", value_parser = baton_engine::view::RUN_STATUSES)]
    pub(crate) status: Option<String>,
    /// Only runs of the workflow with this name (its `name:`, as the
    /// list's `workflow` column shows it).
    #[arg(long, value_name = "NAME")]
    pub(crate) workflow: Option<String>,
    /// Only the N most recent runs (of those the other filters keep).
    #[arg(long, value_name = "N")]
    pub(crate) limit: Option<usize>,
    /// Only runs started since then: an age (7d, 12h, 30m, 2w) or a UTC
    /// date (2026-12-01, 2026-12-01T08:30:00Z).
    #[arg(long, value_name = "DURATION|DATE", value_parser = baton_engine::cutoff::parse)]
    pub(crate) since: Option<baton_engine::cutoff::Cutoff>,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}

impl RunsArgs {
    /// The runs these flags keep.
    pub(crate) fn filter(&self) -> baton_engine::view::RunFilter {
        baton_engine::view::RunFilter {
            status: self.status.clone(),
            workflow: self.workflow.clone(),
            since: self.since,
            limit: self.limit,
        }
    }
}

/// `baton status`.
#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    #[command(flatten)]
    pub(crate) run: RunRef,
    /// Follow the run until it stops (ends, waits at a gate, or its driver
    /// is gone): redrawn on a terminal, one line per change otherwise.
    #[arg(long, short = 'w')]
    pub(crate) watch: bool,
    /// How often `--watch` looks (e.g. 500ms, 2s).
    #[arg(long, default_value = "1s", value_parser = parse_interval, requires = "watch")]
    pub(crate) interval: std::time::Duration,
}

/// A `--watch` interval: `500ms`, `2s`, `1m`; from 100 ms to 10 minutes.
fn parse_interval(text: &str) -> Result<std::time::Duration, String> {
    let (digits, unit) = text
        .find(|c: char| !c.is_ascii_digit())
        .map_or((text, ""), |at| text.split_at(at));
    let value: u64 = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a duration; write e.g. 500ms, 2s or 1m"))?;
    let duration = match unit {
        "ms" => std::time::Duration::from_millis(value),
        "s" | "" => std::time::Duration::from_secs(value),
        "m" => std::time::Duration::from_secs(value.saturating_mul(60)),
        _ => {
            return Err(format!(
                "`{text}` is not a duration; write e.g. 500ms, 2s or 1m"
            ));
        }
    };
    if duration < std::time::Duration::from_millis(100)
        || duration > std::time::Duration::from_secs(600)
    {
        return Err(format!("`{text}` is out of range: from 100ms to 10m"));
    }
    Ok(duration)
}

/// A run id and a format.
#[derive(Debug, Args)]
pub(crate) struct RunRef {
    /// The run: its id, the start of it, or `latest` (see `baton runs`).
    pub(crate) run: String,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}

/// `baton run`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The workflow file.
    pub(crate) file: String,
    /// Parameter values, as `key=value` (repeatable).
    #[arg(long = "params", short = 'p', value_name = "KEY=VALUE")]
    pub(crate) params: Vec<String>,
    /// Base directory for the run's workspace (default: the parent of the
    /// workflow's `workspace_dir`, else `.baton/runs`).
    #[arg(long, value_name = "DIR")]
    pub(crate) workspace: Option<String>,
    /// Most stages running at once.
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub(crate) max_parallel: usize,
    /// Stop starting agent stages once the run has spent this many dollars
    /// (as the agents report it, or their tokens at the [pricing] rate).
    #[arg(long, value_name = "USD", value_parser = parse_budget)]
    pub(crate) budget: Option<f64>,
    /// Compile and show what would run, and check every agent it needs as
    /// `baton check` does; record and run nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Treat warnings as errors, as `baton lint --strict` does: a workflow
    /// with any (an unknown key, an unquoted placeholder) is not run.
    #[arg(long)]
    pub(crate) strict: bool,
    /// At a human gate, wait for a decision (`baton gate approve|reject`
    /// from another shell) instead of stopping.
    #[arg(long)]
    pub(crate) wait_gates: bool,
    /// Leave the run's queue jobs (`executor: worker_queue` stages and
    /// `fan_out.mode: worker_queue` items) to `baton worker` processes
    /// instead of working them in this process too.
    #[arg(long)]
    pub(crate) no_local_worker: bool,
    /// Run this command (with bash) when a gate starts waiting and when the
    /// run fails or ends; it reads the notice in `BATON_NOTIFY_*` variables
    /// (`[notify]` in baton.toml also posts to a webhook).
    #[arg(long, value_name = "CMD")]
    pub(crate) notify: Option<String>,
    /// `external`: only create the run and print its id; an external
    /// orchestrator drives it with `baton next` / `complete` / `fail`.
    #[arg(long, value_enum, default_value_t = driver::DriverArg::Builtin)]
    pub(crate) driver: driver::DriverArg,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}

/// `baton resume`.
#[derive(Debug, Args)]
pub(crate) struct ResumeArgs {
    /// The run: its id, the start of it, `latest`, or its workspace directory.
    pub(crate) run: String,
    /// Continue even though the workflow or a fragment changed since the run started.
    #[arg(long)]
    pub(crate) accept_changes: bool,
    /// Finish each isolated stage whose branch failed to merge by merging
    /// the branch as it is now (after you merged it into the target by
    /// hand, or committed a resolution on it), without running its agent again.
    #[arg(long)]
    pub(crate) accept_merge: bool,
    /// At a human gate, wait for a decision (`baton gate approve|reject`
    /// from another shell) instead of stopping.
    #[arg(long)]
    pub(crate) wait_gates: bool,
    /// Leave the run's queue jobs (`executor: worker_queue` stages and
    /// `fan_out.mode: worker_queue` items) to `baton worker` processes
    /// instead of working them in this process too.
    #[arg(long)]
    pub(crate) no_local_worker: bool,
    /// Stop starting agent stages once the run has spent this many dollars,
    /// instead of the budget it was started with.
    #[arg(long, value_name = "USD", value_parser = parse_budget)]
    pub(crate) budget: Option<f64>,
    /// Run this command (with bash) when a gate starts waiting and when the
    /// run fails or ends; it reads the notice in `BATON_NOTIFY_*` variables
    /// (`[notify]` in baton.toml also posts to a webhook).
    #[arg(long, value_name = "CMD")]
    pub(crate) notify: Option<String>,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}

/// `baton verify`.
#[derive(Debug, Args)]
pub(crate) struct VerifyArgs {
    /// The run id, or the run's workspace directory (as `baton status` shows it).
    pub(crate) run: String,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}

/// `baton rerun`.
#[derive(Debug, Args)]
pub(crate) struct RerunArgs {
    /// The run: its id, the start of it, or `latest`.
    pub(crate) run: String,
    /// The stage to run again.
    pub(crate) stage: String,
    /// Run again even though the workflow or a fragment changed since the run started.
    #[arg(long)]
    pub(crate) accept_changes: bool,
    /// Stop starting agent stages once the run has spent this many dollars,
    /// instead of the budget it was started with.
    #[arg(long, value_name = "USD", value_parser = parse_budget)]
    pub(crate) budget: Option<f64>,
    /// Run this command (with bash) when the run fails or ends, as `run --notify` does.
    #[arg(long, value_name = "CMD")]
    pub(crate) notify: Option<String>,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}

/// `baton logs`.
#[derive(Debug, Args)]
pub(crate) struct LogsArgs {
    /// The run: its id, the start of it, or `latest`.
    pub(crate) run: String,
    /// Only this stage.
    pub(crate) stage: Option<String>,
    /// Keep printing new output until the run stops.
    #[arg(long)]
    pub(crate) follow: bool,
    /// An agent's output as the CLI wrote it (stream JSON), instead of its
    /// transcript (messages, tool calls and their answers).
    #[arg(long)]
    pub(crate) raw: bool,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}

/// `baton gate …`.
#[derive(Debug, Subcommand)]
pub(crate) enum GateCommand {
    /// List the gates waiting for a decision or decided, of one run or all.
    #[command(
        after_help = "Statuses: awaiting (a decision is needed), approved, rejected, stale (decided on outputs that changed since: decide again).\n\nExamples:\n  baton gate list\n  baton gate list RUN --format json"
    )]
    List(GateListArgs),
    /// Show a gate's outputs (JSON and markdown lists with their items numbered) and its decision.
    #[command(after_help = "Example:\n  baton gate show RUN review")]
    Show(GateRef),
    /// Approve a gate: the run continues at `baton resume RUN`.
    #[command(
        after_help = "Examples:\n  baton gate approve RUN review\n  baton gate approve RUN review --comment \"ship it\" --as alice"
    )]
    Approve(GateDecideArgs),
    /// Reject a gate: the run ends with status `rejected`.
    #[command(
        after_help = "Example:\n  baton gate reject RUN review --comment \"the plan misses the database migration\""
    )]
    Reject(GateDecideArgs),
    /// Push a gate back: its stage runs again with your comment in its prompt, then the gate waits for a decision on the new outputs.
    #[command(
        name = "push-back",
        after_help = "A run waiting at the gate (`baton run --wait-gates`) runs the stage again at once; otherwise `baton resume RUN` does.\n\nExample:\n  baton gate push-back RUN review --comment \"split step 3 into a migration and a backfill\""
    )]
    PushBack(GateDecideArgs),
    /// Remove item N (from 1) of the gate's list.
    #[command(after_help = "Example:\n  baton gate drop RUN review 3")]
    Drop(GateDropArgs),
    /// Set a field of item N of the gate's list.
    #[command(
        after_help = "The value is parsed as JSON when it parses (numbers, true, lists), else taken as text.\nString items and markdown list lines have one field, `text`.\n\nExamples:\n  baton gate edit RUN review 2 priority=high\n  baton gate edit RUN review 2 score=3\n  baton gate edit RUN review 1 text=\"Rename the flag\""
    )]
    Edit(GateEditArgs),
    /// Append an item to the gate's list.
    #[command(
        after_help = "A JSON object is appended as it is; other text becomes a string item, or {\"text\": …} in a list of objects, or a new markdown list line.\n\nExamples:\n  baton gate add RUN review \"Also update the changelog\"\n  baton gate add RUN review '{\"id\": \"x\", \"title\": \"Also update the changelog\"}'"
    )]
    Add(GateAddArgs),
}

/// `baton gate list`.
#[derive(Debug, Args)]
pub(crate) struct GateListArgs {
    /// Only this run.
    pub(crate) run: Option<String>,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}

/// A gate: a run and a stage.
#[derive(Debug, Args)]
pub(crate) struct GateRef {
    /// The run: its id, the start of it, or `latest` (see `baton gate list`).
    pub(crate) run: String,
    /// The gate stage's name.
    pub(crate) stage: String,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}

/// `baton gate approve|reject`.
#[derive(Debug, Args)]
pub(crate) struct GateDecideArgs {
    #[command(flatten)]
    pub(crate) gate: GateRef,
    /// Why (recorded with the decision).
    #[arg(long, value_name = "TEXT")]
    pub(crate) comment: Option<String>,
    /// Who decides (default: the user running baton: $USER, else $LOGNAME, else the project's git user, else the system account).
    #[arg(long = "as", value_name = "NAME")]
    pub(crate) as_name: Option<String>,
}

/// `baton gate drop`.
#[derive(Debug, Args)]
pub(crate) struct GateDropArgs {
    #[command(flatten)]
    pub(crate) gate: GateRef,
    /// The item's number, from 1 (as `baton gate show` numbers them).
    pub(crate) n: usize,
    /// Who edits, recorded with the edit (default: as for `baton gate approve`).
    #[arg(long = "as", value_name = "NAME")]
    pub(crate) as_name: Option<String>,
}

/// `baton gate edit`.
#[derive(Debug, Args)]
pub(crate) struct GateEditArgs {
    #[command(flatten)]
    pub(crate) gate: GateRef,
    /// The item's number, from 1.
    pub(crate) n: usize,
    /// `field=value`.
    #[arg(value_name = "FIELD=VALUE")]
    pub(crate) assignment: String,
    /// Who edits, recorded with the edit (default: as for `baton gate approve`).
    #[arg(long = "as", value_name = "NAME")]
    pub(crate) as_name: Option<String>,
}

/// `baton gate add`.
#[derive(Debug, Args)]
pub(crate) struct GateAddArgs {
    #[command(flatten)]
    pub(crate) gate: GateRef,
    /// The item to append.
    pub(crate) text: String,
    /// Who edits, recorded with the edit (default: as for `baton gate approve`).
    #[arg(long = "as", value_name = "NAME")]
    pub(crate) as_name: Option<String>,
}

/// A budget: a positive number of dollars.
fn parse_budget(text: &str) -> Result<f64, String> {
    match text.trim_start_matches('$').parse::<f64>() {
        Ok(usd) if usd.is_finite() && usd > 0.0 => Ok(usd),
        _ => Err(format!(
            "`{text}` is not a budget: give a positive number of dollars, as 2.50"
        )),
    }
}
