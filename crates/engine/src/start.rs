//! What a drive starts from: a run as the store records it (resume), or as
//! this process has just created it (`baton run`), which needs no reading
//! back.

use std::path::PathBuf;

use baton_store::{StageRow, Store};
use baton_workflow::Plan;
use indexmap::IndexMap;

use crate::Result;
use crate::create::{self, Created};
use crate::run_options::{DriverMode, RunOptions};

pub(crate) struct Start {
    /// The workflow file as given.
    pub(crate) workflow_path: String,
    pub(crate) workspace_dir: PathBuf,
    pub(crate) run_options: RunOptions,
    pub(crate) params: IndexMap<String, String>,
    pub(crate) plan: Plan,
    /// Created by this process a moment ago: nothing ran, nothing was
    /// recorded beyond the run itself.
    pub(crate) fresh: bool,
}

impl Start {
    /// A run [`create_run`](crate::create_run) has just created; its
    /// workspace is written.
    pub(crate) fn created(created: Created) -> Start {
        Start {
            workflow_path: created.workflow_path,
            workspace_dir: created.workspace,
            run_options: created.options,
            params: created.plan.params.clone(),
            plan: created.plan,
            fresh: true,
        }
    }

    /// A recorded run: its plan is compiled again from the workflow, which
    /// must not have changed (unless `accept_changes`), and its
    /// workspace is written again if it is not whole.
    pub(crate) async fn recorded(
        store: &Store,
        run_id: &str,
        accept_changes: bool,
    ) -> Result<Start> {
        let run = store.run(run_id).await?;
        let run_options: RunOptions = serde_json::from_str(&run.options).unwrap_or(RunOptions {
            project_dir: PathBuf::from("."),
            max_parallel: 4,
            driver: DriverMode::Builtin,
            budget_usd: None,
        });
        let params: IndexMap<String, String> =
            serde_json::from_str(&run.params).unwrap_or_default();
        let plan = create::recompile(&run, &run_options, &params, accept_changes)?;
        let workspace_dir = PathBuf::from(&run.workspace);
        create::ensure_workspace(
            &workspace_dir,
            run_id,
            &plan,
            &run_options.project_dir.join(&run.workflow_path),
            run.created_at,
            None,
        )?;
        // The row's plan JSON is dropped here: the compiled plan drives.
        Ok(Start {
            workflow_path: run.workflow_path,
            workspace_dir,
            run_options,
            params,
            plan,
            fresh: false,
        })
    }

    /// The stages of a created run as the store holds them: all pending.
    pub(crate) fn pending_stages(&self) -> Vec<StageRow> {
        self.plan
            .stages
            .iter()
            .enumerate()
            .map(|(index, stage)| StageRow {
                index: i64::try_from(index).unwrap_or(i64::MAX),
                name: stage.name().to_owned(),
                status: "pending".to_owned(),
                attempts: 0,
                started_at: None,
                finished_at: None,
                error: None,
                note: None,
            })
            .collect()
    }
}
