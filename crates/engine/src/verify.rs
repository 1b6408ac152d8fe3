//! Whether a run's recorded outputs are still what was recorded: every
//! output of a succeeded stage was hashed (SHA-256) when its result was
//! recorded; a file whose bytes hash differently now has changed, one that
//! cannot be read was deleted. `baton verify` reports it; `baton resume`
//! runs those stages, and what depends on them, again
//! (`reconcile::stale_stages`).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use baton_store::{ArtifactRow, StageRow, Store};
use serde::Serialize;

use crate::Result;
use crate::digest::sha256_hex;

/// A recorded output as it is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputState {
    /// The file's bytes hash as recorded.
    Intact,
    /// The file's bytes hash differently.
    Changed,
    /// The file cannot be read (deleted, or replaced by a directory).
    Deleted,
}

impl OutputState {
    /// The word used in reports and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            OutputState::Intact => "intact",
            OutputState::Changed => "changed",
            OutputState::Deleted => "deleted",
        }
    }
}

/// How a recorded output of `workspace` compares with its record.
pub(crate) fn state_of(workspace: &Path, artifact: &ArtifactRow) -> OutputState {
    match std::fs::read(workspace.join(&artifact.path)) {
        Err(_) => OutputState::Deleted,
        Ok(bytes) if sha256_hex(&bytes) == artifact.sha256 => OutputState::Intact,
        Ok(_) => OutputState::Changed,
    }
}

/// One recorded output of a succeeded stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Output {
    /// The stage that wrote it.
    pub stage: String,
    /// Workspace-relative path.
    pub path: String,
    /// How it compares with its record.
    pub state: OutputState,
}

/// A stage a resume runs again, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rerun {
    /// The stage.
    pub stage: String,
    /// Why: its output changed or was deleted, or it depends on one that reruns.
    pub why: String,
}

/// What [`verify`] found.
#[derive(Debug, Clone, Serialize)]
pub struct Verification {
    /// The run.
    pub run_id: String,
    /// Its status.
    pub status: String,
    /// Its workspace.
    pub workspace: PathBuf,
    /// Every recorded output of its succeeded stages, in stage order.
    pub outputs: Vec<Output>,
    /// The stages `baton resume` would run again, in stage order.
    pub rerun: Vec<Rerun>,
}

impl Verification {
    /// Whether every recorded output is as recorded.
    pub fn intact(&self) -> bool {
        self.outputs
            .iter()
            .all(|output| output.state == OutputState::Intact)
    }
}

/// Compares the recorded outputs of `run_id`'s succeeded stages with the
/// files in its workspace. Reads the store and the files; changes nothing.
///
/// # Errors
///
/// No such run, or the store fails.
pub async fn verify(store: &Store, run_id: &str) -> Result<Verification> {
    let run = store.run(run_id).await?;
    let stages = store.stages(run_id).await?;
    let artifacts = store.artifacts(run_id).await?;
    let workspace = PathBuf::from(&run.workspace);
    let succeeded: HashMap<i64, &StageRow> = stages
        .iter()
        .filter(|stage| stage.status == "success")
        .map(|stage| (stage.index, stage))
        .collect();
    let outputs: Vec<Output> = artifacts
        .iter()
        .filter_map(|artifact| {
            let stage = succeeded.get(&artifact.index)?;
            Some(Output {
                stage: stage.name.clone(),
                path: artifact.path.clone(),
                state: state_of(&workspace, artifact),
            })
        })
        .collect();
    let rerun = reruns(&stages, &outputs, &dependants(&run.plan));
    Ok(Verification {
        run_id: run.run_id,
        status: run.status,
        workspace,
        outputs,
        rerun,
    })
}

/// The stages with a changed or deleted output, then every recorded
/// (not pending) stage that depends on one of them, in stage order: what
/// `reconcile::stale_stages` resets on a resume.
fn reruns(
    stages: &[StageRow],
    outputs: &[Output],
    dependants: &HashMap<String, Vec<String>>,
) -> Vec<Rerun> {
    let mut why: HashMap<&str, String> = HashMap::new();
    for output in outputs {
        if output.state != OutputState::Intact && !why.contains_key(output.stage.as_str()) {
            why.insert(
                &output.stage,
                format!(
                    "recorded output {} {} since it was recorded",
                    output.path,
                    if output.state == OutputState::Deleted {
                        "was deleted"
                    } else {
                        "changed"
                    }
                ),
            );
        }
    }
    let mut queue: Vec<&str> = why.keys().copied().collect();
    let mut seen: HashSet<&str> = queue.iter().copied().collect();
    while let Some(name) = queue.pop() {
        for dependant in dependants.get(name).into_iter().flatten() {
            let dependant = dependant.as_str();
            if seen.insert(dependant) {
                why.entry(dependant)
                    .or_insert_with(|| format!("depends on {name}, which reruns"));
                queue.push(dependant);
            }
        }
    }
    stages
        .iter()
        .filter(|stage| stage.status != "pending")
        .filter_map(|stage| {
            Some(Rerun {
                stage: stage.name.clone(),
                why: why.remove(stage.name.as_str())?,
            })
        })
        .collect()
}

/// Each stage's direct dependants, by name, from the plan a run recorded
/// (so it holds when the workflow file has changed or gone since).
pub(crate) fn dependants(plan: &str) -> HashMap<String, Vec<String>> {
    let plan: serde_json::Value = serde_json::from_str(plan).unwrap_or_default();
    let mut dependants: HashMap<String, Vec<String>> = HashMap::new();
    if let Some(details) = plan
        .get("stage_details")
        .and_then(serde_json::Value::as_object)
    {
        for (name, detail) in details {
            for dependency in detail
                .get("depends_on")
                .and_then(serde_json::Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(serde_json::Value::as_str)
            {
                dependants
                    .entry(dependency.to_owned())
                    .or_default()
                    .push(name.clone());
            }
        }
    }
    dependants
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(index: i64, name: &str, status: &str) -> StageRow {
        StageRow {
            index,
            name: name.to_owned(),
            status: status.to_owned(),
            attempts: 1,
            started_at: None,
            finished_at: None,
            error: None,
            note: None,
        }
    }

    #[test]
    fn a_changed_output_reruns_its_stage_and_every_recorded_dependant() {
        let plan = r#"{"stage_details": {
            "a": {"depends_on": []}, "b": {"depends_on": ["a"]},
            "c": {"depends_on": ["b"]}, "d": {"depends_on": ["a"]}, "e": {"depends_on": []}
        }}"#;
        let stages = [
            row(0, "a", "success"),
            row(1, "b", "success"),
            row(2, "c", "success"),
            row(3, "d", "pending"),
            row(4, "e", "success"),
        ];
        let output = |stage: &str, state| Output {
            stage: stage.to_owned(),
            path: format!("outputs/{stage}.txt"),
            state,
        };
        let outputs = [
            output("a", OutputState::Changed),
            output("b", OutputState::Intact),
            output("e", OutputState::Intact),
        ];
        let rerun = reruns(&stages, &outputs, &dependants(plan));
        let names: Vec<(&str, &str)> = rerun
            .iter()
            .map(|rerun| (rerun.stage.as_str(), rerun.why.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                (
                    "a",
                    "recorded output outputs/a.txt changed since it was recorded"
                ),
                ("b", "depends on a, which reruns"),
                ("c", "depends on b, which reruns"),
            ],
            "a pending dependant has nothing to rerun; an unrelated stage stays"
        );
        assert!(reruns(&stages, &outputs[1..], &dependants(plan)).is_empty());
    }

    #[test]
    fn an_output_is_intact_changed_or_deleted() {
        let directory = tempfile::tempdir().expect("temp dir");
        std::fs::write(directory.path().join("f"), "x").expect("write");
        let artifact = |sha256: String| ArtifactRow {
            index: 0,
            path: "f".to_owned(),
            sha256,
            bytes: 1,
        };
        let recorded = artifact(sha256_hex(b"x"));
        assert_eq!(state_of(directory.path(), &recorded), OutputState::Intact);
        assert_eq!(
            state_of(directory.path(), &artifact(sha256_hex(b"y"))),
            OutputState::Changed
        );
        std::fs::remove_file(directory.path().join("f")).expect("remove");
        assert_eq!(state_of(directory.path(), &recorded), OutputState::Deleted);
    }
}
