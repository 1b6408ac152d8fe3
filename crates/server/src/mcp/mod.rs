//! baton as a Model Context Protocol server: over stdio (`baton mcp`, which
//! an agent CLI starts as a child) and over streamable HTTP at `/mcp` of
//! `baton serve`, behind the same guard as every other route.
//!
//! Two sets of tools ([`agent`], [`person`]) on one server. Who calls is
//! worked out per call ([`Caller`]):
//!
//! * an agent inside a stage: over stdio from `BATON_RUN_ID` and
//!   `BATON_STAGE`, which baton sets for every stage's process and the
//!   agent CLI passes on to the servers it starts; over HTTP from the
//!   `Baton-Run` and `Baton-Stage` headers;
//! * a person: over stdio from the token in `BATON_TOKEN`, over HTTP from
//!   the bearer token the guard already checked.
//!
//! Reading needs neither. Deciding a gate needs a person, whose name is
//! recorded as the decider. Over HTTP every tool that writes needs a
//! person's token, as every other write of `baton serve` does; over stdio
//! the agent's records are its stage's own, as the environment baton gave
//! its process says.

mod agent;
mod person;

use std::sync::Arc;

use axum::http::request::Parts;
use baton_engine::stage_agent::StageAgent;
use baton_store::Store;
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler, ServiceExt, tool_handler};
use serde_json::Value;

use crate::auth::Person;
use crate::error::chain;

/// What `baton mcp` was started with.
#[derive(Debug, Clone, Default)]
pub struct StdioContext {
    /// The run and stage of the process that started it (`BATON_RUN_ID`,
    /// `BATON_STAGE`), when inside a stage.
    pub stage: Option<(String, String)>,
    /// A person's token (`BATON_TOKEN`).
    pub token: Option<String>,
}

/// Why `baton mcp` stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The session could not start (no `initialize`, a broken pipe).
    #[error("the MCP session did not start: {0}")]
    Start(String),
    /// The session ended with an error.
    #[error("the MCP session failed: {0}")]
    Session(String),
}

/// Serves MCP on stdin and stdout until the client closes them.
///
/// # Errors
///
/// The session did not start or failed.
pub async fn serve_stdio(store: Store, context: StdioContext) -> Result<(), Error> {
    let server = Baton {
        store,
        stdio: Some(Arc::new(context)),
    };
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|error| Error::Start(error.to_string()))?;
    running
        .waiting()
        .await
        .map(|_| ())
        .map_err(|error| Error::Session(error.to_string()))
}

/// The `/mcp` service of `baton serve`: stateless, each call answered with
/// JSON. The guard in front of it checks `Host` and `Origin` and who the
/// token belongs to, so the transport's own host check is off.
pub(crate) fn http_service(store: Store) -> StreamableHttpService<Baton, LocalSessionManager> {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .disable_allowed_hosts();
    StreamableHttpService::new(
        move || {
            Ok(Baton {
                store: store.clone(),
                stdio: None,
            })
        },
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

/// The server: the store, and over stdio what its environment said.
#[derive(Debug, Clone)]
pub(crate) struct Baton {
    store: Store,
    stdio: Option<Arc<StdioContext>>,
}

/// Who makes a call.
#[derive(Debug, Clone)]
struct Caller {
    /// The person whose token came with it.
    person: Option<String>,
    /// The run and stage of the agent calling, if one is.
    stage: Option<(String, String)>,
    /// Over HTTP (where writing needs a person), not stdio.
    http: bool,
}

/// A tool's answer: JSON as text, or an error the model reads.
type Answer = Result<CallToolResult, String>;

fn json(value: &Value) -> Answer {
    let text = serde_json::to_string_pretty(value).map_err(|error| error.to_string())?;
    Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
}

impl Baton {
    /// Every tool: the agent's and the person's.
    fn tools() -> rmcp::handler::server::router::tool::ToolRouter<Baton> {
        Self::agent_tools() + Self::person_tools()
    }

    /// Who makes the call in `context`.
    async fn caller(&self, context: &RequestContext<RoleServer>) -> Result<Caller, String> {
        if let Some(parts) = context.extensions.get::<Parts>() {
            let person = parts
                .extensions
                .get::<Option<Person>>()
                .cloned()
                .flatten()
                .map(|Person(name)| name);
            let header = |name: &str| {
                parts
                    .headers
                    .get(name)
                    .and_then(|value| value.to_str().ok())
                    .map(str::to_owned)
            };
            let stage = header("baton-run").zip(header("baton-stage"));
            return Ok(Caller {
                person,
                stage,
                http: true,
            });
        }
        let stdio = self.stdio.as_deref().cloned().unwrap_or_default();
        let person = match &stdio.token {
            None => None,
            Some(token) => match crate::tokens::owner(&self.store, token).await {
                Ok(Some(name)) => Some(name),
                Ok(None) => {
                    return Err(
                        "BATON_TOKEN is not a valid token (revoked, or never made); `baton token create --name NAME` makes one".to_owned(),
                    );
                }
                Err(error) => return Err(chain(&error)),
            },
        };
        Ok(Caller {
            person,
            stage: stdio.stage,
            http: false,
        })
    }

    /// The person making a call that changes state, or why none is.
    async fn person(&self, context: &RequestContext<RoleServer>) -> Result<String, String> {
        let caller = self.caller(context).await?;
        caller.person.ok_or_else(|| {
            if caller.http {
                "a person's token is needed: send `Authorization: Bearer TOKEN` (`baton token create --name NAME` makes one)".to_owned()
            } else {
                "a person's token is needed: set BATON_TOKEN in the environment of `baton mcp` (`baton token create --name NAME` makes one)".to_owned()
            }
        })
    }

    /// The agent's stage, opened; `writes` says the call changes state,
    /// which over HTTP needs a person's token too.
    async fn agent(
        &self,
        context: &RequestContext<RoleServer>,
        writes: bool,
    ) -> Result<StageAgent, String> {
        let caller = self.caller(context).await?;
        let Some((run, stage)) = caller.stage else {
            return Err(if caller.http {
                "this session is not inside a stage: send the `Baton-Run` and `Baton-Stage` headers"
                    .to_owned()
            } else {
                "this session is not inside a stage: baton sets BATON_RUN_ID and BATON_STAGE for a stage's process, and the agent CLI passes them to `baton mcp`".to_owned()
            });
        };
        if writes && caller.http && caller.person.is_none() {
            return Err(
                "a person's token is needed to write over HTTP: send `Authorization: Bearer TOKEN`"
                    .to_owned(),
            );
        }
        StageAgent::open(&self.store, &run, &stage)
            .await
            .map_err(|error| chain(&error))
    }
}

#[tool_handler(
    router = Self::tools(),
    name = "baton",
    instructions = "baton runs workflows of coding agents. Inside a stage: stage_contract, report_progress, record_evidence, governance_state. For a person: list_runs, run_status, findings, list_gates, decide_gate."
)]
impl ServerHandler for Baton {}
