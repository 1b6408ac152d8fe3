//! The tools for a person's assistant: runs, a run's status, findings and
//! gates, in the JSON `baton runs`, `baton status` and `baton gate list`
//! print (built by the same functions), and deciding a gate as the person
//! whose token came with the call.

use baton_engine::gate::{self, Decision};
use baton_engine::view::{self, Status};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::schemars::{self, JsonSchema};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, tool, tool_router};
use serde::Deserialize;
use serde_json::Value;

use super::{Answer, Baton, chain, json};

/// A run's id.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct RunArgs {
    /// The run's id, as `list_runs` gives it.
    run: String,
}

/// `findings`' arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct FindingsArgs {
    /// The run's id.
    run: String,
    /// Only this stage's findings.
    #[serde(default)]
    stage: Option<String>,
}

/// `list_gates`' arguments.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub(crate) struct GatesArgs {
    /// Only this run's gates.
    #[serde(default)]
    run: Option<String>,
}

/// `decide_gate`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct DecideArgs {
    /// The run's id.
    run: String,
    /// The gate's stage.
    stage: String,
    /// `approve` or `reject`.
    decision: String,
    /// Why, recorded with the decision.
    #[serde(default)]
    comment: Option<String>,
}

#[tool_router(router = person_tools, vis = "pub(super)")]
impl Baton {
    /// `list_runs`.
    #[tool(description = "Every run, oldest first, as `baton runs --format json` prints them.")]
    async fn list_runs(&self) -> Answer {
        let (runs, tallies) = tokio::try_join!(self.store.runs(), self.store.run_tallies())
            .map_err(|error| chain(&error))?;
        let runs: Vec<_> = runs.iter().collect();
        json(&Value::Array(view::runs_json(&runs, &tallies)))
    }

    /// `run_status`.
    #[tool(
        description = "A run's status: its stages, gates, units, findings and costs, as `baton status RUN --format json` prints it."
    )]
    async fn run_status(&self, Parameters(args): Parameters<RunArgs>) -> Answer {
        let status = Status::read(&self.store, &args.run)
            .await
            .map_err(|error| chain(&error))?;
        json(&status.json())
    }

    /// `findings`.
    #[tool(
        description = "The validation findings of a run, every cycle's, each with its stage; `stage` keeps one stage's."
    )]
    async fn findings(&self, Parameters(args): Parameters<FindingsArgs>) -> Answer {
        let store = &self.store;
        let (_, stages, findings) = tokio::try_join!(
            store.run(&args.run),
            store.stages(&args.run),
            store.findings(&args.run)
        )
        .map_err(|error| chain(&error))?;
        if let Some(stage) = &args.stage
            && !stages.iter().any(|row| &row.name == stage)
        {
            return Err(format!("run {} has no stage named '{stage}'", args.run));
        }
        let found = view::findings_json(&stages, &findings, args.stage.as_deref());
        json(&Value::Array(found))
    }

    /// `list_gates`.
    #[tool(
        description = "The gates that have run or been decided, of one run or of every run, as `baton gate list --format json` prints them."
    )]
    async fn list_gates(&self, Parameters(args): Parameters<GatesArgs>) -> Answer {
        let gates = gate::list(&self.store, args.run.as_deref())
            .await
            .map_err(|error| chain(&error))?;
        json(&Value::Array(
            gates.iter().map(view::gates::status_json).collect(),
        ))
    }

    /// `decide_gate`.
    #[tool(
        description = "Approve or reject a gate as the person whose token this session carries (BATON_TOKEN over stdio, the bearer token over HTTP); their name is recorded as the decider."
    )]
    async fn decide_gate(
        &self,
        Parameters(args): Parameters<DecideArgs>,
        context: RequestContext<RoleServer>,
    ) -> Answer {
        let decision = match args.decision.as_str() {
            "approve" => Decision::Approve,
            "reject" => Decision::Reject,
            other => return Err(format!("no decision '{other}': approve or reject")),
        };
        let by = self.person(&context).await?;
        let row = gate::decide(
            &self.store,
            &args.run,
            &args.stage,
            decision,
            &by,
            args.comment,
        )
        .await
        .map_err(|error| chain(&error))?;
        json(&view::decision_json(&args.run, &args.stage, &row))
    }
}
