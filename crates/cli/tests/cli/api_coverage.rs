//! Every CLI command a person or a script uses on recorded runs has a
//! route in `baton serve`'s API, or stands below with the reason it has
//! none. The commands are walked from `baton --help`, so a command added
//! later fails this test until it is given one or the other; each route
//! named is asked on a real server, which must answer it (not its "nothing
//! at" fallback).

use serde_json::Value;

use crate::help_examples::leaf_commands;
use crate::serving::{Server, gate_workflow, project, token};

/// Command → (method, route), `RUN`, `STAGE`, `ID` and `TASK` standing for
/// a run, a stage, a job and a task.
const ROUTED: &[(&str, &str, &str)] = &[
    ("runs", "GET", "/api/runs"),
    ("status", "GET", "/api/runs/RUN"),
    ("logs", "GET", "/api/runs/RUN/stages/STAGE/log"),
    ("verify", "GET", "/api/runs/RUN/verify"),
    ("cancel", "POST", "/api/runs/RUN/cancel"),
    ("gate list", "GET", "/api/runs/RUN/gates"),
    ("gate show", "GET", "/api/runs/RUN/gates/STAGE"),
    ("gate approve", "POST", "/api/runs/RUN/gates/STAGE/approve"),
    ("gate reject", "POST", "/api/runs/RUN/gates/STAGE/reject"),
    (
        "gate push-back",
        "POST",
        "/api/runs/RUN/gates/STAGE/push-back",
    ),
    ("gate drop", "POST", "/api/runs/RUN/gates/STAGE/items"),
    ("gate edit", "POST", "/api/runs/RUN/gates/STAGE/items"),
    ("gate add", "POST", "/api/runs/RUN/gates/STAGE/items"),
    ("state summary", "GET", "/api/runs/RUN/governance"),
    ("queue list", "GET", "/api/queue"),
    ("queue show", "GET", "/api/queue/ID"),
    ("task list", "GET", "/api/tasks"),
    ("task status", "GET", "/api/tasks/TASK"),
];

const CHECKOUT: &str = "reads or writes files of the caller's checkout (workflows, baton.toml), which the server does not hold";
const DRIVES: &str = "drives a run in the calling process, which starts the run's agents and scripts there; the server starts no process";
const PROTOCOL: &str = "the driver protocol, spoken by an orchestrator where its own agents run (complete hashes that workspace's outputs)";
const AGENT_SIDE: &str = "run by an agent's CLI or a hook inside a stage, on that machine; agents reach a running server through MCP";
const LOCAL_ADMIN: &str =
    "administers this machine's store, processes or files, which a person does where baton runs";
const LEDGER_WRITE: &str = "records governance events as the person or agent at the keyboard; through the server an agent records with the MCP tools, which keep it from judging its own work";

/// Command → why the API has no route for it.
const EXCLUDED: &[(&str, &str)] = &[
    ("parse", CHECKOUT),
    ("lint", CHECKOUT),
    ("check", CHECKOUT),
    ("compile", CHECKOUT),
    ("init", CHECKOUT),
    ("list", CHECKOUT),
    (
        "completions",
        "prints a shell's completion script; nothing of a run",
    ),
    ("run", DRIVES),
    ("resume", DRIVES),
    ("rerun", DRIVES),
    ("task run", DRIVES),
    ("next", PROTOCOL),
    ("complete", PROTOCOL),
    ("fail", PROTOCOL),
    (
        "agents check",
        "asks the agent CLIs installed where baton runs, which the server's machine may not have",
    ),
    ("hook claude-code", AGENT_SIDE),
    ("hook install", CHECKOUT),
    ("worker", DRIVES),
    ("queue enqueue", LOCAL_ADMIN),
    ("queue retry", LOCAL_ADMIN),
    ("queue requeue-errors", LOCAL_ADMIN),
    ("queue purge", LOCAL_ADMIN),
    ("worktree list", LOCAL_ADMIN),
    ("worktree prune", LOCAL_ADMIN),
    ("prune", LOCAL_ADMIN),
    ("serve", "starts the server itself"),
    (
        "mcp",
        "the MCP server on stdio, for an agent CLI on this machine; the server speaks the same tools at /mcp",
    ),
    (
        "token create",
        "makes the tokens the API asks for; only a person at the machine may",
    ),
    (
        "token list",
        "lists the tokens the API asks for; only a person at the machine may",
    ),
    (
        "token revoke",
        "revokes the tokens the API asks for; only a person at the machine may",
    ),
    (
        "state show",
        "the whole ledger of a run, task or session: `state summary` is routed, and the ledger's events stay with the CLI",
    ),
    (
        "state check",
        "exits 3 on a broken rule for a script's `if`; over HTTP the summary carries the same violations",
    ),
    ("state list", LOCAL_ADMIN),
    ("task new", CHECKOUT),
    ("task next", CHECKOUT),
    ("task archive", CHECKOUT),
];

const RECORDS: &[&str] = &[
    "clarified",
    "inspected",
    "planned",
    "edited",
    "validated",
    "reviewed",
    "repaired",
    "re-reviewed",
    "new-evidence",
    "released",
    "handed-off",
    "closed",
];

fn excluded(command: &str) -> Option<&'static str> {
    if let Some(record) = command.strip_prefix("state record ") {
        return RECORDS.contains(&record).then_some(LEDGER_WRITE);
    }
    EXCLUDED
        .iter()
        .find(|(name, _)| *name == command)
        .map(|(_, why)| *why)
}

#[test]
fn every_command_has_a_route_or_a_reason() {
    let commands = leaf_commands();
    assert!(
        commands.len() > 40,
        "the walk found the commands: {commands:?}"
    );
    let mut unaccounted = Vec::new();
    for command in &commands {
        let routed = ROUTED.iter().any(|(name, _, _)| name == command);
        match (routed, excluded(command)) {
            (true, Some(_)) => panic!("{command} is both routed and excluded"),
            (false, None) => unaccounted.push(command.clone()),
            _ => {}
        }
    }
    assert!(
        unaccounted.is_empty(),
        "commands with neither an API route nor a reason in api_coverage.rs: {unaccounted:?}"
    );
    let named = ROUTED
        .iter()
        .map(|(name, _, _)| *name)
        .chain(EXCLUDED.iter().map(|(name, _)| *name));
    for name in named {
        assert!(
            commands.iter().any(|command| command == name),
            "no command `{name}`"
        );
    }

    // Each route is answered by its handler: asked about a run, stage, job
    // and task that do not exist, it says so, where the fallback would say
    // "nothing at".
    let dir = project(&gate_workflow());
    let alice = token(dir.path(), "alice");
    let server = Server::start(dir.path());
    let bearer = format!("Bearer {alice}");
    for (command, method, route) in ROUTED {
        let path = route
            .replace("RUN", "no-such-run")
            .replace("STAGE", "no-such-stage")
            .replace("ID", "999999")
            .replace("TASK", "no-such-task");
        let response = if *method == "GET" {
            server.get(&path)
        } else {
            server.post(
                &path,
                &[("Authorization", &bearer)],
                r#"{"comment": "x", "drop": 1}"#,
            )
        };
        let answer: Value = serde_json::from_str(&response.body).unwrap_or(Value::Null);
        let fallback = answer["error"]
            .as_str()
            .is_some_and(|error| error.starts_with("nothing at"));
        assert!(
            !fallback && response.status != 405,
            "`{command}`: {method} {path} is not routed: {response:?}"
        );
    }
}
