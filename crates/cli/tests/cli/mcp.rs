//! baton as an MCP server, as its clients meet it: `baton mcp` spoken to
//! over stdio as an agent CLI speaks to it (JSON-RPC lines: `initialize`,
//! `notifications/initialized`, `tools/list`, `tools/call`), `/mcp` of a
//! real `baton serve` over HTTP, and the real Claude Code calling a tool
//! from inside a stage, told to by the fake model.
//!
//! Every answer is checked against what the CLI prints or what the store
//! recorded: the tools' JSON against `baton runs|status|gate list
//! --format json`, their records against `baton state show`.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use serde_json::{Value, json};

use crate::serving::{HEADER, Server, cli_json, gate_workflow, project, token};

/// The longest one answer may take (two busy cores, a debug build).
const ANSWER: Duration = Duration::from_secs(60);

/// Every tool, sorted.
const TOOLS: [&str; 9] = [
    "decide_gate",
    "findings",
    "governance_state",
    "list_gates",
    "list_runs",
    "record_evidence",
    "report_progress",
    "run_status",
    "stage_contract",
];

/// A `baton mcp` process and the JSON-RPC session with it.
struct Session {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    next: u64,
}

impl Session {
    /// Starts `baton mcp` in `dir` with `env` (and none of the stage and
    /// token variables it was not given), and initializes the session.
    fn start(dir: &Path, env: &[(&str, &str)]) -> Session {
        #[expect(
            clippy::disallowed_methods,
            reason = "the server answers while the test asks"
        )]
        let mut command = Command::new(env!("CARGO_BIN_EXE_baton"));
        command
            .arg("mcp")
            .current_dir(dir)
            .env_remove("BATON_RUN_ID")
            .env_remove("BATON_STAGE")
            .env_remove("BATON_TOKEN")
            .env_remove("BATON_PROJECT_DIR")
            .env_remove("BATON_PROJECT")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("baton mcp starts");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (send, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let mut session = Session {
            child,
            stdin,
            lines,
            next: 0,
        };
        let init = session.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}),
        );
        assert_eq!(init["result"]["serverInfo"]["name"], "baton", "{init}");
        assert!(
            init["result"]["capabilities"]["tools"].is_object(),
            "{init}"
        );
        session.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        session
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").expect("write to baton mcp");
        self.stdin.flush().expect("flush");
    }

    /// Sends a request and waits for the answer with its id.
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let line = self
                .lines
                .recv_timeout(ANSWER)
                .unwrap_or_else(|error| panic!("no answer to {method}: {error}"));
            let message: Value = serde_json::from_str(&line)
                .unwrap_or_else(|error| panic!("not JSON ({error}): {line}"));
            if message["id"] == id {
                return message;
            }
        }
    }

    fn tool_names(&mut self) -> Vec<String> {
        let listed = self.request("tools/list", json!({}));
        tool_names(&listed)
    }

    /// Calls `tool`: whether it failed, and its text.
    fn call(&mut self, tool: &str, arguments: Value) -> (bool, String) {
        let answer = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        outcome(&answer)
    }

    /// Calls `tool`, which must succeed with JSON.
    fn json(&mut self, tool: &str, arguments: Value) -> Value {
        let (failed, text) = self.call(tool, arguments);
        assert!(!failed, "{tool} failed: {text}");
        serde_json::from_str(&text).unwrap_or_else(|error| panic!("{tool}: {error}: {text}"))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tool_names(listed: &Value) -> Vec<String> {
    let mut names: Vec<String> = listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {listed}"))
        .iter()
        .map(|tool| tool["name"].as_str().expect("a name").to_owned())
        .collect();
    names.sort();
    names
}

/// A `tools/call` answer: whether the tool failed, and its text.
fn outcome(answer: &Value) -> (bool, String) {
    let result = &answer["result"];
    assert!(result.is_object(), "not a tool result: {answer}");
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text: {answer}"))
        .to_owned();
    (result["isError"] == true, text)
}

/// A run of the gate workflow, waiting at its gate; its id.
fn gated_run(dir: &Path) -> String {
    let outcome = cli_json(dir, &["run", "wf.yaml", "--json"]);
    assert_eq!(outcome["status"], "awaiting_human", "{outcome}");
    outcome["run_id"].as_str().expect("run_id").to_owned()
}

/// The run's ledger events as `baton state show` prints them.
fn ledger(dir: &Path, run: &str) -> Vec<Value> {
    cli_json(dir, &["state", "show", "--run", run, "--format", "json"])["events"]
        .as_array()
        .expect("events")
        .clone()
}

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|event| event["kind"] == kind)
        .collect()
}

#[test]
fn a_person_s_tools_over_stdio_answer_as_the_cli_prints_and_deciding_needs_a_token() {
    let dir = project(&gate_workflow());
    let run = gated_run(dir.path());
    let alice = token(dir.path(), "alice");

    let mut session = Session::start(dir.path(), &[]);
    assert_eq!(session.tool_names(), TOOLS);
    assert_eq!(
        session.json("list_runs", json!({})),
        cli_json(dir.path(), &["runs", "--format", "json"])
    );
    assert_eq!(
        session.json("run_status", json!({"run": run})),
        cli_json(dir.path(), &["status", &run, "--format", "json"])
    );
    let gates = session.json("list_gates", json!({"run": run}));
    assert_eq!(
        gates,
        cli_json(dir.path(), &["gate", "list", &run, "--format", "json"])
    );
    assert_eq!(gates[0]["stage"], "review", "{gates}");
    assert_eq!(gates[0]["decision"], Value::Null, "{gates}");
    assert_eq!(session.json("findings", json!({"run": run})), json!([]));
    let (failed, text) = session.call("run_status", json!({"run": "no-such-run"}));
    assert!(failed && text.contains("no-such-run"), "{text}");

    // No token: the gate stays undecided.
    let decide = json!({"run": run, "stage": "review", "decision": "approve"});
    let (failed, text) = session.call("decide_gate", decide.clone());
    assert!(failed && text.contains("BATON_TOKEN"), "{text}");
    drop(session);
    let mut forged = Session::start(dir.path(), &[("BATON_TOKEN", "baton_00")]);
    let (failed, text) = forged.call("decide_gate", decide.clone());
    assert!(failed && text.contains("not a valid token"), "{text}");
    drop(forged);
    let listed = cli_json(dir.path(), &["gate", "list", &run, "--format", "json"]);
    assert_eq!(listed[0]["decision"], Value::Null, "{listed}");

    // Alice's token: her name is the decider's.
    let mut person = Session::start(dir.path(), &[("BATON_TOKEN", &alice)]);
    let decided = person.json(
        "decide_gate",
        json!({"run": run, "stage": "review", "decision": "approve", "comment": "fine"}),
    );
    assert_eq!(decided["decided_by"], "alice", "{decided}");
    assert_eq!(decided["decision"], "approve", "{decided}");
    let listed = cli_json(dir.path(), &["gate", "list", &run, "--format", "json"]);
    assert_eq!(listed[0]["decided_by"], "alice", "{listed}");
    assert_eq!(listed[0]["comment"], "fine", "{listed}");
    let (failed, text) = person.call("decide_gate", decide);
    assert!(failed && text.contains("alice"), "decided once: {text}");
}

#[test]
fn findings_are_the_validators_as_recorded() {
    let dir = project("");
    let fake = Path::new(env!("CARGO_BIN_EXE_baton")).with_file_name("baton-fake-agent");
    std::fs::write(
        dir.path().join("baton.toml"),
        format!(
            "[agents.validator]\nprofile = \"validator\"\n\n[profiles.validator]\nprogram = \"{}\"\nprompt = {{ via = \"stdin\" }}\nenv_passthrough = [\"PATH\", \"HOME\"]\nenv = {{ BATON_FAKE_AGENT = \"findings minor\" }}\n",
            fake.display()
        ),
    )
    .expect("write baton.toml");
    std::fs::write(
        dir.path().join("wf.yaml"),
        format!(
            "{HEADER}  - name: draft\n    kind: execute\n    description: d\n    executor: inline\n    script: |\n      printf '[{{\"id\": \"a\"}}]' > outputs/draft.json\n    writes_to: [draft.json]\n    validation: {{strategy: cross_unit}}\n  - name: other\n    kind: execute\n    description: d\n    executor: inline\n    script: 'true'\n"
        ),
    )
    .expect("write the workflow");
    let outcome = cli_json(dir.path(), &["run", "wf.yaml", "--json"]);
    let run = outcome["run_id"].as_str().expect("run_id");
    let workspace = cli_json(dir.path(), &["status", run, "--format", "json"])["workspace"]
        .as_str()
        .expect("workspace")
        .to_owned();
    let written: Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(&workspace).join("validation/draft-findings.json"))
            .expect("the validator's findings"),
    )
    .expect("JSON");
    let written = written.as_array().expect("a list");
    assert!(!written.is_empty());

    let mut session = Session::start(dir.path(), &[]);
    let found = session.json("findings", json!({"run": run}));
    let found = found.as_array().expect("a list");
    assert_eq!(found.len(), written.len(), "{found:?}\n{written:?}");
    for (finding, recorded) in found.iter().zip(written) {
        assert_eq!(finding["stage"], "draft", "{finding}");
        assert_eq!(finding["severity"], recorded["severity"], "{finding}");
        assert_eq!(finding["claim"], recorded["claim"], "{finding}");
    }
    assert_eq!(
        session.json("findings", json!({"run": run, "stage": "other"})),
        json!([])
    );
    let (failed, text) = session.call("findings", json!({"run": run, "stage": "nope"}));
    assert!(failed && text.contains("nope"), "{text}");
}

#[test]
fn an_agent_in_a_stage_reads_its_contract_and_records_progress_and_evidence() {
    let dir = project(&gate_workflow());
    std::fs::write(dir.path().join("NOTES.md"), "evidence\n").expect("write");
    let run = gated_run(dir.path());
    let status = cli_json(dir.path(), &["status", &run, "--format", "json"]);
    let workspace = Path::new(status["workspace"].as_str().expect("workspace")).to_owned();
    let owner_before = cli_json(
        dir.path(),
        &["state", "summary", "--run", &run, "--format", "json"],
    )["workflow_state"]["owner"]
        .clone();

    // A secret the agent's environment holds never reaches the ledger.
    let mut agent = Session::start(
        dir.path(),
        &[
            ("BATON_RUN_ID", &run),
            ("BATON_STAGE", "review"),
            ("MY_API_KEY", "hunter2-very-secret"),
        ],
    );
    let contract = agent.json("stage_contract", json!({}));
    assert_eq!(contract["run_id"], run.as_str(), "{contract}");
    assert_eq!(contract["stage"], "review", "{contract}");
    assert_eq!(
        contract["files_to_write"],
        json!([workspace.join("outputs/plan.json")]),
        "{contract}"
    );
    assert_eq!(
        contract["prompt_path"],
        json!(workspace.join("dispatch/000-review.prompt.md")),
        "{contract}"
    );

    let recorded = agent.json(
        "report_progress",
        json!({"message": "half way there, key hunter2-very-secret"}),
    );
    assert_eq!(recorded["recorded"], true, "{recorded}");
    let (failed, text) = agent.call("report_progress", json!({"message": "x".repeat(20_000)}));
    assert!(failed && text.contains("at most"), "{text}");
    agent.json(
        "record_evidence",
        json!({"kind": "command", "command": "cargo test", "exit_code": 0, "note": "12 passed"}),
    );
    let file = agent.json(
        "record_evidence",
        json!({"kind": "file", "path": "NOTES.md"}),
    );
    assert_eq!(
        file["payload"]["path"],
        json!(
            dir.path()
                .join("NOTES.md")
                .canonicalize()
                .expect("real path")
        ),
        "{file}"
    );
    for (path, why) in [
        ("/etc/hostname", "outside"),
        ("../x", "`..`"),
        ("gone.md", "no file"),
    ] {
        let (failed, text) = agent.call("record_evidence", json!({"kind": "file", "path": path}));
        assert!(failed && text.contains(why), "{path}: {text}");
    }

    let events = ledger(dir.path(), &run);
    let session = format!("{run}/review");
    let progress = of_kind(&events, "progress");
    assert_eq!(progress.len(), 1, "{events:?}");
    assert_eq!(
        progress[0]["payload"]["message"],
        "half way there, key [redacted]"
    );
    assert_eq!(progress[0]["payload"]["stage"], "review");
    assert_eq!(progress[0]["session"], session.as_str());
    let evidence = of_kind(&events, "evidence");
    assert_eq!(evidence.len(), 2, "{events:?}");
    assert_eq!(evidence[0]["payload"]["command"], "cargo test");
    assert_eq!(evidence[0]["payload"]["exit_code"], 0);
    assert_eq!(
        evidence[1]["payload"]["sha256"].as_str().map(str::len),
        Some(64)
    );
    // Notes of an agent make no one the run's owner.
    assert_eq!(
        cli_json(
            dir.path(),
            &["state", "summary", "--run", &run, "--format", "json"]
        )["workflow_state"]["owner"],
        owner_before
    );

    let state = agent.json("governance_state", json!({}));
    assert_eq!(
        state["summary"]["mode_selected"]["scope_key"],
        run.as_str(),
        "{state}"
    );
    let kinds: Vec<&str> = state["stage_entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|entry| entry["kind"].as_str())
        .collect();
    // The stage's output as the engine recorded it, then the agent's notes.
    assert_eq!(
        kinds,
        ["edited", "progress", "evidence", "evidence"],
        "{state}"
    );
}

#[test]
fn an_agent_s_session_can_never_record_a_verdict_on_its_own_work() {
    let dir = project(&gate_workflow());
    let run = gated_run(dir.path());
    let before = ledger(dir.path(), &run);
    let mut agent = Session::start(
        dir.path(),
        &[("BATON_RUN_ID", &run), ("BATON_STAGE", "review")],
    );
    let own = [
        json!({"kind": "review", "stage": "review", "findings": ["looks right"]}),
        json!({"kind": "validation", "stage": "review", "command": "true", "exit_code": 0}),
    ];
    for arguments in own {
        let (failed, text) = agent.call("record_evidence", arguments.clone());
        assert!(failed, "{arguments}: {text}");
        assert!(
            text.contains("cannot record a") && text.contains("of its own stage's work"),
            "{text}"
        );
    }
    // Both stages are scripts: one identity made both.
    let (failed, text) = agent.call(
        "record_evidence",
        json!({"kind": "review", "stage": "after", "findings": []}),
    );
    assert!(failed && text.contains("same identity"), "{text}");
    assert_eq!(ledger(dir.path(), &run), before, "nothing was recorded");
    drop(agent);

    // Started in a worktree with a `baton.toml` of its own, the agent's
    // server still finds its run's project, as baton named it.
    let worktree = dir.path().join("elsewhere");
    std::fs::create_dir_all(&worktree).expect("mkdir");
    std::fs::write(worktree.join("baton.toml"), "").expect("write");
    let project = dir.path().display().to_string();
    let mut placed = Session::start(
        &worktree,
        &[
            ("BATON_RUN_ID", &run),
            ("BATON_STAGE", "review"),
            ("BATON_PROJECT_DIR", &project),
        ],
    );
    assert_eq!(
        placed.json("stage_contract", json!({}))["run_id"],
        run.as_str()
    );
    drop(placed);
    assert!(!worktree.join(".baton").exists(), "no store of its own");

    let mut outside = Session::start(dir.path(), &[]);
    for tool in ["stage_contract", "report_progress", "record_evidence"] {
        let arguments = json!({"message": "m", "kind": "command", "command": "c", "exit_code": 0});
        let (failed, text) = outside.call(tool, arguments);
        assert!(
            failed && text.contains("not inside a stage"),
            "{tool}: {text}"
        );
    }
}

#[test]
fn an_agent_may_record_a_validation_of_another_identity_s_work() {
    let fake = Path::new(env!("CARGO_BIN_EXE_baton")).with_file_name("baton-fake-agent");
    // A critic that runs only after the gate: it never starts here, but it
    // is a stage of the run with an identity of its own.
    let workflow = format!(
        "{}  - name: critic\n    kind: execute\n    description: d\n    agent: {{role: critic}}\n    depends_on: [after]\n",
        gate_workflow()
    );
    let dir = project(&workflow);
    std::fs::write(
        dir.path().join("baton.toml"),
        format!(
            "[agents.critic]\nprofile = \"critic\"\n\n[profiles.critic]\nprogram = \"{}\"\nprompt = {{ via = \"stdin\" }}\n",
            fake.display()
        ),
    )
    .expect("write baton.toml");
    let run = gated_run(dir.path());
    let mut critic = Session::start(
        dir.path(),
        &[("BATON_RUN_ID", &run), ("BATON_STAGE", "critic")],
    );
    let recorded = critic.json(
        "record_evidence",
        json!({"kind": "validation", "stage": "review", "command": "jq . outputs/plan.json", "exit_code": 0}),
    );
    assert_eq!(recorded["kind"], "validated", "{recorded}");
    assert_eq!(
        recorded["payload"]["covered"],
        json!(["outputs/plan.json"]),
        "{recorded}"
    );
    let events = ledger(dir.path(), &run);
    let validated = of_kind(&events, "validated");
    assert_eq!(validated.len(), 1, "{events:?}");
    assert_eq!(validated[0]["profile"], "critic");
    assert_eq!(validated[0]["session"], format!("{run}/critic"));
}

/// Posts one JSON-RPC message to `/mcp`.
fn post(
    server: &Server,
    headers: &[(&str, &str)],
    message: &Value,
) -> baton_test_support::http::Response {
    let mut all = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    all.extend_from_slice(headers);
    server.post("/mcp", &all, &message.to_string())
}

fn rpc(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn http_call(
    server: &Server,
    headers: &[(&str, &str)],
    tool: &str,
    arguments: Value,
) -> (bool, String) {
    let answer = post(
        server,
        headers,
        &rpc(
            7,
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
        ),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    outcome(&answer.json())
}

#[test]
fn over_http_mcp_is_behind_the_guard_and_writes_need_a_token() {
    let dir = project(&gate_workflow());
    let run = gated_run(dir.path());
    let alice = token(dir.path(), "alice");
    let server = Server::start(dir.path());

    let init = post(
        &server,
        &[],
        &rpc(
            1,
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}),
        ),
    );
    assert_eq!(init.status, 200, "{init:?}");
    assert_eq!(
        init.json()["result"]["serverInfo"]["name"],
        "baton",
        "{init:?}"
    );
    assert_eq!(
        init.header("x-frame-options"),
        Some("DENY"),
        "the guard's headers"
    );
    let listed = post(&server, &[], &rpc(2, "tools/list", json!({})));
    assert_eq!(tool_names(&listed.json()), TOOLS);

    let (failed, text) = http_call(&server, &[], "list_runs", json!({}));
    assert!(!failed, "{text}");
    assert_eq!(
        serde_json::from_str::<Value>(&text).expect("JSON"),
        cli_json(dir.path(), &["runs", "--format", "json"])
    );
    let (failed, text) = http_call(&server, &[], "run_status", json!({"run": run}));
    assert!(!failed, "{text}");
    assert_eq!(
        serde_json::from_str::<Value>(&text).expect("JSON"),
        cli_json(dir.path(), &["status", &run, "--format", "json"])
    );

    // Refused: a write without a token, a foreign page, a forged token.
    let decide = json!({"run": run, "stage": "review", "decision": "approve"});
    let (failed, text) = http_call(&server, &[], "decide_gate", decide.clone());
    assert!(failed && text.contains("Authorization: Bearer"), "{text}");
    let stage = [("Baton-Run", run.as_str()), ("Baton-Stage", "review")];
    let (failed, text) = http_call(&server, &stage, "report_progress", json!({"message": "m"}));
    assert!(failed && text.contains("token"), "{text}");
    let bearer = format!("Bearer {alice}");
    let foreign = post(
        &server,
        &[
            ("Origin", "http://evil.example"),
            ("Authorization", &bearer),
        ],
        &rpc(
            3,
            "tools/call",
            json!({"name": "decide_gate", "arguments": decide}),
        ),
    );
    assert_eq!(foreign.status, 403, "{foreign:?}");
    let forged = post(
        &server,
        &[("Authorization", "Bearer baton_00")],
        &rpc(4, "tools/list", json!({})),
    );
    assert_eq!(forged.status, 401, "{forged:?}");
    let wrong_host = post(
        &server,
        &[("Host", "evil.example")],
        &rpc(5, "tools/list", json!({})),
    );
    assert_eq!(wrong_host.status, 403, "{wrong_host:?}");
    assert!(of_kind(&ledger(dir.path(), &run), "progress").is_empty());
    let listed = cli_json(dir.path(), &["gate", "list", &run, "--format", "json"]);
    assert_eq!(listed[0]["decision"], Value::Null, "{listed}");

    // With Alice's token.
    let mut with_token = stage.to_vec();
    with_token.push(("Authorization", &bearer));
    let (failed, text) = http_call(
        &server,
        &with_token,
        "report_progress",
        json!({"message": "over http"}),
    );
    assert!(!failed, "{text}");
    let progress = ledger(dir.path(), &run);
    let progress = of_kind(&progress, "progress");
    assert_eq!(progress.len(), 1);
    assert_eq!(progress[0]["payload"]["message"], "over http");
    let (failed, text) = http_call(
        &server,
        &with_token,
        "record_evidence",
        json!({"kind": "review", "stage": "review"}),
    );
    assert!(failed && text.contains("its own stage's work"), "{text}");
    let (failed, text) = http_call(
        &server,
        &[("Authorization", &bearer)],
        "decide_gate",
        decide,
    );
    assert!(!failed, "{text}");
    let listed = cli_json(dir.path(), &["gate", "list", &run, "--format", "json"]);
    assert_eq!(listed[0]["decided_by"], "alice", "{listed}");
}

/// The real Claude Code, as a stage's agent with baton as its MCP server,
/// told by the fake model to call `mcp__baton__report_progress`: the call
/// goes through `baton mcp`, started by Claude Code with the stage's
/// environment, into the run's ledger as the stage's own session.
#[test]
fn claude_code_reports_progress_through_baton_s_mcp_server() {
    let Some(setup) = crate::real_agents::Setup::new("claude") else {
        return;
    };
    let config = setup.dir().join(".mcp-baton.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"baton": {"type": "stdio", "command": env!("CARGO_BIN_EXE_baton"), "args": ["mcp"]}}})
            .to_string(),
    )
    .expect("write the MCP config");
    setup.settings(&format!(
        "[profiles.claude.access.read-write]\nargs = [\"--permission-mode\", \"acceptEdits\", \"--add-dir\", \"{{workspace}}\", \"--mcp-config\", \"{}\", \"--strict-mcp-config\", \"--allowedTools\", \"mcp__baton__report_progress\"]\n",
        config.display()
    ));
    let (run, status) = setup.run(&crate::real_agents::agent_stage(
        "build",
        "role: code-writer, access: read-write",
        &[r#"FAKE: call mcp__baton__report_progress {"message": "progress from claude"}"#],
        "outputs/build.md",
    ));
    assert_eq!(run.code, 0, "{}\n{status}", run.stderr);
    let id = crate::project::run_id(&run);
    let shown = setup.baton(&["state", "show", "--run", &id, "--format", "json"]);
    let shown: Value = serde_json::from_str(&shown.stdout).expect("state JSON");
    let events = shown["events"].as_array().expect("events");
    let progress = of_kind(events, "progress");
    assert_eq!(progress.len(), 1, "{shown}\n{}", setup.bodies());
    assert_eq!(progress[0]["payload"]["message"], "progress from claude");
    assert_eq!(progress[0]["payload"]["stage"], "build");
    assert_eq!(progress[0]["session"], format!("{id}/build"));
    assert_eq!(progress[0]["profile"], "claude");
    // The model saw the tool's answer.
    assert!(
        setup.bodies().contains(r#"\"recorded\": true"#),
        "no tool result reached the model"
    );
}
