//! What the fake model reads from a request, whatever its protocol: the
//! text the actions come from, the first prompt, the agent's working
//! directory, the tools offered and the tool calls already made.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// A conversation as each protocol module extracts it.
#[derive(Debug, Default)]
pub(super) struct Conversation {
    /// User and system text, CLI-injected context blocks left out: where
    /// the `FAKE:` lines and the `## Files to write` list are looked for.
    /// Tool results are not in it, so a file the agent reads cannot add
    /// actions.
    pub(super) text: String,
    /// The first user text that is not a context block: the prompt.
    pub(super) prompt: Option<String>,
    /// The agent's working directory, when its context names one.
    pub(super) cwd: Option<PathBuf>,
    pub(super) tools: Vec<Tool>,
    /// The names of the tool calls the model made so far, in order.
    pub(super) calls: Vec<String>,
    /// Path endings of files whose next write is to be wrong (the server's
    /// list, as it was when the request arrived).
    pub(super) wrong_first: Vec<String>,
    /// Those this answer wrote wrong, for the server to strike off.
    pub(super) wrote_wrong: RefCell<Vec<String>>,
}

impl Conversation {
    /// Adds a user text part.
    pub(super) fn user_text(&mut self, text: &str) {
        if self.prompt.is_none() && !is_context_block(text) {
            self.prompt = Some(text.to_owned());
        }
        self.system_text(text);
    }

    /// Adds a system (or developer) text part.
    pub(super) fn system_text(&mut self, text: &str) {
        if self.cwd.is_none() {
            self.cwd = working_directory(text);
        }
        if !is_context_block(text) {
            self.text.push_str(text);
            self.text.push('\n');
        }
    }

    /// Adds every string in a message's `content`: a string, or a list of
    /// parts with a `text` (what Anthropic, Chat Completions and Responses
    /// all use); other parts (tool results, images) are not text.
    pub(super) fn content(&mut self, content: &Value, user: bool) {
        let mut add = |text: &str| {
            if user {
                self.user_text(text);
            } else {
                self.system_text(text);
            }
        };
        match content {
            Value::String(text) => add(text),
            Value::Array(parts) => {
                let texts = parts.iter().filter(|part| {
                    matches!(
                        part["type"].as_str(),
                        None | Some("text" | "input_text" | "output_text")
                    )
                });
                for text in texts.filter_map(|part| part["text"].as_str()) {
                    add(text);
                }
            }
            _ => {}
        }
    }

    /// Whether this write of `path` (absolute) is to be wrong; the first
    /// time a path ending in a listed suffix is asked about, it is, and
    /// the suffix is used up.
    pub(super) fn gets_wrong(&self, path: &str) -> bool {
        let mut wrote = self.wrote_wrong.borrow_mut();
        let Some(suffix) = self
            .wrong_first
            .iter()
            .find(|suffix| path.ends_with(suffix.as_str()) && !wrote.contains(suffix))
        else {
            return false;
        };
        wrote.push(suffix.clone());
        true
    }

    /// Makes a path from the prompt absolute: relative paths are relative
    /// to the agent's working directory (when known), and the CLIs' file
    /// tools want absolute paths.
    pub(super) fn absolute(&self, path: &str) -> String {
        match &self.cwd {
            Some(cwd) if Path::new(path).is_relative() => cwd.join(path).display().to_string(),
            _ => path.to_owned(),
        }
    }
}

/// A tool the request offers.
#[derive(Debug)]
pub(super) struct Tool {
    pub(super) name: String,
    /// The JSON schema of its arguments (`Null` when it has none).
    pub(super) schema: Value,
    /// A free-form tool (the Responses API's `custom` tools) whose input is
    /// text, not JSON arguments.
    pub(super) custom: bool,
}

impl Tool {
    /// A function tool with a JSON schema.
    pub(super) fn function(name: &Value, schema: &Value) -> Option<Tool> {
        Some(Tool {
            name: name.as_str()?.to_owned(),
            schema: schema.clone(),
            custom: false,
        })
    }
}

/// Text a CLI wraps in a tag of its own (`<system-reminder>…</system-reminder>`,
/// `<environment_context>…`, `<session_context>…`): context it adds, not
/// what the user asked.
pub(super) fn is_context_block(text: &str) -> bool {
    let text = text.trim();
    let Some(rest) = text.strip_prefix('<') else {
        return false;
    };
    let name: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
        .collect();
    !name.is_empty() && text.ends_with(&format!("</{name}>"))
}

/// The working directory as each CLI states it in its context: Codex
/// `<cwd>…</cwd>`, Claude Code `Primary working directory: …`, opencode
/// `Working directory: …`, Gemini CLI the first of its workspace
/// directories.
fn working_directory(text: &str) -> Option<PathBuf> {
    if let Some((_, rest)) = text.split_once("<cwd>") {
        let (cwd, _) = rest.split_once("</cwd>")?;
        return Some(PathBuf::from(cwd.trim()));
    }
    if let Some((_, rest)) = text.split_once("**Workspace Directories:**") {
        let line = rest.lines().nth(1)?.trim().strip_prefix("- ")?;
        return Some(PathBuf::from(line.trim()));
    }
    ["Primary working directory: ", "Working directory: "]
        .iter()
        .find_map(|label| {
            let (_, rest) = text.split_once(label)?;
            let line = rest.lines().next()?.trim();
            line.starts_with('/').then(|| PathBuf::from(line))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_blocks_are_whole_tagged_texts() {
        assert!(is_context_block(
            "<system-reminder>\nx\n</system-reminder>\n\n"
        ));
        assert!(is_context_block(
            "<environment_context><cwd>/a</cwd></environment_context>"
        ));
        assert!(!is_context_block("<b>bold</b> and more"));
        assert!(!is_context_block("# Task\n<x>y</x>"));
    }

    #[test]
    fn the_working_directory_comes_from_the_context() {
        let mut conversation = Conversation::default();
        conversation
            .user_text("<environment_context>\n  <cwd>/w/repo</cwd>\n</environment_context>");
        conversation.user_text("write a.md");
        assert_eq!(conversation.cwd, Some(PathBuf::from("/w/repo")));
        assert_eq!(conversation.absolute("a.md"), "/w/repo/a.md");
        assert_eq!(conversation.absolute("/b.md"), "/b.md");
        assert_eq!(conversation.prompt.as_deref(), Some("write a.md"));
        assert_eq!(conversation.text, "write a.md\n");
        let gemini =
            "<session_context>\n- **Workspace Directories:**\n  - /w/g\n</session_context>";
        assert_eq!(working_directory(gemini), Some(PathBuf::from("/w/g")));
    }
}
