//! `baton serve`'s pages in a real browser: Chromium, driven through
//! playwright-core by the Node scripts in `tests/browser/`, against a
//! server process of a scratch project set up as serve.rs sets it up.
//! Each script prints one `RESULT {json}` line; the assertions are here.
//!
//! They need Chromium and playwright-core (`Need::Browser`), which
//! `scripts/test` provides (`scripts/lib/chromium.sh`).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

mod findings;
mod task_board;

use baton_test_support::browser::{Browser, browser};
use serde_json::Value;

use crate::baton;
use crate::project::{wait_bounded, wait_for};
use crate::serving::{HEADER, Server, cli_json, gate_workflow, project, spawn_run, token};

/// How long a browser script may take, start to end, on a busy machine.
const SCRIPT_LIMIT: Duration = Duration::from_secs(180);

/// A browser script running against a server, with a fresh profile.
struct Page {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    /// Holds the profile and the script's stderr.
    scratch: tempfile::TempDir,
}

impl Page {
    /// Starts `node tests/browser/SCRIPT` against `server`, with `vars`.
    fn start(browser: &Browser, script: &str, server: &Server, vars: &[(&str, &str)]) -> Page {
        let scratch = tempfile::tempdir().expect("temp dir");
        let profile = scratch.path().join("profile");
        std::fs::create_dir(&profile).expect("a fresh profile");
        let stderr = std::fs::File::create(scratch.path().join("stderr")).expect("stderr file");
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/browser")
            .join(script);
        #[expect(
            clippy::disallowed_methods,
            reason = "the browser script runs while the test drives the run"
        )]
        let mut child = Command::new("node")
            .arg(&path)
            .envs(vars.iter().copied())
            .env("BATON_URL", format!("http://{}", server.address))
            .env("BATON_PROFILE", &profile)
            .env("BATON_TEST_CHROMIUM", &browser.chromium)
            .env("BATON_TEST_PLAYWRIGHT", &browser.playwright)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|error| panic!("node {}: {error}", path.display()));
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Page {
            child,
            stdin,
            stdout,
            scratch,
        }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.scratch.path().join("stderr")).unwrap_or_default()
    }

    /// The next line the script prints; fails when it ends first.
    fn read_line(&mut self) -> String {
        let mut line = String::new();
        let read = self.stdout.read_line(&mut line).expect("read the script");
        if read == 0 {
            let _ = self.child.wait();
            panic!("the browser script ended early; stderr:\n{}", self.stderr());
        }
        line.trim().to_owned()
    }

    /// Tells the script what happened outside the page.
    fn say(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin");
        writeln!(stdin, "{line}").expect("write to the script");
    }

    /// Waits for the script to end, which must exit 0, and returns its
    /// `RESULT`.
    fn finish(mut self) -> Value {
        drop(self.stdin.take());
        let code = wait_bounded(&mut self.child, "the browser script", SCRIPT_LIMIT);
        let mut rest = String::new();
        self.stdout
            .read_to_string(&mut rest)
            .expect("read the script");
        assert_eq!(code, 0, "stdout:\n{rest}\nstderr:\n{}", self.stderr());
        let result = rest
            .lines()
            .find_map(|line| line.strip_prefix("RESULT "))
            .unwrap_or_else(|| panic!("no RESULT line in:\n{rest}\nstderr:\n{}", self.stderr()));
        let result: Value = serde_json::from_str(result).expect("RESULT is JSON");
        // Nothing on the page may have opened a dialog or thrown.
        assert_eq!(result["dialogs"], serde_json::json!([]), "{result}");
        assert_eq!(result["errors"], serde_json::json!([]), "{result}");
        result
    }
}

/// Waits for a background `baton run` to end; it must exit 0.
fn assert_run_succeeds(run: &mut Child) {
    let code = wait_bounded(run, "baton run", Duration::from_secs(120));
    let mut stderr = String::new();
    if let Some(mut pipe) = run.stderr.take() {
        let _ = pipe.read_to_string(&mut stderr);
    }
    assert_eq!(code, 0, "baton run: {stderr}");
}

#[test]
fn a_gate_approved_on_the_page_lets_the_run_waiting_in_another_process_succeed() {
    let Some(browser) = browser() else { return };
    let dir = project(&gate_workflow());
    let alice = token(dir.path(), "alice");
    let server = Server::start(dir.path());
    let mut waiting = spawn_run(dir.path());
    let run = server.newest_run_once("awaiting_human");

    let result = Page::start(
        &browser,
        "gate.mjs",
        &server,
        &[("BATON_RUN", &run), ("BATON_TOKEN", &alice)],
    )
    .finish();
    assert_eq!(result["cookieSeenByScripts"], "", "{result}");
    assert!(
        result["formText"]
            .as_str()
            .is_some_and(|text| text.contains("review") && text.contains("you decide as alice")),
        "{result}"
    );
    assert_eq!(result["formsLeft"], 0, "no form once decided: {result}");

    assert_run_succeeds(&mut waiting);
    let status = cli_json(dir.path(), &["status", &run, "--format", "json"]);
    assert_eq!(status["status"], "success", "{status}");
    let gate = &status["gates"][0];
    assert_eq!(gate["stage"], "review", "{status}");
    assert_eq!(gate["decided_by"], "alice", "{status}");
    assert_eq!(gate["comment"], "approved from the page", "{status}");
}

/// `wait` runs until the project holds `go`, then `hold` until it holds
/// `go2`: the page follows the one, then the other, then the run's end,
/// all without a reload.
fn waiting_workflow() -> String {
    format!(
        "{HEADER}  - name: wait
    kind: execute
    description: d
    executor: inline
    script: |
      while [ ! -f \"$BATON_PROJECT_DIR/go\" ]; do sleep 0.05; done
  - name: hold
    kind: execute
    description: d
    executor: inline
    depends_on: [wait]
    script: |
      while [ ! -f \"$BATON_PROJECT_DIR/go2\" ]; do sleep 0.05; done
"
    )
}

fn stage_status(dir: &Path, run: &str, stage: &str) -> String {
    let status = cli_json(dir, &["status", run, "--format", "json"]);
    status["stages"]
        .as_array()
        .and_then(|stages| stages.iter().find(|each| each["stage"] == stage))
        .and_then(|each| each["status"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn a_stage_s_state_on_the_page_follows_the_run_without_a_reload() {
    let Some(browser) = browser() else { return };
    let dir = project(&waiting_workflow());
    let server = Server::start(dir.path());
    let mut running = spawn_run(dir.path());
    let run = server.newest_run_once("running");

    let mut page = Page::start(&browser, "live.mjs", &server, &[("BATON_RUN", &run)]);
    assert_eq!(page.read_line(), "READY");
    std::fs::write(dir.path().join("go"), "").expect("write go");
    wait_for(
        "baton status to show wait finished",
        Duration::from_secs(60),
        || stage_status(dir.path(), &run, "wait") == "success",
    );
    page.say("FINISHED");
    assert_eq!(page.read_line(), "SHOWN");
    std::fs::write(dir.path().join("go2"), "").expect("write go2");
    assert_run_succeeds(&mut running);
    page.say("ENDED");
    let result = page.finish();
    eprintln!(
        "the page showed `wait` finished {} ms after `baton status` did",
        result["latencyMs"]
    );
    assert_eq!(result["sameDocument"], true, "the page reloaded: {result}");
    assert_eq!(result["cellText"], "success", "{result}");
    assert_eq!(result["nodeClass"], "node node-success", "{result}");
    assert_eq!(result["runStatus"], "running", "{result}");
    assert_eq!(
        result["counts"], "2 stages: 1 running, 1 success",
        "the counts follow too: {result}"
    );
    let end = &result["end"];
    assert_eq!(
        end["sameDocument"], true,
        "the run's end reloaded the page: {result}"
    );
    assert_eq!(end["counts"], "2 stages: 2 success", "{result}");
    let finished = end["finished"].as_str().unwrap_or_default();
    assert!(
        finished.ends_with('Z') && finished.len() >= 20,
        "a finishing time: {result}"
    );
}

/// Texts a run records, each markup that would run script if a page
/// placed it as markup: the workflow's name, a stage name, a fan-out key,
/// an error.
const PAYLOADS: [&str; 4] = [
    "<img src=x onerror=alert(3)>",
    "<img src=x onerror=window.__pwned=1>",
    "<script>window.__pwned=1</script>",
    "<img src=x onerror=document.title='pwned'>",
];

/// A workflow carrying [`PAYLOADS`]: its source stage succeeds, its
/// fan-out's one child fails.
fn hostile_workflow() -> String {
    let [name, stage, key, error] = PAYLOADS;
    format!(
        "name: \"{name}\"
version: '1'
description: d
trigger: {{source: manual}}
stages:
  - name: \"{stage}\"
    kind: execute
    description: d
    executor: inline
    script: |
      printf '%s' '{{\"items\": [{{\"id\": \"{key}\"}}]}}' > outputs/src.json
    writes_to: [src.json]
  - name: fan
    kind: execute
    description: d
    executor: inline
    depends_on: [\"{stage}\"]
    script: |
      echo \"{error}\" >&2; exit 3
    fan_out: {{source: \"{stage}\", field: items, key: id}}
"
    )
}

#[test]
fn markup_in_names_keys_and_errors_is_shown_as_text_and_never_runs() {
    let Some(browser) = browser() else { return };
    let dir = project(&hostile_workflow());
    let outcome = baton(dir.path(), &["run", "wf.yaml", "--json"]);
    let outcome: Value = serde_json::from_str(&outcome.stdout).expect("json");
    assert_eq!(outcome["status"], "failed", "{outcome}");
    // The run recorded every payload as it was written.
    let recorded = outcome["error"].as_str().expect("an error");
    assert!(recorded.contains(PAYLOADS[2]), "{recorded}");
    assert!(recorded.contains(PAYLOADS[3]), "{recorded}");
    let run = outcome["run_id"].as_str().expect("run_id");
    let server = Server::start(dir.path());

    let payloads = serde_json::to_string(&PAYLOADS).expect("json");
    let result = Page::start(
        &browser,
        "xss.mjs",
        &server,
        &[("BATON_RUN", run), ("BATON_PAYLOADS", &payloads)],
    )
    .finish();
    for (page, title) in [
        ("runPage", format!("{run} · baton")),
        ("runsList", "runs · baton".to_owned()),
    ] {
        let seen = &result[page];
        assert_eq!(seen["pwned"], false, "{page}: {seen}");
        assert_eq!(seen["title"], title.as_str(), "{page}: {seen}");
        assert_eq!(seen["violations"], serde_json::json!([]), "{page}: {seen}");
        assert_eq!(seen["injected"], 0, "{page}: {seen}");
        // Only baton's own script, linked by its digest.
        let scripts = seen["scripts"].as_array().expect("scripts");
        assert!(
            scripts.len() == 1
                && scripts[0]
                    .as_str()
                    .is_some_and(|src| src.starts_with("/assets/live.js?v=")),
            "{page}: {seen}"
        );
    }
    assert_eq!(
        result["runPage"]["missing"],
        serde_json::json!([]),
        "every payload reads as written on the run's page: {result}"
    );
    // The list names the workflow, and nothing else of the run's.
    let missing = result["runsList"]["missing"].as_array().expect("missing");
    assert!(!missing.contains(&Value::from(PAYLOADS[0])), "{result}");
}

#[test]
fn a_push_back_from_the_page_runs_the_agent_again_with_the_comment_in_its_prompt() {
    let Some(browser) = browser() else { return };
    let dir = project(&format!(
        "{HEADER}  - name: review
    kind: execute
    description: |
      Write the plan.
      FAKE-AGENT: write-prompt $BATON_WORKSPACE/seen.md
      FAKE-AGENT: write-listed
    agent: {{role: planner}}
    writes_to: [plan.md]
    human_gate: true
"
    ));
    let fake = Path::new(env!("CARGO_BIN_EXE_baton")).with_file_name("baton-fake-agent");
    std::fs::write(
        dir.path().join("baton.toml"),
        format!(
            "[agents.default]\nprofile = \"fake\"\n\n[profiles.fake]\nprogram = \"{}\"\nprompt = {{ via = \"stdin\" }}\n",
            fake.display()
        ),
    )
    .expect("write baton.toml");
    let alice = token(dir.path(), "alice");
    let server = Server::start(dir.path());
    let mut waiting = spawn_run(dir.path());
    let run = server.newest_run_once("awaiting_human");

    let result = Page::start(
        &browser,
        "push_back.mjs",
        &server,
        &[("BATON_RUN", &run), ("BATON_TOKEN", &alice)],
    )
    .finish();
    assert_eq!(result["formsLeft"], 0, "{result}");
    assert_run_succeeds(&mut waiting);

    let status = cli_json(dir.path(), &["status", &run, "--format", "json"]);
    assert_eq!(status["stages"][0]["attempts"], 2, "{status}");
    assert_eq!(status["gates"][0]["comment"], "better", "{status}");
    let workspace = status["workspace"].as_str().expect("workspace");
    let prompt = std::fs::read_to_string(Path::new(workspace).join("seen.md")).expect("the prompt");
    assert!(
        prompt.contains("alice reviewed") && prompt.contains("> cover the error path too\n"),
        "{prompt}"
    );
}
