//! `isolation: worktree` in real git repositories (docs/worktrees.md): parallel
//! stand-in agents that commit on their own branches are merged back one at
//! a time, conflicts fail the stage with their paths, uncommitted work
//! fails it, and nothing an agent puts in the repository's hooks or
//! configuration runs as baton.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::project::{HEADER, Project, run_id};

/// `git ARGS` in `dir`; panics when git fails; returns stdout.
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    #[expect(clippy::disallowed_methods, reason = "the test inspects git state")]
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .trim_end()
        .to_owned()
}

/// A project that is a git repository on branch `main` with one commit of
/// `a.txt`, `b.txt` and `c.txt`, and the stand-in agent as its profile.
pub(crate) fn repository() -> Project {
    let project = Project::new();
    let dir = project.path();
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.name", "test"]);
    git(dir, &["config", "user.email", "test@localhost"]);
    for name in ["a", "b", "c"] {
        project.write(&format!("{name}.txt"), &format!("{name} 1\n{name} 2\n"));
    }
    git(dir, &["add", "a.txt", "b.txt", "c.txt"]);
    git(dir, &["commit", "-q", "-m", "start"]);
    let fake = Path::new(env!("CARGO_BIN_EXE_baton")).with_file_name("baton-fake-agent");
    project.write(
        "baton.toml",
        &format!(
            "[agents.default]\nprofile = \"fake\"\n\n[profiles.fake]\nprogram = \"{}\"\nprompt = {{ via = \"stdin\" }}\nenv_passthrough = [\"PATH\", \"HOME\"]\n",
            fake.display()
        ),
    );
    project
}

/// An isolated read-write agent stage whose prompt carries `directives`.
pub(crate) fn isolated(name: &str, directives: &[&str], extra: &str) -> String {
    let lines: String = directives
        .iter()
        .map(|directive| format!("      FAKE-AGENT: {directive}\n"))
        .collect();
    format!(
        "  - name: {name}\n    kind: execute\n    description: |\n      Change the code.\n{lines}    agent: {{role: coder, access: read-write, isolation: worktree}}\n    writes_to: [{name}.md]\n{extra}"
    )
}

/// Runs the workflow; returns the exit code, the status JSON and the run id.
fn run(project: &Project, stages: &str) -> (i32, Value, String) {
    project.write("wf.yaml", &format!("{HEADER}{stages}"));
    let run = project.baton(&["run", "wf.yaml", "--json"]);
    let id = run_id(&run);
    let status = project.json(&["status", &id, "--json"]);
    (run.code, status, id)
}

fn stage<'a>(status: &'a Value, name: &str) -> &'a Value {
    status["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .find(|stage| stage["stage"] == name)
        .unwrap_or_else(|| panic!("no stage {name}: {status}"))
}

fn merges(dir: &Path) -> usize {
    git(dir, &["rev-list", "--merges", "main"]).lines().count()
}

#[test]
fn three_parallel_agents_editing_different_files_merge_cleanly() {
    let project = repository();
    let dir = project.path();
    let stages: String = ["a", "b", "c"]
        .iter()
        .map(|name| {
            isolated(
                &format!("edit_{name}"),
                &[
                    &format!("write {name}.txt {name} changed"),
                    "write-listed",
                    &format!("git-commit edit {name}"),
                ],
                "",
            )
        })
        .collect();
    // A dependant sees the merged work of all three in its worktree.
    let after = isolated(
        "after",
        &["write-listed", "git-commit nothing"],
        "    depends_on: [edit_a, edit_b, edit_c]\n",
    )
    .replace(
        "git-commit nothing",
        "write d.txt after\n      FAKE-AGENT: git-commit after",
    );
    let (code, status, id) = run(&project, &format!("{stages}{after}"));
    assert_eq!(code, 0, "{status}");
    assert_eq!(status["status"], "success", "{status}");
    assert_eq!(
        merges(dir),
        4,
        "{}",
        git(dir, &["log", "--graph", "--oneline"])
    );
    // The user's checkout was fast-forwarded and is clean.
    assert_eq!(
        git(dir, &["rev-parse", "HEAD"]),
        git(dir, &["rev-parse", "main"])
    );
    for name in ["a", "b", "c"] {
        assert_eq!(
            std::fs::read_to_string(dir.join(format!("{name}.txt"))).expect("read"),
            format!("{name} changed\n")
        );
        assert!(
            git(
                dir,
                &["rev-parse", "--verify", &format!("baton/{id}/edit_{name}")]
            )
            .len()
                == 40
        );
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("d.txt")).expect("read"),
        "after\n"
    );
    assert!(
        git(dir, &["status", "--porcelain", "--untracked-files=no"]).is_empty(),
        "the checkout is clean"
    );
    // The worktrees inside the checkout are invisible to the user's git.
    let untracked = git(dir, &["status", "--porcelain", "--untracked-files=all"]);
    assert!(!untracked.contains(".baton/worktrees"), "{untracked}");
    // Inputs and outputs were never committed; the outputs reached the
    // workspace.
    let tree = git(dir, &["ls-tree", "-r", "--name-only", "main"]);
    assert!(!tree.contains("inputs/") && !tree.contains(".md"), "{tree}");
    let workspace = Path::new(status["workspace"].as_str().expect("workspace"));
    for name in ["edit_a", "edit_b", "edit_c", "after"] {
        assert!(
            workspace.join(format!("outputs/{name}.md")).is_file(),
            "{name}"
        );
    }
    git(dir, &["fsck", "--strict"]);
    // `baton resume` of the finished run merges nothing twice.
    let _ = project.baton(&["resume", &id]);
    assert_eq!(merges(dir), 4);
}

#[test]
fn two_agents_editing_the_same_lines_conflict_and_the_second_fails_naming_the_path() {
    let project = repository();
    let dir = project.path();
    let stages: String = ["x", "y"]
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
    let (code, status, id) = run(&project, &stages);
    assert_ne!(code, 0, "{status}");
    let failed: Vec<&str> = ["x", "y"]
        .into_iter()
        .filter(|name| stage(&status, name)["status"] == "failed")
        .collect();
    assert_eq!(failed.len(), 1, "{status}");
    let error = stage(&status, failed[0])["error"]
        .as_str()
        .unwrap_or_default();
    assert!(
        error.contains("merge conflict") && error.contains("a.txt"),
        "{error}"
    );
    // The losing branch is kept for inspection; the target has one merge.
    git(
        dir,
        &[
            "rev-parse",
            "--verify",
            &format!("baton/{id}/{}", failed[0]),
        ],
    );
    assert_eq!(merges(dir), 1);
    assert!(git(dir, &["status", "--porcelain", "--untracked-files=no"]).is_empty());
    git(dir, &["fsck", "--strict"]);
}

#[test]
fn what_an_agent_leaves_uncommitted_is_committed_by_baton_and_merged() {
    let project = repository();
    let dir = project.path();
    let (code, status, id) = run(
        &project,
        &isolated("lazy", &["write a.txt edited", "write-listed"], ""),
    );
    assert_eq!(code, 0, "{status}");
    assert_eq!(merges(dir), 1);
    assert_eq!(
        std::fs::read_to_string(dir.join("a.txt")).expect("read"),
        "edited\n"
    );
    let subject = git(
        dir,
        &["log", "-1", "--format=%s %an", &format!("baton/{id}/lazy")],
    );
    assert_eq!(
        subject,
        format!("baton: changes of stage lazy in run {id} baton")
    );
}

#[test]
fn stages_named_like_baton_s_worktree_records_get_worktrees_of_their_own() {
    let project = repository();
    let dir = project.path();
    let stages = [
        isolated(
            "config.digest",
            &["write a.txt from config", "write-listed"],
            "",
        ),
        isolated("b", &["write b.txt from b", "write-listed"], ""),
        isolated("b.start", &["write c.txt from b.start", "write-listed"], ""),
    ]
    .concat();
    let (code, status, _) = run(&project, &stages);
    assert_eq!(code, 0, "{status}");
    for (file, text) in [
        ("a.txt", "from config\n"),
        ("b.txt", "from b\n"),
        ("c.txt", "from b.start\n"),
    ] {
        assert_eq!(
            std::fs::read_to_string(dir.join(file)).expect("read"),
            text,
            "{file}"
        );
    }
}

#[test]
fn a_read_write_agent_that_changes_nothing_fails_its_stage() {
    let project = repository();
    let dir = project.path();
    let (code, status, id) = run(&project, &isolated("idle", &["write-listed"], ""));
    assert_ne!(code, 0, "{status}");
    let error = stage(&status, "idle")["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&format!("no changes on branch baton/{id}/idle")),
        "{error}"
    );
    assert_eq!(merges(dir), 0);
}

#[test]
fn hooks_and_fsmonitor_an_agent_sets_never_run_as_baton() {
    let project = repository();
    let dir = project.path();
    let common = dir.join(".git");
    let hook_marker = dir.join("hook-ran");
    let monitor_marker = dir.join("fsmonitor-ran");
    let hook = common.join("hooks/post-merge");
    // One agent installs a post-merge hook (which baton's merge and the
    // fast-forward of the checkout would run if hooks were enabled).
    let hooked = isolated(
        "hooked",
        &[
            &format!(
                "write-outside {} touch {}",
                hook.display(),
                hook_marker.display()
            ),
            &format!("chmod-x {}", hook.display()),
            "write b.txt hooked",
            "write-listed",
            "git-commit hooked",
        ],
        "",
    );
    let (code, status, _) = run(&project, &hooked);
    assert_eq!(code, 0, "{status}");
    assert_eq!(merges(dir), 1);
    assert!(
        !hook_marker.exists(),
        "baton ran the agent's post-merge hook"
    );
    // The hook is real: git without baton's hardening runs it.
    git(dir, &["hook", "run", "post-merge"]);
    assert!(hook_marker.exists());

    // Another sets core.fsmonitor after committing: baton fails closed
    // rather than run git under the changed configuration.
    let monitored = isolated(
        "monitored",
        &[
            "write c.txt monitored",
            "write-listed",
            "git-commit monitored",
            &format!(
                "git-config core.fsmonitor touch {}",
                monitor_marker.display()
            ),
        ],
        "",
    );
    let (code, status, _) = run(&project, &monitored);
    assert_ne!(code, 0, "{status}");
    let error = stage(&status, "monitored")["error"]
        .as_str()
        .unwrap_or_default();
    assert!(error.contains("git configuration changed"), "{error}");
    assert!(!monitor_marker.exists(), "baton ran the agent's fsmonitor");
    assert_eq!(merges(dir), 1);
    git(dir, &["config", "--unset", "core.fsmonitor"]);
    git(dir, &["fsck", "--strict"]);
}

#[test]
fn a_detached_head_fails_isolated_stages_clearly() {
    let project = repository();
    let dir = project.path();
    git(dir, &["checkout", "-q", "--detach"]);
    let (code, status, _) = run(
        &project,
        &isolated("s", &["write-listed", "git-commit s"], ""),
    );
    assert_ne!(code, 0, "{status}");
    let error = stage(&status, "s")["error"].as_str().unwrap_or_default();
    assert!(error.contains("detached"), "{error}");
}

#[test]
fn fan_out_children_get_worktrees_of_their_own_and_list_and_prune_clean_up() {
    let project = repository();
    let dir = project.path();
    project.write(
        "items.json",
        r#"{"items": [{"id": "a"}, {"id": "b"}, {"id": "c"}]}"#,
    );
    // Each child appends to a file of its own, named by its item, which it
    // finds in its worktree's copy of the repository.
    let stages = "  - name: src\n    kind: execute\n    description: d\n    executor: inline\n    script: |\n      cp \"$BATON_PROJECT_DIR/items.json\" outputs/src.json\n    writes_to: [src.json]\n  - name: fan\n    kind: execute\n    description: |\n      Edit {id}.txt.\n      FAKE-AGENT: write {id}.txt child {id}\n      FAKE-AGENT: write-listed\n      FAKE-AGENT: git-commit child\n    agent: {role: coder, access: read-write}\n    depends_on: [src]\n    reads_from: [src]\n    fan_out: {source: src, field: items, key: id, mode: agent, isolation: worktree}\n    writes_to: ['fan-{id}.md']\n";
    let (code, status, id) = run(&project, stages);
    assert_eq!(code, 0, "{status}");
    assert_eq!(
        merges(dir),
        3,
        "{}",
        git(dir, &["log", "--graph", "--oneline"])
    );
    let listed = project.json(&["worktree", "list", &id, "--json"]);
    let branches: Vec<&str> = listed
        .as_array()
        .expect("list")
        .iter()
        .map(|entry| {
            assert_eq!(entry["merged"], true, "{entry}");
            assert_eq!(entry["target"], "main", "{entry}");
            entry["branch"].as_str().expect("branch")
        })
        .collect();
    for key in ["a", "b", "c"] {
        assert!(
            branches.contains(&format!("baton/{id}/fan/{key}").as_str()),
            "{branches:?}"
        );
    }
    // Each child saw the source's output under inputs/.
    let worktree = dir.join(format!(".baton/worktrees/{id}/fan-a"));
    assert!(worktree.join("inputs/outputs/src.json").is_file());
    assert!(worktree.join("inputs/stages/000-src.json").is_file());
    let pruned = project.json(&["worktree", "prune", &id, "--json"]);
    assert_eq!(
        pruned["deleted_branches"]
            .as_array()
            .expect("deleted")
            .len(),
        3,
        "{pruned}"
    );
    assert!(!worktree.exists());
    assert!(!dir.join(format!(".baton/worktrees/{id}")).exists());
    assert!(git(dir, &["branch", "--list", "baton/*"]).is_empty());
    assert_eq!(merges(dir), 3);
    git(dir, &["fsck", "--strict"]);
}

#[test]
fn prune_keeps_unmerged_branches() {
    let project = repository();
    let dir = project.path();
    let stages: String = ["x", "y"]
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
    let (_, status, id) = run(&project, &stages);
    let loser = ["x", "y"]
        .into_iter()
        .find(|name| stage(&status, name)["status"] == "failed")
        .expect("a conflict");
    let pruned = project.json(&["worktree", "prune", &id, "--json"]);
    assert_eq!(
        pruned["deleted_branches"]
            .as_array()
            .expect("deleted")
            .len(),
        1
    );
    let kept = pruned["kept"].to_string();
    assert!(kept.contains(&format!("baton/{id}/{loser}")), "{kept}");
    git(
        dir,
        &["rev-parse", "--verify", &format!("baton/{id}/{loser}")],
    );
}

#[test]
fn kill_9_during_isolated_stages_and_merges_then_resume_merges_each_branch_once() {
    use std::time::Duration;

    for round in 0..8_u64 {
        let project = repository();
        let dir = project.path();
        let stages: String = ["a", "b", "c"]
            .iter()
            .map(|name| {
                isolated(
                    &format!("edit_{name}"),
                    &[
                        &format!("write {name}.txt {name} changed"),
                        "write-listed",
                        &format!("git-commit edit {name}"),
                    ],
                    "",
                )
            })
            .collect();
        project.write("wf.yaml", &format!("{HEADER}{stages}"));
        let mut child = project
            .command(&["run", "wf.yaml", "--json"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("baton starts");
        // Spread the kills over creation, agents and merges.
        std::thread::sleep(Duration::from_millis(150 + round * 120));
        let _ = child.kill();
        let _ = child.wait();
        let Some(id) = project.run_ids().pop() else {
            continue;
        };
        let mut status = Value::Null;
        for _ in 0..3 {
            let _ = project.baton(&["resume", &id]);
            status = project.json(&["status", &id, "--json"]);
            if status["status"] == "success" {
                break;
            }
        }
        assert_eq!(status["status"], "success", "round {round}: {status}");
        assert_eq!(
            merges(dir),
            3,
            "round {round}: {}",
            git(dir, &["log", "--graph", "--oneline"])
        );
        for name in ["a", "b", "c"] {
            git(
                dir,
                &["rev-parse", "--verify", &format!("baton/{id}/edit_{name}")],
            );
            assert_eq!(
                std::fs::read_to_string(dir.join(format!("{name}.txt"))).expect("read"),
                format!("{name} changed\n"),
                "round {round}"
            );
        }
        git(dir, &["fsck", "--strict"]);
    }
}

/// The states a kill -9 in the middle of a merge leaves, made on purpose:
/// the integration worktree merging with a stale `index.lock`, and a
/// stage re-run after its branch was already merged. The re-run succeeds
/// and adds no merge commit.
#[test]
fn a_rerun_after_an_interrupted_merge_repairs_the_integration_worktree_and_merges_nothing_twice() {
    let project = repository();
    let dir = project.path();
    let stages = isolated(
        "edit",
        &["write a.txt edited", "write-listed", "git-commit edit"],
        "",
    );
    let (code, status, id) = run(&project, &stages);
    assert_eq!(code, 0, "{status}");
    assert_eq!(merges(dir), 1);
    // A merge left half done in the integration worktree, and git's lock.
    let integration = dir.join(format!(".baton/worktrees/{id}/_integration"));
    let side = dir.join("side");
    git(dir, &["branch", "side", "HEAD~1"]);
    git(
        dir,
        &[
            "worktree",
            "add",
            "-q",
            side.to_str().expect("utf-8"),
            "side",
        ],
    );
    std::fs::write(side.join("a.txt"), "conflicting\n").expect("write");
    git(
        &side,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@l",
            "commit",
            "-q",
            "-am",
            "side",
        ],
    );
    #[expect(clippy::disallowed_methods, reason = "a merge that must fail")]
    let conflicted = Command::new("git")
        .arg("-C")
        .arg(&integration)
        .args(["-c", "user.name=t", "-c", "user.email=t@l", "merge", "side"])
        .output()
        .expect("git runs");
    assert!(!conflicted.status.success());
    let git_dir = git(
        &integration,
        &["rev-parse", "--path-format=absolute", "--git-dir"],
    );
    assert!(Path::new(&git_dir).join("MERGE_HEAD").exists());
    std::fs::write(Path::new(&git_dir).join("index.lock"), "").expect("lock");
    // A re-run with nothing new on the branch merges nothing (and so does
    // not even need the integration worktree).
    let rerun = project.baton(&["rerun", &id, "edit"]);
    assert_eq!(rerun.code, 0, "{}", rerun.stderr);
    assert_eq!(
        merges(dir),
        1,
        "{}",
        git(dir, &["log", "--graph", "--oneline"])
    );
    // Work committed on the branch since: the re-run merges it, through the
    // integration worktree the "crash" left merging and locked.
    let worktree = dir.join(format!(".baton/worktrees/{id}/edit"));
    std::fs::write(worktree.join("b.txt"), "more\n").expect("write");
    git(
        &worktree,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@l",
            "commit",
            "-q",
            "-am",
            "more",
        ],
    );
    let rerun = project.baton(&["rerun", &id, "edit"]);
    assert_eq!(rerun.code, 0, "{}", rerun.stderr);
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "success", "{status}");
    assert_eq!(
        merges(dir),
        2,
        "{}",
        git(dir, &["log", "--graph", "--oneline"])
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("b.txt")).expect("read"),
        "more\n"
    );
    assert!(!Path::new(&git_dir).join("MERGE_HEAD").exists());
    git(
        dir,
        &[
            "worktree",
            "remove",
            "--force",
            side.to_str().expect("utf-8"),
        ],
    );
    git(dir, &["fsck", "--strict"]);
}

#[test]
fn two_baton_processes_merging_into_one_repository_lose_nothing() {
    let project = repository();
    let dir = project.path();
    for (file, names) in [("one.yaml", ["a", "b"]), ("two.yaml", ["c", "d"])] {
        let stages: String = names
            .iter()
            .map(|name| {
                isolated(
                    &format!("edit_{name}"),
                    &[
                        &format!("write {name}-new.txt {name}"),
                        "write-listed",
                        &format!("git-commit {name}"),
                    ],
                    "",
                )
            })
            .collect();
        project.write(file, &format!("{HEADER}{stages}"));
    }
    let children: Vec<_> = ["one.yaml", "two.yaml"]
        .iter()
        .map(|file| {
            project
                .command(&["run", file, "--json"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("baton starts")
        })
        .collect();
    for mut child in children {
        let code = crate::project::wait_bounded(
            &mut child,
            "baton run",
            std::time::Duration::from_secs(120),
        );
        assert_eq!(code, 0);
    }
    assert_eq!(
        merges(dir),
        4,
        "{}",
        git(dir, &["log", "--graph", "--oneline"])
    );
    for name in ["a", "b", "c", "d"] {
        assert_eq!(
            std::fs::read_to_string(dir.join(format!("{name}-new.txt"))).expect("merged"),
            format!("{name}\n")
        );
    }
    assert!(git(dir, &["status", "--porcelain", "--untracked-files=no"]).is_empty());
    git(dir, &["fsck", "--strict"]);
}

#[test]
fn a_dirty_checkout_of_the_target_is_never_moved_and_resume_merges_once_it_is_clean() {
    let project = repository();
    let dir = project.path();
    project.write("a.txt", "the user's edit\n");
    let stages = isolated(
        "edit",
        &["write b.txt edited", "write-listed", "git-commit edit"],
        "",
    );
    let (code, status, id) = run(&project, &stages);
    assert_ne!(code, 0, "{status}");
    let error = stage(&status, "edit")["error"].as_str().unwrap_or_default();
    assert!(error.contains("uncommitted changes"), "{error}");
    assert_eq!(merges(dir), 0);
    assert_eq!(
        std::fs::read_to_string(dir.join("a.txt")).expect("read"),
        "the user's edit\n"
    );
    git(dir, &["commit", "-q", "-am", "the user's edit"]);
    let resumed = project.baton(&["resume", &id]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert_eq!(merges(dir), 1);
    assert_eq!(
        std::fs::read_to_string(dir.join("b.txt")).expect("read"),
        "edited\n"
    );
    git(dir, &["fsck", "--strict"]);
}

#[test]
fn a_configuration_one_agent_sets_stops_its_siblings_merges_too() {
    let project = repository();
    let dir = project.path();
    let marker = dir.join("driver-ran");
    // `sneaky` sets a merge driver for every file; `honest` commits later,
    // and its merge would run that driver if baton merged it.
    let driver = format!("git-config merge.evil.driver touch {}", marker.display());
    let attributes = format!(
        "write-outside {} * merge=evil",
        dir.join(".git/info/attributes").display()
    );
    let stages = format!(
        "{}{}",
        isolated(
            "sneaky",
            &["write-listed", "git-commit sneaky", &driver, &attributes],
            "",
        ),
        isolated(
            "honest",
            &[
                "sleep 1",
                "write a.txt honest",
                "write-listed",
                "git-commit honest"
            ],
            "",
        ),
    );
    let (code, status, _) = run(&project, &stages);
    assert_ne!(code, 0, "{status}");
    for name in ["sneaky", "honest"] {
        let error = stage(&status, name)["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("git configuration changed"),
            "{name}: {error}"
        );
    }
    assert!(!marker.exists(), "baton ran the agent's merge driver");
    assert_eq!(merges(dir), 0);
    git(dir, &["fsck", "--strict"]);
}

/// The driver protocol hands an isolated stage out with its worktree; the
/// orchestrator's agent works and commits there; `complete` copies the
/// outputs back, verifies them and merges the branch, as the built-in
/// executor does. A stage completed without a change fails.
#[test]
fn the_driver_protocol_hands_out_worktrees_and_merges_on_complete() {
    let project = repository();
    let dir = project.path();
    let stages = format!(
        "{}{}",
        isolated(
            "edit",
            &["write a.txt a changed", "write-listed", "git-commit edit a"],
            ""
        ),
        isolated("lazy", &["write-listed"], "    depends_on: [edit]\n"),
    );
    project.write("wf.yaml", &format!("{HEADER}{stages}"));
    let created = project.json(&["run", "wf.yaml", "--driver", "external", "--json"]);
    let id = created["run_id"].as_str().expect("run id").to_owned();

    let ready = project.json(&["next", &id, "--json"]);
    let ready = ready.as_array().expect("ready stages");
    assert_eq!(ready.len(), 1, "{ready:?}");
    assert_eq!(ready[0]["stage"], "edit");
    let worktree = Path::new(ready[0]["worktree"].as_str().expect("a worktree path"));
    assert!(worktree.is_absolute() && worktree.join(".git").exists());
    assert_eq!(
        git(worktree, &["rev-parse", "--abbrev-ref", "HEAD"]),
        format!("baton/{id}/edit")
    );
    // Listing again hands out the same worktree, without resetting it.
    std::fs::write(worktree.join("scratch.txt"), "in progress\n").expect("write");
    let again = project.json(&["next", &id, "--json"]);
    assert_eq!(again[0]["worktree"], ready[0]["worktree"]);
    assert!(
        worktree.join("scratch.txt").exists(),
        "the worktree was reset"
    );
    std::fs::remove_file(worktree.join("scratch.txt")).expect("remove");

    // The orchestrator's agent: the stand-in, in the worktree, with the prompt.
    let prompt = ready[0]["prompt"].as_str().expect("prompt");
    assert!(prompt.contains("## Isolation"), "{prompt}");
    run_agent(worktree, prompt);
    let completed = project.baton(&["complete", &id, "edit", "--json"]);
    assert_eq!(completed.code, 0, "{}", completed.stderr);
    assert_eq!(
        merges(dir),
        1,
        "{}",
        git(dir, &["log", "--graph", "--oneline"])
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("a.txt")).expect("read"),
        "a changed\n"
    );

    // The next stage's agent writes its output but changes nothing.
    let ready = project.json(&["next", &id, "--json"]);
    assert_eq!(ready[0]["stage"], "lazy", "{ready}");
    let worktree = Path::new(ready[0]["worktree"].as_str().expect("a worktree path"));
    run_agent(worktree, ready[0]["prompt"].as_str().expect("prompt"));
    let completed = project.baton(&["complete", &id, "lazy", "--json"]);
    assert_ne!(completed.code, 0, "{}", completed.stdout);
    let status = project.json(&["status", &id, "--json"]);
    let error = stage(&status, "lazy")["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&format!("no changes on branch baton/{id}/lazy")),
        "{error}"
    );
    assert_eq!(merges(dir), 1);
    git(dir, &["fsck", "--strict"]);
}

/// A branch that conflicts at `complete` fails the stage with the way on
/// that the protocol has (reset the stage, hand it out again), not with
/// `--accept-merge`, which only a run baton drives can take.
#[test]
fn a_conflict_at_complete_names_the_protocol_s_way_on() {
    let project = repository();
    let dir = project.path();
    let stages = isolated(
        "edit",
        &["write a.txt a changed", "write-listed", "git-commit edit a"],
        "",
    );
    project.write("wf.yaml", &format!("{HEADER}{stages}"));
    let created = project.json(&["run", "wf.yaml", "--driver", "external", "--json"]);
    let id = created["run_id"].as_str().expect("run id").to_owned();
    let ready = project.json(&["next", &id, "--json"]);
    let worktree = Path::new(ready[0]["worktree"].as_str().expect("a worktree path"));
    run_agent(worktree, ready[0]["prompt"].as_str().expect("prompt"));
    // Meanwhile the same line changed on the target.
    std::fs::write(dir.join("a.txt"), "a elsewhere\n").expect("write");
    git(dir, &["commit", "-qam", "a elsewhere"]);

    let completed = project.baton(&["complete", &id, "edit"]);
    assert_eq!(completed.code, 2, "{}", completed.stderr);
    let stderr = &completed.stderr;
    assert!(
        stderr.contains("resolve the conflicts")
            && stderr.contains(&format!("`baton rerun {id} edit`"))
            && !stderr.contains("--accept-merge"),
        "{stderr}"
    );
}

/// Runs the stand-in agent in `cwd` with `prompt` on stdin, as an
/// orchestrator's agent would.
fn run_agent(cwd: &Path, prompt: &str) {
    use std::io::Write as _;
    let fake = Path::new(env!("CARGO_BIN_EXE_baton")).with_file_name("baton-fake-agent");
    #[expect(
        clippy::disallowed_methods,
        reason = "the test plays the orchestrator, which spawns its own agents"
    )]
    let mut child = Command::new(fake)
        .current_dir(cwd)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("the stand-in agent starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(prompt.as_bytes())
        .expect("prompt written");
    assert!(child.wait().expect("the agent ends").success());
}

/// An externally driven run of one isolated stage whose agent has done its
/// work, and the marker a `complete` that died just before merging leaves;
/// returns the run's id and workspace.
fn a_merge_begun_by_a_killed_complete(project: &Project) -> (String, std::path::PathBuf) {
    let stages = isolated(
        "edit",
        &["write a.txt a changed", "write-listed", "git-commit edit a"],
        "",
    );
    project.write("wf.yaml", &format!("{HEADER}{stages}"));
    let created = project.json(&["run", "wf.yaml", "--driver", "external", "--json"]);
    let id = created["run_id"].as_str().expect("run id").to_owned();
    let workspace = Path::new(created["workspace"].as_str().expect("workspace")).to_path_buf();
    let ready = project.json(&["next", &id, "--json"]);
    let worktree = Path::new(ready[0]["worktree"].as_str().expect("a worktree path"));
    run_agent(worktree, ready[0]["prompt"].as_str().expect("prompt"));
    std::fs::write(workspace.join("dispatch/000-edit.merging"), "edit").expect("marker");
    (id, workspace)
}

/// `next` after a `complete` killed just before its merge finishes the
/// merge rather than handing the stage out again.
#[test]
fn next_finishes_a_merge_a_crashed_complete_began() {
    let project = repository();
    let (id, workspace) = a_merge_begun_by_a_killed_complete(&project);
    assert_eq!(
        project.json(&["next", &id, "--json"]),
        serde_json::json!([])
    );
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "success", "{status}");
    assert_eq!(merges(project.path()), 1);
    assert!(!workspace.join("dispatch/000-edit.merging").exists());
}

/// A `complete` that died after verifying an isolated stage and before
/// recording it (its marker left in `dispatch/`): `baton resume` finishes
/// it — verified, merged once, recorded — and a second resume changes
/// nothing.
#[test]
fn resume_of_an_external_run_finishes_a_merge_a_crashed_complete_began() {
    let project = repository();
    let dir = project.path();
    let (id, workspace) = a_merge_begun_by_a_killed_complete(&project);
    let resumed = project.baton(&["resume", &id]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert!(
        resumed
            .stderr
            .contains("finished the interrupted completion of edit"),
        "{}",
        resumed.stderr
    );
    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "success", "{status}");
    assert_eq!(merges(dir), 1);
    assert!(!workspace.join("dispatch/000-edit.merging").exists());
    let again = project.baton(&["resume", &id]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(merges(dir), 1);
    git(dir, &["fsck", "--strict"]);
}

/// Through the protocol, a new attempt of an isolated stage (here after
/// `baton rerun` of the stage it reads from) gets its worktree reset and
/// its `inputs/` filled afresh, as `baton run` gives it: not the last
/// attempt's worktree with the old inputs.
#[test]
fn a_new_attempt_handed_out_gets_a_fresh_worktree_with_current_inputs() {
    let project = repository();
    let reader = isolated(
        "edit",
        &["write a.txt a changed", "write-listed", "git-commit edit a"],
        "    depends_on: [up]\n    reads_from: [up]\n",
    );
    let up = "  - name: up\n    kind: execute\n    description: d\n    agent: {role: writer}\n    writes_to: [up.md]\n";
    project.write("wf.yaml", &format!("{HEADER}{up}{reader}"));
    let created = project.json(&["run", "wf.yaml", "--driver", "external", "--json"]);
    let id = created["run_id"].as_str().expect("run id").to_owned();
    let workspace = Path::new(created["workspace"].as_str().expect("workspace")).to_path_buf();
    let hand_out = |stage: &str| {
        let ready = project.json(&["next", &id, "--json"]);
        assert_eq!(ready[0]["stage"], stage, "{ready}");
        ready[0].clone()
    };
    let complete = |stage: &str| {
        let completed = project.baton(&["complete", &id, stage]);
        assert_eq!(completed.code, 0, "{stage}: {}", completed.stderr);
    };
    let mut seen = Vec::new();
    for version in ["one", "two"] {
        hand_out("up");
        std::fs::write(workspace.join("outputs/up.md"), version).expect("up's output");
        complete("up");
        let edit = hand_out("edit");
        let worktree = Path::new(edit["worktree"].as_str().expect("a worktree path"));
        let input =
            std::fs::read_to_string(worktree.join("inputs/outputs/up.md")).expect("up's output");
        seen.push(input);
        if version == "one" {
            run_agent(worktree, edit["prompt"].as_str().expect("prompt"));
            complete("edit");
            let rerun = project.baton(&["rerun", &id, "up"]);
            assert_eq!(rerun.code, 0, "{}", rerun.stderr);
        }
    }
    assert_eq!(seen, ["one", "two"]);
}
