//! An agent stage whose profile is an OpenAI-compatible endpoint
//! (`kind = "openai-chat"`): no process; the executor asks the server and
//! writes the declared files, then the usual verification runs.

use baton_executor::endpoint::{ChatRequest, EndpointError};
use baton_workflow::plan::PlanStage;
use tokio::sync::watch;

use crate::attempt::{Attempt, Finished};
use crate::outputs::{snapshot, verify_attempt};
use crate::usage::Meter;

/// Runs one attempt against the endpoint.
pub(crate) async fn execute(
    stage: &PlanStage,
    attempt: &Attempt,
    request: ChatRequest,
    meter: &Meter,
    cancel: watch::Receiver<bool>,
) -> Finished {
    let before = snapshot(stage, &attempt.workspace);
    let mut finished = Finished::unsettled(attempt);
    let result = baton_executor::endpoint::chat(&request, cancel).await;
    // Tokens are spent whether or not the answer is usable.
    finished.usage = meter.read(&request.response_log);
    match result {
        Err(EndpointError::Cancelled) => {
            finished.cancelled = true;
            finished.error = Some("cancelled".to_owned());
        }
        Err(error) => finished.error = Some(error.to_string()),
        Ok(_) => verify_attempt(&mut finished, stage, attempt, &before),
    }
    finished
}
