//! What a run of the failpoint sweep ended with, and where that differs
//! from what the undisturbed run ended with.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::project::Project;

/// What a run ended with, everything a person or a later stage could see.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Ending {
    /// (status, error)
    pub(super) status: (String, Option<String>),
    /// (name, status, error, note)
    stages: Vec<(String, String, Option<String>, Option<String>)>,
    /// (stage, key, status, error)
    units: BTreeSet<(i64, String, String, Option<String>)>,
    /// (stage, cycle, id, status, severity)
    findings: Vec<(i64, i64, String, String, String)>,
    /// (stage, path, sha256)
    artifacts: Vec<(i64, String, String)>,
    /// (stage, decision, sha256 of the outputs decided on)
    gates: Vec<(i64, String, String)>,
    /// The run's governance ledger: (kind, profile, payload) of every
    /// event, sorted (results that arrive together are recorded in either
    /// order).
    ledger: Vec<(String, String, String)>,
    /// With the isolated stage: the project's branch (see [`branch`]).
    git: String,
    /// Every file of the workspace by its path there: outputs, findings,
    /// result envelopes, dispatch files, logs (see [`normalized`]).
    files: BTreeMap<String, String>,
}

pub(super) fn ending(project: &Project, run_id: &str) -> Ending {
    project
        .read(async |store| {
            let run = store.run(run_id).await.expect("run");
            let stages = store.stages(run_id).await.expect("stages");
            let units = store.units(run_id).await.expect("units");
            let findings = store.findings(run_id).await.expect("findings");
            let artifacts = store.artifacts(run_id).await.expect("artifacts");
            let gates = store.gate_decisions(run_id).await.expect("gates");
            let ledger = store.ledger_events("run", run_id).await.expect("ledger");
            let workspace = PathBuf::from(&run.workspace);
            let mut files = BTreeMap::new();
            let names = [
                (run.workspace.as_str(), "<workspace>"),
                (&project.dir.path().display().to_string(), "<project>"),
                (run_id, "<run>"),
                (&project.name, "<workflow>"),
            ];
            collect(&workspace, &workspace, &names, &mut files);
            Ending {
                status: (run.status, run.error),
                stages: stages
                    .into_iter()
                    .map(|stage| (stage.name, stage.status, stage.error, stage.note))
                    .collect(),
                units: units
                    .into_iter()
                    .map(|unit| (unit.index, unit.key, unit.status, unit.error))
                    .collect(),
                findings: findings
                    .into_iter()
                    .map(|f| (f.index, f.cycle, f.id, f.status, f.severity))
                    .collect(),
                artifacts: artifacts
                    .into_iter()
                    .map(|artifact| (artifact.index, artifact.path, artifact.sha256))
                    .collect(),
                gates: gates
                    .into_iter()
                    .map(|gate| (gate.index, gate.decision, gate.sha256))
                    .collect(),
                ledger: {
                    let mut events: Vec<_> = ledger
                        .into_iter()
                        .map(|event| {
                            let payload = event.payload.replace(run_id, "<run>");
                            (event.kind, event.profile, payload)
                        })
                        .collect();
                    events.sort();
                    events
                },
                git: branch(project, run_id),
                files,
            }
        })
        .expect("a store")
}

/// The project's branch: its commits' subjects (first parents), how many
/// commits it has, `code.txt` there, and uncommitted changes to tracked
/// files. Empty outside a git repository.
fn branch(project: &Project, run_id: &str) -> String {
    let git = |args: &[&str]| {
        #[expect(clippy::disallowed_methods, reason = "the test reads git's state")]
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(project.dir.path())
            .output()
            .expect("git runs");
        String::from_utf8_lossy(&out.stdout).replace(run_id, "<run>")
    };
    [
        git(&["log", "--format=%s", "--first-parent", "HEAD"]),
        git(&["rev-list", "--count", "HEAD"]),
        git(&["show", "HEAD:code.txt"]),
        git(&["status", "--porcelain", "--untracked-files=no"]),
    ]
    .concat()
}

fn collect(root: &Path, dir: &Path, names: &[(&str, &str)], files: &mut BTreeMap<String, String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(root, &path, names, files);
        } else {
            let relative = path
                .strip_prefix(root)
                .expect("inside")
                .display()
                .to_string();
            let bytes = std::fs::read(&path).expect("read a workspace file");
            files.insert(relative, normalized(&bytes, names));
        }
    }
}

/// A file's text without what differs from run to run: paths, names and
/// times (the keys of JSON objects that hold them).
fn normalized(bytes: &[u8], names: &[(&str, &str)]) -> String {
    fn untimed(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(map) => {
                for key in ["started_at", "finished_at", "duration_ms", "compiled_at"] {
                    map.remove(key);
                }
                map.values_mut().for_each(untimed);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(untimed),
            _ => {}
        }
    }
    let mut text = match serde_json::from_slice::<serde_json::Value>(bytes) {
        Ok(mut value) => {
            untimed(&mut value);
            serde_json::to_string_pretty(&value).expect("JSON")
        }
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    };
    for (name, placeholder) in names {
        text = text.replace(name, placeholder);
    }
    text
}

/// Where `ending` differs from `golden`, one line each.
pub(super) fn differences(golden: &Ending, ending: &Ending) -> Vec<String> {
    let mut found = Vec::new();
    let mut field = |name: &str, want: String, got: String| {
        if want != got {
            found.push(format!("{name}: {got} instead of {want}"));
        }
    };
    field(
        "status",
        format!("{:?}", golden.status),
        format!("{:?}", ending.status),
    );
    field(
        "stages",
        format!("{:?}", golden.stages),
        format!("{:?}", ending.stages),
    );
    field(
        "units",
        format!("{:?}", golden.units),
        format!("{:?}", ending.units),
    );
    field(
        "findings",
        format!("{:?}", golden.findings),
        format!("{:?}", ending.findings),
    );
    field(
        "artifacts",
        format!("{:?}", golden.artifacts),
        format!("{:?}", ending.artifacts),
    );
    field(
        "gate decisions",
        format!("{:?}", golden.gates),
        format!("{:?}", ending.gates),
    );
    if golden.git != ending.git {
        found.push(format!("git: {:?} instead of {:?}", ending.git, golden.git));
    }
    if golden.ledger != ending.ledger {
        let (mut missing, mut extra) = (golden.ledger.clone(), Vec::new());
        for event in &ending.ledger {
            match missing.iter().position(|wanted| wanted == event) {
                Some(position) => drop(missing.remove(position)),
                None => extra.push(event),
            }
        }
        found.push(format!("ledger: lacks {missing:?}, has besides {extra:?}"));
    }
    let paths: BTreeSet<&String> = golden.files.keys().chain(ending.files.keys()).collect();
    for path in paths {
        match (golden.files.get(path), ending.files.get(path)) {
            (Some(_), None) => found.push(format!("{path} is missing")),
            (None, Some(text)) => found.push(format!("{path} should not be there: {text:?}")),
            (Some(want), Some(got)) if want != got => {
                found.push(format!("{path} holds {got:?} instead of {want:?}"));
            }
            _ => {}
        }
    }
    found
}
