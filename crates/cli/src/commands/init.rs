//! `baton init`: a project's first `baton.toml` and a starter workflow.
//!
//! The agent CLIs are found the way `baton agents check` finds them (the
//! built-in profiles' programs on `PATH`, each asked for its `--version`).
//! `baton.toml` gets only a role → profile map: the profiles themselves stay
//! built in, so a later baton's defaults for them apply to this project too.

use std::path::Path;

use baton_executor::profile::{CheckResult, Config, Kind, Profile};
use serde::Serialize;

use crate::args::init::InitArgs;
use crate::{exit_code, output};

/// Where the starter workflow goes: `baton list` looks in `workflows/` first.
const STARTER_PATH: &str = "workflows/hello.yaml";

/// The starter workflow: one read-only agent stage whose output is a file.
const STARTER: &str = include_str!("init/hello.yaml");

/// The settings file.
const SETTINGS_PATH: &str = "baton.toml";

/// The order in which found CLIs are offered for `[agents.default]` and
/// `[agents.reviewer]`, with the names people know them by; other CLI
/// profiles follow by name.
const KNOWN: [(&str, &str); 6] = [
    ("claude", "Claude Code"),
    ("codex", "Codex"),
    ("gemini", "Gemini CLI"),
    ("opencode", "opencode"),
    ("aider", "Aider"),
    ("goose", "Goose"),
];

/// One CLI profile, as the check found it.
#[derive(Debug, Serialize)]
struct Candidate {
    profile: String,
    name: String,
    program: String,
    /// `--version` answered: the CLI can start.
    found: bool,
    version: Option<String>,
    /// What it still needs (credential variables), when found.
    needs: Option<String>,
    /// Why it cannot start, when it is on `PATH` but did not answer.
    detail: Option<String>,
}

/// What happened to one file.
#[derive(Debug, Serialize)]
struct FileAction {
    path: &'static str,
    /// `wrote`, `overwrote` or `kept`.
    action: &'static str,
}

/// One `[agents.<role>]` entry written.
#[derive(Serialize)]
struct RoleView<'a> {
    role: &'static str,
    profile: &'a str,
}

#[derive(Serialize)]
struct InitJson<'a> {
    agents: &'a [Candidate],
    roles: Vec<RoleView<'a>>,
    files: &'a [FileAction],
    next: &'a [String],
}

pub(crate) fn run(args: &InitArgs) -> u8 {
    let project = super::current_dir();
    let candidates = detect();
    let found: Vec<&Candidate> = candidates.iter().filter(|one| one.found).collect();
    let roles = roles(&found);
    let mut files = Vec::new();
    for (path, text) in [
        (SETTINGS_PATH, settings_text(&roles, &found)),
        (STARTER_PATH, STARTER.to_owned()),
    ] {
        match write_file(&project.join(path), &text, args.force) {
            Ok(action) => files.push(FileAction { path, action }),
            Err(error) => {
                output::stderr_line(&format!("error: {error}"));
                output::stderr_line(
                    "hint: run `baton init` in a directory you can write, such as your project's root",
                );
                return exit_code::USAGE;
            }
        }
    }
    let next = next_commands(found.is_empty());
    let view = InitJson {
        agents: &candidates,
        roles: roles
            .iter()
            .map(|&(role, profile)| RoleView { role, profile })
            .collect(),
        files: &files,
        next: &next,
    };
    output::print(args.format.format(), &view, || {
        report(&candidates, &roles, &files, &next)
    });
    exit_code::SUCCESS
}

/// Every built-in CLI profile, checked side by side, in [`KNOWN`] order.
fn detect() -> Vec<Candidate> {
    let builtin = Config::builtin();
    let mut profiles: Vec<(&String, &Profile)> = builtin
        .profiles
        .iter()
        .filter(|(_, profile)| profile.kind == Kind::Cli && profile.program.is_some())
        .collect();
    profiles.sort_by_key(|(name, _)| {
        let rank = KNOWN.iter().position(|(known, _)| known == name);
        (rank.unwrap_or(KNOWN.len()), (*name).clone())
    });
    super::agents::check_profiles(profiles.into_iter())
        .into_iter()
        .map(|(profile, definition, result)| candidate(profile, definition, &result))
        .collect()
}

fn candidate(profile: &str, definition: &Profile, result: &CheckResult) -> Candidate {
    let name = KNOWN
        .iter()
        .find(|(known, _)| *known == profile)
        .map_or(profile, |(_, name)| name);
    Candidate {
        profile: profile.to_owned(),
        name: name.to_owned(),
        program: definition.program.clone().unwrap_or_default(),
        found: result.available,
        version: result.version.clone(),
        needs: result
            .available
            .then(|| super::agents::needs(result))
            .flatten(),
        // A program that is not on PATH is simply not found; one that is
        // but does not answer `--version` deserves its reason.
        detail: (result.program_path.is_some() && !result.available)
            .then(|| result.detail.clone())
            .flatten(),
    }
}

/// `default` → the first CLI found; `reviewer` → the second, so that what
/// one agent wrote is reviewed by another.
fn roles<'a>(found: &[&'a Candidate]) -> Vec<(&'static str, &'a str)> {
    let mut roles = Vec::new();
    if let Some(first) = found.first() {
        roles.push(("default", first.profile.as_str()));
    }
    if let Some(second) = found.get(1) {
        roles.push(("reviewer", second.profile.as_str()));
    }
    roles
}

/// `baton.toml`: the role map, and what to do when there is nothing to map.
fn settings_text(roles: &[(&str, &str)], found: &[&Candidate]) -> String {
    let mut text = String::from(
        "# baton's settings for this project.\n\
         #\n\
         # [agents.<role>] names the agent CLI profile that runs the stages whose\n\
         # `agent.role` is <role>; [agents.default] covers every role without an\n\
         # entry of its own. The profiles (how each CLI is started, its\n\
         # permissions) are built into baton: `baton agents check` lists them, and\n\
         # a [profiles.<name>] table here changes one.\n",
    );
    if found.is_empty() {
        text.push_str(
            "#\n\
             # `baton init` found no agent CLI on PATH. Install one of these, then\n\
             # uncomment the two lines below with its profile name (or run\n\
             # `baton init --force` again, which rewrites this file and the starter\n\
             # workflow):\n",
        );
        for (profile, name) in KNOWN {
            text.push_str(&format!("#   {profile:<9} {name}\n"));
        }
        text.push_str("\n# [agents.default]\n# profile = \"claude\"\n");
        return text;
    }
    let names: Vec<&str> = found.iter().map(|one| one.profile.as_str()).collect();
    text.push_str(&format!(
        "#\n# Agent CLIs `baton init` found on PATH: {}.\n",
        names.join(", ")
    ));
    for (role, profile) in roles {
        if *role == "reviewer" {
            text.push_str("\n# Reviews run on a different CLI from the one that wrote.");
        }
        text.push_str(&format!("\n[agents.{role}]\nprofile = \"{profile}\"\n"));
    }
    text
}

/// Writes `text` to `path` whole or not at all. Without `force` an
/// existing file is kept: the new one is linked into place, which fails
/// rather than replaces when the name is taken, even by a file created a
/// moment ago.
fn write_file(path: &Path, text: &str, force: bool) -> Result<&'static str, String> {
    let parent = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)
        .map_err(|error| format!("cannot create {}: {error}", parent.display()))?;
    let existed = path.exists();
    if existed && !force {
        return Ok("kept");
    }
    let temporary = baton_engine::workspace::temporary_path(path);
    std::fs::write(&temporary, text)
        .map_err(|error| format!("cannot write {}: {error}", temporary.display()))?;
    let placed = if force {
        std::fs::rename(&temporary, path)
    } else {
        std::fs::hard_link(&temporary, path)
    };
    let _ = std::fs::remove_file(&temporary);
    match placed {
        Ok(()) if existed => Ok("overwrote"),
        Ok(()) => Ok("wrote"),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok("kept"),
        Err(error) => Err(format!("cannot write {}: {error}", path.display())),
    }
}

fn next_commands(nothing_found: bool) -> Vec<String> {
    let mut next = Vec::new();
    if nothing_found {
        next.push("install an agent CLI and map it in baton.toml".to_owned());
    }
    next.push(format!("baton check {STARTER_PATH}"));
    next.push(format!("baton run {STARTER_PATH}"));
    next
}

/// The text a person reads.
fn report(
    candidates: &[Candidate],
    roles: &[(&str, &str)],
    files: &[FileAction],
    next: &[String],
) -> String {
    let found: Vec<&Candidate> = candidates.iter().filter(|one| one.found).collect();
    let mut text = String::new();
    if found.is_empty() {
        text.push_str("No agent CLI found on PATH.\n");
    } else {
        text.push_str("Agent CLIs found on PATH:\n");
        let header = ["profile", "cli", "version", "still needs"];
        text.push_str(&output::table_of(&header, &found, |one| {
            vec![
                one.profile.clone(),
                one.name.clone(),
                one.version.clone().unwrap_or_default(),
                one.needs.clone().unwrap_or_else(|| "ready".to_owned()),
            ]
        }));
    }
    for one in candidates.iter().filter(|one| one.detail.is_some()) {
        text.push_str(&format!(
            "{} is on PATH but cannot start: {}\n",
            one.program,
            one.detail.as_deref().unwrap_or_default()
        ));
    }
    let missing: Vec<&str> = candidates
        .iter()
        .filter(|one| !one.found && one.detail.is_none())
        .map(|one| one.program.as_str())
        .collect();
    if !missing.is_empty() {
        text.push_str(&format!("Not found: {}\n", missing.join(", ")));
    }
    text.push('\n');
    for file in files {
        let what = match (file.path, file.action) {
            (path, "kept") => {
                format!("kept {path}: it exists (`baton init --force` overwrites it)")
            }
            (SETTINGS_PATH, action) if roles.is_empty() => format!(
                "{action} {SETTINGS_PATH}: no role mapped yet; it lists the CLIs to install"
            ),
            (SETTINGS_PATH, action) => {
                let map: Vec<String> = roles
                    .iter()
                    .map(|(role, profile)| format!("{role} → {profile}"))
                    .collect();
                format!("{action} {SETTINGS_PATH}: roles {}", map.join(", "))
            }
            (path, action) => format!(
                "{action} {path}: one agent stage (role writer) that writes outputs/overview.md"
            ),
        };
        text.push_str(&what);
        text.push('\n');
    }
    text.push_str("\nNext:\n");
    for command in next {
        text.push_str(&format!("  {command}\n"));
    }
    text
}
