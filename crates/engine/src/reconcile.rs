//! Putting a run back in order before driving it again: processes left by a
//! crashed driver are killed, attempts that were running are marked
//! interrupted, result envelopes a crash kept from being written are
//! written, and recorded outputs that changed or vanished since make their
//! stage (and its dependants) run again.

use std::path::Path;

use baton_store::{ArtifactRow, Lease, StageRow, Store, Transition, UnitRow};
use baton_workflow::Plan;

use crate::attempt::RUN_MARKER;
use crate::{Progress, Result};

/// Kills every process on this host whose environment carries
/// `BATON_RUN_ID=<run_id>`: the children of a previous driver of this run,
/// which must not keep writing into the workspace while new attempts run.
/// Returns how many were signalled.
pub(crate) fn kill_leftovers(run_id: &str) -> usize {
    baton_executor::group::kill_marked_processes(RUN_MARKER, run_id)
}

/// Reads what a recorded run holds and puts it back in order: nothing of a
/// previous driver may keep running, attempts it left running are
/// interrupted, failed stages are retried, and stages whose recorded outputs
/// changed run again. Returns the stages and units as read, and the
/// transitions that reconcile them (not yet applied).
pub(crate) async fn recorded(
    store: &Store,
    lease: &Lease,
    plan: &Plan,
    workspace_dir: &Path,
    now: i64,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<(Vec<StageRow>, Vec<UnitRow>, Vec<Transition>)> {
    let run_id = lease.run_id.as_str();
    // Every process of a run is started under its lease, so under the
    // first lease ever taken there is nothing to look for: a scan of
    // `/proc` costs a few milliseconds of every run's start.
    let killed = if lease.epoch > 1 {
        kill_leftovers(run_id)
    } else {
        0
    };
    if killed > 0 {
        progress(Progress::Note(format!(
            "killed {killed} process(es) left by an earlier baton"
        )));
    }
    let stages = store.stages(run_id).await?;
    let units = store.units(run_id).await?;
    forget_unrecorded_logs(plan, &stages, &units, workspace_dir);
    let lacking = crate::envelopes::lacking(&stages, &units, workspace_dir);
    let restored = crate::envelopes::restore(plan, (&stages, &units), &lacking, workspace_dir, now);
    note_restored(restored, progress);
    let attempts = store.attempts(run_id).await?;
    let artifacts = store.artifacts(run_id).await?;
    // A gate edit a crash cut short is completed before outputs are judged.
    crate::gate::edit::finish_interrupted(workspace_dir, &artifacts);
    let mut transitions = Vec::new();
    for attempt in attempts
        .iter()
        .filter(|attempt| attempt.status == "running")
    {
        transitions.push(Transition::AttemptInterrupted {
            index: attempt.index,
            attempt: attempt.attempt,
            at: now,
        });
    }
    for stage in stages.iter().filter(|stage| stage.status == "failed") {
        transitions.push(Transition::StageReset {
            index: stage.index,
            note: "retried on resume after it failed".to_owned(),
        });
    }
    // Units of a stage that crashed or failed run again; finished ones are kept.
    let mut with_units: Vec<i64> = units
        .iter()
        .filter(|unit| unit.status == "running" || unit.status == "failed")
        .map(|unit| unit.index)
        .collect();
    with_units.dedup();
    for index in with_units {
        transitions.push(Transition::UnitsResumed { index });
    }
    for (index, note) in stale_stages(plan, &stages, &artifacts, workspace_dir) {
        progress(Progress::Note(format!(
            "{}: {note}",
            plan.stages[index].name()
        )));
        transitions.push(Transition::StageReset {
            index: i64::try_from(index).unwrap_or(i64::MAX),
            note,
        });
        transitions.push(Transition::UnitsCleared {
            index: i64::try_from(index).unwrap_or(i64::MAX),
        });
    }
    Ok((stages, units, transitions))
}

/// Puts an ended run (succeeded or rejected, which a resume does not drive)
/// back in order: a crash after the commit that ended it can only have
/// kept the envelopes of its last results from being written. Costs two
/// reads and a directory listing when nothing is missing; a run whose
/// workflow can no longer be compiled as it was is left as it is, saying so.
pub(crate) async fn ended(
    store: &Store,
    run: &baton_store::RunRow,
    accept_changes: bool,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<()> {
    let stages = store.stages(&run.run_id).await?;
    let units = store.units(&run.run_id).await?;
    let lacking = crate::envelopes::lacking(&stages, &units, Path::new(&run.workspace));
    if lacking.is_empty() {
        return Ok(());
    }
    let start = match crate::start::Start::recorded(store, &run.run_id, accept_changes).await {
        Ok(start) => start,
        Err(error) => {
            progress(Progress::Note(format!(
                "{} result envelope(s) missing, not written: {error}",
                lacking.len()
            )));
            return Ok(());
        }
    };
    let restored = crate::envelopes::restore(
        &start.plan,
        (&stages, &units),
        &lacking,
        &start.workspace_dir,
        crate::clock::now_ms(),
    );
    note_restored(restored, progress);
    Ok(())
}

fn note_restored(restored: usize, progress: &(dyn Fn(Progress) + Sync)) {
    if restored > 0 {
        progress(Progress::Note(format!(
            "wrote {restored} result envelope(s) that a crash kept from being written"
        )));
    }
}

/// Indices of successful stages whose recorded outputs no longer match the
/// files in the workspace, plus every stage that depends on them.
pub(crate) fn stale_stages(
    plan: &Plan,
    stages: &[StageRow],
    artifacts: &[ArtifactRow],
    workspace: &Path,
) -> Vec<(usize, String)> {
    let mut stale = vec![None; plan.stages.len()];
    for artifact in artifacts {
        let Ok(index) = usize::try_from(artifact.index) else {
            continue;
        };
        if stages
            .get(index)
            .is_none_or(|stage| stage.status != "success")
            || stale[index].is_some()
        {
            continue;
        }
        let state = crate::verify::state_of(workspace, artifact);
        if state != crate::verify::OutputState::Intact {
            let why = if state == crate::verify::OutputState::Deleted {
                "was deleted"
            } else {
                "changed"
            };
            stale[index] = Some(format!(
                "rerun: recorded output {} {why} since it was recorded",
                artifact.path
            ));
        }
    }
    // Dependants of a stale stage are stale too (indices follow the order).
    for stage in &plan.stages {
        if stale[stage.index].is_none()
            && let Some(&dependency) = stage
                .depends_on
                .iter()
                .find(|&&dependency| stale[dependency].is_some())
        {
            stale[stage.index] = Some(format!(
                "rerun: depends on {}, which reruns",
                plan.stages[dependency].name()
            ));
        }
    }
    stale
        .into_iter()
        .enumerate()
        .filter_map(|(index, note)| {
            note.filter(|_| {
                stages
                    .get(index)
                    .is_some_and(|stage| stage.status != "pending")
            })
            .map(|note| (index, note))
        })
        .collect()
}

/// Removes the logs of attempts a crashed driver started but never recorded.
///
/// A plain stage's process, and a fan-out child's, may start before its
/// start is committed (see the coordinator's `starts_early`), so a crash
/// can leave logs under the attempt number after the last recorded one.
/// The resume runs that number again; its logs are created on the first
/// byte, so without this a silent new attempt would show the lost one's
/// output as its own. A child that was never recorded at all left the logs
/// of its attempt 1.
pub(crate) fn forget_unrecorded_logs(
    plan: &Plan,
    stages: &[StageRow],
    units: &[UnitRow],
    workspace: &Path,
) {
    let logs = workspace.join("logs");
    // Only stages with a log directory can have such logs: a run that has
    // not started anything yet costs one directory read.
    let Ok(entries) = std::fs::read_dir(&logs) else {
        return;
    };
    // A unit's logs are in `NNN-<stage>-<unit>`: by that name, its attempts.
    let mut unit_attempts: Option<std::collections::HashMap<String, i64>> = None;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        // Every log directory starts with its stage's index.
        let Some(index) = name
            .split_once('-')
            .and_then(|(digits, _)| digits.parse::<usize>().ok())
        else {
            continue;
        };
        let (Some(stage), Some(row)) = (plan.stages.get(index), stages.get(index)) else {
            continue;
        };
        if usize::try_from(row.index).ok() != Some(index)
            || matches!(row.status.as_str(), "success" | "skipped")
        {
            continue;
        }
        let stem = stage.file_stem();
        let next = if name == stem {
            row.attempts + 1
        } else if name
            .strip_prefix(stem.as_str())
            .is_some_and(|rest| rest.starts_with('-'))
        {
            let recorded = unit_attempts.get_or_insert_with(|| {
                units
                    .iter()
                    .filter_map(|unit| {
                        let stage = plan.stages.get(usize::try_from(unit.index).ok()?)?;
                        let dir = format!(
                            "{:03}-{}",
                            unit.index,
                            crate::work::unit_stage_name(stage.name(), unit)
                        );
                        Some((dir, unit.attempts))
                    })
                    .collect()
            });
            recorded.get(name).map_or(1, |attempts| attempts + 1)
        } else {
            continue;
        };
        for stream in ["stdout", "stderr"] {
            let _ = std::fs::remove_file(logs.join(name).join(format!("{next}.{stream}")));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_workflow::MemoryLoader;

    const WORKFLOW: &str = "name: t\nversion: '1'\ndescription: d\ntrigger: {source: manual}\nstages:\n  - {name: a, kind: execute, description: d, executor: inline, script: 'true'}\n  - {name: b, kind: execute, description: d, executor: inline, script: 'true'}\n";

    fn row(index: i64, name: &str, status: &str, attempts: i64) -> StageRow {
        StageRow {
            index,
            name: name.to_owned(),
            status: status.to_owned(),
            attempts,
            started_at: None,
            finished_at: None,
            error: None,
            note: None,
        }
    }

    #[test]
    fn only_the_logs_of_an_unrecorded_attempt_are_removed() {
        let loader = MemoryLoader::new().with("w.yaml", WORKFLOW);
        let loaded = baton_workflow::load("w.yaml", &loader).expect("loads");
        let plan =
            baton_workflow::compile(&loaded, &Default::default(), &loader).expect("compiles");
        let workspace = tempfile::tempdir().expect("temp dir");
        let log = |stage: &str, name: &str| workspace.path().join("logs").join(stage).join(name);
        for (stage, name) in [
            ("000-a", "1.stdout"),
            ("000-a", "2.stdout"),
            ("000-a", "2.stderr"),
            ("001-b", "1.stdout"),
            ("001-b", "2.stdout"),
        ] {
            std::fs::create_dir_all(log(stage, "")).expect("log dir");
            std::fs::write(log(stage, name), "output").expect("log");
        }
        // `a` recorded one attempt and is pending again: attempt 2's logs
        // belong to a start that was never recorded. `b` succeeded: its
        // logs are all its own.
        let stages = [row(0, "a", "pending", 1), row(1, "b", "success", 1)];
        forget_unrecorded_logs(&plan, &stages, &[], workspace.path());
        assert!(log("000-a", "1.stdout").exists());
        assert!(!log("000-a", "2.stdout").exists());
        assert!(!log("000-a", "2.stderr").exists());
        assert!(log("001-b", "1.stdout").exists());
        assert!(log("001-b", "2.stdout").exists());
    }

    fn item(index: i64, key: &str, attempts: i64) -> UnitRow {
        UnitRow {
            index,
            key: key.to_owned(),
            ordinal: 0,
            kind: crate::work::ITEM.to_owned(),
            cycle: 0,
            label: key.to_owned(),
            spec: format!("{{\"name\": \"{key}\"}}"),
            status: "pending".to_owned(),
            attempts,
            started_at: None,
            finished_at: None,
            exit_code: None,
            error: None,
            artifacts: "[]".to_owned(),
        }
    }

    #[test]
    fn a_fan_out_childs_unrecorded_attempt_loses_its_logs() {
        let loader = MemoryLoader::new().with("w.yaml", WORKFLOW);
        let loaded = baton_workflow::load("w.yaml", &loader).expect("loads");
        let plan =
            baton_workflow::compile(&loaded, &Default::default(), &loader).expect("compiles");
        let workspace = tempfile::tempdir().expect("temp dir");
        let log = |dir: &str, name: &str| workspace.path().join("logs").join(dir).join(name);
        for (dir, name) in [
            ("000-a-x", "1.stdout"),
            ("000-a-x", "2.stdout"),
            ("000-a-y", "1.stderr"),
            ("001-b-z", "1.stdout"),
        ] {
            std::fs::create_dir_all(log(dir, "")).expect("log dir");
            std::fs::write(log(dir, name), "output").expect("log");
        }
        // Child `x` of `a` recorded one attempt: its second was never
        // recorded. Child `y` was never recorded at all. `b` succeeded, so
        // its child's logs are its own.
        let stages = [row(0, "a", "running", 1), row(1, "b", "success", 1)];
        let units = [item(0, "x", 1)];
        forget_unrecorded_logs(&plan, &stages, &units, workspace.path());
        assert!(log("000-a-x", "1.stdout").exists());
        assert!(!log("000-a-x", "2.stdout").exists());
        assert!(!log("000-a-y", "1.stderr").exists());
        assert!(log("001-b-z", "1.stdout").exists());
    }
}
