//! The subject of a validation split into units: one per list item of a
//! JSON file whose top level is an array (or an object with an `items`
//! array), one per file otherwise, and one per file of a declared output
//! directory.

use std::path::Path;

use baton_store::UnitRow;
use baton_workflow::plan::PlanStage;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::outputs::{self, MAX_DIRECTORY_FILES};
use crate::work::context::ITEM;
use crate::workspace::output_path;

/// The most units one validation wave may have.
pub(crate) const MAX_UNITS: usize = 10_000;

/// Items up to this size (as JSON) are carried in the unit and inlined in
/// the validator's prompt; larger ones are named by position.
const INLINE_ITEM_BYTES: usize = 8 * 1024;

/// The largest file split into items.
const MAX_SPLIT_BYTES: u64 = 64 * 1024 * 1024;

/// One part of the validated output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Target {
    /// The stage that wrote it.
    pub(crate) stage: String,
    /// The workspace-relative file.
    pub(crate) file: String,
    /// For a list item: its position in the list, from 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) item: Option<usize>,
    /// For a list item: the item, when it is small enough to inline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) value: Option<Value>,
}

/// The workspace-relative files a subject stage wrote. For the validated
/// stage itself when it fans out, the files its children recorded (its
/// declared outputs hold `{placeholders}`); otherwise its declared outputs,
/// where a directory means every file in it and a `{placeholder}` in a
/// file name matches any text.
pub(crate) fn files(stage: &PlanStage, workspace: &Path, children: &[UnitRow]) -> Vec<String> {
    let recorded: Vec<String> = children
        .iter()
        .filter(|unit| unit.kind == ITEM && unit.status == "success")
        .flat_map(|unit| recorded_paths(&unit.artifacts))
        .collect();
    if !recorded.is_empty() {
        return recorded;
    }
    let mut files = Vec::new();
    for declared in &stage.spec.writes_to {
        let relative = output_path(&declared.value);
        if relative.ends_with('/') {
            files.extend(files_under(workspace, &relative));
        } else if relative.contains('{') {
            files.extend(matching(workspace, &relative));
        } else {
            files.push(relative);
        }
    }
    files
}

fn recorded_paths(artifacts: &str) -> Vec<String> {
    serde_json::from_str::<Vec<(String, String, i64)>>(artifacts)
        .map(|rows| rows.into_iter().map(|(path, _, _)| path).collect())
        .unwrap_or_default()
}

/// Files under a workspace directory, recursively, in a stable order, as
/// workspace-relative paths.
fn files_under(workspace: &Path, relative: &str) -> Vec<String> {
    let mut names: Vec<String> =
        outputs::files_under(&workspace.join(relative), MAX_DIRECTORY_FILES)
            .into_iter()
            .filter_map(|(path, _)| {
                path.strip_prefix(workspace)
                    .ok()
                    .map(|path| path.to_string_lossy().into_owned())
            })
            .collect();
    names.sort();
    names
}

/// Files in the declared file's directory whose names match it, each
/// `{placeholder}` standing for any text. A placeholder in a directory
/// part matches nothing: the directory is not known.
fn matching(workspace: &Path, relative: &str) -> Vec<String> {
    let (directory, pattern) = relative.rsplit_once('/').unwrap_or(("", relative));
    if directory.contains('{') {
        return Vec::new();
    }
    let literals: Vec<&str> = pattern
        .split('{')
        .enumerate()
        .map(|(position, part)| {
            if position == 0 {
                part
            } else {
                part.split_once('}').map_or(part, |(_, rest)| rest)
            }
        })
        .collect();
    let Ok(entries) = std::fs::read_dir(workspace.join(directory)) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_file()))
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| wildcard_match(name, &literals))
        .map(|name| format!("{directory}/{name}"))
        .collect();
    names.sort();
    names
}

/// Whether `name` is `literals` joined by arbitrary text.
fn wildcard_match(name: &str, literals: &[&str]) -> bool {
    let Some((first, rest)) = literals.split_first() else {
        return name.is_empty();
    };
    let Some(mut remaining) = name.strip_prefix(first) else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        return remaining.is_empty();
    };
    for literal in middle {
        match remaining.find(literal) {
            Some(at) => remaining = &remaining[at + literal.len()..],
            None => return false,
        }
    }
    remaining.len() >= last.len() && remaining.ends_with(last)
}

/// Splits the files of the subject stages (stage name, file) into units.
pub(crate) fn split(workspace: &Path, files: &[(String, String)]) -> Result<Vec<Target>, String> {
    let mut targets = Vec::new();
    for (stage, file) in files {
        match list_items(workspace, file) {
            Some(items) => {
                for (position, item) in items.into_iter().enumerate() {
                    let inline = serde_json::to_string(&item)
                        .is_ok_and(|text| text.len() <= INLINE_ITEM_BYTES);
                    targets.push(Target {
                        stage: stage.clone(),
                        file: file.clone(),
                        item: Some(position + 1),
                        value: inline.then_some(item),
                    });
                    check_count(targets.len())?;
                }
            }
            None => {
                targets.push(Target {
                    stage: stage.clone(),
                    file: file.clone(),
                    item: None,
                    value: None,
                });
                check_count(targets.len())?;
            }
        }
    }
    Ok(targets)
}

fn check_count(count: usize) -> Result<(), String> {
    if count > MAX_UNITS {
        Err(format!(
            "the validated output has more than {MAX_UNITS} units; a unit validation may have at most {MAX_UNITS}"
        ))
    } else {
        Ok(())
    }
}

/// The items of a JSON list file, or `None` when the file is not one
/// (absent, too large, not JSON, or some other shape): it is then one unit.
fn list_items(workspace: &Path, relative: &str) -> Option<Vec<Value>> {
    let path = workspace.join(relative);
    if std::fs::metadata(&path).ok()?.len() > MAX_SPLIT_BYTES {
        return None;
    }
    let document: Value = serde_json::from_slice(&std::fs::read(&path).ok()?).ok()?;
    match document {
        Value::Array(items) => Some(items),
        Value::Object(mut fields) => match fields.remove("items") {
            Some(Value::Array(items)) => Some(items),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, relative: &str, text: &str) {
        let path = root.join(relative);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
        std::fs::write(path, text).expect("write");
    }

    fn pair(stage: &str, file: &str) -> (String, String) {
        (stage.to_owned(), file.to_owned())
    }

    #[test]
    fn lists_split_per_item_and_other_files_are_one_unit() {
        let directory = tempfile::tempdir().expect("temp dir");
        let root = directory.path();
        write(root, "outputs/list.json", r#"[{"id": 1}, "two"]"#);
        write(
            root,
            "outputs/wrapped.json",
            r#"{"items": [3], "note": "x"}"#,
        );
        write(root, "outputs/object.json", r#"{"a": [1]}"#);
        write(root, "outputs/empty.json", "[]");
        write(root, "outputs/report.md", "# report");
        let files = [
            pair("a", "outputs/list.json"),
            pair("a", "outputs/wrapped.json"),
            pair("b", "outputs/object.json"),
            pair("b", "outputs/empty.json"),
            pair("b", "outputs/report.md"),
            pair("b", "outputs/missing.json"),
        ];
        let targets = split(root, &files).expect("splits");
        let shown: Vec<(String, Option<usize>, Option<Value>)> = targets
            .into_iter()
            .map(|target| (target.file, target.item, target.value))
            .collect();
        assert_eq!(
            shown,
            vec![
                (
                    "outputs/list.json".to_owned(),
                    Some(1),
                    Some(serde_json::json!({"id": 1}))
                ),
                (
                    "outputs/list.json".to_owned(),
                    Some(2),
                    Some(serde_json::json!("two"))
                ),
                (
                    "outputs/wrapped.json".to_owned(),
                    Some(1),
                    Some(serde_json::json!(3))
                ),
                ("outputs/object.json".to_owned(), None, None),
                ("outputs/report.md".to_owned(), None, None),
                ("outputs/missing.json".to_owned(), None, None),
            ]
        );
    }

    #[test]
    fn large_items_are_named_not_inlined() {
        let directory = tempfile::tempdir().expect("temp dir");
        let big = "x".repeat(INLINE_ITEM_BYTES + 1);
        write(directory.path(), "outputs/l.json", &format!("[\"{big}\"]"));
        let targets = split(directory.path(), &[pair("a", "outputs/l.json")]).expect("splits");
        assert_eq!(targets[0].item, Some(1));
        assert_eq!(targets[0].value, None);
    }

    #[test]
    fn too_many_units_is_an_error() {
        let directory = tempfile::tempdir().expect("temp dir");
        let list = vec!["1"; MAX_UNITS + 1].join(",");
        write(directory.path(), "outputs/l.json", &format!("[{list}]"));
        let error = split(directory.path(), &[pair("a", "outputs/l.json")]).expect_err("too many");
        assert!(error.contains("more than 10000 units"), "{error}");
    }

    #[test]
    fn placeholders_in_file_names_match_any_text() {
        assert!(wildcard_match("f-api.json", &["f-", ".json"]));
        assert!(wildcard_match("f-.json", &["f-", ".json"]));
        assert!(!wildcard_match("g-api.json", &["f-", ".json"]));
        assert!(wildcard_match("a-1-b-2.md", &["a-", "-b-", ".md"]));
        assert!(!wildcard_match("a.json", &["a", ".json", ".json"]));
        let directory = tempfile::tempdir().expect("temp dir");
        write(directory.path(), "outputs/findings/api.json", "{}");
        write(directory.path(), "outputs/findings/db.json", "{}");
        write(directory.path(), "outputs/findings/notes.md", "");
        assert_eq!(
            matching(directory.path(), "outputs/findings/{domain}.json"),
            ["outputs/findings/api.json", "outputs/findings/db.json"]
        );
        assert_eq!(
            files_under(directory.path(), "outputs/findings/"),
            [
                "outputs/findings/api.json",
                "outputs/findings/db.json",
                "outputs/findings/notes.md"
            ]
        );
    }
}
