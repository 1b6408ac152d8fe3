//! Everything a supervised process started, tracked by the kernel so that
//! nothing outlives its attempt: a cgroup of the attempt's own where baton
//! may make one (`cgroup.rs`), else baton as the subreaper of its
//! descendants (`subreaper.rs`).

use crate::cgroup::Cgroup;

/// How [`run`](crate::run) finds a process's descendants, to kill what is
/// left of them when the process ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Tracking {
    /// A cgroup v2 of the attempt's own where this process may make one
    /// ([`cgroups_usable`]), else [`Tracking::Subreaper`].
    #[default]
    Cgroup,
    /// baton is the subreaper of its descendants: it kills the members of
    /// the process's group and those carrying its marker.
    Subreaper,
}

/// Whether this process may make a cgroup for each attempt (probed once).
pub fn cgroups_usable() -> bool {
    crate::cgroup::usable()
}

/// One supervised process's descendants.
#[derive(Debug)]
pub(crate) enum Tracker {
    Cgroup(Cgroup),
    Subreaper,
}

impl Tracker {
    /// Prepares to track the process about to start.
    ///
    /// # Errors
    ///
    /// The cgroup could not be made, or the kernel refused a subreaper.
    pub(crate) fn before_start(tracking: Tracking) -> std::io::Result<Tracker> {
        if tracking == Tracking::Cgroup
            && let Some(cgroup) = Cgroup::create()
        {
            return Ok(Tracker::Cgroup(cgroup?));
        }
        crate::subreaper::enable()?;
        Ok(Tracker::Subreaper)
    }

    /// Starts tracking `pid`, just started.
    ///
    /// # Errors
    ///
    /// The process could not be moved into its cgroup.
    pub(crate) fn adopt(&self, pid: u32) -> std::io::Result<()> {
        match self {
            Tracker::Cgroup(cgroup) => cgroup.adopt(pid),
            Tracker::Subreaper => Ok(()),
        }
    }

    /// Kills what is left once the leader `pgid` has exited (and its group
    /// has been killed); the leader, a zombie, is reaped after this.
    pub(crate) async fn finish(self, pgid: u32, marker: Option<&(String, String)>) {
        match self {
            Tracker::Cgroup(cgroup) => {
                if !cgroup.remove_if_empty() {
                    let _ = tokio::task::spawn_blocking(move || cgroup.kill_and_remove()).await;
                }
            }
            Tracker::Subreaper => {
                crate::subreaper::sweep(pgid, marker);
            }
        }
    }

    /// [`Tracker::finish`], blocking: for a supervisor dropped early, on a
    /// thread of the blocking pool.
    pub(crate) fn finish_blocking(self, pgid: u32, marker: Option<&(String, String)>) {
        match self {
            Tracker::Cgroup(cgroup) => cgroup.kill_and_remove(),
            Tracker::Subreaper => {
                crate::subreaper::sweep(pgid, marker);
            }
        }
    }

    /// Undoes [`Tracker::before_start`] when the process did not start.
    pub(crate) fn discard(self) {
        if let Tracker::Cgroup(cgroup) = self {
            cgroup.remove_if_empty();
        }
    }

    /// Kills what can be killed at once, for a supervisor dropped with no
    /// runtime left to finish on (baton is exiting).
    pub(crate) fn kill_now(&self) {
        if let Tracker::Cgroup(cgroup) = self {
            cgroup.kill();
        }
    }
}
