//! The fake agent follows its directives (`src/bin/baton-fake-agent.rs`).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const AGENT: &str = env!("CARGO_BIN_EXE_baton-fake-agent");

#[expect(clippy::disallowed_methods, reason = "the tests start the fake agent")]
fn agent(cwd: &Path) -> Command {
    let mut command = Command::new(AGENT);
    command
        .current_dir(cwd)
        .env_remove("BATON_FAKE_AGENT")
        .env_remove("BATON_FAKE_WITNESS")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

fn with_stdin(mut command: Command, prompt: &str) -> Output {
    command.stdin(Stdio::piped());
    let mut child = command.spawn().expect("the fake agent starts");
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(prompt.as_bytes())
        .expect("prompt written");
    child.wait_with_output().expect("the fake agent ends")
}

fn read(path: impl AsRef<Path>) -> String {
    std::fs::read_to_string(path.as_ref())
        .unwrap_or_else(|error| panic!("{}: {error}", path.as_ref().display()))
}

#[test]
fn by_default_it_writes_the_listed_files() {
    let dir = tempfile::tempdir().unwrap();
    let absolute = dir.path().join("abs/out.txt");
    let prompt = format!(
        "Do the research.\n\n## Files to write\n\n- outputs/findings.json\n- `notes/summary.md`\n- {}\n\nThanks.\n- not-a-file\n",
        absolute.display()
    );
    let output = with_stdin(agent(dir.path()), &prompt);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        read(dir.path().join("outputs/findings.json")),
        "{\"written_by\":\"baton-fake-agent\",\"path\":\"outputs/findings.json\"}\n"
    );
    assert!(read(dir.path().join("notes/summary.md")).contains("baton-fake-agent"));
    assert!(absolute.is_file());
    assert!(!dir.path().join("not-a-file").exists());
}

#[test]
fn the_prompt_can_come_from_a_file_or_an_argument() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("prompt.md"),
        "FAKE-AGENT: write from-file.txt yes\n",
    )
    .unwrap();
    let mut command = agent(dir.path());
    command.args(["--model", "sonnet", "--prompt-file", "prompt.md"]);
    assert!(command.output().unwrap().status.success());
    assert_eq!(read(dir.path().join("from-file.txt")), "yes\n");

    // The argv shapes of the built-in profiles: the last positional is the
    // prompt, `-` (or `-i -`) means stdin, `--message-file` is a file.
    let mut command = agent(dir.path());
    command.args([
        "run",
        "--format",
        "json",
        "-m",
        "x/y",
        "FAKE-AGENT: write from-arg.txt a b  c",
    ]);
    assert!(command.output().unwrap().status.success());
    assert_eq!(read(dir.path().join("from-arg.txt")), "a b  c\n");

    let mut command = agent(dir.path());
    command.args([
        "--output-format",
        "json",
        "--skip-trust",
        "-p",
        "FAKE-AGENT: write gemini.txt g",
    ]);
    assert!(command.output().unwrap().status.success());
    assert_eq!(read(dir.path().join("gemini.txt")), "g\n");

    let mut command = agent(dir.path());
    command.args(["exec", "--json", "--color", "never", "-"]);
    assert!(
        with_stdin(command, "FAKE-AGENT: write codex.txt c\n")
            .status
            .success()
    );
    assert_eq!(read(dir.path().join("codex.txt")), "c\n");

    let mut command = agent(dir.path());
    command.args(["run", "--no-session", "-i", "-"]);
    assert!(
        with_stdin(command, "FAKE-AGENT: write goose.txt o\n")
            .status
            .success()
    );
    assert_eq!(read(dir.path().join("goose.txt")), "o\n");

    let mut command = agent(dir.path());
    command.args(["--yes-always", "--message-file", "prompt.md"]);
    assert!(command.output().unwrap().status.success());
}

#[test]
fn directives_from_the_environment_run_before_the_prompts() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = agent(dir.path());
    command.env("BATON_FAKE_AGENT", "stdout first\nwrite env.txt from env");
    let output = with_stdin(
        command,
        "FAKE-AGENT: stdout second\nFAKE-AGENT: stderr oops\nFAKE-AGENT: exit 3\nFAKE-AGENT: stdout never\n",
    );
    assert_eq!(output.status.code(), Some(3));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "first\nsecond\n");
    assert_eq!(String::from_utf8_lossy(&output.stderr), "oops\n");
    assert_eq!(read(dir.path().join("env.txt")), "from env\n");
}

#[test]
fn write_lines_turns_backslash_n_into_line_breaks() {
    let dir = tempfile::tempdir().unwrap();
    let output = with_stdin(
        agent(dir.path()),
        "FAKE-AGENT: write-lines out/VERDICT.md FAIL\\n## Findings\\n- a: b\n",
    );
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        read(dir.path().join("out/VERDICT.md")),
        "FAIL\n## Findings\n- a: b\n"
    );
}

#[test]
fn write_outside_needs_an_absolute_path() {
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("outside/escape.txt");
    let output = with_stdin(
        agent(dir.path()),
        &format!("FAKE-AGENT: write-outside {} gotcha\n", outside.display()),
    );
    assert!(output.status.success());
    assert_eq!(read(&outside), "gotcha\n");
    let output = with_stdin(
        agent(dir.path()),
        "FAKE-AGENT: write-outside relative.txt x\n",
    );
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn unknown_directives_fail_loudly() {
    let dir = tempfile::tempdir().unwrap();
    let output = with_stdin(agent(dir.path()), "FAKE-AGENT: explode now\n");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("explode now: unknown directive"));
}

#[test]
fn the_witness_line_records_the_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let witness = dir.path().join("witness.log");
    for attempt in ["1", "2"] {
        let mut command = agent(dir.path());
        command
            .env("BATON_FAKE_WITNESS", &witness)
            .env("BATON_RUN_ID", "run-7")
            .env("BATON_STAGE", "research")
            .env("BATON_ATTEMPT", attempt)
            .env_remove("BATON_IDEMPOTENCY_KEY");
        let output = with_stdin(command, "FAKE-AGENT: sleep 0.05\n");
        assert!(output.status.success());
    }
    let log = read(&witness);
    let lines: Vec<Vec<&str>> = log.lines().map(|line| line.split(' ').collect()).collect();
    assert_eq!(lines.len(), 2, "{log}");
    for (line, attempt) in lines.iter().zip(["1", "2"]) {
        assert_eq!(line[..4], ["run-7", "research", attempt, "-"]);
        let pid: u32 = line[4].parse().unwrap();
        let (start, end): (u128, u128) = (line[5].parse().unwrap(), line[6].parse().unwrap());
        assert!(pid > 0 && end >= start + 50, "{line:?}");
    }
}

#[test]
fn flood_writes_exactly_that_many_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let output = with_stdin(
        agent(dir.path()),
        "FAKE-AGENT: flood 3000001\nFAKE-AGENT: flood-stderr 10\n",
    );
    assert!(output.status.success());
    assert_eq!(output.stdout.len(), 3_000_001);
    assert_eq!(output.stderr, b"y\ny\ny\ny\ny\n");
}

#[test]
fn crash_aborts() {
    let dir = tempfile::tempdir().unwrap();
    let output = with_stdin(agent(dir.path()), "FAKE-AGENT: crash\n");
    use std::os::unix::process::ExitStatusExt as _;
    assert_eq!(output.status.signal(), Some(Signal::SIGABRT as i32));
}

fn spawn_with_prompt(mut command: Command, prompt: &str) -> Child {
    command.stdin(Stdio::piped());
    let mut child = command.spawn().expect("starts");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(prompt.as_bytes())
        .unwrap();
    child
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

#[test]
fn hang_ignores_sigterm_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    for prompt in [
        "FAKE-AGENT: ignore-term\nFAKE-AGENT: hang\n",
        "FAKE-AGENT: hang\n",
    ] {
        let mut child = spawn_with_prompt(agent(dir.path()), prompt);
        let pid = Pid::from_raw(child.id() as i32);
        std::thread::sleep(Duration::from_millis(300));
        kill(pid, Signal::SIGTERM).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let ignoring = prompt.contains("ignore-term");
        assert_eq!(child.try_wait().unwrap().is_none(), ignoring, "{prompt:?}");
        kill(pid, Signal::SIGKILL).unwrap_or(());
        child.wait().unwrap();
    }
}

#[test]
fn a_grandchild_holds_the_pipes_after_the_agent_exits() {
    let dir = tempfile::tempdir().unwrap();
    let begin = Instant::now();
    let output = with_stdin(agent(dir.path()), "FAKE-AGENT: grandchild 1\n");
    assert!(output.status.success());
    // wait_with_output returns only once every writer has closed the pipes.
    assert!(
        begin.elapsed() >= Duration::from_millis(900),
        "{:?}",
        begin.elapsed()
    );
}

#[test]
fn a_setsid_grandchild_leaves_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn_with_prompt(
        agent(dir.path()),
        "FAKE-AGENT: setsid-grandchild 30\nFAKE-AGENT: sleep 30\n",
    );
    let agent_pid = child.id();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let grandchild: u32 = line
        .trim()
        .strip_prefix("baton-fake-agent: grandchild ")
        .unwrap_or_else(|| panic!("{line:?}"))
        .parse()
        .unwrap();
    // Field 6 of /proc/<pid>/stat is the session; setsid(1) execs the
    // sleeper once it has its own.
    let session = |pid: u32| -> Option<String> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit(')')
            .next()?
            .split_whitespace()
            .nth(3)
            .map(str::to_owned)
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while session(grandchild) == session(agent_pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(alive(grandchild));
    assert_eq!(session(grandchild), Some(grandchild.to_string()));
    assert_ne!(session(grandchild), session(agent_pid));
    kill(Pid::from_raw(grandchild as i32), Signal::SIGKILL).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn print_json_matches_each_cli_shape() {
    let dir = tempfile::tempdir().unwrap();
    let lines = |shape: &str| -> Vec<serde_json::Value> {
        let mut command = agent(dir.path());
        command.args(["--session-id", "0199-abc"]);
        let output = with_stdin(command, &format!("FAKE-AGENT: print-json {shape}\n"));
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout)
            .unwrap()
            .lines()
            .map(|line| {
                serde_json::from_str(line).unwrap_or_else(|e| panic!("{shape}: {e}: {line}"))
            })
            .collect()
    };

    let claude = lines("claude");
    let result = claude
        .iter()
        .find(|event| event["type"] == "result")
        .unwrap();
    assert_eq!(result.pointer("/result").unwrap(), "done");
    assert_eq!(result.pointer("/is_error").unwrap(), false);
    assert_eq!(result.pointer("/session_id").unwrap(), "0199-abc");
    assert_eq!(result.pointer("/total_cost_usd").unwrap(), 0.0123);
    assert_eq!(
        result.pointer("/usage/cache_read_input_tokens").unwrap(),
        4000
    );
    assert_eq!(result.pointer("/num_turns").unwrap(), 1);

    let codex = lines("codex");
    assert_eq!(codex[0]["type"], "thread.started");
    assert_eq!(codex[0]["thread_id"], "0199-abc");
    let usage = &codex
        .iter()
        .find(|event| event["type"] == "turn.completed")
        .unwrap()["usage"];
    assert_eq!(usage["cached_input_tokens"], 4000);
    assert!(
        codex
            .iter()
            .any(|e| e.pointer("/item/type") == Some(&"agent_message".into()))
    );

    let gemini = lines("gemini");
    assert_eq!(gemini.len(), 1);
    assert_eq!(gemini[0]["response"], "done");
    assert_eq!(
        gemini[0]
            .pointer("/stats/models/gemini-2.5-pro/tokens/candidates")
            .unwrap(),
        80
    );

    let opencode = lines("opencode");
    assert!(
        opencode
            .iter()
            .all(|event| event["sessionID"] == "ses_0199abc")
    );
    let finish = opencode
        .iter()
        .find(|event| event["type"] == "step_finish")
        .unwrap();
    assert_eq!(finish.pointer("/part/cost").unwrap(), 0.0042);
    assert_eq!(finish.pointer("/part/tokens/cache/read").unwrap(), 4000);

    let mut command = agent(dir.path());
    command.stdin(Stdio::null());
    command.env("BATON_FAKE_AGENT", "print-json cursor");
    assert_eq!(command.output().unwrap().status.code(), Some(2));
}

#[test]
fn dump_env_prints_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = agent(dir.path());
    command.env("FAKE_AGENT_PROBE", "42");
    let output = with_stdin(command, "FAKE-AGENT: dump-env\n");
    assert!(
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .any(|line| line == "FAKE_AGENT_PROBE=42")
    );
}
