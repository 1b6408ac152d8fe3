//! Turning "write this file", "read this file" and "run this command" into
//! a call of whichever tool the CLI offers, with the argument names its
//! schema declares.

use serde_json::{Map, Value, json};

use super::conversation::Tool;

/// One tool call the fake model makes.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Call {
    pub(super) name: String,
    pub(super) input: Input,
}

/// A call's input.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Input {
    /// JSON arguments (function tools).
    Json(Value),
    /// Free text (a custom tool such as Codex's freeform `apply_patch`).
    Text(String),
}

impl Input {
    /// The arguments as JSON text, as the wire formats carry them.
    pub(super) fn to_json_text(&self) -> String {
        match self {
            Input::Json(value) => value.to_string(),
            Input::Text(text) => text.clone(),
        }
    }

    /// The arguments as a JSON value (a text input becomes a string).
    pub(super) fn to_value(&self) -> Value {
        match self {
            Input::Json(value) => value.clone(),
            Input::Text(text) => Value::String(text.clone()),
        }
    }
}

/// Write tools by CLI: Claude Code, opencode, Gemini CLI, others.
const WRITE: [&str; 4] = ["Write", "write", "write_file", "create_file"];
/// Read tools: Claude Code, opencode, Gemini CLI.
const READ: [&str; 3] = ["Read", "read", "read_file"];
/// Shell tools: Claude Code, opencode, Gemini CLI, then Codex's variants.
const SHELL: [&str; 6] = [
    "Bash",
    "bash",
    "run_shell_command",
    "exec_command",
    "shell_command",
    "shell",
];
/// How the tools name their path argument, most specific first.
const PATH_KEYS: [&str; 5] = ["file_path", "filePath", "absolute_path", "path", "filename"];

fn find<'a>(tools: &'a [Tool], names: &[&str]) -> Option<&'a Tool> {
    names
        .iter()
        .find_map(|name| tools.iter().find(|tool| tool.name == *name))
}

/// The name of the offered read tool.
pub(super) fn read_tool(tools: &[Tool]) -> Option<&str> {
    find(tools, &READ).map(|tool| tool.name.as_str())
}

/// Whether the CLI offers a dedicated write tool.
pub(super) fn has_write_tool(tools: &[Tool]) -> bool {
    find(tools, &WRITE).is_some()
}

/// Whether the CLI offers a shell tool.
pub(super) fn has_shell_tool(tools: &[Tool]) -> bool {
    find(tools, &SHELL).is_some()
}

/// Whether the CLI offers Codex's `apply_patch`.
pub(super) fn has_patch_tool(tools: &[Tool]) -> bool {
    find(tools, &["apply_patch"]).is_some()
}

fn properties(tool: &Tool) -> Option<&Map<String, Value>> {
    tool.schema.get("properties")?.as_object()
}

fn path_key(tool: &Tool) -> &'static str {
    let declared = properties(tool);
    PATH_KEYS
        .into_iter()
        .find(|key| declared.is_some_and(|props| props.contains_key(*key)))
        .unwrap_or("file_path")
}

/// A write-tool call creating or replacing `path` with `content`.
pub(super) fn write(tools: &[Tool], path: &str, content: &str) -> Option<Call> {
    let tool = find(tools, &WRITE)?;
    let mut args = Map::new();
    args.insert(path_key(tool).to_owned(), json!(path));
    args.insert("content".to_owned(), json!(content));
    Some(Call {
        name: tool.name.clone(),
        input: Input::Json(Value::Object(args)),
    })
}

/// A read-tool call of `path`.
pub(super) fn read(tools: &[Tool], path: &str) -> Option<Call> {
    let tool = find(tools, &READ)?;
    Some(Call {
        name: tool.name.clone(),
        input: Input::Json(json!({ path_key(tool): path })),
    })
}

/// A shell-tool call running `command`, in the argument shape the tool
/// declares: an argv array, `cmd`, or `command`.
pub(super) fn shell(tools: &[Tool], command: &str) -> Option<Call> {
    let tool = find(tools, &SHELL)?;
    let declared = properties(tool);
    let has = |key: &str| declared.is_some_and(|props| props.contains_key(key));
    let wants_argv = declared
        .and_then(|props| props.get("command"))
        .is_some_and(|command| command["type"] == "array");
    let mut args = Map::new();
    if wants_argv {
        args.insert("command".to_owned(), json!(["bash", "-lc", command]));
    } else if has("cmd") && !has("command") {
        args.insert("cmd".to_owned(), json!(command));
    } else {
        args.insert("command".to_owned(), json!(command));
    }
    if has("description") {
        args.insert("description".to_owned(), json!("a step of the fake model"));
    }
    Some(Call {
        name: tool.name.clone(),
        input: Input::Json(Value::Object(args)),
    })
}

/// An `apply_patch` call that makes `path` hold `content`: an `Add File`
/// patch for a new file, an `Update File` one replacing every old line for
/// an existing file.
pub(super) fn patch(tools: &[Tool], path: &str, old: Option<&str>, content: &str) -> Option<Call> {
    let tool = find(tools, &["apply_patch"])?;
    let added: String = content.lines().map(|line| format!("+{line}\n")).collect();
    let body = match old {
        None => format!("*** Add File: {path}\n{added}"),
        Some(old) => {
            let removed: String = old.lines().map(|line| format!("-{line}\n")).collect();
            format!("*** Update File: {path}\n@@\n{removed}{added}")
        }
    };
    let text = format!("*** Begin Patch\n{body}*** End Patch\n");
    let input = if tool.custom {
        Input::Text(text)
    } else {
        Input::Json(json!({ "input": text }))
    };
    Some(Call {
        name: tool.name.clone(),
        input,
    })
}

/// A shell command writing `content` to `path` (for CLIs whose only way
/// to write is their shell, as Codex with a model it has no metadata for).
pub(super) fn write_command(path: &str, content: &str) -> String {
    let parent = std::path::Path::new(path)
        .parent()
        .map(|parent| parent.display().to_string())
        .filter(|parent| !parent.is_empty())
        .unwrap_or_else(|| ".".to_owned());
    format!(
        "mkdir -p {} && cat > {} <<'BATON_FAKE_EOF'\n{content}BATON_FAKE_EOF",
        quote(&parent),
        quote(path)
    )
}

/// A single-quoted shell word.
pub(super) fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, schema: Value) -> Tool {
        Tool {
            name: name.to_owned(),
            schema,
            custom: false,
        }
    }

    #[test]
    fn argument_names_follow_the_schema() {
        let tools = [
            tool(
                "write",
                json!({"properties": {"content": {}, "filePath": {}}}),
            ),
            tool("exec_command", json!({"properties": {"cmd": {}}})),
        ];
        let call = write(&tools, "/a", "x").expect("a write tool");
        assert_eq!(
            call.input,
            Input::Json(json!({"filePath": "/a", "content": "x"}))
        );
        let call = shell(&tools, "echo hi").expect("a shell tool");
        assert_eq!(call.input, Input::Json(json!({"cmd": "echo hi"})));
        let argv = [tool(
            "shell",
            json!({"properties": {"command": {"type": "array"}}}),
        )];
        let call = shell(&argv, "ls").expect("a shell tool");
        assert_eq!(
            call.input,
            Input::Json(json!({"command": ["bash", "-lc", "ls"]}))
        );
    }

    #[test]
    fn an_update_patch_replaces_every_line() {
        let tools = [Tool {
            name: "apply_patch".to_owned(),
            schema: Value::Null,
            custom: true,
        }];
        let call = patch(&tools, "a.md", Some("one\ntwo\n"), "new\n").expect("a patch tool");
        let expected =
            "*** Begin Patch\n*** Update File: a.md\n@@\n-one\n-two\n+new\n*** End Patch\n";
        assert_eq!(call.input, Input::Text(expected.to_owned()));
    }

    #[test]
    fn the_write_command_quotes_its_words() {
        assert_eq!(
            write_command("/d/it's.md", "x\n"),
            "mkdir -p '/d' && cat > '/d/it'\\''s.md' <<'BATON_FAKE_EOF'\nx\nBATON_FAKE_EOF"
        );
    }
}
