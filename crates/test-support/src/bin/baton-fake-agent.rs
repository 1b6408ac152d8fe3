//! `baton-fake-agent`: a scriptable stand-in for a coding-agent CLI.
//!
//! Tests drive baton's executor and engine against this binary instead of
//! real agents: it speaks the same contract (a prompt
//! in, files and output out, an exit status) and can misbehave on request.
//! Standard library only, so it builds fast and has nothing to hide behind.
//!
//! # The prompt
//!
//! Read from `--prompt-file <path>` (also spelled `--message-file`, as
//! aider does, or `-i <path>`, as goose does) when given, else from the
//! last positional argument, else from stdin (`-` as the last positional,
//! or `-i -`, also means stdin). Other options are ignored, and the common
//! value-taking options of the real CLIs (`--model`, `--output-format`,
//! `-m`, …) skip their value, so any built-in profile's argv can point at
//! this binary: `run --format json -m x <prompt>`, `exec --json -`, and
//! `--output-format json -p <prompt>` all find their prompt.
//! `--session-id <id>` sets the session id that `print-json` reports;
//! `--ignore-term` makes `hang` ignore SIGTERM.
//!
//! # Directives
//!
//! Instructions come from the environment variable `BATON_FAKE_AGENT` (one
//! per line) and then from prompt lines of the form
//! `FAKE-AGENT: <directive>`, run in that order:
//!
//! | directive | effect |
//! |---|---|
//! | `write <path> <content…>` | writes the content and a newline to `path` (relative to the working directory, or under the run's workspace when it starts with `$BATON_WORKSPACE/`), creating parent directories |
//! | `write-lines <path> <content…>` | the same, with each `\n` in the content written as a line break (a multi-line file such as a `VERDICT.md` from one directive line) |
//! | `write-prompt <path>` | writes the prompt it was given to `path`, as it was given |
//! | `write-outside <absolute path> [content…]` | the same for an absolute path, to test containment |
//! | `write-listed` | writes the files listed under `## Files to write` (see below) |
//! | `stdout <text…>` / `stderr <text…>` | prints a line |
//! | `sleep <seconds>` | sleeps (fractions allowed) |
//! | `hang` | sleeps forever; with `ignore-term` first (or `--ignore-term`), SIGTERM is ignored |
//! | `ignore-term` | makes a later `hang` ignore SIGTERM |
//! | `flood <bytes>` / `flood-stderr <bytes>` | writes that many bytes (`y\n` repeated) to stdout / stderr |
//! | `exit <code>` | exits with the code (after the witness line) |
//! | `crash` | aborts (SIGABRT), without a witness line |
//! | `grandchild <seconds>` | starts a child that sleeps that long holding stdout and stderr, and does not wait for it |
//! | `setsid-grandchild <seconds>` | the same, in a new session (outside the process group) |
//! | `print-json <shape>` | prints a final result in the shape of `claude` (stream-json lines), `codex` (JSONL events), `gemini` (one JSON object) or `opencode` (JSON events), with session id, tokens and cost where the CLI reports them |
//! | `git-commit [message…]` | `git add -A` and `git commit --allow-empty` in the working directory (as a coding agent finishing its work) |
//! | `shell <command…>` | runs the command with `bash -c` in the working directory and waits for it (as an agent's shell tool; background processes it starts stay) |
//! | `git-config <key> <value>` | `git config <key> <value>` in the working directory (a hostile agent setting, say, `core.fsmonitor`) |
//! | `chmod-x <path>` | makes the file executable (mode 755), as for a hook script |
//! | `dump-env` | prints the environment, sorted, one `NAME=value` per line |
//! | `findings <spec>` | as a validator: writes findings (a JSON array in the reference format) to every listed file; `pass`, `minor`, `critical`, `critical-until <n>` (critical until the workspace's `validation/corrections-applied.json` has `n` entries, then pass), `invalid` (not JSON), `no-status` |
//! | `challenges <n>` | as a challenger: writes `n` challenges (a JSON array) to every listed file |
//! | `correct` | as a corrector: writes a corrections log (`[{finding_id, change}]`, one entry per finding id under `## Findings to fix`) to every listed file; nothing without that section |
//!
//! Validation units get prompts baton writes, not the workflow's text, so
//! tests give validators, challengers and correctors their directives
//! through `BATON_FAKE_AGENT` in the role's profile (`env` in `baton.toml`).
//!
//! Grandchildren report themselves on stderr as
//! `baton-fake-agent: grandchild <pid>`. An unknown directive is an error
//! (exit 2), so a typo in a test fails loudly.
//!
//! # Default behaviour
//!
//! Without any directive, the agent does `write-listed` and exits 0: every
//! line starting with `- ` directly under a line `## Files to write` names a
//! file to create (relative to the working directory, or absolute). A
//! `.json` file gets `{"written_by":"baton-fake-agent","path":"<path>"}`,
//! any other file one line of text. A listed path ending in `/` is a
//! directory: it is created with one file inside. When the prompt lists a
//! file under `## Output checks` (`- <path>: is_json, has_key:items`), the
//! JSON written for it passes those checks (`is_list`, `has_key:`,
//! `values_have_key:`, `list_items_have_key:`), as a real agent following
//! the contract would; so do the checks listed under `## Checks later
//! stages make on these files`. A file listed under `## Fan-out source` gets
//! `BATON_FAKE_ITEMS` items (default 1) at the fan-out's field, each an
//! object with a unique value for the fan-out's key (`item-<i>`) and for
//! `id`, `name`, `domain`, `verify_key`, `slug`, `batch` and `index`.
//! A validator's prompt (with `## Findings format`) gets one PASS finding
//! per listed file, as `findings pass` writes; a challenger's or a
//! corrector's (`## Challenges format`, `## Corrections log`) gets `[]`.
//!
//! # Witness log
//!
//! When `BATON_FAKE_WITNESS` names a file, one line
//! `run stage attempt idempotency_key pid t_start t_end` is appended to it
//! (`O_APPEND`, then fsync) when the agent exits normally. The identifiers
//! come from `BATON_RUN_ID`, `BATON_STAGE`, `BATON_ATTEMPT` and
//! `BATON_IDEMPOTENCY_KEY` (`-` when unset); times are milliseconds since
//! the Unix epoch. The log is the ground truth of which attempts ran and
//! when.

#![forbid(unsafe_code)]

#[path = "baton-fake-agent/items.rs"]
mod items;
#[path = "baton-fake-agent/output.rs"]
mod output;
#[path = "baton-fake-agent/validation.rs"]
mod validation;

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use output::{json_string, write_file};

/// Options of the real CLIs that take a value; their value is skipped so it
/// is not taken for the prompt.
const VALUE_OPTIONS: &[&str] = &[
    "--output-format",
    "--setting-sources",
    "--model",
    "-m",
    "--permission-mode",
    "--allowedTools",
    "--resume",
    "--settings",
    "--mcp-config",
    "--json-schema",
    "--max-budget-usd",
    "--append-system-prompt",
    "--agent",
    "--color",
    "--sandbox",
    "-s",
    "-C",
    "-c",
    "-o",
    "--output-schema",
    "--approval-mode",
    "--format",
    "--dir",
    "--provider",
    "--max-turns",
    "--add-dir",
    "--include-directories",
    "--policy",
];

const DEFAULT_SESSION_ID: &str = "fa4e0000-0000-4000-8000-000000000001";

struct Args {
    prompt_file: Option<PathBuf>,
    positional: Option<String>,
    session_id: Option<String>,
    ignore_term: bool,
}

/// Runs git in the working directory (argv only, as a real agent's tool
/// call would), failing the directive when git fails.
fn git(args: &[&str]) -> Result<(), String> {
    #[expect(
        clippy::disallowed_methods,
        reason = "the fake agent uses git as a coding agent does"
    )]
    let status = Command::new("git")
        .args(args)
        .stdin(Stdio::null())
        .status()
        .map_err(|error| format!("cannot run git: {error}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("git {} failed: {status}", args.join(" ")))
    }
}

fn main() -> ExitCode {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    // Internal modes used by the agent's own descendants.
    match raw.first().map(String::as_str) {
        Some("--internal-sleep") => {
            let seconds = raw
                .get(1)
                .and_then(|s| s.parse::<f64>().ok())
                .unwrap_or(0.0);
            std::thread::sleep(Duration::from_secs_f64(seconds));
            return ExitCode::SUCCESS;
        }
        Some("--internal-hang") => hang_forever(),
        _ => {}
    }
    let t_start = now_millis();
    let args = parse_args(&raw);
    let prompt = match read_prompt(&args) {
        Ok(prompt) => prompt,
        Err(message) => return fail(&message),
    };

    let mut directives: Vec<String> = std::env::var("BATON_FAKE_AGENT")
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .map(str::to_owned)
        .collect();
    directives.extend(
        prompt
            .lines()
            .filter_map(|line| line.trim_start().strip_prefix("FAKE-AGENT:"))
            .map(|directive| directive.trim().to_owned()),
    );
    if directives.is_empty() {
        directives.push("write-listed".to_owned());
    }

    let mut state = State {
        prompt,
        session_id: args
            .session_id
            .unwrap_or_else(|| DEFAULT_SESSION_ID.to_owned()),
        ignore_term: args.ignore_term,
        t_start,
    };
    for directive in &directives {
        match state.run(directive) {
            Ok(Flow::Continue) => {}
            Ok(Flow::Exit(code)) => return state.finish(code),
            Err(message) => return fail(&format!("{directive}: {message}")),
        }
    }
    state.finish(0)
}

fn parse_args(raw: &[String]) -> Args {
    let mut args = Args {
        prompt_file: None,
        positional: None,
        session_id: None,
        ignore_term: false,
    };
    let mut iter = raw.iter();
    let mut options_done = false;
    while let Some(arg) = iter.next() {
        if options_done || !arg.starts_with('-') || arg == "-" {
            // The last positional wins: real CLIs put subcommands (`run`,
            // `exec`) first and the prompt last.
            args.positional = Some(arg.clone());
            continue;
        }
        match arg.as_str() {
            "--" => options_done = true,
            "--prompt-file" | "--message-file" => args.prompt_file = iter.next().map(PathBuf::from),
            // goose: `-i <file>`, or `-i -` for stdin.
            "-i" => match iter.next().map(String::as_str) {
                Some("-") | None => args.positional = Some("-".to_owned()),
                Some(path) => args.prompt_file = Some(PathBuf::from(path)),
            },
            "--session-id" => args.session_id = iter.next().cloned(),
            "--ignore-term" => args.ignore_term = true,
            option if option.starts_with("--prompt-file=") => {
                args.prompt_file = Some(PathBuf::from(&option["--prompt-file=".len()..]));
            }
            option if VALUE_OPTIONS.contains(&option) => {
                iter.next();
            }
            _ => {}
        }
    }
    args
}

fn read_prompt(args: &Args) -> Result<String, String> {
    if let Some(path) = &args.prompt_file {
        return std::fs::read_to_string(path)
            .map_err(|error| format!("cannot read the prompt file {}: {error}", path.display()));
    }
    match args.positional.as_deref() {
        Some("-") | None => {
            let mut prompt = String::new();
            std::io::stdin()
                .read_to_string(&mut prompt)
                .map_err(|error| format!("cannot read the prompt from stdin: {error}"))?;
            Ok(prompt)
        }
        Some(text) => Ok(text.to_owned()),
    }
}

enum Flow {
    Continue,
    Exit(i32),
}

struct State {
    prompt: String,
    session_id: String,
    ignore_term: bool,
    t_start: u128,
}

impl State {
    fn run(&mut self, directive: &str) -> Result<Flow, String> {
        let (verb, rest) = directive
            .split_once(char::is_whitespace)
            .map_or((directive, ""), |(verb, rest)| (verb, rest.trim()));
        match verb {
            "write" => {
                let (path, content) = split_path(rest)?;
                write_file(Path::new(path), &format!("{content}\n"))?;
            }
            "write-lines" => {
                let (path, content) = split_path(rest)?;
                write_file(
                    Path::new(path),
                    &format!("{}\n", content.replace("\\n", "\n")),
                )?;
            }
            "write-prompt" => write_file(Path::new(rest), &self.prompt)?,
            "write-outside" => {
                let (path, content) = split_path(rest)?;
                if !Path::new(path).is_absolute() {
                    return Err(format!("`{path}` is not an absolute path"));
                }
                write_file(Path::new(path), &format!("{content}\n"))?;
            }
            "write-listed" if self.prompt.contains("## Findings format") => {
                // A validator following the contract: its findings are a JSON array.
                validation::findings("pass", &listed_files(&self.prompt))?;
            }
            "write-listed"
                if self.prompt.contains("## Challenges format")
                    || self.prompt.contains("## Corrections log") =>
            {
                for path in listed_files(&self.prompt) {
                    write_file(Path::new(&path), "[]\n")?;
                }
            }
            "write-listed" => {
                let checks = listed_checks(&self.prompt);
                let sources = items::sources(&self.prompt);
                for path in listed_files(&self.prompt) {
                    let wanted = checks.get(&path).map(Vec::as_slice).unwrap_or_default();
                    if let Some((field, key)) = sources.get(&path) {
                        let extra = check_arguments(wanted, "has_key:");
                        let text = items::document(field, key, items::count()?, &extra);
                        write_file(Path::new(&path), &text)?;
                    } else if path.ends_with('/') {
                        // A declared directory: create it with one file inside.
                        let file = format!("{path}written-by-fake-agent.txt");
                        write_file(Path::new(&file), &default_content(&file, &[]))?;
                    } else {
                        write_file(Path::new(&path), &default_content(&path, wanted))?;
                    }
                }
            }
            "stdout" => print_line(&mut std::io::stdout(), rest),
            "stderr" => print_line(&mut std::io::stderr(), rest),
            "sleep" => std::thread::sleep(Duration::from_secs_f64(seconds(rest)?)),
            "ignore-term" => self.ignore_term = true,
            "hang" => self.hang(),
            "flood" => flood(&mut std::io::stdout().lock(), bytes(rest)?),
            "flood-stderr" => flood(&mut std::io::stderr().lock(), bytes(rest)?),
            "exit" => {
                return rest
                    .parse()
                    .map(Flow::Exit)
                    .map_err(|_| format!("`{rest}` is not an exit code"));
            }
            "crash" => std::process::abort(),
            "grandchild" => spawn_grandchild(seconds(rest)?, false)?,
            "setsid-grandchild" => spawn_grandchild(seconds(rest)?, true)?,
            "print-json" => print_json(rest, &self.session_id)?,
            "findings" => validation::findings(rest, &listed_files(&self.prompt))?,
            "challenges" => validation::challenges(rest, &listed_files(&self.prompt))?,
            "correct" => validation::correct(&self.prompt, &listed_files(&self.prompt))?,
            "git-commit" => {
                // What a coding agent does when it is done: commit
                // everything in its working directory.
                git(&["add", "-A"])?;
                git(&[
                    "-c",
                    "user.name=baton-fake-agent",
                    "-c",
                    "user.email=fake-agent@localhost",
                    "commit",
                    "-q",
                    // A re-run after a crash commits even when the first
                    // attempt already committed the same change.
                    "--allow-empty",
                    "-m",
                    if rest.is_empty() { "fake agent" } else { rest },
                ])?;
            }
            "chmod-x" => {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(rest, std::fs::Permissions::from_mode(0o755))
                    .map_err(|error| format!("cannot chmod {rest}: {error}"))?;
            }
            "shell" => {
                // As an agent's shell tool: `bash -c`, waited for; what it
                // starts in the background is left running.
                #[expect(
                    clippy::disallowed_methods,
                    reason = "the fake agent's shell tool, as a coding agent's"
                )]
                let status = Command::new("bash")
                    .args(["-c", rest])
                    .stdin(Stdio::null())
                    .status()
                    .map_err(|error| format!("cannot run bash: {error}"))?;
                if !status.success() {
                    return Err(format!("shell `{rest}` failed: {status}"));
                }
            }
            "git-config" => {
                let (key, value) = rest
                    .split_once(char::is_whitespace)
                    .ok_or("git-config needs a key and a value")?;
                git(&["config", key, value.trim()])?;
            }
            "dump-env" => {
                let mut vars: Vec<String> = std::env::vars_os()
                    .map(|(name, value)| {
                        format!("{}={}", name.to_string_lossy(), value.to_string_lossy())
                    })
                    .collect();
                vars.sort();
                for var in vars {
                    print_line(&mut std::io::stdout(), &var);
                }
            }
            _ => return Err("unknown directive".to_owned()),
        }
        Ok(Flow::Continue)
    }

    fn hang(&self) -> ! {
        let _ = std::io::stdout().flush();
        if self.ignore_term {
            // The standard library cannot change signal dispositions, but a
            // disposition of "ignore" survives exec: become a shell that
            // ignores TERM, which execs this binary again in hang mode. The
            // pid stays the same.
            let me = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("baton-fake-agent"));
            #[expect(
                clippy::disallowed_methods,
                reason = "the fake agent re-executes itself"
            )]
            let error = Command::new("sh")
                .args(["-c", "trap '' TERM; exec \"$0\" --internal-hang"])
                .arg(me)
                .exec();
            eprintln_safe(&format!("baton-fake-agent: cannot ignore SIGTERM: {error}"));
        }
        hang_forever()
    }

    fn finish(&self, code: i32) -> ExitCode {
        let _ = std::io::stdout().flush();
        if let Err(message) = self.witness() {
            return fail(&message);
        }
        ExitCode::from(u8::try_from(code.rem_euclid(256)).expect("0..256 fits in u8"))
    }

    fn witness(&self) -> Result<(), String> {
        let Some(path) = std::env::var_os("BATON_FAKE_WITNESS") else {
            return Ok(());
        };
        let id = |name: &str| {
            std::env::var(name)
                .ok()
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| "-".to_owned())
        };
        let line = format!(
            "{} {} {} {} {} {} {}\n",
            id("BATON_RUN_ID"),
            id("BATON_STAGE"),
            id("BATON_ATTEMPT"),
            id("BATON_IDEMPOTENCY_KEY"),
            std::process::id(),
            self.t_start,
            now_millis()
        );
        let path = PathBuf::from(path);
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&path)
            .map_err(|error| format!("cannot open the witness file {}: {error}", path.display()))?;
        file.write_all(line.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|error| format!("cannot write the witness file {}: {error}", path.display()))
    }
}

fn hang_forever() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn fail(message: &str) -> ExitCode {
    eprintln_safe(&format!("baton-fake-agent: {message}"));
    ExitCode::from(2)
}

fn eprintln_safe(line: &str) {
    print_line(&mut std::io::stderr(), line);
}

/// Writes a line, ignoring a closed stream: the agent's reader may be gone.
fn print_line(out: &mut impl Write, line: &str) {
    let _ = out.write_all(format!("{line}\n").as_bytes());
    let _ = out.flush();
}

fn split_path(rest: &str) -> Result<(&str, &str), String> {
    if rest.is_empty() {
        return Err("needs a path".to_owned());
    }
    Ok(rest
        .split_once(char::is_whitespace)
        .map_or((rest, ""), |(path, content)| (path, content.trim_start())))
}

/// The paths listed under `## Files to write`.
fn listed_files(prompt: &str) -> Vec<String> {
    let mut lines = prompt
        .lines()
        .skip_while(|line| line.trim() != "## Files to write")
        .skip(1);
    let mut files = Vec::new();
    let mut started = false;
    for line in lines.by_ref() {
        let line = line.trim_end();
        if let Some(path) = line.strip_prefix("- ") {
            started = true;
            files.push(path.trim().trim_matches('`').to_owned());
        } else if started || !line.trim().is_empty() {
            break;
        }
    }
    files
}

/// The output checks listed under `## Output checks`, as
/// `- <path>: check, check`, by path.
fn listed_checks(prompt: &str) -> std::collections::HashMap<String, Vec<String>> {
    let mut checks = checks_under(prompt, "## Output checks");
    for (path, later) in checks_under(prompt, "## Checks later stages make on these files") {
        checks.entry(path).or_default().extend(later);
    }
    checks
}

/// The `- <path>: check, check` lines under `heading`, by path.
fn checks_under(prompt: &str, heading: &str) -> std::collections::HashMap<String, Vec<String>> {
    prompt
        .lines()
        .skip_while(|line| line.trim() != heading)
        .skip(1)
        .skip_while(|line| line.trim().is_empty())
        .map_while(|line| line.strip_prefix("- "))
        .filter_map(|line| line.rsplit_once(": "))
        .map(|(path, checks)| {
            let checks = checks
                .split(", ")
                .map(|check| check.trim().to_owned())
                .collect();
            (path.trim().trim_matches('`').to_owned(), checks)
        })
        .collect()
}

/// Arguments of the checks named `prefix…`.
fn check_arguments<'c>(checks: &'c [String], prefix: &str) -> Vec<&'c str> {
    checks
        .iter()
        .filter_map(|check| check.strip_prefix(prefix))
        .collect()
}

/// JSON that passes the listed checks, as a real agent following the
/// contract would write.
fn conforming_json(path: &str, checks: &[String]) -> String {
    let object = |keys: &[&str]| {
        let fields: Vec<String> = keys
            .iter()
            .map(|key| format!("{}:\"x\"", json_string(key)))
            .collect();
        format!("{{{}}}", fields.join(","))
    };
    let item_keys = check_arguments(checks, "list_items_have_key:");
    if checks.iter().any(|check| check == "is_list") || !item_keys.is_empty() {
        return format!("[{}]\n", object(&item_keys));
    }
    let keys = check_arguments(checks, "has_key:");
    let value_keys = check_arguments(checks, "values_have_key:");
    if !value_keys.is_empty() {
        let nested = object(&value_keys);
        let mut names = keys.clone();
        if names.is_empty() {
            names.push("item");
        }
        let fields: Vec<String> = names
            .iter()
            .map(|key| format!("{}:{nested}", json_string(key)))
            .collect();
        return format!("{{{}}}\n", fields.join(","));
    }
    let mut fields: Vec<String> = keys
        .iter()
        .map(|key| format!("{}:[\"x\"]", json_string(key)))
        .collect();
    fields.push(format!(
        "\"written_by\":\"baton-fake-agent\",\"path\":{}",
        json_string(path)
    ));
    format!("{{{}}}\n", fields.join(","))
}

fn default_content(path: &str, checks: &[String]) -> String {
    if path.ends_with(".json") || !checks.is_empty() {
        conforming_json(path, checks)
    } else {
        format!("written by baton-fake-agent: {path}\n")
    }
}

fn seconds(text: &str) -> Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|seconds| seconds.is_finite() && *seconds >= 0.0)
        .ok_or_else(|| format!("`{text}` is not a number of seconds"))
}

fn bytes(text: &str) -> Result<u64, String> {
    text.parse()
        .map_err(|_| format!("`{text}` is not a byte count"))
}

fn flood(out: &mut impl Write, mut remaining: u64) {
    let chunk = "y\n".repeat(32 * 1024);
    while remaining > 0 {
        let take =
            usize::try_from(remaining.min(chunk.len() as u64)).expect("at most the chunk length");
        if out.write_all(&chunk.as_bytes()[..take]).is_err() {
            // The reader is gone (EPIPE); a real CLI would die here too.
            return;
        }
        remaining -= take as u64;
    }
    let _ = out.flush();
}

fn spawn_grandchild(seconds: f64, new_session: bool) -> Result<(), String> {
    let me = std::env::current_exe().map_err(|error| format!("cannot find myself: {error}"))?;
    let seconds = seconds.to_string();
    // `setsid` (util-linux) calls setsid(2) and execs: the standard library
    // has no safe way to do it in-process.
    #[expect(
        clippy::disallowed_methods,
        reason = "the fake agent forks grandchildren on request"
    )]
    let mut command = if new_session {
        let mut command = Command::new("setsid");
        command.arg(&me);
        command
    } else {
        Command::new(&me)
    };
    let child = command
        .args(["--internal-sleep", &seconds])
        .stdin(Stdio::null())
        .spawn()
        .map_err(|error| format!("cannot start a grandchild: {error}"))?;
    eprintln_safe(&format!("baton-fake-agent: grandchild {}", child.id()));
    // Not waited for: it outlives us on purpose.
    drop(child);
    Ok(())
}

fn print_json(shape: &str, session_id: &str) -> Result<(), String> {
    let session = json_string(session_id);
    let cwd = json_string(
        &std::env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_default(),
    );
    let lines: Vec<String> = match shape {
        "claude" => vec![
            format!(r#"{{"type":"system","subtype":"init","session_id":{session},"cwd":{cwd},"model":"claude-sonnet-4-5","tools":["Bash","Read","Edit","Write"],"permissionMode":"acceptEdits"}}"#),
            format!(r#"{{"type":"assistant","message":{{"id":"msg_fake_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{{"type":"text","text":"done"}}],"usage":{{"input_tokens":1200,"output_tokens":80}}}},"parent_tool_use_id":null,"session_id":{session}}}"#),
            format!(r#"{{"type":"result","subtype":"success","is_error":false,"duration_ms":1234,"duration_api_ms":1100,"num_turns":1,"result":"done","session_id":{session},"total_cost_usd":0.0123,"usage":{{"input_tokens":1200,"cache_creation_input_tokens":300,"cache_read_input_tokens":4000,"output_tokens":80}},"structured_output":null}}"#),
        ],
        "codex" => vec![
            format!(r#"{{"type":"thread.started","thread_id":{session}}}"#),
            r#"{"type":"turn.started"}"#.to_owned(),
            r#"{"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"Planning the change."}}"#.to_owned(),
            r#"{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"done"}}"#.to_owned(),
            r#"{"type":"turn.completed","usage":{"input_tokens":1200,"cached_input_tokens":4000,"output_tokens":80}}"#.to_owned(),
        ],
        "gemini" => vec![format!(
            r#"{{"session_id":{session},"response":"done","stats":{{"models":{{"gemini-2.5-pro":{{"api":{{"totalRequests":1,"totalErrors":0,"totalLatencyMs":1100}},"tokens":{{"input":1200,"prompt":5200,"candidates":80,"total":1280,"cached":4000,"thoughts":0,"tool":0}}}}}},"tools":{{"totalCalls":0,"totalSuccess":0,"totalFail":0}},"files":{{"totalLinesAdded":0,"totalLinesRemoved":0}}}}}}"#
        )],
        "opencode" => {
            let session = json_string(&format!("ses_{}", session_id.replace('-', "")));
            vec![
                format!(r#"{{"type":"step_start","timestamp":1767225600000,"sessionID":{session},"part":{{"id":"prt_1","sessionID":{session},"messageID":"msg_1","type":"step-start"}}}}"#),
                format!(r#"{{"type":"text","timestamp":1767225601000,"sessionID":{session},"part":{{"id":"prt_2","sessionID":{session},"messageID":"msg_1","type":"text","text":"done"}}}}"#),
                format!(r#"{{"type":"step_finish","timestamp":1767225602000,"sessionID":{session},"part":{{"id":"prt_3","sessionID":{session},"messageID":"msg_1","type":"step-finish","reason":"stop","cost":0.0042,"tokens":{{"input":1200,"output":80,"reasoning":0,"cache":{{"read":4000,"write":300}}}}}}}}"#),
            ]
        }
        _ => return Err(format!("unknown shape `{shape}` (claude, codex, gemini or opencode)")),
    };
    let mut stdout = std::io::stdout().lock();
    for line in lines {
        print_line(&mut stdout, &line);
    }
    Ok(())
}

fn now_millis() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_millis())
        .unwrap_or(0)
}
