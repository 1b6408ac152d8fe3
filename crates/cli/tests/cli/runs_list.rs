//! `baton runs`: duration, stage counts and cost per run, and the
//! `--status`, `--limit` and `--since` filters, in the table, JSON and YAML.

use std::path::Path;

use serde_json::Value;

use crate::project::{HEADER, Project, run_id, stage};

fn fake_agent() -> String {
    Path::new(env!("CARGO_BIN_EXE_baton"))
        .with_file_name("baton-fake-agent")
        .display()
        .to_string()
}

/// Three runs: `paid` (an agent that reports $0.0123, then a script: both
/// succeed), `broken` (a failing stage and the one after it), `gated`
/// (waiting at a gate). Returns their ids in that order.
fn three_runs(project: &Project) -> [String; 3] {
    project.write(
        "baton.toml",
        &format!(
            "[agents.writer]\nprofile = \"fake\"\n\n[profiles.fake]\nextends = \"claude\"\nprogram = \"{}\"\nargs = []\n",
            fake_agent()
        ),
    );
    let named = |name: &str| HEADER.replacen("name: t", &format!("name: {name}"), 1);
    project.write(
        "paid.yaml",
        &format!(
            "{}  - name: draft\n    kind: gather\n    description: |\n      FAKE-AGENT: print-json claude\n      FAKE-AGENT: write-listed\n    agent: {{role: writer}}\n    writes_to: [draft.json]\n{}",
            named("paid"),
            stage("check", "true", "    depends_on: [draft]\n"),
        ),
    );
    project.write(
        "broken.yaml",
        &format!(
            "{}{}{}",
            named("broken"),
            stage("fails", "exit 3", ""),
            stage("after", "true", "    depends_on: [fails]\n"),
        ),
    );
    project.write(
        "gated.yaml",
        &format!(
            "{}{}",
            named("gated"),
            stage(
                "review",
                "echo '- item' > outputs/r.md",
                "    writes_to: [outputs/r.md]\n    human_gate: true\n"
            ),
        ),
    );
    let mut ids = Vec::new();
    for (file, code) in [("paid.yaml", 0), ("broken.yaml", 2), ("gated.yaml", 0)] {
        let run = project.baton(&["run", file, "--json"]);
        assert_eq!(run.code, code, "{file}: {}", run.stderr);
        ids.push(run_id(&run));
    }
    ids.try_into().expect("three ids")
}

fn ids(list: &Value) -> Vec<&str> {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|run| run["run_id"].as_str().expect("an id"))
        .collect()
}

#[test]
fn runs_show_duration_stage_counts_and_cost_in_json_and_the_table() {
    let project = Project::new();
    let [paid, broken, gated] = three_runs(&project);
    let list = project.json(&["runs", "--format", "json"]);
    assert_eq!(ids(&list), [&paid, &broken, &gated]);

    let paid_row = &list[0];
    assert_eq!(paid_row["status"], "success");
    assert_eq!(paid_row["stages"]["total"], 2, "{paid_row}");
    assert_eq!(paid_row["stages"]["success"], 2, "{paid_row}");
    let cost = paid_row["cost_usd"].as_f64().expect("a cost");
    assert!((cost - 0.0123).abs() < 1e-9, "{paid_row}");
    assert!(paid_row["duration_ms"].as_i64().is_some(), "{paid_row}");
    assert!(paid_row["finished_at"].is_string(), "{paid_row}");

    let broken_row = &list[1];
    assert_eq!(broken_row["status"], "failed");
    assert_eq!(broken_row["stages"]["failed"], 1, "{broken_row}");
    assert_eq!(broken_row["stages"]["total"], 2, "{broken_row}");
    assert_eq!(broken_row["cost_usd"], Value::Null, "{broken_row}");

    let yaml = project.baton(&["runs", "--format", "yaml"]);
    assert_eq!(yaml.code, 0, "{}", yaml.stderr);
    assert!(yaml.stdout.starts_with("- run_id: "), "{}", yaml.stdout);
    let from_yaml: Value = serde_saphyr::from_str(&yaml.stdout).expect("YAML");
    assert_eq!(
        from_yaml, list,
        "the YAML holds what the JSON does:\n{}",
        yaml.stdout
    );

    let table = project.baton(&["runs"]);
    assert_eq!(table.code, 0, "{}", table.stderr);
    let header = table.stdout.lines().next().unwrap_or_default();
    for column in ["duration", "stages", "cost"] {
        assert!(header.contains(column), "{header}");
    }
    let line = |id: &str| {
        table
            .stdout
            .lines()
            .find(|line| line.starts_with(id))
            .unwrap_or_else(|| panic!("no line for {id}:\n{}", table.stdout))
            .to_owned()
    };
    assert!(line(&paid).contains("2 success") && line(&paid).contains("$0.0123"));
    assert!(line(&broken).contains("1 failed"), "{}", line(&broken));
    assert!(line(&gated).contains("awaiting_human"), "{}", line(&gated));
}

#[test]
fn status_limit_and_since_filter_the_list() {
    let project = Project::new();
    let [paid, broken, gated] = three_runs(&project);
    let list = |args: &[&str]| {
        let mut all = vec!["runs", "--json"];
        all.extend(args);
        project.json(&all)
    };
    assert_eq!(ids(&list(&["--status", "failed"])), [&broken]);
    assert_eq!(ids(&list(&["--status", "awaiting_human"])), [&gated]);
    assert_eq!(ids(&list(&["--limit", "2"])), [&broken, &gated]);
    assert_eq!(
        ids(&list(&["--limit", "1", "--status", "success"])),
        [&paid]
    );
    assert_eq!(ids(&list(&["--since", "1d"])).len(), 3);
    assert_eq!(ids(&list(&["--since", "2000-01-01"])).len(), 3);
    assert!(ids(&list(&["--since", "2999-01-01"])).is_empty());

    let none = project.baton(&["runs", "--since", "2999-01-01"]);
    assert_eq!(none.code, 0);
    assert!(none.stderr.contains("No run matches"), "{}", none.stderr);

    for (args, says) in [
        (["runs", "--since", "yesterday"], "such as 7d"),
        (["runs", "--status", "done"], "possible values"),
        (["runs", "--limit", "many"], "--limit"),
    ] {
        let refused = project.baton(&args);
        assert_eq!(refused.code, 2, "{args:?}: {}", refused.stderr);
        assert!(
            refused.stderr.contains(says),
            "{args:?}: {}",
            refused.stderr
        );
    }
}
