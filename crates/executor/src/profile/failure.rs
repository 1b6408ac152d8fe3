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

use std::sync::LazyLock;
use std::time::Duration;

use serde_json::Value;

use super::usage::{last_object, matches};

/// Words of a failure that may pass: a rate limit, an overloaded or
/// failing server. Matched against what the agent reported, never
/// against arbitrary output.
static TRANSIENT: LazyLock<regex_lite::Regex> = LazyLock::new(|| {
    regex_lite::Regex::new(
        r"(?i)\b(429|500|502|503|504|529)\b|rate[ _-]?limit|too many requests|internal (?:server )?error|overloaded|resource[ _]exhausted|quota exceeded|temporarily unavailable|service unavailable|high demand",
    )
    .expect("a valid pattern")
});

/// A wait a message asks for: "retry after 30s", "Please retry in 27.5s",
/// "try again in 20 seconds", "retry-after: 5".
static ASKED_WAIT: LazyLock<regex_lite::Regex> = LazyLock::new(|| {
    regex_lite::Regex::new(
        r"(?i)(?:retry|try again)(?:[- ]after)?(?: in)?:?\s*(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s\b|secs?\b|seconds?|m\b|min|minutes?)?",
    )
    .expect("a valid pattern")
});

/// Whether a failure the agent reported may pass if tried again, with the
/// wait its message asks for: `None` when it will not pass by waiting.
pub fn transient(reported: &str) -> Option<Option<Duration>> {
    if !TRANSIENT.is_match(reported) {
        return None;
    }
    let asked = ASKED_WAIT.captures(reported).and_then(|captures| {
        let number: f64 = captures.get(1)?.as_str().parse().ok()?;
        let unit = captures.get(2).map_or("s", |unit| unit.as_str());
        let seconds = match unit.chars().next() {
            Some('m') if unit.starts_with("ms") || unit.starts_with("milli") => number / 1000.0,
            Some('m') => number * 60.0,
            _ => number,
        };
        Duration::try_from_secs_f64(seconds).ok()
    });
    Some(asked)
}

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

#[cfg(test)]
mod transient_tests {
    use super::*;

    #[test]
    fn rate_limits_and_server_errors_pass_with_the_wait_they_ask_for() {
        assert_eq!(
            transient("API Error: 429 rate_limit_error: slow down"),
            Some(None)
        );
        assert_eq!(
            transient("Resource exhausted. Please retry in 27.5s."),
            Some(Some(Duration::from_millis(27_500)))
        );
        assert_eq!(
            transient("Rate limit reached. Please try again in 20 seconds"),
            Some(Some(Duration::from_secs(20)))
        );
        assert_eq!(
            transient("overloaded_error; retry after 250ms"),
            Some(Some(Duration::from_millis(250)))
        );
        assert_eq!(
            transient("503 Service Unavailable, retry-after: 2 min"),
            Some(Some(Duration::from_secs(120)))
        );
        assert_eq!(
            transient("We're currently experiencing high demand"),
            Some(None)
        );
        assert_eq!(transient("fake internal server error"), Some(None));
    }

    #[test]
    fn other_failures_do_not() {
        assert_eq!(transient("invalid x-api-key"), None);
        assert_eq!(transient("401 Unauthorized"), None);
        assert_eq!(transient("prompt is too long: 5000 tokens"), None);
    }
}
