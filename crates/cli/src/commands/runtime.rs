//! The runtime a command waits on and the store it opens. Each command
//! that needs them builds a tokio runtime of its own; the read-only
//! commands that need neither never do.

use std::future::Future;

use baton_store::Store;

use super::errors::chain;
use crate::{exit_code, output, settings};

/// Runs a future on a runtime of one thread.
///
/// A drive's work is waiting: for processes, for the store, for timers.
/// What it computes between waits is short, and on one thread an attempt's
/// report reaches the loop without a cross-thread wake-up, which with two
/// workers took a noticeable share of a run of short stages. Work that
/// may block for long (a sub-workflow's drive, a worktree lock) goes to the
/// blocking pool, and sqlx's SQLite connection has a thread of its own.
pub(crate) fn block_on<T>(future: impl Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime starts")
        .block_on(future)
}

/// [`block_on`] for a command's body, which stops early with `Err(exit
/// code)` once it has said why; the exit code either way.
pub(crate) fn block_on_exit(future: impl Future<Output = Result<u8, u8>>) -> u8 {
    block_on(future).unwrap_or_else(|code| code)
}

/// Opens the store, or prints why not.
pub(crate) async fn open_store() -> Result<Store, u8> {
    let unavailable = exit_code::STORE_UNAVAILABLE;
    let location = super::or_exit(settings::store_location(&super::project_dir()), unavailable)?;
    let kept_out = crate::project::keep_state_out_of_git(location.is_in_project());
    super::or_exit(kept_out, unavailable)?;
    location.open().await.map_err(|error| {
        output::stderr_line(&format!("error: {}", chain(&error)));
        output::stderr_line("hint: check that the database file is writable, or that BATON_DATABASE_URL points at a running PostgreSQL");
        exit_code::STORE_UNAVAILABLE
    })
}
