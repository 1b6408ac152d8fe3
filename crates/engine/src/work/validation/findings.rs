//! Findings files and the corrections log: parsing what validators and
//! correctors wrote, with errors that name the file and the item, and the
//! merged files baton writes from them.

use std::collections::HashMap;
use std::path::Path;

use baton_store::FindingRow;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::work::fanout::scalar;
use crate::workspace::write_json;

/// The largest findings or log file baton reads.
const MAX_BYTES: u64 = 16 * 1024 * 1024;

/// One finding, in the reference format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Finding {
    pub(crate) id: String,
    /// `PASS`, `FAIL` or `WARN`.
    pub(crate) status: String,
    pub(crate) claim: String,
    pub(crate) expected: String,
    pub(crate) actual: String,
    /// `critical`, `minor` or `info`.
    pub(crate) severity: String,
    pub(crate) category: String,
    pub(crate) source: String,
    pub(crate) fix: String,
}

impl Finding {
    /// A finding that blocks acceptance: a correction cycle must fix it.
    pub(crate) fn is_critical(&self) -> bool {
        self.status == "FAIL" && self.severity == "critical"
    }

    /// What the finding is about, in a few words: its claim, else what was
    /// found, else the fix.
    pub(crate) fn title(&self) -> &str {
        [&self.claim, &self.actual, &self.fix]
            .into_iter()
            .find(|text| !text.is_empty())
            .map_or("(no claim)", String::as_str)
    }

    /// The row the store keeps.
    pub(crate) fn row(&self) -> FindingRow {
        FindingRow {
            id: self.id.clone(),
            status: self.status.clone(),
            severity: self.severity.clone(),
            category: self.category.clone(),
            claim: self.claim.clone(),
            expected: self.expected.clone(),
            actual: self.actual.clone(),
            source: self.source.clone(),
            fix: self.fix.clone(),
            ..FindingRow::default()
        }
    }
}

/// Reads a workspace file as JSON, with errors naming it.
pub(crate) fn read_json(workspace: &Path, relative: &str) -> Result<Value, String> {
    let path = workspace.join(relative);
    let metadata =
        std::fs::metadata(&path).map_err(|error| format!("cannot read {relative}: {error}"))?;
    if metadata.len() > MAX_BYTES {
        return Err(format!(
            "{relative} is {} bytes; at most {MAX_BYTES} are read",
            metadata.len()
        ));
    }
    let bytes = std::fs::read(&path).map_err(|error| format!("cannot read {relative}: {error}"))?;
    serde_json::from_slice(&bytes).map_err(|error| format!("{relative} is not JSON: {error}"))
}

/// Reads and checks one findings file.
pub(crate) fn read(workspace: &Path, relative: &str) -> Result<Vec<Finding>, String> {
    parse(relative, &read_json(workspace, relative)?)
}

/// Checks a findings document: a JSON array of objects with a known
/// `status` and `severity`; the text fields may be any scalar (numbers are
/// common in `expected` and `actual`) and default to empty.
pub(crate) fn parse(relative: &str, document: &Value) -> Result<Vec<Finding>, String> {
    let items = document.as_array().ok_or_else(|| {
        format!(
            "{relative} is not a JSON array (a findings file is an array of {{id, status, claim, expected, actual, severity, category, source, fix}}); its top level is {}",
            kind_of(document)
        )
    })?;
    items
        .iter()
        .enumerate()
        .map(|(position, item)| {
            finding(item).map_err(|error| {
                let named = item
                    .get("id")
                    .and_then(scalar)
                    .map(|id| format!(" (id {id})"))
                    .unwrap_or_default();
                format!("{relative}: finding {}{named}: {error}", position + 1)
            })
        })
        .collect()
}

fn finding(item: &Value) -> Result<Finding, String> {
    let fields = item
        .as_object()
        .ok_or_else(|| format!("is {}, not an object", kind_of(item)))?;
    let text = |name: &str| -> Result<String, String> {
        match fields.get(name) {
            None | Some(Value::Null) => Ok(String::new()),
            // Structured values keep their JSON text.
            Some(value) => Ok(scalar(value).unwrap_or_else(|| value.to_string())),
        }
    };
    let id = text("id")?;
    if id.is_empty() {
        return Err("'id' is missing".to_owned());
    }
    let status = keyword(
        fields,
        "status",
        &["PASS", "FAIL", "WARN"],
        str::to_ascii_uppercase,
    )?;
    let severity = keyword(
        fields,
        "severity",
        &["critical", "minor", "info"],
        str::to_ascii_lowercase,
    )?;
    Ok(Finding {
        id,
        status,
        claim: text("claim")?,
        expected: text("expected")?,
        actual: text("actual")?,
        severity,
        category: text("category")?,
        source: text("source")?,
        fix: text("fix")?,
    })
}

/// A required keyword field; case is forgiven (agents write `fail` and
/// `Critical`), anything else is not.
fn keyword(
    fields: &Map<String, Value>,
    name: &str,
    allowed: &[&str],
    normalise: fn(&str) -> String,
) -> Result<String, String> {
    let listed = allowed.join(", ");
    let value = fields
        .get(name)
        .ok_or_else(|| format!("'{name}' is missing (one of {listed})"))?;
    let text = value
        .as_str()
        .ok_or_else(|| format!("'{name}' is {}, not one of {listed}", kind_of(value)))?;
    let normalised = normalise(text.trim());
    if allowed.contains(&normalised.as_str()) {
        Ok(normalised)
    } else {
        Err(format!("'{name}' is '{text}', not one of {listed}"))
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Joins the findings of one wave in order. Validators number their
/// findings independently, so a repeated id gets `#2`, `#3`, … to keep ids
/// unique within the cycle (corrections and messages name findings by id).
pub(crate) fn merge(parts: Vec<Vec<Finding>>) -> Vec<Finding> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut merged = Vec::new();
    for mut finding in parts.into_iter().flatten() {
        let count = seen.entry(finding.id.clone()).or_insert(0);
        *count += 1;
        if *count > 1 {
            finding.id = format!("{}#{count}", finding.id);
        }
        merged.push(finding);
    }
    merged
}

/// Writes `validation/<stage>-findings.json` atomically.
pub(crate) fn write_merged(
    workspace: &Path,
    relative: &str,
    findings: &[Finding],
) -> Result<(), String> {
    let value = serde_json::to_value(findings).expect("plain data");
    write_json(&workspace.join(relative), &value)
        .map_err(|error| format!("cannot write {relative}: {error}"))
}

/// Challenges a challenger wrote: a JSON array (any objects); how many.
pub(crate) fn count_challenges(workspace: &Path, relative: &str) -> Result<usize, String> {
    let document = read_json(workspace, relative)?;
    let items = document.as_array().ok_or_else(|| {
        format!(
            "{relative} is not a JSON array of challenges; its top level is {}",
            kind_of(&document)
        )
    })?;
    if let Some(position) = items.iter().position(|item| !item.is_object()) {
        return Err(format!(
            "{relative}: challenge {} is {}, not an object",
            position + 1,
            kind_of(&items[position])
        ));
    }
    Ok(items.len())
}

/// One entry of `validation/corrections-applied.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Correction {
    pub(crate) stage: String,
    pub(crate) cycle: i64,
    pub(crate) finding_id: String,
    pub(crate) change: String,
}

/// Reads a corrector's per-cycle log: a JSON array of
/// `{finding_id, change}`.
pub(crate) fn read_log(
    workspace: &Path,
    relative: &str,
    stage: &str,
    cycle: i64,
) -> Result<Vec<Correction>, String> {
    let document = read_json(workspace, relative)?;
    let items = document.as_array().ok_or_else(|| {
        format!(
            "{relative} is not a JSON array of {{finding_id, change}}; its top level is {}",
            kind_of(&document)
        )
    })?;
    items
        .iter()
        .enumerate()
        .map(|(position, item)| {
            let field = |name: &str| {
                item.get(name)
                    .and_then(scalar)
                    .filter(|text| !text.is_empty())
                    .ok_or_else(|| {
                        format!("{relative}: entry {}: '{name}' is missing", position + 1)
                    })
            };
            Ok(Correction {
                stage: stage.to_owned(),
                cycle,
                finding_id: field("finding_id")?,
                change: field("change")?,
            })
        })
        .collect()
}

/// The workspace's log of applied corrections, shared by every validated
/// stage.
pub(crate) const CORRECTIONS_APPLIED: &str = "validation/corrections-applied.json";

/// Rewrites `validation/corrections-applied.json` with this stage's
/// entries replaced by `entries` (all its cycles so far). Rebuilding rather
/// than appending keeps it right when a crash makes this run twice; other
/// stages' entries, and anything else in the file, are kept.
pub(crate) fn write_applied(
    workspace: &Path,
    stage: &str,
    entries: &[Correction],
) -> Result<(), String> {
    let path = workspace.join(CORRECTIONS_APPLIED);
    let mut kept: Vec<Value> = match read_json(workspace, CORRECTIONS_APPLIED) {
        Ok(Value::Array(items)) => items
            .into_iter()
            .filter(|item| item.get("stage").and_then(Value::as_str) != Some(stage))
            .collect(),
        // Absent, or not ours to understand: start the list afresh.
        _ if !path.exists() => Vec::new(),
        Ok(_) | Err(_) => {
            return Err(format!(
                "{CORRECTIONS_APPLIED} is not a JSON array; baton keeps the log of applied corrections there"
            ));
        }
    };
    kept.extend(
        entries
            .iter()
            .map(|entry| serde_json::to_value(entry).expect("plain data")),
    );
    write_json(&path, &Value::Array(kept))
        .map_err(|error| format!("cannot write {CORRECTIONS_APPLIED}: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn error(document: Value) -> String {
        parse("validation/f.json", &document).expect_err("invalid")
    }

    #[test]
    fn a_well_formed_file_parses_with_defaults_and_forgiven_case() {
        let findings = parse(
            "f.json",
            &json!([
                {"id": "F1", "status": "fail", "severity": "Critical", "claim": "c", "expected": 3, "actual": 4},
                {"id": 2, "status": "PASS", "severity": "info"}
            ]),
        )
        .expect("valid");
        assert_eq!(findings[0].status, "FAIL");
        assert_eq!(findings[0].severity, "critical");
        assert_eq!(findings[0].expected, "3");
        assert!(findings[0].is_critical());
        assert_eq!(findings[1].id, "2");
        assert_eq!(findings[1].fix, "");
        assert!(!findings[1].is_critical());
    }

    #[test]
    fn errors_name_the_file_the_item_and_the_field() {
        assert_eq!(
            error(json!({"findings": []})),
            "validation/f.json is not a JSON array (a findings file is an array of {id, status, claim, expected, actual, severity, category, source, fix}); its top level is an object"
        );
        assert_eq!(
            error(json!([{"id": "F1", "severity": "minor"}])),
            "validation/f.json: finding 1 (id F1): 'status' is missing (one of PASS, FAIL, WARN)"
        );
        assert_eq!(
            error(
                json!([{"id": "F1", "status": "PASS", "severity": "minor"}, {"id": "F2", "status": "FAIL", "severity": "high"}])
            ),
            "validation/f.json: finding 2 (id F2): 'severity' is 'high', not one of critical, minor, info"
        );
        assert_eq!(
            error(json!([{"status": "PASS", "severity": "minor"}])),
            "validation/f.json: finding 1: 'id' is missing"
        );
        assert_eq!(
            error(json!(["F1"])),
            "validation/f.json: finding 1: is a string, not an object"
        );
        assert_eq!(
            error(json!([{"id": "F1", "status": 1, "severity": "minor"}])),
            "validation/f.json: finding 1 (id F1): 'status' is a number, not one of PASS, FAIL, WARN"
        );
    }

    #[test]
    fn a_file_that_is_not_json_names_the_file() {
        let directory = tempfile::tempdir().expect("temp dir");
        std::fs::write(directory.path().join("f.json"), "not json").expect("write");
        let error = read(directory.path(), "f.json").expect_err("invalid");
        assert!(error.starts_with("f.json is not JSON: "), "{error}");
        let error = read(directory.path(), "absent.json").expect_err("absent");
        assert!(error.starts_with("cannot read absent.json: "), "{error}");
    }

    #[test]
    fn merged_ids_stay_unique() {
        let finding = |id: &str| Finding {
            id: id.to_owned(),
            status: "PASS".to_owned(),
            claim: String::new(),
            expected: String::new(),
            actual: String::new(),
            severity: "info".to_owned(),
            category: String::new(),
            source: String::new(),
            fix: String::new(),
        };
        let merged = merge(vec![
            vec![finding("F1"), finding("F2")],
            vec![finding("F1")],
            vec![finding("F1")],
        ]);
        let ids: Vec<&str> = merged.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["F1", "F2", "F1#2", "F1#3"]);
    }

    #[test]
    fn the_applied_log_is_rebuilt_per_stage() {
        let directory = tempfile::tempdir().expect("temp dir");
        let workspace = directory.path();
        std::fs::create_dir_all(workspace.join("validation")).expect("dir");
        std::fs::write(
            workspace.join(CORRECTIONS_APPLIED),
            r#"[{"stage": "other", "cycle": 1, "finding_id": "X", "change": "kept"}]"#,
        )
        .expect("write");
        let entry = Correction {
            stage: "s".to_owned(),
            cycle: 1,
            finding_id: "F1".to_owned(),
            change: "fixed".to_owned(),
        };
        // Twice, as after a crash: no duplicate.
        for _ in 0..2 {
            write_applied(workspace, "s", std::slice::from_ref(&entry)).expect("writes");
        }
        let written = read_json(workspace, CORRECTIONS_APPLIED).expect("json");
        assert_eq!(written.as_array().map(Vec::len), Some(2));
        assert_eq!(written[0]["stage"], "other");
        assert_eq!(written[1]["finding_id"], "F1");
    }

    #[test]
    fn a_corrections_log_needs_ids_and_changes() {
        let directory = tempfile::tempdir().expect("temp dir");
        std::fs::write(
            directory.path().join("log.json"),
            r#"[{"finding_id": "F1", "change": "c"}, {"finding_id": "F2"}]"#,
        )
        .expect("write");
        let error = read_log(directory.path(), "log.json", "s", 1).expect_err("invalid");
        assert_eq!(error, "log.json: entry 2: 'change' is missing");
    }
}
