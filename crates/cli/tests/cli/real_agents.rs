//! The real agent CLIs — Claude Code, Codex, Gemini CLI and opencode, the
//! pinned versions `scripts/test` installs — driven by baton's built-in
//! profiles against the fake model server, pointed at it only the way a user
//! points each CLI at a gateway (`agent_clis::configure_home`).
//!
//! For every CLI: a read-only stage reads the repository and writes its
//! report; a read-write stage edits a tracked file; an isolated stage's
//! edit is merged back; a task runs from SPEC.md to its verdict with the
//! referee on another model. Then what goes wrong: a read-only agent asked
//! to write the repository is refused, the model's errors reach the stage's
//! error, a model that hangs ends at the idle limit, and a 200 KB prompt
//! arrives whole.
//!
//! Without the CLIs these tests fail, unless `BATON_TEST_SKIP` lists
//! `agent-clis` (then they say SKIPPED on stderr).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use baton_test_support::agent_clis::{agent_clis, configure_home, environment};
use baton_test_support::model_server::{Mode, ModelServer, fake_content};
use serde_json::Value;

/// A git repository with baton's settings for one CLI, the CLI's home and
/// the fake model it talks to.
pub(crate) struct Setup {
    project: tempfile::TempDir,
    _home: tempfile::TempDir,
    pub(crate) server: ModelServer,
    env: Vec<(String, String)>,
}

/// The longest one `baton` command of these tests may take.
pub(crate) const LIMIT: Duration = Duration::from_secs(240);

impl Setup {
    /// `None` (the test is skipped, loudly) without the CLIs.
    pub(crate) fn new(cli: &str) -> Option<Setup> {
        let bin = agent_clis()?;
        let server = ModelServer::start();
        let home = tempfile::tempdir().expect("a home");
        configure_home(home.path(), &server);
        let env = environment(home.path(), &bin, &server);
        let project = tempfile::tempdir().expect("a project");
        let setup = Setup {
            project,
            _home: home,
            server,
            env,
        };
        let dir = setup.dir();
        std::fs::create_dir_all(dir.join("src")).expect("src");
        std::fs::write(dir.join("README.md"), "# Demo\n\nreadme-marker-7f3a\n").expect("write");
        std::fs::write(dir.join("src/app.txt"), "app 1\n").expect("write");
        std::fs::write(dir.join(".gitignore"), ".baton/\nwf.yaml\n").expect("write");
        // Gemini picks a model by asking the model first unless it is
        // given one; opencode names models `provider/model`.
        let (main, other) = match cli {
            "gemini" => ("\nmodel = \"test-model\"", "other-model"),
            "opencode" => ("", "fake/other-model"),
            _ => ("", "other-model"),
        };
        std::fs::write(
            dir.join("baton.toml"),
            format!(
                "[agents.default]\nprofile = \"{cli}\"{main}\n\n[agents.referee]\nprofile = \"{cli}\"\nmodel = \"{other}\"\n"
            ),
        )
        .expect("write");
        setup.git(&["init", "-q", "-b", "main"]);
        setup.git(&["config", "user.name", "test"]);
        setup.git(&["config", "user.email", "test@localhost"]);
        setup.git(&["add", "-A"]);
        setup.git(&["commit", "-q", "-m", "start"]);
        Some(setup)
    }

    pub(crate) fn dir(&self) -> &Path {
        self.project.path()
    }

    /// The environment the CLIs run with: their home, `PATH` and gateway
    /// variables.
    pub(crate) fn env(&self) -> &[(String, String)] {
        &self.env
    }

    /// Appends to the project's `baton.toml`.
    pub(crate) fn settings(&self, text: &str) {
        let path = self.dir().join("baton.toml");
        let mut settings = std::fs::read_to_string(&path).expect("baton.toml");
        settings.push('\n');
        settings.push_str(text);
        std::fs::write(&path, settings).expect("write baton.toml");
    }

    pub(crate) fn git(&self, args: &[&str]) -> String {
        #[expect(clippy::disallowed_methods, reason = "tests inspect the repository")]
        let output = Command::new("git")
            .arg("-C")
            .arg(self.dir())
            .args(args)
            .output()
            .expect("git");
        assert!(output.status.success(), "git {args:?}: {output:?}");
        String::from_utf8_lossy(&output.stdout)
            .trim_end()
            .to_owned()
    }

    /// Runs `baton` in the project with the CLIs' environment.
    pub(crate) fn baton(&self, args: &[&str]) -> baton_test_support::Run {
        let bin = Path::new(env!("CARGO_BIN_EXE_baton"));
        baton_test_support::run_bounded_with(bin, self.dir(), args, &self.env, LIMIT)
    }

    /// Runs a workflow of `stages`; returns the run's status JSON.
    pub(crate) fn run(&self, stages: &str) -> (baton_test_support::Run, Value) {
        std::fs::write(
            self.dir().join("wf.yaml"),
            format!(
                "name: real\nversion: \"1\"\ndescription: a real agent CLI against the fake model\ntrigger: {{ source: manual }}\nstages:\n{stages}"
            ),
        )
        .expect("write the workflow");
        let run = self.baton(&["run", "wf.yaml", "--json"]);
        let id = crate::project::run_id(&run);
        let status = self.baton(&["status", &id, "--json"]);
        let status = serde_json::from_str(&status.stdout).expect("status JSON");
        (run, status)
    }

    /// The text of every request the model server received.
    pub(crate) fn bodies(&self) -> String {
        self.server
            .requests()
            .iter()
            .map(|request| request.body.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn stage_error<'a>(status: &'a Value, name: &str) -> &'a str {
    status["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .find(|stage| stage["stage"] == name)
        .and_then(|stage| stage["error"].as_str())
        .unwrap_or_default()
}

pub(crate) fn workspace(status: &Value) -> PathBuf {
    PathBuf::from(status["workspace"].as_str().expect("the run's workspace"))
}

/// An agent stage: `agent` is the flow mapping's inside.
pub(crate) fn agent_stage(name: &str, agent: &str, lines: &[&str], output: &str) -> String {
    let lines: String = lines.iter().map(|line| format!("      {line}\n")).collect();
    format!(
        "  - name: {name}\n    kind: execute\n    executor: agent\n    agent: {{ {agent} }}\n    description: |\n      Do the stage's work.\n{lines}    writes_to: [{output}]\n"
    )
}

/// (a) Reads the repository, writes its report into the workspace, and
/// changes nothing else.
fn read_only_stage_reads_the_repository_and_writes_its_report(cli: &str) {
    let Some(setup) = Setup::new(cli) else { return };
    let readme = setup.dir().join("README.md");
    let (run, status) = setup.run(&agent_stage(
        "review",
        "role: reviewer, access: read-only",
        &[&format!("FAKE: read {}", readme.display())],
        "outputs/review.md",
    ));
    assert_eq!(run.code, 0, "{cli}: {}\n{status}", run.stderr);
    let report = workspace(&status).join("outputs/review.md");
    assert_eq!(
        std::fs::read_to_string(&report).expect("the report"),
        fake_content(&report.display().to_string())
    );
    assert!(
        setup.bodies().contains("readme-marker-7f3a"),
        "{cli} did not read README.md from the repository"
    );
    assert_eq!(setup.git(&["status", "--porcelain"]), "", "{cli}");
}

/// (b) Edits a tracked file of the repository and writes its output.
fn read_write_stage_edits_a_tracked_file(cli: &str) {
    let Some(setup) = Setup::new(cli) else { return };
    let (run, status) = setup.run(&agent_stage(
        "edit",
        "role: code-writer, access: read-write",
        &["FAKE: write src/app.txt"],
        "outputs/edit.md",
    ));
    assert_eq!(run.code, 0, "{cli}: {}\n{status}", run.stderr);
    assert_eq!(
        std::fs::read_to_string(setup.dir().join("src/app.txt")).expect("app.txt"),
        fake_content("src/app.txt"),
        "{cli}"
    );
    assert!(workspace(&status).join("outputs/edit.md").is_file());
    assert_eq!(setup.git(&["status", "--porcelain"]), " M src/app.txt");
    // The agent's output reads as a transcript; --raw keeps the CLI's own.
    let id = crate::project::run_id(&run);
    let logs = setup.baton(&["logs", &id, "edit"]).stdout;
    assert!(
        logs.contains("edit | agent | assistant: Done."),
        "{cli}: {logs}"
    );
    let raw = setup.baton(&["logs", &id, "edit", "--raw"]).stdout;
    assert!(raw.contains("edit | stdout | {"), "{cli}: {raw}");
    if cli != "gemini" {
        // Gemini CLI's JSON output has no tool calls in it.
        assert!(logs.contains("edit | agent | tool "), "{cli}: {logs}");
    }
}

/// (c) An isolated stage edits its worktree; baton commits and merges it.
fn worktree_stage_is_merged_back(cli: &str) {
    let Some(setup) = Setup::new(cli) else { return };
    let (run, status) = setup.run(&agent_stage(
        "isolated",
        "role: code-writer, access: read-write, isolation: worktree",
        &["FAKE: write src/app.txt"],
        "outputs/isolated.md",
    ));
    assert_eq!(run.code, 0, "{cli}: {}\n{status}", run.stderr);
    assert_eq!(
        std::fs::read_to_string(setup.dir().join("src/app.txt")).expect("app.txt"),
        fake_content("src/app.txt"),
        "{cli}: the merged edit is in the checkout"
    );
    assert_eq!(
        setup.git(&["rev-list", "--merges", "main"]).lines().count(),
        1
    );
    assert!(workspace(&status).join("outputs/isolated.md").is_file());
}

/// (d) A new task runs from SPEC.md to VERDICT.md; the referee runs on
/// another model than the implementer.
fn task_runs_to_its_verdict(cli: &str) {
    let Some(setup) = Setup::new(cli) else { return };
    let created = setup.baton(&["task", "new", "Add a greeting"]);
    assert_eq!(created.code, 0, "{}", created.stderr);
    let run = setup.baton(&["task", "run", "add-a-greeting"]);
    assert_eq!(run.code, 0, "{cli}: {}\n{}", run.stdout, run.stderr);
    let archived = setup.dir().join("tasks/archive/add-a-greeting");
    for artifact in [
        "SPEC.md",
        "IMPLEMENTATION.md",
        "BUG_REPORT.md",
        "ADVERSARIAL_BUG_REPORT.md",
        "DOC_REVIEW.md",
        "VERDICT.md",
    ] {
        assert!(archived.join(artifact).is_file(), "{cli}: {artifact}");
    }
    let models: Vec<String> = setup
        .server
        .requests()
        .iter()
        .map(|request| {
            // Gemini names the model in the path, the others in the body.
            let model = request.body.get("model").and_then(Value::as_str);
            format!("{} {}", request.path, model.unwrap_or_default())
        })
        .collect();
    assert!(
        models.iter().any(|model| model.contains("other-model")),
        "{cli}: the referee did not run on its own model: {models:?}"
    );
}

/// A read-only stage whose model asks to write a repository file: the CLI
/// refuses, nothing is written.
fn read_only_stage_cannot_write_the_repository(cli: &str) {
    let Some(setup) = Setup::new(cli) else { return };
    let target = setup.dir().join("planted.txt");
    let (run, status) = setup.run(&agent_stage(
        "review",
        "role: reviewer, access: read-only",
        &[&format!("FAKE: write {}", target.display())],
        "outputs/review.md",
    ));
    // The model did ask: its write call (not only the prompt's line) is in
    // the conversation the CLI sent back.
    let target_text = target.display().to_string();
    let asked = setup
        .bodies()
        .replace(&format!("FAKE: write {target_text}"), "")
        .contains(&target_text);
    assert!(asked, "{cli}: the model never asked to write {target_text}");
    assert!(!target.exists(), "{cli} wrote the repository");
    assert_eq!(setup.git(&["status", "--porcelain"]), "", "{cli}");
    // The report is still written: only the repository is read-only.
    assert_eq!(run.code, 0, "{cli}: {}\n{status}", run.stderr);
}

/// The model answers 500: the stage fails quoting the CLI's own message.
fn a_server_error_is_quoted(cli: &str) {
    let Some(setup) = Setup::new(cli) else { return };
    setup.settings(&format!(
        "[profiles.{cli}.retry]\nattempts = 1\ndelay = \"100ms\"\n"
    ));
    setup.server.set_mode(Mode::Status(500));
    let (run, status) = setup.run(&agent_stage(
        "review",
        "role: reviewer, access: read-only",
        &[],
        "outputs/review.md",
    ));
    assert_ne!(run.code, 0, "{cli}");
    // The CLI's own words, not only an exit code. (Codex words a server
    // error its own way: "We're currently experiencing high demand…".)
    let error = stage_error(&status, "review");
    assert!(error.starts_with("the agent reported: "), "{cli}: {error}");
    assert!(
        !error.contains("the agent reported: (exited"),
        "{cli}: {error}"
    );
    // A server error may pass: the attempt was tried again, once, as the
    // profile says.
    assert!(
        run.stderr.contains("retry 1 of 1 in 0.1s"),
        "{cli}: {}",
        run.stderr
    );
    assert!(!run.stderr.contains("retry 2"), "{cli}: {}", run.stderr);
}

/// The model is rate-limited for one request: the CLI reports the 429,
/// baton waits and runs the attempt again, which succeeds (opencode gets
/// past it on its own).
fn a_rate_limit_is_retried_until_it_passes(cli: &str) {
    let Some(setup) = Setup::new(cli) else { return };
    setup.settings(&format!("[profiles.{cli}.retry]\ndelay = \"200ms\"\n"));
    setup.server.fail_next(1, Mode::Status(429));
    let (run, status) = setup.run(&agent_stage(
        "review",
        "role: reviewer, access: read-only",
        &[],
        "outputs/review.md",
    ));
    assert_eq!(run.code, 0, "{cli}: {}\n{status}", run.stderr);
    if cli == "opencode" {
        // opencode retries a 429 itself (it has no setting to stop that),
        // so its attempt never fails.
        return;
    }
    assert!(run.stderr.contains("retry 1 of 2"), "{cli}: {}", run.stderr);
    let logs = workspace(&status).join("logs");
    let kept = std::fs::read_dir(&logs)
        .expect("logs")
        .flatten()
        .flat_map(|stage| {
            std::fs::read_dir(stage.path())
                .expect("stage logs")
                .flatten()
        })
        .any(|log| log.file_name().to_string_lossy().contains(".retry-1."));
    assert!(kept, "{cli}: the first try's logs are kept");
}

/// The model accepts the request and never answers: the stage ends at its
/// idle limit, and nothing of the CLI is left running.
fn a_hung_model_ends_at_the_idle_limit(cli: &str) {
    let Some(setup) = Setup::new(cli) else { return };
    setup.settings(&format!(
        "[profiles.{cli}]\nlimits = {{ idle = \"6s\", kill_grace = \"2s\" }}\n"
    ));
    setup.server.set_mode(Mode::Hang);
    let started = std::time::Instant::now();
    let (run, status) = setup.run(&agent_stage(
        "review",
        "role: reviewer, access: read-only",
        &[],
        "outputs/review.md",
    ));
    assert_ne!(run.code, 0, "{cli}");
    let error = stage_error(&status, "review");
    assert!(error.contains("idle timeout"), "{cli}: {error}");
    assert!(started.elapsed() < Duration::from_secs(120), "{cli}");
}

/// A 200 KB prompt reaches the CLI whole: the model sees the user message
/// equal to the prompt baton dispatched.
fn a_large_prompt_arrives_whole(cli: &str) {
    let Some(setup) = Setup::new(cli) else { return };
    let filler: Vec<String> = (0..3200)
        .map(|n| format!("Line {n}: «ünïcode» and \"quotes\" and $dollars and `ticks`."))
        .collect();
    let (run, status) = setup.run(&agent_stage(
        "big",
        "role: reviewer, access: read-only",
        &filler.iter().map(String::as_str).collect::<Vec<_>>(),
        "outputs/big.md",
    ));
    assert_eq!(run.code, 0, "{cli}: {}\n{status}", run.stderr);
    let dispatch = workspace(&status).join("dispatch");
    let prompt_file = std::fs::read_dir(&dispatch)
        .expect("the dispatch directory")
        .flatten()
        .map(|entry| entry.path())
        .find(|path| path.to_string_lossy().ends_with("-big.prompt.md"))
        .expect("the dispatched prompt");
    let dispatched = std::fs::read_to_string(prompt_file).expect("the dispatched prompt");
    assert!(dispatched.len() > 200_000, "{}", dispatched.len());
    let prompts = setup.server.user_prompts();
    assert!(
        prompts
            .iter()
            .any(|prompt| prompt.trim_end() == dispatched.trim_end()),
        "{cli}: no request carried the prompt whole ({} requests)",
        prompts.len()
    );
}

macro_rules! every_cli {
    ($($scenario:ident),* $(,)?) => {
        mod claude { $( #[test] fn $scenario() { super::$scenario("claude") } )* }
        mod codex { $( #[test] fn $scenario() { super::$scenario("codex") } )* }
        mod gemini { $( #[test] fn $scenario() { super::$scenario("gemini") } )* }
        mod opencode { $( #[test] fn $scenario() { super::$scenario("opencode") } )* }
    };
}

every_cli!(
    read_only_stage_reads_the_repository_and_writes_its_report,
    read_write_stage_edits_a_tracked_file,
    worktree_stage_is_merged_back,
    task_runs_to_its_verdict,
    read_only_stage_cannot_write_the_repository,
    a_server_error_is_quoted,
    a_rate_limit_is_retried_until_it_passes,
    a_large_prompt_arrives_whole,
    a_hung_model_ends_at_the_idle_limit,
);
