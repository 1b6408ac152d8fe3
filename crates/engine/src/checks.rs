//! `validates_output` checks (the reference engine's checks), run after a stage's
//! process exits. Unlike the reference, an unknown check fails.

use std::path::Path;

use baton_workflow::schema::Check;
use serde_json::Value;

/// The result of one check on one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The workspace-relative path.
    pub path: String,
    /// The check.
    pub check: String,
    /// Whether it passed.
    pub passed: bool,
    /// Why it failed (or what passed).
    pub message: String,
}

/// The largest file a check parses as JSON.
const MAX_JSON_BYTES: u64 = 64 * 1024 * 1024;

/// Runs `checks` on `relative` inside `workspace`.
pub fn run(workspace: &Path, relative: &str, checks: &[Check]) -> Vec<Finding> {
    let finding = |check: &Check, passed: bool, message: String| Finding {
        path: relative.to_owned(),
        check: check.to_string(),
        passed,
        message,
    };
    let full = workspace.join(relative);
    let contained = full
        .canonicalize()
        .ok()
        .zip(workspace.canonicalize().ok())
        .is_none_or(|(file, root)| file.starts_with(root));
    if !contained {
        return checks
            .iter()
            .map(|check| finding(check, false, "path escapes the workspace".to_owned()))
            .collect();
    }
    let parsed: Result<Value, String> = match std::fs::metadata(&full) {
        Err(error) => Err(format!("cannot read {relative}: {error}")),
        Ok(metadata) if metadata.len() > MAX_JSON_BYTES => {
            Err(format!("{relative} is larger than {MAX_JSON_BYTES} bytes"))
        }
        Ok(_) => std::fs::read(&full)
            .map_err(|error| format!("cannot read {relative}: {error}"))
            .and_then(|bytes| {
                serde_json::from_slice(&bytes)
                    .map_err(|error| format!("{relative} is not valid JSON: {error}"))
            }),
    };
    checks
        .iter()
        .map(|check| {
            if *check == Check::Exists {
                let exists = full.is_file();
                let message = if exists {
                    "exists".to_owned()
                } else {
                    format!("{relative} does not exist")
                };
                return finding(check, exists, message);
            }
            if let Check::Unknown(name) = check {
                return finding(check, false, format!("unknown check '{name}'"));
            }
            let value = match &parsed {
                Ok(value) => value,
                Err(error) => {
                    let message = if *check == Check::IsJson {
                        error.clone()
                    } else {
                        format!("cannot check '{check}': {error}")
                    };
                    return finding(check, false, message);
                }
            };
            let (passed, message) = evaluate(check, value, workspace);
            finding(check, passed, message)
        })
        .collect()
}

fn evaluate(check: &Check, value: &Value, workspace: &Path) -> (bool, String) {
    match check {
        Check::IsJson | Check::Exists | Check::Unknown(_) => (true, "valid JSON".to_owned()),
        Check::IsDict => (value.is_object(), format!("top level is {}", kind(value))),
        Check::IsList => (value.is_array(), format!("top level is {}", kind(value))),
        Check::NonEmpty => {
            let non_empty = match value {
                Value::Object(map) => !map.is_empty(),
                Value::Array(items) => !items.is_empty(),
                _ => false,
            };
            (non_empty, format!("top level is {}", kind(value)))
        }
        Check::HasKey(key) => match value {
            Value::Object(map) => {
                let present = map.contains_key(key);
                let word = if present { "present" } else { "missing" };
                (present, format!("key '{key}' {word}"))
            }
            _ => (
                false,
                format!("top level is {}, not an object", kind(value)),
            ),
        },
        Check::ValuesHaveKey(key) => match value {
            Value::Object(map) => every_has(map.iter(), "value", key),
            _ => (
                false,
                format!("top level is {}, not an object", kind(value)),
            ),
        },
        Check::ListItemsHaveKey(key) => match value {
            Value::Array(items) => every_has(items.iter().enumerate(), "item", key),
            _ => (false, format!("top level is {}, not a list", kind(value))),
        },
        Check::Schema(path) => schema(value, &workspace.join(path), path),
    }
}

/// Whether every one of `named` (a `what`, with the name a message gives
/// it) is an object with `key`; the message names the first three without.
fn every_has<'a, N: std::fmt::Display>(
    named: impl Iterator<Item = (N, &'a Value)>,
    what: &str,
    key: &str,
) -> (bool, String) {
    let missing: Vec<String> = named
        .filter(|(_, item)| item.get(key).is_none() || !item.is_object())
        .map(|(name, _)| name.to_string())
        .take(3)
        .collect();
    if missing.is_empty() {
        (true, format!("every {what} has '{key}'"))
    } else {
        (
            false,
            format!("{what}s without '{key}': {}", missing.join(", ")),
        )
    }
}

/// A `schema:` check. The schema file is JSON; baton checks the subset of
/// JSON Schema that output contracts use: `type`, `required`, `properties`,
/// `items`, `enum`, `minItems`.
fn schema(value: &Value, schema_path: &Path, shown: &str) -> (bool, String) {
    let schema: Value = match std::fs::read(schema_path)
        .map_err(|error| error.to_string())
        .and_then(|bytes| serde_json::from_slice(&bytes).map_err(|error| error.to_string()))
    {
        Ok(schema) => schema,
        Err(error) => return (false, format!("cannot read schema {shown}: {error}")),
    };
    let mut errors = Vec::new();
    validate(value, &schema, "", &mut errors);
    if errors.is_empty() {
        (true, format!("valid against {shown}"))
    } else {
        errors.truncate(5);
        (
            false,
            format!("not valid against {shown}: {}", errors.join("; ")),
        )
    }
}

/// Checks `value` against `schema` (the subset above, plus `type` as a list
/// of names and `additionalProperties: false`) and returns every error,
/// each with its JSON pointer.
pub fn check_schema(value: &Value, schema: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    validate(value, schema, "", &mut errors);
    errors
}

fn type_matches(expected: &str, value: &Value) -> bool {
    match expected {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.is_i64() || value.is_u64(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => true,
    }
}

fn validate(value: &Value, schema: &Value, path: &str, errors: &mut Vec<String>) {
    let at = if path.is_empty() { "/" } else { path };
    let expected: Vec<&str> = match schema.get("type") {
        Some(Value::String(one)) => vec![one.as_str()],
        Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !expected.is_empty() && !expected.iter().any(|e| type_matches(e, value)) {
        errors.push(format!(
            "{at}: expected {}, got {}",
            expected.join(" or "),
            kind(value)
        ));
        return;
    }
    if let (Some(Value::Bool(false)), Some(map), Some(properties)) = (
        schema.get("additionalProperties"),
        value.as_object(),
        schema.get("properties").and_then(Value::as_object),
    ) {
        for key in map.keys().filter(|key| !properties.contains_key(*key)) {
            errors.push(format!("{at}: unexpected property '{key}'"));
        }
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        errors.push(format!("{at}: not one of the allowed values"));
    }
    if let (Some(required), Some(map)) = (
        schema.get("required").and_then(Value::as_array),
        value.as_object(),
    ) {
        for key in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(key) {
                errors.push(format!("{at}: missing required property '{key}'"));
            }
        }
    }
    if let (Some(properties), Some(map)) = (
        schema.get("properties").and_then(Value::as_object),
        value.as_object(),
    ) {
        for (key, property) in properties {
            if let Some(item) = map.get(key) {
                validate(item, property, &format!("{path}/{key}"), errors);
            }
        }
    }
    if let Some(items) = value.as_array() {
        if let Some(minimum) = schema.get("minItems").and_then(Value::as_u64)
            && (items.len() as u64) < minimum
        {
            errors.push(format!("{at}: fewer than {minimum} items"));
        }
        if let Some(item_schema) = schema.get("items") {
            for (index, item) in items.iter().enumerate() {
                validate(item, item_schema, &format!("{path}/{index}"), errors);
            }
        }
    }
}

/// What a JSON value is, for messages: `a list`, `an object`, …
pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(contents: &str, checks: &[&str]) -> Vec<bool> {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("out.json"), contents).expect("write");
        std::fs::write(dir.path().join("schema.json"), r#"{"type":"object","required":["items"],"properties":{"items":{"type":"array","items":{"type":"object","required":["id"]}}}}"#).expect("write");
        let parsed: Vec<Check> = checks.iter().map(|name| Check::parse(name)).collect();
        run(dir.path(), "out.json", &parsed)
            .into_iter()
            .map(|finding| finding.passed)
            .collect()
    }

    #[test]
    fn reference_checks() {
        let all = [
            "is_json",
            "is_dict",
            "is_list",
            "non_empty",
            "has_key:items",
            "exists",
        ];
        assert_eq!(
            check(r#"{"items": [1]}"#, &all),
            vec![true, true, false, true, true, true]
        );
        assert_eq!(
            check("[]", &all),
            vec![true, false, true, false, false, true]
        );
        assert_eq!(check("not json", &["is_json", "exists"]), vec![false, true]);
        assert_eq!(
            check(r#"{"a": {"k": 1}, "b": {}}"#, &["values_have_key:k"]),
            vec![false]
        );
        assert_eq!(
            check(r#"[{"k": 1}, {"k": 2}]"#, &["list_items_have_key:k"]),
            vec![true]
        );
    }

    #[test]
    fn unknown_checks_fail() {
        assert_eq!(check("{}", &["schema", "bogus"]), vec![false, false]);
    }

    #[test]
    fn schema_checks() {
        assert_eq!(
            check(r#"{"items": [{"id": 1}]}"#, &["schema:schema.json"]),
            vec![true]
        );
        assert_eq!(
            check(r#"{"items": [{"name": 1}]}"#, &["schema:schema.json"]),
            vec![false]
        );
        assert_eq!(
            check(r#"{"other": 1}"#, &["schema:schema.json"]),
            vec![false]
        );
    }

    #[test]
    fn missing_files_fail_every_check() {
        let dir = tempfile::tempdir().expect("temp dir");
        let findings = run(dir.path(), "nope.json", &[Check::Exists, Check::IsJson]);
        assert!(findings.iter().all(|finding| !finding.passed));
    }
}
