//! Every runnable workflow of the reference corpus, run for real with the
//! stand-in agent (`baton-fake-agent`) as the profile for every role: each
//! must run to completion or to its first human gate.
//!
//! The workflows are copied into a scratch directory at test time (their
//! includes are relative to it); nothing of the corpus is kept.

use std::path::{Path, PathBuf};

use baton_test_support::compat_dir;
use serde_json::Value;

use crate::baton;

/// The corpus workflows with run-time fan-outs (agent children), with the
/// fan-out stages of each.
const FAN_OUTS: &[(&str, &[&str])] = &[
    (
        "workflows/code/design-criteria-audit.yaml",
        &["audit-domains", "verify-high-stakes-findings"],
    ),
    (
        "workflows/tests/categorize-test-cases.yaml",
        &["classify-methods"],
    ),
];

/// Run-time parameters some workflows need and do not declare.
fn params_for(file: &str) -> &'static [&'static str] {
    match file {
        // Its `when` conditions read `{pr_size}`; a small PR skips the
        // swarm's fan-out stages.
        "workflows/code/review-and-fix.yaml" => &["--params", "pr_size=small"],
        _ => &[],
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("readable") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

fn fake_agent() -> PathBuf {
    let path = Path::new(env!("CARGO_BIN_EXE_baton")).with_file_name("baton-fake-agent");
    assert!(
        path.is_file(),
        "{} is missing: build the workspace (cargo build --workspace) first",
        path.display()
    );
    path
}

#[test]
fn every_compat_workflow_runs_to_its_end_or_first_gate_with_the_stand_in_agent() {
    let Some(corpus) = compat_dir() else { return };
    let scratch = tempfile::tempdir().expect("temp dir");
    copy_tree(&corpus.join("workflows"), &scratch.path().join("workflows"));
    std::fs::write(
        scratch.path().join("baton.toml"),
        format!(
            "[agents.default]\nprofile = \"fake\"\n\n[profiles.fake]\nprogram = \"{}\"\nprompt = {{ via = \"stdin\" }}\nenv_passthrough = [\"PATH\", \"HOME\"]\n{JUDGES}",
            fake_agent().display()
        ),
    )
    .expect("write baton.toml");

    let mut files = Vec::new();
    let mut stack = vec![scratch.path().join("workflows")];
    while let Some(directory) = stack.pop() {
        for entry in std::fs::read_dir(&directory).expect("readable").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path
                .extension()
                .is_some_and(|extension| extension == "yaml")
            {
                let text = std::fs::read_to_string(&path).expect("readable");
                if !text.lines().any(|line| line.starts_with("fragment:")) {
                    files.push(
                        path.strip_prefix(scratch.path())
                            .expect("below")
                            .to_string_lossy()
                            .into_owned(),
                    );
                }
            }
        }
    }
    files.sort();
    assert_eq!(files.len(), 30);

    let mut reached = Vec::new();
    for file in &files {
        let mut args = vec!["run", file.as_str(), "--json"];
        args.extend_from_slice(params_for(file));
        // Bounded: a run that hangs fails with its progress and the
        // processes left, rather than the whole test timing out.
        let run = baton_test_support::run_bounded(
            Path::new(env!("CARGO_BIN_EXE_baton")),
            scratch.path(),
            &args,
            std::time::Duration::from_secs(90),
        );
        let outcome: Value = serde_json::from_str(&run.stdout)
            .unwrap_or_else(|error| panic!("{file}: {error}\n{}", run.stderr));
        assert_eq!(run.code, 0, "{file}: {outcome}\n{}", run.stderr);
        let status = outcome["status"].as_str().expect("status");
        assert!(
            status == "success" || status == "awaiting_human",
            "{file}: {status}"
        );
        // Every stage before the stop really ran and was verified.
        let id = outcome["run_id"].as_str().expect("id");
        let detail: Value =
            serde_json::from_str(&baton(scratch.path(), &["status", id, "--json"]).stdout)
                .expect("status JSON");
        for stage in detail["stages"].as_array().expect("stages") {
            let stage_status = stage["status"].as_str().expect("status");
            assert!(
                ["success", "skipped", "pending"].contains(&stage_status),
                "{file}: {stage}"
            );
        }
        if status == "awaiting_human" {
            let workspace = Path::new(detail["workspace"].as_str().expect("workspace"));
            assert!(
                workspace
                    .join("dispatch")
                    .read_dir()
                    .expect("dispatch files")
                    .next()
                    .is_some(),
                "{file}: agents got dispatch files"
            );
        }
        reached.push(file.clone());
    }
    assert_eq!(reached.len(), 30);
}

/// Runs `file` in `dir`, approving every human gate through `baton gate
/// approve` and resuming, until the run succeeds; returns the run id and
/// the number of gates approved.
fn run_through_gates(dir: &Path, file: &str, items: usize) -> (String, usize) {
    let run = baton(dir, &["run", file, "--json"]);
    let mut outcome: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|error| panic!("{file}: {error}\n{}", run.stderr));
    let id = outcome["run_id"].as_str().expect("id").to_owned();
    let mut gates = 0;
    while outcome["status"] == "awaiting_human" {
        gates += 1;
        assert!(gates <= 5, "{file}: more gates than expected");
        let gate = outcome["gate"].as_str().expect("the gate stage").to_owned();
        let approve = baton(dir, &["gate", "approve", &id, &gate]);
        assert_eq!(approve.code, 0, "{file}: {}", approve.stderr);
        let resume = baton(dir, &["resume", &id, "--json"]);
        outcome = serde_json::from_str(&resume.stdout)
            .unwrap_or_else(|error| panic!("{file}: {error}\n{}", resume.stderr));
    }
    assert_eq!(
        outcome["status"], "success",
        "{file} ({items} items): {outcome}"
    );
    (id, gates)
}

/// Validators run the stand-in agent under a profile of their own: a
/// validator may not share the identity of the stage it judges.
const JUDGES: &str = "\n[agents.validator]\nprofile = \"judge\"\n\n[agents.challenger]\nprofile = \"judge\"\n\n[agents.evidence]\nprofile = \"judge\"\n\n[profiles.judge]\nextends = \"fake\"\n";

/// Writes a `baton.toml` in `dir` whose every role runs the stand-in agent,
/// generating `items` items for every fan-out source.
fn fake_agents(dir: &Path, items: usize) {
    std::fs::write(
        dir.join("baton.toml"),
        format!(
            "[agents.default]\nprofile = \"fake\"\n\n[profiles.fake]\nprogram = \"{}\"\nprompt = {{ via = \"stdin\" }}\nenv_passthrough = [\"PATH\", \"HOME\"]\nenv = {{ BATON_FAKE_ITEMS = \"{items}\" }}\n{JUDGES}",
            fake_agent().display()
        ),
    )
    .expect("write baton.toml");
}

/// Runs the corpus's fan-out workflows `files` with the stand-in agent
/// generating `items` items for every fan-out source; approves each human
/// gate through `baton gate approve` and resumes until the run succeeds.
/// Every fan-out stage must have run one child per item.
fn fan_out_workflows_run_to_the_end(items: usize, files: &[&str]) {
    let Some(corpus) = compat_dir() else { return };
    let scratch = tempfile::tempdir().expect("temp dir");
    copy_tree(&corpus.join("workflows"), &scratch.path().join("workflows"));
    fake_agents(scratch.path(), items);
    for file in files {
        let fan_outs = FAN_OUTS
            .iter()
            .find(|(name, _)| name == file)
            .map(|(_, stages)| *stages)
            .unwrap_or_else(|| panic!("{file} is not in FAN_OUTS"));
        let (id, gates) = run_through_gates(scratch.path(), file, items);
        assert!(gates >= 1, "{file}: its human gate was approved");
        let detail: Value =
            serde_json::from_str(&baton(scratch.path(), &["status", &id, "--json"]).stdout)
                .expect("status JSON");
        let workspace = Path::new(detail["workspace"].as_str().expect("workspace"));
        for stage in detail["stages"].as_array().expect("stages") {
            assert_eq!(stage["status"], "success", "{file}: {stage}");
            let name = stage["stage"].as_str().expect("name");
            if !fan_outs.contains(&name) {
                continue;
            }
            let index = stage["index"].as_u64().expect("index");
            for item in 1..=items {
                let stem = format!("{index:03}-{name}-item-{item}.json");
                assert!(
                    workspace.join("stages").join(&stem).is_file(),
                    "{file}: the envelope {stem} of child {item} of {items}"
                );
                let dispatch = workspace.join("dispatch").join(&stem);
                assert!(dispatch.is_file(), "{file}: the dispatch file {stem}");
                if items <= 5 {
                    let text = std::fs::read_to_string(&dispatch).expect("readable");
                    assert!(
                        text.contains(&format!("{name}[item-{item}]")),
                        "{file}: {stem} names its item"
                    );
                }
            }
            let children = std::fs::read_dir(workspace.join("stages"))
                .expect("stages")
                .flatten()
                .filter(|entry| {
                    entry
                        .file_name()
                        .to_string_lossy()
                        .starts_with(&format!("{index:03}-{name}-"))
                })
                .count();
            assert_eq!(children, items, "{file}: {name} ran one child per item");
        }
    }
}

#[test]
fn compat_fan_outs_over_1_and_5_stand_in_items_run_to_the_end_through_their_gates() {
    let files: Vec<&str> = FAN_OUTS.iter().map(|(file, _)| *file).collect();
    fan_out_workflows_run_to_the_end(1, &files);
    fan_out_workflows_run_to_the_end(5, &files);
}

#[test]
fn a_compat_fan_out_over_1000_stand_in_items_runs_to_the_end() {
    fan_out_workflows_run_to_the_end(1000, &["workflows/tests/categorize-test-cases.yaml"]);
}

/// The corpus's queue workflows run to the end with real shell jobs, worked
/// by the run's local worker: one job for the `worker_queue` stage, one per
/// item for the queue fan-out, each run exactly once.
#[test]
fn compat_queue_workflows_run_to_the_end_with_real_shell_jobs() {
    let Some(corpus) = compat_dir() else { return };
    for (file, items, jobs) in [
        ("workflows/demo/worker-queue-stage.yaml", 1, 1),
        ("workflows/demo/worker-queue-fanout.yaml", 5, 5),
    ] {
        let scratch = tempfile::tempdir().expect("temp dir");
        copy_tree(&corpus.join("workflows"), &scratch.path().join("workflows"));
        fake_agents(scratch.path(), items);
        let (id, _) = run_through_gates(scratch.path(), file, items);
        let listed: Value =
            serde_json::from_str(&baton(scratch.path(), &["queue", "list", "--json"]).stdout)
                .expect("queue JSON");
        let listed = listed.as_array().expect("jobs");
        assert_eq!(listed.len(), jobs, "{file}: {listed:?}");
        for job in listed {
            assert_eq!(job["status"], "succeeded", "{file}: {job}");
            assert_eq!(job["attempts"], 1, "{file}: {job}");
        }
        let detail: Value =
            serde_json::from_str(&baton(scratch.path(), &["status", &id, "--json"]).stdout)
                .expect("status JSON");
        for stage in detail["stages"].as_array().expect("stages") {
            assert!(
                ["success", "skipped"].contains(&stage["status"].as_str().unwrap_or_default()),
                "{file}: {stage}"
            );
        }
    }
}
