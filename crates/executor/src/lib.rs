//! baton-executor: the only crate in baton that starts processes.
//!
//! Everything that runs outside baton's own address space goes through here:
//! shell stages, coding-agent CLIs, and the `--version` probes of
//! `baton agents check`. Keeping process creation in one crate keeps the
//! hard parts in one place: process groups, timeouts, kill escalation,
//! bounded output capture and recovery after a crash.
//!
//! * [`process`] spawns one child in its own process group, drains its
//!   stdout and stderr into size-capped log files with bounded memory, and
//!   enforces wall and idle timeouts, cancellation and an output hard cap.
//!   [`run`] returns an [`Outcome`]; [`Started`] carries the pid, process
//!   group and start time to persist before waiting.
//! * [`group`] signals process groups safely, also after a restart:
//!   [`kill_group_if_alive`] re-checks the start time so a reused pid is
//!   never signalled. Baton is a child subreaper, so what a stage leaves
//!   running (its group, and descendants that left it with `setsid`,
//!   known by the marker) comes back to baton and is killed and reaped
//!   when the stage ends; after a crash the marker is searched for in
//!   `/proc`.
//! * [`cgroup`] gives each attempt a cgroup of its own where the machine
//!   allows it, so everything the attempt started is killed at its end,
//!   wherever it went.
//! * [`shell`] decides between direct exec and `bash -euo pipefail -c`,
//!   quotes values, and substitutes `{placeholders}` into scripts with the
//!   quoting their shell context needs.
//! * [`profile`] holds the agent-CLI profiles (built in and from
//!   `baton.toml`), renders a profile and a request into an argv, and checks
//!   whether a CLI is installed.
//!
//! * [`endpoint`] is the one exception to "a process per stage": it talks
//!   to an OpenAI-compatible chat endpoint over HTTP (`kind = "openai-chat"`
//!   profiles) and writes the declared files from its structured answer.
//! * [`profile::parse_usage`] reads tokens, cost and the session id from
//!   an agent's output by its profile's rules.
//!
//! What it does not do: decide what to run or when (the engine does), read
//! settings (the CLI does; `environment.rs` reads only what children inherit), or persist anything. Git and worktrees will live here too, because they spawn `git`.

// The workspace denies `unsafe` everywhere; this crate alone allows it, in
// one module, `sys.rs`, at sites that say why.

pub mod cgroup;
pub mod contain;
pub mod endpoint;
mod environment;
mod error;
mod exit_watch;
pub mod file;
#[doc(hidden)]
pub mod fuzz;
pub mod git;
pub mod group;
pub mod notify;
mod output;
pub mod process;
pub mod profile;
mod program;
pub mod redact;
pub mod shell;
mod spawn;
mod spawn_clock;
pub mod sys;
pub mod user;
mod vfork;

pub use error::{Error, Result};
pub use group::{kill_group_if_alive, process_start_time};
pub use process::{
    Contained, KillReason, Outcome, PIPE_DRAIN_TIMEOUT, ProcessSpec, STDERR_TAIL_BYTES, Started,
    Stdin, run,
};
pub use program::find_program;
pub use vfork::signal_handlers_changed;
