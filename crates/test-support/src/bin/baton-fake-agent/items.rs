//! Fan-out sources: a file listed under `## Fan-out source` gets a list of
//! items at the fan-out's field, each carrying the fan-out's key.
//!
//! The number of items is `BATON_FAKE_ITEMS` (default 1). Item `i` (from 1)
//! is an object whose key field is `item-<i>` and whose fields `id`,
//! `name`, `domain`, `verify_key`, `slug` and `batch` (when not the key)
//! are `<field>-<i>`, with `index` = `i`: unique values for whatever key a
//! workflow fans out on.

use std::collections::HashMap;

use super::output::json_string;

/// The field and key each fan-out source file needs, by path.
pub(crate) fn sources(prompt: &str) -> HashMap<String, (String, String)> {
    prompt
        .lines()
        .skip_while(|line| line.trim() != "## Fan-out source")
        .skip(1)
        .skip_while(|line| line.trim().is_empty())
        .map_while(|line| line.strip_prefix("- "))
        .filter_map(|line| {
            let (path, rest) = line.split_once(": a JSON object with a list at `")?;
            let (field, rest) = rest.split_once('`')?;
            let (_, rest) = rest.split_once("keyed by the item's `")?;
            let (key, _) = rest.split_once('`')?;
            Some((path.to_owned(), (field.to_owned(), key.to_owned())))
        })
        .collect()
}

/// How many items to write: `BATON_FAKE_ITEMS`, default 1.
pub(crate) fn count() -> Result<usize, String> {
    match std::env::var("BATON_FAKE_ITEMS") {
        Err(_) => Ok(1),
        Ok(text) => text
            .trim()
            .parse()
            .map_err(|_| format!("BATON_FAKE_ITEMS=`{text}` is not a count")),
    }
}

/// The JSON document: `count` items at the dotted `field`, plus
/// `extra_keys` (from `has_key:` checks) at the top level as lists.
pub(crate) fn document(field: &str, key: &str, count: usize, extra_keys: &[&str]) -> String {
    let mut items = String::with_capacity(count * 160);
    for index in 1..=count {
        if index > 1 {
            items.push(',');
        }
        let mut fields = vec![format!(
            "{}:{}",
            json_string(key),
            json_string(&format!("item-{index}"))
        )];
        for name in ["id", "name", "domain", "verify_key", "slug", "batch"] {
            if name != key {
                fields.push(format!(
                    "{}:{}",
                    json_string(name),
                    json_string(&format!("{name}-{index}"))
                ));
            }
        }
        if key != "index" {
            fields.push(format!("\"index\":{index}"));
        }
        items.push('{');
        items.push_str(&fields.join(","));
        items.push('}');
    }
    let mut value = format!("[{items}]");
    let parts: Vec<&str> = field.split('.').filter(|part| !part.is_empty()).collect();
    for part in parts.iter().skip(1).rev() {
        value = format!("{{{}:{value}}}", json_string(part));
    }
    let top = parts.first().copied().unwrap_or("items");
    let mut fields = vec![format!("{}:{value}", json_string(top))];
    for extra in extra_keys.iter().filter(|extra| **extra != top) {
        fields.push(format!("{}:[\"x\"]", json_string(extra)));
    }
    fields.push("\"written_by\":\"baton-fake-agent\"".to_owned());
    format!("{{{}}}\n", fields.join(","))
}
