//! `profile`: the exact argv of every built-in profile, checked against the
//! CLIs' real `--help`, and `check`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use baton_executor::profile::{
    AccessMode, AccessRequest, AgentRequest, Config, Error, OptionValue, ProcessCommand, Profile,
    check_with, command_line, unsupported_options,
};

const PROMPT: &str = "Write outputs/findings.json.";

fn request(model: &str, options: &[(&str, OptionValue)]) -> AgentRequest {
    AgentRequest {
        prompt: PROMPT.into(),
        prompt_file: Some(PathBuf::from("/runs/r1/dispatch/001-research.md")),
        model: Some(model.into()),
        tools: vec!["Bash".into(), "Read".into(), "Edit".into()],
        permission_mode: Some("acceptEdits".into()),
        cwd: PathBuf::from("/srv/worktree"),
        options: options
            .iter()
            .map(|(name, value)| ((*name).to_owned(), value.clone()))
            .collect(),
        access: None,
        resume: None,
    }
}

fn builtin(name: &str) -> Profile {
    Config::builtin()
        .profile(name)
        .unwrap_or_else(|| panic!("built-in profile {name}"))
        .clone()
}

fn text(value: &str) -> OptionValue {
    OptionValue::Text(value.into())
}

fn check(
    name: &str,
    request: &AgentRequest,
    program: &str,
    args: &[&str],
    stdin: Option<&str>,
    prompt_file: Option<&str>,
) {
    let command = command_line(&builtin(name), request).expect("a CLI profile");
    assert_eq!(
        command,
        ProcessCommand {
            program: program.into(),
            args: args.iter().map(|arg| (*arg).to_owned()).collect(),
            stdin: stdin.map(|text| text.as_bytes().to_vec()),
            prompt_file: prompt_file.map(PathBuf::from),
            cwd: PathBuf::from("/srv/worktree"),
            env: Vec::new(),
            files: Vec::new(),
            own_files: Vec::new(),
        },
        "profile {name}"
    );
}

#[test]
fn claude() {
    let request = request(
        "sonnet",
        &[
            ("session_id", text("0199b3c2-7d1e-7cc0-9a51-3f1c2e4d5a6b")),
            ("max_budget_usd", text("2")),
            ("json_schema", text(r#"{"type":"object"}"#)),
        ],
    );
    check(
        "claude",
        &request,
        "claude",
        &[
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--setting-sources",
            "project,local",
            "--model",
            "sonnet",
            "--permission-mode",
            "acceptEdits",
            "--allowedTools",
            "Bash,Read,Edit",
            "--json-schema",
            r#"{"type":"object"}"#,
            "--max-budget-usd",
            "2",
            "--session-id",
            "0199b3c2-7d1e-7cc0-9a51-3f1c2e4d5a6b",
        ],
        Some(PROMPT),
        None,
    );
}

#[test]
fn codex() {
    let request = request(
        "gpt-5.2-codex",
        &[
            ("sandbox", text("workspace-write")),
            ("cwd_flag", OptionValue::Flag(true)),
            ("skip_git_check", OptionValue::Flag(true)),
            ("ephemeral", OptionValue::Flag(false)),
            (
                "config",
                OptionValue::Pairs(vec![
                    (
                        "mcp_servers.baton.url".into(),
                        "\"http://127.0.0.1:4000/mcp\"".into(),
                    ),
                    ("model_reasoning_effort".into(), "\"high\"".into()),
                ]),
            ),
        ],
    );
    check(
        "codex",
        &request,
        "codex",
        &[
            "exec",
            "--json",
            "--color",
            "never",
            "--skip-git-repo-check",
            "-m",
            "gpt-5.2-codex",
            "-c",
            "mcp_servers.baton.url=\"http://127.0.0.1:4000/mcp\"",
            "-c",
            "model_reasoning_effort=\"high\"",
            "-C",
            "/srv/worktree",
            "--sandbox",
            "workspace-write",
            "--skip-git-repo-check",
            "-",
        ],
        Some(PROMPT),
        None,
    );
    // Codex has no permission mode and no tool list.
    assert_eq!(
        unsupported_options(&builtin("codex"), &request),
        ["permission_mode", "allowed_tools"]
    );
}

#[test]
fn gemini() {
    let mut request = request("gemini-2.5-pro", &[("approval_mode", text("yolo"))]);
    check(
        "gemini",
        &request,
        "gemini",
        &[
            "--output-format",
            "json",
            "--skip-trust",
            "-m",
            "gemini-2.5-pro",
            "--approval-mode",
            "yolo",
        ],
        Some(PROMPT),
        None,
    );
    // Any prompt goes by stdin, however it starts and however long it is.
    request.prompt = format!("- first item\n{}", "x".repeat(200_000));
    let command = command_line(&builtin("gemini"), &request).unwrap();
    assert_eq!(command.stdin.unwrap(), request.prompt.as_bytes());
}

#[test]
fn aider() {
    let request = request(
        "sonnet",
        &[(
            "files",
            OptionValue::List(vec!["src/a.rs".into(), "src/b.rs".into()]),
        )],
    );
    check(
        "aider",
        &request,
        "aider",
        &[
            "--yes-always",
            "--no-auto-commits",
            "--no-pretty",
            "--no-stream",
            "--no-check-update",
            "--analytics-disable",
            "--no-show-model-warnings",
            "--model",
            "sonnet",
            "src/a.rs",
            "src/b.rs",
            "--message-file",
            "/runs/r1/dispatch/001-research.md",
        ],
        None,
        Some("/runs/r1/dispatch/001-research.md"),
    );
    let mut without_file = request.clone();
    without_file.prompt_file = None;
    assert!(matches!(
        command_line(&builtin("aider"), &without_file),
        Err(Error::NoPromptFile { .. })
    ));
}

#[test]
fn opencode() {
    let request = request(
        "anthropic/claude-sonnet-4-5",
        &[
            ("auto", OptionValue::Flag(true)),
            ("dir", OptionValue::Flag(true)),
            ("agent", text("build")),
        ],
    );
    check(
        "opencode",
        &request,
        "opencode",
        &[
            "run",
            "--format",
            "json",
            "-m",
            "anthropic/claude-sonnet-4-5",
            "--agent",
            "build",
            "--auto",
            "--dir",
            "/srv/worktree",
        ],
        Some(PROMPT),
        None,
    );
}

#[test]
fn goose() {
    let request = request(
        "claude-sonnet-4-5",
        &[
            ("provider", text("anthropic")),
            ("max_turns", text("20")),
            (
                "params",
                OptionValue::Pairs(vec![("topic".into(), "queues".into())]),
            ),
        ],
    );
    check(
        "goose",
        &request,
        "goose",
        &[
            "run",
            "--no-session",
            "--output-format",
            "json",
            "-i",
            "-",
            "--model",
            "claude-sonnet-4-5",
            "--max-turns",
            "20",
            "--params",
            "topic=queues",
            "--provider",
            "anthropic",
        ],
        Some(PROMPT),
        None,
    );
    assert_eq!(builtin("goose").env["GOOSE_MODE"], "auto");
}

#[test]
fn local_llm_is_not_a_command() {
    assert!(matches!(
        command_line(&builtin("local-llm"), &request("qwen3", &[])),
        Err(Error::NotACommand { .. })
    ));
}

/// Every flag each CLI profile can render, with every option set, appears in
/// that CLI's real `--help`.
#[test]
fn every_flag_exists_in_the_cli_help() {
    let Some(dir) = baton_test_support::agent_clis_dir() else {
        return;
    };
    for (name, help_file) in [
        ("claude", "claude.help"),
        ("codex", "codex-exec.help"),
        ("gemini", "gemini.help"),
        ("opencode", "opencode-run.help"),
    ] {
        let help = std::fs::read_to_string(dir.join(help_file)).expect("help text");
        let profile = builtin(name);
        let options: BTreeMap<String, OptionValue> = profile
            .options
            .iter()
            .map(|(option, template)| {
                let value = if template.iter().any(|t| t.contains("{key}")) {
                    OptionValue::Pairs(vec![("k".into(), "v".into())])
                } else if template.iter().any(|t| t.contains("{value")) {
                    text("v")
                } else {
                    OptionValue::Flag(true)
                };
                (option.clone(), value)
            })
            .collect();
        let request = AgentRequest {
            prompt: "hello".into(),
            cwd: PathBuf::from("/w"),
            options,
            ..AgentRequest::default()
        };
        let command = command_line(&profile, &request).unwrap();
        let flags: Vec<&str> = command
            .args
            .iter()
            .filter(|arg| arg.starts_with('-') && arg.len() > 1 && *arg != "--")
            .map(|arg| arg.split('=').next().unwrap())
            .collect();
        assert!(flags.len() > profile.options.len() / 2, "{name}: {flags:?}");
        for flag in flags {
            let documented = [' ', ',', '\n', '=', '<', '[']
                .iter()
                .any(|after| help.contains(&format!("{flag}{after}")));
            assert!(documented, "{name}: `{flag}` is not in {help_file}");
        }
    }
}

fn profile(program: &str, passthrough: &[&str]) -> Profile {
    let mut profile = builtin("aider");
    profile.program = Some(program.into());
    profile.env_passthrough = passthrough.iter().map(|name| (*name).to_owned()).collect();
    profile
}

fn env_with_path(
    extra: &'static [(&'static str, &'static str)],
) -> impl Fn(&str) -> Option<OsString> {
    move |name| {
        if name == "PATH" {
            return Some("/usr/local/bin:/usr/bin:/bin".into());
        }
        extra
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| (*value).into())
    }
}

#[test]
fn check_finds_the_program_and_its_version() {
    let result = check_with(
        &profile(
            "bash",
            &["A_API_KEY", "B_TOKEN", "C_API_KEY", "D_TOKEN", "HOME"],
        ),
        env_with_path(&[("C_API_KEY", "sk-1"), ("D_TOKEN", "")]),
        Duration::from_secs(5),
    );
    assert!(result.available, "{result:?}");
    assert!(
        result.version.as_deref().unwrap().contains("bash"),
        "{result:?}"
    );
    assert_eq!(
        result.missing_credentials,
        ["A_API_KEY", "B_TOKEN", "D_TOKEN"]
    );
}

#[test]
fn check_reports_a_missing_program_and_a_failing_version() {
    let result = check_with(
        &profile("baton-no-such-agent", &[]),
        env_with_path(&[]),
        Duration::from_secs(5),
    );
    assert!(!result.available);
    assert_eq!(
        result.detail.as_deref(),
        Some("`baton-no-such-agent` is not on PATH")
    );

    // dash rejects --version.
    let result = check_with(
        &profile("/bin/false", &[]),
        env_with_path(&[]),
        Duration::from_secs(5),
    );
    assert!(!result.available);
    assert!(result.detail.unwrap().contains("failed"));
}

#[test]
fn check_bounds_a_hanging_version_probe() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("hangs");
    std::fs::write(&script, "#!/bin/sh\nsleep 30 &\nsleep 30\n").unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let begin = Instant::now();
    let result = check_with(
        &profile(script.to_str().unwrap(), &[]),
        env_with_path(&[]),
        Duration::from_millis(300),
    );
    let took = begin.elapsed();
    assert!(!result.available);
    assert!(result.detail.unwrap().contains("did not finish"));
    assert!(took < Duration::from_secs(2), "took {took:?}");
}

/// A request placed in a project at `/repo` with its run's workspace at
/// `/repo/.baton/runs/r1`.
fn placed(mode: AccessMode) -> AgentRequest {
    AgentRequest {
        prompt: PROMPT.into(),
        cwd: PathBuf::from("/elsewhere"),
        access: Some(AccessRequest {
            mode,
            project: PathBuf::from("/repo"),
            workspace: PathBuf::from("/repo/.baton/runs/r1"),
            files_dir: PathBuf::from("/repo/.baton/runs/r1/dispatch/001-a.access"),
        }),
        ..AgentRequest::default()
    }
}

fn launch(name: &str, mode: AccessMode) -> ProcessCommand {
    command_line(&builtin(name), &placed(mode)).expect("a CLI profile")
}

fn tail(command: &ProcessCommand, skip: usize) -> Vec<&str> {
    command.args[skip..].iter().map(String::as_str).collect()
}

#[test]
fn claude_access_modes() {
    let read_only = launch("claude", AccessMode::ReadOnly);
    assert_eq!(
        read_only.cwd,
        PathBuf::from("/repo"),
        "works where the code is"
    );
    assert_eq!(
        tail(&read_only, 6),
        [
            "--add-dir",
            "/repo/.baton/runs/r1",
            "--allowedTools",
            "Read,Glob,Grep,LS,Edit(//repo/.baton/runs/r1/**),Write(//repo/.baton/runs/r1/**)"
        ]
    );
    let read_write = launch("claude", AccessMode::ReadWrite);
    assert_eq!(
        tail(&read_write, 6),
        [
            "--permission-mode",
            "acceptEdits",
            "--add-dir",
            "/repo/.baton/runs/r1"
        ]
    );
    // The stage's own tools join the access rule's, in one flag.
    let mut request = placed(AccessMode::ReadOnly);
    request.tools = vec!["WebSearch".into()];
    let command = command_line(&builtin("claude"), &request).unwrap();
    assert!(command.args.last().unwrap().starts_with("WebSearch,Read,"));
}

#[test]
fn codex_access_modes() {
    let read_only = launch("codex", AccessMode::ReadOnly);
    assert_eq!(
        read_only.cwd,
        PathBuf::from("/repo/.baton/runs/r1"),
        "codex may write its working directory"
    );
    assert_eq!(
        tail(&read_only, 5),
        [
            "--sandbox",
            "workspace-write",
            "-c",
            "sandbox_workspace_write.exclude_slash_tmp=true",
            "-c",
            "sandbox_workspace_write.exclude_tmpdir_env_var=true",
            "-"
        ]
    );
    let worktree = launch("codex", AccessMode::Worktree);
    assert_eq!(worktree.cwd, PathBuf::from("/repo"));
    assert_eq!(
        tail(&worktree, 5),
        [
            "--sandbox",
            "workspace-write",
            "--add-dir",
            "/repo/.baton/runs/r1",
            "-"
        ]
    );
}

#[test]
fn gemini_read_only_writes_a_policy_for_the_workspace() {
    let read_only = launch("gemini", AccessMode::ReadOnly);
    let policy = "/repo/.baton/runs/r1/dispatch/001-a.access/policy.toml";
    assert_eq!(
        tail(&read_only, 3),
        [
            "--approval-mode",
            "default",
            "--policy",
            policy,
            "--include-directories",
            "/repo/.baton/runs/r1"
        ]
    );
    assert_eq!(read_only.files.len(), 1);
    let (path, text) = &read_only.files[0];
    assert_eq!(path, &PathBuf::from(policy));
    let parsed: toml::Table = toml::from_str(text).expect("the policy is TOML");
    let pattern = parsed["rule"][0]["argsPattern"].as_str().unwrap();
    assert_eq!(pattern, r#""file_path":"/repo/\.baton/runs/r1/"#);
    assert_eq!(
        tail(&launch("gemini", AccessMode::ReadWrite), 3),
        [
            "--approval-mode",
            "auto_edit",
            "--include-directories",
            "/repo/.baton/runs/r1"
        ]
    );
}

#[test]
fn opencode_read_only_denies_edits_outside_the_workspace() {
    let read_only = launch("opencode", AccessMode::ReadOnly);
    assert_eq!(read_only.cwd, PathBuf::from("/repo"));
    let (name, config) = &read_only.env[0];
    assert_eq!(name, "OPENCODE_CONFIG_CONTENT");
    let config: serde_json::Value = serde_json::from_str(config).expect("JSON");
    assert_eq!(config["permission"]["edit"]["*"], "deny");
    assert_eq!(config["permission"]["edit"][".baton/runs/r1/**"], "allow");
    assert_eq!(config["permission"]["bash"], "deny");
    assert!(launch("opencode", AccessMode::ReadWrite).env.is_empty());
}

/// A request placed in `mode` whose stage lists `tools`.
fn with_tools(mode: AccessMode, tools: &[&str]) -> AgentRequest {
    let mut request = placed(mode);
    request.tools = tools.iter().map(|tool| (*tool).to_owned()).collect();
    request
}

#[test]
fn gemini_tools_become_a_policy_that_refuses_the_others() {
    let command = command_line(
        &builtin("gemini"),
        &with_tools(AccessMode::ReadWrite, &["Read", "Bash", "Write"]),
    )
    .unwrap();
    let policy = "/repo/.baton/runs/r1/dispatch/001-a.access/tools.toml";
    assert_eq!(
        tail(&command, 3),
        [
            "--approval-mode",
            "auto_edit",
            "--include-directories",
            "/repo/.baton/runs/r1",
            "--policy",
            policy
        ]
    );
    assert_eq!(command.files.len(), 1);
    let (path, text) = &command.files[0];
    assert_eq!(path, &PathBuf::from(policy));
    let parsed: toml::Table = toml::from_str(text).expect("the policy is TOML");
    let names = |rule: usize| -> Vec<&str> {
        parsed["rule"][rule]["toolName"]
            .as_array()
            .expect("a list")
            .iter()
            .filter_map(toml::Value::as_str)
            .collect()
    };
    assert_eq!(parsed["rule"][0]["decision"].as_str(), Some("allow"));
    assert_eq!(
        names(0),
        ["read_file", "read_many_files", "run_shell_command"]
    );
    assert_eq!(parsed["rule"][1]["decision"].as_str(), Some("deny"));
    // Edits are the access rule's: neither allowed nor refused here.
    assert_eq!(
        names(1),
        [
            "glob",
            "google_web_search",
            "grep_search",
            "invoke_agent",
            "list_directory",
            "web_fetch",
            "write_todos"
        ]
    );
    // Read-only: the workspace policy (which outranks this one) and the
    // tools' policy both apply.
    let read_only = command_line(
        &builtin("gemini"),
        &with_tools(AccessMode::ReadOnly, &["Read"]),
    )
    .unwrap();
    let policies: Vec<&str> = read_only
        .args
        .windows(2)
        .filter(|pair| pair[0] == "--policy")
        .map(|pair| pair[1].as_str())
        .collect();
    assert_eq!(policies.len(), 2, "{:?}", read_only.args);
    assert_eq!(read_only.files.len(), 2);
    // No tools listed: the access alone decides, as before.
    assert_eq!(launch("gemini", AccessMode::ReadWrite).files.len(), 0);
}

#[test]
fn opencode_tools_become_permissions_over_the_access_rule() {
    let command = command_line(
        &builtin("opencode"),
        &with_tools(AccessMode::ReadOnly, &["Bash", "Read", "Edit"]),
    )
    .unwrap();
    let env: BTreeMap<&str, &str> = command
        .env
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect();
    assert!(env.contains_key("OPENCODE_CONFIG_CONTENT"), "{env:?}");
    let permission: serde_json::Value =
        serde_json::from_str(env["OPENCODE_PERMISSION"]).expect("JSON");
    assert_eq!(permission["bash"], "allow");
    assert_eq!(permission["read"], "allow");
    assert_eq!(permission["grep"], "deny");
    assert_eq!(permission["webfetch"], "deny");
    assert!(permission.get("edit").is_none(), "{permission}");
    assert!(
        !launch("opencode", AccessMode::ReadWrite)
            .env
            .iter()
            .any(|(name, _)| name == "OPENCODE_PERMISSION")
    );
}

#[test]
fn a_profile_s_own_cwd_applies_unless_the_mode_sets_one() {
    let mut profile = builtin("claude");
    profile.cwd = Some("{workspace}".into());
    let read_write = command_line(&profile, &placed(AccessMode::ReadWrite)).unwrap();
    assert_eq!(read_write.cwd, PathBuf::from("/repo/.baton/runs/r1"));
    profile.cwd = Some("{worktree}".into());
    let read_write = command_line(&profile, &placed(AccessMode::ReadWrite)).unwrap();
    assert_eq!(
        read_write.cwd,
        PathBuf::from("/repo"),
        "another name for {{project}}"
    );
    let mut codex = builtin("codex");
    codex.cwd = Some("/elsewhere".into());
    let read_only = command_line(&codex, &placed(AccessMode::ReadOnly)).unwrap();
    assert_eq!(
        read_only.cwd,
        PathBuf::from("/repo/.baton/runs/r1"),
        "the mode wins"
    );
}

#[test]
fn access_texts_escape_what_they_embed() {
    let mut request = placed(AccessMode::ReadOnly);
    if let Some(access) = request.access.as_mut() {
        access.workspace = PathBuf::from("/repo/we\"ird (1)/ws");
    }
    let gemini = command_line(&builtin("gemini"), &request).unwrap();
    let parsed: toml::Table = toml::from_str(&gemini.files[0].1).expect("still TOML");
    let pattern = parsed["rule"][0]["argsPattern"].as_str().unwrap();
    assert_eq!(pattern, r#""file_path":"/repo/we\\"ird \(1\)/ws/"#);
    let opencode = command_line(&builtin("opencode"), &request).unwrap();
    let config: serde_json::Value = serde_json::from_str(&opencode.env[0].1).expect("JSON");
    assert_eq!(config["permission"]["edit"]["we\"ird (1)/ws/**"], "allow");
}

/// The flags of every access mode exist in the CLI's real `--help` too.
#[test]
fn every_access_flag_exists_in_the_cli_help() {
    let Some(dir) = baton_test_support::agent_clis_dir() else {
        return;
    };
    for (name, help_file) in [
        ("claude", "claude.help"),
        ("codex", "codex-exec.help"),
        ("gemini", "gemini.help"),
        ("opencode", "opencode-run.help"),
    ] {
        let help = std::fs::read_to_string(dir.join(help_file)).expect("help text");
        for mode in [
            AccessMode::ReadOnly,
            AccessMode::ReadWrite,
            AccessMode::Worktree,
        ] {
            for flag in launch(name, mode)
                .args
                .iter()
                .filter(|arg| arg.starts_with('-') && arg.len() > 1)
            {
                let documented = [' ', ',', '\n', '=', '<', '[']
                    .iter()
                    .any(|after| help.contains(&format!("{flag}{after}")));
                assert!(
                    documented,
                    "{name} {mode:?}: `{flag}` is not in {help_file}"
                );
            }
        }
    }
}

/// A request that continues a session: each CLI's own way, after every
/// other argument, so that Codex's `resume` subcommand follows the options
/// of `exec`; the prompt still goes to stdin.
#[test]
fn a_session_is_continued_the_way_each_cli_takes_it() {
    let mut continued = placed(AccessMode::ReadWrite);
    continued.resume = Some("s-42".into());
    for (name, expected) in [
        ("claude", &["--resume", "s-42"][..]),
        ("codex", &["resume", "s-42", "-"][..]),
        ("gemini", &["--resume", "s-42"][..]),
        ("opencode", &["-s", "s-42"][..]),
    ] {
        let fresh = launch(name, AccessMode::ReadWrite);
        let command = command_line(&builtin(name), &continued).expect("a CLI profile");
        let skip = command.args.len() - expected.len();
        assert_eq!(tail(&command, skip), expected, "{name}");
        let same = fresh.args.len() - usize::from(name == "codex");
        assert_eq!(command.args[..same], fresh.args[..same], "{name}");
        assert_eq!(command.stdin, fresh.stdin, "{name}");
        assert_eq!(command.cwd, fresh.cwd, "{name}");
    }
}

/// A profile without the capability, or without a `resume` rule, cannot
/// continue a session: the request is refused rather than run fresh.
#[test]
fn a_profile_that_cannot_resume_refuses_to() {
    let mut continued = placed(AccessMode::ReadWrite);
    continued.resume = Some("s-42".into());
    let mut without_capability = builtin("claude");
    without_capability
        .capabilities
        .retain(|capability| *capability != baton_executor::profile::Capability::Resume);
    for profile in [builtin("aider"), without_capability] {
        let error = command_line(&profile, &continued).expect_err("refused");
        assert!(matches!(error, Error::CannotResume { .. }), "{error}");
    }
}

/// The words of a continued launch exist in the CLI's real `--help`: the
/// flags, and Codex's `resume` subcommand.
#[test]
fn every_resume_word_exists_in_the_cli_help() {
    let Some(dir) = baton_test_support::agent_clis_dir() else {
        return;
    };
    for (name, help_file) in [
        ("claude", "claude.help"),
        ("codex", "codex-exec.help"),
        ("gemini", "gemini.help"),
        ("opencode", "opencode-run.help"),
    ] {
        let help = std::fs::read_to_string(dir.join(help_file)).expect("help text");
        let rule = builtin(name).resume.expect("a resume rule");
        let word = rule.args.first().expect("an argument");
        assert!(
            help.contains(&format!("{word} ")) || help.contains(&format!("{word},")),
            "{name}: `{word}` is not in {help_file}"
        );
    }
}
