//! What ran inside composite stages: fan-out units and validation
//! findings, as `baton status` shows them.

use serde_json::json;

/// What ran inside composite stages: units and validation findings.
#[derive(Debug, Default)]
pub struct Work {
    units: Vec<baton_store::UnitRow>,
    findings: Vec<baton_store::FindingRow>,
}

/// Failed units listed by `baton status`, at most.
const FAILED_UNITS_SHOWN: usize = 20;

impl Work {
    /// The run's units and findings; a failed read shows none.
    pub async fn read(store: &baton_store::Store, run_id: &str) -> Work {
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

    /// Adds `units`, `failed_units` and `findings` to a stage's JSON entry.
    pub fn describe_json(&self, index: i64, entry: &mut serde_json::Value) {
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
    pub fn summary(&self, index: i64) -> Vec<String> {
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
    pub fn failures(&self) -> String {
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
