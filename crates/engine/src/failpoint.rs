//! Named points where a test can make baton crash (`abort`), to prove that
//! a crash there loses nothing. The CLI arms one point from
//! `BATON_FAILPOINT` for the whole process; nothing else arms them.

use std::sync::OnceLock;

static ARMED: OnceLock<String> = OnceLock::new();

/// Arms the point named `name`: reaching it aborts the process.
pub fn arm(name: String) {
    let _ = ARMED.set(name);
}

/// Aborts the process if the point `name` is armed.
pub(crate) fn hit(name: &str) {
    if ARMED.get().is_some_and(|armed| armed == name) {
        std::process::abort();
    }
}
