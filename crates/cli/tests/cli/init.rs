//! `baton init`: a role → profile map for the agent CLIs on `PATH` and a
//! starter workflow, never overwriting what exists unless `--force`; with
//! the real CLIs the starter then checks and runs against the fake model.

use std::path::Path;
use std::time::Duration;

use baton_test_support::Run;

use crate::real_agents::Setup;

const LIMIT: Duration = Duration::from_secs(120);

/// Runs `baton` in `dir` with `PATH` set to `path` (and `env`).
fn baton_on(dir: &Path, path: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut vars = vec![("PATH".to_owned(), path.display().to_string())];
    vars.extend(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    baton_test_support::run_bounded_with(
        Path::new(env!("CARGO_BIN_EXE_baton")),
        dir,
        args,
        &vars,
        LIMIT,
    )
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

#[test]
fn with_no_agent_cli_on_path_it_writes_a_commented_map_and_a_lint_clean_starter() {
    let project = tempfile::tempdir().expect("a project");
    let empty = tempfile::tempdir().expect("an empty PATH");
    let init = baton_on(project.path(), empty.path(), &["init"], &[]);
    assert_eq!(init.code, 0, "{}\n{}", init.stdout, init.stderr);
    assert!(
        init.stdout.contains("No agent CLI found on PATH."),
        "{}",
        init.stdout
    );
    assert!(
        init.stdout
            .contains("Not found: claude, codex, gemini, opencode, aider, goose"),
        "{}",
        init.stdout
    );
    assert!(
        init.stdout
            .contains("  baton check workflows/hello.yaml\n  baton run workflows/hello.yaml"),
        "{}",
        init.stdout
    );
    let settings = read(&project.path().join("baton.toml"));
    assert!(
        settings.contains("found no agent CLI on PATH. Install one of these"),
        "{settings}"
    );
    assert!(settings.contains("#   claude    Claude Code"), "{settings}");
    assert!(
        settings.contains("# [agents.default]\n# profile = \"claude\""),
        "{settings}"
    );
    assert!(
        !settings.lines().any(|line| line.starts_with('[')),
        "no table is active: {settings}"
    );
    // The starter is written, and is clean even under --strict.
    let lint = baton_on(
        project.path(),
        empty.path(),
        &["lint", "--strict", "workflows/hello.yaml"],
        &[],
    );
    assert_eq!(lint.code, 0, "{}\n{}", lint.stdout, lint.stderr);
    assert!(
        lint.stdout.contains("0 errors, 0 warnings"),
        "{}",
        lint.stdout
    );
    // Checking it says what is missing, naming the stage and the role.
    let check = baton_on(
        project.path(),
        empty.path(),
        &["check", "workflows/hello.yaml"],
        &[],
    );
    assert_eq!(check.code, 3, "{}\n{}", check.stdout, check.stderr);
    assert!(
        check.stderr.contains(
            "stage `overview` runs an agent (agent, role `writer`) that no profile is mapped to"
        ),
        "{}",
        check.stderr
    );
}

#[test]
fn existing_files_are_kept_unless_forced() {
    let project = tempfile::tempdir().expect("a project");
    let empty = tempfile::tempdir().expect("an empty PATH");
    let settings = project.path().join("baton.toml");
    let starter = project.path().join("workflows/hello.yaml");
    std::fs::write(&settings, "[agents.default]\nprofile = \"codex\"\n").expect("write");

    let init = baton_on(project.path(), empty.path(), &["init"], &[]);
    assert_eq!(init.code, 0, "{}\n{}", init.stdout, init.stderr);
    assert!(
        init.stdout
            .contains("kept baton.toml: it exists (`baton init --force` overwrites it)"),
        "{}",
        init.stdout
    );
    assert!(
        init.stdout.contains("wrote workflows/hello.yaml"),
        "{}",
        init.stdout
    );
    assert_eq!(read(&settings), "[agents.default]\nprofile = \"codex\"\n");

    std::fs::write(&starter, "name: mine\n").expect("write");
    let again = baton_on(project.path(), empty.path(), &["init", "--json"], &[]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    let json: serde_json::Value = serde_json::from_str(&again.stdout).expect("JSON");
    assert_eq!(
        json["files"],
        serde_json::json!([
            {"path": "baton.toml", "action": "kept"},
            {"path": "workflows/hello.yaml", "action": "kept"},
        ])
    );
    assert_eq!(
        json["roles"],
        serde_json::json!([]),
        "nothing found, nothing mapped"
    );
    assert_eq!(json["agents"][0]["profile"], "claude");
    assert_eq!(json["agents"][0]["found"], false);
    assert_eq!(read(&starter), "name: mine\n");
    assert_eq!(read(&settings), "[agents.default]\nprofile = \"codex\"\n");

    let forced = baton_on(project.path(), empty.path(), &["init", "--force"], &[]);
    assert_eq!(forced.code, 0, "{}", forced.stderr);
    assert!(
        forced.stdout.contains("overwrote baton.toml"),
        "{}",
        forced.stdout
    );
    assert!(
        forced.stdout.contains("overwrote workflows/hello.yaml"),
        "{}",
        forced.stdout
    );
    assert!(read(&settings).contains("# [agents.default]"));
    assert!(read(&starter).contains("name: hello"));
    // Nothing but the two files is left behind (no temporary files).
    let mut names: Vec<String> = std::fs::read_dir(project.path().join("workflows"))
        .expect("workflows/")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    assert_eq!(names, ["hello.yaml"]);
}

#[test]
fn a_file_that_cannot_be_written_is_an_error_that_says_so() {
    let project = tempfile::tempdir().expect("a project");
    let empty = tempfile::tempdir().expect("an empty PATH");
    // `workflows` is a file: the starter cannot go under it.
    std::fs::write(project.path().join("workflows"), "").expect("write");
    let init = baton_on(project.path(), empty.path(), &["init"], &[]);
    assert_eq!(init.code, 2, "{}\n{}", init.stdout, init.stderr);
    assert!(
        init.stderr.contains("error: cannot create") && init.stderr.contains("workflows"),
        "{}",
        init.stderr
    );
}

/// With the real CLIs on `PATH`: each is found with its version and what
/// it needs, the first is the default role's and the second the
/// reviewer's; the starter then passes `baton check` and runs, its agent
/// (Claude Code, against the fake model) writing its output file.
#[test]
fn the_real_clis_on_path_are_mapped_and_the_starter_runs() {
    let Some(setup) = Setup::new("claude") else {
        return;
    };
    std::fs::remove_file(setup.dir().join("baton.toml")).expect("remove baton.toml");
    let env: Vec<(String, String)> = setup.env().to_vec();
    let path = env
        .iter()
        .find(|(key, _)| key == "PATH")
        .map(|(_, value)| value.clone())
        .expect("PATH");
    // No credentials at first: init says what each CLI still needs.
    let bare: Vec<(&str, &str)> = env
        .iter()
        .filter(|(key, _)| key != "PATH")
        .map(|(key, value)| {
            let value = if key.ends_with("_API_KEY") {
                ""
            } else {
                value.as_str()
            };
            (key.as_str(), value)
        })
        .collect();
    let init = baton_on(setup.dir(), Path::new(&path), &["init"], &bare);
    assert_eq!(init.code, 0, "{}\n{}", init.stdout, init.stderr);
    for (profile, cli, needs) in [
        (
            "claude",
            "Claude Code",
            "set ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN",
        ),
        ("codex", "Codex", "set OPENAI_API_KEY"),
        (
            "gemini",
            "Gemini CLI",
            "set GEMINI_API_KEY or GOOGLE_API_KEY",
        ),
        (
            "opencode",
            "opencode",
            "set ANTHROPIC_API_KEY or OPENAI_API_KEY",
        ),
    ] {
        let line = init
            .stdout
            .lines()
            .find(|line| line.starts_with(&format!("{profile} ")))
            .unwrap_or_else(|| panic!("no line for {profile}: {}", init.stdout));
        assert!(line.contains(cli), "{line}");
        assert!(
            line.chars().any(|c| c.is_ascii_digit()),
            "a version: {line}"
        );
        assert!(line.contains(needs), "{line}");
    }
    assert!(
        init.stdout.contains("Not found: aider, goose"),
        "{}",
        init.stdout
    );
    let settings = read(&setup.dir().join("baton.toml"));
    assert!(
        settings.contains("\n[agents.default]\nprofile = \"claude\"\n"),
        "{settings}"
    );
    assert!(
        settings.contains("\n[agents.reviewer]\nprofile = \"codex\"\n"),
        "{settings}"
    );
    let active: Vec<&str> = settings
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .collect();
    assert_eq!(
        active,
        [
            "[agents.default]",
            "profile = \"claude\"",
            "[agents.reviewer]",
            "profile = \"codex\""
        ],
        "only the role map, no copies of the profiles: {settings}"
    );

    // With credentials, nothing is missing: the starter checks and runs.
    let check = setup.baton(&["check", "workflows/hello.yaml"]);
    assert_eq!(check.code, 0, "{}\n{}", check.stdout, check.stderr);
    assert!(
        check
            .stdout
            .contains("overview  agent  writer  claude   yes"),
        "{}",
        check.stdout
    );
    assert!(!check.stderr.contains("note:"), "{}", check.stderr);
    let run = setup.baton(&["run", "workflows/hello.yaml", "--json"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let id = crate::project::run_id(&run);
    let status = setup.baton(&["status", &id, "--json"]);
    let status: serde_json::Value = serde_json::from_str(&status.stdout).expect("status JSON");
    let overview = crate::real_agents::workspace(&status).join("outputs/overview.md");
    assert!(
        !read(&overview).is_empty(),
        "the agent wrote {}",
        overview.display()
    );
}
