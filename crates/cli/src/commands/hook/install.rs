//! `baton hook install claude-code`: merges baton's hooks into the
//! project's `.claude/settings.json`, keeping everything else, and adds a
//! hook only where the same command is not there already, so installing
//! twice changes nothing.

use std::path::Path;

use serde_json::{Map, Value, json};

use crate::{exit_code, output};

/// (event, matcher) pairs baton hooks; `None`: the event takes no matcher.
const EVENTS: &[(&str, Option<&str>)] = &[
    (
        "PostToolUse",
        Some("Edit|Write|MultiEdit|NotebookEdit|Read|Grep|Glob|Bash"),
    ),
    ("PostToolUseFailure", Some("Bash")),
    ("Stop", None),
    ("SubagentStop", None),
];

/// The command a hook runs for `event`.
fn command(event: &str) -> String {
    format!("baton hook claude-code {event}")
}

/// Merges baton's hooks into `settings`; returns the (event, command) pairs added.
pub(crate) fn merge(settings: &mut Map<String, Value>) -> Result<Vec<(String, String)>, String> {
    let hooks = settings
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or("\"hooks\" is not an object")?;
    let mut added = Vec::new();
    for (event, matcher) in EVENTS {
        let command = command(event);
        let groups = hooks
            .entry(*event)
            .or_insert_with(|| Value::Array(Vec::new()))
            .as_array_mut()
            .ok_or_else(|| format!("\"hooks.{event}\" is not a list"))?;
        let present = groups.iter().any(|group| {
            group
                .get("hooks")
                .and_then(Value::as_array)
                .is_some_and(|list| {
                    list.iter()
                        .any(|hook| hook.get("command").and_then(Value::as_str) == Some(&command))
                })
        });
        if present {
            continue;
        }
        let mut group = json!({"hooks": [{"type": "command", "command": command}]});
        if let Some(matcher) = matcher {
            group["matcher"] = json!(matcher);
        }
        groups.push(group);
        added.push(((*event).to_owned(), command));
    }
    Ok(added)
}

/// Installs into `project/.claude/settings.json`.
pub(crate) fn claude_code(project: &Path) -> u8 {
    let path = project.join(".claude").join("settings.json");
    let mut settings = match std::fs::read_to_string(&path) {
        Ok(text) => match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(map)) => map,
            Ok(_) | Err(_) => {
                output::stderr_line(&format!(
                    "error: {} is not a JSON object; fix or move it, then install again",
                    path.display()
                ));
                return exit_code::USAGE;
            }
        },
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Map::new(),
        Err(error) => {
            output::stderr_line(&format!("error: cannot read {}: {error}", path.display()));
            return exit_code::USAGE;
        }
    };
    let added = match merge(&mut settings) {
        Ok(added) => added,
        Err(why) => {
            output::stderr_line(&format!("error: {}: {why}", path.display()));
            return exit_code::USAGE;
        }
    };
    if added.is_empty() {
        output::stdout(&format!(
            "baton's hooks are already in {}\n",
            path.display()
        ));
        return exit_code::SUCCESS;
    }
    let text = format!("{}\n", output::json(&Value::Object(settings)));
    let written = std::fs::create_dir_all(path.parent().unwrap_or(project))
        .and_then(|()| std::fs::write(&path, text));
    if let Err(error) = written {
        output::stderr_line(&format!("error: cannot write {}: {error}", path.display()));
        return exit_code::USAGE;
    }
    let mut text = format!("wrote to {}:\n", path.display());
    for (event, command) in added {
        text.push_str(&format!("  {event}: {command}\n"));
    }
    text.push_str("baton must be on the PATH of the Claude Code session.\n");
    output::stdout(&text);
    exit_code::SUCCESS
}
