//! What every handler shares.

use baton_engine::tasks::Tasks;
use baton_store::Store;

use crate::hosts::Hosts;

/// What every handler shares.
#[derive(Debug)]
pub(crate) struct App {
    pub(crate) store: Store,
    /// The `Host` values requests may carry.
    pub(crate) hosts: Hosts,
    /// Bound to a loopback address: only this machine's users reach it, so
    /// reading needs no token (deciding still does).
    pub(crate) loopback: bool,
    /// Turns true when the server is to stop.
    pub(crate) stopping: tokio::sync::watch::Receiver<bool>,
    /// One watcher per followed run (see `events`).
    pub(crate) watchers: Watchers,
    /// The project's task folders, for the task board; `None` when the
    /// server was given no project.
    pub(crate) tasks: Option<Tasks>,
}

/// The watcher of each followed run: its latest status object (`None`
/// until the first read), which followers subscribe to.
pub(crate) type Watchers =
    std::sync::Mutex<std::collections::HashMap<String, std::sync::Arc<Latest>>>;

/// A run's latest status object, as its watcher read it.
pub(crate) type Latest = tokio::sync::watch::Sender<Option<std::sync::Arc<Version>>>;

/// One change of a followed run's status object.
#[derive(Debug)]
pub(crate) struct Version {
    /// Counts the watcher's changes: a follower that sent the one before
    /// this can send its delta, any other sends the whole object.
    pub(crate) number: u64,
    /// The whole object's JSON text.
    pub(crate) whole: String,
    /// What changed since the one before (see `delta::Change`).
    pub(crate) delta: Option<String>,
}
