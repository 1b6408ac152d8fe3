//! A stage's `agent.tools` with the real CLIs that can honour it (Claude
//! Code's `--allowedTools`, Gemini CLI's policy engine, opencode's
//! permissions), against the fake model server: a listed tool works, and a
//! tool not listed is not used even when the model asks for it.

use baton_test_support::model_server::fake_content;
use serde_json::Value;

use crate::real_agents::{Setup, agent_stage};

/// The shell command the model asks for: not one Claude Code's
/// `acceptEdits` mode approves by itself (`touch`, `mkdir`, `cp`, … are).
fn shell_command(marker: &std::path::Path) -> String {
    format!("FAKE: shell git init -q {}", marker.display())
}

/// The names of the tools a request offers, in any of the protocols.
fn offered(body: &Value) -> Vec<String> {
    let mut names = Vec::new();
    for tool in body["tools"].as_array().into_iter().flatten() {
        let declarations = tool["functionDeclarations"].as_array();
        names.extend(
            [&tool["name"], &tool["function"]["name"]]
                .into_iter()
                .chain(declarations.into_iter().flatten().map(|one| &one["name"]))
                .filter_map(Value::as_str)
                .map(str::to_owned),
        );
    }
    names
}

/// Two read-write stages whose model asks for a shell command: one lists
/// `Bash`, the other only `Read` (and reads the README with it).
fn listed_tools_work_and_others_are_refused(cli: &str) {
    let Some(setup) = Setup::new(cli) else { return };
    let allowed = setup.dir().join("shell-allowed.txt");
    let refused = setup.dir().join("shell-refused.txt");
    let readme = setup.dir().join("README.md");
    let stages = [
        agent_stage(
            "with-shell",
            "role: code-writer, access: read-write, tools: [Read, Bash]",
            &[&shell_command(&allowed)],
            "outputs/with-shell.md",
        ),
        agent_stage(
            "without-shell",
            "role: code-writer, access: read-write, tools: [Read]",
            &[
                &shell_command(&refused),
                &format!("FAKE: read {}", readme.display()),
            ],
            "outputs/without-shell.md",
        )
        .replace(
            "    writes_to:",
            "    depends_on: [with-shell]\n    writes_to:",
        ),
    ];
    let (run, status) = setup.run(&stages.concat());
    assert!(
        !run.stderr.contains("lists agent.tools"),
        "{cli}: the profile passes agent.tools, no warning: {}",
        run.stderr
    );
    assert!(allowed.exists(), "{cli}: the listed shell did not run");
    assert!(!refused.exists(), "{cli}: a shell that was not listed ran");
    // The listed read tool still works, and the outputs are written.
    assert!(
        setup.bodies().contains("readme-marker-7f3a"),
        "{cli}: the listed read tool did not read README.md"
    );
    assert_eq!(run.code, 0, "{cli}: {}\n{status}", run.stderr);
    let written = crate::real_agents::workspace(&status).join("outputs/without-shell.md");
    assert_eq!(
        std::fs::read_to_string(&written).expect("the second stage's output"),
        fake_content(&written.display().to_string()),
        "{cli}"
    );
    // Gemini CLI and opencode leave a refused tool out of what they offer
    // (Claude Code offers it, and refuses the call).
    if cli != "claude" {
        let second: Vec<Vec<String>> = setup
            .server
            .requests()
            .iter()
            .filter(|request| request.body.to_string().contains("shell-refused"))
            .map(|request| offered(&request.body))
            .filter(|tools| !tools.is_empty())
            .collect();
        assert!(
            !second.is_empty(),
            "{cli}: no request of the second stage offered tools"
        );
        for tools in &second {
            assert!(
                !tools
                    .iter()
                    .any(|tool| tool == "run_shell_command" || tool == "bash"),
                "{cli} offered its shell to the second stage: {tools:?}"
            );
            assert!(
                tools
                    .iter()
                    .any(|tool| tool == "read_file" || tool == "read"),
                "{tools:?}"
            );
        }
    }
}

mod claude {
    #[test]
    fn listed_tools_work_and_others_are_refused() {
        super::listed_tools_work_and_others_are_refused("claude");
    }
}

mod gemini {
    #[test]
    fn listed_tools_work_and_others_are_refused() {
        super::listed_tools_work_and_others_are_refused("gemini");
    }
}

mod opencode {
    #[test]
    fn listed_tools_work_and_others_are_refused() {
        super::listed_tools_work_and_others_are_refused("opencode");
    }
}
