//! A run's workspace: the reference engine's layout
//! in `<base>/<run id>`, so existing agents and prompts keep working.
//!
//! ```text
//! <base>/<run id>/
//!   manifest.json  plan.json
//!   stages/NNN-name.json      stage result envelopes
//!   dispatch/NNN-name.json    agent instructions
//!   outputs/  validation/     what stages write
//!   logs/NNN-name/<attempt>.{stdout,stderr}
//! ```

use std::io::Write as _;
use std::path::{Path, PathBuf};

use baton_workflow::plan::PlanStage;
use serde_json::Value;

/// Where a `writes_to` entry lives: entries starting with `outputs/`,
/// `validation/`, `stages/` or `dispatch/` are relative to the workspace
/// root; anything else goes under `outputs/` (the reference's prompt rule).
pub fn output_path(relative: &str) -> String {
    let rooted = ["outputs/", "validation/", "stages/", "dispatch/"];
    if rooted.iter().any(|prefix| relative.starts_with(prefix)) {
        relative.to_owned()
    } else {
        format!("outputs/{relative}")
    }
}

/// Where each of the stage's `writes_to` entries lives ([`output_path`]).
pub fn declared_outputs(stage: &PlanStage) -> Vec<String> {
    let declared = stage.spec.writes_to.iter();
    declared.map(|path| output_path(&path.value)).collect()
}

/// Where `relative` (a declared output's workspace path) really leads when
/// that is outside the workspace — through a symlinked directory or file an
/// agent planted, say — or `None` when it stays inside (or does not exist).
///
/// `outputs/` itself may be a link to a directory of the project outside
/// `.baton/` (a task's folder is a run's outputs so); anything under it is
/// then judged against that directory.
pub fn escapes(workspace: &Path, relative: &str) -> Option<PathBuf> {
    let root = std::fs::canonicalize(workspace).ok()?;
    let mut allowed = vec![root.clone()];
    let outputs = workspace.join("outputs");
    if std::fs::symlink_metadata(&outputs).is_ok_and(|metadata| metadata.is_symlink())
        && let Ok(target) = std::fs::canonicalize(&outputs)
        && let Some(state) = root.ancestors().find(|dir| dir.ends_with(".baton"))
        && let Some(project) = state.parent()
        && target.starts_with(project)
        && !target.starts_with(state)
    {
        allowed.push(target);
    }
    // The deepest part of the path that exists (a file not yet written is
    // judged by its directory).
    let mut path = workspace.join(relative.trim_end_matches('/'));
    let real = loop {
        match std::fs::canonicalize(&path) {
            Ok(real) => break real,
            Err(_) if std::fs::symlink_metadata(&path).is_ok() => {
                // A dangling link: where it points is what counts.
                let target = std::fs::read_link(&path).ok()?;
                break path.parent()?.join(target);
            }
            Err(_) => path = path.parent()?.to_path_buf(),
        }
    };
    (!allowed.iter().any(|dir| real.starts_with(dir))).then_some(real)
}

/// Creates the directory layout.
///
/// # Errors
///
/// Any I/O error.
pub fn create(root: &Path) -> std::io::Result<()> {
    for directory in ["stages", "dispatch", "outputs", "validation", "logs"] {
        std::fs::create_dir_all(root.join(directory))?;
    }
    Ok(())
}

use baton_executor::file::create_new;
pub use baton_executor::file::write_atomic;

/// Writes a file atomically but without forcing it to disk: for mirrors of
/// state whose truth is in the store (result envelopes, `manifest.json`,
/// `plan.json`), where a crash of baton may lose the file but never leaves
/// a torn one (a crash of the machine may leave it empty).
///
/// # Errors
///
/// Any I/O error; the target is then unchanged.
pub fn write_replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let parent = path.parent().unwrap_or_else(|| Path::new("."));
    if write_unnamed_then_link(parent, path, bytes).is_ok() {
        return Ok(());
    }
    let temporary = temporary_path(path);
    create_new(&temporary)?.write_all(bytes)?;
    std::fs::rename(&temporary, path)
}

/// The last component of `path` as text (lossy), empty when it has none.
pub fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `.NAME.PID.tmp` beside `path`: where this process writes a file whole
/// before it takes `path`'s name.
pub fn temporary_path(path: &Path) -> PathBuf {
    path.with_file_name(format!(".{}.{}.tmp", file_name(path), std::process::id()))
}

/// Writes `bytes` to a file with no name in `parent` (`O_TMPFILE`) and
/// then gives it the name `path`, which must not exist yet: a reader sees
/// no file or the whole file.
///
/// This is how a run's result envelopes are written, one new file per
/// stage. It is one change to the directory where a temporary name and a
/// rename are three, and each change searches a directory block that holds
/// up to a hundred names, so a run's envelopes are written faster this way.
/// Any failure (a file of that name already there, a
/// filesystem without `O_TMPFILE`, no `/proc`) leaves nothing behind, and
/// the caller falls back to the rename.
fn write_unnamed_then_link(parent: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    name_unnamed(&unnamed(parent, bytes)?, path)
}

/// A file in `parent` holding `bytes` that has no name yet (`O_TMPFILE`):
/// it vanishes when closed unless [`name_unnamed`] names it first.
pub(crate) fn unnamed(parent: &Path, bytes: &[u8]) -> std::io::Result<std::fs::File> {
    use rustix::fs::{Mode, OFlags};

    let fd = rustix::fs::open(
        parent,
        OFlags::WRONLY | OFlags::TMPFILE | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o666),
    )?;
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes)?;
    Ok(file)
}

/// Gives a file made by [`unnamed`] the name `path`, which must not exist.
pub(crate) fn name_unnamed(file: &std::fs::File, path: &Path) -> std::io::Result<()> {
    use rustix::fs::{AtFlags, CWD};

    // Linking the descriptor itself (`AT_EMPTY_PATH`) needs a capability;
    // its `/proc` name does not.
    let name = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(file));
    rustix::fs::linkat(CWD, name.as_str(), CWD, path, AtFlags::SYMLINK_FOLLOW)?;
    Ok(())
}

/// Writes JSON (2-space indent) atomically.
///
/// # Errors
///
/// Any I/O error.
pub fn write_json(path: &Path, value: &Value) -> std::io::Result<()> {
    write_atomic(path, pretty_json(value).as_bytes())
}

/// JSON as [`write_json`] writes it: 2-space indent and a final newline.
pub fn pretty_json(value: &impl serde::Serialize) -> String {
    let mut text = serde_json::to_string_pretty(value).expect("plain data");
    text.push('\n');
    text
}

/// The result envelope of a stage.
#[derive(Debug, Clone)]
pub struct Envelope<'a> {
    /// Stage name.
    pub name: &'a str,
    /// Index.
    pub index: usize,
    /// Status text.
    pub status: &'a str,
    /// Start (ms).
    pub started_at: Option<i64>,
    /// End (ms).
    pub finished_at: Option<i64>,
    /// Errors.
    pub errors: Vec<String>,
    /// `writes_to`, verbatim.
    pub output_files: Vec<String>,
    /// `reads_from`.
    pub input_stages: Vec<String>,
    /// Extra data (exit code, note).
    pub data: Value,
}

impl Envelope<'_> {
    fn duration_ms(&self) -> i64 {
        match (self.started_at, self.finished_at) {
            (Some(start), Some(end)) => end - start,
            _ => 0,
        }
    }
}

/// The envelope as the reference writes it, keys in its order. Written
/// straight from the fields: a `serde_json::Value` built first took a
/// tenth of baton's own time per stage in a run of short stages.
impl serde::Serialize for Envelope<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(11))?;
        map.serialize_entry("stage_name", self.name)?;
        map.serialize_entry("stage_index", &self.index)?;
        map.serialize_entry("status", self.status)?;
        map.serialize_entry("started_at", &self.started_at.map(utc).unwrap_or_default())?;
        map.serialize_entry(
            "finished_at",
            &self.finished_at.map(utc).unwrap_or_default(),
        )?;
        map.serialize_entry("duration_ms", &self.duration_ms())?;
        map.serialize_entry("data", &self.data)?;
        map.serialize_entry("errors", &self.errors)?;
        map.serialize_entry("output_files", &self.output_files)?;
        map.serialize_entry("input_stages", &self.input_stages)?;
        map.serialize_entry("metadata", &serde_json::Map::new())?;
        map.end()
    }
}

/// `c` where a file or branch name may hold it (`[A-Za-z0-9._-]`), else `_`.
pub(crate) fn name_char(c: char) -> char {
    if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
        c
    } else {
        '_'
    }
}

/// `dispatch/NNN-name.SUFFIX`: one of the files of the stage's dispatch
/// (`json`, `prompt.md`, `access`, …).
pub fn dispatch_file(root: &Path, stage: &PlanStage, suffix: &str) -> PathBuf {
    root.join("dispatch")
        .join(format!("{}.{suffix}", stage.file_stem()))
}

/// `stages/NNN-name.json`.
pub fn envelope_path(root: &Path, index: usize, name: &str) -> PathBuf {
    root.join("stages").join(format!("{index:03}-{name}.json"))
}

/// Milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc(ms: i64) -> String {
    let seconds = ms.div_euclid(1000);
    let days = seconds.div_euclid(86_400);
    let rest = seconds.rem_euclid(86_400);
    // Howard Hinnant's days-to-civil algorithm.
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// A filesystem-safe run id: `<workflow>-<YYYYMMDD>-<6 chars [a-z0-9]>`.
pub fn run_id(workflow: &str, now_ms: i64, entropy: u64) -> String {
    let mut slug: String = workflow
        .chars()
        .map(|character| {
            if character.is_ascii_alphanumeric() {
                character.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    while slug.contains("--") {
        slug = slug.replace("--", "-");
    }
    let slug = slug.trim_matches('-');
    let slug = if slug.is_empty() { "run" } else { slug };
    let slug: String = slug.chars().take(48).collect();
    let date: String = utc(now_ms)
        .chars()
        .filter(char::is_ascii_digit)
        .take(8)
        .collect();
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut value = entropy;
    let mut suffix = String::with_capacity(6);
    for _ in 0..6 {
        suffix.push(char::from(
            ALPHABET[usize::try_from(value % 36).expect("small")],
        ));
        value /= 36;
    }
    format!("{}-{date}-{suffix}", slug.trim_end_matches('-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_through_planted_links_escape_and_the_task_folder_link_does_not() {
        let project = tempfile::tempdir().expect("dir");
        let workspace = project.path().join(".baton/runs/r");
        create(&workspace).expect("layout");
        std::fs::create_dir_all(workspace.join("outputs/inner")).expect("dir");
        let elsewhere = tempfile::tempdir().expect("dir");
        let link = |target: &Path, name: &str| {
            std::os::unix::fs::symlink(target, workspace.join(name)).expect("link");
        };
        link(elsewhere.path(), "outputs/sub");
        link(&elsewhere.path().join("x.md"), "outputs/file.md");
        link(Path::new("inner"), "outputs/near");
        link(Path::new("/nonexistent/x"), "outputs/dangling.md");
        assert!(escapes(&workspace, "outputs/sub/a.md").is_some());
        assert!(escapes(&workspace, "outputs/sub/").is_some());
        assert!(escapes(&workspace, "outputs/file.md").is_some());
        assert!(escapes(&workspace, "outputs/dangling.md").is_some());
        assert_eq!(escapes(&workspace, "outputs/near/a.md"), None);
        assert_eq!(escapes(&workspace, "outputs/new/a.md"), None);
        assert_eq!(escapes(&workspace, "validation/v.json"), None);
        // `outputs` linked to a folder of the project (as a task's run is).
        std::fs::create_dir_all(project.path().join("tasks/t")).expect("dir");
        let task_workspace = project.path().join(".baton/tasks/t/r");
        create(&task_workspace).expect("layout");
        std::fs::remove_dir(task_workspace.join("outputs")).expect("rm");
        std::os::unix::fs::symlink("../../../../tasks/t", task_workspace.join("outputs"))
            .expect("link");
        assert_eq!(escapes(&task_workspace, "outputs/SPEC.md"), None);
        // … but not to another run's, nor out of the project.
        std::fs::remove_file(task_workspace.join("outputs")).expect("rm");
        std::os::unix::fs::symlink("../../../runs/r", task_workspace.join("outputs"))
            .expect("link");
        assert!(escapes(&task_workspace, "outputs/SPEC.md").is_some());
        std::fs::remove_file(task_workspace.join("outputs")).expect("rm");
        std::os::unix::fs::symlink(elsewhere.path(), task_workspace.join("outputs")).expect("link");
        assert!(escapes(&task_workspace, "outputs/SPEC.md").is_some());
    }

    #[test]
    fn output_paths_follow_the_reference() {
        assert_eq!(output_path("report.md"), "outputs/report.md");
        assert_eq!(output_path("findings/x.json"), "outputs/findings/x.json");
        assert_eq!(output_path("outputs/a.json"), "outputs/a.json");
        assert_eq!(output_path("validation/v.json"), "validation/v.json");
    }

    #[test]
    fn an_envelope_has_the_reference_keys_in_order() {
        let envelope = Envelope {
            name: "review \"it\"",
            index: 7,
            status: "failed",
            started_at: Some(1_764_000_000_000),
            finished_at: Some(1_764_000_001_500),
            errors: vec!["exit 1".to_owned()],
            output_files: vec!["a.md".to_owned(), "b/c.json".to_owned()],
            input_stages: vec![],
            data: serde_json::json!({"exit_code": 1}),
        };
        let expected = serde_json::json!({
            "stage_name": "review \"it\"",
            "stage_index": 7,
            "status": "failed",
            "started_at": "2025-11-24T16:00:00Z",
            "finished_at": "2025-11-24T16:00:01Z",
            "duration_ms": 1500,
            "data": {"exit_code": 1},
            "errors": ["exit 1"],
            "output_files": ["a.md", "b/c.json"],
            "input_stages": [],
            "metadata": {},
        });
        assert_eq!(
            serde_json::to_string_pretty(&envelope).expect("serializes"),
            serde_json::to_string_pretty(&expected).expect("serializes")
        );
        let unfinished = Envelope {
            started_at: None,
            finished_at: None,
            ..envelope
        };
        let text = serde_json::to_string(&unfinished).expect("serializes");
        assert!(
            text.contains(r#""started_at":"","finished_at":"","duration_ms":0"#),
            "{text}"
        );
    }

    #[test]
    fn a_replaced_file_is_whole_and_leaves_no_temporary_behind() {
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("000-a.json");
        // New (the unnamed file linked into place), then over an existing
        // file (the rename).
        write_replace(&path, b"first\n").expect("written");
        assert_eq!(std::fs::read(&path).expect("read"), b"first\n");
        write_replace(&path, b"second, longer\n").expect("replaced");
        assert_eq!(std::fs::read(&path).expect("read"), b"second, longer\n");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("listed")
            .map(|entry| entry.expect("an entry").file_name())
            .collect();
        assert_eq!(names, [std::ffi::OsString::from("000-a.json")]);
        // A missing directory is an error, not a silent loss.
        let missing = dir.path().join("gone").join("x.json");
        assert!(write_replace(&missing, b"x").is_err());
    }

    #[test]
    fn an_unnamed_file_never_replaces_an_existing_one() {
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("x.json");
        std::fs::write(&path, b"kept").expect("written");
        assert!(write_unnamed_then_link(dir.path(), &path, b"new").is_err());
        assert_eq!(std::fs::read(&path).expect("read"), b"kept");
        let fresh = dir.path().join("y.json");
        write_unnamed_then_link(dir.path(), &fresh, b"linked").expect("linked");
        assert_eq!(std::fs::read(&fresh).expect("read"), b"linked");
    }

    #[test]
    fn run_ids_are_filesystem_safe() {
        let id = run_id("Review & Fix: PR", 1_764_000_000_000, 123_456_789);
        assert!(
            id.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "{id}"
        );
        assert!(id.starts_with("review-fix-pr-2025"), "{id}");
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
    }
}
