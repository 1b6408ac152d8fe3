//! How many agents run at once: a profile's `max_concurrent` bounds its
//! attempts, and read-write agents that edit the checkout in place run one
//! at a time. The stand-in agent's witness log gives each attempt's start
//! and end, so overlaps are counted, not guessed.

use std::path::Path;

use crate::baton;

const HEADER: &str = "name: t\nversion: '1'\ndescription: d\ntrigger: {source: manual}\nstages:\n";

/// A project (not a git repository: no worktrees here) whose agents are the
/// stand-in, each sleeping a little and leaving a witness line outside the
/// project.
fn project(profile_extra: &str) -> (tempfile::TempDir, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let witness = tempfile::tempdir().expect("temp dir");
    let fake = Path::new(env!("CARGO_BIN_EXE_baton")).with_file_name("baton-fake-agent");
    std::fs::write(
        dir.path().join("baton.toml"),
        format!(
            "[agents.default]\nprofile = \"fake\"\n\n[profiles.fake]\nprogram = \"{}\"\nprompt = {{ via = \"stdin\" }}\nenv_passthrough = [\"PATH\", \"HOME\"]\nenv = {{ BATON_FAKE_AGENT = \"sleep 0.4\\nwrite-listed\", BATON_FAKE_WITNESS = \"{}\" }}\n{profile_extra}",
            fake.display(),
            witness.path().join("witness.txt").display()
        ),
    )
    .expect("write");
    (dir, witness)
}

fn agent(name: &str, access: &str) -> String {
    format!(
        "  - name: {name}\n    kind: execute\n    description: d\n    agent: {{role: code-writer, access: {access}}}\n    writes_to: [{name}.md]\n"
    )
}

/// The most witnessed attempts that ran at the same moment.
fn most_at_once(witness: &Path) -> usize {
    let text = std::fs::read_to_string(witness.join("witness.txt")).expect("witness log");
    let spans: Vec<(u64, u64)> = text
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (
                fields[5].parse().expect("start"),
                fields[6].parse().expect("end"),
            )
        })
        .collect();
    spans
        .iter()
        .map(|&(start, _)| {
            spans
                .iter()
                .filter(|&&(other_start, other_end)| other_start <= start && start < other_end)
                .count()
        })
        .max()
        .unwrap_or(0)
}

#[test]
fn a_profile_runs_at_most_max_concurrent_attempts_at_once() {
    let (dir, witness) = project("max_concurrent = 2\n");
    let stages: String = (0..5)
        .map(|index| agent(&format!("review{index}"), "read-only"))
        .collect();
    std::fs::write(dir.path().join("wf.yaml"), format!("{HEADER}{stages}")).expect("write");
    let run = baton(dir.path(), &["run", "wf.yaml", "--max-parallel", "5"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(most_at_once(witness.path()) <= 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("waiting for a free `fake` slot"),
        "{}",
        run.stderr
    );
}

#[test]
fn agents_that_edit_the_checkout_take_turns() {
    let (dir, witness) = project("");
    let stages = [
        agent("edit1", "read-write"),
        agent("edit2", "read-write"),
        agent("edit3", "read-write"),
    ]
    .concat();
    std::fs::write(dir.path().join("wf.yaml"), format!("{HEADER}{stages}")).expect("write");
    let run = baton(dir.path(), &["run", "wf.yaml", "--max-parallel", "3"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(most_at_once(witness.path()), 1, "{}", run.stderr);
}

#[test]
fn read_only_agents_still_run_side_by_side() {
    let (dir, _witness) = project("");
    // Each agent waits (20 s at most) until all three have started: only
    // agents running side by side all succeed.
    let barrier = "FAKE-AGENT: shell mkdir -p \"$BATON_WORKSPACE/barrier\" && touch \"$BATON_WORKSPACE/barrier/$BATON_STAGE\" && timeout 20 sh -c 'until [ \"$(ls \"$BATON_WORKSPACE/barrier\" | wc -l)\" -ge 3 ]; do sleep 0.05; done'";
    let stages: String = (0..3)
        .map(|index| {
            agent(&format!("review{index}"), "read-only").replace(
                "description: d",
                &format!("description: |\n      {barrier}\n      FAKE-AGENT: write-listed"),
            )
        })
        .collect();
    std::fs::write(dir.path().join("wf.yaml"), format!("{HEADER}{stages}")).expect("write");
    let run = baton(dir.path(), &["run", "wf.yaml", "--max-parallel", "3"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
}
