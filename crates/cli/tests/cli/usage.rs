//! Tokens and cost read from agent output and shown by `baton status`, and
//! `openai-chat` profiles end to end against a stand-in server.

use std::path::Path;
use std::time::{Duration, Instant};

use baton_test_support::openai::{FakeOpenAi, Reply};
use serde_json::{Value, json};

use crate::project::{HEADER, Project, run_id};

fn fake_agent() -> String {
    Path::new(env!("CARGO_BIN_EXE_baton"))
        .with_file_name("baton-fake-agent")
        .display()
        .to_string()
}

/// An agent stage for `role` running the fake agent's directives.
fn agent_stage(name: &str, role: &str, directives: &[&str]) -> String {
    let lines: String = directives
        .iter()
        .map(|directive| format!("      FAKE-AGENT: {directive}\n"))
        .collect();
    format!(
        "  - name: {name}\n    kind: gather\n    description: |\n{lines}    agent: {{role: {role}}}\n    required: false\n    writes_to: [{name}.json]\n"
    )
}

fn stage<'s>(status: &'s Value, name: &str) -> &'s Value {
    status["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .find(|stage| stage["stage"] == name)
        .expect("stage")
}

fn close(actual: &Value, expected: f64) -> bool {
    actual
        .as_f64()
        .is_some_and(|cost| (cost - expected).abs() < 1e-9)
}

#[test]
fn status_shows_tokens_and_cost_of_each_cli_shape() {
    let project = Project::new();
    let fake = fake_agent();
    // Each profile keeps the built-in CLI's output rules and runs the fake
    // agent instead, which prints that CLI's final result.
    let mut toml = String::from(
        "[pricing]\n\"gpt-5.2-codex\" = { input = 1.25, cached_input = 0.125, output = 10.0 }\n\n",
    );
    for cli in ["claude", "codex", "gemini", "opencode"] {
        toml.push_str(&format!(
            "[agents.{cli}-role]\nprofile = \"fake-{cli}\"\n{}\n[profiles.fake-{cli}]\nextends = \"{cli}\"\nprogram = \"{fake}\"\nargs = []\n\n",
            if cli == "codex" { "model = \"gpt-5.2-codex\"\n" } else { "" }
        ));
    }
    project.write("baton.toml", &toml);
    let mut workflow = HEADER.to_owned();
    for cli in ["claude", "codex", "gemini", "opencode"] {
        workflow.push_str(&agent_stage(
            cli,
            &format!("{cli}-role"),
            &[&format!("print-json {cli}"), "write-listed"],
        ));
    }
    workflow.push_str(&agent_stage(
        "garbled",
        "claude-role",
        &["stdout {\"type\":\"result\",\"usage\":", "write-listed"],
    ));
    project.write("wf.yaml", &workflow);
    let run = project.baton(&["run", "wf.yaml", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let id = run_id(&run);
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "success", "{status:#}");

    let claude = stage(&status, "claude");
    assert!(close(&claude["cost_usd"], 0.0123), "{claude:#}");
    assert_eq!(
        claude["tokens"],
        json!({"input": 1200, "output": 80, "cache_read": 4000, "cache_write": 300})
    );
    // Codex reports no dollars: priced from [pricing] for the role's model.
    let codex = stage(&status, "codex");
    assert!(close(&codex["cost_usd"], 0.0028), "{codex:#}");
    assert_eq!(
        codex["tokens"],
        json!({"input": 1200, "output": 80, "cache_read": 4000, "cache_write": 0})
    );
    // Gemini reports no dollars and has no price: tokens only.
    let gemini = stage(&status, "gemini");
    assert_eq!(gemini["cost_usd"], Value::Null, "{gemini:#}");
    assert_eq!(gemini["tokens"]["input"], 1200);
    assert_eq!(gemini["tokens"]["cache_read"], 4000);
    let opencode = stage(&status, "opencode");
    assert!(close(&opencode["cost_usd"], 0.0042), "{opencode:#}");
    assert_eq!(opencode["tokens"]["output"], 80);
    // Output that does not parse records nothing and fails nothing.
    let garbled = stage(&status, "garbled");
    assert_eq!(garbled["status"], "success");
    assert_eq!(
        (&garbled["cost_usd"], &garbled["tokens"]),
        (&Value::Null, &Value::Null)
    );

    assert!(close(&status["cost_usd"], 0.0193), "{status:#}");
    assert_eq!(
        status["tokens"],
        json!({"input": 4800, "output": 320, "cache_read": 16000, "cache_write": 300})
    );
    let table = project.baton(&["status", &id]);
    assert!(table.stdout.contains("$0.0123"), "{}", table.stdout);
    assert!(
        table
            .stdout
            .contains("total cost: $0.0193; tokens: 4800 in, 320 out"),
        "{}",
        table.stdout
    );
}

/// A profile `name` of kind openai-chat pointing at `base_url`, for role
/// `name`.
fn endpoint_profile(name: &str, base_url: &str, wall: &str) -> String {
    format!(
        "[agents.{name}]\nprofile = \"{name}\"\n\n[profiles.{name}]\nextends = \"local-llm\"\nbase_url = \"{base_url}\"\nmodel = \"fake-model\"\nlimits = {{ wall = \"{wall}\" }}\n\n"
    )
}

fn endpoint_stage(name: &str) -> String {
    format!(
        "  - name: {name}\n    kind: gather\n    description: Summarise the repository.\n    agent: {{role: {name}}}\n    required: false\n    writes_to: [{name}.json]\n"
    )
}

#[test]
fn openai_chat_profiles_write_declared_files_and_refuse_the_rest() {
    let project = Project::new();
    let good = FakeOpenAi::start(Reply::Files(vec![(
        "outputs/good.json".to_owned(),
        "{\"answer\": 42}".to_owned(),
    )]));
    let failing = FakeOpenAi::start(Reply::Error(503, "model not loaded".to_owned()));
    let garbage = FakeOpenAi::start(Reply::Garbage);
    let climbing = FakeOpenAi::start(Reply::Files(vec![
        ("outputs/climbing.json".to_owned(), "{}".to_owned()),
        ("../../escape.txt".to_owned(), "x".to_owned()),
    ]));
    let absolute = FakeOpenAi::start(Reply::Files(vec![(
        "/tmp/baton-endpoint-escape.txt".to_owned(),
        "x".to_owned(),
    )]));
    let undeclared = FakeOpenAi::start(Reply::Files(vec![(
        "outputs/other.json".to_owned(),
        "{}".to_owned(),
    )]));
    let slow = FakeOpenAi::start(Reply::Slow(Duration::from_secs(30)));
    let servers = [
        ("good", &good),
        ("failing", &failing),
        ("garbage", &garbage),
        ("climbing", &climbing),
        ("absolute", &absolute),
        ("undeclared", &undeclared),
        ("slow", &slow),
    ];
    let mut toml = String::new();
    let mut workflow = HEADER.to_owned();
    for (name, server) in &servers {
        let wall = if *name == "slow" { "1s" } else { "20s" };
        toml.push_str(&endpoint_profile(name, &server.base_url, wall));
        workflow.push_str(&endpoint_stage(name));
    }
    project.write("baton.toml", &toml);
    project.write("wf.yaml", &workflow);
    let start = Instant::now();
    let run = project.baton(&["run", "wf.yaml", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        start.elapsed() < Duration::from_secs(25),
        "the slow server was abandoned after its 1 s limit"
    );
    let status = project.json(&["status", &run_id(&run), "--json"]);
    let error = |name: &str| {
        stage(&status, name)["error"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };

    let ok = stage(&status, "good");
    assert_eq!(ok["status"], "success", "{ok:#}");
    assert_eq!(
        ok["tokens"],
        json!({"input": 55, "output": 7, "cache_read": 0, "cache_write": 0})
    );
    let workspace = Path::new(status["workspace"].as_str().expect("workspace"));
    assert_eq!(
        std::fs::read_to_string(workspace.join("outputs/good.json")).unwrap(),
        "{\"answer\": 42}"
    );
    // The request carried the rendered prompt and asked for the schema.
    let request: Value = serde_json::from_str(&good.requests()[0]).unwrap();
    assert_eq!(request["model"], "fake-model");
    assert_eq!(request["response_format"]["type"], "json_schema");
    assert!(
        request["messages"][1]["content"]
            .as_str()
            .unwrap()
            .contains("Summarise the repository.")
    );

    assert!(
        error("failing").contains("HTTP 503: model not loaded"),
        "{}",
        error("failing")
    );
    assert!(
        error("garbage").contains("not the requested JSON"),
        "{}",
        error("garbage")
    );
    assert!(
        error("climbing").contains("../../escape.txt"),
        "{}",
        error("climbing")
    );
    assert!(
        !workspace.join("outputs/climbing.json").exists(),
        "nothing is written when one path is refused"
    );
    assert!(!workspace.join("../escape.txt").exists());
    assert!(
        error("absolute").contains("/tmp/baton-endpoint-escape.txt"),
        "{}",
        error("absolute")
    );
    assert!(!Path::new("/tmp/baton-endpoint-escape.txt").exists());
    assert!(
        error("undeclared").contains("outputs/other.json")
            && error("undeclared").contains("declared outputs"),
        "{}",
        error("undeclared")
    );
    assert!(error("slow").contains("timed out"), "{}", error("slow"));
}

#[test]
fn agents_check_asks_an_endpoint_for_its_models() {
    let project = Project::new();
    let server = FakeOpenAi::start(Reply::Garbage);
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_url = format!("http://127.0.0.1:{}/v1", dead.local_addr().unwrap().port());
    drop(dead);
    project.write(
        "baton.toml",
        &format!(
            "{}{}",
            endpoint_profile("up", &server.base_url, "5s"),
            endpoint_profile("down", &dead_url, "5s")
        ),
    );
    let checked = project.json(&["agents", "check", "--json"]);
    let row = |name: &str| {
        checked
            .as_array()
            .expect("rows")
            .iter()
            .find(|row| row["profile"] == name)
            .expect("profile")
            .clone()
    };
    let up = row("up");
    assert_eq!(up["available"], true, "{up:#}");
    assert!(
        up["detail"].as_str().unwrap().contains("fake-model"),
        "{up:#}"
    );
    let down = row("down");
    assert_eq!(down["available"], false, "{down:#}");
    assert!(
        down["detail"].as_str().unwrap().contains("cannot reach"),
        "{down:#}"
    );
}

#[test]
fn agents_check_fails_when_a_mapped_role_cannot_run() {
    let project = Project::new();
    project.write(
        "baton.toml",
        "[agents.default]\nprofile = \"gone\"\n\n[profiles.gone]\nprogram = \"baton-no-such-agent-cli\"\n",
    );
    let checked = project.baton(&["agents", "check"]);
    assert_eq!(checked.code, 3, "{}", checked.stdout);
    assert!(
        checked.stderr.contains("[agents.default] uses `gone`"),
        "{}",
        checked.stderr
    );
    project.write(
        "baton.toml",
        "[profiles.gone]\nprogram = \"baton-no-such-agent-cli\"\n",
    );
    assert_eq!(
        project.baton(&["agents", "check"]).code,
        0,
        "no role uses it"
    );
}

/// A sub-run's cost counts in its parent: in the `kind: sub-workflow`
/// stage that ran it and in the parent's total, two levels down.
#[test]
fn a_sub_runs_cost_rolls_up_into_its_parent() {
    let project = Project::new();
    let fake = fake_agent();
    project.write(
        "baton.toml",
        &format!(
            "[agents.claude-role]\nprofile = \"fake-claude\"\n\n[profiles.fake-claude]\nextends = \"claude\"\nprogram = \"{fake}\"\nargs = []\n"
        ),
    );
    let sub = |name: &str, path: &str| {
        format!(
            "  - name: {name}\n    kind: sub-workflow\n    description: runs {path}\n    agent: {{role: orchestrator}}\n    sub_workflow: {path}\n"
        )
    };
    let paid = agent_stage(
        "paid",
        "claude-role",
        &["print-json claude", "write-listed"],
    );
    project.write("leaf.yaml", &format!("{HEADER}{paid}"));
    project.write(
        "mid.yaml",
        &format!("{HEADER}{paid}{}", sub("deeper", "leaf.yaml")),
    );
    project.write(
        "top.yaml",
        &format!("{HEADER}{paid}{}", sub("child", "mid.yaml")),
    );
    let run = project.baton(&["run", "top.yaml", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let id = run_id(&run);
    let status = project.json(&["status", &id, "--json"]);
    assert!(
        close(&stage(&status, "paid")["cost_usd"], 0.0123),
        "{status:#}"
    );
    // mid's own stage and leaf's, through mid.
    let child = stage(&status, "child");
    assert!(close(&child["cost_usd"], 0.0246), "{child:#}");
    assert_eq!(child["tokens"]["input"], 2400, "{child:#}");
    assert!(close(&status["cost_usd"], 0.0369), "{status:#}");
    let table = project.baton(&["status", &id]);
    assert!(
        table.stdout.contains("total cost: $0.0369"),
        "{}",
        table.stdout
    );
}
