//! Whether agents can be contained on this machine: baton's own binary is
//! the helper that contains them.

use crate::output;

/// This binary, when it can contain agents here; otherwise says what they
/// get instead.
pub(crate) fn contain_helper() -> Option<std::path::PathBuf> {
    match contain_check() {
        Ok(helper) => Some(helper),
        Err(reason) => {
            output::stderr_line(&format!(
                "warning: agents cannot be contained on this machine ({reason}): baton compares the repository before and after each read-only agent instead, which also counts changes made by anything else meanwhile, and agents can write `.baton/`"
            ));
            None
        }
    }
}

/// This binary, if it can contain a process here, or why not.
pub(crate) fn contain_check() -> Result<std::path::PathBuf, String> {
    std::env::current_exe()
        .map_err(|error| format!("cannot find baton's own binary: {error}"))
        .and_then(|helper| baton_executor::contain::check(&helper).map(|()| helper))
}
