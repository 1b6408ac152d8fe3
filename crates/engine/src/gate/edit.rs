//! Rewriting a gate's editable output: the new text goes to a temporary
//! file (flushed to disk), the store swaps the output's recorded hash if it
//! is still the one read (compare-and-swap), and only then is the file
//! renamed over the output. Of two racing edits one swaps and the other
//! fails with the file untouched.
//!
//! A crash between the swap and the rename leaves a recorded hash that no
//! file has: the next resume sees the output as changed and reruns the
//! gate, which is safe.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use baton_store::{ArtifactEdit, Store};

use super::list::{self, GateEdit, ListKind};
use super::{Error, Result, find_stage};
use crate::clock;
use crate::create::sha256_hex;
use crate::workspace::output_path;

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
        .find_map(|relative| {
            let text = std::fs::read_to_string(workspace.join(&relative)).ok()?;
            let kind = list::detect(&text)?;
            Some((relative, kind, text))
        })
}

/// Applies `change` to the gate's editable output. Allowed after a
/// decision too: the decision then no longer matches the artifact, so an
/// approval goes stale and the run stops at the gate again.
///
/// # Errors
///
/// No such run or stage, not a gate, not yet succeeded, no editable
/// output, an item number out of range, a concurrent change
/// ([`Error::Changed`]), or an I/O or store failure.
pub async fn edit(store: &Store, run_id: &str, stage: &str, change: &GateEdit) -> Result<Edited> {
    let run = store.run(run_id).await?;
    let stages = store.stages(run_id).await?;
    let gate = find_stage(&run, &stages, stage)?;
    if !gate.human_gate {
        return Err(Error::NotAGate {
            stage: stage.to_owned(),
        });
    }
    if gate.stage.status != "success" {
        return Err(Error::NotReady {
            stage: stage.to_owned(),
            status: gate.stage.status.clone(),
        });
    }
    let workspace = Path::new(&run.workspace);
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
    let new_sha256 = sha256_hex(rewritten.as_bytes());
    let swap = ArtifactEdit {
        run_id: run_id.to_owned(),
        index: gate.stage.index,
        path: path.clone(),
        expected_sha256: sha256_hex(text.as_bytes()),
        new_sha256: new_sha256.clone(),
        bytes: i64::try_from(rewritten.len()).unwrap_or(i64::MAX),
        at: clock::now_ms(),
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
    std::fs::rename(&temporary, &target).map_err(|source| Error::Io {
        path: target.clone(),
        source,
    })?;
    // The rename is durable once the directory is.
    if let Some(parent) = target.parent()
        && let Ok(directory) = std::fs::File::open(parent)
    {
        let _ = directory.sync_all();
    }
    Ok(Edited {
        items: list::items(kind, &rewritten),
        path,
        kind,
        sha256: new_sha256,
    })
}

/// Writes `bytes` to a new temporary file next to `target`, flushed to disk.
fn write_temporary(target: &Path, bytes: &[u8]) -> Result<PathBuf> {
    let name = target
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
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
