//! An agent's output as a person reads it: its messages, the tools it
//! called and what they answered, a line or so each, instead of raw stream
//! JSON. Knows the event shapes of Claude Code (`stream-json`), Codex
//! (`exec --json`), opencode (`run --format json`) and Gemini CLI
//! (`--output-format json`); what it does not recognise it leaves as it is.

use serde_json::Value;

/// The longest tool answer or argument shown, in characters.
const SHOWN: usize = 160;

/// `stdout` as a transcript, or `None` when no line of it is an event
/// this module knows (then show it raw).
pub fn render(stdout: &str) -> Option<String> {
    let mut out = String::new();
    let mut known = false;
    for line in stdout.lines() {
        match serde_json::from_str::<Value>(line)
            .ok()
            .and_then(|event| event_lines(&event))
        {
            Some(lines) => {
                known = true;
                for rendered in lines {
                    out.push_str(&rendered);
                    out.push('\n');
                }
            }
            // A line that is no event of a known shape is kept as it is
            // (a banner, a warning) unless it is JSON nobody reads.
            None if serde_json::from_str::<Value>(line).is_err() && !line.trim().is_empty() => {
                out.push_str(line);
                out.push('\n');
            }
            None => {}
        }
    }
    if known {
        return Some(out);
    }
    // One JSON document over many lines: Gemini CLI's answer.
    let document: Value = serde_json::from_str(stdout.trim()).ok()?;
    let lines = event_lines(&document)?;
    Some(lines.into_iter().map(|line| line + "\n").collect())
}

/// The lines one event becomes: `Some(vec![])` for a known event not worth
/// a line, `None` for an unknown one.
fn event_lines(event: &Value) -> Option<Vec<String>> {
    let kind = event.get("type").and_then(Value::as_str);
    match kind {
        Some("system" | "assistant" | "user" | "result") if event.get("session_id").is_some() => {
            Some(claude(kind.unwrap_or_default(), event))
        }
        Some(kind) if event.get("sessionID").is_some() => Some(opencode(kind, event)),
        Some(kind)
            if kind.starts_with("thread.")
                || kind.starts_with("turn.")
                || kind.starts_with("item.")
                || kind == "error" =>
        {
            Some(codex(kind, event))
        }
        None if event.get("response").is_some() || event.get("error").is_some() => {
            Some(gemini(event))
        }
        _ => None,
    }
}

fn claude(kind: &str, event: &Value) -> Vec<String> {
    match kind {
        "system" => vec![format!(
            "session {} (model {})",
            text(event, "/session_id"),
            text(event, "/model")
        )],
        "assistant" | "user" => items(event.pointer("/message/content"))
            .iter()
            .filter_map(|part| match part.get("type").and_then(Value::as_str) {
                Some("text") => Some(said("assistant", &text(part, "/text"))),
                Some("thinking") => Some(said("thinking", &text(part, "/thinking"))),
                Some("tool_use") => Some(called(&text(part, "/name"), part.get("input"))),
                Some("tool_result") => Some(answered(
                    &tool_result_text(part.get("content")),
                    part.get("is_error").and_then(Value::as_bool) == Some(true),
                )),
                _ => None,
            })
            .collect(),
        _ => {
            let verdict = if event.get("is_error").and_then(Value::as_bool) == Some(true) {
                format!("failed: {}", text(event, "/result"))
            } else {
                "finished".to_owned()
            };
            vec![format!(
                "{verdict} after {} turns{}",
                number(event, "/num_turns"),
                cost(event.pointer("/total_cost_usd"))
            )]
        }
    }
}

fn codex(kind: &str, event: &Value) -> Vec<String> {
    match kind {
        "thread.started" => vec![format!("session {}", text(event, "/thread_id"))],
        "turn.completed" => vec![format!(
            "turn done: {} tokens in, {} out",
            number(event, "/usage/input_tokens"),
            number(event, "/usage/output_tokens")
        )],
        "turn.failed" => vec![format!("error: {}", text(event, "/error/message"))],
        "error" => vec![format!("error: {}", text(event, "/message"))],
        "item.completed" => {
            let item = event.get("item").unwrap_or(&Value::Null);
            match item.get("type").and_then(Value::as_str) {
                Some("agent_message") => vec![said("assistant", &text(item, "/text"))],
                Some("reasoning") => vec![said("thinking", &text(item, "/text"))],
                Some("command_execution") => vec![
                    format!("tool shell: {}", clip(&text(item, "/command"))),
                    answered(
                        &format!(
                            "exit {}{}",
                            number(item, "/exit_code"),
                            first_line_after(&text(item, "/aggregated_output"))
                        ),
                        item.get("exit_code").and_then(Value::as_i64).unwrap_or(0) != 0,
                    ),
                ],
                Some("file_change") => vec![format!(
                    "tool patch: {}",
                    items(item.get("changes"))
                        .iter()
                        .map(|change| format!(
                            "{} {}",
                            text(change, "/kind"),
                            text(change, "/path")
                        ))
                        .collect::<Vec<_>>()
                        .join(", ")
                )],
                Some("mcp_tool_call") => vec![format!(
                    "tool {}.{}",
                    text(item, "/server"),
                    text(item, "/tool")
                )],
                Some("web_search") => vec![format!("tool web_search: {}", text(item, "/query"))],
                Some("error") => vec![format!("warning: {}", text(item, "/message"))],
                _ => Vec::new(),
            }
        }
        _ => Vec::new(),
    }
}

fn opencode(kind: &str, event: &Value) -> Vec<String> {
    match kind {
        "text" => vec![said("assistant", &text(event, "/part/text"))],
        "reasoning" => vec![said("thinking", &text(event, "/part/text"))],
        "tool_use" => {
            let state = event.pointer("/part/state").unwrap_or(&Value::Null);
            let failed = state.get("status").and_then(Value::as_str) == Some("error");
            let answer = if failed {
                text(state, "/error")
            } else {
                text(state, "/output")
            };
            vec![
                called(&text(event, "/part/tool"), state.get("input")),
                answered(&answer, failed),
            ]
        }
        "error" => vec![format!(
            "error: {}",
            event
                .pointer("/error/data/message")
                .or_else(|| event.pointer("/error/name"))
                .and_then(Value::as_str)
                .unwrap_or("unknown")
        )],
        _ => Vec::new(),
    }
}

fn gemini(event: &Value) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(response) = event.get("response").and_then(Value::as_str) {
        lines.push(said("assistant", response));
    }
    if event.get("error").is_some() {
        lines.push(format!("error: {}", text(event, "/error/message")));
    }
    if let Some(models) = event.pointer("/stats/models").and_then(Value::as_object) {
        for (model, stats) in models {
            lines.push(format!(
                "model {model}: {} requests, {} tokens in, {} out",
                number(stats, "/api/totalRequests"),
                number(stats, "/tokens/input"),
                number(stats, "/tokens/candidates")
            ));
        }
    }
    lines
}

/// `who: text`, later lines of the text indented under it.
fn said(who: &str, text: &str) -> String {
    format!("{who}: {}", text.trim().replace('\n', "\n  "))
}

/// `tool NAME what`: the argument a person looks for first (the path, the
/// command, the pattern), else the arguments in brief.
fn called(name: &str, input: Option<&Value>) -> String {
    let input = input.unwrap_or(&Value::Null);
    let main = [
        "file_path",
        "filePath",
        "path",
        "command",
        "pattern",
        "url",
        "query",
    ]
    .iter()
    .find_map(|key| input.get(*key))
    .map(|value| {
        value
            .as_str()
            .map_or_else(|| value.to_string(), str::to_owned)
    })
    .unwrap_or_else(|| input.to_string());
    format!("tool {name}: {}", clip(&main))
}

/// `  → answer` (its first line), or `  ✗ answer` for a failed call.
fn answered(answer: &str, failed: bool) -> String {
    let mark = if failed { "✗" } else { "→" };
    format!(
        "  {mark} {}",
        clip(answer.trim().lines().next().unwrap_or_default())
    )
}

fn tool_result_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn first_line_after(output: &str) -> String {
    output
        .trim()
        .lines()
        .next()
        .map(|line| format!(": {line}"))
        .unwrap_or_default()
}

fn clip(text: &str) -> String {
    let line = text.replace('\n', "⏎");
    if line.chars().count() <= SHOWN {
        return line;
    }
    let kept: String = line.chars().take(SHOWN).collect();
    format!("{kept}…")
}

fn items(value: Option<&Value>) -> Vec<Value> {
    value.and_then(Value::as_array).cloned().unwrap_or_default()
}

fn text(value: &Value, pointer: &str) -> String {
    match value.pointer(pointer) {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

fn number(value: &Value, pointer: &str) -> String {
    value
        .pointer(pointer)
        .filter(|found| !found.is_null())
        .map_or_else(|| "?".to_owned(), Value::to_string)
}

fn cost(value: Option<&Value>) -> String {
    value
        .and_then(Value::as_f64)
        .map(|usd| format!(", ${usd:.4}"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_stream_json() {
        let out = render(concat!(
            r#"{"type":"system","subtype":"init","session_id":"s1","model":"opus"}"#,
            "\n",
            r#"{"type":"assistant","session_id":"s1","message":{"content":[{"type":"tool_use","name":"Write","input":{"file_path":"/p/a.txt","content":"x"}}]}}"#,
            "\n",
            r#"{"type":"user","session_id":"s1","message":{"content":[{"type":"tool_result","content":"File created"}]}}"#,
            "\n",
            r#"{"type":"assistant","session_id":"s1","message":{"content":[{"type":"text","text":"Done.\nAll good."}]}}"#,
            "\n",
            r#"{"type":"result","session_id":"s1","is_error":false,"num_turns":2,"total_cost_usd":0.5}"#,
            "\n"
        ))
        .expect("a transcript");
        assert_eq!(
            out,
            "session s1 (model opus)\ntool Write: /p/a.txt\n  → File created\nassistant: Done.\n  All good.\nfinished after 2 turns, $0.5000\n"
        );
    }

    #[test]
    fn codex_events() {
        let out = render(concat!(
            r#"{"type":"thread.started","thread_id":"t1"}"#,
            "\n",
            r#"{"type":"item.started","item":{"type":"command_execution","command":"ls"}}"#,
            "\n",
            r#"{"type":"item.completed","item":{"type":"command_execution","command":"ls","aggregated_output":"a\nb","exit_code":2}}"#,
            "\n",
            r#"{"type":"item.completed","item":{"type":"agent_message","text":"Done."}}"#,
            "\n",
            r#"{"type":"turn.completed","usage":{"input_tokens":10,"output_tokens":3}}"#,
            "\n"
        ))
        .expect("a transcript");
        assert_eq!(
            out,
            "session t1\ntool shell: ls\n  ✗ exit 2: a\nassistant: Done.\nturn done: 10 tokens in, 3 out\n"
        );
    }

    #[test]
    fn opencode_events() {
        let out = render(concat!(
            r#"{"type":"step_start","sessionID":"s"}"#,
            "\n",
            r#"{"type":"tool_use","sessionID":"s","part":{"tool":"write","state":{"status":"completed","input":{"filePath":"/p/b.md"},"output":"Wrote file successfully."}}}"#,
            "\n",
            r#"{"type":"text","sessionID":"s","part":{"text":"Done."}}"#,
            "\n"
        ))
        .expect("a transcript");
        assert_eq!(
            out,
            "tool write: /p/b.md\n  → Wrote file successfully.\nassistant: Done.\n"
        );
    }

    #[test]
    fn gemini_document() {
        let out = render(
            "{\n  \"response\": \"Done.\",\n  \"stats\": {\"models\": {\"m\": {\"api\": {\"totalRequests\": 4}, \"tokens\": {\"input\": 10, \"candidates\": 2}}}}\n}\n",
        )
        .expect("a transcript");
        assert_eq!(
            out,
            "assistant: Done.\nmodel m: 4 requests, 10 tokens in, 2 out\n"
        );
    }

    #[test]
    fn other_output_is_left_alone() {
        assert_eq!(render("hello\nworld\n"), None);
        assert_eq!(render("{\"items\": [1, 2]}\n"), None);
    }
}
