//! One module per subcommand; shared set-up lives here.

pub(crate) mod agents;
mod agents_probe;
pub(crate) mod check;
pub(crate) mod compile;
pub(crate) mod completions;
mod containment;
mod drive;
pub(crate) mod driver;
mod errors;
pub(crate) mod gate;
pub(crate) mod graph;
pub(crate) mod hook;
pub(crate) mod init;
pub(crate) mod lint;
pub(crate) mod list;
pub(crate) mod mcp;
mod notify;
pub(crate) mod parse;
pub(crate) mod prune;
pub(crate) mod queue;
pub(crate) mod run;
pub(crate) mod run_ref;
pub(crate) mod runs;
mod runtime;
pub(crate) mod serve;
pub(crate) mod state;
pub(crate) mod status;
mod status_report;
mod summary;
pub(crate) mod task;
mod task_run;
pub(crate) mod token;
pub(crate) mod verify;
mod watch;
pub(crate) mod worktree;

use std::path::PathBuf;

use baton_engine::loader::FsLoader;
use baton_workflow::compile::Options;

use crate::exit_code;
use crate::output;

/// The directory baton was started in, where paths typed on the command
/// line start.
pub(crate) fn current_dir() -> PathBuf {
    crate::project::cwd().to_path_buf()
}

/// The project (see [`crate::project`]): where the store, workspaces,
/// worktrees, tasks and `baton.toml` are, and where stages run.
pub(crate) fn project_dir() -> PathBuf {
    crate::project::dir().to_path_buf()
}

/// A loader rooted at the current directory, for the commands that only
/// read workflow files (`parse`, `lint`, `compile`): their paths and
/// diagnostics read as typed, as in the reference engine.
pub(crate) fn loader() -> FsLoader {
    FsLoader::new(current_dir())
}

/// A loader rooted at the project: relative include and sub-workflow
/// paths start there when a run is created and driven.
pub(crate) fn project_loader() -> FsLoader {
    FsLoader::new(project_dir())
}

/// A workflow file named on the command line, as [`project_loader`] reads it.
pub(crate) fn workflow_file(file: &str) -> String {
    crate::project::from_cwd(file)
}

/// The value of `result`, or exit `code` after its error.
pub(crate) fn or_exit<T>(result: Result<T, impl std::fmt::Display>, code: u8) -> Result<T, u8> {
    result.map_err(|error| {
        output::stderr_line(&format!("error: {error}"));
        code
    })
}

/// [`or_exit`] with the usage exit code.
pub(crate) fn or_usage<T>(result: Result<T, impl std::fmt::Display>) -> Result<T, u8> {
    or_exit(result, exit_code::USAGE)
}

/// Compile options from `--params`: `work_dir` defaults to `<project>/out`.
///
/// # Errors
///
/// The usage exit code, after a message, when a `--params` value has no `=`.
pub(crate) fn compile_options(params: &[String]) -> Result<Options, u8> {
    let mut parsed = Vec::with_capacity(params.len());
    for param in params {
        match param.split_once('=') {
            Some((key, value)) if !key.is_empty() => {
                parsed.push((key.to_owned(), value.to_owned()))
            }
            _ => {
                output::stderr_line(&format!(
                    "error: invalid --params value '{param}': expected KEY=VALUE\nhint: for example --params pr_number=42"
                ));
                return Err(exit_code::USAGE);
            }
        }
    }
    Ok(Options {
        work_dir: Some(project_dir().join("out").to_string_lossy().into_owned()),
        params: parsed,
        reject_unknown_params: true,
    })
}
