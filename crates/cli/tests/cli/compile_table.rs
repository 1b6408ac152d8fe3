//! `baton compile`'s table says in each column what it holds: `run by` is
//! `agent:ROLE`, `script`, `queue` or `workflow:PATH`, where the column
//! called `executor` used to hold agent roles and executor names alike.
//! The JSON keeps the reference's `executor` values.

use serde_json::Value;

use crate::baton;

const WORKFLOW: &str = r#"name: t
version: '1'
description: d
trigger: {source: manual}
stages:
  - name: scripted
    kind: gather
    description: d
    executor: inline
    script: echo '["a"]' > items.json
    writes_to: [items.json]
  - name: written
    kind: execute
    description: d
    agent: {role: writer}
    writes_to: [w.md]
  - name: described
    kind: execute
    description: d
    executor: inline
  - name: queued
    kind: execute
    description: d
    executor: worker_queue
    agent: {role: worker}
    script: make test
  - name: per-item
    kind: execute
    description: d
    depends_on: [scripted]
    reads_from: [scripted]
    agent: {role: worker}
    fan_out:
      source: items.json
      field: items
      key: item
      mode: worker_queue
      script: echo "{item}"
  - name: child
    kind: sub-workflow
    description: d
    agent: {role: worker}
    sub_workflow: child.yaml
"#;

const CHILD: &str = "name: c\nversion: '1'\ndescription: d\ntrigger: {source: manual}\nstages:\n  - name: x\n    kind: execute\n    description: d\n    executor: inline\n    script: 'true'\n";

#[test]
fn the_run_by_column_names_the_agent_role_or_what_else_runs_the_stage() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("wf.yaml"), WORKFLOW).expect("write");
    std::fs::write(dir.path().join("child.yaml"), CHILD).expect("write");
    let table = baton(dir.path(), &["compile", "wf.yaml"]);
    assert_eq!(table.code, 0, "{}\n{}", table.stdout, table.stderr);
    let header = table
        .stdout
        .lines()
        .find(|line| line.starts_with("group"))
        .unwrap_or_else(|| panic!("no header: {}", table.stdout));
    let columns: Vec<&str> = header
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        columns,
        [
            "group",
            "index",
            "stage",
            "kind",
            "run by",
            "depends_on",
            "notes"
        ]
    );
    let run_by = |stage: &str| -> String {
        let row = table
            .stdout
            .lines()
            .find(|line| line.split_whitespace().nth(2) == Some(stage))
            .unwrap_or_else(|| panic!("no row for {stage}: {}", table.stdout));
        row.split_whitespace()
            .nth(4)
            .expect("a run-by cell")
            .to_owned()
    };
    for (stage, expected) in [
        ("scripted", "script"),
        ("written", "agent:writer"),
        ("described", "agent:inline"),
        ("queued", "queue"),
        ("per-item", "queue"),
        ("child", "workflow:child.yaml"),
    ] {
        assert_eq!(run_by(stage), expected, "{stage}: {}", table.stdout);
    }

    // The JSON is unchanged: `executor` holds the executor's name.
    let json = baton(dir.path(), &["compile", "wf.yaml", "--json"]);
    let plan: Value = serde_json::from_str(&json.stdout).expect("JSON");
    let executors: Vec<(&str, &str)> = plan["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .map(|stage| {
            (
                stage["name"].as_str().expect("name"),
                stage["executor"].as_str().expect("executor"),
            )
        })
        .collect();
    assert!(executors.contains(&("written", "agent")), "{executors:?}");
    assert!(executors.contains(&("scripted", "inline")), "{executors:?}");
}
