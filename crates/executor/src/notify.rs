//! Telling people what a run needs or did: a JSON `POST` to a webhook and
//! a command, as `[notify]` in `baton.toml` and `--notify` ask.
//!
//! The webhook gets Slack's incoming-webhook shape (`text`) plus the
//! fields a script would read. The command runs under bash with the
//! notice in `BATON_NOTIFY_*` variables, never in its command line, so no
//! run id, stage name or error becomes shell code. A notification that
//! fails is reported to the caller and changes nothing about the run.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::process::{ProcessSpec, Stdin};

/// How long a webhook or a command may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// The `[notify]` table of `baton.toml`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// A URL to `POST` each notice to, as JSON.
    pub webhook: Option<String>,
    /// A command bash runs for each notice.
    pub command: Option<String>,
    /// Where `baton serve` is reached (`http://host:7777`): a notice links
    /// to the run's page there.
    pub url: Option<String>,
}

/// Something a person should hear about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Notice {
    /// One line for people.
    pub text: String,
    /// `gate_waiting`, `run_failed` or `run_ended`.
    pub event: &'static str,
    /// The run.
    pub run_id: String,
    /// The run's status.
    pub status: String,
    /// The gate waiting, for `gate_waiting`.
    pub stage: Option<String>,
    /// The run's error, when it failed.
    pub error: Option<String>,
    /// The run's page, when `url` is set.
    pub url: Option<String>,
}

impl Notice {
    /// The variables a notify command sees.
    fn environment(&self) -> Vec<(String, String)> {
        let fields = [
            ("TEXT", Some(self.text.clone())),
            ("EVENT", Some(self.event.to_owned())),
            ("RUN_ID", Some(self.run_id.clone())),
            ("STATUS", Some(self.status.clone())),
            ("STAGE", self.stage.clone()),
            ("ERROR", self.error.clone()),
            ("URL", self.url.clone()),
        ];
        fields
            .into_iter()
            .filter_map(|(name, value)| Some((format!("BATON_NOTIFY_{name}"), value?)))
            .collect()
    }
}

/// Sends `notice` to the webhook and the command of `settings`; returns
/// what failed, in words. The command's output goes to `logs` (its
/// `.stdout` and `.stderr` files).
pub async fn send(settings: &Settings, notice: &Notice, cwd: &Path, logs: &Path) -> Vec<String> {
    let mut failed = Vec::new();
    if let Some(url) = &settings.webhook
        && let Err(error) = post(url, notice).await
    {
        failed.push(format!("the webhook {url}: {error}"));
    }
    if let Some(command) = &settings.command
        && let Err(error) = run(command, notice, cwd, logs).await
    {
        failed.push(format!("the command `{command}`: {error}"));
    }
    failed
}

async fn post(url: &str, notice: &Notice) -> Result<(), String> {
    let response = reqwest::Client::new()
        .post(url)
        .json(notice)
        .timeout(TIMEOUT)
        .send()
        .await
        .map_err(|error| format!("cannot reach it: {error}"))?;
    let status = response.status();
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("answered {status}"))
    }
}

async fn run(command: &str, notice: &Notice, cwd: &Path, logs: &Path) -> Result<(), String> {
    let (_, cancel) = watch::channel(false);
    let spec = ProcessSpec {
        program: "bash".to_owned(),
        args: vec!["-c".to_owned(), command.to_owned()],
        cwd: cwd.to_path_buf(),
        env: notice.environment(),
        env_passthrough: Vec::new(),
        clear_env: false,
        stdin: Stdin::Null,
        stdout_log: logs.with_extension("stdout"),
        stderr_log: logs.with_extension("stderr"),
        log_cap_bytes: 1 << 20,
        kill_after_bytes: None,
        wall_timeout: Some(TIMEOUT),
        idle_timeout: None,
        kill_grace: Duration::from_secs(1),
        marker: None,
        contain: None,
    };
    let outcome = crate::process::run(spec, cancel, |_| {})
        .await
        .map_err(|error| error.to_string())?;
    match (outcome.exit_code, outcome.killed) {
        (Some(0), None) => Ok(()),
        (_, Some(reason)) => Err(format!("killed: {reason}")),
        (Some(code), None) => Err(format!("exited with code {code}")),
        (None, None) => Err("ended by a signal".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_sees_the_notice_in_variables_only_the_set_ones() {
        let notice = Notice {
            text: "run r waits".to_owned(),
            event: "gate_waiting",
            run_id: "r".to_owned(),
            status: "awaiting_human".to_owned(),
            stage: Some("review".to_owned()),
            error: None,
            url: None,
        };
        let env = notice.environment();
        assert!(env.contains(&("BATON_NOTIFY_STAGE".to_owned(), "review".to_owned())));
        assert!(env.iter().all(|(name, _)| name != "BATON_NOTIFY_ERROR"));
    }
}
