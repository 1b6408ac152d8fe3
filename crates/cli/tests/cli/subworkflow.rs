//! `kind: sub-workflow`: child runs three levels deep with params passed
//! down, `kill -9` of the driver while the deepest child runs followed by
//! `baton resume`, a cycle between two files refused at compile time, a
//! child's failure failing the parent stage, and the parent's progress
//! showing its children's stages. Inline scripts only.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::project::Project;

/// A scratch project with a `flows/` directory for child workflows.
fn project() -> Project {
    let project = Project::new();
    std::fs::create_dir_all(project.path().join("flows")).expect("mkdir");
    project
}

/// The top-level run (the one without a parent).
fn top_run(project: &Project) -> String {
    let runs = project.json(&["runs", "--json"]);
    runs.as_array()
        .expect("runs")
        .iter()
        .find(|run| run["parent"].is_null())
        .and_then(|run| run["run_id"].as_str())
        .expect("a top-level run")
        .to_owned()
}

fn header(name: &str, params: &str) -> String {
    format!(
        "name: {name}\nversion: '1'\ndescription: d\ntrigger:\n  source: manual\n  params:\n{params}stages:\n"
    )
}

/// An inline stage that appends `<run id> <stage> <attempt> <ms since the
/// epoch>` to the witness file, then runs `body`.
fn stage(name: &str, body: &str, extra: &str) -> String {
    format!(
        "  - name: {name}\n    kind: execute\n    description: d\n    executor: inline\n{extra}    script: |\n      echo \"$BATON_RUN_ID $BATON_STAGE $BATON_ATTEMPT $(date +%s%3N)\" >> \"$BATON_PROJECT_DIR/witness.txt\"\n      {body}\n"
    )
}

fn sub(name: &str, path: &str, extra: &str) -> String {
    format!(
        "  - name: {name}\n    kind: sub-workflow\n    description: runs {path}\n    agent: {{role: orchestrator}}\n    sub_workflow: {path}\n{extra}"
    )
}

/// top → flows/mid.yaml → flows/leaf.yaml (relative to mid), the greeting
/// extended at each level; `leaf_body` runs in the deepest stage, and
/// `after` copies the leaf's output up through both workspaces.
fn three_levels(project: &Project, leaf_body: &str) {
    project.write(
        "top.yaml",
        &format!(
            "{}{}{}{}",
            header("top", "    greeting: hello\n"),
            stage("first", "true", ""),
            sub(
                "mid",
                "flows/mid.yaml",
                "    depends_on: [first]\n    sub_workflow_params:\n      greeting: \"{greeting} from top\"\n"
            ),
            stage(
                "after",
                "cp {workspace}/sub/mid/sub/leaf/outputs/leaf.txt {workspace}/outputs/final.txt",
                "    depends_on: [mid]\n    writes_to: [outputs/final.txt]\n"
            ),
        ),
    );
    project.write(
        "flows/mid.yaml",
        &format!(
            "{}{}{}",
            header("mid", "    greeting: unset\n"),
            stage("prepare", "true", ""),
            sub(
                "leaf",
                "leaf.yaml",
                // The stage's writes_to are checked in mid's workspace like
                // any stage's: the leaf is told where to put that copy.
                "    depends_on: [prepare]\n    writes_to: [leaf-copy.txt]\n    sub_workflow_params:\n      greeting: \"{greeting} via mid\"\n      copy_to: \"{workspace}/outputs\"\n"
            ),
        ),
    );
    project.write(
        "flows/leaf.yaml",
        &format!(
            "{}{}",
            header("leaf", "    greeting: unset\n    copy_to: /nonexistent\n"),
            stage(
                "write",
                &format!("{leaf_body}\n      echo {{greeting}} > {{workspace}}/outputs/leaf.txt\n      cp {{workspace}}/outputs/leaf.txt {{copy_to}}/leaf-copy.txt"),
                "    writes_to: [outputs/leaf.txt]\n"
            ),
        ),
    );
}

/// (attempt, ms since the epoch) of every start of `run`'s `stage` seen,
/// in order.
fn executions(witness: &[String], run: &str, stage: &str) -> Vec<(i64, i64)> {
    witness
        .iter()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            match fields[..] {
                [seen_run, seen_stage, attempt, at] if seen_run == run && seen_stage == stage => {
                    Some((attempt.parse().ok()?, at.parse().ok()?))
                }
                _ => None,
            }
        })
        .collect()
}

fn count(witness: &[String], run: &str, stage: &str) -> usize {
    executions(witness, run, stage).len()
}

/// (attempt, end in ms since the epoch) of the attempt the store recorded
/// as `run`'s `stage`'s success.
fn recorded_success(project: &Project, run: &str, stage: &str) -> (i64, i64) {
    let index = project.json(&["status", run, "--json"])["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .find(|entry| entry["stage"] == stage)
        .and_then(|entry| entry["index"].as_i64())
        .expect("the stage");
    let location = project.path().join(".baton/baton.db");
    let attempts = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(async {
            let store = baton_store::Store::open(&location.to_string_lossy())
                .await
                .expect("store");
            store.attempts(run).await.expect("attempts")
        });
    attempts
        .iter()
        .find(|attempt| attempt.index == index && attempt.status == "success")
        .map(|attempt| (attempt.attempt, attempt.finished_at.expect("an end")))
        .expect("a recorded success")
}

/// Whether some run's `stage` was seen to start.
fn started(witness: &[String], stage: &str) -> bool {
    witness
        .iter()
        .any(|line| line.split(' ').nth(1) == Some(stage))
}

fn final_text(project: &Project, run: &str) -> String {
    let status = project.json(&["status", run, "--json"]);
    let workspace = status["workspace"].as_str().expect("workspace");
    std::fs::read_to_string(Path::new(workspace).join("outputs/final.txt"))
        .expect("the final output exists")
}

#[test]
fn three_levels_run_to_the_end_and_pass_params_down() {
    let project = project();
    three_levels(&project, "true");
    let run = project.baton(&["run", "top.yaml", "--json"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let top = top_run(&project);
    let mid = format!("{top}-mid");
    let leaf = format!("{mid}-leaf");

    assert_eq!(final_text(&project, &top), "hello from top via mid\n");
    let witness = project.witness();
    for (run, stage) in [
        (&top, "first"),
        (&mid, "prepare"),
        (&leaf, "write"),
        (&top, "after"),
    ] {
        assert_eq!(count(&witness, run, stage), 1, "{run} {stage}: {witness:?}");
    }

    // Nested in status: JSON names the child on its stage, the table
    // indents a line per child run, grandchildren included.
    let status = project.json(&["status", &top, "--json"]);
    let mid_stage = status["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .find(|stage| stage["stage"] == "mid")
        .expect("mid")
        .clone();
    assert_eq!(mid_stage["sub_run"]["run_id"], mid.as_str());
    assert_eq!(mid_stage["sub_run"]["status"], "success");
    let table = project.baton(&["status", &top]);
    assert!(
        table.stdout.contains(&format!("└ sub-run {mid}")),
        "{}",
        table.stdout
    );
    assert!(
        table.stdout.contains(&format!("└ sub-run {leaf}")),
        "{}",
        table.stdout
    );
    // Child workspaces live under the parent's; `baton runs` names parents.
    let child = project.json(&["status", &leaf, "--json"]);
    assert!(
        child["workspace"]
            .as_str()
            .expect("workspace")
            .ends_with(&format!("{top}/sub/mid/sub/leaf")),
        "{child}"
    );
    let runs = project.json(&["runs", "--json"]);
    let parent_of = |id: &str| {
        runs.as_array()
            .expect("runs")
            .iter()
            .find(|run| run["run_id"] == id)
            .map(|run| run["parent"].clone())
            .expect("listed")
    };
    assert_eq!(parent_of(&leaf), mid.as_str());
    assert_eq!(parent_of(&mid), top.as_str());
}

/// The progress lines of a drive (stderr off a terminal), their
/// timestamps cut and their durations replaced by `N`.
fn progress_lines(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|line| Some(line.strip_prefix('[')?.split_once("s] ")?.1))
        .map(|line| match (line.find(" ("), line.find(" ms)")) {
            (Some(open), Some(close)) if open < close => {
                format!("{} (N ms){}", &line[..open], &line[close + 4..])
            }
            _ => line.to_owned(),
        })
        .collect()
}

#[test]
fn the_parents_progress_shows_every_childs_stages_indented_under_its_stage() {
    let project = project();
    three_levels(&project, "true");
    let run = project.baton(&["run", "top.yaml"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(
        progress_lines(&run.stderr),
        [
            "start   first",
            "ok      first (N ms)",
            "start   mid",
            "  start   mid/prepare",
            "  ok      mid/prepare (N ms)",
            "  start   mid/leaf",
            "    start   mid/leaf/write",
            "    ok      mid/leaf/write (N ms)",
            "  ok      mid/leaf (N ms)",
            "ok      mid (N ms)",
            "start   after",
            "ok      after (N ms)",
        ],
        "{}",
        run.stderr
    );
}

#[test]
fn the_child_of_each_fan_out_item_shows_under_its_item_failures_included() {
    let project = project();
    project.write(
        "top.yaml",
        &format!(
            "{}{}{}",
            header("top", "    x: 1\n"),
            stage(
                "src",
                "printf '{\"items\": [{\"id\": \"a\"}, {\"id\": \"b\"}]}' > outputs/src.json",
                "    writes_to: [src.json]\n"
            ),
            sub(
                "fan",
                "flows/child.yaml",
                "    depends_on: [src]\n    reads_from: [src]\n    fan_out: {source: src, field: items, key: id}\n"
            ),
        ),
    );
    project.write(
        "flows/child.yaml",
        &format!(
            "{}{}{}",
            header("child", "    x: 1\n"),
            stage("one", "true", ""),
            stage("two", "exit 4", "    depends_on: [one]\n"),
        ),
    );
    let run = project.baton(&["run", "top.yaml"]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    let lines = progress_lines(&run.stderr);
    // The items' children run at once: each item's lines, in order.
    for item in ["a", "b"] {
        let name = format!("fan[{item}]");
        let of_item: Vec<&str> = lines
            .iter()
            .map(String::as_str)
            .filter(|line| {
                line.trim_start()
                    .get(8..)
                    .is_some_and(|rest| rest.starts_with(&name))
            })
            .collect();
        assert_eq!(of_item.len(), 6, "{of_item:#?}\n{}", run.stderr);
        assert_eq!(
            of_item[..5],
            [
                format!("start   {name}"),
                format!("  start   {name}/one"),
                format!("  ok      {name}/one (N ms)"),
                format!("  start   {name}/two"),
                format!("  FAILED  {name}/two (N ms) — exited with code 4"),
            ],
            "{}",
            run.stderr
        );
        assert!(
            of_item[5].starts_with(&format!("FAILED  {name} (N ms) — sub-workflow run ")),
            "{}",
            run.stderr
        );
    }
}

#[test]
fn kill_minus_nine_in_the_deepest_child_then_resume_finishes_everything_once() {
    let project = project();
    // The leaf waits for a file the test writes after the kill, so the kill
    // lands while the deepest child runs.
    three_levels(
        &project,
        "while [ ! -f \"$BATON_PROJECT_DIR/go\" ]; do sleep 0.05; done",
    );
    let mut first = project.spawn(&["run", "top.yaml"]);
    let start = Instant::now();
    while !started(&project.witness(), "write") {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the leaf never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    first.kill().expect("SIGKILL");
    first.wait().expect("reaped");
    project.write("go", "");

    let top = top_run(&project);
    let resume = project.baton(&["resume", &top, "--json"]);
    assert_eq!(resume.code, 0, "{}\n{}", resume.stdout, resume.stderr);
    let mid = format!("{top}-mid");
    let leaf = format!("{mid}-leaf");
    let witness = project.witness();
    // Finished stages ran once; the interrupted leaf stage ran again.
    assert_eq!(count(&witness, &top, "first"), 1, "{witness:?}");
    assert_eq!(count(&witness, &mid, "prepare"), 1, "{witness:?}");
    assert_eq!(count(&witness, &leaf, "write"), 2, "{witness:?}");
    assert_eq!(count(&witness, &top, "after"), 1, "{witness:?}");
    assert_eq!(final_text(&project, &top), "hello from top via mid\n");
    for run in [&top, &mid, &leaf] {
        let status = project.json(&["status", run, "--json"]);
        assert_eq!(status["status"], "success", "{run}: {status}");
        // The killed driver's processes did not survive the resume.
        assert_eq!(baton_test_support::procs::processes_of_run(run), 0, "{run}");
    }
}

#[test]
fn a_cycle_between_two_files_is_a_compile_error_naming_both() {
    let project = project();
    project.write(
        "a.yaml",
        &format!("{}{}", header("a", "    x: 1\n"), sub("to-b", "b.yaml", "")),
    );
    project.write(
        "b.yaml",
        &format!("{}{}", header("b", "    x: 1\n"), sub("to-a", "a.yaml", "")),
    );
    let compile = project.baton(&["compile", "a.yaml"]);
    assert_eq!(compile.code, 1, "{}\n{}", compile.stdout, compile.stderr);
    assert!(
        compile.stderr.contains("a.yaml -> b.yaml -> a.yaml"),
        "{}",
        compile.stderr
    );
    let lint = project.baton(&["lint", "a.yaml", "--format", "json"]);
    assert_eq!(lint.code, 1, "{}\n{}", lint.stdout, lint.stderr);
    assert!(
        lint.stdout
            .contains("sub-workflow cycle: a.yaml -> b.yaml -> a.yaml"),
        "{}",
        lint.stdout
    );
    let run = project.baton(&["run", "a.yaml"]);
    assert_ne!(run.code, 0, "a cycle never runs");
    assert!(project.witness().is_empty());
}

#[test]
fn a_child_failure_fails_the_parent_stage_with_the_childs_error() {
    let project = project();
    project.write(
        "top.yaml",
        &format!(
            "{}{}{}",
            header("top", "    x: 1\n"),
            sub("child", "flows/bad.yaml", ""),
            stage("never", "true", "    depends_on: [child]\n"),
        ),
    );
    project.write(
        "flows/bad.yaml",
        &format!(
            "{}{}",
            header("bad", "    x: 1\n"),
            stage("boom", "echo kaboom >&2; exit 7", ""),
        ),
    );
    let run = project.baton(&["run", "top.yaml", "--json"]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    let top = top_run(&project);
    let status = project.json(&["status", &top, "--json"]);
    assert_eq!(status["status"], "failed");
    let child = status["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .find(|stage| stage["stage"] == "child")
        .expect("child stage")
        .clone();
    assert_eq!(child["status"], "failed");
    let error = child["error"].as_str().expect("error");
    assert!(error.contains(&format!("{top}-child")), "{error}");
    assert!(error.contains("exited with code 7"), "{error}");
    assert!(error.contains("kaboom"), "{error}");
    assert_eq!(child["sub_run"]["status"], "failed");
    assert_eq!(count(&project.witness(), &top, "never"), 0);
}

/// The sub-workflow stage that runs `flows/<file>`, then a stage after it.
fn parent_of_child(project: &Project, file: &str) {
    project.write(
        "top.yaml",
        &format!(
            "{}{}{}",
            header("top", "    x: 1\n"),
            sub("child", &format!("flows/{file}"), ""),
            stage("after", "true", "    depends_on: [child]\n"),
        ),
    );
}

#[test]
fn a_gate_in_the_child_is_decided_on_the_child_then_the_parent_resumes() {
    let project = project();
    parent_of_child(&project, "gated.yaml");
    project.write(
        "flows/gated.yaml",
        &format!(
            "{}{}{}",
            header("gated", "    x: 1\n"),
            stage("review", "true", "    human_gate: true\n"),
            stage("post", "true", "    depends_on: [review]\n"),
        ),
    );
    let run = project.baton(&["run", "top.yaml"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let top = top_run(&project);
    let child = format!("{top}-child");
    assert!(
        run.stderr.contains(&format!(
            "stopped at human gate 'review': decide it (`baton gate approve {child} review`"
        )),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(&format!("then `baton resume {top}`")),
        "{}",
        run.stderr
    );
    let approve = project.baton(&["gate", "approve", &child, "review"]);
    assert_eq!(approve.code, 0, "{}", approve.stderr);
    let resume = project.baton(&["resume", &top]);
    assert_eq!(resume.code, 0, "{}", resume.stderr);
    let witness = project.witness();
    assert_eq!(count(&witness, &child, "review"), 1, "{witness:?}");
    assert_eq!(count(&witness, &child, "post"), 1, "{witness:?}");
    assert_eq!(count(&witness, &top, "after"), 1, "{witness:?}");
}

#[test]
fn cancelling_the_parent_cancels_the_child() {
    let project = project();
    parent_of_child(&project, "slow.yaml");
    project.write(
        "flows/slow.yaml",
        &format!(
            "{}{}",
            header("slow", "    x: 1\n"),
            stage("wait", "sleep 120", ""),
        ),
    );
    let mut first = project.spawn(&["run", "top.yaml"]);
    let start = Instant::now();
    while !started(&project.witness(), "wait") {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the child never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let top = top_run(&project);
    let cancel = project.baton(&["cancel", &top]);
    assert_eq!(cancel.code, 0, "{}", cancel.stderr);
    let status = first.wait().expect("the driver exits");
    assert_eq!(status.code(), Some(2));
    let child = format!("{top}-child");
    assert_eq!(
        project.json(&["status", &top, "--json"])["status"],
        "cancelled"
    );
    assert_eq!(
        project.json(&["status", &child, "--json"])["status"],
        "cancelled"
    );
    assert_eq!(baton_test_support::procs::processes_of_run(&child), 0);
    assert_eq!(count(&project.witness(), &top, "after"), 0);
}

/// Recorded attempts of a run's stage.
fn attempts(project: &Project, run: &str, stage: &str) -> usize {
    let status = project.json(&["status", run, "--json"]);
    status["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .find(|entry| entry["stage"] == stage)
        .and_then(|entry| entry["attempts"].as_u64())
        .and_then(|count| usize::try_from(count).ok())
        .expect("attempts")
}

#[test]
fn kills_at_random_moments_at_every_level_then_resume_end_like_an_undisturbed_run() {
    let project = project();
    three_levels(&project, "sleep 0.2");
    // A small xorshift seeded from the clock: every run of the test lands
    // its kills elsewhere, and the seed is printed for a failure.
    let mut seed = u64::from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .subsec_nanos(),
    ) | 1;
    let seed_shown = seed;
    let mut below = |bound: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % bound
    };
    for _ in 0..12 {
        let runs = project.json(&["runs", "--json"]);
        let top = runs
            .as_array()
            .expect("runs")
            .iter()
            .find(|run| run["parent"].is_null())
            .and_then(|run| run["run_id"].as_str())
            .map(str::to_owned);
        let mut driver = match &top {
            None => project.spawn(&["run", "top.yaml"]),
            Some(top) => project.spawn(&["resume", top]),
        };
        std::thread::sleep(Duration::from_millis(below(700)));
        let _ = driver.kill();
        let _ = driver.wait();
    }
    let top = top_run(&project);
    let resume = project.baton(&["resume", &top]);
    assert_eq!(resume.code, 0, "seed {seed_shown}: {}", resume.stderr);
    let mid = format!("{top}-mid");
    let leaf = format!("{mid}-leaf");
    assert_eq!(final_text(&project, &top), "hello from top via mid\n");
    let witness = project.witness();
    for (run, stage) in [
        (&top, "first"),
        (&top, "mid"),
        (&mid, "prepare"),
        (&mid, "leaf"),
        (&leaf, "write"),
        (&top, "after"),
    ] {
        let status = project.json(&["status", run, "--json"]);
        assert_eq!(status["status"], "success", "seed {seed_shown}: {status}");
        // Nothing that had succeeded ran again: no start was seen after the
        // recorded success ended, the last start seen is that attempt's,
        // and none started under a number the store never gave out. A plain
        // process starts while the commit recording its start is in flight,
        // so a kill in that moment leaves an execution unrecorded, which the
        // resume kills and runs again under the same number.
        if !stage.starts_with("mid") && stage != "leaf" {
            let seen = executions(&witness, run, stage);
            let (succeeded, ended) = recorded_success(&project, run, stage);
            let context = format!(
                "seed {seed_shown}: {run} {stage}: {seen:?}, success {succeeded} ended {ended}"
            );
            assert!(seen.iter().all(|(_, at)| *at <= ended), "{context}");
            assert_eq!(
                seen.last().map(|(attempt, _)| *attempt),
                Some(succeeded),
                "{context}"
            );
            let recorded = i64::try_from(attempts(&project, run, stage)).expect("a count");
            assert_eq!(recorded, succeeded, "{context}");
        }
        assert_eq!(
            baton_test_support::procs::processes_of_run(run),
            0,
            "seed {seed_shown}: {run}"
        );
    }
}
