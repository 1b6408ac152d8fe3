//! Schemathesis, for the contract tests of `baton serve`'s JSON API: it
//! reads the server's OpenAPI document, sends requests made from it, and
//! checks each answer against it.
//!
//! `scripts/test` installs the pinned version from PyPI
//! (`scripts/lib/schemathesis.sh`) and exports `BATON_TEST_SCHEMATHESIS`,
//! the path of its `st` program.

use std::path::PathBuf;

/// The `st` program, or `None` when it is not installed and
/// `BATON_TEST_SKIP` lists `schemathesis` ([`crate::needs`]).
///
/// # Panics
///
/// When it is not installed and not to be skipped.
pub fn schemathesis() -> Option<PathBuf> {
    let found = std::env::var_os("BATON_TEST_SCHEMATHESIS")
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
        .filter(|st| st.is_file());
    if found.is_none() {
        crate::needs::missing(
            crate::needs::Need::Schemathesis,
            "schemathesis's `st` program (BATON_TEST_SCHEMATHESIS)",
        );
    }
    found
}
