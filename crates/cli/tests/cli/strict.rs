//! `run --strict` refuses a workflow with lint warnings before anything
//! runs, and a `--params` name the workflow does not know is an error with
//! the nearest known name, wherever parameters are taken.

use serde_json::Value;

use crate::baton;

/// `a` misspells `depends_on`: without it, `a` would run before `b` wrote
/// what `a` reads.
const WORKFLOW: &str = r#"name: t
version: '1'
description: d
trigger:
  source: manual
  params:
    pr_number: {default: "1", description: the pull request}
stages:
  - name: b
    kind: execute
    description: d
    executor: inline
    script: echo "{pr_number}" > "$BATON_PROJECT_DIR/b.txt"
    writes_to: []
  - name: a
    kind: execute
    description: d
    executor: inline
    depnds_on: [b]
    script: cat "$BATON_PROJECT_DIR/b.txt" > "$BATON_PROJECT_DIR/a.txt"
    writes_to: []
"#;

fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("wf.yaml"), WORKFLOW).expect("write");
    dir
}

fn runs(dir: &std::path::Path) -> Vec<Value> {
    let runs = baton(dir, &["runs", "--json"]);
    serde_json::from_str::<Value>(&runs.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}\n{}", runs.stdout, runs.stderr))
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn run_strict_refuses_a_misspelt_key_before_anything_runs() {
    let dir = project();
    for args in [
        &["run", "wf.yaml", "--strict"][..],
        &["run", "wf.yaml", "--strict", "--dry-run"],
    ] {
        let run = baton(dir.path(), args);
        assert_eq!(run.code, 1, "{args:?}: {}\n{}", run.stdout, run.stderr);
        assert!(
            run.stderr.contains("unknown key 'depnds_on' in stage 'a'")
                && run.stderr.contains("did you mean `depends_on`?"),
            "{args:?}: {}",
            run.stderr
        );
        assert!(
            run.stderr
                .contains("error: warnings are errors under --strict: nothing was recorded or run"),
            "{args:?}: {}",
            run.stderr
        );
        assert!(!dir.path().join("b.txt").exists(), "{args:?}: b ran");
        assert!(!dir.path().join("a.txt").exists(), "{args:?}: a ran");
    }
    assert_eq!(runs(dir.path()), Vec::<Value>::new(), "nothing is recorded");

    // Without --strict the same workflow runs after only a warning, and
    // `a` does not wait for `b`: what --strict is for.
    let run = baton(dir.path(), &["run", "wf.yaml"]);
    assert!(run.stderr.contains("depnds_on"), "{}", run.stderr);
    assert_eq!(runs(dir.path()).len(), 1);
}

#[test]
fn an_unknown_param_is_refused_with_the_nearest_name_wherever_params_are_taken() {
    let dir = project();
    std::fs::write(
        dir.path().join("wf.yaml"),
        WORKFLOW.replace("depnds_on", "depends_on"),
    )
    .expect("write");
    for command in [
        &["run", "wf.yaml"][..],
        &["run", "wf.yaml", "--dry-run"],
        &["run", "wf.yaml", "--driver", "external"],
        &["compile", "wf.yaml"],
        &["lint", "wf.yaml"],
        &["check", "wf.yaml"],
    ] {
        let mut args = command.to_vec();
        args.extend(["--params", "pr_numbr=42"]);
        let run = baton(dir.path(), &args);
        assert_eq!(run.code, 1, "{args:?}: {}\n{}", run.stdout, run.stderr);
        assert!(
            run.stderr
                .contains("unknown parameter 'pr_numbr' (given with --params)")
                && run.stderr.contains("did you mean `pr_number`?"),
            "{args:?}: {}",
            run.stderr
        );
    }
    assert!(!dir.path().join("b.txt").exists(), "b ran");
    assert_eq!(runs(dir.path()), Vec::<Value>::new(), "nothing is recorded");

    // Far from every known name: how to declare it instead.
    let compile = baton(dir.path(), &["compile", "wf.yaml", "--params", "zzz=1"]);
    assert_eq!(compile.code, 1, "{}", compile.stderr);
    assert!(
        compile
            .stderr
            .contains("declare `zzz` under `trigger.params`"),
        "{}",
        compile.stderr
    );
    // `resume` takes no parameters: the run keeps those it started with.
    let resume = baton(
        dir.path(),
        &["resume", "some-run", "--params", "pr_number=2"],
    );
    assert_eq!(resume.code, 2, "{}", resume.stderr);
}

#[test]
fn params_a_workflow_refers_to_without_declaring_them_are_accepted() {
    let dir = project();
    std::fs::write(
        dir.path().join("wf.yaml"),
        WORKFLOW.replace("depnds_on", "depends_on").replace(
            "> \"$BATON_PROJECT_DIR/a.txt\"",
            "> \"$BATON_PROJECT_DIR/{pr_size}.txt\"",
        ),
    )
    .expect("write");
    let run = baton(
        dir.path(),
        &[
            "run",
            "wf.yaml",
            "--params",
            "pr_size=small",
            "--params",
            "pr_number=7",
            "--params",
            "work_dir=/tmp/x",
        ],
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("small.txt")).expect("small.txt"),
        "7\n"
    );
}
