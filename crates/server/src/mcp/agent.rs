//! The tools for an agent working inside a stage: its contract, progress,
//! evidence, and the run's governance state. Records are its stage's own
//! (`baton_engine::stage_agent`); a verdict on its own work is refused.

use baton_engine::stage_agent::Evidence;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::schemars::{self, JsonSchema};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, tool, tool_router};
use serde::Deserialize;
use serde_json::json;

use super::{Answer, Baton, chain, json};

/// `report_progress`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ProgressArgs {
    /// What the agent has done or is doing, in a sentence.
    message: String,
}

/// `record_evidence`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct EvidenceArgs {
    /// `command` (a command run and its exit code), `file` (a file of the
    /// project or the workspace), `review` or `validation` (a verdict on
    /// another stage's work; never on the agent's own).
    kind: String,
    /// The command line, for `command` and `validation`.
    #[serde(default)]
    command: Option<String>,
    /// Its exit code, for `command` and `validation`.
    #[serde(default)]
    exit_code: Option<i32>,
    /// The file, for `file`: relative to the workspace or the project, or
    /// absolute inside either.
    #[serde(default)]
    path: Option<String>,
    /// What the evidence shows.
    #[serde(default)]
    note: Option<String>,
    /// The stage judged, for `review` and `validation`.
    #[serde(default)]
    stage: Option<String>,
    /// The findings, for `review`.
    #[serde(default)]
    findings: Vec<String>,
}

/// `governance_state`'s arguments.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub(crate) struct StateArgs {
    /// A run's id: another run than the agent's own (or any run, for a
    /// person's assistant).
    #[serde(default)]
    run: Option<String>,
}

fn evidence(args: EvidenceArgs) -> Result<Evidence, String> {
    let needed = |what: &str| format!("`{what}` is needed for kind `{}`", args.kind);
    Ok(match args.kind.as_str() {
        "command" => Evidence::Command {
            command: args.command.clone().ok_or_else(|| needed("command"))?,
            exit_code: args.exit_code.ok_or_else(|| needed("exit_code"))?,
            note: args.note,
        },
        "file" => Evidence::File {
            path: args.path.clone().ok_or_else(|| needed("path"))?,
            note: args.note,
        },
        "review" => Evidence::Review {
            stage: args.stage.clone().ok_or_else(|| needed("stage"))?,
            findings: args.findings,
        },
        "validation" => Evidence::Validation {
            stage: args.stage.clone().ok_or_else(|| needed("stage"))?,
            command: args.command.clone().ok_or_else(|| needed("command"))?,
            exit_code: args.exit_code.ok_or_else(|| needed("exit_code"))?,
        },
        other => {
            return Err(format!(
                "no evidence kind '{other}': command, file, review or validation"
            ));
        }
    })
}

#[tool_router(router = agent_tools, vis = "pub(super)")]
impl Baton {
    /// `stage_contract`.
    #[tool(
        description = "The contract of the stage this agent works in: the files to write, the output checks and validation, the upstream outputs and their paths, and the path of the rendered prompt."
    )]
    async fn stage_contract(&self, context: RequestContext<RoleServer>) -> Answer {
        let agent = self.agent(&context, false).await?;
        json(&agent.contract())
    }

    /// `report_progress`.
    #[tool(
        description = "Report progress of this stage: the message is recorded in the run's ledger as the stage's progress, shown by `baton state show --run RUN`."
    )]
    async fn report_progress(
        &self,
        Parameters(args): Parameters<ProgressArgs>,
        context: RequestContext<RoleServer>,
    ) -> Answer {
        if args.message.trim().is_empty() {
            return Err("`message` is empty".to_owned());
        }
        let agent = self.agent(&context, true).await?;
        let now = baton_engine::clock::now_ms();
        let seq = agent
            .progress(&self.store, &args.message, now)
            .await
            .map_err(|error| chain(&error))?;
        json(&json!({
            "recorded": true,
            "seq": seq,
            "run_id": agent.run_id(),
            "stage": agent.stage(),
            "kind": "progress",
        }))
    }

    /// `record_evidence`.
    #[tool(
        description = "Record evidence in the run's governance ledger as this stage's own session: a command run and its exit code (kind `command`), or a file (kind `file`). A review or validation (kinds `review`, `validation`) may judge only another stage's work made under another identity: never this stage's own."
    )]
    async fn record_evidence(
        &self,
        Parameters(args): Parameters<EvidenceArgs>,
        context: RequestContext<RoleServer>,
    ) -> Answer {
        let evidence = evidence(args)?;
        let agent = self.agent(&context, true).await?;
        let now = baton_engine::clock::now_ms();
        let (seq, entry) = agent
            .evidence(&self.store, evidence, now)
            .await
            .map_err(|error| chain(&error))?;
        let (kind, payload) = entry.encode();
        json(&json!({
            "recorded": true,
            "seq": seq,
            "run_id": agent.run_id(),
            "stage": agent.stage(),
            "kind": kind,
            "payload": serde_json::from_str::<serde_json::Value>(&payload).unwrap_or_default(),
            "session": agent.identity().session,
        }))
    }

    /// `governance_state`.
    #[tool(
        description = "The governance state of this stage's run (`baton state summary --run RUN`), with the ledger entries of this stage; `run` names another run."
    )]
    async fn governance_state(
        &self,
        Parameters(args): Parameters<StateArgs>,
        context: RequestContext<RoleServer>,
    ) -> Answer {
        let caller = self.caller(&context).await?;
        let (run, stage) = match (args.run, caller.stage) {
            (Some(run), Some((own, stage))) if run == own => (run, Some(stage)),
            (Some(run), _) => (run, None),
            (None, Some((run, stage))) => (run, Some(stage)),
            (None, None) => {
                return Err("name a `run`: this session is not inside a stage".to_owned());
            }
        };
        // An unknown run is an error, not an empty ledger.
        self.store.run(&run).await.map_err(|error| chain(&error))?;
        let state = baton_engine::stage_agent::state(&self.store, &run, stage.as_deref())
            .await
            .map_err(|error| chain(&error))?;
        json(&state)
    }
}
