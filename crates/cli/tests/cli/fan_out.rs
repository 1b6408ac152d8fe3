//! Fan-out at run time (docs/fan-out.md): one child per item of the source
//! stage's output, inline and with the stand-in agent; keys, placeholders,
//! hostile keys, the concurrency cap and the errors a bad item list gives.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::project::{HEADER, Project, run_id};

/// A source stage `src` that copies the project's `items.json` (written by
/// the test) to its output `src.json`.
const SOURCE: &str = "  - name: src\n    kind: execute\n    description: d\n    executor: inline\n    script: |\n      cp \"$BATON_PROJECT_DIR/items.json\" outputs/src.json\n    writes_to: [src.json]\n";

/// A dependant of `fan` that counts the fan-out's outputs when it runs.
const AFTER: &str = "  - name: after\n    kind: execute\n    description: d\n    executor: inline\n    depends_on: [fan]\n    script: |\n      ls outputs | grep -c '^fan-' > outputs/after.txt || true\n    writes_to: [after.txt]\n";

/// An inline fan-out stage `fan` over `src`'s `items`, keyed by `key`.
fn inline_fan(key: &str, script: &str, extra: &str) -> String {
    let script: String = script
        .lines()
        .map(|line| format!("      {line}\n"))
        .collect();
    format!(
        "  - name: fan\n    kind: execute\n    description: d\n    executor: inline\n    depends_on: [src]\n    script: |\n{script}    fan_out: {{source: src, field: items, key: {key}{extra}}}\n"
    )
}

/// Writes the items and the workflow, runs it; returns the exit code, the
/// status JSON and the workspace.
fn run(project: &Project, items: &Value, stages: &str) -> (i32, Value, PathBuf) {
    project.write("items.json", &items.to_string());
    project.write("wf.yaml", &format!("{HEADER}{SOURCE}{stages}"));
    let run = project.baton(&["run", "wf.yaml", "--json"]);
    let id = run_id(&run);
    let status = project.json(&["status", &id, "--json"]);
    let workspace = PathBuf::from(status["workspace"].as_str().expect("workspace"));
    (run.code, status, workspace)
}

fn stage<'a>(status: &'a Value, name: &str) -> &'a Value {
    status["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .find(|stage| stage["stage"] == name)
        .unwrap_or_else(|| panic!("no stage {name}: {status}"))
}

fn error_of(status: &Value, name: &str) -> String {
    stage(status, name)["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn read(workspace: &Path, relative: &str) -> String {
    std::fs::read_to_string(workspace.join(relative))
        .unwrap_or_else(|error| panic!("{relative}: {error}"))
}

/// The stand-in agent next to the `baton` under test, as the default
/// profile.
fn fake_agent_config() -> String {
    let fake = Path::new(env!("CARGO_BIN_EXE_baton")).with_file_name("baton-fake-agent");
    format!(
        "[agents.default]\nprofile = \"fake\"\n\n[profiles.fake]\nprogram = \"{}\"\nprompt = {{ via = \"stdin\" }}\nenv_passthrough = [\"PATH\", \"HOME\"]\n",
        fake.display()
    )
}

#[test]
fn inline_fan_outs_over_1_5_and_1000_items_write_every_output_before_their_dependants_run() {
    for count in [1_usize, 5, 1000] {
        let project = Project::new();
        let items: Vec<Value> = (0..count)
            .map(|index| json!({"id": format!("item-{index}"), "n": index}))
            .collect();
        let (code, status, workspace) = run(
            &project,
            &json!({ "items": items }),
            &format!(
                "{}    writes_to: ['fan-{{id}}.txt']\n{AFTER}",
                inline_fan(
                    "id",
                    "echo \"$BATON_ITEM_KEY $BATON_ITEM\" > \"outputs/fan-$BATON_ITEM_NAME.txt\"",
                    ""
                )
            ),
        );
        assert_eq!(code, 0, "{count} items: {status}");
        assert_eq!(status["status"], "success", "{count} items: {status}");
        for index in 0..count {
            let key = format!("item-{index}");
            let output = read(&workspace, &format!("outputs/fan-{key}.txt"));
            assert!(output.starts_with(&format!("{key} {{")), "{output}");
            let item: Value =
                serde_json::from_str(output.trim_end().split_once(' ').expect("item").1)
                    .expect("BATON_ITEM is JSON");
            assert_eq!(item["n"], index);
            assert!(
                workspace
                    .join(format!("stages/001-fan-{key}.json"))
                    .is_file(),
                "{count} items: the envelope of {key}"
            );
        }
        assert!(workspace.join("stages/001-fan.json").is_file());
        // The dependant ran after every child had written its output.
        assert_eq!(
            read(&workspace, "outputs/after.txt").trim(),
            count.to_string()
        );
        // `baton status` lists the fan-out stage (not its children) as a
        // success.
        let listed = project.baton(&["status", status["run_id"].as_str().expect("id")]);
        assert_eq!(listed.code, 0, "{}", listed.stderr);
        let line = listed
            .stdout
            .lines()
            .find(|line| line.split_whitespace().any(|word| word == "fan"))
            .unwrap_or_else(|| panic!("no line for fan: {}", listed.stdout));
        assert!(line.contains("success"), "{line}");
        for name in ["src", "fan", "after"] {
            assert_eq!(stage(&status, name)["status"], "success", "{name}");
        }
        assert_eq!(status["stages"].as_array().expect("stages").len(), 3);
    }
}

#[test]
fn agent_children_get_their_item_and_the_substituted_key_and_fields() {
    let project = Project::new();
    project.write("baton.toml", &fake_agent_config());
    let items = json!({"items": [
        {"domain": "mail", "topic": "filters", "size": 3},
        {"domain": "calendar", "topic": "recurrence", "size": 7},
    ]});
    let (code, status, workspace) = run(
        &project,
        &items,
        "  - name: fan\n    kind: validate\n    description: |\n      Review the {domain} domain, about {topic} ({size} files); unknown {nope} stays.\n    agent: {role: reviewer}\n    depends_on: [src]\n    reads_from: [src]\n    fan_out: {source: src, field: items, key: domain, mode: agent}\n    writes_to: ['findings/{domain}.json']\n",
    );
    assert_eq!(code, 0, "{status}");
    assert_eq!(stage(&status, "fan")["status"], "success", "{status}");
    for (domain, topic, size) in [("mail", "filters", 3), ("calendar", "recurrence", 7)] {
        let dispatch: Value = serde_json::from_str(&read(
            &workspace,
            &format!("dispatch/001-fan-{domain}.json"),
        ))
        .expect("dispatch JSON");
        let prompt = dispatch.to_string();
        assert!(
            prompt.contains(&format!(
                "Review the {domain} domain, about {topic} ({size} files); unknown {{nope}} stays."
            )),
            "{prompt}"
        );
        // The whole item is in the prompt, and the child writes its own file.
        assert!(
            prompt.contains(&format!("\\\"topic\\\": \\\"{topic}\\\"")),
            "{prompt}"
        );
        assert!(
            prompt.contains(&format!("findings/{domain}.json")),
            "{prompt}"
        );
        let finding = read(&workspace, &format!("outputs/findings/{domain}.json"));
        assert!(finding.contains("baton-fake-agent"), "{finding}");
        assert!(
            workspace
                .join(format!("stages/001-fan-{domain}.json"))
                .is_file()
        );
    }
}

#[test]
fn plain_string_and_number_items_are_their_own_keys() {
    let project = Project::new();
    let (code, status, workspace) = run(
        &project,
        &json!({"items": ["alpha", "beta", 42]}),
        &format!(
            "{}    writes_to: ['fan-{{key}}.txt']\n{AFTER}",
            inline_fan(
                "key",
                "printf '%s|%s' {key} \"$BATON_ITEM\" > \"outputs/fan-$BATON_ITEM_NAME.txt\"",
                ""
            )
        ),
    );
    assert_eq!(code, 0, "{status}");
    assert_eq!(status["status"], "success", "{status}");
    assert_eq!(read(&workspace, "outputs/fan-alpha.txt"), "alpha|\"alpha\"");
    assert_eq!(read(&workspace, "outputs/fan-beta.txt"), "beta|\"beta\"");
    assert_eq!(read(&workspace, "outputs/fan-42.txt"), "42|42");
    assert!(workspace.join("stages/001-fan-42.json").is_file());
    assert_eq!(read(&workspace, "outputs/after.txt").trim(), "3");
}

#[test]
fn object_fields_besides_the_key_are_substituted_into_scripts() {
    let project = Project::new();
    let (code, status, workspace) = run(
        &project,
        &json!({"items": [{"id": "a", "colour": "red"}, {"id": "b", "colour": "dark blue"}]}),
        &format!(
            "{}    writes_to: ['fan-{{id}}.txt']\n",
            inline_fan(
                "id",
                "printf '%s' {colour} > \"outputs/fan-$BATON_ITEM_NAME.txt\"",
                ""
            )
        ),
    );
    assert_eq!(code, 0, "{status}");
    assert_eq!(read(&workspace, "outputs/fan-a.txt"), "red");
    assert_eq!(read(&workspace, "outputs/fan-b.txt"), "dark blue");
}

#[test]
fn duplicate_keys_fail_the_stage_naming_both_positions() {
    let project = Project::new();
    let (code, status, workspace) = run(
        &project,
        &json!({"items": [{"id": "a"}, {"id": "b"}, {"id": "a"}]}),
        &format!(
            "{}{AFTER}",
            inline_fan("id", "touch \"outputs/fan-$BATON_ITEM_NAME\"", "")
        ),
    );
    assert_ne!(code, 0, "{status}");
    assert_eq!(stage(&status, "fan")["status"], "failed", "{status}");
    let error = error_of(&status, "fan");
    assert!(
        error.contains("items 1 and 3") && error.contains("'a'") && error.contains("unique"),
        "{error}"
    );
    assert_ne!(stage(&status, "after")["status"], "success");
    // No child ran.
    assert!(!workspace.join("outputs/fan-a").exists());
    assert!(!workspace.join("outputs/fan-b").exists());
}

#[test]
fn an_empty_list_succeeds_with_no_children_and_dependants_run() {
    let project = Project::new();
    let (code, status, workspace) = run(
        &project,
        &json!({"items": []}),
        &format!(
            "{}{AFTER}",
            inline_fan("id", "touch \"outputs/fan-$BATON_ITEM_NAME\"", "")
        ),
    );
    assert_eq!(code, 0, "{status}");
    assert_eq!(status["status"], "success", "{status}");
    assert_eq!(stage(&status, "fan")["status"], "success");
    assert_eq!(read(&workspace, "outputs/after.txt").trim(), "0");
}

#[test]
fn a_missing_field_a_non_list_or_a_source_that_is_not_json_fails_clearly() {
    let cases: [(&str, &str, &str); 4] = [
        (
            "{\"other\": []}",
            "items",
            "has no field 'items' (fan_out.field)",
        ),
        (
            "{\"outer\": {\"inner\": 3}}",
            "outer.inner",
            "'outer.inner' in outputs/src.json is not a list",
        ),
        ("this is not json", "items", "outputs/src.json is not JSON"),
        (
            "{\"items\": [{\"name\": \"x\"}]}",
            "items",
            "item 1 of 'items' in outputs/src.json has no scalar 'id' (fan_out.key)",
        ),
    ];
    for (text, field, expected) in cases {
        let project = Project::new();
        project.write("items.json", text);
        project.write(
            "wf.yaml",
            &format!(
                "{HEADER}{SOURCE}  - name: fan\n    kind: execute\n    description: d\n    executor: inline\n    depends_on: [src]\n    script: 'true'\n    fan_out: {{source: src, field: {field}, key: id}}\n"
            ),
        );
        let run = project.baton(&["run", "wf.yaml", "--json"]);
        assert_ne!(run.code, 0, "{text}: {}", run.stdout);
        let status = project.json(&["status", &run_id(&run), "--json"]);
        assert_eq!(stage(&status, "fan")["status"], "failed", "{status}");
        let error = error_of(&status, "fan");
        assert!(error.contains(expected), "{text}: {error}");
    }
}

#[test]
fn hostile_keys_stay_inside_the_workspace_and_are_quoted_in_scripts() {
    let project = Project::new();
    std::fs::create_dir(project.path().join("x")).expect("mkdir");
    let keys = [
        "../x",
        "a/b",
        "$(touch pwned)",
        "'; rm -rf x",
        "`touch pwned2`",
    ];
    let items: Vec<Value> = keys.iter().map(|key| json!({"id": key})).collect();
    let (code, status, workspace) = run(
        &project,
        &json!({ "items": items }),
        &format!(
            "{}    writes_to: ['fan-{{id}}.txt']\n",
            inline_fan(
                "id",
                "cd \"$BATON_PROJECT_DIR\"\nprintf '%s' {id} > \"$BATON_WORKSPACE/outputs/fan-$BATON_ITEM_NAME.txt\"",
                ""
            )
        ),
    );
    assert_eq!(code, 0, "{status}");
    assert_eq!(status["status"], "success", "{status}");
    // No substitution ran a command, in the project or the workspace.
    for dir in [
        project.path(),
        workspace.as_path(),
        &workspace.join("outputs"),
    ] {
        assert!(!dir.join("pwned").exists(), "{}", dir.display());
        assert!(!dir.join("pwned2").exists(), "{}", dir.display());
    }
    assert!(project.path().join("x").is_dir(), "x survived");
    // Every child wrote its raw key into a file with a sanitised name
    // inside the workspace's outputs.
    let mut names: Vec<String> = std::fs::read_dir(workspace.join("outputs"))
        .expect("outputs")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.starts_with("fan-"))
        .collect();
    names.sort();
    assert_eq!(names.len(), keys.len(), "{names:?}");
    let mut contents: Vec<String> = names
        .iter()
        .map(|name| read(&workspace, &format!("outputs/{name}")))
        .collect();
    contents.sort();
    let mut expected: Vec<String> = keys.iter().map(|key| (*key).to_owned()).collect();
    expected.sort();
    assert_eq!(contents, expected);
    for name in &names {
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')),
            "{name}"
        );
    }
    assert!(names.contains(&"fan-_._x.txt".to_owned()), "{names:?}");
    assert!(names.contains(&"fan-a_b.txt".to_owned()), "{names:?}");
    // Envelopes too stay in stages/.
    let envelopes = std::fs::read_dir(workspace.join("stages"))
        .expect("stages")
        .count();
    assert_eq!(envelopes, 2 + keys.len());
    assert!(!workspace.join("x.json").exists());
    assert!(!workspace.join("outputs/x").exists());
}

/// The most intervals `[start, end]` open at one moment.
fn max_overlap(intervals: &[(u128, u128)]) -> usize {
    let mut events: Vec<(u128, i32)> = intervals
        .iter()
        .flat_map(|(start, end)| [(*start, 1), (*end, -1)])
        .collect();
    // At the same instant, an end comes before a start.
    events.sort_unstable();
    let mut open = 0_i32;
    let mut most = 0_i32;
    for (_, delta) in events {
        open += delta;
        most = most.max(open);
    }
    usize::try_from(most).unwrap_or(0)
}

#[test]
fn max_parallel_caps_the_children_running_at_once() {
    let project = Project::new();
    let items: Vec<Value> = (0..8).map(|index| json!(format!("k{index}"))).collect();
    let (code, status, workspace) = run(
        &project,
        &json!({ "items": items }),
        &inline_fan(
            "key",
            "start=$(date +%s%N)\nsleep 0.25\necho \"$start $(date +%s%N)\" > \"outputs/times-$BATON_ITEM_NAME\"",
            ", max_parallel: 2",
        ),
    );
    assert_eq!(code, 0, "{status}");
    assert_eq!(status["status"], "success", "{status}");
    let most = max_overlap(&intervals(&workspace, 8));
    assert!(most <= 2, "{most} children ran at once");
    assert_eq!(most, 2, "the cap is used");
    // A larger --max-parallel for the run does not lift the stage's cap.
    let run = project.baton(&["run", "wf.yaml", "--max-parallel", "8", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let status = project.json(&["status", &run_id(&run), "--json"]);
    let workspace = PathBuf::from(status["workspace"].as_str().expect("workspace"));
    let most = max_overlap(&intervals(&workspace, 8));
    assert!(
        most <= 2,
        "{most} children ran at once under --max-parallel 8"
    );
}

/// The `[start, end]` (ns) each child `k<index>` wrote.
fn intervals(workspace: &Path, count: usize) -> Vec<(u128, u128)> {
    (0..count)
        .map(|index| {
            let text = read(workspace, &format!("outputs/times-k{index}"));
            let mut fields = text
                .split_whitespace()
                .map(|field| field.parse::<u128>().unwrap_or_else(|_| panic!("{text}")));
            (fields.next().expect("start"), fields.next().expect("end"))
        })
        .collect()
}

#[test]
fn worker_queue_mode_runs_one_queue_job_per_item_and_not_the_stage_script() {
    let project = Project::new();
    let (code, status, workspace) = run(
        &project,
        &json!({"items": ["a", "b c", "$(touch pwned)"]}),
        &format!(
            "  - name: fan\n    kind: execute\n    description: d\n    executor: inline\n    depends_on: [src]\n    script: 'touch \"$BATON_PROJECT_DIR/stage-script-ran\"'\n    writes_to: ['fan-{{id}}.txt']\n    fan_out: {{source: src, field: items, key: id, mode: worker_queue, script: 'printf %s {{id}} > \"outputs/fan-$BATON_ITEM_NAME.txt\"'}}\n{AFTER}"
        ),
    );
    assert_eq!(code, 0, "{status}");
    assert_eq!(stage(&status, "fan")["status"], "success", "{status}");
    assert_eq!(read(&workspace, "outputs/fan-a.txt"), "a");
    assert_eq!(read(&workspace, "outputs/fan-b_c.txt"), "b c");
    // The key reached the script quoted: printed, not run.
    assert_eq!(
        read(&workspace, "outputs/fan-__touch_pwned_.txt"),
        "$(touch pwned)"
    );
    assert!(!workspace.join("pwned").exists() && !project.path().join("pwned").exists());
    assert!(!project.path().join("stage-script-ran").exists());
    assert_eq!(read(&workspace, "outputs/after.txt").trim(), "3");
    // One job per item, run through the queue by the run's local worker.
    let jobs = project.json(&["queue", "list", "--json"]);
    let jobs = jobs.as_array().expect("jobs");
    assert_eq!(jobs.len(), 3, "{jobs:?}");
    for job in jobs {
        assert_eq!(job["kind"], "workflow_stage", "{job}");
        assert_eq!(job["status"], "succeeded", "{job}");
    }
    // A rerun of the finished run enqueues nothing more.
    let again = project.baton(&["resume", status["run_id"].as_str().expect("id")]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    let jobs = project.json(&["queue", "list", "--json"]);
    assert_eq!(jobs.as_array().expect("jobs").len(), 3);
}

#[test]
fn without_the_local_worker_a_separate_worker_runs_the_jobs() {
    let project = Project::new();
    project.write("items.json", &json!({"items": ["x", "y"]}).to_string());
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}{SOURCE}  - name: fan\n    kind: execute\n    description: d\n    executor: worker_queue\n    agent: {{role: inline}}\n    depends_on: [src]\n    script: 'printf done > outputs/queued.txt'\n    writes_to: [queued.txt]\n"
        ),
    );
    let mut driver = project
        .command(&["run", "wf.yaml", "--no-local-worker", "--json"])
        .spawn()
        .expect("baton run starts");
    // The run waits for its job; nothing else works the queue until a
    // worker starts.
    crate::project::wait_for(
        "the job to be enqueued",
        std::time::Duration::from_secs(30),
        || {
            project
                .json(&["queue", "list", "--json"])
                .as_array()
                .is_some_and(|jobs| !jobs.is_empty())
        },
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    let jobs = project.json(&["queue", "list", "--json"]);
    assert_eq!(jobs[0]["status"], "available", "{jobs}");
    let worker = project.baton(&["worker", "--once"]);
    assert_eq!(worker.code, 0, "{}", worker.stderr);
    let code =
        crate::project::wait_bounded(&mut driver, "baton run", std::time::Duration::from_secs(60));
    assert_eq!(code, 0);
    let ids = project.run_ids();
    let status = project.json(&["status", &ids[0], "--json"]);
    assert_eq!(stage(&status, "fan")["status"], "success", "{status}");
    let workspace = PathBuf::from(status["workspace"].as_str().expect("workspace"));
    assert_eq!(read(&workspace, "outputs/queued.txt"), "done");
}

/// `baton ARGS` in `dir` against the SQLite store there or `database_url`.
fn command(dir: &Path, database_url: Option<&str>, args: &[&str]) -> std::process::Command {
    #[expect(
        clippy::disallowed_methods,
        reason = "the crash test drives baton processes"
    )]
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_baton"));
    command
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null());
    match database_url {
        Some(url) => command.env("BATON_DATABASE_URL", url),
        None => command.env_remove("BATON_DATABASE_URL"),
    };
    command
}

fn json_of(dir: &Path, database_url: Option<&str>, args: &[&str]) -> Value {
    let output = command(dir, database_url, args)
        .output()
        .expect("baton runs");
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "{args:?}: {error}: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// The keys of the fan-out children whose result envelope exists: each was
/// recorded as finished (envelopes are written after the commit).
fn finished_children(workspace: &Path) -> std::collections::BTreeSet<String> {
    std::fs::read_dir(workspace.join("stages"))
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|entry| {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    name.strip_prefix("001-fan-")?
                        .strip_suffix(".json")
                        .map(str::to_owned)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Kills `baton run` during a fan-out of 200 children once about half have
/// finished, resumes, and checks that every child ran, that no child
/// recorded as finished ran again, and that the run ends as an undisturbed
/// one does.
fn kill_nine_during_a_fan_out(database_url: Option<&str>, backend: &str) {
    const ITEMS: usize = 200;
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let items: Vec<Value> = (0..ITEMS)
        .map(|index| json!(format!("k{index:03}")))
        .collect();
    std::fs::write(
        dir.join("items.json"),
        json!({ "items": items }).to_string(),
    )
    .expect("write");
    let workflow = |name: &str| {
        format!(
            "name: {name}\nversion: '1'\ndescription: d\ntrigger: {{source: manual}}\nstages:\n{SOURCE}{}    writes_to: ['fan-{{key}}.txt']\n{AFTER}",
            inline_fan(
                "key",
                "sleep 0.03\necho \"$BATON_ITEM_KEY\" > \"outputs/fan-$BATON_ITEM_NAME.txt\"\necho \"$BATON_RUN_ID $BATON_ITEM_KEY $BATON_ATTEMPT\" >> \"$BATON_PROJECT_DIR/witness.txt\"",
                ""
            )
        )
    };
    let unique = format!(
        "{backend}-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_nanos()
    );
    let outcome = |id: &str| -> (Vec<(String, String)>, Vec<String>) {
        let status = json_of(dir, database_url, &["status", id, "--json"]);
        let stages = status["stages"]
            .as_array()
            .expect("stages")
            .iter()
            .map(|stage| {
                (
                    stage["stage"].as_str().expect("name").to_owned(),
                    stage["status"].as_str().expect("status").to_owned(),
                )
            })
            .collect();
        let workspace = PathBuf::from(status["workspace"].as_str().expect("workspace"));
        let mut outputs: Vec<String> = std::fs::read_dir(workspace.join("outputs"))
            .expect("outputs")
            .flatten()
            .map(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
                format!("{name}: {}", text.trim_end())
            })
            .collect();
        outputs.sort();
        (stages, outputs)
    };

    // The undisturbed run.
    let golden_name = format!("fan-golden-{unique}");
    std::fs::write(dir.join("golden.yaml"), workflow(&golden_name)).expect("write");
    let output = command(dir, database_url, &["run", "golden.yaml", "--json"])
        .output()
        .expect("baton runs");
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let golden_id = serde_json::from_slice::<Value>(&output.stdout).expect("JSON")["run_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let golden = outcome(&golden_id);
    assert!(
        golden.0.iter().all(|(_, status)| status == "success"),
        "{golden:?}"
    );
    assert_eq!(golden.1.len(), ITEMS + 2);

    // The same workflow, killed when about half the children have run.
    let name = format!("fan-crash-{unique}");
    std::fs::write(dir.join("wf.yaml"), workflow(&name)).expect("write");
    let _ = std::fs::remove_file(dir.join("witness.txt"));
    let mut child = command(dir, database_url, &["run", "wf.yaml"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .expect("baton starts");
    let start = std::time::Instant::now();
    loop {
        let witnessed = std::fs::read_to_string(dir.join("witness.txt"))
            .unwrap_or_default()
            .lines()
            .count();
        if witnessed >= ITEMS / 2 {
            break;
        }
        assert!(
            child.try_wait().expect("wait").is_none(),
            "{backend}: the run ended before half its children had run"
        );
        assert!(
            start.elapsed() < std::time::Duration::from_secs(120),
            "{backend}: half the children never ran"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // SIGKILL to baton's whole process group (the children run in groups
    // of their own and are left behind, as after a machine's crash).
    let pid = child.id().to_string();
    #[expect(clippy::disallowed_methods, reason = "the test kills baton")]
    let killed = std::process::Command::new("kill")
        .args(["-KILL", "--", &format!("-{pid}")])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let _ = child.wait();

    let runs = json_of(dir, database_url, &["runs", "--json"]);
    let id = runs
        .as_array()
        .expect("runs")
        .iter()
        .find(|run| run["workflow"] == name.as_str())
        .expect("the killed run was recorded")["run_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let status = json_of(dir, database_url, &["status", &id, "--json"]);
    assert_ne!(
        status["status"], "success",
        "{backend}: killed before the end"
    );
    let workspace = PathBuf::from(status["workspace"].as_str().expect("workspace"));
    let finished_before = finished_children(&workspace);
    assert!(
        !finished_before.is_empty() && finished_before.len() < ITEMS,
        "{backend}: {} children had finished at the kill",
        finished_before.len()
    );

    let output = command(dir, database_url, &["resume", &id])
        .output()
        .expect("baton resumes");
    assert_eq!(
        output.status.code(),
        Some(0),
        "{backend}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        outcome(&id),
        golden,
        "{backend}: ended as the undisturbed run"
    );

    // Every child ran; a child recorded as finished before the kill ran
    // exactly once.
    let witness = std::fs::read_to_string(dir.join("witness.txt")).expect("witness");
    let mut runs_of: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for line in witness
        .lines()
        .filter(|line| line.starts_with(&format!("{id} ")))
    {
        let key = line.split_whitespace().nth(1).expect("key").to_owned();
        *runs_of.entry(key).or_default() += 1;
    }
    for item in &items {
        let key = item.as_str().expect("key");
        let count = runs_of.get(key).copied().unwrap_or(0);
        assert!(count >= 1, "{backend}: {key} never ran");
        if finished_before.contains(key) {
            assert_eq!(
                count, 1,
                "{backend}: {key} finished before the kill and ran again"
            );
        }
    }
    eprintln!(
        "{backend}: killed with {} of {ITEMS} children recorded; {} children ran again after the resume",
        finished_before.len(),
        runs_of.values().filter(|count| **count > 1).count()
    );
}

#[test]
fn kill_nine_during_a_fan_out_of_200_then_resume_on_sqlite() {
    kill_nine_during_a_fan_out(None, "sqlite");
}

#[test]
fn kill_nine_during_a_fan_out_of_200_then_resume_on_postgres() {
    if let Some(url) = baton_test_support::needs::postgres_url() {
        kill_nine_during_a_fan_out(Some(&url), "postgres");
    }
}

/// Whether `value` holds a string containing `needle`, anywhere.
fn holds(value: &Value, needle: &str) -> bool {
    match value {
        Value::String(text) => text.contains(needle),
        Value::Array(items) => items.iter().any(|item| holds(item, needle)),
        Value::Object(map) => map.values().any(|item| holds(item, needle)),
        _ => false,
    }
}

#[test]
fn escape_sequences_in_keys_and_errors_never_reach_the_terminal_but_json_keeps_them() {
    let project = Project::new();
    let key = "\u{1b}[2K\rok \u{1b}]0;title\u{7}\u{9b}1A";
    let items = json!({ "items": [{"id": key}] });
    project.write("items.json", &items.to_string());
    let fan = inline_fan(
        "id",
        "printf 'boom\\033[2K\\r\\033]0;pwned\\007\\n' >&2\nexit 1",
        "",
    );
    project.write("wf.yaml", &format!("{HEADER}{SOURCE}{fan}"));
    let run = project.baton(&["run", "wf.yaml"]);
    assert_eq!(run.code, 2, "{run:?}");
    let id = run
        .stdout
        .split_whitespace()
        .next()
        .expect("run id")
        .to_owned();
    let texts = [
        ("run stdout", run.stdout.clone()),
        ("run stderr", run.stderr.clone()),
        ("status", project.baton(&["status", &id]).stdout),
        ("runs", project.baton(&["runs"]).stdout),
        ("logs", project.baton(&["logs", &id]).stdout),
    ];
    for (what, text) in &texts {
        assert!(
            !text.contains(['\u{1b}', '\u{7}', '\r', '\u{9b}']),
            "{what}: {text:?}"
        );
    }
    assert!(texts[1].1.contains("FAILED"), "{:?}", texts[1].1);
    assert!(texts[4].1.contains("boom"), "{:?}", texts[4].1);
    let status = project.json(&["status", &id, "--format", "json"]);
    assert!(holds(&status, key), "the exact key: {status}");
    assert!(
        holds(&status, "boom\u{1b}[2K\r\u{1b}]0;pwned\u{7}"),
        "the exact error: {status}"
    );
}

#[test]
fn a_key_too_large_for_a_variable_fails_its_child_saying_so_and_lines_stay_short() {
    let project = Project::new();
    let huge = "k".repeat(200_000);
    project.write(
        "items.json",
        &json!({ "items": [{"id": huge}, {"id": "b"}] }).to_string(),
    );
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}{SOURCE}{}",
            inline_fan("id", "echo {id} > outputs/out.txt", "")
        ),
    );
    let run = project.baton(&["run", "wf.yaml"]);
    assert_eq!(run.code, 2, "a failed run");
    assert!(
        run.stderr.contains(
            "`{id}` holds 200000 bytes, more than the 131060 a script's variable can carry"
        ),
        "{}",
        &run.stderr[..run.stderr.len().min(2_000)]
    );
    assert!(!run.stderr.contains("cannot start"));
    for line in run.stderr.lines() {
        assert!(
            line.chars().count() < 3_000,
            "a line of {} chars",
            line.len()
        );
    }
}
