//! baton's own environment, as its children inherit from it: the `PATH`
//! programs are found on, the variables a profile passes through, the
//! secrets to redact and an endpoint's key. The one place in the executor
//! that reads it; what baton itself is told by it (the store, the project,
//! timings) the CLI reads in its settings.

use std::ffi::OsString;

/// A variable of baton's environment.
pub(crate) fn var(name: &str) -> Option<OsString> {
    std::env::var_os(name)
}

/// A variable of baton's environment that is valid UTF-8 and not empty.
pub(crate) fn text(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.is_empty())
}

/// Every variable of baton's environment.
pub(crate) fn all() -> impl Iterator<Item = (OsString, OsString)> {
    std::env::vars_os()
}
