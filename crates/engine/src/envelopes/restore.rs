//! Envelopes a crash kept from being written.
//!
//! A result's envelope is written, or named, once the commit recording the
//! result has landed, so that readers never see a result the store could
//! lose. A crash between the two leaves the result recorded and its
//! envelope missing, or an earlier attempt's in its place (or, for a
//! checked stage, its `main` unit's), and nothing runs that stage or unit
//! again to write it. So before a recorded run is driven again, every
//! finished stage and unit whose envelope is missing, or older than the
//! attempt the store recorded, gets it written from the store's record.
//!
//! Found missing with one read of `stages/` and the rows alone; a file's
//! age is read only where an earlier attempt can have left one (a stage
//! that ran more than once), and a file read only for a checked stage, so
//! a resume of a large run costs no `stat` per stage, and the plan is
//! needed only to write what is missing.

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::Path;

use baton_store::{StageRow, UnitRow};
use baton_workflow::Plan;

use crate::work::{self, Context};
use crate::workspace;

/// Statuses whose envelope a drive writes.
fn finished(status: &str) -> bool {
    matches!(status, "success" | "failed" | "skipped")
}

/// A finished stage or unit whose envelope is missing, or an earlier
/// attempt's: its position in the rows given to [`lacking`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lacking {
    Unit(usize),
    Stage(usize),
}

/// The finished stages and units of `stages` and `units` (as recorded)
/// that lack their own envelope, units first: a stage's `main` unit has
/// the stage's own envelope, which the stage's end replaces.
pub(crate) fn lacking(
    stages: &[StageRow],
    units: &[UnitRow],
    workspace_dir: &Path,
) -> Vec<Lacking> {
    let present: HashSet<OsString> = std::fs::read_dir(workspace_dir.join("stages"))
        .map(|entries| entries.flatten().map(|entry| entry.file_name()).collect())
        .unwrap_or_default();
    let lacks = |index: i64, name: &str, again: bool, started_at: Option<i64>| {
        let path = workspace::envelope_path(
            workspace_dir,
            usize::try_from(index).unwrap_or(usize::MAX),
            name,
        );
        if !path.file_name().is_some_and(|name| present.contains(name)) {
            return true;
        }
        // Written before this attempt started: an earlier attempt's.
        again
            && started_at.is_some_and(|started| {
                modified_ms(&path).is_some_and(|modified| modified < started)
            })
    };
    // A checked stage's `main` unit writes the stage's own envelope before
    // the stage ends, in this attempt: only what the file says tells the
    // two apart.
    let checked: HashSet<i64> = units
        .iter()
        .filter(|unit| unit.kind == work::MAIN)
        .map(|unit| unit.index)
        .collect();
    let units = units.iter().enumerate().filter_map(|(position, unit)| {
        let row = stages.iter().find(|row| row.index == unit.index)?;
        let name = work::unit_stage_name(&row.name, unit);
        let again = row.attempts > 1 || unit.attempts > 1;
        (finished(&unit.status) && lacks(unit.index, &name, again, unit.started_at))
            .then_some(Lacking::Unit(position))
    });
    let own = stages.iter().enumerate().filter_map(|(position, row)| {
        let lacking = finished(&row.status)
            && (lacks(row.index, &row.name, row.attempts > 1, row.started_at)
                || checked.contains(&row.index) && !describes(workspace_dir, row));
        lacking.then_some(Lacking::Stage(position))
    });
    units.chain(own).collect()
}

/// Writes the envelopes [`lacking`] found missing, from the rows it was
/// given. Returns how many it wrote.
pub(crate) fn restore(
    plan: &Plan,
    (stages, units): (&[StageRow], &[UnitRow]),
    lacking: &[Lacking],
    workspace_dir: &Path,
    now: i64,
) -> usize {
    let stage_at = |index: i64| {
        usize::try_from(index)
            .ok()
            .and_then(|index| plan.stages.get(index))
    };
    let mut written = 0;
    for lacking in lacking {
        let (path, bytes) = match *lacking {
            Lacking::Unit(position) => {
                let unit = &units[position];
                let Some(stage) = stage_at(unit.index) else {
                    continue;
                };
                let context = Context {
                    plan,
                    stage,
                    workspace: workspace_dir,
                    now,
                };
                // A unit that cannot be built again never had a process,
                // nor an envelope of its own.
                let Ok(materialized) = work::materialize(&context, unit) else {
                    continue;
                };
                let name = work::unit_stage_name(stage.name(), unit);
                let times = (unit.started_at, unit.finished_at);
                let errors = unit.error.iter().cloned().collect();
                (
                    workspace::envelope_path(workspace_dir, stage.index, &name),
                    super::envelope(
                        &materialized.stage,
                        stage.index,
                        &unit.status,
                        times,
                        errors,
                    ),
                )
            }
            Lacking::Stage(position) => {
                let row = &stages[position];
                let Some(stage) = stage_at(row.index) else {
                    continue;
                };
                let times = (row.started_at, row.finished_at);
                let errors = row.error.iter().cloned().collect();
                (
                    workspace::envelope_path(workspace_dir, stage.index, stage.name()),
                    super::envelope(stage, stage.index, &row.status, times, errors),
                )
            }
        };
        written += usize::from(workspace::write_replace(&path, &bytes).is_ok());
    }
    written
}

/// Whether the stage's envelope holds the status and end its row records.
fn describes(workspace_dir: &Path, row: &StageRow) -> bool {
    let index = usize::try_from(row.index).unwrap_or(usize::MAX);
    let path = workspace::envelope_path(workspace_dir, index, &row.name);
    let Some(envelope) = std::fs::read(&path)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
    else {
        return false;
    };
    let finished_at = row.finished_at.map(workspace::utc).unwrap_or_default();
    envelope["status"] == row.status.as_str() && envelope["finished_at"] == finished_at.as_str()
}

/// When the file was last written, in ms since the epoch.
fn modified_ms(path: &Path) -> Option<i64> {
    let modified = std::fs::metadata(path).ok()?.modified().ok()?;
    let since = modified.duration_since(std::time::UNIX_EPOCH).ok()?;
    i64::try_from(since.as_millis()).ok()
}

#[cfg(test)]
mod tests {
    use baton_store::{StageRow, UnitRow};
    use baton_workflow::MemoryLoader;

    use super::{Lacking, lacking, restore};
    use crate::workspace;

    const WORKFLOW: &str = "name: t\nversion: '1'\ndescription: d\ntrigger: {source: manual}\nstages:\n  - {name: a, kind: execute, description: d, executor: inline, script: 'true', writes_to: [a.txt]}\n  - {name: b, kind: execute, description: d, executor: inline, script: 'true', fan_out: {source: a, field: items, key: id}}\n";

    fn stage(index: i64, name: &str, status: &str, attempts: i64) -> StageRow {
        StageRow {
            index,
            name: name.to_owned(),
            status: status.to_owned(),
            attempts,
            started_at: Some(1_000),
            finished_at: Some(2_000),
            error: None,
            note: None,
        }
    }

    fn child(key: &str, status: &str) -> UnitRow {
        UnitRow {
            index: 1,
            key: key.to_owned(),
            ordinal: 0,
            kind: crate::work::ITEM.to_owned(),
            cycle: 0,
            label: key.to_owned(),
            spec: format!("{{\"name\": \"{key}\", \"item\": {{\"id\": \"{key}\"}}}}"),
            status: status.to_owned(),
            attempts: 1,
            started_at: Some(1_000),
            finished_at: Some(2_000),
            exit_code: Some(1),
            error: Some("exit 1".to_owned()),
            artifacts: "[]".to_owned(),
        }
    }

    /// The plan of [`WORKFLOW`] and a workspace for it.
    fn plan_and_workspace() -> (baton_workflow::Plan, tempfile::TempDir) {
        let loader = MemoryLoader::new().with("w.yaml", WORKFLOW);
        let loaded = baton_workflow::load("w.yaml", &loader).expect("loads");
        let plan =
            baton_workflow::compile(&loaded, &Default::default(), &loader).expect("compiles");
        let dir = tempfile::tempdir().expect("temp dir");
        workspace::create(dir.path()).expect("workspace");
        (plan, dir)
    }

    fn status(path: &std::path::Path) -> Option<String> {
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).ok()?).expect("JSON");
        Some(json["status"].as_str()?.to_owned())
    }

    #[test]
    fn finished_stages_and_units_get_the_envelopes_a_crash_lost() {
        let (plan, dir) = plan_and_workspace();
        let a = workspace::envelope_path(dir.path(), 0, "a");
        let b = workspace::envelope_path(dir.path(), 1, "b");
        let (x, y) = (
            workspace::envelope_path(dir.path(), 1, "b-x"),
            workspace::envelope_path(dir.path(), 1, "b-y"),
        );
        // `a` finished in its second attempt, after its first left an
        // envelope (its file is older than the attempt); `b` runs: child
        // `x` failed, with no envelope, `y` runs.
        std::fs::write(&a, "{\"status\": \"failed\"}").expect("old envelope");
        let written_at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(500);
        std::fs::File::options()
            .write(true)
            .open(&a)
            .and_then(|file| file.set_modified(written_at))
            .expect("an old envelope's time");
        let stages = [stage(0, "a", "success", 2), stage(1, "b", "running", 1)];
        let units = [child("x", "failed"), child("y", "running")];
        let missing = lacking(&stages, &units, dir.path());
        assert_eq!(missing, [Lacking::Unit(0), Lacking::Stage(0)]);
        assert_eq!(
            restore(&plan, (&stages, &units), &missing, dir.path(), 3),
            2
        );
        assert_eq!(status(&a).as_deref(), Some("success"));
        let restored: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&x).expect("x")).expect("JSON");
        assert_eq!(restored["stage_name"], "b-x");
        assert_eq!(restored["status"], "failed");
        assert_eq!(restored["errors"][0], "exit 1");
        assert_eq!(status(&b), None, "a running stage has no envelope yet");
        assert_eq!(status(&y), None, "a running unit has no envelope yet");
        // Present and current: left alone.
        assert_eq!(lacking(&stages, &units, dir.path()), []);
    }

    /// A checked stage whose validation failed after its `main` unit
    /// succeeded, killed before its own envelope replaced the unit's.
    #[test]
    fn a_checked_stage_s_envelope_left_by_its_main_unit_is_replaced() {
        let (plan, dir) = plan_and_workspace();
        let a = workspace::envelope_path(dir.path(), 0, "a");
        let mut row = stage(0, "a", "failed", 1);
        row.finished_at = Some(3_000);
        let main = UnitRow {
            index: 0,
            key: crate::work::MAIN.to_owned(),
            kind: crate::work::MAIN.to_owned(),
            status: "success".to_owned(),
            exit_code: Some(0),
            error: None,
            ..child("main", "success")
        };
        let (stages, units) = ([row], [main]);
        // The unit's envelope, current: only the stage's is lacking.
        restore(&plan, (&stages, &units), &[Lacking::Unit(0)], dir.path(), 3);
        assert_eq!(status(&a).as_deref(), Some("success"));
        let missing = lacking(&stages, &units, dir.path());
        assert_eq!(missing, [Lacking::Stage(0)]);
        restore(&plan, (&stages, &units), &missing, dir.path(), 3);
        assert_eq!(status(&a).as_deref(), Some("failed"));
        assert_eq!(lacking(&stages, &units, dir.path()), []);
    }
}
