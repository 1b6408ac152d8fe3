//! What every handler shares.

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
    pub(crate) watchers: crate::events::Watchers,
}
