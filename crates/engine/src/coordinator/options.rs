//! How a drive behaves: the options `baton run` and `baton resume` pass.

use std::time::Duration;

use crate::attempt::Limits;
use crate::create::LEASE_TTL_MS;

/// How `drive` behaves.
#[derive(Debug, Clone)]
pub struct DriveOptions {
    /// Lease duration; renewed every third of it.
    pub lease_ttl: Duration,
    /// Run even though the workflow or a fragment changed since the run started.
    pub accept_changes: bool,
    /// Finish each isolated stage whose branch failed to merge by merging
    /// the branch as it is now (resolved by hand), without its agent.
    pub accept_merge: bool,
    /// Wait for a lease held on another host to expire, instead of failing.
    pub wait_for_lease: bool,
    /// Override the run's recorded `--max-parallel`.
    pub max_parallel: Option<usize>,
    /// Limits for every stage process.
    pub limits: Limits,
    /// Agent profiles and roles from `baton.toml`; `None` when there is none.
    pub agents: Option<std::sync::Arc<baton_executor::profile::Config>>,
    /// The program that contains read-only agents (the `baton` binary, see
    /// [`baton_executor::contain`]); `None` where the machine cannot, and a
    /// read-only agent's repository is compared before and after instead.
    pub contain_helper: Option<std::path::PathBuf>,
    /// At a human gate, keep the run (and its lease) and wait for a
    /// decision instead of stopping `awaiting_human`.
    pub wait_gates: bool,
    /// Stop starting agent stages once the run has spent this many dollars
    /// (`--budget`); overrides the budget recorded with the run.
    pub budget_usd: Option<f64>,
    /// A worker for the run's queue jobs, started in this process when the
    /// workflow has `worker_queue` stages or fan-outs; `None` leaves them to
    /// `baton worker` processes.
    pub local_worker: Option<crate::queue::WorkerOptions>,
}

impl DriveOptions {
    /// [`DriveOptions::lease_ttl`] as the store takes it.
    pub(crate) fn lease_ttl_ms(&self) -> i64 {
        crate::clock::millis(self.lease_ttl)
    }
}

impl Default for DriveOptions {
    fn default() -> Self {
        DriveOptions {
            lease_ttl: Duration::from_millis(LEASE_TTL_MS.unsigned_abs()),
            accept_changes: false,
            accept_merge: false,
            wait_for_lease: true,
            max_parallel: None,
            limits: Limits::default(),
            agents: None,
            contain_helper: None,
            wait_gates: false,
            budget_usd: None,
            local_worker: None,
        }
    }
}
