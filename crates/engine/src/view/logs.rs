//! Where a run's logs are: each stage's (or unit's) latest attempt's
//! standard output and error, under the workspace's `logs/`.

use std::path::{Path, PathBuf};

fn log_files(workspace: &Path, index: i64, name: &str, attempt: i64) -> (PathBuf, PathBuf) {
    let directory = workspace.join("logs").join(format!("{index:03}-{name}"));
    (
        directory.join(format!("{attempt}.stdout")),
        directory.join(format!("{attempt}.stderr")),
    )
}

/// One log source: a stage's latest attempt, or a unit's.
#[derive(Debug)]
pub struct LogSource {
    /// The stage's name, or the unit's label (`stage[key]`).
    pub label: String,
    /// The attempt the files are of.
    pub attempt: i64,
    /// Its standard output.
    pub stdout: PathBuf,
    /// Its standard error.
    pub stderr: PathBuf,
}

/// The latest attempt's logs of every stage that ran (or of the one asked
/// for, by stage name or unit label `stage[key]`); a stage run as units
/// (fan-out children, validators) shows each unit's.
pub fn sources(
    workspace: &Path,
    stages: &[baton_store::StageRow],
    units: &[baton_store::UnitRow],
    wanted: Option<&str>,
) -> Vec<LogSource> {
    let mut sources = Vec::new();
    for stage in stages {
        let own: Vec<&baton_store::UnitRow> = units
            .iter()
            .filter(|unit| unit.index == stage.index)
            .collect();
        let stage_wanted = wanted.is_none_or(|wanted| wanted == stage.name);
        if own.is_empty() {
            if stage.attempts > 0 && stage_wanted {
                let (stdout, stderr) =
                    log_files(workspace, stage.index, &stage.name, stage.attempts);
                sources.push(LogSource {
                    label: stage.name.clone(),
                    attempt: stage.attempts,
                    stdout,
                    stderr,
                });
            }
            continue;
        }
        for unit in own {
            if unit.attempts == 0 || !(stage_wanted || wanted == Some(unit.label.as_str())) {
                continue;
            }
            let name = crate::unit_stage_name(&stage.name, unit);
            let (stdout, stderr) = log_files(workspace, stage.index, &name, unit.attempts);
            sources.push(LogSource {
                label: unit.label.clone(),
                attempt: unit.attempts,
                stdout,
                stderr,
            });
        }
    }
    sources
}
