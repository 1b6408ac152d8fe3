//! Writing files baton owns without leaving a torn one or following a
//! symlink planted where it writes.

use std::io::Write as _;
use std::path::Path;

/// Writes a file atomically: a temporary file in the same directory,
/// flushed to disk, then renamed over the target.
///
/// # Errors
///
/// Any I/O error; the target is then unchanged.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let parent = path.parent().unwrap_or_else(|| Path::new("."));
    std::fs::create_dir_all(parent)?;
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = parent.join(format!(".{name}.{}.tmp", std::process::id()));
    {
        let mut file = create_new(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    std::fs::rename(&temporary, path)
}

/// Creates `path` afresh: whatever was there (a stale temporary, or a
/// symlink an agent planted to redirect baton's write) is removed, not
/// followed.
///
/// # Errors
///
/// Removing what was there or creating the file failed.
pub fn create_new(path: &Path) -> std::io::Result<std::fs::File> {
    match std::fs::remove_file(path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => return Err(error),
        _ => {}
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}
