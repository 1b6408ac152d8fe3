//! What the fake model does next: the actions a prompt asks for, and which
//! of them the conversation has reached.
//!
//! The actions are, in order, every `FAKE: write <path>`, `FAKE: shell
//! <command>`, `FAKE: read <path>` and `FAKE: call <tool> <json-args>`
//! line (a call of that tool by name, when the CLI offers it), then a write of every
//! `- /absolute/path` line under `## Files to write` or `## Files to
//! correct` (baton's correction prompts list the files to fix there). Each
//! answer makes one tool call; the conversation's earlier tool calls tell
//! which action is next; a conversation continued in a later session
//! carries its earlier prompts and calls, so it goes on where it stopped. Writing a file that already exists starts with a read of it, as
//! Claude Code and opencode refuse to overwrite a file the session has not
//! read; that read is recognised in the history by its tool's name, so
//! the plan stays the same however the disk changes under it.

use std::path::Path;

use super::conversation::Conversation;
use super::tools::{self, Call};

/// The final text once every action is done.
pub(super) const DONE: &str = "Done.";
/// The answer to requests that offer no tools (titles, summaries).
pub(super) const NO_TOOLS: &str = "Fake reply.";

/// The content the fake model writes to `path` (the path as the prompt
/// spells it). A `.json` file holds JSON: a correction's log
/// (`…/corrections.json`) the list baton asks for, any other an object.
pub fn fake_content(path: &str) -> String {
    // A referee's verdict must say how it went; the fake one passes.
    if path.ends_with("VERDICT.md") {
        return format!("PASS\n\nwritten by the fake model: {path}\n");
    }
    let written = format!("written by the fake model: {path}");
    if path.ends_with("/corrections.json") {
        return format!(
            "{}\n",
            serde_json::json!([{"finding_id": "CHECK1", "change": written}])
        );
    }
    if path.ends_with(".json") {
        return format!("{}\n", serde_json::json!({"written_by": written}));
    }
    format!("{written}\n")
}

/// What the fake model writes instead of [`fake_content`] the first time
/// it writes a file it was told to get wrong
/// ([`ModelServer::write_wrong_first`](super::ModelServer::write_wrong_first)):
/// neither JSON nor what was asked for.
pub const WRONG_CONTENT: &str = "not what was asked for\n";

/// One thing the prompt asks for.
#[derive(Debug, Clone, PartialEq)]
enum Action {
    Write(String),
    Shell(String),
    Read(String),
    /// A call of the named tool with these JSON arguments (an MCP
    /// server's tool, say, as `mcp__baton__report_progress`).
    Call(String, serde_json::Value),
}

/// What the fake model answers.
#[derive(Debug, PartialEq)]
pub(super) enum Reply {
    Call(Call),
    Text(String),
}

/// The next answer in the conversation.
pub(super) fn next(conversation: &Conversation) -> Reply {
    let tools = &conversation.tools;
    if tools.is_empty() {
        return Reply::Text(NO_TOOLS.to_owned());
    }
    let steps: Vec<Action> = actions(&conversation.text)
        .into_iter()
        .filter(|action| feasible(action, conversation))
        .collect();
    let read_tool = tools::read_tool(tools);
    let (index, read_done) = progress(&steps, &conversation.calls, read_tool);
    match steps.get(index) {
        None => Reply::Text(DONE.to_owned()),
        Some(action) => Reply::Call(call(action, read_done, conversation)),
    }
}

/// The files a structured (JSON-only) answer holds: every write action.
pub(super) fn files(text: &str) -> Vec<(String, String)> {
    actions(text)
        .into_iter()
        .filter_map(|action| match action {
            Action::Write(path) => Some((path.clone(), fake_content(&path))),
            _ => None,
        })
        .collect()
}

fn actions(text: &str) -> Vec<Action> {
    let mut actions = Vec::new();
    for line in text.lines() {
        let Some(directive) = line.trim().strip_prefix("FAKE:") else {
            continue;
        };
        let (verb, argument) = directive.trim().split_once(' ').unwrap_or((directive, ""));
        let argument = argument.trim().to_owned();
        match verb.trim() {
            "write" => actions.push(Action::Write(argument)),
            "shell" => actions.push(Action::Shell(argument)),
            "read" => actions.push(Action::Read(argument)),
            "call" => {
                let (name, arguments) = argument.split_once(' ').unwrap_or((&argument, "{}"));
                let arguments = serde_json::from_str(arguments.trim())
                    .unwrap_or_else(|_| serde_json::Value::Object(serde_json::Map::new()));
                actions.push(Action::Call(name.to_owned(), arguments));
            }
            _ => {}
        }
    }
    let mut listing = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('#') {
            listing = line == "## Files to write" || line == "## Files to correct";
        } else if let Some(path) = line
            .strip_prefix("- ")
            .filter(|path| listing && path.starts_with('/'))
        {
            actions.push(Action::Write(path.trim().to_owned()));
        }
    }
    actions
}

/// Whether the offered tools can carry the action out; those that cannot
/// are left out (Gemini CLI offers no shell outside `yolo` mode).
fn feasible(action: &Action, conversation: &Conversation) -> bool {
    let tools = &conversation.tools;
    match action {
        Action::Write(_) => {
            tools::has_write_tool(tools)
                || tools::has_patch_tool(tools)
                || tools::has_shell_tool(tools)
        }
        Action::Read(_) => tools::read_tool(tools).is_some() || tools::has_shell_tool(tools),
        Action::Shell(_) => tools::has_shell_tool(tools),
        Action::Call(name, _) => tools.iter().any(|tool| tool.name == *name),
    }
}

/// Which action comes next and whether its read-before-write is done,
/// from the tool calls made so far.
fn progress(steps: &[Action], calls: &[String], read_tool: Option<&str>) -> (usize, bool) {
    let mut index = 0;
    let mut read_done = false;
    for call in calls {
        let Some(action) = steps.get(index) else {
            break;
        };
        let prelude =
            matches!(action, Action::Write(_)) && !read_done && Some(call.as_str()) == read_tool;
        if prelude {
            read_done = true;
        } else {
            index += 1;
            read_done = false;
        }
    }
    (index, read_done)
}

fn call(action: &Action, read_done: bool, conversation: &Conversation) -> Call {
    let tools = &conversation.tools;
    let unreachable = "feasible() checked that a tool exists";
    match action {
        Action::Shell(command) => tools::shell(tools, command).expect(unreachable),
        Action::Call(name, arguments) => Call {
            name: name.clone(),
            input: tools::Input::Json(arguments.clone()),
        },
        Action::Read(path) => {
            let absolute = conversation.absolute(path);
            tools::read(tools, &absolute)
                .or_else(|| tools::shell(tools, &format!("cat {}", tools::quote(&absolute))))
                .expect(unreachable)
        }
        Action::Write(path) => {
            let absolute = conversation.absolute(path);
            let exists = Path::new(&absolute).exists();
            let content = || {
                if conversation.gets_wrong(&absolute) {
                    WRONG_CONTENT.to_owned()
                } else {
                    fake_content(path)
                }
            };
            if tools::has_write_tool(tools) {
                if exists
                    && !read_done
                    && let Some(read) = tools::read(tools, &absolute)
                {
                    return read;
                }
                return tools::write(tools, &absolute, &content()).expect(unreachable);
            }
            let content = content();
            let old = exists.then(|| std::fs::read_to_string(&absolute).unwrap_or_default());
            tools::patch(tools, &absolute, old.as_deref(), &content)
                .or_else(|| tools::shell(tools, &tools::write_command(&absolute, &content)))
                .expect(unreachable)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_come_first_then_the_listed_files() {
        let text = "# Task\nFAKE: shell echo hi > x\n\n## Files to write\n\n- /w/a.md\n- relative\n\n\
                    ## Other\n\n- /w/not-listed\n  FAKE: write b.md\n";
        assert_eq!(
            actions(text),
            [
                Action::Shell("echo hi > x".to_owned()),
                Action::Write("b.md".to_owned()),
                Action::Write("/w/a.md".to_owned()),
            ]
        );
    }

    #[test]
    fn a_call_names_its_tool_and_arguments() {
        let text =
            "FAKE: call mcp__baton__report_progress {\"message\": \"half way\"}\nFAKE: call bare\n";
        assert_eq!(
            actions(text),
            [
                Action::Call(
                    "mcp__baton__report_progress".to_owned(),
                    serde_json::json!({"message": "half way"})
                ),
                Action::Call("bare".to_owned(), serde_json::json!({})),
            ]
        );
    }

    #[test]
    fn a_read_before_a_write_does_not_advance() {
        let steps = [
            Action::Write("/a".to_owned()),
            Action::Shell("ls".to_owned()),
        ];
        let calls = |names: &[&str]| {
            names
                .iter()
                .map(|name| (*name).to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(progress(&steps, &calls(&[]), Some("Read")), (0, false));
        assert_eq!(progress(&steps, &calls(&["Read"]), Some("Read")), (0, true));
        assert_eq!(
            progress(&steps, &calls(&["Read", "Write"]), Some("Read")),
            (1, false)
        );
        assert_eq!(
            progress(&steps, &calls(&["Write"]), Some("Read")),
            (1, false)
        );
        assert_eq!(
            progress(&steps, &calls(&["Write", "Bash"]), Some("Read")),
            (2, false)
        );
    }
}
