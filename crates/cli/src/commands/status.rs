//! `baton status`, `logs`: reading what the store recorded of a run.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use super::run::{block_on, chain};
use super::run_ref;
use crate::args::{Format, LogsArgs, StatusArgs};
use crate::{exit_code, output};

pub(super) fn utc(ms: i64) -> String {
    baton_engine::workspace::utc(ms)
}

fn store_error(error: &baton_store::Error) -> u8 {
    output::stderr_line(&format!("error: {}", chain(error)));
    if matches!(error, baton_store::Error::NoSuchRun(_)) {
        output::stderr_line("hint: `baton runs` lists the recorded runs");
        exit_code::INVALID_WORKFLOW
    } else {
        exit_code::STORE_UNAVAILABLE
    }
}

/// `baton status RUN`: `{run_id, status, stages: [{stage, status, duration_ms, …}]}`;
/// with `--watch`, redrawn until the run stops.
pub(crate) fn status(args: &StatusArgs) -> u8 {
    if args.watch {
        return super::watch::watch(args);
    }
    let args = &args.run;
    block_on(async {
        let (store, run_id) = match run_ref::open_with_run(&args.run).await {
            Ok(found) => found,
            Err(code) => return code,
        };
        match render(&store, &run_id, args.format.format()).await {
            Ok(text) => {
                output::stdout(&text);
                exit_code::SUCCESS
            }
            Err(code) => code,
        }
    })
}

/// The status of a run as `baton status` prints it, in `format`. `Err`
/// carries the exit code, once the error is printed.
pub(super) async fn render(
    store: &baton_store::Store,
    run_id: &str,
    format: Format,
) -> Result<String, u8> {
    let (run, stages) = match tokio::try_join!(store.run(run_id), store.stages(run_id)) {
        Ok(found) => found,
        Err(error) => return Err(store_error(&error)),
    };
    // Gate decisions, units and findings are extra detail: a failure to
    // read them hides them.
    let gates = baton_engine::gate::list(store, Some(run_id))
        .await
        .unwrap_or_default();
    let work = Work::read(store, run_id).await;
    let gone = baton_engine::driver_gone(store, run_id)
        .await
        .unwrap_or(false);
    let subruns = super::subruns::SubRuns::read(store).await;
    let costs = super::cost::Costs::read(store, run_id, &stages, &subruns).await;
    let retries = super::retries::Retries::read(store, run_id).await;
    let text = match format {
        Format::Json | Format::Yaml => {
            let mut value = json!({
                "gates": gates.iter().map(|gate| {
                    let decision = gate.decision.as_ref();
                    json!({
                        "stage": gate.stage,
                        "status": gate.state.as_str(),
                        "decided_by": decision.map(|row| row.decided_by.clone()),
                        "decided_at": decision.map(|row| utc(row.decided_at)),
                        "comment": decision.and_then(|row| row.comment.clone()),
                    })
                }).collect::<Vec<_>>(),
                "run_id": run.run_id,
                "workflow": run.workflow,
                "status": run.status,
                "workspace": run.workspace,
                "started_at": utc(run.created_at),
                "finished_at": run.finished_at.map(utc),
                "error": run.error,
                "driver_gone": gone,
                "stages": stages.iter().map(|stage| {
                    let mut entry = json!({
                        "index": stage.index,
                        "stage": stage.name,
                        "status": stage.status,
                        "duration_ms": stage.duration_ms(),
                        "attempts": stage.attempts,
                        "error": stage.error,
                        "note": stage.note,
                    });
                    work.describe_json(stage.index, &mut entry);
                    costs.describe_json(Some(stage.index), &mut entry);
                    retries.describe_json(stage, &mut entry);
                    subruns.describe_json(&run.run_id, &stage.name, &mut entry);
                    entry
                }).collect::<Vec<_>>(),
            });
            costs.describe_json(None, &mut value);
            if format == Format::Json {
                output::json(&value)
            } else {
                output::yaml(&value)
            }
        }
        Format::Table => {
            let mut text = format!(
                "run: {}\nworkflow: {}\nstatus: {}{}\nworkspace: {}\n",
                run.run_id,
                run.workflow,
                run.status,
                if gone {
                    format!(" (driver gone — `baton resume {}`)", run.run_id)
                } else {
                    String::new()
                },
                run.workspace
            );
            if let Some(error) = &run.error {
                text.push_str(&format!("error: {error}\n"));
            }
            for gate in &gates {
                text.push_str(&format!("gate {}: {}", gate.stage, gate.state.as_str()));
                if let Some(row) = &gate.decision {
                    text.push_str(&format!(
                        " ({} by {} at {})",
                        row.decision,
                        row.decided_by,
                        utc(row.decided_at)
                    ));
                }
                text.push('\n');
            }
            text.push('\n');
            let rows: Vec<Vec<String>> = stages
                .iter()
                .flat_map(|stage| {
                    let row = vec![
                        format!("{:03}", stage.index),
                        stage.name.clone(),
                        stage.status.clone(),
                        stage
                            .duration_ms()
                            .map(|ms| format!("{ms} ms"))
                            .unwrap_or_default(),
                        stage.attempts.to_string(),
                        costs.cost_cell(stage.index),
                        costs.tokens_cell(stage.index),
                        work.summary(stage.index)
                            .into_iter()
                            .chain(costs.continued_cells(stage.index))
                            .chain(stage.error.clone().or_else(|| stage.note.clone()))
                            .chain(retries.detail(stage))
                            .collect::<Vec<_>>()
                            .join("; "),
                    ];
                    let columns = row.len();
                    std::iter::once(row).chain(subruns.rows(&run.run_id, &stage.name, columns))
                })
                .collect();
            text.push_str(&output::table(
                &[
                    "index", "stage", "status", "duration", "attempts", "cost", "tokens", "detail",
                ],
                &rows,
            ));
            text.extend(costs.total_line());
            text.push_str(&work.failures());
            text
        }
    };
    Ok(text)
}

/// What ran inside composite stages: units and validation findings.
#[derive(Default)]
struct Work {
    units: Vec<baton_store::UnitRow>,
    findings: Vec<baton_store::FindingRow>,
}

/// Failed units listed by `baton status`, at most.
const FAILED_UNITS_SHOWN: usize = 20;

impl Work {
    async fn read(store: &baton_store::Store, run_id: &str) -> Work {
        Work {
            units: store.units(run_id).await.unwrap_or_default(),
            findings: store.findings(run_id).await.unwrap_or_default(),
        }
    }

    fn units_of(&self, index: i64) -> impl Iterator<Item = &baton_store::UnitRow> {
        self.units.iter().filter(move |unit| unit.index == index)
    }

    /// Counts of units by status.
    fn counts(&self, index: i64) -> Option<serde_json::Value> {
        let mut counts: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
        let mut total = 0;
        for unit in self.units_of(index) {
            total += 1;
            *counts.entry(unit.status.as_str()).or_default() += 1;
        }
        (total > 0).then(|| {
            let mut value = json!({"total": total});
            for (status, count) in counts {
                value[status] = json!(count);
            }
            value
        })
    }

    /// The latest validation cycle's findings of a stage, by severity
    /// (failed or warned ones), and how many passed.
    fn latest_findings(
        &self,
        index: i64,
    ) -> Option<(i64, std::collections::BTreeMap<String, usize>, usize)> {
        let cycle = self
            .findings
            .iter()
            .filter(|finding| finding.index == index)
            .map(|finding| finding.cycle)
            .max()?;
        let mut by_severity = std::collections::BTreeMap::new();
        let mut passed = 0;
        for finding in self
            .findings
            .iter()
            .filter(|finding| finding.index == index && finding.cycle == cycle)
        {
            if finding.status == "PASS" {
                passed += 1;
            } else {
                *by_severity.entry(finding.severity.clone()).or_default() += 1;
            }
        }
        Some((cycle, by_severity, passed))
    }

    fn describe_json(&self, index: i64, entry: &mut serde_json::Value) {
        if let Some(counts) = self.counts(index) {
            entry["units"] = counts;
            let failed: Vec<_> = self
                .units_of(index)
                .filter(|unit| unit.status == "failed")
                .take(FAILED_UNITS_SHOWN)
                .map(|unit| json!({"unit": unit.label, "error": unit.error}))
                .collect();
            if !failed.is_empty() {
                entry["failed_units"] = json!(failed);
            }
        }
        if let Some((cycle, by_severity, passed)) = self.latest_findings(index) {
            entry["findings"] =
                json!({"cycle": cycle, "by_severity": by_severity, "passed": passed});
        }
    }

    /// `5/7 units done (1 failed)`, `findings (cycle 2): 1 critical, 2 minor; 4 passed`.
    fn summary(&self, index: i64) -> Vec<String> {
        let mut parts = Vec::new();
        let units: Vec<_> = self.units_of(index).collect();
        if !units.is_empty() {
            let done = units.iter().filter(|unit| unit.status == "success").count();
            let failed = units.iter().filter(|unit| unit.status == "failed").count();
            let mut part = format!("{done}/{} units done", units.len());
            if failed > 0 {
                part.push_str(&format!(" ({failed} failed)"));
            }
            parts.push(part);
        }
        if let Some((cycle, by_severity, passed)) = self.latest_findings(index) {
            let counts: Vec<String> = by_severity
                .iter()
                .map(|(severity, count)| format!("{count} {severity}"))
                .collect();
            let counts = if counts.is_empty() {
                "none open".to_owned()
            } else {
                counts.join(", ")
            };
            parts.push(format!(
                "findings (cycle {cycle}): {counts}; {passed} passed"
            ));
        }
        parts
    }

    /// The failed units, one line each, under the table.
    fn failures(&self) -> String {
        let failed: Vec<_> = self
            .units
            .iter()
            .filter(|unit| unit.status == "failed")
            .collect();
        if failed.is_empty() {
            return String::new();
        }
        let mut text = String::from("\nfailed units:\n");
        for unit in failed.iter().take(FAILED_UNITS_SHOWN) {
            text.push_str(&format!(
                "  {}: {}\n",
                unit.label,
                unit.error.as_deref().unwrap_or("failed")
            ));
        }
        if failed.len() > FAILED_UNITS_SHOWN {
            text.push_str(&format!(
                "  … and {} more\n",
                failed.len() - FAILED_UNITS_SHOWN
            ));
        }
        text
    }
}

fn log_files(workspace: &Path, index: i64, name: &str, attempt: i64) -> (PathBuf, PathBuf) {
    let directory = workspace.join("logs").join(format!("{index:03}-{name}"));
    (
        directory.join(format!("{attempt}.stdout")),
        directory.join(format!("{attempt}.stderr")),
    )
}

/// One log source: a stage's latest attempt, or a unit's.
struct LogSource {
    label: String,
    attempt: i64,
    stdout: PathBuf,
    stderr: PathBuf,
}

/// The latest attempt's logs of every stage that ran (or of the one asked
/// for, by stage name or unit label `stage[key]`); a stage run as units
/// (fan-out children, validators) shows each unit's.
fn log_sources(
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
            let name = baton_engine::unit_stage_name(&stage.name, unit);
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

/// What to say of a run whose driver is gone.
fn driver_gone_note(run_id: &str) -> String {
    format!(
        "run {run_id} is recorded as running, but no process drives it (its driver was stopped or crashed): `baton resume {run_id}` continues it"
    )
}

/// Whether a run with this status has stopped (for now).
fn ended(status: &str) -> bool {
    matches!(
        status,
        "success" | "failed" | "cancelled" | "awaiting_human" | "rejected"
    )
}

/// `baton logs RUN [STAGE] [--follow] [--raw]`.
pub(crate) fn logs(args: &LogsArgs) -> u8 {
    block_on(async {
        let (store, run_id) = match run_ref::open_with_run(&args.run).await {
            Ok(found) => found,
            Err(code) => return code,
        };
        let mut offsets: std::collections::HashMap<PathBuf, u64> = std::collections::HashMap::new();
        loop {
            let (run, stages, units) = match tokio::try_join!(
                store.run(&run_id),
                store.stages(&run_id),
                store.units(&run_id)
            ) {
                Ok(found) => found,
                Err(error) => return store_error(&error),
            };
            if let Some(wanted) = &args.stage
                && !stages.iter().any(|stage| &stage.name == wanted)
                && !units.iter().any(|unit| &unit.label == wanted)
            {
                output::stderr_line(&format!(
                    "error: run {} has no stage or unit named '{wanted}'",
                    run_id
                ));
                output::stderr_line(&format!(
                    "hint: `baton status {}` lists its stages; a fan-out child is named like `stage[key]`",
                    run_id
                ));
                return exit_code::INVALID_WORKFLOW;
            }
            let workspace = PathBuf::from(&run.workspace);
            let sources = log_sources(&workspace, &stages, &units, args.stage.as_deref());
            if args.format.format() == Format::Json && !args.follow {
                let entries: Vec<_> = sources
                    .iter()
                    .map(|source| {
                        let stdout = std::fs::read_to_string(&source.stdout).unwrap_or_default();
                        json!({
                            "stage": source.label,
                            "attempt": source.attempt,
                            "transcript": baton_executor::profile::transcript::render(&stdout),
                            "stdout": stdout,
                            "stderr": std::fs::read_to_string(&source.stderr).unwrap_or_default(),
                        })
                    })
                    .collect();
                output::stdout(&output::json(&entries));
                return exit_code::SUCCESS;
            }
            for source in &sources {
                for (path, stream) in [(&source.stdout, "stdout"), (&source.stderr, "stderr")] {
                    let offset = offsets.entry(path.clone()).or_insert(0);
                    let Ok(bytes) = std::fs::read(path) else {
                        continue;
                    };
                    let start = usize::try_from(*offset).unwrap_or(0).min(bytes.len());
                    // While the run goes on, whole lines only: an agent's
                    // event is read once it is complete.
                    let end = if args.follow && !ended(&run.status) {
                        bytes[start..]
                            .iter()
                            .rposition(|&byte| byte == b'\n')
                            .map_or(start, |last| start + last + 1)
                    } else {
                        bytes.len()
                    };
                    if start == end {
                        continue;
                    }
                    let text = String::from_utf8_lossy(&bytes[start..end]);
                    *offset = end as u64;
                    let transcript = (stream == "stdout" && !args.raw)
                        .then(|| baton_executor::profile::transcript::render(&text))
                        .flatten();
                    let (text, stream) = match &transcript {
                        Some(transcript) => (transcript.as_str(), "agent"),
                        None => (text.as_ref(), stream),
                    };
                    let mut chunk = String::new();
                    for line in text.lines() {
                        chunk.push_str(&format!("{} | {stream} | {line}\n", source.label));
                    }
                    output::stdout(&chunk);
                }
            }
            if !args.follow || ended(&run.status) {
                return exit_code::SUCCESS;
            }
            if baton_engine::driver_gone(&store, &run_id)
                .await
                .unwrap_or(false)
            {
                output::stderr_line(&driver_gone_note(&run_id));
                return exit_code::RUN_FAILED;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    })
}
