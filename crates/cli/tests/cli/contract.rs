//! `baton serve`'s JSON API against its own OpenAPI document
//! (`GET /api/openapi.json`), checked by schemathesis: a server over a
//! store holding a succeeded run, a failed run, a run waiting at its gate
//! and queue jobs of several statuses is sent requests made from the
//! document — well-formed and malformed, with and without the token — and
//! every answer must be one the document describes: no server error, a
//! documented status and content type, a body its schema accepts, and
//! malformed requests refused.
//!
//! It needs schemathesis (`Need::Schemathesis`), which `./scripts/test`
//! installs; without it the test fails, unless `BATON_TEST_SKIP` lists
//! `schemathesis`.

use std::path::Path;
use std::time::Duration;

use baton_test_support::schemathesis::schemathesis;
use serde_json::Value;

use crate::baton;
use crate::serving::{HEADER, Server, cli_json, gate_workflow, project, token};

/// Schemathesis's own time budget, in seconds: it stops generating when
/// it is spent, or when every operation had its examples.
const MAX_TIME_S: &str = "40";
/// How long it may take in all before the test kills it, and each of its
/// requests: only a hung server or tool reaches them.
const TIME_BUDGET: Duration = Duration::from_secs(300);
const REQUEST_TIMEOUT_S: &str = "30";
/// Requests made per operation and phase at most.
const EXAMPLES: &str = "15";

/// A workflow of one stage that runs `script`.
fn one_stage(script: &str) -> String {
    format!(
        "{HEADER}  - name: only
    kind: execute
    description: d
    executor: inline
    script: {script}
"
    )
}

/// The runs and jobs the server answers about: their ids.
fn seed(dir: &Path) -> (Vec<String>, Vec<i64>) {
    std::fs::write(dir.join("ok.yaml"), one_stage("echo done")).expect("write ok.yaml");
    std::fs::write(dir.join("fail.yaml"), one_stage("exit 3")).expect("write fail.yaml");
    let succeeded = cli_json(dir, &["run", "ok.yaml", "--json"]);
    assert_eq!(succeeded["status"], "success", "{succeeded}");
    let failed = baton(dir, &["run", "fail.yaml", "--json"]);
    let failed: Value =
        serde_json::from_str(&failed.stdout).unwrap_or_else(|error| panic!("{error}: {failed:?}"));
    assert_eq!(failed["status"], "failed", "{failed}");
    let gated = cli_json(dir, &["run", "wf.yaml", "--json"]);
    assert_eq!(gated["status"], "awaiting_human", "{gated}");
    let runs = [succeeded, failed, gated]
        .iter()
        .map(|run| run["run_id"].as_str().expect("run_id").to_owned())
        .collect();
    let mut jobs = Vec::new();
    for script in ["true", "false", "true"] {
        let args = [
            "queue", "enqueue", "--queue", "contract", "--script", script, "--count", "2", "--json",
        ];
        let ids = cli_json(dir, &args)["ids"].clone();
        jobs.extend(
            ids.as_array()
                .expect("ids")
                .iter()
                .filter_map(Value::as_i64),
        );
        if script == "false" {
            // The first four are worked (two succeed, two fail); the last
            // two wait.
            cli_json(dir, &["worker", "--once", "--queue", "contract", "--json"]);
        }
    }
    (runs, jobs)
}

/// Schemathesis's configuration: the seeded runs, their stages and the
/// jobs as values its path parameters take half of the time (random ones
/// the rest), so answers about real runs are checked too. Not for the
/// event stream, which stays open for a run that exists.
fn config(runs: &[String], jobs: &[i64]) -> String {
    let quoted = |values: &[String]| {
        let values: Vec<String> = values.iter().map(|value| format!("{value:?}")).collect();
        values.join(", ")
    };
    let stages = ["only", "review", "after"].map(str::to_owned);
    let jobs: Vec<String> = jobs.iter().map(i64::to_string).collect();
    let binding = |name: &str, dictionary: &str| {
        format!("\"path.{name}\" = {{ dictionary = \"{dictionary}\", probability = 0.5 }}")
    };
    format!(
        "[dictionaries.runs]\nvalues = [{}]\n\
         [dictionaries.stages]\nvalues = [{}]\n\
         [dictionaries.jobs]\nvalues = [{}]\n\
         [[operations]]\nexclude-path = \"/api/runs/{{run}}/events\"\n\
         parameters = {{ {}, {}, {} }}\n",
        quoted(runs),
        quoted(&stages),
        jobs.join(", "),
        binding("run", "runs"),
        binding("stage", "stages"),
        binding("id", "jobs"),
    )
}

#[test]
fn the_api_answers_as_its_openapi_document_says() {
    let Some(st) = schemathesis() else { return };
    let dir = project(&gate_workflow());
    let (runs, jobs) = seed(dir.path());
    let bearer = format!("Authorization: Bearer {}", token(dir.path(), "contract"));
    let server = Server::start(dir.path());

    let document = server.get("/api/openapi.json");
    assert_eq!(document.status, 200, "{document:?}");
    let paths = document.json()["paths"].clone();
    assert!(paths["/api/runs/{run}"]["get"].is_object(), "{paths}");

    // schemathesis keeps its example database in the directory it runs in.
    let scratch = tempfile::tempdir().expect("temp dir");
    let settings = scratch.path().join("schemathesis.toml");
    std::fs::write(&settings, config(&runs, &jobs)).expect("write the configuration");
    let url = format!("http://{}/api/openapi.json", server.address);
    let args = [
        "--config-file",
        settings.to_str().expect("a UTF-8 path"),
        "run",
        url.as_str(),
        "--header",
        bearer.as_str(),
        "--checks",
        "all",
        "--max-examples",
        EXAMPLES,
        "--max-time",
        MAX_TIME_S,
        "--request-timeout",
        REQUEST_TIMEOUT_S,
        // One worker: with several threads, CPython 3.11's AST compiler,
        // which Hypothesis calls while generating, can fail spuriously
        // ("AST constructor recursion depth mismatch").
        "--workers",
        "1",
        "--no-shrink",
        // The same requests on every run, so that a failure is the API's and
        // can be replayed, never the luck of a draw.
        "--seed",
        "20261207",
    ];
    let outcome = baton_test_support::run_bounded(&st, scratch.path(), &args, TIME_BUDGET);
    assert_eq!(
        outcome.code, 0,
        "schemathesis found answers the document does not describe:\n{}\n{}",
        outcome.stdout, outcome.stderr
    );
    assert!(
        !outcome.stdout.contains("No checks were performed"),
        "{}",
        outcome.stdout
    );
    eprintln!("{}", outcome.stdout);
}
