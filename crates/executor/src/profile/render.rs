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
//!   profile runs it); `{session}` in the `resume` rule's arguments.
//! * With an access rule (see [`AccessRule`](super::AccessRule)):
//!   `{workspace}`, `{project}`, `{workspace_rel}` and `{file:NAME}`, and
//!   the escaping filters `|json`, `|regex` and `|toml`.
//!
//! An option renders only when the request sets it, and it renders whole or
//! not at all. A list renders the template once per item unless the
//! template joins it; key-value pairs render it once per pair; a flag
//! renders a template without `{value}` when true.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::Error;
use super::schema::{AccessMode, AccessRule, Kind, Profile, PromptVia, ToolRule};

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
    /// What the stage may change: renders the profile's access rule for
    /// the mode, which also sets the working directory. `None` renders none
    /// and runs in `cwd`.
    pub access: Option<AccessRequest>,
    /// The id of a session of the CLI to continue (the profile's `resume`
    /// rule), or `None` for a new one.
    pub resume: Option<String>,
}

/// Where a stage works and what it may change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessRequest {
    /// The access mode.
    pub mode: AccessMode,
    /// The project directory (or the stage's worktree): `{project}`.
    pub project: PathBuf,
    /// The run's workspace as the agent sees it: `{workspace}`.
    pub workspace: PathBuf,
    /// The directory the rule's `files` are written to.
    pub files_dir: PathBuf,
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
    /// The working directory.
    pub cwd: PathBuf,
    /// Variables the access rule sets.
    pub env: Vec<(String, String)>,
    /// Files the caller writes before the launch: (path, content).
    pub files: Vec<(PathBuf, String)>,
    /// The access rule's [`AccessRule::own_files`].
    pub own_files: Vec<String>,
}

/// Options rendered first, in this order; the rest follow by name.
const LEADING_OPTIONS: [&str; 3] = ["model", "permission_mode", "allowed_tools"];

/// Renders `profile` and `request` into a launch: the profile's fixed
/// arguments, the options the request sets (known ones first, then by
/// name), `args_extra`, the `resume` rule's arguments when the request
/// continues a session, then the prompt as the profile delivers it.
///
/// Options the profile does not define are left out; see
/// [`unsupported_options`] to report them.
///
/// # Errors
///
/// When the profile is not a CLI, delivers the prompt in a file and the
/// request names none (or one that is not UTF-8), or the request continues
/// a session and the profile cannot.
pub fn command_line(profile: &Profile, request: &AgentRequest) -> Result<ProcessCommand, Error> {
    let name = || profile.program.clone().unwrap_or_default();
    let program = match (&profile.kind, &profile.program) {
        (Kind::Cli, Some(program)) => program.clone(),
        _ => return Err(Error::NotACommand { name: name() }),
    };
    let resume = match (&request.resume, profile.resumes()) {
        (None, _) => None,
        (Some(session), Some(rule)) => Some((session.as_str(), rule)),
        (Some(_), None) => return Err(Error::CannotResume { name: name() }),
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
    let access = request
        .access
        .as_ref()
        .map(|access| Placed::new(profile, access, &request.cwd));
    let cwd = access
        .as_ref()
        .map_or_else(|| request.cwd.clone(), |placed| placed.cwd.clone());
    let cwd_text = cwd.to_string_lossy();
    // A tool rule's texts may name files, which only an access request
    // gives a place; a stage always has one.
    let decided =
        tool_decisions(profile.tools.as_ref(), &request.tools).filter(|_| request.access.is_some());
    let context = Context {
        cwd: &cwd_text,
        prompt_file: prompt_file.as_deref(),
        script: &request.prompt,
        session: resume.map(|(session, _)| session),
        place: access.as_ref(),
        tools: decided.as_ref(),
    };

    let mut args: Vec<String> = profile
        .args
        .iter()
        .map(|template| render(template, &context, None))
        .collect();
    let mut tools = request.tools.clone();
    if let Some(placed) = &access {
        args.extend(
            placed
                .rule
                .args
                .iter()
                .map(|template| render(template, &context, None)),
        );
        tools.extend(
            placed
                .rule
                .tools
                .iter()
                .map(|template| render(template, &context, None)),
        );
    }
    for (option, value) in requested_options(request, &tools) {
        if let Some(template) = profile.options.get(option) {
            args.extend(render_option(template, &value, &context));
        }
    }
    let tool_rule = profile.tools.as_ref().filter(|_| decided.is_some());
    if let Some(rule) = tool_rule {
        args.extend(
            rule.args
                .iter()
                .map(|template| render(template, &context, None)),
        );
    }
    args.extend(
        profile
            .args_extra
            .iter()
            .map(|template| render(template, &context, None)),
    );
    if let Some((_, rule)) = resume {
        args.extend(
            rule.args
                .iter()
                .map(|template| render(template, &context, None)),
        );
    }

    let mut stdin = None;
    let mut written_prompt_file = None;
    match profile.prompt.via {
        PromptVia::Stdin => {
            stdin = Some(request.prompt.as_bytes().to_vec());
            args.extend(profile.prompt.flag.clone());
        }
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
    let (mut env, mut files) = match &access {
        None => (Vec::new(), Vec::new()),
        Some(placed) => (
            render_env(&placed.rule.env, &context),
            render_files(&placed.rule.files, &placed.files_dir, &context),
        ),
    };
    if let (Some(rule), Some(placed)) = (tool_rule, &access) {
        env.extend(render_env(&rule.env, &context));
        files.extend(render_files(&rule.files, &placed.files_dir, &context));
    }
    Ok(ProcessCommand {
        program,
        args,
        stdin,
        prompt_file: written_prompt_file,
        cwd,
        env,
        files,
        own_files: access
            .map(|placed| placed.rule.own_files)
            .unwrap_or_default(),
    })
}

fn render_env(
    templates: &BTreeMap<String, String>,
    context: &Context<'_>,
) -> Vec<(String, String)> {
    templates
        .iter()
        .map(|(key, template)| (key.clone(), render(template, context, None)))
        .collect()
}

fn render_files(
    templates: &BTreeMap<String, String>,
    files_dir: &Path,
    context: &Context<'_>,
) -> Vec<(PathBuf, String)> {
    templates
        .iter()
        .map(|(name, template)| (files_dir.join(name), render(template, context, None)))
        .collect()
}

/// The CLI tools a profile's tool rule allows and refuses for a stage's
/// `agent.tools`; `None` when the profile has no rule or the stage lists
/// no tools (its access alone decides then).
struct Decided {
    allowed: Vec<String>,
    denied: Vec<String>,
}

fn tool_decisions(rule: Option<&ToolRule>, tools: &[String]) -> Option<Decided> {
    let rule = rule.filter(|_| !tools.is_empty())?;
    let (allowed, denied) = rule.decide(tools);
    Some(Decided { allowed, denied })
}

/// An access rule placed: its working directory and the paths its texts
/// may name.
struct Placed {
    rule: AccessRule,
    cwd: PathBuf,
    project: String,
    workspace: String,
    workspace_rel: String,
    files_dir: PathBuf,
}

impl Placed {
    fn new(profile: &Profile, access: &AccessRequest, fallback_cwd: &Path) -> Placed {
        let rule = profile
            .access
            .get(&access.mode)
            .cloned()
            .unwrap_or_default();
        let project = access.project.to_string_lossy().into_owned();
        let workspace = access.workspace.to_string_lossy().into_owned();
        let mut placed = Placed {
            rule,
            cwd: fallback_cwd.to_path_buf(),
            project,
            workspace,
            workspace_rel: String::new(),
            files_dir: access.files_dir.clone(),
        };
        let cwd_template = placed
            .rule
            .cwd
            .clone()
            .or_else(|| profile.cwd.clone())
            .unwrap_or_else(|| "{project}".into());
        let context = Context {
            cwd: "",
            prompt_file: None,
            script: "",
            session: None,
            place: Some(&placed),
            tools: None,
        };
        let cwd = PathBuf::from(render(&cwd_template, &context, None));
        placed.workspace_rel = match access.workspace.strip_prefix(&cwd) {
            Ok(relative) if relative.as_os_str().is_empty() => ".".to_owned(),
            Ok(relative) => relative.to_string_lossy().into_owned(),
            Err(_) => placed.workspace.clone(),
        };
        placed.cwd = cwd;
        placed
    }
}

/// The options `request` sets that `profile` does not define, so the caller
/// can warn or refuse instead of silently running without them.
pub fn unsupported_options(profile: &Profile, request: &AgentRequest) -> Vec<String> {
    requested_options(request, &request.tools)
        .into_iter()
        .filter(|(option, _)| !profile.options.contains_key(*option))
        .map(|(option, _)| option.to_owned())
        .collect()
}

/// The options a request sets, in rendering order.
fn requested_options<'r>(
    request: &'r AgentRequest,
    tools: &[String],
) -> Vec<(&'r str, OptionValue)> {
    let mut options = Vec::new();
    if let Some(model) = &request.model {
        options.push(("model", OptionValue::Text(model.clone())));
    }
    if let Some(mode) = &request.permission_mode {
        options.push(("permission_mode", OptionValue::Text(mode.clone())));
    }
    if !tools.is_empty() {
        options.push(("allowed_tools", OptionValue::List(tools.to_vec())));
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
    session: Option<&'a str>,
    place: Option<&'a Placed>,
    tools: Option<&'a Decided>,
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
    if let Some(text) = placed_value(name, context) {
        return filter.map_or(Some(text.clone()), |filters| escape_all(&text, filters));
    }
    if let Some(decided) = context.tools
        && let Some(text) = tool_value(name, filter, decided)
    {
        return Some(text);
    }
    match (name, bound) {
        ("cwd", _) => Some(context.cwd.to_owned()),
        ("script" | "prompt", _) => Some(context.script.to_owned()),
        ("prompt_file", _) => context.prompt_file.map(str::to_owned),
        ("session", _) => context.session.map(str::to_owned),
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

/// The value of an access placeholder, when `name` is one and a rule is
/// being rendered.
fn placed_value(name: &str, context: &Context<'_>) -> Option<String> {
    let place = context.place?;
    match name {
        "workspace" => Some(place.workspace.clone()),
        "project" | "worktree" => Some(place.project.clone()),
        "workspace_rel" => Some(place.workspace_rel.clone()),
        _ => {
            let file = name.strip_prefix("file:")?;
            Some(place.files_dir.join(file).to_string_lossy().into_owned())
        }
    }
}

/// The value of a tool rule's placeholder: `{allowed}`, `{denied}` (JSON
/// arrays with `|json`, else joined with commas) and `{decisions}` (a JSON
/// object of every CLI tool name to `"allow"` or `"deny"`).
fn tool_value(name: &str, filter: Option<&str>, decided: &Decided) -> Option<String> {
    let list = |names: &[String]| {
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        match filter {
            None => Some(names.join(",")),
            Some("json") => Some(json_array(&names)),
            Some(_) => None,
        }
    };
    match name {
        "allowed" => list(&decided.allowed),
        "denied" => list(&decided.denied),
        "decisions" if filter.is_none_or(|filter| filter == "json") => {
            let entries: Vec<String> = decided
                .allowed
                .iter()
                .map(|tool| (tool, "allow"))
                .chain(decided.denied.iter().map(|tool| (tool, "deny")))
                .map(|(tool, decision)| format!("\"{}\":\"{decision}\"", json_string_content(tool)))
                .collect();
            Some(format!("{{{}}}", entries.join(",")))
        }
        _ => None,
    }
}

/// Applies `|`-separated escaping filters in order; `None` for an unknown
/// one (the placeholder then stays as written).
fn escape_all(text: &str, filters: &str) -> Option<String> {
    let mut value = text.to_owned();
    for filter in filters.split('|') {
        value = match filter {
            "json" => json_string_content(&value),
            "regex" => regex_lite::escape(&value),
            // A TOML basic string escapes as JSON does.
            "toml" => json_string_content(&value),
            _ => return None,
        };
    }
    Some(value)
}

/// `text` escaped as the inside of a JSON string (no quotes).
fn json_string_content(text: &str) -> String {
    let quoted = serde_json::to_string(text).expect("a string serializes");
    quoted[1..quoted.len() - 1].to_owned()
}

fn json_array(items: &[&str]) -> String {
    serde_json::to_string(items).expect("strings serialize")
}
