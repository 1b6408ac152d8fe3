//! `baton run`, `status`, `runs`, `logs`, `resume`, `rerun`, `cancel` on real
//! processes and a real SQLite store, in a scratch project per test.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use baton_test_support::workspace_root;
use serde_json::Value;

use crate::baton;

/// A scratch project: a git repository with a `.baton` store of its own.
struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    fn new() -> Project {
        let dir = tempfile::tempdir().expect("temp dir");
        crate::project::git_repository(
            dir.path(),
            &[("hello.txt", "hello\n"), ("main.rs", "fn main() {}\n")],
        );
        Project { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.path().join(name), text).expect("write");
    }

    fn baton(&self, args: &[&str]) -> baton_test_support::Run {
        baton(self.path(), args)
    }

    fn json(&self, args: &[&str]) -> Value {
        let run = self.baton(args);
        serde_json::from_str(&run.stdout).unwrap_or_else(|error| {
            panic!(
                "{args:?}: {error}\nstdout: {}\nstderr: {}",
                run.stdout, run.stderr
            )
        })
    }

    /// Lines in the witness file the test workflows append to.
    fn witness(&self) -> Vec<String> {
        std::fs::read_to_string(self.path().join("witness.txt"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn spawn(&self, args: &[&str]) -> Child {
        #[expect(
            clippy::disallowed_methods,
            reason = "tests run baton in the background to kill it"
        )]
        Command::new(env!("CARGO_BIN_EXE_baton"))
            .args(args)
            .current_dir(self.path())
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("baton starts")
    }
}

fn run_id(run: &baton_test_support::Run) -> String {
    let value: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}\n{}", run.stdout, run.stderr));
    value["run_id"].as_str().expect("run_id").to_owned()
}

fn stage_statuses(status: &Value) -> Vec<(String, String)> {
    status["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .map(|stage| {
            (
                stage["stage"].as_str().expect("name").to_owned(),
                stage["status"].as_str().expect("status").to_owned(),
            )
        })
        .collect()
}

const HEADER: &str = "name: t\nversion: '1'\ndescription: d\ntrigger: {source: manual}\nstages:\n";

/// An inline stage that records itself in the witness file, then runs `body`.
fn stage(name: &str, body: &str, extra: &str) -> String {
    format!(
        "  - name: {name}\n    kind: execute\n    description: d\n    executor: inline\n    script: |\n      echo \"$BATON_STAGE $BATON_ATTEMPT\" >> \"$BATON_PROJECT_DIR/witness.txt\"\n      {body}\n{extra}"
    )
}

#[test]
fn quickstart_runs_to_the_end_and_status_shows_every_stage() {
    let project = Project::new();
    let example = workspace_root().join("examples/quickstart/workflow.yaml");
    std::fs::copy(example, project.path().join("workflow.yaml")).expect("copy");
    let run = project.baton(&["run", "workflow.yaml", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let id = run_id(&run);
    assert!(
        id.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
        "{id}"
    );

    let status = project.json(&["status", &id, "--json"]);
    assert_eq!(status["status"], "success");
    for stage in status["stages"].as_array().expect("stages") {
        assert_eq!(stage["status"], "success", "{stage}");
        assert!(stage["duration_ms"].as_i64().is_some(), "{stage}");
    }
    let workspace = PathBuf::from(status["workspace"].as_str().expect("workspace"));
    let report =
        std::fs::read_to_string(workspace.join("outputs/report.md")).expect("the report exists");
    assert!(report.contains("first commit"), "{report}");
    assert!(report.contains("- rs: 1"), "{report}");
    for file in ["manifest.json", "plan.json", "stages/002-report.json"] {
        assert!(workspace.join(file).is_file(), "{file}");
    }

    let runs = project.json(&["runs", "--json"]);
    assert_eq!(runs[0]["run_id"], id.as_str());
    assert_eq!(runs[0]["status"], "success");
}

#[test]
fn failures_are_named_and_halt_required_work() {
    let project = Project::new();
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}{}{}{}{}",
            stage("optional", "exit 3", "    required: false\n"),
            stage("after-optional", "true", "    depends_on: [optional]\n"),
            // After the optional branch, so that the halt cannot come first.
            stage(
                "no-output",
                "true",
                "    depends_on: [after-optional]\n    writes_to: [outputs/missing.json]\n"
            ),
            stage("never", "true", "    depends_on: [no-output]\n"),
        ),
    );
    let run = project.baton(&["run", "wf.yaml", "--json"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("status=failed"), "{}", run.stderr);
    let status = project.json(&["status", &run_id(&run), "--json"]);
    let stages = status["stages"].as_array().expect("stages");
    let find = |name: &str| {
        stages
            .iter()
            .find(|stage| stage["stage"] == name)
            .expect("stage")
            .clone()
    };
    assert_eq!(find("optional")["status"], "failed");
    assert!(
        find("optional")["error"]
            .as_str()
            .expect("error")
            .contains("exited with code 3")
    );
    assert_eq!(
        find("after-optional")["status"],
        "success",
        "an optional failure lets dependants run"
    );
    assert_eq!(find("no-output")["status"], "failed");
    assert!(
        find("no-output")["error"]
            .as_str()
            .expect("error")
            .contains("outputs/missing.json")
    );
    assert_eq!(
        find("never")["status"],
        "pending",
        "a required failure halts"
    );
}

#[test]
fn output_checks_and_when_conditions_are_enforced() {
    let project = Project::new();
    project.write(
        "wf.yaml",
        &format!(
            "name: t\nversion: '1'\ndescription: d\ntrigger: {{source: manual, params: {{mode: fast}}}}\nstages:\n{}{}",
            stage("bad-json", "echo '[1]' > outputs/x.json", "    writes_to: [outputs/x.json]\n    validates_output: [{path: outputs/x.json, checks: [is_json, is_dict]}]\n    required: false\n"),
            stage("slow-only", "true", "    when: '\"{mode}\" contains \"slow\"'\n    writes_to: [s.json]\n"),
        ),
    );
    let run = project.baton(&["run", "wf.yaml", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let status = project.json(&["status", &run_id(&run), "--json"]);
    assert_eq!(
        stage_statuses(&status),
        vec![
            ("bad-json".into(), "failed".into()),
            ("slow-only".into(), "skipped".into())
        ]
    );
    assert!(
        status["stages"][0]["error"]
            .as_str()
            .expect("error")
            .contains("is_dict")
    );
    // The skipped stage says why, with the parameter's value.
    assert_eq!(
        status["stages"][1]["note"],
        "skipped: when \"{mode}\" contains \"slow\" (\"fast\" contains \"slow\")",
        "{status}"
    );
    // The skipped stage leaves the reference's `{}` sentinel.
    let workspace = PathBuf::from(status["workspace"].as_str().expect("workspace"));
    assert_eq!(
        std::fs::read_to_string(workspace.join("outputs/s.json")).expect("sentinel"),
        "{}\n"
    );
    assert_eq!(project.witness(), vec!["bad-json 1"]);
}

#[test]
fn resume_never_reruns_recorded_work_and_rerun_reruns_dependants() {
    let project = Project::new();
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}{}{}{}",
            stage("a", "echo a > outputs/a.txt", "    writes_to: [a.txt]\n"),
            stage("b", "true", "    depends_on: [a]\n"),
            stage("c", "true", ""),
        ),
    );
    let run = project.baton(&["run", "wf.yaml", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let id = run_id(&run);
    assert_eq!(project.witness().len(), 3);

    let resume = project.baton(&["resume", &id]);
    assert_eq!(resume.code, 0, "{}", resume.stderr);
    assert_eq!(
        project.witness().len(),
        3,
        "a finished run is not run again"
    );

    let rerun = project.baton(&["rerun", &id, "a"]);
    assert_eq!(rerun.code, 0, "{}", rerun.stderr);
    let witness = project.witness();
    assert_eq!(
        &witness[3..],
        &["a 2".to_owned(), "b 2".to_owned()],
        "a and its dependant b run again; c does not"
    );

    // A recorded output changed by hand makes its stage stale.
    let status = project.json(&["status", &id, "--json"]);
    let workspace = PathBuf::from(status["workspace"].as_str().expect("workspace"));
    std::fs::write(workspace.join("outputs/a.txt"), "edited\n").expect("write");
    project.baton(&["rerun", &id, "c"]);
    let witness = project.witness();
    assert!(witness.contains(&"a 3".to_owned()), "{witness:?}");
}

/// `manifest.json` and `plan.json` are written without an fsync: a machine
/// crash may leave them empty or torn, and the next resume writes them again.
#[test]
fn resume_rewrites_a_manifest_and_plan_left_empty_or_torn() {
    let project = Project::new();
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}{}",
            stage("flaky", "test -f \"$BATON_PROJECT_DIR/fixed\"", "")
        ),
    );
    let run = project.baton(&["run", "wf.yaml", "--json"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let id = run_id(&run);
    let status = project.json(&["status", &id, "--json"]);
    let workspace = PathBuf::from(status["workspace"].as_str().expect("workspace"));
    let plan_before = std::fs::read_to_string(workspace.join("plan.json")).expect("plan.json");
    let manifest_before =
        std::fs::read_to_string(workspace.join("manifest.json")).expect("manifest.json");
    std::fs::write(workspace.join("plan.json"), "").expect("empty plan.json");
    std::fs::write(workspace.join("manifest.json"), &manifest_before[..20]).expect("torn");

    project.write("fixed", "");
    let resume = project.baton(&["resume", &id]);
    assert_eq!(resume.code, 0, "{}", resume.stderr);
    let plan_after = std::fs::read_to_string(workspace.join("plan.json")).expect("plan.json");
    let manifest_after =
        std::fs::read_to_string(workspace.join("manifest.json")).expect("manifest.json");
    assert_eq!(plan_after, plan_before);
    assert_eq!(manifest_after, manifest_before);
}

#[test]
fn resume_refuses_a_changed_workflow_unless_accepted() {
    let project = Project::new();
    project.write("wf.yaml", &format!("{HEADER}{}", stage("a", "exit 1", "")));
    let run = project.baton(&["run", "wf.yaml", "--json"]);
    assert_eq!(run.code, 2);
    let id = run_id(&run);
    project.write("wf.yaml", &format!("{HEADER}{}", stage("a", "true", "")));
    let refused = project.baton(&["resume", &id]);
    assert_eq!(refused.code, 2);
    assert!(
        refused.stderr.contains("changed since"),
        "{}",
        refused.stderr
    );
    assert!(refused.stderr.contains("wf.yaml"), "{}", refused.stderr);
    let accepted = project.baton(&["resume", &id, "--accept-changes"]);
    assert_eq!(accepted.code, 0, "{}", accepted.stderr);
}

/// Waits until `check` holds, or fails after `limit`.
fn wait_for(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_second_driver_is_refused_and_cancel_stops_the_first() {
    let project = Project::new();
    project.write(
        "wf.yaml",
        &format!("{HEADER}{}", stage("slow", "sleep 30", "")),
    );
    let mut first = project.spawn(&["run", "wf.yaml"]);
    wait_for("the stage to start", Duration::from_secs(20), || {
        project.witness().len() == 1
    });
    let runs = project.json(&["runs", "--json"]);
    let id = runs[0]["run_id"].as_str().expect("id").to_owned();

    let second = project.baton(&["resume", &id]);
    assert_eq!(second.code, 2);
    assert!(
        second.stderr.contains("is being driven by"),
        "{}",
        second.stderr
    );

    let cancel = project.baton(&["cancel", &id]);
    assert_eq!(cancel.code, 0, "{}", cancel.stderr);
    let status = first.wait().expect("the first driver exits");
    assert_eq!(status.code(), Some(2));
    let run = project.json(&["status", &id, "--json"]);
    assert_eq!(run["status"], "cancelled");
}

#[test]
fn kill_minus_nine_then_resume_finishes_without_rerunning_recorded_stages() {
    let project = Project::new();
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}{}{}{}",
            stage("fast", "true", ""),
            stage("slow", "sleep 2", "    depends_on: [fast]\n"),
            stage("last", "true", "    depends_on: [slow]\n"),
        ),
    );
    let mut first = project.spawn(&["run", "wf.yaml"]);
    // `slow` may start before `fast`'s success is committed (a short
    // script's result waits a few milliseconds to share a commit, and a
    // crash in between runs it again): kill once that success is recorded.
    wait_for(
        "the slow stage, after fast's success is recorded",
        Duration::from_secs(20),
        || {
            project
                .witness()
                .iter()
                .any(|line| line.starts_with("slow"))
                && stage_status(&project, "fast").as_deref() == Some("success")
        },
    );
    first.kill().expect("SIGKILL");
    first.wait().expect("reaped");
    let runs = project.json(&["runs", "--json"]);
    let id = runs[0]["run_id"].as_str().expect("id").to_owned();

    let resume = project.baton(&["resume", &id]);
    assert_eq!(resume.code, 0, "{}", resume.stderr);
    let witness = project.witness();
    assert_eq!(
        witness
            .iter()
            .filter(|line| line.starts_with("fast"))
            .count(),
        1,
        "{witness:?}"
    );
    assert_eq!(
        witness
            .iter()
            .filter(|line| line.starts_with("slow"))
            .count(),
        2,
        "{witness:?}"
    );
    assert_eq!(
        witness
            .iter()
            .filter(|line| line.starts_with("last"))
            .count(),
        1,
        "{witness:?}"
    );
    // The orphaned `sleep` of the killed driver did not survive the resume.
    let leftovers = baton_test_support::procs::processes_of_run(&id);
    assert_eq!(leftovers, 0);
}

/// The recorded status of the only run's `stage`, once there is a run.
fn stage_status(project: &Project, stage: &str) -> Option<String> {
    let runs = project.json(&["runs", "--json"]);
    let id = runs.get(0)?["run_id"].as_str()?.to_owned();
    let status = project.json(&["status", &id, "--json"]);
    status["stages"]
        .as_array()?
        .iter()
        .find(|row| row["stage"] == stage)?["status"]
        .as_str()
        .map(str::to_owned)
}

#[test]
fn two_resumes_at_once_exactly_one_drives() {
    let project = Project::new();
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}{}{}",
            stage("slow", "sleep 1", ""),
            stage("after", "true", "    depends_on: [slow]\n")
        ),
    );
    for round in 0..3 {
        let mut first = project.spawn(&["run", "wf.yaml"]);
        wait_for("the slow stage", Duration::from_secs(20), || {
            project
                .witness()
                .iter()
                .filter(|line| line.starts_with("slow"))
                .count()
                > round * 2
        });
        first.kill().expect("SIGKILL");
        first.wait().expect("reaped");
        let runs = project.json(&["runs", "--json"]);
        let id = runs.as_array().expect("runs").last().expect("a run")["run_id"]
            .as_str()
            .expect("id")
            .to_owned();

        let spawn = |id: &str| {
            #[expect(clippy::disallowed_methods, reason = "two resumes race on purpose")]
            Command::new(env!("CARGO_BIN_EXE_baton"))
                .args(["resume", id])
                .current_dir(project.path())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("baton starts")
        };
        let (one, two) = (spawn(&id), spawn(&id));
        let results: Vec<_> = [one, two]
            .into_iter()
            .map(|child| child.wait_with_output().expect("ends"))
            .collect();
        let codes: Vec<i32> = results
            .iter()
            .map(|output| output.status.code().unwrap_or(-1))
            .collect();
        let refused: Vec<String> = results
            .iter()
            .filter(|output| output.status.code() == Some(2))
            .map(|output| String::from_utf8_lossy(&output.stderr).into_owned())
            .collect();
        assert!(
            codes.contains(&0) && codes.contains(&2),
            "round {round}: one drives, one is refused: {codes:?}"
        );
        assert!(
            refused[0].contains("is being driven by"),
            "round {round}: {}",
            refused[0]
        );
        let status = project.json(&["status", &id, "--json"]);
        assert_eq!(status["status"], "success", "round {round}");
    }
}

#[test]
fn an_agent_that_hangs_is_killed_by_its_timeout_and_one_that_writes_nothing_fails() {
    let project = Project::new();
    let fake = Path::new(env!("CARGO_BIN_EXE_baton")).with_file_name("baton-fake-agent");
    project.write(
        "baton.toml",
        &format!(
            // The flood has a wall limit of its own: writing 1 GB through a
            // pipe can take more than 2 s on a machine busy with other tests.
            "[agents.default]\nprofile = \"fake\"\n\n[agents.flooder]\nprofile = \"patient\"\n\n[profiles.fake]\nprogram = \"{}\"\nprompt = {{ via = \"stdin\" }}\nenv_passthrough = [\"PATH\", \"HOME\"]\nlimits = {{ wall = \"2s\", kill_grace = \"1s\" }}\n\n[profiles.patient]\nextends = \"fake\"\nlimits = {{ wall = \"60s\", kill_grace = \"1s\" }}\n",
            fake.display()
        ),
    );
    let agent = |name: &str, directive: &str, role: &str, extra: &str| {
        format!(
            "  - name: {name}\n    kind: gather\n    description: |\n      FAKE-AGENT: {directive}\n    agent: {{role: {role}}}\n    required: false\n{extra}"
        )
    };
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}{}{}{}",
            agent("hangs", "hang", "researcher", "    writes_to: [h.json]\n"),
            agent(
                "silent",
                "exit 0",
                "researcher",
                "    writes_to: [missing.json]\n"
            ),
            agent(
                "floods",
                "flood 1073741824",
                "flooder",
                "    writes_to: [f.json]\n"
            ),
        ),
    );
    let start = Instant::now();
    let run = project.baton(&["run", "wf.yaml", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let status = project.json(&["status", &run_id(&run), "--json"]);
    let error = |name: &str| {
        status["stages"]
            .as_array()
            .expect("stages")
            .iter()
            .find(|stage| stage["stage"] == name)
            .expect("stage")["error"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert!(error("hangs").contains("timed out"), "{}", error("hangs"));
    assert!(
        error("silent").contains("outputs/missing.json"),
        "{}",
        error("silent")
    );
    assert!(
        error("floods").contains("outputs/f.json"),
        "{}",
        error("floods")
    );
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "the hang was bounded by the 2 s limit"
    );
    // The flood's log is capped, whatever the agent printed.
    let workspace = PathBuf::from(status["workspace"].as_str().expect("workspace"));
    let log =
        std::fs::read(workspace.join("logs/000-floods/1.stdout")).expect("the flood was logged");
    let kept = log
        .windows(b"\n[baton: this log stops at ".len())
        .rposition(|window| window == b"\n[baton: this log stops at ")
        .expect("the log says where it was cut");
    assert_eq!(kept, 16 * 1024 * 1024, "log of {} bytes", log.len());
    // The agent got its instructions in a dispatch file first.
    assert!(workspace.join("dispatch/001-hangs.json").is_file());
    assert_eq!(
        baton_test_support::procs::processes_of_run(&run_id(&run)),
        0,
        "no agent process survives"
    );
}

#[test]
fn an_unusable_store_exits_with_code_four() {
    let project = Project::new();
    project.write("wf.yaml", &format!("{HEADER}{}", stage("a", "true", "")));
    // A read-only file system: the store cannot be created there.
    #[expect(
        clippy::disallowed_methods,
        reason = "the test points baton at an unusable store"
    )]
    let output = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["run", "wf.yaml"])
        .current_dir(project.path())
        .env("BATON_DATABASE_URL", "/proc/baton/baton.db")
        .output()
        .expect("baton runs");
    assert_eq!(output.status.code(), Some(4));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot open the store at /proc/baton/baton.db"),
        "{stderr}"
    );
    assert!(project.witness().is_empty(), "nothing ran");

    // A PostgreSQL that is not there.
    #[expect(
        clippy::disallowed_methods,
        reason = "the test points baton at an unusable store"
    )]
    let output = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["runs"])
        .current_dir(project.path())
        .env("BATON_DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
        .output()
        .expect("baton runs");
    assert_eq!(output.status.code(), Some(4));
}

#[test]
fn a_read_only_agent_that_writes_outside_its_workspace_fails() {
    let project = Project::new();
    let fake = Path::new(env!("CARGO_BIN_EXE_baton")).with_file_name("baton-fake-agent");
    project.write(
        "baton.toml",
        &format!(
            "[agents.default]\nprofile = \"fake\"\n\n[profiles.fake]\nprogram = \"{}\"\nprompt = {{ via = \"stdin\" }}\nenv_passthrough = [\"PATH\", \"HOME\"]\n",
            fake.display()
        ),
    );
    let target = project.path().join("hello.txt");
    let agent = |name: &str, access: &str| {
        format!(
            "  - name: {name}\n    kind: execute\n    description: |\n      FAKE-AGENT: write-outside {} changed by {name}\n      FAKE-AGENT: write-listed\n    agent: {{role: code-writer, access: {access}}}\n    required: false\n    writes_to: [{name}.json]\n",
            target.display()
        )
    };
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}{}{}",
            agent("reader", "read-only"),
            agent("writer", "read-write")
        ),
    );
    let run = project.baton(&["run", "wf.yaml", "--json", "--max-parallel", "1"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let status = project.json(&["status", &run_id(&run), "--json"]);
    let stage = |name: &str| {
        status["stages"]
            .as_array()
            .expect("stages")
            .iter()
            .find(|stage| stage["stage"] == name)
            .expect("stage")
            .clone()
    };
    assert_eq!(stage("reader")["status"], "failed");
    assert!(
        stage("reader")["error"]
            .as_str()
            .expect("error")
            .contains("wrote outside its workspace: hello.txt"),
        "{}",
        stage("reader")
    );
    assert_eq!(
        stage("writer")["status"],
        "success",
        "a read-write agent may change the repository"
    );
}

/// A small tmpfs, unmounted on drop. Needs root (as CI has); elsewhere the
/// test says why it skips, and under `CI=true` it fails instead.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(megabytes: u32) -> Option<SmallDisk> {
        let dir = tempfile::tempdir().expect("temp dir");
        #[expect(
            clippy::disallowed_methods,
            reason = "the test mounts a small file system to fill it"
        )]
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={megabytes}m"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|status| status.success());
        if !mounted {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI must run the disk-full test: mounting a tmpfs failed"
            );
            eprintln!("cannot mount a tmpfs (not root?): skipping the disk-full test");
            return None;
        }
        Some(SmallDisk { dir })
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        #[expect(
            clippy::disallowed_methods,
            reason = "the test unmounts its file system"
        )]
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

#[test]
fn a_full_disk_stops_the_run_cleanly_and_resume_finishes_it() {
    let Some(disk) = SmallDisk::mount(4) else {
        return;
    };
    let project = disk.dir.path();
    let database = project.join(".baton/baton.db");
    // Fills the disk, then frees the space only when told to. The stages
    // after it commit one by one, more than the write-ahead log held when
    // the disk filled: the store copies the log into the database once per
    // drive and then writes it from the start again, so fewer commits could
    // fit in the space the log already had, and the run would not notice.
    let mut stages = stage(
        "fill",
        "if [ -f \"$BATON_PROJECT_DIR/go\" ]; then exit 0; fi; dd if=/dev/zero of=\"$BATON_PROJECT_DIR/ballast\" bs=64k 2>/dev/null || true",
        "",
    );
    let mut before = "fill".to_owned();
    for n in 1..=12 {
        let name = format!("after{n}");
        stages.push_str(&stage(
            &name,
            "sleep 0.1",
            &format!("    depends_on: [{before}]\n"),
        ));
        before = name;
    }
    std::fs::write(project.join("wf.yaml"), format!("{HEADER}{stages}")).expect("write");
    let baton_here = |args: &[&str]| {
        #[expect(
            clippy::disallowed_methods,
            reason = "the test runs baton on the small disk"
        )]
        let output = Command::new(env!("CARGO_BIN_EXE_baton"))
            .args(args)
            .current_dir(project)
            .env("NO_COLOR", "1")
            .output()
            .expect("baton runs");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (code, _, stderr) = baton_here(&["run", "wf.yaml"]);
    assert_eq!(
        code,
        Some(4),
        "a store that cannot write is a store error: {stderr}"
    );
    assert!(stderr.contains("store"), "{stderr}");

    // Nothing is corrupted: the database checks out, and once there is space
    // again the run resumes to the end.
    std::fs::remove_file(project.join("ballast")).expect("free the space");
    std::fs::write(project.join("go"), "").expect("write");
    #[expect(clippy::disallowed_methods, reason = "python3's sqlite3 checks the database independently of baton")]
    let check = Command::new("python3")
        .args(["-c", "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('PRAGMA integrity_check').fetchone()[0])"])
        .arg(&database)
        .output()
        .expect("python3 runs");
    assert_eq!(String::from_utf8_lossy(&check.stdout).trim(), "ok");
    let (_, runs, _) = baton_here(&["runs", "--json"]);
    let runs: Value = serde_json::from_str(&runs).expect("runs");
    let id = runs[0]["run_id"]
        .as_str()
        .expect("the run was recorded before the disk filled")
        .to_owned();
    let (code, _, stderr) = baton_here(&["resume", &id]);
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn an_output_left_by_an_earlier_attempt_does_not_count() {
    let project = Project::new();
    // The first attempt writes its output and fails; the second writes
    // nothing and exits 0, which must not pass on the first one's file.
    let body = "if [ -f \"$BATON_PROJECT_DIR/second\" ]; then exit 0; fi; echo x > outputs/o.txt; touch \"$BATON_PROJECT_DIR/second\"; exit 1";
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}{}",
            stage("flaky", body, "    writes_to: [o.txt]\n")
        ),
    );
    let run = project.baton(&["run", "wf.yaml", "--json"]);
    assert_eq!(run.code, 2);
    let id = run_id(&run);
    let resume = project.baton(&["resume", &id]);
    assert_eq!(resume.code, 2, "{}", resume.stderr);
    let status = project.json(&["status", &id, "--json"]);
    let error = status["stages"][0]["error"].as_str().expect("error");
    assert!(
        error.contains("did not write outputs/o.txt during this attempt"),
        "{error}"
    );
}
