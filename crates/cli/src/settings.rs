//! Settings read from the environment, in one place.

use std::path::Path;

/// `BATON_DATABASE_URL`: a `postgres://` URL selects PostgreSQL; otherwise
/// the embedded SQLite file `.baton/baton.db` in the current directory.
pub(crate) const DATABASE_URL: &str = "BATON_DATABASE_URL";

/// Where the store is.
pub(crate) fn store_location(project_dir: &Path) -> String {
    std::env::var(DATABASE_URL)
        .ok()
        .filter(|url| !url.trim().is_empty())
        .unwrap_or_else(|| {
            project_dir
                .join(".baton")
                .join("baton.db")
                .to_string_lossy()
                .into_owned()
        })
}
