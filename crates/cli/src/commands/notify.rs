//! Notices of a drive for people: a gate that starts waiting, a run that
//! fails or ends — to the webhook and the command of `[notify]` in
//! `baton.toml`, and to `--notify CMD`. Sent beside the drive; a failed
//! notice is a warning and changes nothing about the run.

use std::path::PathBuf;
use std::sync::Mutex;

use baton_engine::{DriveOptions, Outcome};
use baton_executor::notify::{Notice, Settings, send};
use tokio::task::JoinHandle;

use crate::output;

/// Where a drive's notices go, and those under way.
pub(crate) struct Notifier {
    settings: Settings,
    /// Where the command runs and its output is kept.
    project: PathBuf,
    sending: Mutex<Vec<JoinHandle<Vec<String>>>>,
}

impl Notifier {
    /// The project's `[notify]`, with `--notify`'s command in place of its
    /// own; `None` when neither asks for anything.
    pub(crate) fn new(options: &DriveOptions, command: Option<&str>) -> Option<Notifier> {
        let mut settings = options
            .agents
            .as_ref()
            .map(|config| config.notify.clone())
            .unwrap_or_default();
        if let Some(command) = command {
            settings.command = Some(command.to_owned());
        }
        (settings.webhook.is_some() || settings.command.is_some()).then(|| Notifier {
            settings,
            project: super::project_dir(),
            sending: Mutex::new(Vec::new()),
        })
    }

    /// A drive that waits at a gate says so while it waits.
    pub(crate) fn gate_waiting(&self, run_id: &str, stage: &str) {
        self.spawn(self.notice(run_id, "awaiting_human", Some(stage), None));
    }

    /// How the drive ended, then every notice still under way; failures
    /// are printed as warnings.
    pub(crate) async fn ended(&self, outcome: &Outcome) {
        let notice = self.notice(
            &outcome.run_id,
            &outcome.status,
            outcome.gate.as_deref(),
            outcome.error.as_deref(),
        );
        self.spawn(notice);
        let sending = std::mem::take(&mut *self.sending.lock().expect("not poisoned"));
        for handle in sending {
            for failure in handle.await.unwrap_or_default() {
                output::stderr_line(&format!("warning: the notification through {failure}"));
            }
        }
    }

    fn notice(
        &self,
        run_id: &str,
        status: &str,
        gate: Option<&str>,
        error: Option<&str>,
    ) -> Notice {
        let url = self
            .settings
            .url
            .as_ref()
            .map(|base| format!("{}/runs/{run_id}", base.trim_end_matches('/')));
        let (event, what) = match (status, gate) {
            ("awaiting_human", Some(stage)) => (
                "gate_waiting",
                format!("waits at gate '{stage}' for a decision"),
            ),
            ("failed", _) => (
                "run_failed",
                format!("failed: {}", error.unwrap_or("(no error recorded)")),
            ),
            ("success", _) => ("run_ended", "succeeded".to_owned()),
            (other, _) => ("run_ended", format!("ended {other}")),
        };
        let link = url
            .as_deref()
            .map(|url| format!(" — {url}"))
            .unwrap_or_default();
        Notice {
            text: format!("baton: run {run_id} {what}{link}"),
            event,
            run_id: run_id.to_owned(),
            status: status.to_owned(),
            stage: gate.filter(|_| event == "gate_waiting").map(str::to_owned),
            error: error.map(str::to_owned),
            url,
        }
    }

    fn spawn(&self, notice: Notice) {
        let settings = self.settings.clone();
        let project = self.project.clone();
        let logs = project
            .join(".baton")
            .join("notify")
            .join(format!("{}-{}", notice.run_id, notice.event));
        let handle = tokio::spawn(async move { send(&settings, &notice, &project, &logs).await });
        self.sending.lock().expect("not poisoned").push(handle);
    }
}
