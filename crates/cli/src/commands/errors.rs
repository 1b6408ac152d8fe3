//! How a failed call is shown: an error with its causes on one line, and
//! an engine error as its message (or diagnostics) and exit code.

use baton_engine::governance;

use crate::{exit_code, output, report, tasks};

pub(crate) use baton_server::chain;

pub(crate) fn engine_error(error: &baton_engine::Error, as_json: bool) -> u8 {
    if let baton_engine::Error::Invalid(failure) = error {
        report::emit(
            &[failure.warnings.clone(), failure.errors.clone()].concat(),
            as_json,
        );
        return exit_code::INVALID_WORKFLOW;
    }
    output::stderr_line(&format!("error: {}", chain(error)));
    match error {
        baton_engine::Error::Store(
            baton_store::Error::Unavailable { .. }
            | baton_store::Error::Query { .. }
            | baton_store::Error::TooNew { .. }
            | baton_store::Error::Gone { .. },
        ) => exit_code::STORE_UNAVAILABLE,
        baton_engine::Error::WorkflowChanged { run_id, .. } => {
            output::stderr_line(&format!(
                "hint: `baton resume {run_id} --accept-changes` continues with the changed workflow"
            ));
            exit_code::RUN_FAILED
        }
        _ => exit_code::RUN_FAILED,
    }
}

/// Prints an error of a store that could not be read.
pub(crate) fn unavailable(error: &dyn std::error::Error) -> u8 {
    output::stderr_line(&format!("error: {}", chain(error)));
    exit_code::STORE_UNAVAILABLE
}

/// Prints a store error; the exit code says whether the run was missing
/// or the store unreachable.
pub(super) fn store_error(error: &baton_store::Error) -> u8 {
    output::stderr_line(&format!("error: {}", chain(error)));
    if matches!(error, baton_store::Error::NoSuchRun(_)) {
        output::stderr_line("hint: `baton runs` lists the recorded runs");
        exit_code::INVALID_WORKFLOW
    } else {
        exit_code::STORE_UNAVAILABLE
    }
}

/// Prints a governance error; the exit code says whether the store or
/// the ledger failed.
pub(crate) fn governance_error(error: &governance::Error) -> u8 {
    output::stderr_line(&format!("error: {}", chain(error)));
    match error {
        governance::Error::Store(_) => exit_code::STORE_UNAVAILABLE,
        governance::Error::Corrupt(_) => exit_code::USAGE,
    }
}

/// Prints a task error and returns its exit code.
pub(crate) fn task_error(error: &tasks::Error) -> u8 {
    output::stderr_line(&format!("error: {error}"));
    match error {
        tasks::Error::BadName(_) => exit_code::USAGE,
        tasks::Error::Busy(_) => exit_code::REFUSED,
        _ => exit_code::INVALID_WORKFLOW,
    }
}
