//! What the agent writes out: files (relative to the working directory, or
//! under the run's workspace as `$BATON_WORKSPACE/…`) and the JSON strings
//! in them.

use std::path::Path;

pub(crate) fn write_file(path: &Path, content: &str) -> Result<(), String> {
    // Agents start in the project directory; a test names a file of the
    // run's workspace as `$BATON_WORKSPACE/…`.
    let expanded = match (
        path.strip_prefix("$BATON_WORKSPACE"),
        std::env::var_os("BATON_WORKSPACE"),
    ) {
        (Ok(rest), Some(workspace)) => Some(Path::new(&workspace).join(rest)),
        _ => None,
    };
    let path = expanded.as_deref().unwrap_or(path);
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|error| format!("cannot create {}: {error}", parent.display()))?;
    }
    std::fs::write(path, content)
        .map_err(|error| format!("cannot write {}: {error}", path.display()))
}

/// A JSON string literal.
pub(crate) fn json_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}
