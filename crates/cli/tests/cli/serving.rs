//! What the tests of `baton serve` share (serve.rs over plain HTTP,
//! browser.rs in Chromium): a scratch project, a server process of it on a
//! free port, tokens, and a run waiting at its gate in another process.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use baton_test_support::http::{Response, request};
use serde_json::Value;

use crate::baton;

pub(crate) const HEADER: &str =
    "name: t\nversion: '1'\ndescription: d\ntrigger: {source: manual}\nstages:\n";

/// A gate `review` that logs a line, then `after`.
pub(crate) fn gate_workflow() -> String {
    format!(
        "{HEADER}  - name: review
    kind: execute
    description: d
    executor: inline
    script: |
      echo reviewed-here
      printf '%s\\n' '{{\"items\": []}}' > outputs/plan.json
    writes_to: [outputs/plan.json]
    human_gate: true
  - name: after
    kind: execute
    description: d
    executor: inline
    script: cp outputs/plan.json outputs/final.json
    depends_on: [review]
    writes_to: [outputs/final.json]
"
    )
}

/// A server of a project, stopped when dropped.
pub(crate) struct Server {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub(crate) address: String,
}

impl Server {
    /// Starts `baton serve --bind 127.0.0.1:0` in `project` and reads the
    /// port from the line it prints.
    pub(crate) fn start(project: &Path) -> Server {
        #[expect(
            clippy::disallowed_methods,
            reason = "the server runs in the background while the test asks it"
        )]
        let mut child = Command::new(env!("CARGO_BIN_EXE_baton"))
            .args(["serve", "--bind", "127.0.0.1:0"])
            .current_dir(project)
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("baton serve starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read the first line");
        let Some(address) = line
            .trim()
            .strip_prefix("listening on http://")
            .and_then(|rest| rest.strip_suffix('/'))
        else {
            let _ = child.kill();
            let mut stderr = String::new();
            let _ = child
                .stderr
                .take()
                .expect("stderr")
                .read_to_string(&mut stderr);
            panic!("no URL in {line:?}; stderr: {stderr}");
        };
        let address = address.to_owned();
        Server { child, address }
    }

    pub(crate) fn get(&self, path: &str) -> Response {
        request(&self.address, "GET", path, &[], "")
    }

    pub(crate) fn post(&self, path: &str, headers: &[(&str, &str)], body: &str) -> Response {
        request(&self.address, "POST", path, headers, body)
    }

    /// The id of the newest run once its status is `status`, failing after
    /// a minute.
    pub(crate) fn newest_run_once(&self, status: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let runs = self.get("/api/runs").json();
            // Oldest first: the newest is the last.
            if let Some(run) = runs
                .as_array()
                .and_then(|runs| runs.last())
                .filter(|run| run["status"] == status)
            {
                return run["run_id"].as_str().expect("run_id").to_owned();
            }
            assert!(Instant::now() < deadline, "no run reached {status}: {runs}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A scratch project holding `workflow` as `wf.yaml`.
pub(crate) fn project(workflow: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("wf.yaml"), workflow).expect("write the workflow");
    dir
}

/// `baton ARGS`, which must exit 0 and print JSON.
pub(crate) fn cli_json(dir: &Path, args: &[&str]) -> Value {
    let run = baton(dir, args);
    assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|error| panic!("{args:?}: {error}\n{}", run.stdout))
}

/// A token for `name`, made by `baton token create`.
pub(crate) fn token(dir: &Path, name: &str) -> String {
    let made = baton(dir, &["token", "create", "--name", name]);
    assert_eq!(made.code, 0, "{}", made.stderr);
    made.stdout.trim().to_owned()
}

/// `baton run wf.yaml --wait-gates --json` started in the background in
/// `dir`, its output captured: it waits at a gate until someone decides.
pub(crate) fn spawn_run(dir: &Path) -> Waiting {
    #[expect(
        clippy::disallowed_methods,
        reason = "the run waits at its gate in the background"
    )]
    let child = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["run", "wf.yaml", "--wait-gates", "--json"])
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("baton run starts");
    Waiting(Some(child))
}

/// A run in the background, killed when dropped: a test that fails before
/// deciding its gate leaves no run waiting forever.
pub(crate) struct Waiting(Option<Child>);

impl Waiting {
    /// Waits for the run to end, with its output.
    pub(crate) fn wait_with_output(mut self) -> std::io::Result<std::process::Output> {
        self.0
            .take()
            .expect("not yet waited for")
            .wait_with_output()
    }
}

impl std::ops::Deref for Waiting {
    type Target = Child;

    fn deref(&self) -> &Child {
        self.0.as_ref().expect("not yet waited for")
    }
}

impl std::ops::DerefMut for Waiting {
    fn deref_mut(&mut self) -> &mut Child {
        self.0.as_mut().expect("not yet waited for")
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
