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
//! written after it, while nothing else runs, and for a short run that is
//! as long as the rest of the run's end; two threads halve it on two
//! cores. While stages run, they share the cores with them.
//!
//! The envelopes of a drive's last commit are written while that commit
//! runs, to files with no name yet ([`EnvelopeWriter::prepare`]), and named
//! once it has landed ([`EnvelopeWriter::publish`]): readers still never
//! see a result the store could lose, and what is left after the last
//! commit is naming the files, about half the cost of writing them. A
//! result whose commit never lands leaves nothing: its file vanishes with
//! its descriptor. (Why only the last commit's: `prepare_envelopes` in
//! `coordinator.rs`.) A crash after a commit, before its envelopes are
//! named or written, loses them; the next drive writes them from the store
//! ([`restore`]).

use std::cell::Cell;
use std::collections::VecDeque;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;

use baton_workflow::plan::PlanStage;
use serde_json::json;

use crate::workspace;

mod restore;
pub(crate) use restore::{lacking, restore};

/// How many threads write envelopes.
const WRITERS: usize = 2;

/// What a writer thread is asked to do, in order.
enum Job {
    /// Write this file now.
    Write(PathBuf, Vec<u8>),
    /// Write this file without a name, to be named by the [`Job::Publish`]
    /// that covers its number.
    Prepare(u64, PathBuf, Vec<u8>),
    /// Name every prepared file numbered up to this one.
    Publish(u64),
}

/// A prepared envelope: its file, when it could be made without a name
/// (else it is written whole when published).
struct Held {
    number: u64,
    path: PathBuf,
    bytes: Vec<u8>,
    file: Option<File>,
}

/// The most unnamed files a writer holds open: results wait for a commit
/// in thousands at most, and a descriptor is a resource the stages need
/// too. A sixteenth of the process's limit, split between the writers.
fn most_held() -> usize {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(1024);
    usize::try_from(limit / 16).unwrap_or(64).min(256) / WRITERS
}

/// A prepared envelope's number, to publish it by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Ticket(u64);

/// Queues of envelopes to write, and the threads that write them.
pub(crate) struct EnvelopeWriter {
    workspace_dir: PathBuf,
    /// One per thread that started; a file always goes to the same one.
    writers: Vec<(mpsc::Sender<Job>, JoinHandle<()>)>,
    /// The number of the next prepared envelope.
    next: Cell<u64>,
}

/// A writer thread's work, until its queue closes. Prepared envelopes
/// still unpublished then belong to results no commit recorded.
fn write_jobs(jobs: mpsc::Receiver<Job>) {
    let most = most_held();
    let mut held: VecDeque<Held> = VecDeque::new();
    for job in jobs {
        match job {
            // A failure to write an envelope is not a stage failure.
            Job::Write(path, bytes) => drop(workspace::write_replace(&path, &bytes)),
            Job::Prepare(number, path, bytes) => {
                let file = (held.len() < most)
                    .then(|| workspace::unnamed(path.parent()?, &bytes).ok())
                    .flatten();
                held.push_back(Held {
                    number,
                    path,
                    bytes,
                    file,
                });
            }
            Job::Publish(through) => {
                while let Some(envelope) = held.pop_front_if(|held| held.number <= through) {
                    // Named where no file has the name yet (a stage's first
                    // envelope), else written over the earlier one.
                    let named = envelope
                        .file
                        .is_some_and(|file| workspace::name_unnamed(&file, &envelope.path).is_ok());
                    if !named {
                        drop(workspace::write_replace(&envelope.path, &envelope.bytes));
                    }
                }
            }
        }
    }
}

impl EnvelopeWriter {
    /// Starts the writer threads for the run whose workspace is `workspace_dir`.
    pub(crate) fn start(workspace_dir: &Path) -> EnvelopeWriter {
        let writers = (0..WRITERS)
            .map_while(|_| {
                let (sender, receiver) = mpsc::channel::<Job>();
                let thread = std::thread::Builder::new()
                    .name("baton-envelopes".to_owned())
                    .spawn(move || write_jobs(receiver))
                    .ok()?;
                Some((sender, thread))
            })
            .collect();
        EnvelopeWriter {
            workspace_dir: workspace_dir.to_path_buf(),
            writers,
            next: Cell::new(0),
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
        let bytes = envelope(stage, index, status, times, errors);
        // A stage's envelope always has the same name: shared out by index,
        // its writes stay in one queue, in order.
        let path = workspace::envelope_path(&self.workspace_dir, index, stage.name());
        self.send(index, Job::Write(path, bytes));
    }

    /// Like [`EnvelopeWriter::stage`], for a result not committed yet: the
    /// file is written now and named by the [`EnvelopeWriter::publish`] of
    /// this ticket or a later one.
    pub(crate) fn prepare(
        &self,
        stage: &PlanStage,
        index: usize,
        status: &str,
        times: (Option<i64>, Option<i64>),
        errors: Vec<String>,
    ) -> Ticket {
        let number = self.next.get();
        self.next.set(number + 1);
        let bytes = envelope(stage, index, status, times, errors);
        let path = workspace::envelope_path(&self.workspace_dir, index, stage.name());
        self.send(index, Job::Prepare(number, path, bytes));
        Ticket(number)
    }

    /// Names the envelopes prepared up to `ticket`, whose results are
    /// committed.
    pub(crate) fn publish(&self, ticket: Ticket) {
        for (sender, _) in &self.writers {
            let _ = sender.send(Job::Publish(ticket.0));
        }
    }

    /// Queues a job on the writer `key` picks; done in this thread if no
    /// writer could start.
    fn send(&self, key: usize, job: Job) {
        let sent = match self.writers.get(key % self.writers.len().max(1)) {
            Some((sender, _)) => sender.send(job).map_err(|error| error.0),
            None => Err(job),
        };
        match sent {
            Ok(()) => {}
            Err(Job::Write(path, bytes) | Job::Prepare(_, path, bytes)) => {
                let _ = workspace::write_replace(&path, &bytes);
            }
            Err(Job::Publish(_)) => {}
        }
    }
}

/// An envelope's bytes: the reference's JSON, pretty-printed.
fn envelope(
    stage: &PlanStage,
    index: usize,
    status: &str,
    times: (Option<i64>, Option<i64>),
    errors: Vec<String>,
) -> Vec<u8> {
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
    text.into_bytes()
}

impl Drop for EnvelopeWriter {
    /// Writes everything queued before returning; envelopes prepared and
    /// never published vanish.
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use baton_workflow::MemoryLoader;
    use baton_workflow::plan::Plan;

    use super::EnvelopeWriter;
    use crate::workspace;

    fn plan() -> Plan {
        let yaml = "name: t\nversion: '1'\ndescription: d\ntrigger: {source: manual}\nstages:\n  - {name: a, kind: execute, description: d, executor: inline, script: 'true'}\n  - {name: b, kind: execute, description: d, executor: inline, script: 'true'}\n";
        let loader = MemoryLoader::new().with("w.yaml", yaml);
        let loaded = baton_workflow::load("w.yaml", &loader).expect("loads");
        baton_workflow::compile(&loaded, &Default::default(), &loader).expect("compiles")
    }

    fn status(path: &Path) -> Option<String> {
        let text = std::fs::read_to_string(path).ok()?;
        let json: serde_json::Value = serde_json::from_str(&text).expect("a whole envelope");
        Some(json["status"].as_str()?.to_owned())
    }

    /// A run workspace of the two-stage [`plan`], and its writer.
    fn workspace_with_writer() -> (tempfile::TempDir, Plan, EnvelopeWriter) {
        let dir = tempfile::tempdir().unwrap();
        workspace::create(dir.path()).unwrap();
        let envelopes = EnvelopeWriter::start(dir.path());
        (dir, plan(), envelopes)
    }

    /// Waits for the writer threads to finish what was sent to them.
    fn drain(envelopes: EnvelopeWriter) {
        drop(envelopes);
    }

    #[test]
    fn a_prepared_envelope_appears_only_once_published() {
        let (dir, plan, envelopes) = workspace_with_writer();
        let ticket = envelopes.prepare(&plan.stages[0], 0, "success", (Some(1), Some(2)), vec![]);
        envelopes.prepare(&plan.stages[1], 1, "failed", (Some(1), Some(3)), vec![]);
        let first = workspace::envelope_path(dir.path(), 0, "a");
        let second = workspace::envelope_path(dir.path(), 1, "b");
        // Each thread has written its prepared file by the time it takes a
        // job sent after it: an immediate envelope on each shows it.
        for index in [6, 7] {
            envelopes.stage(&plan.stages[1], index, "skipped", (None, None), vec![]);
        }
        for index in [6, 7] {
            let marker = workspace::envelope_path(dir.path(), index, "b");
            while !marker.exists() {
                std::thread::yield_now();
            }
        }
        assert_eq!(status(&first), None, "named before its commit");
        assert_eq!(status(&second), None, "named before its commit");
        envelopes.publish(ticket);
        drain(envelopes);
        assert_eq!(status(&first).as_deref(), Some("success"));
        assert_eq!(status(&second), None, "a later result was published");
        let names: Vec<_> = std::fs::read_dir(dir.path().join("stages"))
            .unwrap()
            .collect();
        assert_eq!(
            names.len(),
            3,
            "only the published and the immediate ones: {names:?}"
        );
    }

    #[test]
    fn a_later_attempt_replaces_the_earlier_envelope() {
        let (dir, plan, envelopes) = workspace_with_writer();
        let first = envelopes.prepare(&plan.stages[0], 0, "failed", (Some(1), Some(2)), vec![]);
        envelopes.publish(first);
        let second = envelopes.prepare(&plan.stages[0], 0, "success", (Some(3), Some(4)), vec![]);
        envelopes.publish(second);
        drain(envelopes);
        let path = workspace::envelope_path(dir.path(), 0, "a");
        assert_eq!(status(&path).as_deref(), Some("success"));
    }

    #[test]
    fn more_results_than_held_files_are_all_published() {
        let (dir, plan, envelopes) = workspace_with_writer();
        let count = super::most_held() * super::WRITERS * 2 + 3;
        let mut last = None;
        for index in 0..count {
            last = Some(envelopes.prepare(
                &plan.stages[index % 2],
                index,
                "success",
                (None, None),
                vec![],
            ));
        }
        envelopes.publish(last.unwrap());
        drain(envelopes);
        for index in 0..count {
            let name = plan.stages[index % 2].name();
            let path = workspace::envelope_path(dir.path(), index, name);
            assert_eq!(
                status(&path).as_deref(),
                Some("success"),
                "{}",
                path.display()
            );
        }
    }
}
