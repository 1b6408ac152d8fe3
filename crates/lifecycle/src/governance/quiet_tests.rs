//! Tests of the rules that keep governance quiet in normal use: checks apply
//! only to what a scope claims and can see, refusals and summaries say what
//! is missing in words, and a failing command is not retried a third time.

use super::tests::{check_refused, edit, owner, plan, prepared, review, reviewer, run, test, with};
use super::*;

/// Folds `events` as facts into a state that sees `visibility`; returns
/// the state and the rules broken.
fn observed_as(visibility: Visibility, events: &[Event]) -> (State, Vec<RefusalKind>) {
    let mut state = State::seen_as(owner(), visibility);
    let mut broken = Vec::new();
    for event in events {
        let outcome = observe(&state, event);
        broken.extend(outcome.violation.map(|v| v.kind));
        state = outcome.state;
    }
    (state, broken)
}

fn inspect(path: &str) -> Event {
    Event::Inspected {
        path: path.to_owned(),
    }
}

#[test]
fn a_plan_that_claims_no_validation_has_no_freshness_rule() {
    let unclaimed = Event::Planned {
        validation_intent: "each stage's declared outputs; no stage has validation".to_owned(),
        validation_claimed: false,
    };
    let opening = vec![Event::Clarified, inspect("wf.yaml"), unclaimed];
    let (state, _) = run(&with(opening.clone(), [edit("outputs/a.md")]));
    assert!(!state.validation_claimed());
    assert_eq!(state.validation_fresh(), Ok(()));
    assert_eq!(state.transition_word(false), TransitionWord::Allowed);
    // Closure still needs what was not waived: a review.
    assert_eq!(state.closure_word(), ClosureWord::NeedsReview);
    // The same edit under a plan that claims validation is stale.
    let (state, _) = run(&with(prepared(), [edit("outputs/a.md")]));
    assert!(state.validation_claimed());
    assert_eq!(
        state.validation_fresh(),
        Err("outputs/a.md was edited after its last validation".to_owned())
    );
    // A later plan that claims validation brings the rule back.
    let (state, _) = run(&with(
        opening,
        [
            edit("outputs/a.md"),
            inspect("wf.yaml"),
            plan("cargo test"),
            edit("outputs/a.md"),
        ],
    ));
    assert!(state.validation_fresh().is_err());
}

#[test]
fn tool_calls_are_judged_by_what_tool_calls_can_show() {
    // A hooked session: reads, edits and tests, never a clarification or
    // a plan, and a test run before anything else.
    let session = vec![
        test(0, &[]),
        inspect("src/lib.rs"),
        edit("src/lib.rs"),
        test(0, &["src"]),
        edit("src/lib.rs"),
        test(0, &["src"]),
    ];
    let (state, broken) = observed_as(Visibility::ToolCalls, &session);
    assert_eq!(broken, []);
    assert_eq!(state.validation_fresh(), Ok(()));
    // Judged as a ledger that sees everything, the same facts break the
    // rules that ask for what hooks cannot see.
    let (_, broken) = observed_as(Visibility::Everything, &session);
    assert_eq!(
        broken,
        [
            RefusalKind::IllegalTransition,
            RefusalKind::IllegalTransition,
            RefusalKind::MissingEvidence,
        ]
    );
    // What tool calls can show is still asked for: context before an edit,
    // freshness, an independent review.
    let (state, broken) = observed_as(Visibility::ToolCalls, &[edit("a")]);
    assert_eq!(broken, [RefusalKind::MissingEvidence]);
    assert!(state.validation_fresh().is_err(), "the test commands claim");
    let state = State::seen_as(owner(), Visibility::ToolCalls);
    let (state, _) = apply(&state, &inspect("a")).expect("a read");
    let refusal = apply(&state, &Event::Released).expect_err("refused");
    assert_eq!(
        refusal.reason,
        "Release needs a validation and an independent review first: record `validated --command CMD --exit-code N`, then `reviewed --reviewer PROFILE` by someone other than the owner."
    );
}

#[test]
fn a_third_identical_failing_command_is_blocked_like_a_third_patch() {
    let twice = with(prepared(), [edit("a"), test(101, &[]), test(101, &[])]);
    check_refused(
        &twice,
        test(101, &[]),
        RefusalKind::ThirdAttempt,
        "`cargo test` failed with exit code 101 twice already; record new evidence",
    );
    // A pass is not a retry, and it ends the failing streak.
    let passed = with(twice.clone(), [test(0, &[])]);
    run(&with(passed, [test(101, &[]), test(101, &[])]));
    // Failing another way is another route.
    run(&with(twice.clone(), [test(2, &[])]));
    // New evidence lifts the block (and, being reading, is planned again).
    let evidence = Event::NewEvidence {
        path: "a".to_owned(),
        note: "the runner was out of disk".to_owned(),
    };
    run(&with(
        twice.clone(),
        [evidence, plan("cargo test"), test(101, &[])],
    ));
    // Observed, the third failure is a broken rule and the command is listed.
    let mut observed = State::new(owner());
    let mut broken = Vec::new();
    for event in with(twice, [test(101, &[])]) {
        let outcome = observe(&observed, &event);
        broken.extend(outcome.violation.map(|v| v.kind));
        observed = outcome.state;
    }
    assert_eq!(broken, [RefusalKind::ThirdAttempt]);
    assert_eq!(
        observed.blocked_commands(),
        [("cargo test".to_owned(), 101)]
    );
}

#[test]
fn transitions_and_closure_are_stated_in_words() {
    use ClosureWord as C;
    use TransitionWord as T;
    let edited = with(prepared(), [edit("a")]);
    let tested = with(edited.clone(), [test(0, &[])]);
    let reviewed = with(tested.clone(), [review(&[])]);
    let finding = with(tested.clone(), [review(&["leak"])]);
    let repaired = with(finding.clone(), [Event::Repaired { finding: 0 }]);
    let resolved = with(
        repaired.clone(),
        [Event::ReReviewed {
            reviewer: reviewer(),
            finding: 0,
            resolved: true,
        }],
    );
    let cases: [(&[Event], T, C); 7] = [
        (&prepared(), T::Allowed, C::NeedsValidation),
        (&edited, T::Stale, C::NeedsValidation),
        (&tested, T::Allowed, C::NeedsReview),
        (&reviewed, T::Allowed, C::Ready),
        (&finding, T::Allowed, C::Blocked),
        (&repaired, T::NeedsReReview, C::NeedsReview),
        (&resolved, T::Allowed, C::Ready),
    ];
    for (events, transition, closure) in cases {
        let (state, _) = run(events);
        assert_eq!(state.transition_word(false), transition, "{events:?}");
        assert_eq!(state.closure_word(), closure, "{events:?}");
        assert_eq!(
            state.ready_to_close().is_ok(),
            closure == C::Ready,
            "{events:?}"
        );
    }
    let (state, _) = run(&edited);
    assert_eq!(state.transition_word(true), T::Blocked);
    // Every blocker is listed, each saying what to do.
    let blockers: Vec<(C, String)> = state
        .closure_blockers()
        .into_iter()
        .map(|(word, refusal)| (word, refusal.reason))
        .collect();
    assert_eq!(
        blockers,
        [
            (
                C::NeedsValidation,
                "the work needs fresh validation first (a was edited after its last validation): run the tests that cover it and record `validated`.".to_owned()
            ),
            (
                C::NeedsReview,
                "the work needs an independent review first: record `reviewed` by a reviewer whose profile (and model) differ from the owner's (claude).".to_owned()
            ),
        ]
    );
    assert_eq!(
        [T::Allowed, T::Blocked, T::Stale, T::NeedsReReview].map(T::as_str),
        ["allowed", "blocked", "stale", "needs re-review"]
    );
    assert_eq!(
        [C::Ready, C::NeedsValidation, C::NeedsReview, C::Blocked].map(C::as_str),
        ["ready", "needs validation", "needs review", "blocked"]
    );
}
