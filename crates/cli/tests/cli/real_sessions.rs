//! A correction continues the agent's own session, with the real Claude
//! Code, Codex, Gemini CLI and opencode against the fake model server
//! (`real_agents.rs` sets them up).
//!
//! The fake model is told to write a stage's JSON report wrong the first
//! time, so the stage's output check fails and its correction runs. That
//! correction continues the session of the work, sending only the findings:
//! the model server sees the first attempt's conversation — its prompt and
//! the wrong write — in the correction's requests, and the corrected report
//! passes. When the CLI has no such session, the correction starts a fresh
//! one with the full prompt, once, and says so: end to end with the two CLIs
//! that start fastest, and for every CLI its own error for an unknown
//! session holds the words its profile looks for.

use baton_executor::profile::{AgentRequest, Config, command_line};
use baton_test_support::agent_clis::agent_clis;
use baton_test_support::model_server::{WRONG_CONTENT, fake_content};
use serde_json::Value;

use crate::real_agents::{LIMIT, Setup, workspace};

/// The words the continued correction's prompt starts with.
const CONTINUED: &str = "Your work in this session was checked";

/// A read-write agent stage writing a JSON report that must be an object.
fn checked_stage() -> String {
    "  - name: report\n    kind: execute\n    executor: agent\n    agent: { role: code-writer, access: read-write }\n    description: Write the report as a JSON object.\n    writes_to: [outputs/report.json]\n    validates_output: [{path: outputs/report.json, checks: [is_dict]}]\n".to_owned()
}

/// The bodies of the model calls that carry the continued correction.
fn continued_requests(setup: &Setup) -> Vec<String> {
    setup
        .server
        .requests()
        .iter()
        .map(|request| request.body.to_string())
        .filter(|body| body.contains(CONTINUED))
        .collect()
}

/// The prompt baton dispatched for the correction unit.
fn correction_prompt(status: &Value) -> String {
    let path = workspace(status).join("dispatch/000-report-c1-correct-outputs.prompt.md");
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

fn report_is_corrected(cli: &str, status: &Value) {
    let report = workspace(status).join("outputs/report.json");
    let text = std::fs::read_to_string(&report).expect("the report");
    assert_eq!(
        text,
        fake_content(&report.display().to_string()),
        "{cli}: the report was corrected"
    );
}

/// The first attempt writes the report wrong; the correction continues
/// its session with the findings alone and fixes it.
fn a_correction_continues_the_agents_session(cli: &str) {
    let Some(setup) = Setup::new(cli) else { return };
    setup.server.write_wrong_first("/outputs/report.json");
    let (run, status) = setup.run(&checked_stage());
    assert_eq!(run.code, 0, "{cli}: {}\n{status}", run.stderr);
    report_is_corrected(cli, &status);

    // The progress and `baton status` say which session was continued.
    let stage = &status["stages"][0];
    let continued = &stage["sessions_continued"][0];
    assert_eq!(continued["unit"], "c1:correct-outputs", "{cli}: {stage}");
    let session = continued["session"].as_str().expect("a session id");
    assert!(
        run.stderr.contains(&format!(
            "report[c1:correct-outputs]: continues the agent's session {session} ({cli})"
        )),
        "{cli}: {}",
        run.stderr
    );

    // The correction's requests carry the first attempt's conversation:
    // its prompt and its wrong write.
    let requests = continued_requests(&setup);
    assert!(!requests.is_empty(), "{cli}: no request continued");
    for body in &requests {
        assert!(
            body.contains("You are the `report` stage"),
            "{cli}: the first prompt is not in the continued conversation"
        );
        assert!(
            body.contains(WRONG_CONTENT.trim_end()),
            "{cli}: the first attempt's write is not in the continued conversation"
        );
        assert!(
            !body.contains("You are the `report-c1-correct-outputs` stage"),
            "{cli}: the full correction prompt was sent too"
        );
    }
    // What was sent is the short prompt: the findings, not the task again.
    let prompt = correction_prompt(&status);
    assert!(prompt.starts_with(CONTINUED), "{cli}: {prompt}");
    assert!(prompt.contains("## Findings to fix"), "{cli}: {prompt}");
    assert!(
        !prompt.contains("## The producing stage's task") && !prompt.contains("You are the"),
        "{cli}: {prompt}"
    );

    let id = crate::project::run_id(&run);
    let table = setup.baton(&["status", &id]).stdout;
    assert!(
        table.contains(&format!("c1:correct-outputs continued session {session}")),
        "{cli}: {table}"
    );

    // The continued attempt's log reads like any other.
    let logs = setup.baton(&["logs", &id, "report[c1:correct-outputs]"]);
    assert_eq!(logs.code, 0, "{cli}: {}", logs.stderr);
    assert!(
        logs.stdout
            .contains("report[c1:correct-outputs] | agent | "),
        "{cli}: {}",
        logs.stdout
    );
}

/// A session id of the form the CLI's own take, of a session it never had.
fn unknown_session(cli: &str) -> &'static str {
    if cli == "opencode" {
        "ses_000000000000000000000000000"
    } else {
        "00000000-0000-4000-8000-000000000000"
    }
}

/// The CLI, asked by its built-in profile to continue a session it does not
/// have, fails in the words the profile's `not_found` looks for.
fn an_unknown_session_is_refused_in_the_profile_s_words(cli: &str) {
    let Some(setup) = Setup::new(cli) else { return };
    let bin = agent_clis().expect("the CLIs, as Setup found them");
    let config = Config::builtin();
    let profile = config.profile(cli).expect("a built-in profile");
    let request = AgentRequest {
        prompt: "Fix it.\n".to_owned(),
        cwd: setup.dir().to_path_buf(),
        resume: Some(unknown_session(cli).to_owned()),
        ..AgentRequest::default()
    };
    let command = command_line(profile, &request).expect("a command line");
    let args: Vec<&str> = command.args.iter().map(String::as_str).collect();
    let env: Vec<(String, String)> = setup
        .env()
        .iter()
        .cloned()
        .chain(profile.env.clone())
        .collect();
    let run = baton_test_support::run_bounded_input(
        &bin.join(&command.program),
        &command.cwd,
        &args,
        &env,
        command.stdin.as_deref(),
        LIMIT,
    );
    assert_ne!(run.code, 0, "{cli}: {args:?}\n{}", run.stderr);
    let rule = profile.resumes().expect("a resume rule");
    assert!(
        rule.not_found
            .iter()
            .any(|words| run.stderr.contains(words)),
        "{cli}: none of {:?} in its stderr:\n{}",
        rule.not_found,
        run.stderr
    );
}

/// The session to continue is one the CLI does not have: its own error
/// says so, and the correction runs once more in a fresh session with the
/// full prompt.
fn an_unknown_session_falls_back_to_a_fresh_one(cli: &str) {
    let Some(setup) = Setup::new(cli) else { return };
    // The rule asks for a session this CLI never had instead of the one
    // its first attempt reported.
    let flag = if cli == "codex" { "resume" } else { "--resume" };
    setup.settings(&format!(
        "[profiles.{cli}.resume]\nargs = [\"{flag}\", \"{}\"]\n",
        unknown_session(cli)
    ));
    setup.server.write_wrong_first("/outputs/report.json");
    let (run, status) = setup.run(&checked_stage());
    assert_eq!(run.code, 0, "{cli}: {}\n{status}", run.stderr);
    report_is_corrected(cli, &status);
    let note = "report[c1:correct-outputs]: continues the agent's session ";
    let session = run
        .stderr
        .split_once(note)
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("{cli}: {}", run.stderr));
    assert!(
        run.stderr.contains(&format!(
            "report[c1:correct-outputs]: {cli} has no session {session} ("
        )) && run
            .stderr
            .contains("a fresh session starts with the full prompt"),
        "{cli}: {}",
        run.stderr
    );
    assert_eq!(
        run.stderr.matches("a fresh session starts").count(),
        1,
        "{cli}: falls back once"
    );
    assert!(status["stages"][0]["sessions_continued"].is_null(), "{cli}");
    let prompt = correction_prompt(&status);
    assert!(
        prompt.contains("## The producing stage's task"),
        "{cli}: {prompt}"
    );
    // The refused try's logs are kept beside the fresh session's.
    let logs = workspace(&status).join("logs/000-report-c1-correct-outputs");
    assert!(logs.join("1.resumed.stderr").is_file(), "{cli}");
    assert!(logs.join("1.stdout").is_file(), "{cli}");
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
    a_correction_continues_the_agents_session,
    an_unknown_session_is_refused_in_the_profile_s_words,
);

/// The fallback end to end with the CLIs that start fastest; the others'
/// words for an unknown session are checked above, and the fallback is the
/// same code for every CLI.
mod fallback {
    #[test]
    fn claude() {
        super::an_unknown_session_falls_back_to_a_fresh_one("claude");
    }

    #[test]
    fn codex() {
        super::an_unknown_session_falls_back_to_a_fresh_one("codex");
    }
}
