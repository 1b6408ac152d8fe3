//! The editable output of a gate: a JSON list or a markdown list, read as
//! numbered items and rewritten by `drop`, `edit` and `add`. Pure text in,
//! text out; the caller writes the file.
//!
//! * JSON: a top-level array, or an object whose `items` is an array (its
//!   other keys are kept in order). `edit N field=value` sets a field of an
//!   object item (the value is parsed as JSON when it parses, else taken as
//!   a string); a string item is replaced with `edit N text=value`. `add
//!   TEXT` appends TEXT as it is when it is a JSON object, else
//!   `{"text": TEXT}` when the list holds objects, else the string TEXT.
//!   The file is written back as 2-space indented JSON.
//! * Markdown: items are top-level lines starting with `- `, `* ` or
//!   `1. `, with the indented lines below each (continuations, nested
//!   lists). `edit N text=value` replaces an item's first line after its
//!   marker; `add TEXT` appends an item with the last item's marker;
//!   each run of numbered items is renumbered from 1 after a change.

use serde_json::Value;

/// One change to a gate's output; items are numbered from 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateEdit {
    /// Remove item N.
    Drop(usize),
    /// Set `field` of item N to `value`.
    Edit {
        /// Item number, from 1.
        n: usize,
        /// The field (`text` for string items and markdown lines).
        field: String,
        /// The new value (JSON if it parses, else a string).
        value: String,
    },
    /// Append an item.
    Add(String),
}

/// Which kind of list a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    /// A JSON array (top level or under `items`).
    Json,
    /// Markdown list lines.
    Markdown,
}

impl ListKind {
    /// `json` or `markdown`.
    pub fn as_str(self) -> &'static str {
        match self {
            ListKind::Json => "json",
            ListKind::Markdown => "markdown",
        }
    }
}

/// Why an edit cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    /// The item number is outside the list.
    #[error("there is no item {n}: the list has {}", range(*len))]
    OutOfRange {
        /// Asked for.
        n: usize,
        /// Items in the list.
        len: usize,
    },
    /// The edit does not apply to this item.
    #[error("{0}")]
    Invalid(String),
}

fn range(len: usize) -> String {
    match len {
        0 => "no items".to_owned(),
        1 => "1 item (number 1)".to_owned(),
        len => format!("{len} items (numbers 1 to {len})"),
    }
}

/// The kind of list `text` holds, if any.
pub fn detect(text: &str) -> Option<ListKind> {
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        return json_items(&value).map(|_| ListKind::Json);
    }
    (!markdown_items(text).is_empty()).then_some(ListKind::Markdown)
}

fn json_items(value: &Value) -> Option<&Vec<Value>> {
    match value {
        Value::Array(items) => Some(items),
        Value::Object(map) => map.get("items").and_then(Value::as_array),
        _ => None,
    }
}

fn json_items_mut(value: &mut Value) -> Option<&mut Vec<Value>> {
    match value {
        Value::Array(items) => Some(items),
        Value::Object(map) => map.get_mut("items").and_then(Value::as_array_mut),
        _ => None,
    }
}

/// The items as one line each: strings as they are, other values as
/// compact JSON, markdown items without their marker.
pub fn items(kind: ListKind, text: &str) -> Vec<String> {
    match kind {
        ListKind::Json => serde_json::from_str::<Value>(text)
            .ok()
            .as_ref()
            .and_then(json_items)
            .map(|items| {
                items
                    .iter()
                    .map(|item| match item {
                        Value::String(text) => text.clone(),
                        other => other.to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        ListKind::Markdown => {
            let lines: Vec<&str> = text.lines().collect();
            markdown_items(text)
                .into_iter()
                .map(|(start, _)| marker(lines[start]).map_or("", |(_, rest)| rest).to_owned())
                .collect()
        }
    }
}

/// Applies `edit` to a list of `kind`; returns the new text.
///
/// # Errors
///
/// An item number out of range, or an edit that does not fit the item.
pub fn apply(kind: ListKind, text: &str, edit: &GateEdit) -> Result<String, EditError> {
    match kind {
        ListKind::Json => apply_json(text, edit),
        ListKind::Markdown => apply_markdown(text, edit),
    }
}

fn check(n: usize, len: usize) -> Result<usize, EditError> {
    if n == 0 || n > len {
        return Err(EditError::OutOfRange { n, len });
    }
    Ok(n - 1)
}

fn apply_json(text: &str, edit: &GateEdit) -> Result<String, EditError> {
    let mut value: Value = serde_json::from_str(text)
        .map_err(|error| EditError::Invalid(format!("the output is not JSON: {error}")))?;
    let items = json_items_mut(&mut value)
        .ok_or_else(|| EditError::Invalid("the output holds no JSON list".to_owned()))?;
    match edit {
        GateEdit::Drop(n) => {
            let at = check(*n, items.len())?;
            items.remove(at);
        }
        GateEdit::Edit { n, field, value } => {
            let at = check(*n, items.len())?;
            let parsed = serde_json::from_str::<Value>(value)
                .unwrap_or_else(|_| Value::String(value.clone()));
            match &mut items[at] {
                Value::Object(map) => {
                    map.insert(field.clone(), parsed);
                }
                item if field == "text" => {
                    // A string item stays a string: `text=42` means "42".
                    *item = if item.is_string() {
                        Value::String(value.clone())
                    } else {
                        parsed
                    };
                }
                item => {
                    return Err(EditError::Invalid(format!(
                        "item {n} is {}, not an object: use `text=…` to replace it",
                        crate::checks::kind(item)
                    )));
                }
            }
        }
        GateEdit::Add(added) => {
            let item = match serde_json::from_str::<Value>(added) {
                Ok(object @ Value::Object(_)) => object,
                _ if !items.is_empty() && items.iter().all(Value::is_object) => {
                    serde_json::json!({ "text": added })
                }
                _ => Value::String(added.clone()),
            };
            items.push(item);
        }
    }
    let mut out = serde_json::to_string_pretty(&value).expect("plain data");
    out.push('\n');
    Ok(out)
}

/// A top-level list line's marker (`- `, `* `, `12. `) and the rest.
fn marker(line: &str) -> Option<(&str, &str)> {
    for bullet in ["- ", "* "] {
        if let Some(rest) = line.strip_prefix(bullet) {
            return Some((bullet, rest));
        }
    }
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 && line[digits..].starts_with(". ") {
        return Some((&line[..digits + 2], &line[digits + 2..]));
    }
    None
}

/// Each item as (first line, one past its last line).
fn markdown_items(text: &str) -> Vec<(usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut items: Vec<(usize, usize)> = Vec::new();
    let mut open = false;
    for (number, line) in lines.iter().enumerate() {
        if marker(line).is_some() {
            items.push((number, number + 1));
            open = true;
        } else if open && line.starts_with([' ', '\t']) && !line.trim().is_empty() {
            if let Some(last) = items.last_mut() {
                last.1 = number + 1;
            }
        } else if !line.trim().is_empty() {
            open = false;
        }
    }
    items
}

fn apply_markdown(text: &str, edit: &GateEdit) -> Result<String, EditError> {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let items = markdown_items(text);
    match edit {
        GateEdit::Drop(n) => {
            let (start, end) = items[check(*n, items.len())?];
            lines.drain(start..end);
        }
        GateEdit::Edit { n, field, value } => {
            let (start, _) = items[check(*n, items.len())?];
            if field != "text" {
                return Err(EditError::Invalid(format!(
                    "markdown items have one field, `text` (got `{field}`)"
                )));
            }
            let (bullet, _) = marker(&lines[start]).expect("an item line");
            lines[start] = format!("{bullet}{}", single_line(value));
        }
        GateEdit::Add(added) => {
            let (bullet, at) = match items.last() {
                Some(&(start, end)) => {
                    let (bullet, _) = marker(&lines[start]).expect("an item line");
                    (bullet.to_owned(), end)
                }
                None => ("- ".to_owned(), lines.len()),
            };
            lines.insert(at, format!("{bullet}{}", single_line(added)));
        }
    }
    renumber(&mut lines);
    let mut out = lines.join("\n");
    out.push('\n');
    Ok(out)
}

/// A list item is one line: newlines in a value become spaces.
fn single_line(text: &str) -> String {
    text.split(['\n', '\r']).collect::<Vec<_>>().join(" ")
}

/// Numbers each run of numbered items 1, 2, 3, ….
fn renumber(lines: &mut [String]) {
    let mut next: Option<u64> = None;
    for line in lines.iter_mut() {
        let numbered = marker(line)
            .filter(|(bullet, _)| bullet.ends_with(". "))
            .map(|(_, rest)| rest.to_owned());
        if let Some(rest) = numbered {
            let wanted = next.unwrap_or(1);
            *line = format!("{wanted}. {rest}");
            next = Some(wanted + 1);
        } else if !line.trim().is_empty() && !line.starts_with([' ', '\t']) {
            next = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(n: usize, field: &str, value: &str) -> GateEdit {
        GateEdit::Edit {
            n,
            field: field.to_owned(),
            value: value.to_owned(),
        }
    }

    #[test]
    fn detects_lists() {
        assert_eq!(detect("[1, 2]"), Some(ListKind::Json));
        assert_eq!(detect(r#"{"items": [], "x": 1}"#), Some(ListKind::Json));
        assert_eq!(detect(r#"{"x": 1}"#), None);
        assert_eq!(detect("# T\n\n- a\n- b\n"), Some(ListKind::Markdown));
        assert_eq!(detect("1. a\n"), Some(ListKind::Markdown));
        assert_eq!(detect("just prose\n"), None);
    }

    #[test]
    fn json_drop_edit_add() {
        let text = r#"{"title": "t", "items": [{"id": "a"}, {"id": "b"}]}"#;
        let dropped = apply(ListKind::Json, text, &GateEdit::Drop(1)).unwrap();
        assert_eq!(items(ListKind::Json, &dropped), [r#"{"id":"b"}"#]);
        assert!(dropped.starts_with("{\n  \"title\": \"t\","), "{dropped}");
        let edited = apply(ListKind::Json, &dropped, &edit(1, "score", "3")).unwrap();
        let edited = apply(ListKind::Json, &edited, &edit(1, "note", "not json")).unwrap();
        assert_eq!(
            items(ListKind::Json, &edited),
            [r#"{"id":"b","score":3,"note":"not json"}"#]
        );
        let added = apply(ListKind::Json, &edited, &GateEdit::Add("new".to_owned())).unwrap();
        let added = apply(
            ListKind::Json,
            &added,
            &GateEdit::Add(r#"{"id": "c"}"#.to_owned()),
        )
        .unwrap();
        assert_eq!(
            items(ListKind::Json, &added)[1..],
            [r#"{"text":"new"}"#.to_owned(), r#"{"id":"c"}"#.to_owned()]
        );
    }

    #[test]
    fn json_string_items() {
        let text = r#"["a", "b"]"#;
        let out = apply(ListKind::Json, text, &edit(2, "text", "42")).unwrap();
        let out = apply(ListKind::Json, &out, &GateEdit::Add("c".to_owned())).unwrap();
        assert_eq!(items(ListKind::Json, &out), ["a", "42", "c"]);
        assert_eq!(serde_json::from_str::<Value>(&out).unwrap()[1], "42");
        assert!(matches!(
            apply(ListKind::Json, text, &edit(1, "score", "1")),
            Err(EditError::Invalid(message)) if message.contains("a string")
        ));
    }

    #[test]
    fn out_of_range_names_the_range() {
        let error = apply(ListKind::Json, "[1, 2, 3]", &GateEdit::Drop(4)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "there is no item 4: the list has 3 items (numbers 1 to 3)"
        );
        let error = apply(ListKind::Markdown, "- a\n", &GateEdit::Drop(0)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "there is no item 0: the list has 1 item (number 1)"
        );
    }

    #[test]
    fn markdown_drop_edit_add() {
        let text = "# Plan\n\n- one\n  detail of one\n- two\n* three\n\nAfter.\n";
        assert_eq!(items(ListKind::Markdown, text), ["one", "two", "three"]);
        let out = apply(ListKind::Markdown, text, &GateEdit::Drop(1)).unwrap();
        assert_eq!(out, "# Plan\n\n- two\n* three\n\nAfter.\n");
        let out = apply(ListKind::Markdown, &out, &edit(2, "text", "THREE")).unwrap();
        let out = apply(ListKind::Markdown, &out, &GateEdit::Add("four".to_owned())).unwrap();
        assert_eq!(out, "# Plan\n\n- two\n* THREE\n* four\n\nAfter.\n");
        assert!(apply(ListKind::Markdown, &out, &edit(1, "title", "x")).is_err());
    }

    #[test]
    fn markdown_numbered_lists_are_renumbered() {
        let text = "Steps:\n1. a\n2. b\n3. c\n";
        let out = apply(ListKind::Markdown, text, &GateEdit::Drop(1)).unwrap();
        assert_eq!(out, "Steps:\n1. b\n2. c\n");
        let out = apply(ListKind::Markdown, &out, &GateEdit::Add("d".to_owned())).unwrap();
        assert_eq!(out, "Steps:\n1. b\n2. c\n3. d\n");
    }
}
