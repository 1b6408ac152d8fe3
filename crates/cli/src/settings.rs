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

/// The project's `baton.toml`: agent profiles and roles, merged over the
/// built-in profiles. A missing file means the built-in profiles only.
pub(crate) fn agent_config(project_dir: &Path) -> Result<baton_executor::profile::Config, String> {
    Ok(project_agents(project_dir)?.unwrap_or_else(baton_executor::profile::Config::builtin))
}

/// The project's `baton.toml` as [`agent_config`] reads it, or `None`
/// when there is none. Without the file no role has an agent, so a drive
/// needs no profiles: it is spared parsing the built-in ones.
pub(crate) fn project_agents(
    project_dir: &Path,
) -> Result<Option<baton_executor::profile::Config>, String> {
    let path = project_dir.join("baton.toml");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(format!("cannot read {}: {error}", path.display())),
    };
    baton_executor::profile::Config::from_toml(&text)
        .map(Some)
        .map_err(|error| format!("{}: {error}", path.display()))
}
