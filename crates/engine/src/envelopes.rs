//! The reference's result envelopes (`stages/NNN-name.json`), written by a
//! thread of their own.
//!
//! The store is the source of truth; an envelope is a copy for readers of
//! the workspace. Creating a file can take a millisecond or more on a busy
//! filesystem, which on the coordinator's loop would hold back every next
//! start, so the loop hands the bytes over and goes on. Writes keep their
//! order (one thread, one queue), and every queued envelope is written
//! before the drive returns.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;

use baton_workflow::plan::PlanStage;
use serde_json::json;

use crate::workspace;

/// A queue of envelopes to write, and the thread that writes them.
pub(crate) struct EnvelopeWriter {
    workspace_dir: PathBuf,
    sender: Option<mpsc::Sender<(PathBuf, Vec<u8>)>>,
    thread: Option<JoinHandle<()>>,
}

impl EnvelopeWriter {
    /// Starts the writer thread for the run whose workspace is `workspace_dir`.
    pub(crate) fn start(workspace_dir: &Path) -> EnvelopeWriter {
        let (sender, receiver) = mpsc::channel::<(PathBuf, Vec<u8>)>();
        let thread = std::thread::Builder::new()
            .name("baton-envelopes".to_owned())
            .spawn(move || {
                for (path, bytes) in receiver {
                    // A failure to write an envelope is not a stage failure.
                    let _ = workspace::write_replace(&path, &bytes);
                }
            })
            .ok();
        EnvelopeWriter {
            workspace_dir: workspace_dir.to_path_buf(),
            sender: thread.as_ref().map(|_| sender),
            thread,
        }
    }

    /// Queues the envelope of a stage (or of a unit, run as `stage`):
    /// `times` are its start and end (ms).
    pub(crate) fn stage(
        &self,
        stage: &PlanStage,
        index: usize,
        status: &str,
        times: (Option<i64>, Option<i64>),
        errors: Vec<String>,
    ) {
        let envelope = workspace::Envelope {
            name: stage.name(),
            index,
            status,
            started_at: times.0,
            finished_at: times.1,
            errors,
            output_files: stage
                .spec
                .writes_to
                .iter()
                .map(|path| path.value.clone())
                .collect(),
            input_stages: stage
                .spec
                .reads_from
                .iter()
                .map(|name| name.value.clone())
                .collect(),
            data: json!({}),
        };
        let mut text = serde_json::to_string_pretty(&envelope).expect("plain data");
        text.push('\n');
        self.write(
            workspace::envelope_path(&self.workspace_dir, index, stage.name()),
            text.into_bytes(),
        );
    }

    /// Queues bytes for a file; written in this thread if the writer could not start.
    pub(crate) fn write(&self, path: PathBuf, bytes: Vec<u8>) {
        match &self.sender {
            Some(sender) => {
                if let Err(mpsc::SendError((path, bytes))) = sender.send((path, bytes)) {
                    let _ = workspace::write_replace(&path, &bytes);
                }
            }
            None => {
                let _ = workspace::write_replace(&path, &bytes);
            }
        }
    }
}

impl Drop for EnvelopeWriter {
    /// Writes everything queued before returning.
    fn drop(&mut self) {
        self.sender.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
