//! The reference's result envelopes (`stages/NNN-name.json`), written by a
//! thread of their own.
//!
//! The store is the source of truth; an envelope is a copy for readers of
//! the workspace. Creating a file can take a millisecond or more on a busy
//! filesystem, which on the coordinator's loop would hold back every next
//! start, so the loop hands the bytes over and goes on. Two threads share
//! the work by stage, so writes to one stage's file keep their order; every
//! queued envelope is written before the drive returns.
//!
//! Why two: the results of a run's last commit, all of a short run's, are
//! written after it, while nothing else runs. At about 30 us a file, the
//! envelopes of a 100-stage run that ends within one commit took about
//! 3 ms there, as long as the rest of the run's end; two threads halve it
//! on a 2-core machine. While stages run, they share the cores with them.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;

use baton_workflow::plan::PlanStage;
use serde_json::json;

use crate::workspace;

/// How many threads write envelopes.
const WRITERS: usize = 2;

/// A file's path and its bytes, queued.
type Queued = (PathBuf, Vec<u8>);

/// Queues of envelopes to write, and the threads that write them.
pub(crate) struct EnvelopeWriter {
    workspace_dir: PathBuf,
    /// One per thread that started; a file always goes to the same one.
    writers: Vec<(mpsc::Sender<Queued>, JoinHandle<()>)>,
}

impl EnvelopeWriter {
    /// Starts the writer threads for the run whose workspace is `workspace_dir`.
    pub(crate) fn start(workspace_dir: &Path) -> EnvelopeWriter {
        let writers = (0..WRITERS)
            .map_while(|_| {
                let (sender, receiver) = mpsc::channel::<Queued>();
                let thread = std::thread::Builder::new()
                    .name("baton-envelopes".to_owned())
                    .spawn(move || {
                        for (path, bytes) in receiver {
                            // A failure to write an envelope is not a stage failure.
                            let _ = workspace::write_replace(&path, &bytes);
                        }
                    })
                    .ok()?;
                Some((sender, thread))
            })
            .collect();
        EnvelopeWriter {
            workspace_dir: workspace_dir.to_path_buf(),
            writers,
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
        // A stage's envelope always has the same name: shared out by index,
        // its writes stay in one queue, in order.
        self.write(
            index,
            workspace::envelope_path(&self.workspace_dir, index, stage.name()),
            text.into_bytes(),
        );
    }

    /// Queues bytes for a file on the writer `key` picks; written in this
    /// thread if no writer could start.
    fn write(&self, key: usize, path: PathBuf, bytes: Vec<u8>) {
        let sent = match self.writers.get(key % self.writers.len().max(1)) {
            Some((sender, _)) => sender.send((path, bytes)).map_err(|error| error.0),
            None => Err((path, bytes)),
        };
        if let Err((path, bytes)) = sent {
            let _ = workspace::write_replace(&path, &bytes);
        }
    }
}

impl Drop for EnvelopeWriter {
    /// Writes everything queued before returning.
    fn drop(&mut self) {
        let threads: Vec<JoinHandle<()>> = self
            .writers
            .drain(..)
            .map(|(sender, thread)| {
                drop(sender);
                thread
            })
            .collect();
        for thread in threads {
            let _ = thread.join();
        }
    }
}
