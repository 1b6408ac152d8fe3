//! A gate's artifact: the files its stage declared in `writes_to`, their
//! hashes, and the one hash a decision is bound to.

use std::path::Path;

use baton_store::DecidedOutput;

use crate::digest::sha256_hex;
use crate::workspace::output_path;

/// Most files hashed under one declared directory.
const MAX_DIRECTORY_FILES: usize = 10_000;

/// What stands for a file that is missing when the artifact is hashed.
pub(crate) const MISSING: &str = "missing";

/// Most bytes of one output kept with a decision.
pub(crate) const KEPT_PER_OUTPUT: usize = 64 * 1024;
/// Most bytes of all of a decision's outputs kept with it.
const KEPT_PER_DECISION: usize = 1024 * 1024;

/// The workspace-relative files of a gate's artifact with their hashes,
/// sorted by path: each declared file (`missing` when it is absent) and
/// every file under each declared directory.
pub(crate) fn files(workspace: &Path, writes_to: &[String]) -> Vec<(String, String)> {
    let mut files = Vec::new();
    visit(workspace, writes_to, &mut |path, bytes| {
        files.push((path, bytes.map_or_else(|| MISSING.to_owned(), sha256_hex)));
    });
    files.sort();
    files.dedup();
    files
}

/// The artifact as a decision keeps it: its hash (as [`current_hash`]
/// gives it) and each file with the start of its text, read once, so the
/// text kept is the text hashed. Each file keeps up to
/// [`KEPT_PER_OUTPUT`] bytes while the decision's [`KEPT_PER_DECISION`]
/// last; `truncated` says when less than the whole file was kept.
pub(crate) fn snapshot(workspace: &Path, writes_to: &[String]) -> (String, Vec<DecidedOutput>) {
    let mut room = KEPT_PER_DECISION;
    let mut outputs = Vec::new();
    visit(workspace, writes_to, &mut |path, bytes| {
        let Some(bytes) = bytes else {
            outputs.push(DecidedOutput {
                path,
                sha256: MISSING.to_owned(),
                content: None,
                truncated: false,
            });
            return;
        };
        let keep = bytes.len().min(KEPT_PER_OUTPUT).min(room);
        room -= keep;
        let kept = bytes.get(..keep).unwrap_or_default();
        outputs.push(DecidedOutput {
            path,
            sha256: sha256_hex(bytes),
            content: (keep > 0 || bytes.is_empty())
                .then(|| String::from_utf8_lossy(kept).into_owned()),
            truncated: keep < bytes.len(),
        });
    });
    outputs.sort_by(|a, b| (&a.path, &a.sha256).cmp(&(&b.path, &b.sha256)));
    outputs.dedup_by(|a, b| a.path == b.path && a.sha256 == b.sha256);
    let files: Vec<(String, String)> = outputs
        .iter()
        .map(|output| (output.path.clone(), output.sha256.clone()))
        .collect();
    (hash(&files), outputs)
}

/// Calls `each` with every file of the artifact: its workspace-relative
/// path and its bytes, `None` for a declared file that is missing.
fn visit(workspace: &Path, writes_to: &[String], each: &mut dyn FnMut(String, Option<&[u8]>)) {
    for declared in writes_to {
        let relative = output_path(declared);
        if relative.ends_with('/') {
            let mut budget = MAX_DIRECTORY_FILES;
            collect(workspace, &workspace.join(&relative), each, &mut budget);
        } else {
            let bytes = std::fs::read(workspace.join(&relative)).ok();
            each(relative, bytes.as_deref());
        }
    }
}

fn collect(
    workspace: &Path,
    directory: &Path,
    each: &mut dyn FnMut(String, Option<&[u8]>),
    budget: &mut usize,
) {
    let Ok(entries) = std::fs::read_dir(directory) else {
        return;
    };
    let mut paths: Vec<_> = entries
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.path())
        .collect();
    paths.sort();
    for path in paths {
        if *budget == 0 {
            return;
        }
        if path.is_dir() {
            collect(workspace, &path, each, budget);
        } else if let Ok(bytes) = std::fs::read(&path) {
            let relative = path
                .strip_prefix(workspace)
                .unwrap_or(&path)
                .to_string_lossy()
                .into_owned();
            *budget -= 1;
            each(relative, Some(&bytes));
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
        assert_eq!(snapshot(root, &writes).0, current_hash(root, &writes));
    }

    #[test]
    fn a_snapshot_keeps_the_start_of_each_file_and_says_when_it_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("outputs/many")).unwrap();
        std::fs::write(root.join("outputs/plan.md"), "- a\n").unwrap();
        let big = "x".repeat(KEPT_PER_OUTPUT + 1);
        for name in 0..20 {
            std::fs::write(root.join(format!("outputs/many/{name:02}.txt")), &big).unwrap();
        }
        let writes = [
            "plan.md".to_owned(),
            "many/".to_owned(),
            "gone.md".to_owned(),
        ];
        let (hash, kept) = snapshot(root, &writes);
        assert_eq!(hash, current_hash(root, &writes));
        assert_eq!(kept.len(), 22);
        let plan = kept
            .iter()
            .find(|output| output.path == "outputs/plan.md")
            .unwrap();
        assert_eq!(
            (plan.content.as_deref(), plan.truncated),
            (Some("- a\n"), false)
        );
        let gone = kept
            .iter()
            .find(|output| output.path == "outputs/gone.md")
            .unwrap();
        assert_eq!(
            (gone.sha256.as_str(), gone.content.as_ref()),
            (MISSING, None)
        );
        let many: Vec<_> = kept
            .iter()
            .filter(|output| output.path.contains("many/"))
            .collect();
        assert!(many.iter().all(|output| output.truncated));
        // Each is cut to its share, and the decision's whole is bounded.
        let total: usize = kept
            .iter()
            .filter_map(|o| o.content.as_ref())
            .map(String::len)
            .sum();
        assert!(total <= KEPT_PER_DECISION, "{total}");
        assert_eq!(
            many[0].content.as_ref().map(String::len),
            Some(KEPT_PER_OUTPUT)
        );
        assert_eq!(many[19].content, None, "nothing left for the last");
    }
}
