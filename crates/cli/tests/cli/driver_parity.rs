//! Both drivers run a workflow the same way: every corpus workflow, run
//! once through `baton next` / `complete` (the harness of `driver.rs` as
//! the orchestrator) and once by `baton run` with the stand-in agent as
//! every role's profile, ends with the same status for every stage, the
//! same recorded output hashes and the same run ledger.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use baton_engine::create::sha256_hex;
use baton_test_support::compat_dir;

use crate::driver::{copy_tree, drive, fake_agent};
use crate::project::Project;

/// Every stage's status and its outputs' (path, sha256), by name; and the
/// run's ledger, by session.
pub(crate) type Recorded = (
    BTreeMap<String, (String, Vec<(String, String)>)>,
    BTreeMap<String, Vec<String>>,
);

/// What the run recorded. Each output's recorded hash is checked against
/// the file in the run's workspace; the hash compared is of the file with
/// that workspace's path taken out, as the stand-in agent writes the path
/// it was given (absolute, so different for any two runs) into its files.
pub(crate) fn recorded(project: &Project, run_id: &str) -> Recorded {
    let location = project.path().join(".baton/baton.db");
    let (workspace, stages, artifacts, ledger) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(async {
            let store = baton_store::Store::open(&location.to_string_lossy())
                .await
                .expect("store");
            let run = store.run(run_id).await.expect("run");
            let stages = store.stages(run_id).await.expect("stages");
            let artifacts = store.artifacts(run_id).await.expect("artifacts");
            let ledger = store.ledger_events("run", run_id).await.expect("ledger");
            (PathBuf::from(run.workspace), stages, artifacts, ledger)
        });
    let workspace_path = workspace.to_string_lossy().into_owned();
    let portable = |path: &str, sha256: &str| {
        let bytes = std::fs::read(workspace.join(path))
            .unwrap_or_else(|error| panic!("{run_id}: recorded output {path}: {error}"));
        assert_eq!(sha256_hex(&bytes), sha256, "{run_id}: {path} as recorded");
        let text = String::from_utf8_lossy(&bytes).replace(&workspace_path, "<workspace>");
        sha256_hex(text.as_bytes())
    };
    let statuses = stages
        .iter()
        .map(|stage| {
            let mut outputs: Vec<(String, String)> = artifacts
                .iter()
                .filter(|artifact| artifact.index == stage.index)
                .map(|artifact| {
                    let hash = portable(&artifact.path, &artifact.sha256);
                    (artifact.path.clone(), hash)
                })
                .collect();
            outputs.sort();
            (stage.name.clone(), (stage.status.clone(), outputs))
        })
        .collect();
    (statuses, ledger_entries(&ledger, run_id))
}

/// The ledger's entries as comparable text, kind and payload, in order by
/// session (the run's, each stage's), with the run's id taken out.
///
/// Left out: who (the protocol records a stage under its role, `baton run`
/// under the profile the role resolves to; so for a review's reviewer),
/// when, and the hashes of the files edited (they hold each run's own
/// workspace path; the outputs' hashes are compared above). Stages that
/// run side by side interleave their sessions in any order, and so do the
/// edits of a fan-out's children: each run of edits is compared sorted.
fn ledger_entries(
    ledger: &[baton_store::LedgerEventRow],
    run_id: &str,
) -> BTreeMap<String, Vec<String>> {
    let mut sessions: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for event in ledger {
        let mut payload: serde_json::Value =
            serde_json::from_str(&event.payload).expect("a JSON payload");
        if let Some(hash) = payload.get_mut("hash") {
            *hash = "<hash>".into();
        }
        if let Some(profile) = payload.pointer_mut("/reviewer/profile") {
            *profile = "<who>".into();
        }
        let session = event.session.replace(run_id, "<run>");
        let entry = format!("{} {payload}", event.kind).replace(run_id, "<run>");
        sessions
            .entry(session)
            .or_default()
            .push((event.kind.clone(), entry));
    }
    sessions
        .into_iter()
        .map(|(session, entries)| {
            let mut compared: Vec<String> = Vec::new();
            for run in entries.chunk_by(|a, b| a.0 == "edited" && b.0 == "edited") {
                let mut run: Vec<String> = run.iter().map(|(_, entry)| entry.clone()).collect();
                run.sort();
                compared.extend(run);
            }
            (session, compared)
        })
        .collect()
}

/// The runnable workflows of the corpus copied into `project`.
fn workflows(project: &Project, corpus: &Path) -> Vec<String> {
    copy_tree(&corpus.join("workflows"), &project.path().join("workflows"));
    let mut files = Vec::new();
    let mut stack = vec![project.path().join("workflows")];
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
                    let relative = path.strip_prefix(project.path()).expect("inside");
                    files.push(relative.to_string_lossy().into_owned());
                }
            }
        }
    }
    files.sort();
    files
}

/// Runs `file` with `baton run`, approving every gate it stops at and
/// resuming; returns the run's id and status.
fn run_builtin(project: &Project, args: &[&str]) -> (String, String) {
    let outcome = project.json(args);
    let id = outcome["run_id"].as_str().expect("run id").to_owned();
    let mut status = outcome["status"].as_str().expect("status").to_owned();
    for _ in 0..20 {
        if status != "awaiting_human" {
            return (id, status);
        }
        let gate = outcome_gate(project, &id);
        let approve = project.baton(&["gate", "approve", &id, &gate]);
        assert_eq!(approve.code, 0, "{}", approve.stderr);
        let resumed = project.json(&["resume", &id, "--json"]);
        status = resumed["status"].as_str().expect("status").to_owned();
    }
    panic!("run {id} still waits at a gate after 20 approvals");
}

fn outcome_gate(project: &Project, id: &str) -> String {
    let gates = project.json(&["gate", "list", id, "--json"]);
    gates
        .as_array()
        .expect("gates")
        .iter()
        .find(|gate| gate["status"] == "awaiting")
        .and_then(|gate| gate["stage"].as_str())
        .expect("an awaiting gate")
        .to_owned()
}

#[test]
fn the_protocol_and_baton_run_record_the_same_statuses_output_hashes_and_ledgers() {
    let Some(corpus) = compat_dir() else { return };
    // Two projects with the same files: the protocol's has no baton.toml
    // (baton spawns no agents for it), the other runs the stand-in agent
    // for every role, under a profile of their own for the validators.
    let external = Project::new();
    let builtin = Project::new();
    let files = workflows(&external, &corpus);
    assert_eq!(workflows(&builtin, &corpus), files);
    builtin.write("baton.toml", &stand_in_agents());
    let mut compared = Vec::new();
    for file in &files {
        let mut args = vec!["run", file.as_str(), "--json"];
        if file.ends_with("review-and-fix.yaml") {
            // Its `when` conditions read `{pr_size}`.
            args.extend(["--params", "pr_size=small"]);
        }
        let mut external_args = args.clone();
        external_args.extend(["--driver", "external"]);
        let created = external.json(&external_args);
        let external_id = created["run_id"].as_str().expect("id").to_owned();
        let driven = drive(&external, &external_id, &|_, _| None);
        let (builtin_id, status) = run_builtin(&builtin, &args);
        assert_eq!(
            (driven.status.as_str(), status.as_str()),
            ("success", "success"),
            "{file}"
        );
        assert_eq!(
            recorded(&external, &external_id),
            recorded(&builtin, &builtin_id),
            "{file}: the protocol (left) and `baton run` (right) differ"
        );
        compared.push(file.clone());
    }
    assert!(compared.len() >= 30, "compared: {compared:?}");
    eprintln!("compared {compared:?}");
}

/// A `baton.toml` running the stand-in agent for every role, under a
/// profile of their own for the validators.
pub(crate) fn stand_in_agents() -> String {
    format!(
        "[agents.default]\nprofile = \"fake\"\n\n[agents.validator]\nprofile = \"judge\"\n\n[agents.challenger]\nprofile = \"judge\"\n\n[agents.evidence]\nprofile = \"judge\"\n\n{}{}",
        profile("fake"),
        profile("judge"),
    )
}

/// A profile running the stand-in agent.
fn profile(name: &str) -> String {
    format!(
        "[profiles.{name}]\nprogram = \"{}\"\nprompt = {{ via = \"stdin\" }}\nenv_passthrough = [\"PATH\", \"HOME\"]\n\n",
        fake_agent().display()
    )
}
