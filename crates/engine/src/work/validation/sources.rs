//! Which stages' outputs a validation judges, and whose role corrects them.

use baton_workflow::plan::PlanStage;
use baton_workflow::schema::Kind;

use crate::work::context::Context;

/// The stages whose outputs are validated, and the one whose role corrects.
pub(super) struct Sources<'a> {
    pub(super) stages: Vec<&'a PlanStage>,
    pub(super) producer: &'a PlanStage,
}

/// A `kind: validate` stage validates the stages it depends on (the first
/// one produced the work, so its role corrects); any other stage validates
/// its own outputs. Human-gated dependencies are left out: their output was
/// approved as it is, and a correction would make the approval stale. A
/// validate stage with no other dependency validates its own outputs.
pub(super) fn sources<'a>(context: &Context<'a>) -> Sources<'a> {
    let stage = context.stage;
    if stage.spec.kind == Kind::Validate {
        let upstream: Vec<&PlanStage> = stage
            .spec
            .depends_on
            .iter()
            .filter_map(|name| context.plan.stage(&name.value))
            .filter(|upstream| !upstream.spec.human_gate)
            .collect();
        if let Some(&producer) = upstream.first() {
            return Sources {
                stages: upstream,
                producer,
            };
        }
    }
    Sources {
        stages: vec![stage],
        producer: stage,
    }
}
