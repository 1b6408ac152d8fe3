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

pub(crate) fn json_string(text: &str) -> String {
    let mut json = String::with_capacity(text.len() + 2);
    json.push('"');
    for c in text.chars() {
        match c {
            '"' => json.push_str("\\\""),
            '\\' => json.push_str("\\\\"),
            '\n' => json.push_str("\\n"),
            '\r' => json.push_str("\\r"),
            '\t' => json.push_str("\\t"),
            c if u32::from(c) < 0x20 => json.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => json.push(c),
        }
    }
    json.push('"');
    json
}
