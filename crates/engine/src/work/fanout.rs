//! Fan-out at run time (docs/fan-out.md): one child per item of the source
//! stage's output.
//!
//! The items are the array at `fan_out.field` (a dotted path) in the source
//! stage's first `writes_to` file; an item is an object (its key is
//! `item[fan_out.key]`) or a plain string or number (the key is the item).
//! Each child is the stage with `{<key>}` — and every other scalar field of
//! an object item — substituted into its description and outputs (file
//! names get the sanitised key) and, shell-quoted, into its script. A
//! child is shown as `stage[key]`; its files are named `NNN-stage-<key>`.

use std::collections::{HashMap, HashSet};

use baton_store::{NewUnit, UnitRow};
use baton_workflow::plan::PlanStage;
use baton_workflow::schema::{Executor, FanOutMode, Isolation};
use serde_json::Value;

use super::context::{Context, ITEM, Materialized, Step, unit_stage_name};
use crate::digest::sha256_hex;
use crate::workspace::output_path;

/// The most items one fan-out may have.
pub(crate) const MAX_ITEMS: usize = 100_000;

/// Reads the items and plans one unit per item; an empty list is done at once.
pub(crate) fn plan(context: &Context<'_>) -> Step {
    match items(context) {
        Err(error) => Step::Fail {
            error,
            record: Vec::new(),
        },
        Ok(units) if units.is_empty() => Step::Done { record: Vec::new() },
        Ok(units) => Step::Next {
            units,
            record: Vec::new(),
        },
    }
}

/// Once every child has finished: the stage fails if any child failed.
pub(crate) fn failure(_context: &Context<'_>, children: &[&UnitRow]) -> Option<Step> {
    let failed: Vec<&&UnitRow> = children
        .iter()
        .filter(|unit| unit.status != "success")
        .collect();
    let first = failed.first()?;
    let mut error = format!(
        "{} of {} fan-out children failed; first: {}: {}",
        failed.len(),
        children.len(),
        first.label,
        first.error.as_deref().unwrap_or("failed")
    );
    if failed.len() > 1 {
        let more: Vec<&str> = failed
            .iter()
            .skip(1)
            .take(9)
            .map(|unit| unit.label.as_str())
            .collect();
        error.push_str(&format!("; also {}", more.join(", ")));
    }
    Some(Step::Fail {
        error,
        record: Vec::new(),
    })
}

/// The item list as units, keyed by the item's key.
fn items(context: &Context<'_>) -> Result<Vec<NewUnit>, String> {
    let stage = context.stage;
    let fan_out = stage.spec.fan_out.as_ref().expect("a fan-out stage");
    let source = context.plan.stage(&fan_out.source.value).ok_or_else(|| {
        format!(
            "fan_out.source '{}' is not a stage of this workflow",
            fan_out.source.value
        )
    })?;
    let declared = source.spec.writes_to.first().ok_or_else(|| {
        format!(
            "fan_out.source '{}' declares no writes_to file to read the items from",
            source.name()
        )
    })?;
    let relative = output_path(&declared.value);
    let path = context.workspace.join(&relative);
    let text = std::fs::read(&path)
        .map_err(|error| format!("cannot read the fan-out items from {relative}: {error}"))?;
    let document: Value = serde_json::from_slice(&text)
        .map_err(|error| format!("the fan-out source {relative} is not JSON: {error}"))?;
    let mut list = &document;
    for part in fan_out.field.split('.').filter(|part| !part.is_empty()) {
        list = list.get(part).ok_or_else(|| {
            format!(
                "the fan-out source {relative} has no field '{}' (fan_out.field)",
                fan_out.field
            )
        })?;
    }
    let list = list.as_array().ok_or_else(|| {
        format!(
            "'{}' in {relative} is not a list (fan_out.field must name an array)",
            fan_out.field
        )
    })?;
    if list.len() > MAX_ITEMS {
        return Err(format!(
            "{relative} lists {} items; a fan-out may have at most {MAX_ITEMS}",
            list.len()
        ));
    }
    let mut keys: Vec<String> = Vec::with_capacity(list.len());
    let mut seen: HashMap<String, usize> = HashMap::with_capacity(list.len());
    for (position, item) in list.iter().enumerate() {
        let key = item_key(item, &fan_out.key).ok_or_else(|| {
            format!(
                "item {} of '{}' in {relative} has no scalar '{}' (fan_out.key)",
                position + 1,
                fan_out.field,
                fan_out.key
            )
        })?;
        if let Some(first) = seen.insert(key.clone(), position) {
            return Err(format!(
                "items {} and {} of '{}' in {relative} have the same key '{key}'; fan-out keys must be unique",
                first + 1,
                position + 1,
                fan_out.field
            ));
        }
        keys.push(key);
    }
    let names = file_names(&keys);
    Ok(list
        .iter()
        .zip(keys)
        .zip(names)
        .enumerate()
        .map(|(position, ((item, key), name))| NewUnit {
            label: format!("{}[{key}]", stage.name()),
            spec: serde_json::json!({"item": item, "name": name}).to_string(),
            key,
            ordinal: i64::try_from(position).unwrap_or(i64::MAX),
            kind: ITEM.to_owned(),
            cycle: 0,
        })
        .collect())
}

/// The key of an item: `item[key]` for an object, the item itself for a
/// string or number.
fn item_key(item: &Value, key: &str) -> Option<String> {
    let value = match item {
        Value::Object(fields) => fields.get(key)?,
        other => other,
    };
    match value {
        Value::String(text) if !text.is_empty() => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        Value::Bool(flag) => Some(flag.to_string()),
        _ => None,
    }
}

/// The longest sanitised key kept in a file name.
const MAX_NAME_LEN: usize = 64;

/// File-name forms of the keys: characters other than letters, digits,
/// `.`, `_` and `-` become `_`, a leading dot too (so no key can name `..`),
/// at most 64 characters; keys that would share a name get a hash suffix.
fn file_names(keys: &[String]) -> Vec<String> {
    let plain: Vec<String> = keys.iter().map(|key| sanitise(key)).collect();
    let mut counts: HashMap<&str, usize> = HashMap::with_capacity(plain.len());
    for name in &plain {
        *counts.entry(name.as_str()).or_default() += 1;
    }
    let clashing: HashSet<String> = counts
        .into_iter()
        .filter(|(_, count)| *count > 1)
        .map(|(name, _)| name.to_owned())
        .collect();
    plain
        .iter()
        .zip(keys)
        .map(|(name, key)| {
            if clashing.contains(name) {
                format!("{name}-{}", &sha256_hex(key.as_bytes())[..8])
            } else {
                name.clone()
            }
        })
        .collect()
}

fn sanitise(key: &str) -> String {
    let mut name: String = key
        .chars()
        .map(crate::workspace::name_char)
        .take(MAX_NAME_LEN)
        .collect();
    if name.starts_with('.') {
        name.replace_range(..1, "_");
    }
    name
}

/// The child stage for an item unit.
pub(crate) fn child(context: &Context<'_>, unit: &UnitRow) -> Result<Materialized, String> {
    let spec: Value = serde_json::from_str(&unit.spec)
        .map_err(|error| format!("unit {} has a damaged spec: {error}", unit.key))?;
    let item = spec.get("item").cloned().unwrap_or(Value::Null);
    let name = spec
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("item")
        .to_owned();
    let parent = context.stage;
    let fan_out = parent.spec.fan_out.as_ref();
    let key_name = fan_out
        .map(|fan_out| fan_out.key.clone())
        .unwrap_or_default();
    // The placeholder values: every scalar field of an object item, and the
    // key (raw in text, sanitised in file names).
    let mut values: Vec<(String, String)> = Vec::new();
    if let Value::Object(fields) = &item {
        for (field, value) in fields {
            if let Some(text) = scalar(value) {
                values.push((field.clone(), text));
            }
        }
    }
    values.retain(|(field, _)| *field != key_name);
    values.push((key_name.clone(), unit.key.clone()));
    let lookup_text = |placeholder: &str| {
        values
            .iter()
            .find(|(field, _)| field == placeholder)
            .map(|(_, value)| value.as_str())
    };
    let lookup_file = |placeholder: &str| {
        if placeholder == key_name {
            Some(name.as_str())
        } else {
            None
        }
    };
    let mut stage: PlanStage = parent.clone();
    let spec = std::sync::Arc::make_mut(&mut stage.spec);
    if let Some(fan_out) = fan_out.filter(|fan_out| fan_out.mode == FanOutMode::WorkerQueue) {
        // One queue job per item runs `fan_out.script`; the stage-level
        // script is not enqueued as well.
        spec.executor = Executor::WorkerQueue;
        spec.script.clone_from(&fan_out.script);
    }
    if let Some(fan_out) = fan_out.filter(|fan_out| fan_out.isolation == Isolation::Worktree) {
        // `fan_out.isolation` gives each child a worktree of its own.
        spec.agent.isolation = fan_out.isolation;
    }
    spec.name.value = unit_stage_name(parent.name(), unit);
    spec.fan_out = None;
    spec.validation = None;
    spec.human_gate = false;
    spec.when = None;
    stage.when = None;
    let mut description =
        baton_workflow::template::render(&parent.description, lookup_text).into_owned();
    let pretty = serde_json::to_string_pretty(&item).unwrap_or_default();
    description.push_str(&format!(
        "\n\n## Item\n\nThis is one item ({}) of a fan-out over '{}':\n\n```json\n{pretty}\n```\n",
        unit.label,
        fan_out.map_or("", |fan_out| fan_out.field.as_str())
    ));
    stage.description = description;
    for declared in &mut spec.writes_to {
        declared.value =
            baton_workflow::template::render(&declared.value, lookup_file).into_owned();
    }
    for check in &mut spec.validates_output {
        check.path.value =
            baton_workflow::template::render(&check.path.value, lookup_file).into_owned();
    }
    // Scripts get the raw key shell-quoted for `{key}`; the file-name form
    // and the whole item are in the environment.
    let env = vec![
        ("BATON_ITEM_KEY".to_owned(), unit.key.clone()),
        ("BATON_ITEM_NAME".to_owned(), name.clone()),
        ("BATON_ITEM".to_owned(), item.to_string()),
    ];
    Ok(Materialized {
        stage,
        values,
        env,
        defer_checks: false,
        continues: None,
    })
}

/// A string, number or boolean as text; `None` for anything else.
pub(crate) fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        Value::Bool(flag) => Some(flag.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_safe_and_distinct() {
        let keys: Vec<String> = ["a/b", "a_b", "..", "ok-1.x", "é"]
            .iter()
            .map(|key| (*key).to_owned())
            .collect();
        let names = file_names(&keys);
        assert!(names[0].starts_with("a_b-") && names[1].starts_with("a_b-"));
        assert_ne!(names[0], names[1]);
        assert_eq!(names[2], "_.");
        assert_eq!(names[3], "ok-1.x");
        assert_eq!(names[4], "_");
        for name in &names {
            assert!(!name.contains('/') && !name.starts_with('.'), "{name}");
        }
    }

    #[test]
    fn keys_of_objects_strings_and_numbers() {
        let object = serde_json::json!({"id": "x", "n": 3});
        assert_eq!(item_key(&object, "id").as_deref(), Some("x"));
        assert_eq!(item_key(&object, "n").as_deref(), Some("3"));
        assert_eq!(item_key(&object, "missing"), None);
        assert_eq!(
            item_key(&serde_json::json!("plain"), "id").as_deref(),
            Some("plain")
        );
        assert_eq!(item_key(&serde_json::json!(7), "id").as_deref(), Some("7"));
        assert_eq!(item_key(&serde_json::json!(null), "id"), None);
        assert_eq!(item_key(&serde_json::json!(""), "id"), None);
    }
}
