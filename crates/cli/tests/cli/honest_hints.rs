//! Hints that lead somewhere: the way out a failure names works when
//! followed. A merge conflict resolved by hand is accepted without running
//! the agent again (`resume --accept-merge`); a rerun refused for a changed
//! workflow leaves the run untouched and `--accept-changes` runs it; a run
//! governance refuses does not stay listed as pending.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::project::{HEADER, Project, run_id, stage};
use crate::worktree::{git, isolated, repository};

/// Two isolated agents that both rewrite `a.txt`, and a script stage after
/// them; every agent run is logged in `witness.txt`.
fn conflicting(project: &Project) -> (baton_test_support::Run, String, String) {
    let fake = Path::new(env!("CARGO_BIN_EXE_baton")).with_file_name("baton-fake-agent");
    project.write(
        "baton.toml",
        &format!(
            "[agents.default]\nprofile = \"fake\"\n\n[profiles.fake]\nprogram = \"{}\"\nprompt = {{ via = \"stdin\" }}\nenv_passthrough = [\"PATH\", \"HOME\"]\nenv = {{ BATON_FAKE_WITNESS = \"{}\" }}\n",
            fake.display(),
            project.path().join("witness.txt").display()
        ),
    );
    let mut stages: String = ["x", "y"]
        .iter()
        .map(|name| {
            isolated(
                name,
                &[
                    &format!("write a.txt {name} was here"),
                    "write-listed",
                    &format!("git-commit {name}"),
                ],
                "",
            )
        })
        .collect();
    stages.push_str(&stage(
        "after",
        "echo done > outputs/after.md",
        "    depends_on: [x, y]\n    writes_to: [after.md]\n",
    ));
    project.write("wf.yaml", &format!("{HEADER}{stages}"));
    let run = project.baton(&["run", "wf.yaml", "--json"]);
    let id = run_id(&run);
    let status = project.json(&["status", &id, "--json"]);
    let failed: Vec<String> = status["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .filter(|stage| stage["status"] == "failed")
        .map(|stage| stage["stage"].as_str().expect("name").to_owned())
        .collect();
    assert_eq!(failed.len(), 1, "one of x and y conflicts: {status}");
    assert_eq!(project.witness().len(), 2, "{:?}", project.witness());
    (run, id, failed[0].clone())
}

/// `git ARGS` in `dir` that may fail; whether it succeeded.
fn git_may_fail(dir: &Path, args: &[&str]) -> bool {
    #[expect(clippy::disallowed_methods, reason = "the test resolves by hand")]
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    output.status.success()
}

fn run_status(project: &Project, id: &str) -> Value {
    project.json(&["status", id, "--json"])
}

#[test]
fn a_conflict_merged_by_hand_is_accepted_without_running_the_agent_again() {
    let project = repository();
    let dir = project.path();
    let (run, id, failed) = conflicting(&project);
    let branch = format!("baton/{id}/{failed}");
    // The stage's error and the run's closing hint both name the way out.
    let status = run_status(&project, &id);
    let error = status["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .find(|stage| stage["stage"] == failed.as_str())
        .and_then(|stage| stage["error"].as_str())
        .unwrap_or_default()
        .to_owned();
    let way_out = format!("`baton resume {id} --accept-merge`");
    assert!(
        error.contains(&format!("`git merge {branch}`")) && error.contains(&way_out),
        "{error}"
    );
    assert!(
        run.stderr.contains(&format!(
            "hint: '{failed}' conflicts with its target branch"
        )) && run.stderr.contains(&format!("`git merge {branch}`"))
            && run.stderr.contains(&way_out),
        "{}",
        run.stderr
    );
    // Accepting before resolving: the branch still conflicts, so the stage
    // fails again with the same way out, and no agent runs.
    let early = project.baton(&["resume", &id, "--accept-merge"]);
    assert_eq!(early.code, 2, "{}", early.stderr);
    assert!(
        early.stderr.contains("merge conflict") && early.stderr.contains(&way_out),
        "{}",
        early.stderr
    );
    assert_eq!(project.witness().len(), 2, "{:?}", project.witness());
    // The person follows the hint in the repository.
    assert!(
        !git_may_fail(dir, &["merge", "-q", &branch]),
        "it conflicts"
    );
    project.write("a.txt", "x and y, reconciled\n");
    git(dir, &["add", "a.txt"]);
    git(dir, &["commit", "-q", "--no-edit"]);
    let accepted = project.baton(&["resume", &id, "--accept-merge"]);
    assert_eq!(accepted.code, 0, "{}", accepted.stderr);
    let status = run_status(&project, &id);
    assert_eq!(status["status"], "success", "{status}");
    assert_eq!(
        project.witness().len(),
        2,
        "no agent ran again: {:?}",
        project.witness()
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("a.txt")).expect("a.txt"),
        "x and y, reconciled\n"
    );
    // Nothing was merged on top of the person's merge.
    assert_eq!(
        git(dir, &["rev-list", "--merges", "main"]).lines().count(),
        2
    );
}

#[test]
fn a_resolution_committed_on_the_stage_branch_is_merged_without_the_agent() {
    let project = repository();
    let dir = project.path();
    let (_, id, failed) = conflicting(&project);
    let worktree = dir.join(".baton/worktrees").join(&id).join(&failed);
    assert!(
        !git_may_fail(&worktree, &["merge", "-q", "main"]),
        "it conflicts"
    );
    std::fs::write(worktree.join("a.txt"), "resolved on the branch\n").expect("write");
    git(&worktree, &["add", "a.txt"]);
    git(&worktree, &["commit", "-q", "--no-edit"]);
    let accepted = project.baton(&["resume", &id, "--accept-merge"]);
    assert_eq!(accepted.code, 0, "{}", accepted.stderr);
    assert_eq!(run_status(&project, &id)["status"], "success");
    assert_eq!(project.witness().len(), 2, "{:?}", project.witness());
    assert_eq!(
        git(dir, &["show", "main:a.txt"]),
        "resolved on the branch",
        "baton merged the resolution"
    );
    assert!(
        git(dir, &["log", "-1", "--format=%s", "main"])
            .contains(&format!("baton: merge stage {failed}"))
    );
    // Nothing is left to accept: the flag says so instead of doing nothing.
    let again = project.baton(&["resume", &id, "--accept-merge"]);
    assert_ne!(again.code, 0, "{}", again.stderr);
    assert!(
        again
            .stderr
            .contains("has no stage whose branch failed to merge")
            && again.stderr.contains(&format!("`baton resume {id}`")),
        "{}",
        again.stderr
    );
}

#[test]
fn a_rerun_refused_for_a_changed_workflow_changes_nothing_and_accept_changes_runs_it() {
    let project = Project::new();
    let witness = "echo \"$BATON_STAGE\" >> \"$BATON_PROJECT_DIR/witness.txt\"";
    let stages = format!(
        "{}{}",
        stage("first", witness, ""),
        stage("second", witness, "    depends_on: [first]\n")
    );
    project.write("wf.yaml", &format!("{HEADER}{stages}"));
    let run = project.baton(&["run", "wf.yaml", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let id = run_id(&run);
    project.write("wf.yaml", &format!("{HEADER}{stages}# edited\n"));
    let before = project.baton(&["status", &id, "--json"]).stdout;
    let refused = project.baton(&["rerun", &id, "first"]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert_eq!(
        project.baton(&["status", &id, "--json"]).stdout,
        before,
        "a refused rerun leaves the run as it was"
    );
    assert!(
        refused.stderr.contains("the workflow changed since run")
            && refused
                .stderr
                .contains(&format!("`baton rerun {id} first --accept-changes`")),
        "{}",
        refused.stderr
    );
    let rerun = project.baton(&["rerun", &id, "first", "--accept-changes"]);
    assert_eq!(rerun.code, 0, "{}", rerun.stderr);
    assert_eq!(
        project.witness(),
        ["first", "second", "first", "second"],
        "both ran again"
    );
}

#[test]
fn a_run_refused_for_self_review_is_listed_failed_not_pending() {
    let project = Project::new();
    let fake = Path::new(env!("CARGO_BIN_EXE_baton")).with_file_name("baton-fake-agent");
    let toml = format!(
        "[agents.default]\nprofile = \"fake\"\n\n[profiles.fake]\nprogram = \"{}\"\nprompt = {{ via = \"stdin\" }}\nenv_passthrough = [\"PATH\", \"HOME\"]\n",
        fake.display()
    );
    project.write("baton.toml", &toml);
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}  - name: draft\n    kind: propose\n    description: d\n    agent: {{role: doc-writer}}\n    writes_to: [draft.md]\n  - name: check\n    kind: validate\n    description: d\n    depends_on: [draft]\n    reads_from: [draft]\n    agent: {{role: checker}}\n    writes_to: [validation/check.json]\n    validation: {{strategy: unit}}\n"
        ),
    );
    let run = project.baton(&["run", "wf.yaml", "--json"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let id = project.run_ids().pop().expect("the run is recorded");
    let listed = project.json(&["runs", "--json"]);
    assert_eq!(listed[0]["status"], "failed", "{listed}");
    assert!(
        run.stderr
            .contains(&format!("run {id} is recorded as failed, nothing ran"))
            && run.stderr.contains(&format!("`baton resume {id}`")),
        "{}",
        run.stderr
    );
    let status = run_status(&project, &id);
    assert_eq!(status["status"], "failed", "{status}");
    assert!(
        status["error"]
            .as_str()
            .is_some_and(|error| error.contains("under the identity that produced it")),
        "{status}"
    );
    // Settled as the refusal says: the run continues.
    project.write(
        "baton.toml",
        &format!("{toml}\n[governance]\nself_review = \"allow\"\n"),
    );
    let resumed = project.baton(&["resume", &id]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert_eq!(run_status(&project, &id)["status"], "success");
}
