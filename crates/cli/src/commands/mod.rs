//! One module per subcommand; shared set-up lives here.

pub(crate) mod agents;
mod agents_probe;
pub(crate) mod compile;
mod cost;
pub(crate) mod driver;
pub(crate) mod gate;
pub(crate) mod graph;
pub(crate) mod hook;
pub(crate) mod lint;
pub(crate) mod list;
pub(crate) mod parse;
pub(crate) mod queue;
mod retries;
pub(crate) mod run;
pub(crate) mod state;
pub(crate) mod status;
mod subruns;
pub(crate) mod task;
mod task_run;
pub(crate) mod verify;
mod workspace_run;
pub(crate) mod worktree;

use std::path::PathBuf;

use baton_engine::loader::FsLoader;
use baton_workflow::compile::Options;

use crate::exit_code;
use crate::output;

/// The current directory, where relative workflow, include and template
/// paths start (as in the reference engine).
pub(crate) fn current_dir() -> PathBuf {
    std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."))
}

/// A loader rooted at the current directory.
pub(crate) fn loader() -> FsLoader {
    FsLoader::new(current_dir())
}

/// Compile options from `--params`: `work_dir` defaults to `<cwd>/out`.
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
        work_dir: Some(current_dir().join("out").to_string_lossy().into_owned()),
        params: parsed,
    })
}
