//! Run references: `latest` and unique prefixes of run ids, taken by every
//! command that takes a run.

use serde_json::Value;

use crate::project::{HEADER, Project, stage};

/// A workflow named `name`: a gate `review`, then `after`.
fn gated(name: &str) -> String {
    format!(
        "{}{}{}",
        HEADER.replacen("name: t", &format!("name: {name}"), 1),
        stage(
            "review",
            "echo '- reviewed' > outputs/review.md",
            "    writes_to: [outputs/review.md]\n    human_gate: true\n"
        ),
        stage("after", "echo after", "    depends_on: [review]\n"),
    )
}

fn started(project: &Project, file: &str) -> String {
    let value = project.json(&["run", file, "--json"]);
    value["run_id"].as_str().expect("a run id").to_owned()
}

fn ok(run: &baton_test_support::Run, what: &str) {
    assert_eq!(
        run.code, 0,
        "{what}\nstdout: {}\nstderr: {}",
        run.stdout, run.stderr
    );
}

#[test]
fn latest_names_the_run_created_last_wherever_a_run_is_taken() {
    let project = Project::new();
    project.write("alpha.yaml", &gated("alpha"));
    project.write("beta.yaml", &gated("beta"));
    let _older = started(&project, "alpha.yaml");
    let newest = started(&project, "beta.yaml");

    let status = project.json(&["status", "latest", "--json"]);
    assert_eq!(status["run_id"], newest.as_str());
    ok(&project.baton(&["logs", "latest", "review"]), "logs latest");
    let gates = project.json(&["gate", "list", "latest", "--json"]);
    assert_eq!(gates[0]["run_id"], newest.as_str(), "{gates}");
    ok(
        &project.baton(&["gate", "show", "latest", "review"]),
        "gate show",
    );
    ok(
        &project.baton(&["gate", "edit", "latest", "review", "1", "text=edited"]),
        "gate edit",
    );
    let approved = project.json(&["gate", "approve", "latest", "review", "--json"]);
    assert_eq!(approved["run_id"], newest.as_str(), "{approved}");
    let resumed = project.json(&["resume", "latest", "--json"]);
    assert_eq!(
        (resumed["run_id"].as_str(), resumed["status"].as_str()),
        (Some(newest.as_str()), Some("success")),
        "{resumed}"
    );
    let rerun = project.json(&["rerun", "latest", "after", "--json"]);
    assert_eq!(rerun["run_id"], newest.as_str(), "{rerun}");
    let state = project.json(&["state", "show", "--run", "latest", "--json"]);
    assert!(state.to_string().contains(&newest), "{state}");
    // A finished run: cancel says so, naming the run it resolved.
    let cancel = project.baton(&["cancel", "latest"]);
    assert!(
        cancel.stderr.contains(&newest) || cancel.stdout.contains(&newest),
        "{cancel:?}"
    );
}

#[test]
fn the_driver_protocol_takes_run_references() {
    let project = Project::new();
    project.write(
        "ext.yaml",
        &format!(
            "{}{}",
            HEADER.replacen("name: t", "name: ext", 1),
            stage("draft", "true", "")
        ),
    );
    let created = project.json(&["run", "ext.yaml", "--driver", "external", "--json"]);
    let run_id = created["run_id"].as_str().unwrap().to_owned();
    let prefix = &run_id[..run_id.len() - 2];
    let ready: Value = project.json(&["next", prefix, "--json"]);
    assert!(
        ready.to_string().contains("draft") || ready == Value::Array(vec![]),
        "{ready}"
    );
    let failed = project.baton(&["fail", "latest", "draft", "--error", "gave up"]);
    // Inline stages are run by `next` itself; either way the reference
    // resolved to the run (the refusal names its stage, not a missing run).
    assert!(!failed.stderr.contains("no run"), "{}", failed.stderr);
    let complete = project.baton(&["complete", prefix, "draft"]);
    assert!(!complete.stderr.contains("no run"), "{}", complete.stderr);
}

#[test]
fn a_unique_prefix_names_its_run_and_an_ambiguous_one_lists_the_candidates() {
    let project = Project::new();
    project.write("alpha.yaml", &gated("alpha"));
    project.write("beta.yaml", &gated("beta"));
    let first = started(&project, "alpha.yaml");
    let second = started(&project, "alpha.yaml");
    let beta = started(&project, "beta.yaml");

    let status = project.json(&["status", "bet", "--json"]);
    assert_eq!(status["run_id"], beta.as_str());
    let whole = project.json(&["status", &first, "--json"]);
    assert_eq!(whole["run_id"], first.as_str());

    let ambiguous = project.baton(&["status", "alpha-"]);
    assert_eq!(ambiguous.code, 1, "{}", ambiguous.stderr);
    for id in [&first, &second] {
        assert!(
            ambiguous.stderr.contains(id.as_str()),
            "{}",
            ambiguous.stderr
        );
    }
    assert!(!ambiguous.stderr.contains(&beta), "{}", ambiguous.stderr);
    assert!(
        ambiguous.stderr.contains("give more of the id"),
        "{}",
        ambiguous.stderr
    );

    for command in [
        vec!["status", "zzz"],
        vec!["logs", "zzz"],
        vec!["resume", "zzz"],
        vec!["gate", "approve", "zzz", "review"],
        vec!["state", "show", "--run", "zzz"],
    ] {
        let missing = project.baton(&command);
        assert_eq!(missing.code, 1, "{command:?}: {}", missing.stderr);
        assert!(
            missing
                .stderr
                .contains("no run with id zzz, nor one whose id starts with it")
                && missing.stderr.contains("baton runs"),
            "{command:?}: {}",
            missing.stderr
        );
    }
}

#[test]
fn latest_in_an_empty_project_says_there_is_no_run() {
    let project = Project::new();
    let none = project.baton(&["status", "latest"]);
    assert_eq!(none.code, 1, "{}", none.stderr);
    assert!(none.stderr.contains("no run yet"), "{}", none.stderr);
    assert!(none.stderr.contains("baton runs"), "{}", none.stderr);
}
