//! The agent's own account of a failure, read from its output.
//!
//! The coding-agent CLIs report what went wrong (a rejected key, a rate
//! limit, a server error) as JSON on stdout, while stderr holds banners and
//! warnings. A profile's `[output]` table says where the message is:
//!
//! * `error = "/ptr"`: a JSON Pointer into the output (`json`) or into the
//!   last event that has it (`jsonl`);
//! * `error = { match = { type = […] }, message = "/ptr" }`: the last
//!   matching event's field; `message` may list several pointers, the first
//!   present one wins;
//! * `[output.final]` with `is_error` and `text`: the final event says it
//!   failed and its text says why (Claude Code's `result` event).

use serde_json::Value;

use super::usage::matches;

/// What the agent said went wrong, if its output says so.
pub fn parse_error(output: Option<&toml::Table>, stdout: &str) -> Option<String> {
    let output = output?;
    let events = events(output, stdout);
    if events.is_empty() {
        return None;
    }
    let message = match output.get("error") {
        Some(toml::Value::String(pointer)) => last_text(&events, &[pointer.as_str()]),
        Some(toml::Value::Table(rule)) => {
            let selected: Vec<&Value> = events
                .iter()
                .filter(|event| matches(rule.get("match"), event))
                .collect();
            let pointers = pointers(rule.get("message").or_else(|| rule.get("field")));
            selected
                .iter()
                .rev()
                .find_map(|event| first_text(event, &pointers))
        }
        _ => None,
    };
    message.or_else(|| final_error(output, &events))
}

/// The output as events: one per line (`jsonl`), or the one object.
fn events(output: &toml::Table, stdout: &str) -> Vec<Value> {
    match output.get("format").and_then(toml::Value::as_str) {
        Some("jsonl") => stdout
            .lines()
            .filter_map(|line| serde_json::from_str(line.trim()).ok())
            .collect(),
        Some("json") => last_object(stdout).into_iter().collect(),
        _ => Vec::new(),
    }
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

/// The final event's text when its `is_error` flag is true.
fn final_error(output: &toml::Table, events: &[Value]) -> Option<String> {
    let rule = output.get("final")?.as_table()?;
    let flag = rule.get("is_error")?.as_str()?;
    let event = events
        .iter()
        .rev()
        .find(|event| matches(rule.get("match"), event))?;
    if event.pointer(flag).and_then(Value::as_bool) != Some(true) {
        return None;
    }
    let text = rule.get("text").and_then(toml::Value::as_str);
    text.and_then(|pointer| first_text(event, &[pointer]))
        .or_else(|| Some("the agent reported an error".to_owned()))
}

fn pointers(value: Option<&toml::Value>) -> Vec<&str> {
    match value {
        Some(toml::Value::String(one)) => vec![one.as_str()],
        Some(toml::Value::Array(many)) => many.iter().filter_map(toml::Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn last_text(events: &[Value], pointers: &[&str]) -> Option<String> {
    events
        .iter()
        .rev()
        .find_map(|event| first_text(event, pointers))
}

/// The first of `pointers` that holds a non-empty string (or a value,
/// shown as JSON) in `event`.
fn first_text(event: &Value, pointers: &[&str]) -> Option<String> {
    pointers
        .iter()
        .find_map(|pointer| match event.pointer(pointer)? {
            Value::String(text) if !text.trim().is_empty() => Some(unwrap_body(text.trim())),
            Value::Null | Value::String(_) => None,
            other => Some(other.to_string()),
        })
}

/// A message that is itself a provider's error body (`{"error":
/// {"message": …}}`, as Gemini CLI relays it) says it better inside.
fn unwrap_body(text: &str) -> String {
    let inner: Option<Value> = text
        .starts_with('{')
        .then(|| serde_json::from_str(text).ok())
        .flatten();
    inner
        .as_ref()
        .and_then(|inner| inner.pointer("/error/message"))
        .and_then(Value::as_str)
        .unwrap_or(text)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(text: &str) -> toml::Table {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn claude_final_event_that_failed() {
        let rules = output(
            "format = \"jsonl\"\n[final]\nmatch = { type = \"result\" }\ntext = \"/result\"\nis_error = \"/is_error\"\n",
        );
        let stdout = "{\"type\":\"system\"}\n{\"type\":\"result\",\"is_error\":true,\"result\":\"API Error: 500 boom\"}\n";
        assert_eq!(
            parse_error(Some(&rules), stdout).as_deref(),
            Some("API Error: 500 boom")
        );
        let fine = "{\"type\":\"result\",\"is_error\":false,\"result\":\"done\"}\n";
        assert_eq!(parse_error(Some(&rules), fine), None);
    }

    #[test]
    fn matched_events_and_pointer_lists() {
        let rules = output(
            "format = \"jsonl\"\nerror = { match = { type = [\"turn.failed\", \"error\"] }, message = [\"/error/message\", \"/message\"] }\n",
        );
        let stdout = "{\"type\":\"error\",\"message\":\"reconnecting 1/5\"}\n{\"type\":\"turn.failed\",\"error\":{\"message\":\"stream error: 500\"}}\n";
        assert_eq!(
            parse_error(Some(&rules), stdout).as_deref(),
            Some("stream error: 500")
        );
    }

    #[test]
    fn one_json_object_after_a_banner() {
        let rules = output("format = \"json\"\nerror = \"/error/message\"\n");
        let stdout = "Loaded cached credentials.\n{\"error\":{\"type\":\"Error\",\"message\":\"quota exceeded\"}}\n";
        assert_eq!(
            parse_error(Some(&rules), stdout).as_deref(),
            Some("quota exceeded")
        );
        assert_eq!(parse_error(Some(&rules), "not json"), None);
        // Gemini CLI: warnings, then the object over several lines, its
        // message a provider's error body.
        let stderr = "Warning: no 256 colours.\n{\n  \"error\": {\n    \"message\": \"{\\\"error\\\":{\\\"code\\\":500,\\\"message\\\":\\\"boom\\\"}}\"\n  }\n}\n";
        assert_eq!(parse_error(Some(&rules), stderr).as_deref(), Some("boom"));
        assert_eq!(parse_error(None, stdout), None);
    }
}
