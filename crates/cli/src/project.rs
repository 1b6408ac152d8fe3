//! Which project a command works on, found the way git finds a repository.
//!
//! The project is the nearest directory, from the current one up, that
//! holds `.baton/` or `baton.toml`; else the root of the git repository
//! around the current directory; else the current directory. `--project
//! DIR` or `BATON_PROJECT` names it instead. Everything baton keeps for a
//! project (its store, run workspaces, logs, worktrees, task folders,
//! `baton.toml`) is under it, so a command run from a subdirectory sees the
//! same runs as one run at the top. Paths typed on the command line (a
//! workflow file, `--workspace`) are still read from the current directory.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The project and the directory baton was started in, set once by
/// [`init`] before a command runs.
static PLACE: OnceLock<Place> = OnceLock::new();

#[derive(Debug)]
struct Place {
    cwd: PathBuf,
    project: PathBuf,
}

/// Finds the project: `chosen` (from `--project` or `BATON_PROJECT`) when
/// given, else by walking up from the current directory.
///
/// # Errors
///
/// A chosen directory that does not exist or is not a directory.
pub(crate) fn init(chosen: Option<&Path>) -> Result<(), String> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let project = match chosen {
        Some(dir) => named(&cwd.join(dir))?,
        None => discover(&cwd),
    };
    // A second call (none is made) would keep the first answer.
    let _ = PLACE.set(Place { cwd, project });
    Ok(())
}

fn place() -> &'static Place {
    PLACE.get_or_init(|| {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        Place {
            project: discover(&cwd),
            cwd,
        }
    })
}

/// The project directory.
pub(crate) fn dir() -> &'static Path {
    &place().project
}

/// The directory baton was started in.
pub(crate) fn cwd() -> &'static Path {
    &place().cwd
}

/// A directory named with `--project` or `BATON_PROJECT`, made absolute
/// without symbolic links so that paths recorded in the store compare
/// equal whichever way the project was reached.
fn named(dir: &Path) -> Result<PathBuf, String> {
    match std::fs::canonicalize(dir) {
        Ok(real) if real.is_dir() => Ok(real),
        Ok(_) => Err(format!(
            "the project {} is not a directory; give --project (or BATON_PROJECT) the directory that holds .baton/ or baton.toml",
            dir.display()
        )),
        Err(error) => Err(format!(
            "the project {} cannot be used ({error}); give --project (or BATON_PROJECT) an existing directory",
            dir.display()
        )),
    }
}

/// The nearest directory from `start` up holding `.baton/` or
/// `baton.toml`; else the nearest holding a git repository (a `.git`
/// directory with a `HEAD`, or the `.git` file of a worktree or
/// submodule — an empty `.git` directory is no repository to git either);
/// else `start`.
pub(crate) fn discover(start: &Path) -> PathBuf {
    let marked = |dir: &Path| dir.join(".baton").is_dir() || dir.join("baton.toml").is_file();
    if let Some(found) = start.ancestors().find(|dir| marked(dir)) {
        return found.to_path_buf();
    }
    if let Some(found) = start
        .ancestors()
        .find(|dir| dir.join(".git").is_file() || dir.join(".git").join("HEAD").is_file())
    {
        return found.to_path_buf();
    }
    start.to_path_buf()
}

/// A path given on the command line (relative to the current directory)
/// as the project sees it: relative to the project when it lies inside,
/// else absolute. Unchanged when baton runs at the project's top, so what
/// is recorded there reads as it always did.
pub(crate) fn from_cwd(path: &str) -> String {
    rebase(cwd(), dir(), path)
}

fn rebase(cwd: &Path, project: &Path, path: &str) -> String {
    if cwd == project || Path::new(path).is_absolute() {
        return path.to_owned();
    }
    // Lexically: the current directory has no symbolic links to see through.
    let full = baton_workflow::loader::normalize(&cwd.join(path));
    match full.strip_prefix(project) {
        Ok(inside) if !inside.as_os_str().is_empty() => inside.to_string_lossy().into_owned(),
        _ => full.to_string_lossy().into_owned(),
    }
}

/// What `.baton/.gitignore` holds: everything in the directory is
/// baton's state (the store, workspaces, logs), never a project's source.
const STATE_IGNORE: &str = "# baton's own state: never committed\n*\n";

/// Makes the project's `.baton/` (when `create`, or when it exists) and
/// gives it a `.gitignore` that ignores everything in it, so `git add -A`
/// never commits the store, logs or workspaces. A `.gitignore` the user
/// wrote is left as it is.
///
/// # Errors
///
/// The directory or the file cannot be written.
pub(crate) fn keep_state_out_of_git(create: bool) -> Result<(), String> {
    let state = dir().join(".baton");
    if create {
        std::fs::create_dir_all(&state)
            .map_err(|error| format!("cannot create {}: {error}", state.display()))?;
    } else if !state.is_dir() {
        return Ok(());
    }
    let ignore = state.join(".gitignore");
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&ignore)
    {
        Ok(mut file) => std::io::Write::write_all(&mut file, STATE_IGNORE.as_bytes())
            .map_err(|error| format!("cannot write {}: {error}", ignore.display())),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(error) => Err(format!("cannot write {}: {error}", ignore.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_marked_directory_wins_over_a_git_root_below_it() {
        let root = tempfile::tempdir().unwrap();
        let top = root.path();
        std::fs::create_dir_all(top.join(".baton")).unwrap();
        std::fs::create_dir_all(top.join("repo/.git")).unwrap();
        std::fs::create_dir_all(top.join("repo/src/deep")).unwrap();
        assert_eq!(discover(&top.join("repo/src/deep")), top);
        std::fs::write(top.join("repo/src/baton.toml"), "").unwrap();
        assert_eq!(discover(&top.join("repo/src/deep")), top.join("repo/src"));
    }

    #[test]
    fn without_a_marker_the_git_root_then_the_start_is_the_project() {
        let root = tempfile::tempdir().unwrap();
        let top = root.path();
        std::fs::create_dir_all(top.join("repo/a/b")).unwrap();
        assert_eq!(discover(&top.join("repo/a/b")), top.join("repo/a/b"));
        std::fs::write(top.join("repo/.git"), "gitdir: elsewhere").unwrap();
        assert_eq!(discover(&top.join("repo/a/b")), top.join("repo"));
        // A file named .baton is not a project's state directory.
        std::fs::write(top.join("repo/a/.baton"), "").unwrap();
        assert_eq!(discover(&top.join("repo/a/b")), top.join("repo"));
    }

    #[test]
    fn an_empty_git_directory_is_no_repository() {
        let root = tempfile::tempdir().unwrap();
        let top = root.path();
        std::fs::create_dir_all(top.join("repo/.git")).unwrap();
        std::fs::create_dir_all(top.join("repo/a")).unwrap();
        assert_eq!(discover(&top.join("repo/a")), top.join("repo/a"));
        std::fs::write(top.join("repo/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
        assert_eq!(discover(&top.join("repo/a")), top.join("repo"));
    }

    #[test]
    fn command_line_paths_are_rebased_onto_the_project() {
        let project = Path::new("/p");
        assert_eq!(rebase(project, project, "./wf.yaml"), "./wf.yaml");
        assert_eq!(
            rebase(Path::new("/p/sub"), project, "wf.yaml"),
            "sub/wf.yaml"
        );
        assert_eq!(
            rebase(Path::new("/p/sub"), project, "../w/x.yaml"),
            "w/x.yaml"
        );
        assert_eq!(
            rebase(Path::new("/p/sub"), project, "../../o.yaml"),
            "/o.yaml"
        );
        assert_eq!(
            rebase(Path::new("/p/sub"), project, "/abs.yaml"),
            "/abs.yaml"
        );
        assert_eq!(rebase(Path::new("/p/sub"), project, ".."), "/p");
    }
}
