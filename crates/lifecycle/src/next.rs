//! What a task does next: the phases still to run, and what its verdict
//! decides (docs/tasks.md).

use crate::phase::{Phase, Status};
use crate::verdict::{FollowUp, Kind, Verdict, follow_ups, sub_task_follow_ups};

/// The optional phases a task asked for when it was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Optional {
    /// Run Decomposition after Research (the parent then waits for its
    /// sub-tasks).
    pub decompose: bool,
    /// Run Design after Research.
    pub design: bool,
    /// Run Test design after Design.
    pub test_plan: bool,
}

/// The phases still to run, in order, from a task's status.
///
/// `redo_research` says the task's `SPEC.md` is still the copy it was
/// created with (a tie-break task): Research runs again although the file
/// counts. The list stops after Decomposition, because the parent waits
/// for its sub-tasks there; it is empty at Referee (the verdict decides).
pub fn phases(status: &Status, optional: Optional, redo_research: bool) -> Vec<Phase> {
    let mut chain = vec![Phase::Research];
    if optional.decompose {
        chain.push(Phase::Decomposition);
    }
    if optional.design {
        chain.push(Phase::Design);
        if optional.test_plan {
            chain.push(Phase::TestDesign);
        }
    }
    chain.extend([
        Phase::Implementation,
        Phase::BugFind,
        Phase::Adversarial,
        Phase::DocReview,
        Phase::Referee,
    ]);
    let current = if redo_research && status.phase == Phase::Research {
        Phase::New
    } else {
        status.phase
    };
    let mut out: Vec<Phase> = chain.into_iter().filter(|&phase| phase > current).collect();
    if let Some(at) = out.iter().position(|&phase| phase == Phase::Decomposition) {
        out.truncate(at + 1);
    }
    out
}

/// How follow-up work is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// baton creates the fix, review and tie-break tasks for a person to
    /// run, and archives a task that passed.
    Manual,
    /// baton creates nothing: any verdict other than a clean PASS pauses
    /// the task for a person to decide.
    Autopilot,
}

/// What a verdict decides for its task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The task passed (and so did every sub-task): it leaves the active list.
    pub archive: bool,
    /// The tasks to create (manual mode only).
    pub create: Vec<FollowUp>,
    /// Why a person must decide, when one must.
    pub pause: Option<String>,
}

/// Decides what a task's verdict calls for. `subs` are the verdicts of its
/// sub-tasks (empty when it was not decomposed); a parent passes only when
/// it and every sub-task pass. A sub-task (`is_sub`) creates no follow-ups
/// of its own: its parent's verdict names them (`{parent}-fix-{sub}`).
pub fn decide(
    task: &str,
    verdict: &Verdict,
    subs: &[(&str, &Verdict)],
    mode: Mode,
    is_sub: bool,
    taken: impl Fn(&str) -> bool,
) -> Decision {
    let passed = verdict.kind == Kind::Pass && subs.iter().all(|(_, sub)| sub.kind == Kind::Pass);
    if is_sub {
        return Decision {
            archive: passed,
            create: Vec::new(),
            pause: None,
        };
    }
    let mut wanted = follow_ups(task, verdict, &taken);
    let more = sub_task_follow_ups(task, subs, |name| {
        taken(name) || wanted.iter().any(|done| done.name == name)
    });
    wanted.extend(more);
    match mode {
        Mode::Autopilot if passed && wanted.is_empty() => Decision {
            archive: true,
            create: Vec::new(),
            pause: None,
        },
        Mode::Autopilot => Decision {
            archive: false,
            create: Vec::new(),
            pause: Some(autopilot_reason(verdict.kind, passed, &wanted)),
        },
        Mode::Manual => {
            let pause = (!passed && wanted.is_empty()).then(|| {
                let whose = if verdict.kind == Kind::Pass {
                    "a sub-task's verdict is not PASS".to_owned()
                } else {
                    format!("the verdict is {}", word(verdict.kind))
                };
                format!("{whose} but lists nothing to follow up: a person must decide")
            });
            Decision {
                archive: passed,
                create: wanted,
                pause,
            }
        }
    }
}

/// The verdict's word, as `VERDICT.md` spells it.
pub fn word(kind: Kind) -> &'static str {
    match kind {
        Kind::Pass => "PASS",
        Kind::Fail => "FAIL",
        Kind::NeedsReview => "NEEDS_REVIEW",
    }
}

fn autopilot_reason(kind: Kind, passed: bool, wanted: &[FollowUp]) -> String {
    let head = if passed {
        "the verdict is PASS with items to follow up".to_owned()
    } else if kind == Kind::Pass {
        "the verdict is PASS but a sub-task did not pass".to_owned()
    } else {
        format!("the verdict is {}", word(kind))
    };
    let mut text = format!("{head}; autopilot creates no follow-up tasks: a person must decide");
    if !wanted.is_empty() {
        let names: Vec<&str> = wanted.iter().map(|f| f.name.as_str()).collect();
        text.push_str(&format!(" (manual mode would create {})", names.join(", ")));
    }
    text
}

#[cfg(test)]
mod tests;
