//! `baton agents check --probe` with the real Claude Code, Codex, Gemini CLI
//! and opencode (and an `openai-chat` profile) against the fake model
//! server: every probe answers; a server that answers 401 or 500 is quoted
//! in each CLI's own words; with nothing listening, each probe fails within
//! its time limit, saying why. The repository is never written.

use std::time::Duration;

use baton_test_support::model_server::{Mode, ModelServer};
use serde_json::Value;

use crate::real_agents::Setup;

/// Every CLI mapped to a role (Gemini with a model, so it does not ask a
/// router first), and a local `openai-chat` endpoint on the same server.
fn map_every_profile(setup: &Setup) {
    std::fs::write(
        setup.dir().join("baton.toml"),
        format!(
            "[agents.default]\nprofile = \"claude\"\n\n[agents.reviewer]\nprofile = \"codex\"\n\n[agents.researcher]\nprofile = \"gemini\"\nmodel = \"test-model\"\n\n[agents.writer]\nprofile = \"opencode\"\n\n[agents.summariser]\nprofile = \"local\"\n\n[profiles.local]\nextends = \"local-llm\"\nbase_url = \"{}/v1\"\nmodel = \"test-model\"\n",
            setup.server.base_url()
        ),
    )
    .expect("write baton.toml");
}

/// Runs the probe; returns its exit code, the JSON, and stderr.
fn probe(setup: &Setup, timeout: &str) -> (i32, Vec<Value>, String) {
    let run = setup.baton(&[
        "agents",
        "check",
        "--probe",
        "--timeout",
        timeout,
        "--format",
        "json",
    ]);
    let rows: Vec<Value> = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}\n{}", run.stdout, run.stderr));
    (run.code, rows, run.stderr)
}

/// The one probe of `profile`.
fn probe_of<'a>(rows: &'a [Value], profile: &str) -> &'a Value {
    let row = rows
        .iter()
        .find(|row| row["profile"] == profile)
        .unwrap_or_else(|| panic!("no row for {profile}"));
    let probes = row["probe"].as_array().expect("probed");
    assert_eq!(probes.len(), 1, "{row:#}");
    &probes[0]
}

const PROBED: [&str; 5] = ["claude", "codex", "gemini", "opencode", "local"];

/// Nothing of the probe is left in the project, `.git/` included (where
/// opencode records its project's id when it may).
fn repository_untouched(setup: &Setup) {
    assert_eq!(setup.git(&["status", "--porcelain", "--ignored"]), "");
    assert!(!setup.dir().join(".baton").exists());
    assert!(!setup.dir().join(".git/opencode").exists());
}

#[test]
fn every_mapped_profile_answers() {
    let Some(setup) = Setup::new("claude") else {
        return;
    };
    map_every_profile(&setup);
    setup.git(&["commit", "-qam", "every profile mapped"]);
    let (code, rows, stderr) = probe(&setup, "120s");
    assert_eq!(code, 0, "{stderr}\n{rows:#?}");
    for profile in PROBED {
        let probe = probe_of(&rows, profile);
        assert_eq!(probe["ok"], true, "{profile}: {probe:#}");
        assert!(probe["error"].is_null(), "{profile}: {probe:#}");
        assert!(
            probe["latency_ms"].as_u64().is_some(),
            "{profile}: {probe:#}"
        );
        // The fake model reports 56 output tokens for every answer.
        assert_eq!(probe["tokens"]["output"], 56, "{profile}: {probe:#}");
        assert!(probe["tokens"]["input"].as_u64() > Some(0), "{profile}");
    }
    assert_eq!(probe_of(&rows, "gemini")["model"], "test-model");
    assert_eq!(probe_of(&rows, "codex")["roles"][0], "reviewer");
    let prompts = setup.server.user_prompts();
    assert!(
        prompts
            .iter()
            .any(|prompt| prompt.contains("Reply with the single word OK.")),
        "{prompts:?}"
    );
    repository_untouched(&setup);
    assert_eq!(probe_of(&rows, "claude")["contained"], true);

    // The table says the same, one row per probe.
    let text = setup.baton(&["agents", "check", "--probe", "claude", "--timeout", "120s"]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    let row = text
        .stdout
        .lines()
        .find(|line| line.starts_with("claude ") && line.contains(" ok "))
        .unwrap_or_else(|| panic!("{}", text.stdout));
    assert!(
        row.contains("default") && row.contains("in, 56 out"),
        "{row}"
    );
    repository_untouched(&setup);
}

/// The server answers `status` to every model call: every probe fails
/// quoting its CLI's own message, and the command exits 3.
fn server_errors_are_quoted(status: u16) {
    let Some(setup) = Setup::new("claude") else {
        return;
    };
    map_every_profile(&setup);
    setup.git(&["commit", "-qam", "every profile mapped"]);
    setup.server.set_mode(Mode::Status(status));
    let (code, rows, stderr) = probe(&setup, "120s");
    assert_eq!(code, 3, "{stderr}\n{rows:#?}");
    for profile in PROBED {
        let probe = probe_of(&rows, profile);
        assert_eq!(probe["ok"], false, "{profile}: {probe:#}");
        let error = probe["error"].as_str().unwrap_or_default();
        let quoted = if profile == "local" {
            error.starts_with(&format!("the endpoint answered HTTP {status}: "))
        } else {
            // The CLI's own words, not only an exit code.
            error.starts_with("the agent reported: ")
                && !error.starts_with("the agent reported: (exited")
        };
        assert!(quoted, "{profile}: {error}");
        if status == 401 {
            assert!(error.contains("401"), "{profile}: {error}");
        }
        assert!(
            stderr.contains(&format!("`{profile}`")),
            "{profile} is named: {stderr}"
        );
    }
    repository_untouched(&setup);
}

#[test]
fn a_rejected_key_is_quoted() {
    server_errors_are_quoted(401);
}

#[test]
fn a_server_error_is_quoted() {
    server_errors_are_quoted(500);
}

#[test]
fn nothing_listening_fails_within_the_timeout() {
    let Some(mut setup) = Setup::new("claude") else {
        return;
    };
    map_every_profile(&setup);
    setup.git(&["commit", "-qam", "every profile mapped"]);
    // The CLIs stay pointed at the first server's port, where nothing
    // listens once it is gone.
    setup.server = ModelServer::start();
    let limit = Duration::from_secs(20);
    let (code, rows, stderr) = probe(&setup, "20s");
    assert_eq!(code, 3, "{stderr}\n{rows:#?}");
    for profile in PROBED {
        let probe = probe_of(&rows, profile);
        assert_eq!(probe["ok"], false, "{profile}: {probe:#}");
        let error = probe["error"].as_str().unwrap_or_default();
        assert!(!error.is_empty(), "{profile}: {probe:#}");
        // Within the limit, plus the grace a killed CLI gets and a margin.
        let took = Duration::from_millis(probe["latency_ms"].as_u64().expect("it ran"));
        assert!(
            took < limit + Duration::from_secs(10),
            "{profile} took {took:?}: {error}"
        );
        if took >= limit {
            assert!(
                error.starts_with("no answer within 20s"),
                "{profile}: {error}"
            );
        }
    }
    // What a CLI that gives up on its own says (unless a busy machine kept
    // it from giving up within the limit).
    let claude = probe_of(&rows, "claude")["error"]
        .as_str()
        .unwrap_or_default();
    assert!(
        claude.contains("Unable to connect") || claude.starts_with("no answer within 20s"),
        "{claude}"
    );
    let local = probe_of(&rows, "local")["error"]
        .as_str()
        .unwrap_or_default();
    assert!(local.starts_with("cannot reach "), "{local}");
    assert!(
        setup.server.requests().is_empty(),
        "the new server was not asked"
    );
    repository_untouched(&setup);
}

/// The stand-in agent under three profiles that keep Claude Code's output
/// rules: one answers, one reports a rejected key, one never answers; and
/// two `openai-chat` endpoints, one answering, one refusing the key. These
/// run without the real CLIs.
#[test]
fn a_stand_in_agent_answers_fails_or_hangs() {
    use baton_test_support::openai::{FakeOpenAi, Reply};
    let project = crate::project::Project::new();
    let answering = FakeOpenAi::start(Reply::Files(Vec::new()));
    let refusing = FakeOpenAi::start(Reply::Error(401, "invalid api key".to_owned()));
    let endpoint = |name: &str, base_url: &str| {
        format!("[profiles.{name}]\nextends = \"local-llm\"\nbase_url = \"{base_url}\"\n\n")
    };
    let fake = std::path::Path::new(env!("CARGO_BIN_EXE_baton"))
        .with_file_name("baton-fake-agent")
        .display()
        .to_string();
    let profile = |name: &str, directives: &str| {
        format!(
            "[profiles.{name}]\nextends = \"claude\"\nprogram = \"{fake}\"\nargs = []\nenv = {{ BATON_FAKE_AGENT = '''{directives}''' }}\n\n"
        )
    };
    project.write(
        "baton.toml",
        &format!(
            "[agents.default]\nprofile = \"fine\"\n\n[agents.reviewer]\nprofile = \"rejected\"\n\n[agents.researcher]\nprofile = \"hung\"\n\n[agents.summariser]\nprofile = \"answering\"\nmodel = \"small\"\n\n[agents.writer]\nprofile = \"refusing\"\n\n{}{}{}{}{}",
            profile("fine", "print-json claude"),
            profile(
                "rejected",
                "stdout {\"type\":\"result\",\"is_error\":true,\"result\":\"API Error: 401 invalid x-api-key\"}\nexit 1"
            ),
            profile("hung", "stdout {\"type\":\"system\"}\nhang"),
            endpoint("answering", &answering.base_url),
            endpoint("refusing", &refusing.base_url),
        ),
    );
    let started = std::time::Instant::now();
    let run = project.baton(&["agents", "check", "--probe", "--timeout", "5s", "--json"]);
    assert_eq!(run.code, 3, "{}\n{}", run.stdout, run.stderr);
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    let rows: Vec<Value> = serde_json::from_str(&run.stdout).expect("JSON");
    let fine = probe_of(&rows, "fine");
    assert_eq!(fine["ok"], true, "{fine:#}");
    assert_eq!(fine["roles"][0], "default");
    assert!(fine["tokens"]["input"].as_u64() > Some(0), "{fine:#}");
    let rejected = probe_of(&rows, "rejected");
    assert_eq!(
        rejected["error"],
        "the agent reported: API Error: 401 invalid x-api-key (exited with code 1)"
    );
    let hung = probe_of(&rows, "hung");
    assert_eq!(hung["ok"], false);
    let error = hung["error"].as_str().unwrap_or_default();
    assert!(error.starts_with("no answer within 5s"), "{error}");
    assert!(hung["latency_ms"].as_u64() < Some(15_000), "{hung:#}");
    let answered = probe_of(&rows, "answering");
    assert_eq!(answered["ok"], true, "{answered:#}");
    assert_eq!(answered["model"], "small");
    assert_eq!(answered["tokens"]["input"], 55);
    assert_eq!(answered["tokens"]["output"], 7);
    let asked = answering.requests().join("\n");
    assert!(
        asked.contains("Reply with the single word OK.") && asked.contains("\"small\""),
        "{asked}"
    );
    assert_eq!(
        probe_of(&rows, "refusing")["error"],
        "the endpoint answered HTTP 401: invalid api key"
    );
    assert!(
        run.stderr
            .contains("the probe of `hung`, `refusing`, `rejected` failed"),
        "{}",
        run.stderr
    );
    // Only what is named is listed and probed.
    let named = project.baton(&["agents", "check", "--probe", "fine", "--json"]);
    assert_eq!(named.code, 0, "{}", named.stderr);
    let rows: Vec<Value> = serde_json::from_str(&named.stdout).expect("JSON");
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(probe_of(&rows, "fine")["ok"], true);
    // Without --probe there is no probe.
    let plain = project.baton(&["agents", "check", "fine", "--json"]);
    let rows: Vec<Value> = serde_json::from_str(&plain.stdout).expect("JSON");
    assert!(rows[0]["probe"].is_null(), "{rows:#?}");
}
