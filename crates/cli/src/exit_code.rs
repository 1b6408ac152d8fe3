//! baton's exit codes, in one place.

/// The command did what was asked (for `lint`: the workflow is valid).
pub(crate) const SUCCESS: u8 = 0;
/// The workflow is invalid: a parse, validation or compile error (the
/// reference engine's code for the same failures).
pub(crate) const INVALID_WORKFLOW: u8 = 1;
/// The command line was wrong: an unknown flag, a missing argument, a
/// malformed `--params`.
pub(crate) const USAGE: u8 = 2;

/// `run`/`resume`: the run failed or is incomplete (the reference's code).
pub(crate) const RUN_FAILED: u8 = 2;
/// `gate`: someone decided on the gate, or changed its output, first;
/// `check`, `run`: an agent the workflow needs cannot start here;
/// `state record`: a governance rule refused the event; `state check`: rules
/// are violated.
pub(crate) const REFUSED: u8 = 3;
/// `verify`: recorded outputs of the run changed or were deleted since
/// they were recorded.
pub(crate) const OUTPUTS_CHANGED: u8 = 3;
/// `hook claude-code`: the hook blocks (Claude Code reads exit code 2 as
/// "blocked" and feeds stderr back to the agent).
pub(crate) const HOOK_BLOCKS: u8 = 2;
/// The store (SQLite file or PostgreSQL) cannot be opened or reached.
pub(crate) const STORE_UNAVAILABLE: u8 = 4;
/// `task run`: the verdict needs a person (autopilot paused, or nothing
/// listed to follow up); nothing was created.
pub(crate) const TASK_DECIDE: u8 = 5;
/// `task run`: the task waits for its sub-tasks to reach their verdicts.
pub(crate) const TASK_WAITING: u8 = 6;

/// The text `--help` shows.
pub(crate) const HELP: &str = "\
Exit codes:
  0    success (for lint: the workflow is valid)
  1    invalid workflow: a parse, validation or compile error
  2    usage error: unknown flag, missing argument, malformed --params;
       for run and resume: the run failed, was rejected at a gate, or is incomplete
  3    gate: someone else decided on the gate or changed its output first;
       state: a governance rule refused the event, or rules are violated;
       task run: another task run works on the same task;
       check, run: an agent the workflow needs cannot start here;
       verify: recorded outputs changed or were deleted
  4    the store is unavailable (database locked, unreachable, read-only)
  5    task run: a person must decide on the verdict (autopilot paused)
  6    task run: the task waits for its sub-tasks
  101  internal error in baton";
