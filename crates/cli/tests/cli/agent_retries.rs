//! `baton status` says why an agent attempt is being retried: the real
//! Claude Code against the fake model server, which answers 429 once. While
//! the attempt waits for its retry, the stage reads `retrying (1 of 2): …`;
//! after the run it keeps `retried 1× after: …`, in text and JSON alike.

use std::time::{Duration, Instant};

use baton_test_support::model_server::Mode;
use serde_json::Value;

use crate::real_agents::{Setup, agent_stage};

/// The wait before the retry: long enough for `baton status` to be asked
/// during it on a busy machine.
const DELAY: &str = "8s";

/// The longest the test waits to see the stage retrying.
const SEE_WITHIN: Duration = Duration::from_secs(180);

fn stage(status: &Value) -> &Value {
    &status["stages"][0]
}

fn status_json(setup: &Setup, run: &str) -> Value {
    let status = setup.baton(&["status", run, "--json"]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    serde_json::from_str(&status.stdout).expect("status JSON")
}

/// The id of the one run, once it is recorded.
fn run_id(setup: &Setup) -> Option<String> {
    let runs = setup.baton(&["runs", "--json"]);
    let runs: Value = serde_json::from_str(&runs.stdout).ok()?;
    runs[0]["run_id"].as_str().map(str::to_owned)
}

#[test]
fn status_shows_the_cause_of_a_retry_while_it_waits_and_after() {
    let Some(setup) = Setup::new("claude") else {
        return;
    };
    setup.settings(&format!("[profiles.claude.retry]\ndelay = \"{DELAY}\"\n"));
    setup.server.fail_next(1, Mode::Status(429));
    let stages = agent_stage(
        "review",
        "role: reviewer, access: read-only",
        &[],
        "outputs/review.md",
    );
    std::thread::scope(|scope| {
        let running = scope.spawn(|| setup.run(&stages));

        // While the attempt waits for its retry, status says so and why.
        let started = Instant::now();
        let (id, retrying) = loop {
            assert!(
                started.elapsed() < SEE_WITHIN && !running.is_finished(),
                "the stage was never seen retrying"
            );
            if let Some(id) = run_id(&setup) {
                let status = status_json(&setup, &id);
                let retrying = stage(&status)["retrying"].clone();
                if !retrying.is_null() {
                    break (id, retrying);
                }
                assert!(stage(&status)["retries"].as_array().is_some(), "{status}");
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        assert_eq!(retrying["retry"], 1, "{retrying}");
        assert_eq!(retrying["of"], 2, "{retrying}");
        let reason = retrying["reason"].as_str().expect("a reason");
        assert!(
            reason.starts_with("the agent reported: ") && reason.contains("429"),
            "{reason}"
        );
        let text = setup.baton(&["status", &id]).stdout;
        assert!(
            text.contains("retrying (1 of 2): the agent reported: "),
            "{text}"
        );

        // After the run, the stage keeps how often it was retried and why.
        let (run, status) = running.join().expect("the run's thread");
        assert_eq!(run.code, 0, "{}\n{status}", run.stderr);
        assert_eq!(stage(&status)["status"], "success");
        assert!(stage(&status)["retrying"].is_null(), "{status}");
        let retries = stage(&status)["retries"].as_array().expect("retries");
        assert_eq!(retries.len(), 1, "{status}");
        assert_eq!(retries[0]["reason"], reason);
        assert_eq!(retries[0]["attempt"], 1);
        assert_eq!(retries[0]["wait_ms"], 8000);
        let text = setup.baton(&["status", &id]).stdout;
        assert!(
            text.contains("retried 1× after: the agent reported: "),
            "{text}"
        );
    });
}
