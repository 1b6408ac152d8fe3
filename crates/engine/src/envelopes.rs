//! The reference's result envelopes (`stages/NNN-name.json`), written by a
//! thread of their own.
//!
//! The store is the source of truth; an envelope is a copy for readers of
//! the workspace. Creating a file can take a millisecond or more on a busy
//! filesystem, which on the coordinator's loop would hold back every next
//! start, so the loop hands the bytes over and goes on. Writes keep their
//! order (one thread, one queue), and every queued envelope is written
//! before the drive returns.

use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;

use crate::workspace;

/// A queue of envelopes to write, and the thread that writes them.
pub(crate) struct EnvelopeWriter {
    sender: Option<mpsc::Sender<(PathBuf, Vec<u8>)>>,
    thread: Option<JoinHandle<()>>,
}

impl EnvelopeWriter {
    /// Starts the writer thread.
    pub(crate) fn start() -> EnvelopeWriter {
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
            sender: thread.as_ref().map(|_| sender),
            thread,
        }
    }

    /// Queues an envelope; written in this thread if the writer could not start.
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
