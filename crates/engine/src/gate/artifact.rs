//! A gate's artifact: the files its stage declared in `writes_to`, their
//! hashes, and the one hash a decision is bound to.

use std::path::Path;

use crate::digest::sha256_hex;
use crate::workspace::output_path;

/// Most files hashed under one declared directory.
const MAX_DIRECTORY_FILES: usize = 10_000;

/// What stands for a file that is missing when the artifact is hashed.
const MISSING: &str = "missing";

/// The workspace-relative files of a gate's artifact with their hashes,
/// sorted by path: each declared file (`missing` when it is absent) and
/// every file under each declared directory.
pub(crate) fn files(workspace: &Path, writes_to: &[String]) -> Vec<(String, String)> {
    let mut files = Vec::new();
    for declared in writes_to {
        let relative = output_path(declared);
        if relative.ends_with('/') {
            let mut found = Vec::new();
            collect(
                workspace,
                &workspace.join(&relative),
                &mut found,
                MAX_DIRECTORY_FILES,
            );
            files.extend(found);
        } else {
            let hash = std::fs::read(workspace.join(&relative))
                .map_or_else(|_| MISSING.to_owned(), |bytes| sha256_hex(&bytes));
            files.push((relative, hash));
        }
    }
    files.sort();
    files.dedup();
    files
}

fn collect(workspace: &Path, directory: &Path, out: &mut Vec<(String, String)>, budget: usize) {
    let Ok(entries) = std::fs::read_dir(directory) else {
        return;
    };
    let mut paths: Vec<_> = entries
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.path())
        .collect();
    paths.sort();
    for path in paths {
        if out.len() >= budget {
            return;
        }
        if path.is_dir() {
            collect(workspace, &path, out, budget);
        } else if let Ok(bytes) = std::fs::read(&path) {
            let relative = path
                .strip_prefix(workspace)
                .unwrap_or(&path)
                .to_string_lossy()
                .into_owned();
            out.push((relative, sha256_hex(&bytes)));
        }
    }
}

/// The hash a decision is bound to: SHA-256 over the sorted `path NUL
/// sha256 LF` lines of the artifact's files, so renaming, changing, adding
/// or removing any file changes it.
pub(crate) fn hash(files: &[(String, String)]) -> String {
    let mut text = String::new();
    for (path, sha) in files {
        text.push_str(path);
        text.push('\0');
        text.push_str(sha);
        text.push('\n');
    }
    sha256_hex(text.as_bytes())
}

/// The artifact hash of a gate whose stage writes `writes_to`, from the files now.
pub(crate) fn current_hash(workspace: &Path, writes_to: &[String]) -> String {
    hash(&files(workspace, writes_to))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_covers_every_file_and_its_content() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("outputs/notes")).unwrap();
        std::fs::write(root.join("outputs/plan.json"), "[1]").unwrap();
        std::fs::write(root.join("outputs/notes/a.md"), "a").unwrap();
        let writes = ["plan.json".to_owned(), "notes/".to_owned()];
        let listed = files(root, &writes);
        assert_eq!(
            listed
                .iter()
                .map(|(path, _)| path.as_str())
                .collect::<Vec<_>>(),
            ["outputs/notes/a.md", "outputs/plan.json"]
        );
        let before = current_hash(root, &writes);
        assert_eq!(before, current_hash(root, &writes), "stable");
        std::fs::write(root.join("outputs/notes/b.md"), "b").unwrap();
        let added = current_hash(root, &writes);
        assert_ne!(before, added);
        std::fs::write(root.join("outputs/plan.json"), "[2]").unwrap();
        assert_ne!(added, current_hash(root, &writes));
        std::fs::remove_file(root.join("outputs/plan.json")).unwrap();
        assert!(
            files(root, &writes).contains(&("outputs/plan.json".to_owned(), MISSING.to_owned()))
        );
    }
}
