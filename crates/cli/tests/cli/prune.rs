//! `baton prune --older-than AGE [--dry-run]`: finished runs go with their
//! workspaces, logs, worktrees and merged branches; unfinished runs, runs
//! with unmerged work and the families of kept runs stay, and the listing
//! says why.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::project::{HEADER, Project, run_id, stage};

fn named(name: &str) -> String {
    HEADER.replacen("name: t", &format!("name: {name}"), 1)
}

fn started(project: &Project, args: &[&str], code: i32) -> String {
    let run = project.baton(args);
    assert_eq!(run.code, code, "{args:?}: {}", run.stderr);
    run_id(&run)
}

fn workspace(project: &Project, id: &str) -> PathBuf {
    let status = project.json(&["status", id, "--json"]);
    PathBuf::from(status["workspace"].as_str().expect("a workspace"))
}

fn listed<'a>(report: &'a Value, key: &str) -> Vec<&'a str> {
    report[key]
        .as_array()
        .expect("a list")
        .iter()
        .map(|entry| entry["run_id"].as_str().expect("an id"))
        .collect()
}

#[test]
fn finished_runs_go_with_their_workspaces_and_unfinished_ones_stay() {
    let project = Project::new();
    project.write(
        "ok.yaml",
        &format!("{}{}", named("ok"), stage("a", "echo done", "")),
    );
    project.write(
        "bad.yaml",
        &format!("{}{}", named("bad"), stage("a", "exit 1", "")),
    );
    project.write(
        "gated.yaml",
        &format!(
            "{}{}",
            named("gated"),
            stage(
                "g",
                "echo '- x' > outputs/g.md",
                "    writes_to: [outputs/g.md]\n    human_gate: true\n"
            )
        ),
    );
    let ok = started(&project, &["run", "ok.yaml", "--json"], 0);
    let bad = started(&project, &["run", "bad.yaml", "--json"], 2);
    let gated = started(&project, &["run", "gated.yaml", "--json"], 0);
    let external = started(
        &project,
        &["run", "ok.yaml", "--driver", "external", "--json"],
        0,
    );
    let (ok_ws, bad_ws, gated_ws) = (
        workspace(&project, &ok),
        workspace(&project, &bad),
        workspace(&project, &gated),
    );
    assert!(ok_ws.join("logs").is_dir() && bad_ws.is_dir());

    // Nothing is a day old.
    let none = project.json(&["prune", "--older-than", "1d", "--json"]);
    assert!(
        listed(&none, "pruned").is_empty() && listed(&none, "kept").is_empty(),
        "{none}"
    );

    let dry = project.json(&["prune", "--older-than", "0s", "--dry-run", "--json"]);
    assert_eq!(dry["dry_run"], true);
    assert_eq!(listed(&dry, "pruned"), [&ok, &bad], "{dry}");
    let mut kept = listed(&dry, "kept");
    kept.sort_unstable();
    let mut expected = [gated.as_str(), external.as_str()];
    expected.sort_unstable();
    assert_eq!(kept, expected, "{dry}");
    assert!(dry["kept"].to_string().contains("not finished"), "{dry}");
    assert_eq!(project.run_ids().len(), 4, "a dry run deletes nothing");
    assert!(ok_ws.is_dir() && bad_ws.is_dir());

    let table = project.baton(&["prune", "--older-than", "0s"]);
    assert_eq!(table.code, 0, "{}", table.stderr);
    assert!(
        table.stdout.contains(&format!("pruned {ok}")),
        "{}",
        table.stdout
    );
    assert!(
        table
            .stdout
            .contains(&format!("kept {gated}: it is awaiting_human, not finished")),
        "{}",
        table.stdout
    );
    let mut left = project.run_ids();
    left.sort_unstable();
    assert_eq!(left, expected);
    assert!(
        !ok_ws.exists() && !bad_ws.exists(),
        "workspaces and logs go"
    );
    assert!(gated_ws.is_dir(), "a kept run keeps its workspace");
    let gone = project.baton(&["status", &ok]);
    assert_eq!(gone.code, 1, "{}", gone.stderr);
    // The gated run still continues.
    assert_eq!(project.baton(&["gate", "approve", &gated, "g"]).code, 0);
    assert_eq!(project.baton(&["resume", &gated]).code, 0);
}

#[test]
fn a_sub_workflow_s_child_run_goes_with_its_parent() {
    let project = Project::new();
    project.write(
        "child.yaml",
        &format!("{}{}", named("child"), stage("c", "true", "")),
    );
    project.write(
        "parent.yaml",
        &format!(
            "{}  - name: call\n    kind: sub-workflow\n    description: d\n    agent: {{role: orchestrator}}\n    sub_workflow: child.yaml\n",
            named("parent")
        ),
    );
    started(&project, &["run", "parent.yaml", "--json"], 0);
    assert_eq!(project.run_ids().len(), 2);
    let report = project.json(&["prune", "--older-than", "0s", "--json"]);
    assert_eq!(listed(&report, "pruned").len(), 2, "{report}");
    assert!(project.run_ids().is_empty());
}

fn git(dir: &Path, args: &[&str]) -> String {
    #[expect(
        clippy::disallowed_methods,
        reason = "the test sets up and inspects git"
    )]
    let output = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(output.status.success(), "git {args:?}: {output:?}");
    String::from_utf8_lossy(&output.stdout)
        .trim_end()
        .to_owned()
}

/// A git project whose agents are the stand-in, and a workflow of
/// isolated stages that each commit `a.txt` with their own line.
fn repository_with(stages: &[&str]) -> Project {
    let project = Project::new();
    let dir = project.path();
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.name", "test"]);
    git(dir, &["config", "user.email", "test@localhost"]);
    project.write("a.txt", "a 1\n");
    git(dir, &["add", "a.txt"]);
    git(dir, &["commit", "-q", "-m", "start"]);
    let fake = Path::new(env!("CARGO_BIN_EXE_baton")).with_file_name("baton-fake-agent");
    project.write(
        "baton.toml",
        &format!(
            "[agents.default]\nprofile = \"fake\"\n\n[profiles.fake]\nprogram = \"{}\"\nprompt = {{ via = \"stdin\" }}\nenv_passthrough = [\"PATH\", \"HOME\"]\n",
            fake.display()
        ),
    );
    let body: String = stages.iter().map(|name| repository_stage(name)).collect();
    project.write("wf.yaml", &format!("{}{body}", named("iso")));
    project
}

/// An isolated stage whose agent writes `a.txt` with its name and commits.
fn repository_stage(name: &str) -> String {
    format!(
        "  - name: {name}\n    kind: execute\n    description: |\n      Change the code.\n      FAKE-AGENT: write a.txt {name} was here\n      FAKE-AGENT: write-listed\n      FAKE-AGENT: git-commit {name}\n    agent: {{role: coder, access: read-write, isolation: worktree}}\n    writes_to: [{name}.md]\n"
    )
}

#[test]
fn a_run_with_an_unmerged_branch_is_kept_whole_and_a_merged_one_goes() {
    // Two stages rewriting the same line: one merges, the other conflicts
    // and its branch stays unmerged.
    let project = repository_with(&["x", "y"]);
    let conflicted = started(&project, &["run", "wf.yaml", "--json"], 2);
    let report = project.json(&["prune", "--older-than", "0s", "--json"]);
    assert!(listed(&report, "pruned").is_empty(), "{report}");
    assert_eq!(listed(&report, "kept"), [&conflicted]);
    let reason = report["kept"][0]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("not merged"), "{reason}");
    assert_eq!(project.run_ids(), std::slice::from_ref(&conflicted));
    let branches = git(
        project.path(),
        &["branch", "--list", &format!("baton/{conflicted}/*")],
    );
    assert_eq!(
        branches.lines().count(),
        2,
        "no branch was touched: {branches}"
    );

    // One stage, starting from what main holds now: merged, so its run,
    // worktree records and branch go.
    let one = repository_stage("z");
    project.write("one.yaml", &format!("{}{one}", named("one")));
    let merged = started(&project, &["run", "one.yaml", "--json"], 0);
    assert!(
        project
            .path()
            .join(".baton/worktrees")
            .join(&merged)
            .exists()
    );
    let report = project.json(&["prune", "--older-than", "0s", "--json"]);
    assert_eq!(listed(&report, "pruned"), [&merged], "{report}");
    assert_eq!(listed(&report, "kept"), [&conflicted], "{report}");
    let branches = git(
        project.path(),
        &["branch", "--list", &format!("baton/{merged}/*")],
    );
    assert!(branches.is_empty(), "{branches}");
    assert!(
        !project
            .path()
            .join(".baton/worktrees")
            .join(&merged)
            .exists()
    );
    assert_eq!(project.run_ids(), [conflicted]);
}

#[test]
fn the_age_must_be_an_age_or_a_date() {
    let project = Project::new();
    for args in [
        vec!["prune"],
        vec!["prune", "--older-than", "a month"],
        vec!["prune", "--older-than", "30"],
    ] {
        let refused = project.baton(&args);
        assert_eq!(refused.code, 2, "{args:?}: {}", refused.stderr);
        assert!(
            refused.stderr.contains("--older-than"),
            "{args:?}: {}",
            refused.stderr
        );
    }
}
