//! `--budget`: a run stops starting agent stages once what its agents
//! spent reaches the budget, and says so; a larger budget on `resume`
//! continues it. A run whose agents report no dollars and have no price is
//! refused before anything runs, since it could not count what it spends.

use std::path::Path;

use serde_json::Value;

use crate::project::{HEADER, Project, run_id};

/// A `baton.toml` whose default role runs the stand-in agent with the
/// output rules of the built-in profile `cli` (`extra` appended).
fn agents(project: &Project, cli: &str, extra: &str) {
    let fake = Path::new(env!("CARGO_BIN_EXE_baton")).with_file_name("baton-fake-agent");
    project.write(
        "baton.toml",
        &format!(
            "[agents.default]\nprofile = \"fake\"\n{extra}\n[profiles.fake]\nextends = \"{cli}\"\nprogram = \"{}\"\nargs = []\nenv = {{ BATON_FAKE_WITNESS = \"{}\" }}\n",
            fake.display(),
            project.path().join("witness.txt").display()
        ),
    );
}

/// Three agent stages one after the other, each printing a result in
/// `shape` (Claude's costs $0.0123).
fn chain(shape: &str) -> String {
    let mut workflow = HEADER.to_owned();
    for (name, after) in [("a", ""), ("b", "a"), ("c", "b")] {
        let depends = if after.is_empty() {
            String::new()
        } else {
            format!("    depends_on: [{after}]\n")
        };
        workflow.push_str(&format!(
            "  - name: {name}\n    kind: execute\n    description: |\n      FAKE-AGENT: print-json {shape}\n      FAKE-AGENT: write-listed\n    agent: {{role: writer, access: read-write}}\n    writes_to: [{name}.md]\n{depends}"
        ));
    }
    workflow
}

fn stage<'s>(status: &'s Value, name: &str) -> &'s Value {
    status["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .find(|stage| stage["stage"] == name)
        .expect("the stage")
}

fn ran(project: &Project) -> Vec<String> {
    project
        .witness()
        .iter()
        .filter_map(|line| line.split(' ').nth(1).map(str::to_owned))
        .collect()
}

#[test]
fn a_spent_budget_stops_the_agent_stages_and_a_larger_one_continues_the_run() {
    let project = Project::new();
    agents(&project, "claude", "");
    project.write("wf.yaml", &chain("claude"));
    let run = project.baton(&["run", "wf.yaml", "--budget", "0.02", "--json"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let id = run_id(&run);
    // b started with $0.0123 spent, under the budget; c would start past it.
    assert_eq!(ran(&project), ["a", "b"]);
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "failed");
    let c = stage(&status, "c");
    assert_eq!(c["status"], "failed", "{c}");
    assert!(
        c["error"].as_str().is_some_and(|error| error.contains(
            "the run's budget of $0.02 is spent ($0.0246 so far): no agent stage starts"
        )),
        "{c}"
    );

    // The budget is the run's: a resume without a larger one runs nothing.
    let again = project.baton(&["resume", &id]);
    assert_eq!(again.code, 2, "{}", again.stderr);
    assert_eq!(ran(&project), ["a", "b"]);
    let raised = project.baton(&["resume", &id, "--budget", "1"]);
    assert_eq!(raised.code, 0, "{}", raised.stderr);
    assert_eq!(ran(&project), ["a", "b", "c"]);
    assert_eq!(
        project.json(&["status", &id, "--json"])["status"],
        "success"
    );
}

#[test]
fn a_budget_refuses_agents_whose_spending_it_cannot_count_and_a_price_lets_them_run() {
    let project = Project::new();
    // Gemini's output has tokens and no dollars.
    agents(&project, "gemini", "model = \"gemini-x\"\n");
    project.write("wf.yaml", &chain("gemini"));
    let refused = project.baton(&["run", "wf.yaml", "--budget", "1"]);
    assert_eq!(refused.code, 3, "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains("reports no dollars, and [pricing] has no price for `gemini-x`"),
        "{}",
        refused.stderr
    );
    assert!(project.run_ids().is_empty(), "nothing was recorded");
    assert!(ran(&project).is_empty());

    let toml = std::fs::read_to_string(project.path().join("baton.toml")).expect("read");
    project.write(
        "baton.toml",
        &format!("{toml}\n[pricing]\n\"gemini-x\" = {{ input = 1.0, output = 2.0 }}\n"),
    );
    let priced = project.baton(&["run", "wf.yaml", "--budget", "1"]);
    assert_eq!(priced.code, 0, "{}", priced.stderr);
    assert_eq!(ran(&project), ["a", "b", "c"]);
    // Without a budget nothing needs counting.
    assert_eq!(project.baton(&["run", "wf.yaml"]).code, 0);
}

#[test]
fn a_budget_is_a_positive_number_of_dollars() {
    let project = Project::new();
    for bad in ["0", "-1", "lots", "NaN"] {
        let flag = format!("--budget={bad}");
        let run = project.baton(&["run", "wf.yaml", &flag]);
        assert_eq!(run.code, 2, "{bad}: {}", run.stderr);
        assert!(
            run.stderr.contains("is not a budget"),
            "{bad}: {}",
            run.stderr
        );
    }
}

/// `chain(shape)` with a top-level `budget_usd: value`.
fn budgeted_chain(shape: &str, value: &str) -> String {
    chain(shape).replacen("stages:\n", &format!("budget_usd: {value}\nstages:\n"), 1)
}

#[test]
fn a_workflow_s_budget_usd_stops_the_agent_stages_and_the_command_line_s_wins() {
    let project = Project::new();
    agents(&project, "claude", "");
    project.write("wf.yaml", &budgeted_chain("claude", "0.02"));
    let run = project.baton(&["run", "wf.yaml", "--json"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let id = run_id(&run);
    assert_eq!(ran(&project), ["a", "b"]);
    let c = stage(&project.json(&["status", &id, "--json"]), "c").clone();
    assert!(
        c["error"].as_str().is_some_and(|error| error.contains(
            "the run's budget of $0.02 is spent ($0.0246 so far): no agent stage starts"
        )),
        "{c}"
    );
    // The file's budget was recorded with the run, as --budget's is.
    assert_eq!(project.baton(&["resume", &id]).code, 2);
    assert_eq!(ran(&project), ["a", "b"]);

    // --budget wins over the file's, whether larger or smaller.
    let larger = project.baton(&["run", "wf.yaml", "--budget", "1"]);
    assert_eq!(larger.code, 0, "{}", larger.stderr);
    assert_eq!(ran(&project), ["a", "b", "a", "b", "c"]);
    project.write("wf.yaml", &budgeted_chain("claude", "100"));
    let smaller = project.baton(&["run", "wf.yaml", "--budget", "0.01"]);
    assert_eq!(smaller.code, 2, "{}", smaller.stderr);
    assert_eq!(ran(&project), ["a", "b", "a", "b", "c", "a"]);
}

#[test]
fn a_workflow_s_budget_usd_needs_every_agent_s_spending_counted() {
    let project = Project::new();
    agents(&project, "gemini", "model = \"gemini-x\"\n");
    project.write("wf.yaml", &budgeted_chain("gemini", "1"));
    let refused = project.baton(&["run", "wf.yaml"]);
    assert_eq!(refused.code, 3, "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains("[pricing] has no price for `gemini-x`"),
        "{}",
        refused.stderr
    );
    assert!(project.run_ids().is_empty(), "nothing was recorded");
}

#[test]
fn a_workflow_s_budget_usd_that_is_no_positive_number_is_an_error_at_its_place() {
    let project = Project::new();
    for bad in ["-1", "0", "-0.5", "'$5'", "lots", "[1]", "{usd: 5}"] {
        project.write("wf.yaml", &budgeted_chain("claude", bad));
        for command in ["check", "run"] {
            let out = project.baton(&[command, "wf.yaml"]);
            assert_ne!(out.code, 0, "{command} {bad}: {}", out.stderr);
            // The field is on line 5, its value from column 13.
            assert!(
                out.stderr.contains("wf.yaml:5:13"),
                "{command} {bad}: {}",
                out.stderr
            );
            assert!(
                out.stderr
                    .contains("'budget_usd' must be a positive number of dollars"),
                "{command} {bad}: {}",
                out.stderr
            );
        }
    }
    assert!(project.run_ids().is_empty(), "nothing was recorded");
    assert!(ran(&project).is_empty());
}
