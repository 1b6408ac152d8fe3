//! A real browser for the browser tests of `baton serve`: Debian's
//! Chromium, driven from Node by playwright-core.
//!
//! `scripts/test` provides both (`scripts/lib/chromium.sh`) and exports
//! `BATON_TEST_CHROMIUM`, the browser's path, and `BATON_TEST_PLAYWRIGHT`,
//! the `node_modules` directory holding playwright-core.

use std::path::PathBuf;

/// Where the browser and its driver are.
#[derive(Debug, Clone)]
pub struct Browser {
    /// The Chromium executable.
    pub chromium: PathBuf,
    /// The `node_modules` directory holding `playwright-core`.
    pub playwright: PathBuf,
}

/// The browser, or `None` when it is not installed and `BATON_TEST_SKIP`
/// lists `browser` ([`crate::needs`]).
///
/// # Panics
///
/// When it is not installed and not to be skipped.
pub fn browser() -> Option<Browser> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|value| !value.is_empty())
            .map(PathBuf::from)
    };
    let found = var("BATON_TEST_CHROMIUM")
        .filter(|chromium| chromium.is_file())
        .zip(
            var("BATON_TEST_PLAYWRIGHT")
                .filter(|modules| modules.join("playwright-core/package.json").is_file()),
        );
    if let Some((chromium, playwright)) = found {
        return Some(Browser {
            chromium,
            playwright,
        });
    }
    crate::needs::missing(
        crate::needs::Need::Browser,
        "a browser: Chromium and playwright-core (BATON_TEST_CHROMIUM, BATON_TEST_PLAYWRIGHT)",
    );
    None
}
