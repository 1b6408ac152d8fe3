//! `PATH` lookup, done by baton rather than by `exec`.
//!
//! Agents run with a cleared environment, and the C library's `execvp`
//! falls back to a built-in default path when the child has no `PATH` at
//! all. Resolving the program here, against the `PATH` the child will see
//! (or baton's own when the child gets none), makes the lookup predictable,
//! gives a clear "not found" error before anything is started, and lets
//! `baton agents check` answer "is it installed?" with the same rule.

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

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

/// [`find_program`] for a process about to start, remembering what a bare
/// name resolved to on a given `PATH` for [`LOOKUP_TTL`].
///
/// Looking `true` up on a `PATH` of ten directories costs ten `stat` calls,
/// a tenth of what baton itself spends starting a one-line stage. A shell
/// remembers its lookups too (`hash`); the difference here is that an entry
/// lives only a second, so a program installed earlier on the `PATH`, or
/// removed, is seen as soon as a shell started a second later would see it.
/// Names with a `/` and names not found are never remembered.
pub(crate) fn find_program_for_start(
    program: &str,
    path: Option<&OsStr>,
    cwd: &Path,
) -> Option<PathBuf> {
    let Some(path) = path.filter(|_| !program.contains('/')) else {
        return find_program(program, path, cwd);
    };
    let now = Instant::now();
    let mut lookups = LOOKUPS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    lookups.retain(|lookup| now.duration_since(lookup.at) < LOOKUP_TTL);
    if let Some(lookup) = lookups
        .iter()
        .find(|lookup| lookup.program == program && lookup.path == path)
    {
        return Some(lookup.found.clone());
    }
    // Looked up under the lock: stages starting side by side on one
    // runtime thread never contend for it.
    let found = find_program(program, Some(path), cwd)?;
    if lookups.len() < MAX_LOOKUPS {
        lookups.push(Lookup {
            program: program.to_owned(),
            path: path.to_owned(),
            found: found.clone(),
            at: now,
        });
    }
    Some(found)
}

/// How long [`find_program_for_start`] trusts a lookup.
const LOOKUP_TTL: Duration = Duration::from_secs(1);

/// At most this many distinct lookups are remembered at once.
const MAX_LOOKUPS: usize = 32;

struct Lookup {
    program: String,
    path: OsString,
    found: PathBuf,
    at: Instant,
}

static LOOKUPS: Mutex<Vec<Lookup>> = Mutex::new(Vec::new());

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
    fn a_remembered_lookup_expires() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = std::env::join_paths([dir.path()]).expect("a path");
        let program = dir.path().join("baton-lookup-probe");
        let run = |cwd: &Path| find_program_for_start("baton-lookup-probe", Some(&path), cwd);
        assert_eq!(run(dir.path()), None, "not there yet, and not remembered");
        std::fs::write(&program, "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        assert_eq!(run(dir.path()), Some(program.clone()));
        std::fs::remove_file(&program).expect("remove");
        assert_eq!(run(dir.path()), Some(program.clone()), "remembered");
        std::thread::sleep(LOOKUP_TTL);
        assert_eq!(run(dir.path()), None, "forgotten after a second");
    }

    #[test]
    fn directories_and_plain_files_do_not_match() {
        assert_eq!(find_program("/tmp", None, Path::new("/")), None);
        assert_eq!(find_program("/proc/version", None, Path::new("/")), None);
    }
}
