//! Rewriting a gate's editable output: the new text goes to a temporary
//! file (flushed to disk), the store swaps the output's recorded hash if it
//! is still the one read (compare-and-swap), and only then is the file
//! renamed over the output. Of two racing edits one swaps and the other
//! fails with the file untouched.
//!
//! The person's edit is durable from the swap on: a crash between the swap
//! and the rename leaves the recorded hash and a flushed temporary file
//! that holds it, and [`finish_interrupted`] (run by every resume and every
//! edit) renames it into place, so the gate is not run again and an
//! approval given on the edit stays valid. A temporary whose hash was never
//! recorded is an edit that did not happen, and is removed. Temporaries of
//! a process that still runs are its edits in progress, and are left alone.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use baton_store::{ArtifactEdit, Store};

use super::error::{Error, Result};
use super::list::{self, GateEdit, ListKind};
use super::stage::find_gate;
use crate::clock;
use crate::digest::sha256_hex;
use crate::workspace::{self, output_path};

/// What an edit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edited {
    /// The output rewritten (workspace-relative).
    pub path: String,
    /// Its kind of list.
    pub kind: ListKind,
    /// Its items now.
    pub items: Vec<String>,
    /// The file's new hash.
    pub sha256: String,
}

/// The first declared output file that holds a list: (workspace-relative
/// path, kind, text).
pub(crate) fn editable(
    workspace: &Path,
    writes_to: &[String],
) -> Option<(String, ListKind, String)> {
    writes_to
        .iter()
        .map(|declared| output_path(declared))
        .filter(|relative| !relative.ends_with('/'))
        // Never one that leads outside the workspace through a symlink: an
        // edit would rewrite whatever it points at.
        .filter(|relative| crate::workspace::escapes(workspace, relative).is_none())
        .find_map(|relative| {
            let text = std::fs::read_to_string(workspace.join(&relative)).ok()?;
            let kind = list::detect(&text)?;
            Some((relative, kind, text))
        })
}

/// Applies `change` to the gate's editable output, as `by` (recorded with
/// the edit's event). Allowed after a decision too: the decision then no longer matches the artifact, so an
/// approval goes stale and the run stops at the gate again.
///
/// # Errors
///
/// No such run or stage, not a gate, not yet succeeded, no editable
/// output, an item number out of range, a concurrent change
/// ([`Error::Changed`]), or an I/O or store failure.
pub async fn edit(
    store: &Store,
    run_id: &str,
    stage: &str,
    change: &GateEdit,
    by: &str,
) -> Result<Edited> {
    let run = store.run(run_id).await?;
    let stages = store.stages(run_id).await?;
    let gate = find_gate(&run, &stages, stage)?.succeeded()?;
    let workspace = Path::new(&run.workspace);
    finish_interrupted(workspace, &store.artifacts(run_id).await?);
    let (path, kind, text) =
        editable(workspace, &gate.writes_to).ok_or_else(|| Error::NotEditable {
            stage: stage.to_owned(),
            outputs: gate
                .writes_to
                .iter()
                .map(|declared| output_path(declared))
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    let rewritten = list::apply(kind, &text, change).map_err(|source| Error::Edit {
        path: path.clone(),
        source,
    })?;
    let target = workspace.join(&path);
    let temporary = write_temporary(&target, rewritten.as_bytes())?;
    crate::failpoint::hit("gate-edit:written");
    let new_sha256 = sha256_hex(rewritten.as_bytes());
    let swap = ArtifactEdit {
        run_id: run_id.to_owned(),
        index: gate.stage.index,
        path: path.clone(),
        expected_sha256: sha256_hex(text.as_bytes()),
        new_sha256: new_sha256.clone(),
        bytes: i64::try_from(rewritten.len()).unwrap_or(i64::MAX),
        at: clock::now_ms(),
        by: by.to_owned(),
    };
    let swapped = match store.replace_artifact(&swap).await {
        Ok(swapped) => swapped,
        Err(error) => {
            let _ = std::fs::remove_file(&temporary);
            return Err(error.into());
        }
    };
    if !swapped {
        let _ = std::fs::remove_file(&temporary);
        return Err(Error::Changed { path });
    }
    crate::failpoint::hit("gate-edit:swapped");
    std::fs::rename(&temporary, &target).map_err(|source| Error::Io {
        path: target.clone(),
        source,
    })?;
    crate::failpoint::hit("gate-edit:renamed");
    sync_directory(&target);
    Ok(Edited {
        items: list::items(kind, &rewritten),
        path,
        kind,
        sha256: new_sha256,
    })
}

/// The rename is durable once the directory is.
fn sync_directory(target: &Path) {
    if let Some(parent) = target.parent()
        && let Ok(directory) = std::fs::File::open(parent)
    {
        let _ = directory.sync_all();
    }
}

/// Completes edits a crash interrupted: for each recorded output whose file
/// does not hold the recorded hash, a gate-edit temporary beside it that
/// does is renamed into place; temporaries no record names are removed.
pub(crate) fn finish_interrupted(workspace: &Path, artifacts: &[baton_store::ArtifactRow]) {
    for artifact in artifacts {
        let target = workspace.join(&artifact.path);
        let (Some(parent), Some(name)) = (target.parent(), target.file_name()) else {
            continue;
        };
        let prefix = format!(".{}.gate-edit.", name.to_string_lossy());
        let Ok(entries) = std::fs::read_dir(parent) else {
            continue;
        };
        // A temporary of a process still running is its edit in progress.
        let temporaries: Vec<PathBuf> = entries
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| {
                path.file_name().is_some_and(|file| {
                    file.to_string_lossy()
                        .strip_prefix(&prefix)
                        .is_some_and(|rest| !writer_alive(rest))
                })
            })
            .collect();
        if temporaries.is_empty() {
            continue;
        }
        let holds = |path: &Path| {
            std::fs::read(path).is_ok_and(|bytes| sha256_hex(&bytes) == artifact.sha256)
        };
        let settled = holds(&target);
        for temporary in temporaries {
            if !settled && holds(&temporary) && std::fs::rename(&temporary, &target).is_ok() {
                sync_directory(&target);
            } else {
                let _ = std::fs::remove_file(&temporary);
            }
        }
    }
}

/// Whether the process named in a temporary's name (`PID.ENTROPY.tmp`,
/// after the prefix) still runs.
fn writer_alive(rest: &str) -> bool {
    rest.split('.')
        .next()
        .and_then(|pid| pid.parse::<u32>().ok())
        .is_some_and(|pid| crate::owner::start_time(pid).is_some())
}

/// Writes `bytes` to a new temporary file next to `target`, flushed to disk.
fn write_temporary(target: &Path, bytes: &[u8]) -> Result<PathBuf> {
    let name = workspace::file_name(target);
    let temporary = target.with_file_name(format!(
        ".{name}.gate-edit.{}.{}.tmp",
        std::process::id(),
        clock::entropy()
    ));
    let io = |source| Error::Io {
        path: temporary.clone(),
        source,
    };
    let mut file = std::fs::File::create_new(&temporary).map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    file.sync_all().map_err(io)?;
    Ok(temporary)
}
