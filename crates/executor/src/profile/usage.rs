//! Reading tokens, cost, turns and the session id from an agent's output.
//!
//! A profile's `[output]` table says how (docs/agents.md):
//!
//! * `format = "json"`: stdout is one JSON object; a field given as a string
//!   is a JSON Pointer into it.
//! * `format = "jsonl"`: stdout is one JSON event per line; a string field is
//!   read from the last event that has it.
//! * `format = "text"`: a string field is a regex whose first group is the
//!   number (`12.5k` counts as 12 500); every match counts, summed, because
//!   text CLIs print one report per message.
//!
//! A field may also be a table: `{ match = { type = "…" }, field = "/ptr",
//! aggregate = "sum|last|concat" }`, and a group table (`final`, `usage`, or
//! any other name) holds several fields read from the same selected events:
//! `match` keeps the events whose top-level keys have one of the given
//! values, `each = "/ptr"` steps into every value of the object or array at
//! that pointer (gemini's per-model stats), and `aggregate` (default `last`)
//! combines what the selected events give.
//!
//! Output that does not parse, or has none of the fields, yields no usage:
//! usage is bookkeeping, never a reason to fail a stage.

use std::collections::BTreeMap;

use serde_json::Value;

use super::config::Price;

/// What one attempt consumed, as far as its output tells.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Usage {
    /// Input (prompt) tokens not read from a cache.
    pub input_tokens: Option<u64>,
    /// Output (completion) tokens.
    pub output_tokens: Option<u64>,
    /// Input tokens read from the provider's cache.
    pub cache_read_tokens: Option<u64>,
    /// Input tokens written to the provider's cache.
    pub cache_write_tokens: Option<u64>,
    /// Cost in USD, reported by the agent or priced from `[pricing]`.
    pub cost_usd: Option<f64>,
    /// Agent turns.
    pub turns: Option<u64>,
    /// The agent's session id, for resuming.
    pub session_id: Option<String>,
    /// The model the cost was priced for, when baton priced it.
    pub model: Option<String>,
}

impl Usage {
    /// Adds what another try of the same attempt spent.
    pub fn add(&mut self, other: &Usage) {
        fn sum<T: std::ops::Add<Output = T> + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.or(b),
            }
        }
        self.input_tokens = sum(self.input_tokens, other.input_tokens);
        self.output_tokens = sum(self.output_tokens, other.output_tokens);
        self.cache_read_tokens = sum(self.cache_read_tokens, other.cache_read_tokens);
        self.cache_write_tokens = sum(self.cache_write_tokens, other.cache_write_tokens);
        self.cost_usd = sum(self.cost_usd, other.cost_usd);
        self.turns = sum(self.turns, other.turns);
        if other.session_id.is_some() {
            self.session_id.clone_from(&other.session_id);
        }
        if other.model.is_some() {
            self.model.clone_from(&other.model);
        }
    }

    /// Whether nothing was read.
    pub fn is_empty(&self) -> bool {
        *self == Usage::default()
    }

    /// Fills in `cost_usd` from a price per million tokens when the agent
    /// reported tokens but no dollars. Cache writes are billed as input and
    /// cache reads at `cached_input` (else as input).
    /// A reported cost of 0 for tokens spent (opencode's, for a provider
    /// it has no price for) counts as unreported.
    pub fn price(&mut self, model: Option<&str>, pricing: &BTreeMap<String, Price>) {
        let spent = self.input_tokens.unwrap_or(0) + self.output_tokens.unwrap_or(0) > 0;
        if self.cost_usd == Some(0.0) && spent {
            self.cost_usd = None;
        }
        if self.cost_usd.is_some() {
            return;
        }
        let Some((model, price)) = model.and_then(|model| pricing.get_key_value(model)) else {
            return;
        };
        if self.input_tokens.is_none() && self.output_tokens.is_none() {
            return;
        }
        #[expect(
            clippy::cast_precision_loss,
            reason = "token counts are far below 2^52"
        )]
        let tokens = |count: Option<u64>| count.unwrap_or(0) as f64;
        let input = tokens(self.input_tokens) + tokens(self.cache_write_tokens);
        let cached = tokens(self.cache_read_tokens);
        self.cost_usd = Some(
            (input * price.input
                + cached * price.cached_input.unwrap_or(price.input)
                + tokens(self.output_tokens) * price.output)
                / 1_000_000.0,
        );
        self.model = Some(model.clone());
    }
}

/// Keys of a profile's `[output]` table that are not usage.
const NOT_USAGE: &[&str] = &[
    "format",
    "progress",
    "text",
    "error",
    "exit_codes",
    "structured",
    "is_error",
];

/// Reads usage from `stdout` by the profile's `[output]` rules; `None` when
/// there are no rules, the output does not parse, or nothing was found.
pub fn parse_usage(output: Option<&toml::Table>, stdout: &str) -> Option<Usage> {
    let output = output?;
    let mut usage = Usage::default();
    match output.get("format").and_then(toml::Value::as_str) {
        Some("text") => text(output, stdout, &mut usage),
        Some("jsonl") => {
            let events: Vec<Value> = stdout
                .lines()
                .filter_map(|line| serde_json::from_str(line.trim()).ok())
                .collect();
            structured(output, &events, &mut usage);
        }
        Some("json") => {
            let whole = last_object(stdout)?;
            structured(output, &[whole], &mut usage);
        }
        _ => return None,
    }
    (!usage.is_empty()).then_some(usage)
}

fn structured(output: &toml::Table, events: &[Value], usage: &mut Usage) {
    for (key, rule) in output {
        if NOT_USAGE.contains(&key.as_str()) {
            continue;
        }
        match rule {
            toml::Value::String(pointer) if is_field(key) => {
                let value = events.iter().rev().find_map(|event| event.pointer(pointer));
                if let Some(value) = value {
                    set(usage, key, value.clone());
                }
            }
            toml::Value::Table(table) => group(key, table, events, usage),
            _ => {}
        }
    }
}

/// A table rule: select events, then read `field` (when `key` is itself a
/// usage field) or every usage field named inside.
fn group(key: &str, table: &toml::Table, events: &[Value], usage: &mut Usage) {
    let selected: Vec<&Value> = events
        .iter()
        .filter(|event| matches(table.get("match"), event))
        .flat_map(|event| each(table.get("each"), event))
        .collect();
    let aggregate = table
        .get("aggregate")
        .and_then(toml::Value::as_str)
        .unwrap_or("last");
    let mut read = |field: &str, pointer: &str| {
        let values: Vec<&Value> = selected
            .iter()
            .filter_map(|event| event.pointer(pointer))
            .filter(|value| !value.is_null())
            .collect();
        if let Some(value) = combine(aggregate, &values) {
            set(usage, field, value);
        }
    };
    if is_field(key) {
        if let Some(pointer) = table.get("field").and_then(toml::Value::as_str) {
            read(key, pointer);
        }
        return;
    }
    for (field, pointer) in table {
        if let (true, Some(pointer)) = (is_field(field), pointer.as_str()) {
            read(field, pointer);
        }
    }
}

/// Whether output read by these `[output]` rules reports dollars itself: a
/// `cost_usd` rule anywhere in them that reads the output (a pointer or a
/// pattern), not `{ from = "pricing" }`.
pub fn reports_cost(output: Option<&toml::Table>) -> bool {
    fn reads(table: &toml::Table) -> bool {
        table.iter().any(|(key, value)| match value {
            toml::Value::String(_) => key == "cost_usd",
            toml::Value::Table(inner) => {
                (key == "cost_usd" && inner.contains_key("field")) || reads(inner)
            }
            _ => false,
        })
    }
    output.is_some_and(reads)
}

fn is_field(key: &str) -> bool {
    matches!(
        key,
        "input_tokens"
            | "output_tokens"
            | "cache_read_tokens"
            | "cache_write_tokens"
            | "cost_usd"
            | "turns"
            | "session_id"
    )
}

/// Whether every key of `criteria` has one of its listed values in `event`.
pub(super) fn matches(criteria: Option<&toml::Value>, event: &Value) -> bool {
    let Some(toml::Value::Table(criteria)) = criteria else {
        return true;
    };
    criteria.iter().all(|(key, wanted)| {
        let actual = if key.starts_with('/') {
            event.pointer(key)
        } else {
            event.get(key)
        };
        let Some(actual) = actual.and_then(Value::as_str) else {
            return false;
        };
        match wanted {
            toml::Value::String(one) => one == actual,
            toml::Value::Array(any) => any.iter().any(|one| one.as_str() == Some(actual)),
            _ => false,
        }
    })
}

/// The values at the `each` pointer (all of an object's values or an
/// array's items), or the event itself without one.
fn each<'v>(pointer: Option<&toml::Value>, event: &'v Value) -> Vec<&'v Value> {
    let Some(pointer) = pointer.and_then(toml::Value::as_str) else {
        return vec![event];
    };
    match event.pointer(pointer) {
        Some(Value::Object(map)) => map.values().collect(),
        Some(Value::Array(items)) => items.iter().collect(),
        _ => Vec::new(),
    }
}

fn combine(aggregate: &str, values: &[&Value]) -> Option<Value> {
    let last = (*values.last()?).clone();
    match aggregate {
        "sum" if values.iter().all(|value| value.is_number()) => {
            let integers: Option<u64> = values
                .iter()
                .map(|value| value.as_u64())
                .try_fold(0_u64, |sum, value| sum.checked_add(value?));
            Some(match integers {
                Some(sum) => Value::from(sum),
                None => Value::from(
                    values
                        .iter()
                        .filter_map(|value| value.as_f64())
                        .sum::<f64>(),
                ),
            })
        }
        "concat" if values.iter().all(|value| value.is_string()) => Some(Value::from(
            values
                .iter()
                .filter_map(|value| value.as_str())
                .collect::<String>(),
        )),
        _ => Some(last),
    }
}

fn set(usage: &mut Usage, field: &str, value: Value) {
    let count = || match &value {
        Value::Number(number) => number
            .as_u64()
            .or_else(|| number.as_f64().filter(|f| *f >= 0.0).map(round)),
        _ => None,
    };
    match field {
        "input_tokens" => usage.input_tokens = count(),
        "output_tokens" => usage.output_tokens = count(),
        "cache_read_tokens" => usage.cache_read_tokens = count(),
        "cache_write_tokens" => usage.cache_write_tokens = count(),
        "turns" => usage.turns = count(),
        "cost_usd" => usage.cost_usd = value.as_f64().filter(|cost| cost.is_finite()),
        "session_id" => {
            usage.session_id = match value {
                Value::String(text) if !text.is_empty() => Some(text),
                _ => None,
            }
        }
        _ => {}
    }
}

#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "a non-negative, rounded token count"
)]
fn round(value: f64) -> u64 {
    value.round() as u64
}

fn text(output: &toml::Table, stdout: &str, usage: &mut Usage) {
    for (field, rule) in output {
        let (true, Some(pattern)) = (is_field(field), rule.as_str()) else {
            continue;
        };
        let Ok(regex) = regex_lite::Regex::new(pattern) else {
            continue;
        };
        let captured: Vec<&str> = regex
            .captures_iter(stdout)
            .filter_map(|captures| captures.get(1))
            .map(|group| group.as_str())
            .collect();
        if field == "session_id" {
            if let Some(last) = captured.last() {
                set(usage, field, Value::from(*last));
            }
            continue;
        }
        let numbers: Vec<f64> = captured.iter().filter_map(|text| number(text)).collect();
        if !numbers.is_empty() {
            set(usage, field, Value::from(numbers.iter().sum::<f64>()));
        }
    }
}

/// `12`, `1.5`, `12.5k`, `1.2M` (aider abbreviates token counts).
fn number(text: &str) -> Option<f64> {
    let text = text.trim();
    let (digits, scale) = match text.strip_suffix(['k', 'K']) {
        Some(digits) => (digits, 1e3),
        None => match text.strip_suffix('M') {
            Some(digits) => (digits, 1e6),
            None => (text, 1.0),
        },
    };
    let value: f64 = digits.replace(',', "").parse().ok()?;
    value.is_finite().then_some(value * scale)
}

/// The last JSON object in `text`: the whole text, or what follows the last
/// line that starts one (CLIs print banners and warnings before it, and
/// some print it over several lines).
pub(super) fn last_object(text: &str) -> Option<Value> {
    if let Ok(whole) = serde_json::from_str(text.trim()) {
        return Some(whole);
    }
    let mut starts: Vec<usize> = text
        .match_indices('\n')
        .map(|(at, _)| at + 1)
        .chain(std::iter::once(0))
        .filter(|&at| text[at..].starts_with('{'))
        .collect();
    starts.sort_unstable();
    starts
        .iter()
        .rev()
        .find_map(|&at| serde_json::from_str(text[at..].trim()).ok())
}

#[cfg(test)]
mod tests;
