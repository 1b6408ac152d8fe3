//! A run whose agents cannot start here is refused before anything runs or
//! is recorded, naming each stage and role; `run --dry-run` says the same.

use crate::baton;

const WORKFLOW: &str = "name: t\nversion: '1'\ndescription: d\ntrigger: {source: manual}\nstages:\n  - name: prepare\n    kind: execute\n    description: d\n    executor: inline\n    script: touch prepared.txt\n  - name: review\n    kind: execute\n    description: d\n    depends_on: [prepare]\n    agent: {role: reviewer, access: read-only}\n    writes_to: [review.md]\n    validation: {strategy: unit}\n";

fn project(settings: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("wf.yaml"), WORKFLOW).expect("write");
    std::fs::write(dir.path().join("baton.toml"), settings).expect("write");
    dir
}

#[test]
fn a_role_without_a_profile_is_refused_before_anything_runs() {
    let dir = project("[agents.writer]\nprofile = \"claude\"\n");
    let run = baton(dir.path(), &["run", "wf.yaml"]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr.contains("stage `review` runs an agent (agent, role `reviewer`) that no profile is mapped to: add [agents.reviewer]"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("(validator, role `validator`)"),
        "{}",
        run.stderr
    );
    assert!(
        !dir.path().join("prepared.txt").exists(),
        "the first stage ran"
    );
    let runs = baton(dir.path(), &["runs", "--json"]);
    assert_eq!(runs.stdout.trim(), "[]", "nothing is recorded");

    let dry = baton(dir.path(), &["run", "wf.yaml", "--dry-run"]);
    assert_eq!(dry.code, 3, "{}", dry.stderr);
    assert!(dry.stderr.contains("role `reviewer`"), "{}", dry.stderr);
}

#[test]
fn a_profile_whose_program_is_missing_is_refused() {
    let dir = project(
        "[agents.default]\nprofile = \"ghost\"\n\n[profiles.ghost]\nprogram = \"no-such-agent-cli\"\n",
    );
    let run = baton(dir.path(), &["run", "wf.yaml"]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("with profile `ghost`, whose program `no-such-agent-cli` is not installed"),
        "{}",
        run.stderr
    );
    assert!(
        !dir.path().join("prepared.txt").exists(),
        "the first stage ran"
    );
}

#[test]
fn tools_a_profile_cannot_pass_are_a_warning() {
    let dir =
        project("[agents.default]\nprofile = \"fake\"\n\n[profiles.fake]\nprogram = \"bash\"\n");
    let workflow = WORKFLOW.replace(
        "agent: {role: reviewer, access: read-only}",
        "agent: {role: reviewer, access: read-only, tools: [Read, Grep]}",
    );
    std::fs::write(dir.path().join("wf.yaml"), workflow).expect("write");
    let dry = baton(dir.path(), &["run", "wf.yaml", "--dry-run"]);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert!(
        dry.stderr.contains(
            "warning: stage `review` lists agent.tools, which profile `fake` cannot pass to its CLI (it has neither"
        ),
        "{}",
        dry.stderr
    );
}

/// `agent.tools` warns only for a CLI that has no way to take them (Codex,
/// Aider, Goose), or for a tool the profile has no name for.
#[test]
fn tools_warn_only_where_the_cli_has_no_equivalent() {
    let warned = |profile: &str, tools: &str| {
        // `bash` stands in for the CLI (it answers `--version`): only the
        // warnings are looked at.
        let dir = project(&format!(
            "[agents.default]\nprofile = \"{profile}\"\n\n[profiles.{profile}]\nprogram = \"bash\"\n"
        ));
        let workflow = WORKFLOW.replace(
            "agent: {role: reviewer, access: read-only}",
            &format!("agent: {{role: reviewer, access: read-only, tools: [{tools}]}}"),
        );
        std::fs::write(dir.path().join("wf.yaml"), workflow).expect("write");
        let dry = baton(dir.path(), &["run", "wf.yaml", "--dry-run"]);
        assert_eq!(dry.code, 0, "{profile}: {}", dry.stderr);
        dry.stderr
            .lines()
            .filter(|line| line.contains("lists agent.tools"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    for profile in ["claude", "gemini", "opencode"] {
        assert_eq!(
            warned(profile, "Read, Grep, Bash, Write, Edit"),
            Vec::<String>::new(),
            "{profile}"
        );
    }
    for profile in ["codex", "aider", "goose"] {
        let warnings = warned(profile, "Read, Grep");
        assert_eq!(warnings.len(), 1, "{profile}: {warnings:?}");
        assert!(
            warnings[0].contains(&format!("which profile `{profile}` cannot pass to its CLI")),
            "{warnings:?}"
        );
    }
    let warnings = warned("gemini", "Read, NotebookEdit");
    assert_eq!(
        warnings,
        [
            "warning: stage `review` lists agent.tools that profile `gemini` has no equivalent for (NotebookEdit): its CLI neither offers nor refuses them by name, and the CLI's permissions for its access apply to them"
        ]
    );
}
