//! A run's status as `baton status` prints it (and `status --watch`
//! redraws it): its stages, gates, units, findings, costs and retries.

use baton_engine::workspace::utc;
use serde_json::json;

use super::cost::Costs;
use super::errors::store_error;
use super::retries::Retries;
use super::subruns::SubRuns;
use crate::args::Format;
use crate::output;

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
    let subruns = SubRuns::read(store).await;
    let costs = Costs::read(store, run_id, &stages, &subruns).await;
    let retries = Retries::read(store, run_id).await;
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
