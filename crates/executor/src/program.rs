//! `PATH` lookup, done by baton rather than by `exec`.
//!
//! Agents run with a cleared environment, and the C library's `execvp`
//! falls back to a built-in default path when the child has no `PATH` at
//! all. Resolving the program here, against the `PATH` the child will see
//! (or baton's own when the child gets none), makes the lookup predictable,
//! gives a clear "not found" error before anything is started, and lets
//! `baton agents check` answer "is it installed?" with the same rule.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Finds `program` the way a shell would: a name containing `/` is a path
/// (relative ones are taken from `cwd`); any other name is looked up in the
/// directories of `path`, first match wins. Only executable regular files
/// (or symlinks to them) match. Empty `PATH` entries, which a shell reads as
/// the current directory, are skipped: a stage must not run a binary its
/// worktree happens to contain by accident.
pub fn find_program(program: &str, path: Option<&OsStr>, cwd: &Path) -> Option<PathBuf> {
    if program.is_empty() {
        return None;
    }
    if program.contains('/') {
        let candidate = cwd.join(program);
        return is_executable(&candidate).then_some(candidate);
    }
    std::env::split_paths(path?)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .is_ok_and(|metadata| metadata.is_file() && metadata.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_sh_on_a_path_and_skips_missing_dirs() {
        let path = OsStr::new("/nonexistent-dir::/usr/bin:/bin");
        let found = find_program("sh", Some(path), Path::new("/")).expect("sh is installed");
        assert!(found.ends_with("sh"));
    }

    #[test]
    fn names_with_a_slash_are_paths_relative_to_cwd() {
        assert_eq!(
            find_program("./sh", None, Path::new("/bin")),
            Some(PathBuf::from("/bin/./sh"))
        );
        assert_eq!(find_program("./sh", None, Path::new("/nonexistent")), None);
        assert_eq!(find_program("sh", None, Path::new("/bin")), None);
        assert_eq!(
            find_program("", Some(OsStr::new("/bin")), Path::new("/")),
            None
        );
    }

    #[test]
    fn directories_and_plain_files_do_not_match() {
        assert_eq!(find_program("/tmp", None, Path::new("/")), None);
        assert_eq!(find_program("/proc/version", None, Path::new("/")), None);
    }
}
