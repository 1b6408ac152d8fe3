//! A scratch project for the end-to-end tests of `progress`, `logs` and
//! `store_lock`: a directory with a `.baton` SQLite store of its own.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::baton;

/// A scratch project directory.
pub(crate) struct Project {
    dir: tempfile::TempDir,
}

/// The head of a workflow; stages follow.
pub(crate) const HEADER: &str =
    "name: t\nversion: '1'\ndescription: d\ntrigger: {source: manual}\nstages:\n";

/// An inline stage running `script` (indented by the caller's lines).
pub(crate) fn stage(name: &str, script: &str, extra: &str) -> String {
    let script: String = script
        .lines()
        .map(|line| format!("      {line}\n"))
        .collect();
    format!(
        "  - name: {name}\n    kind: execute\n    description: d\n    executor: inline\n    script: |\n{script}{extra}"
    )
}

impl Project {
    pub(crate) fn new() -> Project {
        Project {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn write(&self, name: &str, text: &str) {
        std::fs::write(self.path().join(name), text).expect("write");
    }

    pub(crate) fn baton(&self, args: &[&str]) -> baton_test_support::Run {
        baton(self.path(), args)
    }

    /// `baton ARGS` whose stdout must be JSON.
    pub(crate) fn json(&self, args: &[&str]) -> Value {
        let run = self.baton(args);
        serde_json::from_str(&run.stdout).unwrap_or_else(|error| {
            panic!(
                "{args:?}: {error}\nstdout: {}\nstderr: {}",
                run.stdout, run.stderr
            )
        })
    }

    /// `baton ARGS`, not yet started, in the project, colour off.
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        #[expect(
            clippy::disallowed_methods,
            reason = "tests run baton in the background"
        )]
        let mut command = Command::new(env!("CARGO_BIN_EXE_baton"));
        command
            .args(args)
            .current_dir(self.path())
            .env("NO_COLOR", "1")
            .env_remove("BATON_DATABASE_URL")
            .stdin(Stdio::null());
        command
    }

    /// `baton ARGS` started in the background, its output discarded.
    pub(crate) fn spawn(&self, args: &[&str]) -> Child {
        self.command(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("baton starts")
    }

    /// The lines test workflows appended to `witness.txt` in the project.
    pub(crate) fn witness(&self) -> Vec<String> {
        std::fs::read_to_string(self.path().join("witness.txt"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// The ids of the recorded runs, oldest first.
    pub(crate) fn run_ids(&self) -> Vec<String> {
        self.json(&["runs", "--json"])
            .as_array()
            .expect("runs")
            .iter()
            .map(|run| run["run_id"].as_str().expect("id").to_owned())
            .collect()
    }
}

/// The `run_id` of `baton run … --json`.
/// Every file under `dir`, recursively, sorted.
pub(crate) fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(next) = stack.pop() {
        for entry in std::fs::read_dir(&next).into_iter().flatten().flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                stack.push(path);
            } else {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

pub(crate) fn run_id(run: &baton_test_support::Run) -> String {
    let value: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}\n{}", run.stdout, run.stderr));
    value["run_id"].as_str().expect("run_id").to_owned()
}

/// Waits until `check` holds, or fails after `limit`.
pub(crate) fn wait_for(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for `child` to exit, killing it and failing after `limit`.
pub(crate) fn wait_bounded(child: &mut Child, what: &str, limit: Duration) -> i32 {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status.code().unwrap_or(-1);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Makes `dir` a git repository with `files` committed (author `t`).
pub(crate) fn git_repository(dir: &Path, files: &[(&str, &str)]) {
    let git = |args: &[&str]| {
        #[expect(clippy::disallowed_methods, reason = "tests set up a git repository")]
        let status = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .stdout(Stdio::null())
            .status()
            .expect("git runs");
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    for (name, text) in files {
        std::fs::write(dir.join(name), text).expect("write");
    }
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "first commit"]);
}
