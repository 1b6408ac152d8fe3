//! Project discovery: every command finds its project from a subdirectory
//! (the nearest `.baton/` or `baton.toml`, else the git root), `--project`
//! and `BATON_PROJECT` choose it, and `.baton/` keeps itself out of git.

use std::path::Path;
use std::time::Duration;

use baton_test_support::{Run, run_bounded_with};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(120);

/// `baton ARGS` in `cwd` with `env` added; `BATON_PROJECT` and
/// `BATON_DATABASE_URL` are cleared first unless `env` sets them.
fn baton_in(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut vars: Vec<(String, String)> = vec![
        ("BATON_PROJECT".to_owned(), String::new()),
        ("BATON_DATABASE_URL".to_owned(), String::new()),
    ];
    vars.extend(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    run_bounded_with(
        Path::new(env!("CARGO_BIN_EXE_baton")),
        cwd,
        args,
        &vars,
        LIMIT,
    )
}

fn ok(run: &Run, what: &str) {
    assert_eq!(
        run.code, 0,
        "{what}\nstdout: {}\nstderr: {}",
        run.stdout, run.stderr
    );
}

fn json(run: &Run) -> Value {
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|error| panic!("{error}\nstdout: {}\nstderr: {}", run.stdout, run.stderr))
}

/// A workflow whose one stage records where it ran and its `work_dir`.
const WHERE: &str = "name: where\nversion: '1'\ndescription: d\ntrigger: {source: manual}\nstages:\n  - name: look\n    kind: execute\n    description: d\n    executor: inline\n    script: |\n      pwd > \"$BATON_PROJECT_DIR/pwd.txt\"\n      echo {work_dir} > \"$BATON_PROJECT_DIR/work_dir.txt\"\n";

fn git(dir: &Path, args: &[&str]) -> String {
    #[expect(clippy::disallowed_methods, reason = "tests set up git repositories")]
    let output = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("git runs");
    assert!(output.status.success(), "git {args:?}: {output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn real(path: &Path) -> std::path::PathBuf {
    std::fs::canonicalize(path).expect("canonical path")
}

#[test]
fn commands_in_a_subdirectory_see_the_project_s_runs_and_create_nothing_there() {
    let dir = tempfile::tempdir().unwrap();
    let top = real(dir.path());
    std::fs::write(top.join("wf.yaml"), WHERE).unwrap();
    ok(&baton_in(&top, &["run", "wf.yaml"], &[]), "run at the top");
    let deep = top.join("src/deep");
    std::fs::create_dir_all(&deep).unwrap();

    let runs = json(&baton_in(&deep, &["runs", "--format", "json"], &[]));
    assert_eq!(runs.as_array().map(Vec::len), Some(1), "{runs}");
    let run_id = runs[0]["run_id"].as_str().unwrap().to_owned();
    let status = baton_in(&deep, &["status", &run_id], &[]);
    ok(&status, "status from a subdirectory");
    assert!(status.stdout.contains("success"), "{}", status.stdout);
    assert!(!top.join("src/.baton").exists() && !deep.join(".baton").exists());
}

#[test]
fn a_run_started_in_a_subdirectory_reads_its_workflow_from_there_and_runs_at_the_project() {
    let dir = tempfile::tempdir().unwrap();
    let top = real(dir.path());
    std::fs::write(top.join("baton.toml"), "").unwrap();
    std::fs::create_dir_all(top.join("workflows")).unwrap();
    std::fs::write(top.join("workflows/where.yaml"), WHERE).unwrap();
    let sub = top.join("src");
    std::fs::create_dir_all(&sub).unwrap();

    let started = baton_in(&sub, &["run", "../workflows/where.yaml", "--json"], &[]);
    ok(&started, "run from a subdirectory");
    let run_id = json(&started)["run_id"].as_str().unwrap().to_owned();
    // The stage saw the project (it wrote to $BATON_PROJECT_DIR, the top),
    // ran in a workspace under it, and had the project's work_dir.
    let pwd = std::fs::read_to_string(top.join("pwd.txt")).unwrap();
    assert!(
        pwd.starts_with(top.join(".baton/runs").to_str().unwrap()),
        "{pwd}"
    );
    let work_dir = std::fs::read_to_string(top.join("work_dir.txt")).unwrap();
    assert_eq!(work_dir.trim(), top.join("out").to_str().unwrap());
    // Recorded in the project's store, workspace under the project.
    let status = json(&baton_in(&top, &["status", &run_id, "--json"], &[]));
    let workspace = status["workspace"].as_str().unwrap();
    assert!(
        workspace.starts_with(top.join(".baton/runs").to_str().unwrap()),
        "{workspace}"
    );
    assert!(!sub.join(".baton").exists());
    // Resumed from yet another directory, it finds the same workflow file.
    let other = top.join("docs");
    std::fs::create_dir_all(&other).unwrap();
    ok(&baton_in(&other, &["resume", &run_id], &[]), "resume");
    ok(&baton_in(&other, &["rerun", &run_id, "look"], &[]), "rerun");
}

#[test]
fn without_a_baton_directory_the_git_root_is_the_project_and_git_ignores_baton_s_state() {
    let dir = tempfile::tempdir().unwrap();
    let repo = real(dir.path());
    git(&repo, &["init", "-q"]);
    let sub = repo.join("pkg/inner");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(sub.join("wf.yaml"), WHERE).unwrap();

    ok(
        &baton_in(&sub, &["run", "wf.yaml"], &[]),
        "run in a repository",
    );
    assert!(repo.join(".baton/baton.db").is_file());
    assert!(!sub.join(".baton").exists());
    let ignore = std::fs::read_to_string(repo.join(".baton/.gitignore")).unwrap();
    assert!(ignore.lines().any(|line| line == "*"), "{ignore}");
    git(&repo, &["add", "-A"]);
    let staged = git(&repo, &["diff", "--cached", "--name-only"]);
    assert!(!staged.contains(".baton"), "{staged}");
    assert!(staged.contains("pkg/inner/wf.yaml"), "{staged}");
}

#[test]
fn an_existing_state_directory_gets_its_gitignore_and_one_the_user_wrote_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let top = real(dir.path());
    std::fs::create_dir_all(top.join(".baton")).unwrap();
    ok(&baton_in(&top, &["runs"], &[]), "runs");
    assert!(top.join(".baton/.gitignore").is_file());
    std::fs::write(top.join(".baton/.gitignore"), "baton.db*\n").unwrap();
    ok(&baton_in(&top, &["runs"], &[]), "runs again");
    assert_eq!(
        std::fs::read_to_string(top.join(".baton/.gitignore")).unwrap(),
        "baton.db*\n"
    );
}

#[test]
fn the_project_flag_and_baton_project_choose_the_project() {
    let dir = tempfile::tempdir().unwrap();
    let root = real(dir.path());
    let (one, two, elsewhere) = (root.join("one"), root.join("two"), root.join("elsewhere"));
    for project in [&one, &two, &elsewhere] {
        std::fs::create_dir_all(project).unwrap();
    }
    std::fs::write(one.join("wf.yaml"), WHERE).unwrap();
    ok(&baton_in(&one, &["run", "wf.yaml"], &[]), "run in one");
    let count = |run: &Run| json(run).as_array().map_or(0, Vec::len);

    // From an unrelated directory: the flag (before or after the command),
    // the variable, and the flag over the variable.
    let flag = baton_in(&elsewhere, &["runs", "--json", "--project", "../one"], &[]);
    assert_eq!(count(&flag), 1, "{}", flag.stderr);
    let before = baton_in(&elsewhere, &["--project", "../one", "runs", "--json"], &[]);
    assert_eq!(count(&before), 1, "{}", before.stderr);
    let one_text = one.to_str().unwrap();
    let two_text = two.to_str().unwrap();
    let env = baton_in(
        &elsewhere,
        &["runs", "--json"],
        &[("BATON_PROJECT", one_text)],
    );
    assert_eq!(count(&env), 1, "{}", env.stderr);
    let both = baton_in(
        &elsewhere,
        &["runs", "--json", "--project", two_text],
        &[("BATON_PROJECT", one_text)],
    );
    assert_eq!(count(&both), 0, "{}", both.stderr);
    assert!(!elsewhere.join(".baton").exists());

    let missing = baton_in(&elsewhere, &["runs", "--project", "../nope"], &[]);
    assert_eq!(missing.code, 2, "{}", missing.stderr);
    assert!(missing.stderr.contains("--project"), "{}", missing.stderr);
    assert!(!root.join("nope").exists());
}

#[test]
fn a_sub_workflow_named_from_the_project_s_top_is_found_from_a_subdirectory() {
    let dir = tempfile::tempdir().unwrap();
    let top = real(dir.path());
    std::fs::create_dir_all(top.join(".baton")).unwrap();
    std::fs::create_dir_all(top.join("flows")).unwrap();
    std::fs::write(top.join("flows/child.yaml"), WHERE).unwrap();
    std::fs::write(
        top.join("flows/parent.yaml"),
        "name: parent\nversion: '1'\ndescription: d\ntrigger: {source: manual}\nstages:\n  - name: call\n    kind: sub-workflow\n    description: d\n    agent: {role: orchestrator}\n    sub_workflow: flows/child.yaml\n",
    )
    .unwrap();
    let sub = top.join("flows");
    ok(&baton_in(&sub, &["run", "parent.yaml"], &[]), "parent run");
    assert!(top.join("pwd.txt").is_file());
}
