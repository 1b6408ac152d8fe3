//! A stage's declared outputs on disk: what they look like before its
//! process runs ([`snapshot`]), and whether the process wrote them and they
//! pass their checks ([`verify`]).

use std::path::{Path, PathBuf};

use baton_workflow::plan::PlanStage;

use crate::attempt::{Attempt, Finished};
use crate::checks;
use crate::digest::artifact;
use crate::workspace::{self, output_path};

/// Records on `finished` what [`verify`] finds of the attempt's outputs:
/// success with their hashes, or why not.
pub(crate) fn verify_attempt(
    finished: &mut Finished,
    stage: &PlanStage,
    attempt: &Attempt,
    before: &Snapshot,
) {
    match verify(stage, &attempt.workspace, before, attempt.defer_checks) {
        Ok(artifacts) => {
            finished.success = true;
            finished.artifacts = artifacts;
        }
        Err(error) => finished.error = Some(error),
    }
}

/// The declared outputs exist, were written during this attempt, and pass
/// their checks (unless `defer_checks`); returns their hashes.
pub(crate) fn verify(
    stage: &PlanStage,
    workspace: &Path,
    before: &Snapshot,
    defer_checks: bool,
) -> Result<Vec<(String, String, i64)>, String> {
    let mut missing = Vec::new();
    let mut stale = Vec::new();
    let mut artifacts = Vec::new();
    let fresh = |path: &Path, metadata: &std::fs::Metadata| {
        before.get(path) != Some(&Fingerprint::of(metadata))
    };
    let escaping: Vec<String> = stage
        .spec
        .writes_to
        .iter()
        .filter_map(|declared| {
            let relative = output_path(&declared.value);
            let real = workspace::escapes(workspace, &relative)?;
            Some(format!("{relative} (to {})", real.display()))
        })
        .collect();
    if !escaping.is_empty() {
        return Err(format!(
            "an output leads outside the workspace through a symlink: {}; baton reads and writes a stage's outputs only inside its workspace (write real files there)",
            escaping.join(", ")
        ));
    }
    for declared in &stage.spec.writes_to {
        let relative = output_path(&declared.value);
        let path = workspace.join(&relative);
        if relative.ends_with('/') {
            // A declared directory: it must hold at least one file written
            // during this attempt; every file in it is recorded.
            let files = files_under(&path, MAX_DIRECTORY_FILES);
            if files.is_empty() {
                missing.push(relative);
                continue;
            }
            if !files.iter().any(|(file, metadata)| fresh(file, metadata)) {
                stale.push(relative.clone());
            }
            for (file, _) in files {
                let bytes = std::fs::read(&file)
                    .map_err(|error| format!("cannot read output {}: {error}", file.display()))?;
                let name = file
                    .strip_prefix(workspace)
                    .unwrap_or(&file)
                    .to_string_lossy()
                    .into_owned();
                artifacts.push(artifact(name, &bytes));
            }
            continue;
        }
        match std::fs::metadata(&path) {
            Err(_) => missing.push(relative),
            Ok(metadata) if !metadata.is_file() => missing.push(relative),
            Ok(metadata) => {
                // A file older than the attempt is a leftover from an
                // earlier attempt, not this attempt's output.
                if !fresh(&path, &metadata) {
                    stale.push(relative.clone());
                }
                let bytes = std::fs::read(&path)
                    .map_err(|error| format!("cannot read output {relative}: {error}"))?;
                artifacts.push(artifact(relative, &bytes));
            }
        }
    }
    if !missing.is_empty() {
        return Err(format!("exited 0 but did not write {}", missing.join(", ")));
    }
    if !stale.is_empty() {
        return Err(format!(
            "did not write {} during this attempt (it is unchanged since before the attempt)",
            stale.join(", ")
        ));
    }
    if !defer_checks {
        let failures = failed_checks(stage, workspace);
        if !failures.is_empty() {
            return Err(format!(
                "output checks failed: {}",
                failures
                    .iter()
                    .map(describe_check)
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
    }
    Ok(artifacts)
}

/// The stage's `validates_output` checks that fail on the files as they are.
pub(crate) fn failed_checks(stage: &PlanStage, workspace: &Path) -> Vec<checks::Finding> {
    let mut failures = Vec::new();
    for entry in &stage.spec.validates_output {
        let checks: Vec<_> = entry
            .checks
            .iter()
            .map(|check| check.value.clone())
            .collect();
        let path = crate::prompt::check_path(stage, &entry.path.value);
        failures.extend(
            checks::run(workspace, &path, &checks)
                .into_iter()
                .filter(|finding| !finding.passed),
        );
    }
    failures
}

/// A failed check in messages: `path check: why`.
pub(crate) fn describe_check(finding: &checks::Finding) -> String {
    format!("{} {}: {}", finding.path, finding.check, finding.message)
}

/// What identifies one version of a file. Serializable: the driver
/// protocol keeps a stage's snapshot on disk between `next` and `complete`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Fingerprint {
    inode: u64,
    size: u64,
    modified_ns: i128,
    changed_ns: i128,
}

impl Fingerprint {
    fn of(metadata: &std::fs::Metadata) -> Fingerprint {
        use std::os::unix::fs::MetadataExt;
        Fingerprint {
            inode: metadata.ino(),
            size: metadata.size(),
            modified_ns: i128::from(metadata.mtime()) * 1_000_000_000
                + i128::from(metadata.mtime_nsec()),
            changed_ns: i128::from(metadata.ctime()) * 1_000_000_000
                + i128::from(metadata.ctime_nsec()),
        }
    }
}

/// Fingerprints of every declared output file (and every file under a
/// declared output directory) that exists.
pub(crate) type Snapshot = std::collections::HashMap<PathBuf, Fingerprint>;

pub(crate) fn snapshot(stage: &PlanStage, workspace: &Path) -> Snapshot {
    let mut snapshot = Snapshot::new();
    for declared in &stage.spec.writes_to {
        let path = workspace.join(output_path(&declared.value));
        if declared.value.ends_with('/') {
            for (file, metadata) in files_under(&path, MAX_DIRECTORY_FILES) {
                snapshot.insert(file, Fingerprint::of(&metadata));
            }
        } else if let Ok(metadata) = std::fs::metadata(&path) {
            snapshot.insert(path, Fingerprint::of(&metadata));
        }
    }
    snapshot
}

/// The most files recorded from one declared output directory.
pub(crate) const MAX_DIRECTORY_FILES: usize = 10_000;

/// Regular files under `directory` (recursively, symlinks not followed), at
/// most `limit`, in a stable order.
pub(crate) fn files_under(directory: &Path, limit: usize) -> Vec<(PathBuf, std::fs::Metadata)> {
    let mut found = Vec::new();
    let mut pending = vec![directory.to_path_buf()];
    while let Some(current) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&current) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(metadata) = std::fs::symlink_metadata(entry.path()) else {
                continue;
            };
            if metadata.is_dir() {
                pending.push(entry.path());
            } else if metadata.is_file() && found.len() < limit {
                found.push((entry.path(), metadata));
            }
        }
    }
    found.sort_by(|left, right| left.0.cmp(&right.0));
    found
}

/// Writes `{}` into every `writes_to` file of a stage skipped by `when`, so
/// readers find a file (the reference's sentinel).
pub(crate) fn write_skip_sentinels(stage: &PlanStage, workspace: &Path) -> crate::Result<()> {
    for declared in &stage.spec.writes_to {
        workspace::write_atomic(&workspace.join(output_path(&declared.value)), b"{}\n").map_err(
            |source| crate::Error::Workspace {
                path: workspace.to_path_buf(),
                source,
            },
        )?;
    }
    Ok(())
}
