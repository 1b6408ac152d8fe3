//! End-to-end tests of the `baton` binary, in one test binary.

#![allow(clippy::print_stderr, reason = "tests say on stderr why they skip")]

mod agent_retries;
mod agent_tools;
mod agents_probe;
mod api_coverage;
mod browser;
mod budget;
mod cancel;
mod cgroups;
mod check;
mod compat;
mod compat_runs;
mod compile_table;
mod completions;
mod concurrency;
mod contract;
mod crash;
mod diagnostics;
mod discovery;
mod driver;
mod driver_gone;
mod driver_parity;
mod driver_queue;
mod driver_subrun;
mod examples;
mod failpoint_sweep;
mod fan_out;
mod file_content;
mod format_shapes;
mod gates;
mod governance_quiet;
mod graph;
mod help_examples;
mod honest_hints;
mod hooks;
mod hostile;
mod init;
mod legacy_store;
mod logs;
mod mcp;
mod notify;
mod otel;
mod progress;
mod project;
mod prune;
mod push_back;
mod queue;
mod queue_list;
mod queue_postgres;
mod queue_retry;
mod read_only;
mod readiness;
mod real_agents;
mod real_sessions;
mod run;
mod run_refs;
mod runs_list;
mod secrets;
mod serve;
mod serve_events;
mod serve_gate;
mod serve_runs;
mod serve_tasks;
mod serving;
mod sqlite_log;
mod state;
mod state_runs;
mod store_lock;
mod store_url;
mod strict;
mod subworkflow;
mod tasks;
mod tasks_status;
mod tasks_sub;
mod traversal;
mod usage;
mod validation;
mod watch;
mod worktree;

use std::path::Path;

use baton_test_support::{Run, run};

/// Runs the `baton` under test in `cwd`.
pub fn baton(cwd: &Path, args: &[&str]) -> Run {
    run(Path::new(env!("CARGO_BIN_EXE_baton")), cwd, args)
}
