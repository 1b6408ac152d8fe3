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

/// How long schemathesis may run in all, and each of its requests: its
/// budget is bounded by the examples per operation; these only stop a hung
/// server from hanging the test.
const TIME_BUDGET: Duration = Duration::from_secs(240);
const REQUEST_TIMEOUT_S: &str = "30";
/// Requests made per operation and phase.
const EXAMPLES: &str = "30";

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

/// The runs and jobs the server answers about.
fn seed(dir: &Path) {
    std::fs::write(dir.join("ok.yaml"), one_stage("echo done")).expect("write ok.yaml");
    std::fs::write(dir.join("fail.yaml"), one_stage("exit 3")).expect("write fail.yaml");
    assert_eq!(
        cli_json(dir, &["run", "ok.yaml", "--json"])["status"],
        "success"
    );
    let failed = baton(dir, &["run", "fail.yaml", "--json"]);
    let failed: Value =
        serde_json::from_str(&failed.stdout).unwrap_or_else(|error| panic!("{error}: {failed:?}"));
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(
        cli_json(dir, &["run", "wf.yaml", "--json"])["status"],
        "awaiting_human"
    );
    for script in ["true", "false"] {
        let args = [
            "queue", "enqueue", "--queue", "contract", "--script", script, "--count", "2", "--json",
        ];
        cli_json(dir, &args);
    }
    cli_json(dir, &["worker", "--once", "--queue", "contract", "--json"]);
    cli_json(
        dir,
        &[
            "queue", "enqueue", "--queue", "contract", "--script", "true", "--json",
        ],
    );
}

#[test]
fn the_api_answers_as_its_openapi_document_says() {
    let Some(st) = schemathesis() else { return };
    let dir = project(&gate_workflow());
    seed(dir.path());
    let bearer = format!("Authorization: Bearer {}", token(dir.path(), "contract"));
    let server = Server::start(dir.path());

    let document = server.get("/api/openapi.json");
    assert_eq!(document.status, 200, "{document:?}");
    let paths = document.json()["paths"].clone();
    assert!(paths["/api/runs/{run}"]["get"].is_object(), "{paths}");

    // schemathesis keeps its example database in the directory it runs in.
    let scratch = tempfile::tempdir().expect("temp dir");
    let url = format!("http://{}/api/openapi.json", server.address);
    let args = [
        "run",
        url.as_str(),
        "--header",
        bearer.as_str(),
        "--checks",
        "all",
        "--max-examples",
        EXAMPLES,
        "--request-timeout",
        REQUEST_TIMEOUT_S,
        // One worker: with several threads, CPython 3.11's AST compiler,
        // which Hypothesis calls while generating, can fail spuriously
        // ("AST constructor recursion depth mismatch").
        "--workers",
        "1",
        "--no-shrink",
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
