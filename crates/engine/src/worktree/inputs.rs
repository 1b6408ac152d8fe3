//! The worktree's `inputs/`: upstream outputs copied in, the stage's
//! outputs copied back out.

use std::path::{Path, PathBuf};

use baton_workflow::plan::PlanStage;

use super::place::Place;
use crate::workspace::{self, output_path};

/// Recreates `inputs/` with every declared output and result file of the
/// stage's upstream stages (`depends_on` and `reads_from`).
pub(super) fn fill_inputs(
    stage: &PlanStage,
    place: &Place<'_>,
    inputs: &Path,
) -> Result<(), String> {
    if inputs.exists() {
        std::fs::remove_dir_all(inputs)
            .map_err(|error| format!("cannot clear {}: {error}", inputs.display()))?;
    }
    std::fs::create_dir_all(inputs.join("stages"))
        .map_err(|error| format!("cannot create {}: {error}", inputs.display()))?;
    // Ignores everything in the directory, itself included, so an agent's
    // `git add -A` never commits the inputs or its outputs.
    workspace::write_atomic(&inputs.join(".gitignore"), b"*\n")
        .map_err(|error| format!("cannot write inputs/.gitignore: {error}"))?;
    let mut upstream: Vec<usize> = stage
        .depends_on
        .iter()
        .chain(&stage.reads_from)
        .copied()
        .collect();
    upstream.sort_unstable();
    upstream.dedup();
    let stages_dir = place.workspace.join("stages");
    let results: Vec<PathBuf> = std::fs::read_dir(&stages_dir)
        .map(|entries| entries.flatten().map(|entry| entry.path()).collect())
        .unwrap_or_default();
    for index in upstream {
        let Some(source) = place.plan.stages.get(index) else {
            continue;
        };
        for declared in &source.spec.writes_to {
            let relative = output_path(&declared.value);
            copy(&place.workspace.join(&relative), &inputs.join(&relative))?;
        }
        // The stage's result file, and its fan-out children's.
        let stem = source.file_stem();
        for result in &results {
            let name = crate::workspace::file_name(result);
            if name.starts_with(&stem) && name.ends_with(".json") {
                copy(result, &inputs.join("stages").join(&name))?;
            }
        }
    }
    Ok(())
}

/// Copies a regular file, or the regular files under a directory; symlinks
/// are not followed and a missing source copies nothing.
pub(super) fn copy(from: &Path, to: &Path) -> Result<(), String> {
    let Ok(metadata) = std::fs::symlink_metadata(from) else {
        return Ok(());
    };
    if metadata.is_file() {
        let bytes = std::fs::read(from)
            .map_err(|error| format!("cannot read {}: {error}", from.display()))?;
        return workspace::write_atomic(to, &bytes)
            .map_err(|error| format!("cannot write {}: {error}", to.display()));
    }
    if metadata.is_dir() {
        let entries = std::fs::read_dir(from)
            .map_err(|error| format!("cannot read {}: {error}", from.display()))?;
        for entry in entries.flatten() {
            copy(&entry.path(), &to.join(entry.file_name()))?;
        }
    }
    Ok(())
}
