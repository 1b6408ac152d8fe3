//! A stage's findings in Chromium, after a correction cycle: the critical
//! finding of the first cycle, then the passing one of the second.

use std::path::Path;

use baton_test_support::browser::browser;

use super::Page;
use crate::serving::{HEADER, Server, cli_json, project};

/// `report` writes two items; each is judged critical until one
/// correction was applied, then passing.
fn corrected_workflow() -> String {
    format!(
        "{HEADER}  - name: report
    kind: execute
    description: d
    executor: inline
    script: |
      printf '[{{\"id\": \"a\"}}, {{\"id\": \"b\"}}]' > outputs/report.json
    writes_to: [report.json]
    validation: {{strategy: unit}}
"
    )
}

#[test]
fn a_stage_s_findings_show_by_cycle_the_most_severe_first() {
    let Some(browser) = browser() else { return };
    let dir = project(&corrected_workflow());
    let fake = Path::new(env!("CARGO_BIN_EXE_baton")).with_file_name("baton-fake-agent");
    let profile = |role: &str, directive: &str| {
        format!(
            "[agents.{role}]\nprofile = \"{role}\"\n\n[profiles.{role}]\nprogram = \"{}\"\nprompt = {{ via = \"stdin\" }}\nenv_passthrough = [\"PATH\", \"HOME\"]\nenv = {{ BATON_FAKE_AGENT = \"{directive}\" }}\n\n",
            fake.display()
        )
    };
    std::fs::write(
        dir.path().join("baton.toml"),
        format!(
            "{}{}",
            profile("validator", "findings critical-until 1"),
            profile("correction", "correct")
        ),
    )
    .expect("write baton.toml");
    let outcome = cli_json(dir.path(), &["run", "wf.yaml", "--json"]);
    assert_eq!(outcome["status"], "success", "{outcome}");
    let run = outcome["run_id"].as_str().expect("run_id");
    let server = Server::start(dir.path());

    let result = Page::start(
        &browser,
        "findings.mjs",
        &server,
        &[("BATON_RUN", run), ("BATON_STAGE", "report")],
    )
    .finish();
    let rows: Vec<(String, String, String)> = result["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|row| {
            let text = |key: &str| row[key].as_str().unwrap_or_default().to_owned();
            (text("cycle"), text("severity"), text("status"))
        })
        .collect();
    let row = |cycle: &str, severity: &str, status: &str| {
        (cycle.to_owned(), severity.to_owned(), status.to_owned())
    };
    assert_eq!(
        rows,
        [
            row("1", "critical", "FAIL"),
            row("1", "critical", "FAIL"),
            row("2", "info", "PASS"),
            row("2", "info", "PASS"),
        ],
        "{result}"
    );
}
