//! Rendering a profile and a request into one launch: argv, stdin and the
//! prompt file.
//!
//! Templates are argv arrays; every element renders into exactly one
//! argument, never split or re-parsed by a shell. Placeholders:
//!
//! * `{value}`: the option's value; `{value|join:SEP}` joins a list with
//!   `SEP`; `{value|json}` inserts JSON (a text value is taken to be JSON
//!   already, a list becomes an array of strings); `{key}` is the key of a
//!   key-value option (`-c {key}={value}`).
//! * `{cwd}`, `{prompt_file}`, and `{script}` (the prompt text; the shell
//!   profile runs it).
//!
//! An option renders only when the request sets it, and it renders whole or
//! not at all. A list renders the template once per item unless the
//! template joins it; key-value pairs render it once per pair; a flag
//! renders a template without `{value}` when true.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::Error;
use super::schema::{Kind, Profile, PromptVia};

/// What a stage asks of its agent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentRequest {
    /// The rendered prompt.
    pub prompt: String,
    /// Where the prompt text is written for profiles that read it from a
    /// file (the attempt's dispatch directory, outside the worktree).
    pub prompt_file: Option<PathBuf>,
    /// The model (option `model`).
    pub model: Option<String>,
    /// Tools to allow (option `allowed_tools`); empty means unset.
    pub tools: Vec<String>,
    /// Permission mode (option `permission_mode`).
    pub permission_mode: Option<String>,
    /// The working directory (`{cwd}`).
    pub cwd: PathBuf,
    /// Any other profile option by name: `session_id`, `json_schema`,
    /// `max_budget_usd`, `sandbox`, `config`, …
    pub options: BTreeMap<String, OptionValue>,
}

/// The value of one profile option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OptionValue {
    /// One value.
    Text(String),
    /// Several values.
    List(Vec<String>),
    /// Key-value pairs (`{key}` and `{value}`), each rendering the template
    /// once.
    Pairs(Vec<(String, String)>),
    /// On or off, for options without a value.
    Flag(bool),
}

/// One launch of an agent CLI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessCommand {
    /// The program.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Bytes for stdin (the prompt), or `None` for `/dev/null`.
    pub stdin: Option<Vec<u8>>,
    /// When set, the caller writes the prompt text to this file before the
    /// launch.
    pub prompt_file: Option<PathBuf>,
}

/// Options rendered first, in this order; the rest follow by name.
const LEADING_OPTIONS: [&str; 3] = ["model", "permission_mode", "allowed_tools"];

/// Renders `profile` and `request` into a launch: the profile's fixed
/// arguments, the options the request sets (known ones first, then by
/// name), then the prompt as the profile delivers it.
///
/// Options the profile does not define are left out; see
/// [`unsupported_options`] to report them.
///
/// # Errors
///
/// When the profile is not a CLI, or delivers the prompt in a file and the
/// request names none (or one that is not UTF-8).
pub fn command_line(profile: &Profile, request: &AgentRequest) -> Result<ProcessCommand, Error> {
    let name = || profile.program.clone().unwrap_or_default();
    let program = match (&profile.kind, &profile.program) {
        (Kind::Cli, Some(program)) => program.clone(),
        _ => return Err(Error::NotACommand { name: name() }),
    };
    let prompt_file = match (profile.prompt.via, &request.prompt_file) {
        (PromptVia::File, None) => return Err(Error::NoPromptFile { name: name() }),
        (_, Some(path)) => Some(
            path.to_str()
                .ok_or_else(|| Error::NonUtf8Path { path: path.clone() })?
                .to_owned(),
        ),
        (_, None) => None,
    };
    let cwd = request.cwd.to_string_lossy();
    let context = Context {
        cwd: &cwd,
        prompt_file: prompt_file.as_deref(),
        script: &request.prompt,
    };

    let mut args: Vec<String> = profile
        .args
        .iter()
        .map(|template| render(template, &context, None))
        .collect();
    for (option, value) in requested_options(request) {
        if let Some(template) = profile.options.get(option) {
            args.extend(render_option(template, &value, &context));
        }
    }

    let mut stdin = None;
    let mut written_prompt_file = None;
    match profile.prompt.via {
        PromptVia::Stdin => stdin = Some(request.prompt.as_bytes().to_vec()),
        PromptVia::Arg => {
            push_prompt_argument(&mut args, profile.prompt.flag.as_deref(), &request.prompt)
        }
        PromptVia::File => {
            let path = prompt_file.clone().expect("checked above");
            push_prompt_argument(&mut args, profile.prompt.flag.as_deref(), &path);
            written_prompt_file.clone_from(&request.prompt_file);
        }
        PromptVia::None => {}
    }
    Ok(ProcessCommand {
        program,
        args,
        stdin,
        prompt_file: written_prompt_file,
    })
}

/// The options `request` sets that `profile` does not define, so the caller
/// can warn or refuse instead of silently running without them.
pub fn unsupported_options(profile: &Profile, request: &AgentRequest) -> Vec<String> {
    requested_options(request)
        .into_iter()
        .filter(|(option, _)| !profile.options.contains_key(*option))
        .map(|(option, _)| option.to_owned())
        .collect()
}

/// The options a request sets, in rendering order.
fn requested_options(request: &AgentRequest) -> Vec<(&str, OptionValue)> {
    let mut options = Vec::new();
    if let Some(model) = &request.model {
        options.push(("model", OptionValue::Text(model.clone())));
    }
    if let Some(mode) = &request.permission_mode {
        options.push(("permission_mode", OptionValue::Text(mode.clone())));
    }
    if !request.tools.is_empty() {
        options.push(("allowed_tools", OptionValue::List(request.tools.clone())));
    }
    for (option, value) in &request.options {
        let set = match value {
            OptionValue::Flag(on) => *on,
            OptionValue::List(items) => !items.is_empty(),
            OptionValue::Pairs(pairs) => !pairs.is_empty(),
            OptionValue::Text(_) => true,
        };
        if set && !LEADING_OPTIONS.contains(&option.as_str()) {
            options.push((option.as_str(), value.clone()));
        }
    }
    options
}

/// A prompt (or prompt path) as an argument. One starting with `-` would be
/// read as an option: positionally it follows `--`, after a flag it is
/// attached as `flag=value`.
fn push_prompt_argument(args: &mut Vec<String>, flag: Option<&str>, value: &str) {
    let dash = value.starts_with('-');
    match flag {
        Some(flag) if dash => args.push(format!("{flag}={value}")),
        Some(flag) => {
            args.push(flag.to_owned());
            args.push(value.to_owned());
        }
        None => {
            if dash {
                args.push("--".to_owned());
            }
            args.push(value.to_owned());
        }
    }
}

struct Context<'a> {
    cwd: &'a str,
    prompt_file: Option<&'a str>,
    script: &'a str,
}

/// What `{value}` (and `{key}`) stand for while rendering one template.
#[derive(Clone, Copy)]
enum Bound<'a> {
    Text(&'a str),
    List(&'a [String]),
    Pair(&'a str, &'a str),
}

fn render_option(template: &[String], value: &OptionValue, context: &Context<'_>) -> Vec<String> {
    let uses_value = template.iter().any(|element| element.contains("{value"));
    let joins = template
        .iter()
        .any(|element| element.contains("{value|join:"));
    let once = |bound: Option<Bound<'_>>| -> Vec<String> {
        template
            .iter()
            .map(|element| render(element, context, bound))
            .collect()
    };
    match value {
        OptionValue::Flag(true) if !uses_value => once(None),
        OptionValue::Flag(_) => Vec::new(),
        OptionValue::Text(text) => once(Some(Bound::Text(text))),
        OptionValue::List(items) if joins || !uses_value => once(Some(Bound::List(items))),
        OptionValue::List(items) => items
            .iter()
            .flat_map(|item| once(Some(Bound::Text(item))))
            .collect(),
        OptionValue::Pairs(pairs) => pairs
            .iter()
            .flat_map(|(key, value)| once(Some(Bound::Pair(key, value))))
            .collect(),
    }
}

/// Renders one argv element. Unknown placeholders stay as written.
fn render(template: &str, context: &Context<'_>, bound: Option<Bound<'_>>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            out.push_str(&rest[open..]);
            return out;
        };
        match expand(&after[..close], context, bound) {
            Some(text) => {
                out.push_str(&text);
                rest = &after[close + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn expand(placeholder: &str, context: &Context<'_>, bound: Option<Bound<'_>>) -> Option<String> {
    let (name, filter) = match placeholder.split_once('|') {
        Some((name, filter)) => (name, Some(filter)),
        None => (placeholder, None),
    };
    match (name, bound) {
        ("cwd", _) => Some(context.cwd.to_owned()),
        ("script" | "prompt", _) => Some(context.script.to_owned()),
        ("prompt_file", _) => context.prompt_file.map(str::to_owned),
        ("key", Some(Bound::Pair(key, _))) => Some(key.to_owned()),
        ("value", Some(bound)) => {
            let items: Vec<&str> = match bound {
                Bound::Text(text) | Bound::Pair(_, text) => vec![text],
                Bound::List(items) => items.iter().map(String::as_str).collect(),
            };
            match filter {
                None => Some(items.join(",")),
                Some(filter) if filter.starts_with("join:") => {
                    Some(items.join(&filter["join:".len()..]))
                }
                Some("json") => Some(match bound {
                    Bound::List(_) => json_array(&items),
                    Bound::Text(text) | Bound::Pair(_, text) => text.to_owned(),
                }),
                Some(_) => None,
            }
        }
        _ => None,
    }
}

fn json_array(items: &[&str]) -> String {
    let mut json = String::from("[");
    for (index, item) in items.iter().enumerate() {
        if index > 0 {
            json.push(',');
        }
        json.push('"');
        for c in item.chars() {
            match c {
                '"' => json.push_str("\\\""),
                '\\' => json.push_str("\\\\"),
                '\n' => json.push_str("\\n"),
                '\r' => json.push_str("\\r"),
                '\t' => json.push_str("\\t"),
                c if u32::from(c) < 0x20 => json.push_str(&format!("\\u{:04x}", u32::from(c))),
                c => json.push(c),
            }
        }
        json.push('"');
    }
    json.push(']');
    json
}
