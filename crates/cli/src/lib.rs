//! The `baton` command line: argument parsing, settings, printing and exit
//! codes. Each command is a thin adapter over a library operation.
//!
//! This crate is the only one that reads the environment, prints, or picks
//! an exit code.

#![forbid(unsafe_code)]

mod args;
mod commands;
mod exit_code;
mod observe;
mod output;
mod progress;
mod project;
mod report;
mod settings;
mod tasks;

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};

/// Runs baton with the process's arguments and returns its exit code.
pub fn main() -> ExitCode {
    // The helper that contains a read-only agent: before anything else,
    // while this process has a single thread.
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() == Some(baton_executor::contain::SUBCOMMAND.as_ref()) {
        return match baton_executor::contain::main(args.collect()) {
            Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(u8::MAX)),
            Err(error) => {
                output::stderr_line(&format!("baton: cannot contain the agent: {error}"));
                ExitCode::from(baton_executor::contain::HELPER_FAILED)
            }
        };
    }
    // Crash tests make baton abort at a named point (see the engine's
    // `failpoint` module).
    if let Some(point) = settings::failpoint()
        && let Err(error) = baton_engine::failpoint::arm(&point)
    {
        output::stderr_line(&format!("baton: BATON_FAILPOINT: {error}"));
        return ExitCode::from(exit_code::USAGE);
    }
    let cgroups = match settings::cgroups() {
        Ok(asked) => asked,
        Err(why) => {
            output::stderr_line(&format!("baton: {why}"));
            return ExitCode::from(exit_code::USAGE);
        }
    };
    baton_executor::cgroup::set_enabled(cgroups != settings::Cgroups::Off);
    // Looked for only when asked: the look costs every command.
    if cgroups == settings::Cgroups::On && baton_executor::cgroup::directory().is_none() {
        output::stderr_line(
            "baton: BATON_CGROUPS=on, but baton cannot make cgroups here (it needs cgroup v2 mounted and the right to make a cgroup beside its own); stages run without",
        );
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let code = if error.use_stderr() {
                exit_code::USAGE
            } else {
                exit_code::SUCCESS
            };
            // Printing can only fail on a closed pipe, and then nobody reads it.
            let _ = error.print();
            return ExitCode::from(code);
        }
    };
    report::install();
    let mut chosen = cli.project.clone().or_else(settings::project_from_env);
    if matches!(cli.command, Command::Mcp) && chosen.is_none() {
        // Started by a stage's agent, possibly in a worktree with a
        // `baton.toml` of its own: the run's project is the one baton named.
        chosen = settings::stage_project_dir();
    }
    if let Err(why) = project::init(chosen.as_deref()) {
        output::stderr_line(&format!("error: {why}"));
        return ExitCode::from(exit_code::USAGE);
    }
    let listening = observe::install(settings::observability());
    let code = match cli.command {
        Command::Parse(args) => commands::parse::run(&args),
        Command::Lint(args) => commands::lint::run(&args).unwrap_or_else(|code| code),
        Command::Init(args) => commands::init::run(&args),
        Command::Check(args) => commands::check::run(&args).unwrap_or_else(|code| code),
        Command::Compile(args) => commands::compile::run(&args).unwrap_or_else(|code| code),
        Command::List(args) => commands::list::run(&args),
        Command::Completions(args) => commands::completions::run(&args),
        Command::Prune(args) => commands::prune::run(&args),
        Command::Run(args) => commands::run::run(&args).unwrap_or_else(|code| code),
        Command::Resume(args) => commands::run::resume(&args).unwrap_or_else(|code| code),
        Command::Verify(args) => commands::verify::run(&args),
        Command::Rerun(args) => commands::run::rerun(&args),
        Command::Cancel(args) => commands::run::cancel(&args),
        Command::Next(args) => commands::driver::next(&args),
        Command::Complete(args) => commands::driver::complete(&args),
        Command::Fail(args) => commands::driver::fail(&args),
        Command::Runs(args) => commands::runs::run(&args),
        Command::Agents(command) => match &*command {
            args::agents::AgentsCommand::Check(args) => {
                commands::agents::check(args).unwrap_or_else(|code| code)
            }
        },
        Command::Gate(command) => commands::gate::run(&command),
        Command::State(command) => commands::state::run(&command),
        Command::Hook(command) => commands::hook::run(&command),
        Command::Status(args) => commands::status::status(&args),
        Command::Logs(args) => commands::status::logs(&args),
        Command::Worker(args) => commands::queue::worker(&args),
        Command::Queue(command) => commands::queue::run(&command),
        Command::Worktree(command) => commands::worktree::run(&command),
        Command::Task(command) => commands::task::run(&command),
        Command::Serve(args) => commands::serve::run(&args),
        Command::Token(command) => commands::token::run(&command),
        Command::Mcp => commands::mcp::run(),
    };
    listening.finish();
    if cgroups == settings::Cgroups::On
        && let Some(why) = baton_executor::cgroup::refusal()
    {
        output::stderr_line(&format!(
            "baton: BATON_CGROUPS=on, but a stage's process could not start in a cgroup of its own ({why}); the stages after it ran without"
        ));
    }
    if let Some(writes) = baton_engine::failpoint::counted_writes() {
        output::stderr_line(&format!("baton: store writes: {writes}"));
    }
    ExitCode::from(code)
}
