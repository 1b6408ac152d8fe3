//! Crash recovery: `kill -9` of baton at random moments (including the first
//! 50 ms), then `baton resume`, many times over, on runs of a workflow with
//! parallel stages. Every run must end exactly as an undisturbed run does:
//! the same stage statuses and output hashes, no recorded success executed
//! again, and no process of the run left alive.
//!
//! Runs on SQLite always, and on PostgreSQL when `BATON_TEST_DATABASE_URL`
//! is set (as `./scripts/test` does). `BATON_CRASH_KILLS` sets the number of
//! kills per backend (default 100); `scripts/soak` runs thousands.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Two parallel roots, a join, a fan of three, and a final stage; each
/// stage sleeps a little, writes a deterministic output and checks it.
fn workflow(name: &str) -> String {
    let stage = |stage: &str, sleep: &str, deps: &str| {
        format!(
            "  - name: {stage}\n    kind: execute\n    description: d\n    executor: inline\n{deps}    script: |\n      echo \"$BATON_RUN_ID $BATON_STAGE $BATON_ATTEMPT\" >> \"$BATON_PROJECT_DIR/witness.txt\"\n      sleep {sleep}\n      echo '{{\"stage\": \"{stage}\"}}' > outputs/{stage}.json\n    writes_to: [{stage}.json]\n    validates_output: [{{path: outputs/{stage}.json, checks: [is_json, \"has_key:stage\"]}}]\n"
        )
    };
    let mut text = format!(
        "name: {name}\nversion: '1'\ndescription: crash test\ntrigger: {{source: manual}}\nstages:\n"
    );
    text.push_str(&stage("left", "0.05", ""));
    text.push_str(&stage("right", "0.08", ""));
    text.push_str(&stage("join", "0.03", "    depends_on: [left, right]\n"));
    for fan in ["fan-a", "fan-b", "fan-c"] {
        text.push_str(&stage(fan, "0.04", "    depends_on: [join]\n"));
    }
    text.push_str(&stage(
        "last",
        "0.02",
        "    depends_on: [fan-a, fan-b, fan-c]\n",
    ));
    text
}

/// A small deterministic random source (xorshift), seeded per test.
struct Random(u64);

impl Random {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }
}

struct Harness<'a> {
    dir: &'a Path,
    database_url: Option<String>,
}

impl Harness<'_> {
    fn command(&self, args: &[&str]) -> Command {
        #[expect(
            clippy::disallowed_methods,
            reason = "the crash test drives baton processes"
        )]
        let mut command = Command::new(env!("CARGO_BIN_EXE_baton"));
        command
            .args(args)
            .current_dir(self.dir)
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        match &self.database_url {
            Some(url) => command.env("BATON_DATABASE_URL", url),
            None => command.env_remove("BATON_DATABASE_URL"),
        };
        command
    }

    fn json(&self, args: &[&str]) -> Value {
        let output = self.command(args).output().expect("baton runs");
        serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
            panic!(
                "{args:?}: {error}: {}",
                String::from_utf8_lossy(&output.stderr)
            )
        })
    }

    /// Starts `args` and SIGKILLs it after `delay` unless it ended first.
    /// Returns whether it was killed.
    fn run_and_kill(&self, args: &[&str], delay: Duration) -> bool {
        let mut child = self
            .command(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("baton starts");
        let start = Instant::now();
        while start.elapsed() < delay {
            if child.try_wait().expect("wait").is_some() {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let killed = child.try_wait().expect("wait").is_none();
        let _ = child.kill();
        let _ = child.wait();
        killed
    }

    fn run_to_end(&self, args: &[&str]) {
        let output = self.command(args).output().expect("baton runs");
        assert_eq!(
            output.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// The final state of a run: stage statuses and output hashes, by stage.
fn digest(harness: &Harness<'_>, run_id: &str) -> BTreeMap<String, (String, String)> {
    let status = harness.json(&["status", run_id, "--json"]);
    let workspace = Path::new(status["workspace"].as_str().expect("workspace"));
    status["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .map(|stage| {
            let name = stage["stage"].as_str().expect("name").to_owned();
            let output =
                std::fs::read(workspace.join(format!("outputs/{name}.json"))).unwrap_or_default();
            (
                name,
                (
                    stage["status"].as_str().expect("status").to_owned(),
                    format!("{:x}", fxhash(&output)),
                ),
            )
        })
        .collect()
}

fn fxhash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn crash_suite(database_url: Option<String>, backend: &str, seed: u64) {
    let kills_wanted: usize = std::env::var("BATON_CRASH_KILLS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(100);
    let dir = tempfile::tempdir().expect("temp dir");
    let harness = Harness {
        dir: dir.path(),
        database_url,
    };
    let name = format!("crash-{backend}-{seed}");
    std::fs::write(dir.path().join("wf.yaml"), workflow(&name)).expect("write");

    // The golden state: one undisturbed run.
    harness.run_to_end(&["run", "wf.yaml"]);
    let runs = harness.json(&["runs", "--json"]);
    let golden_id = runs
        .as_array()
        .expect("runs")
        .iter()
        .rev()
        .find(|run| run["workflow"] == name.as_str())
        .expect("the run")["run_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let golden = digest(&harness, &golden_id);
    assert!(
        golden.values().all(|(status, _)| status == "success"),
        "{golden:?}"
    );

    let mut random = Random(seed | 1);
    let mut kills = 0;
    let mut early_kills = 0;
    let mut runs_checked = 0;
    while kills < kills_wanted {
        let known: Vec<String> = harness
            .json(&["runs", "--json"])
            .as_array()
            .expect("runs")
            .iter()
            .map(|run| run["run_id"].as_str().expect("id").to_owned())
            .collect();
        let delay = Duration::from_millis(random.below(400));
        if harness.run_and_kill(&["run", "wf.yaml"], delay) {
            kills += 1;
            if delay < Duration::from_millis(50) {
                early_kills += 1;
            }
        }
        // This suite's workflow only: on PostgreSQL other tests create runs
        // in the same database meanwhile.
        let after = harness.json(&["runs", "--json"]);
        let Some(run_id) = after
            .as_array()
            .expect("runs")
            .iter()
            .filter(|run| run["workflow"] == name.as_str())
            .map(|run| run["run_id"].as_str().expect("id").to_owned())
            .find(|id| !known.contains(id))
        else {
            // Killed before the run was recorded: nothing to resume.
            continue;
        };
        // Resume, killing some resumes too, until the run ends.
        for _ in 0..20 {
            let status = harness.json(&["status", &run_id, "--json"]);
            if status["status"] == "success" {
                break;
            }
            if kills < kills_wanted && random.below(2) == 0 {
                if harness.run_and_kill(
                    &["resume", &run_id],
                    Duration::from_millis(random.below(300)),
                ) {
                    kills += 1;
                }
            } else {
                harness.run_to_end(&["resume", &run_id]);
            }
        }
        assert_eq!(
            digest(&harness, &run_id),
            golden,
            "{backend}: run {run_id} ended differently from an undisturbed run"
        );
        runs_checked += 1;

        // No recorded success ran again: every witnessed execution of a
        // stage has its own attempt number, and the last one is the attempt
        // the store recorded as the success.
        let witness = std::fs::read_to_string(dir.path().join("witness.txt")).unwrap_or_default();
        let mut executions: HashMap<String, Vec<i64>> = HashMap::new();
        for line in witness
            .lines()
            .filter(|line| line.starts_with(&format!("{run_id} ")))
        {
            let mut fields = line.split_whitespace().skip(1);
            let stage = fields.next().expect("stage").to_owned();
            executions
                .entry(stage)
                .or_default()
                .push(fields.next().expect("attempt").parse().expect("number"));
        }
        let status = harness.json(&["status", &run_id, "--json"]);
        for stage in status["stages"].as_array().expect("stages") {
            let name = stage["stage"].as_str().expect("name");
            let attempts = stage["attempts"].as_i64().expect("attempts");
            let seen = executions.get(name).cloned().unwrap_or_default();
            let mut unique = seen.clone();
            unique.dedup();
            assert_eq!(
                unique, seen,
                "{backend} {run_id}: {name} ran twice under one attempt: {seen:?}"
            );
            assert_eq!(
                seen.last().copied(),
                Some(attempts),
                "{backend} {run_id}: {name}: the recorded attempt is the last execution ({seen:?})"
            );
        }
        assert_eq!(
            baton_test_support::procs::processes_of_run(&run_id),
            0,
            "{backend} {run_id}: a stage process survived"
        );
    }
    eprintln!(
        "{backend}: {kills} kills ({early_kills} in the first 50 ms) over {runs_checked} runs; all ended as the undisturbed run"
    );
    assert!(early_kills > 0, "some kills land in the first 50 ms");
}

#[test]
fn kill_nine_and_resume_on_sqlite() {
    crash_suite(None, "sqlite", 0x5eed_0001);
}

#[test]
fn kill_nine_and_resume_on_postgres() {
    if let Some(url) = baton_test_support::needs::postgres_url() {
        crash_suite(Some(url), "postgres", 0x5eed_0002);
    }
}

/// A stage validated by two validators whose findings stay critical until
/// one correction was applied; the corrector takes a while.
fn correction_workflow(name: &str) -> String {
    format!(
        "name: {name}\nversion: '1'\ndescription: crash during a correction\ntrigger: {{source: manual}}\nstages:\n  - name: report\n    kind: execute\n    description: d\n    executor: inline\n    script: |\n      printf '[{{\"id\": \"a\"}}, {{\"id\": \"b\"}}]' > outputs/report.json\n    writes_to: [report.json]\n    validation: {{strategy: unit, max_revisions: 2}}\n"
    )
}

/// `baton.toml`: validators and the corrector are the stand-in agent,
/// each leaving a witness line.
fn correction_agents(witness: &Path) -> String {
    let fake = Path::new(env!("CARGO_BIN_EXE_baton")).with_file_name("baton-fake-agent");
    let role = |role: &str, directive: &str| {
        format!(
            "\n[agents.{role}]\nprofile = \"{role}\"\n\n[profiles.{role}]\nprogram = \"{}\"\nprompt = {{ via = \"stdin\" }}\nenv_passthrough = [\"PATH\", \"HOME\"]\nenv = {{ BATON_FAKE_AGENT = \"{directive}\", BATON_FAKE_WITNESS = \"{}\" }}\n",
            fake.display(),
            witness.display()
        )
    };
    [
        role("validator", "findings critical-until 1"),
        role("correction", "sleep 2\\ncorrect"),
    ]
    .concat()
}

fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn correction_crash(database_url: Option<String>, backend: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let harness = Harness {
        dir: dir.path(),
        database_url: database_url.clone(),
    };
    // Outside the project: the validators are read-only agents, contained.
    let witness_dir = tempfile::tempdir().expect("temp dir");
    let witness = witness_dir.path().join("agents-witness.txt");
    std::fs::write(dir.path().join("baton.toml"), correction_agents(&witness)).expect("write");
    // Unique: a PostgreSQL database outlives the test, and a run of the
    // same name left by an earlier test run must not be taken for this one.
    let name = format!("correction-crash-{backend}-{}", std::process::id());
    std::fs::write(dir.path().join("wf.yaml"), correction_workflow(&name)).expect("write");

    // Run, and kill -9 baton while the correction unit runs.
    let mut child = harness
        .command(&["run", "wf.yaml"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("baton starts");
    let mut run_id = String::new();
    wait_until("the run to be recorded", || {
        let runs = harness.json(&["runs", "--json"]);
        match runs
            .as_array()
            .expect("runs")
            .iter()
            .find(|run| run["workflow"] == name.as_str())
        {
            Some(run) => {
                run_id = run["run_id"].as_str().expect("id").to_owned();
                true
            }
            None => false,
        }
    });
    let status = harness.json(&["status", &run_id, "--json"]);
    let workspace = Path::new(status["workspace"].as_str().expect("workspace")).to_path_buf();
    wait_until("the correction unit to start", || {
        workspace
            .join("dispatch/000-report-c1-correct.prompt.md")
            .is_file()
    });
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        child.try_wait().expect("wait").is_none(),
        "baton ended before it was killed"
    );
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        !workspace
            .join("validation/corrections-applied.json")
            .exists(),
        "the correction had not finished when baton was killed"
    );

    harness.run_to_end(&["resume", &run_id]);
    let status = harness.json(&["status", &run_id, "--json"]);
    assert_eq!(status["status"], "success", "{backend}: {status}");
    let report = &status["stages"][0];
    assert_eq!(report["findings"]["cycle"], 2, "{backend}: {status}");

    // Exactly the one correction that completed is logged: its entries,
    // one per critical finding of cycle 1, once each.
    let applied: Value = serde_json::from_str(
        &std::fs::read_to_string(workspace.join("validation/corrections-applied.json"))
            .expect("corrections log"),
    )
    .expect("json");
    let entries = applied.as_array().expect("array");
    let logged: Vec<(&Value, &Value)> = entries
        .iter()
        .map(|entry| (&entry["cycle"], &entry["finding_id"]))
        .collect();
    assert_eq!(
        logged,
        [
            (&Value::from(1), &Value::from("F1")),
            (&Value::from(1), &Value::from("F1#2"))
        ],
        "{backend}: {applied}"
    );
    assert!(!workspace.join("validation/report/cycle-3").exists());

    // The store kept cycle 1's findings (critical) and added cycle 2's (passed);
    // the units are those of two cycles and one correction.
    let (units, findings) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(async {
            let location = database_url.clone().unwrap_or_else(|| {
                dir.path()
                    .join(".baton/baton.db")
                    .to_string_lossy()
                    .into_owned()
            });
            let store = baton_store::Store::open(&location).await.expect("store");
            (
                store.units(&run_id).await.expect("units"),
                store.findings(&run_id).await.expect("findings"),
            )
        });
    let cycles: Vec<(i64, String)> = findings
        .iter()
        .map(|finding| (finding.cycle, finding.status.clone()))
        .collect();
    assert_eq!(
        cycles,
        [
            (1, "FAIL".to_owned()),
            (1, "FAIL".to_owned()),
            (2, "PASS".to_owned()),
            (2, "PASS".to_owned())
        ],
        "{backend}"
    );
    let mut keys: Vec<(String, String, i64)> = units
        .iter()
        .map(|unit| (unit.key.clone(), unit.status.clone(), unit.attempts))
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            ("c1:correct".to_owned(), "success".to_owned(), 2),
            ("main".to_owned(), "success".to_owned(), 1),
            ("v1:unit:1".to_owned(), "success".to_owned(), 1),
            ("v1:unit:2".to_owned(), "success".to_owned(), 1),
            ("v2:unit:1".to_owned(), "success".to_owned(), 1),
            ("v2:unit:2".to_owned(), "success".to_owned(), 1),
        ],
        "{backend}"
    );

    // Witnessed executions, by idempotency key: no finished validator ran
    // again; the correction ran to its end once, as its second attempt.
    let witnessed = std::fs::read_to_string(&witness).expect("witness");
    let mut by_key: HashMap<String, usize> = HashMap::new();
    for line in witnessed.lines() {
        let key = line.split_whitespace().nth(3).expect("key").to_owned();
        *by_key.entry(key).or_default() += 1;
    }
    let mut expected: HashMap<String, usize> = HashMap::new();
    for key in [
        "v1:unit:1/1",
        "v1:unit:2/1",
        "c1:correct/2",
        "v2:unit:1/1",
        "v2:unit:2/1",
    ] {
        expected.insert(format!("{run_id}/report/{key}"), 1);
    }
    assert_eq!(by_key, expected, "{backend}: {witnessed}");
    assert_eq!(
        baton_test_support::procs::processes_of_run(&run_id),
        0,
        "{backend}: a unit process survived"
    );
}

#[test]
fn kill_nine_during_a_correction_keeps_the_cycle_count_on_sqlite() {
    correction_crash(None, "sqlite");
}

#[test]
fn kill_nine_during_a_correction_keeps_the_cycle_count_on_postgres() {
    if let Some(url) = baton_test_support::needs::postgres_url() {
        correction_crash(Some(url), "postgres");
    }
}
