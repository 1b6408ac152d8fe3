//! Tests of the governance state machine: the transition table and each
//! rule, driven through `apply` by one helper.

use super::*;

pub(super) fn who(profile: &str, model: Option<&str>) -> Identity {
    Identity {
        profile: profile.to_owned(),
        model: model.map(str::to_owned),
        session: "s".to_owned(),
    }
}

pub(super) fn owner() -> Identity {
    who("claude", Some("opus"))
}

pub(super) fn reviewer() -> Identity {
    who("codex", Some("gpt"))
}

pub(super) fn edit(path: &str) -> Event {
    Event::Edited {
        path: path.to_owned(),
        hash: "h".to_owned(),
    }
}

pub(super) fn test(exit_code: i32, covered: &[&str]) -> Event {
    Event::Validated {
        command: "cargo test".to_owned(),
        exit_code,
        covered: covered.iter().map(|c| (*c).to_owned()).collect(),
    }
}

pub(super) fn review(findings: &[&str]) -> Event {
    Event::Reviewed {
        reviewer: reviewer(),
        findings: findings.iter().map(|f| (*f).to_owned()).collect(),
    }
}

pub(super) fn closure() -> Event {
    Event::Closed(Closure {
        proven: "tests pass".to_owned(),
        not_proven: "performance".to_owned(),
        residual_risk: "low".to_owned(),
        next_owner: "maintainers".to_owned(),
    })
}

/// Applies events in order, all of which must succeed, and returns the
/// state and the actions of the last one.
pub(super) fn run(events: &[Event]) -> (State, Vec<Action>) {
    let mut state = State::new(owner());
    let mut actions = Vec::new();
    for event in events {
        (state, actions) = apply(&state, event)
            .unwrap_or_else(|refusal| panic!("{event:?} refused: {}", refusal.reason));
    }
    (state, actions)
}

/// Applies `events`, then expects `last` to be refused with `kind` and a
/// reason containing `reason`.
pub(super) fn check_refused(events: &[Event], last: Event, kind: RefusalKind, reason: &str) {
    let (state, _) = run(events);
    let refusal = apply(&state, &last).expect_err("the event is refused");
    assert_eq!(refusal.kind, kind, "{}", refusal.reason);
    assert!(refusal.reason.contains(reason), "{}", refusal.reason);
    assert!(
        refusal.reason.ends_with('.'),
        "a sentence: {}",
        refusal.reason
    );
}

/// Clarify, read, plan.
pub(super) fn prepared() -> Vec<Event> {
    vec![
        Event::Clarified,
        Event::Inspected {
            path: "src/lib.rs".to_owned(),
        },
        plan("cargo test"),
    ]
}

pub(super) fn plan(validation_intent: &str) -> Event {
    Event::Planned {
        validation_intent: validation_intent.to_owned(),
        validation_claimed: true,
    }
}

pub(super) fn with(mut events: Vec<Event>, more: impl IntoIterator<Item = Event>) -> Vec<Event> {
    events.extend(more);
    events
}

#[test]
fn the_transition_table() {
    use Stage::*;
    let stages = [
        Clarify, Read, Plan, Edit, Test, Review, Repair, ReReview, Release, Handoff, Closed,
    ];
    let table: Vec<String> = stages
        .iter()
        .map(|from| {
            let to: Vec<String> = stages
                .iter()
                .filter(|to| legal(*from, **to))
                .map(|to| format!("{to:?}"))
                .collect();
            format!("{from:?} -> {}", to.join(" "))
        })
        .collect();
    assert_eq!(
        table,
        [
            "Clarify -> Clarify Read",
            "Read -> Clarify Read Plan",
            "Plan -> Read Plan Edit Test",
            "Edit -> Read Edit Test Repair",
            "Test -> Read Edit Test Review Repair ReReview",
            "Review -> Read Review Repair Release",
            "Repair -> Read Edit Test Repair ReReview",
            "ReReview -> Read Test Review Repair ReReview Release",
            "Release -> Handoff Closed",
            "Handoff -> Closed",
            "Closed -> ",
        ]
    );
}

#[test]
fn the_happy_path_closes() {
    let events = with(prepared(), [edit("src/lib.rs"), test(0, &[]), review(&[])]);
    let (state, actions) = run(&with(events, [Event::Released, closure()]));
    assert_eq!(state.stage(), Stage::Closed);
    assert!(matches!(actions.as_slice(), [Action::Closed(_)]));
}

#[test]
fn closed_is_terminal() {
    let events = with(prepared(), [edit("a"), test(0, &[]), review(&[])]);
    let events = with(events, [Event::Released, closure()]);
    for last in [Event::Clarified, edit("a"), test(0, &[]), closure()] {
        check_refused(
            &events,
            last,
            RefusalKind::IllegalTransition,
            "the work is closed: nothing may follow it",
        );
    }
}

#[test]
fn illegal_transitions_are_refused_with_what_is_missing() {
    check_refused(
        &[],
        edit("a"),
        RefusalKind::IllegalTransition,
        "An edit needs a clarified request, inspected context and a plan that says how the work will be validated first: record `clarified`, then `inspected PATH`, then `planned --intent TEXT`.",
    );
    check_refused(
        &[Event::Clarified],
        edit("a"),
        RefusalKind::IllegalTransition,
        "An edit needs inspected context and a plan",
    );
    let tested = with(prepared(), [edit("a"), test(0, &[])]);
    check_refused(
        &tested,
        Event::Released,
        RefusalKind::IllegalTransition,
        "Release needs an independent review first: record `reviewed --reviewer PROFILE` by someone other than the owner.",
    );
    let repaired = with(tested, [review(&["leak"]), Event::Repaired { finding: 0 }]);
    check_refused(
        &repaired,
        closure(),
        RefusalKind::IllegalTransition,
        "Closure needs a re-review of the repair and a release first: record `re-reviewed N --reviewer PROFILE`, then `released`.",
    );
    let released = with(
        prepared(),
        [edit("a"), test(0, &[]), review(&[]), Event::Released],
    );
    check_refused(
        &released,
        edit("a"),
        RefusalKind::IllegalTransition,
        "the work is released: only a handoff",
    );
}

#[test]
fn an_edit_needs_clarification_context_and_intent() {
    let read = Event::Inspected {
        path: "a".to_owned(),
    };
    let planned = plan("cargo test");
    check_refused(
        &[read.clone(), planned.clone()],
        edit("a"),
        RefusalKind::MissingEvidence,
        "editing a needs a clarified request: record `clarified`.",
    );
    check_refused(
        &[Event::Clarified, read],
        plan(" "),
        RefusalKind::MissingEvidence,
        "how the work will be validated",
    );
    check_refused(
        &[
            Event::Clarified,
            Event::NewEvidence {
                path: "a".to_owned(),
                note: "x".to_owned(),
            },
            planned,
        ],
        edit("a"),
        RefusalKind::MissingEvidence,
        "editing a needs inspected context: record `inspected PATH`",
    );
}

#[test]
fn self_review_is_refused() {
    let events = with(prepared(), [edit("a"), test(0, &[])]);
    for same in [
        who("claude", None),
        who("claude", Some("other")),
        who("other", Some("opus")),
    ] {
        let event = Event::Reviewed {
            reviewer: same,
            findings: vec![],
        };
        check_refused(&events, event, RefusalKind::SelfReview, "not independent");
    }
    // A different profile without a configured model is independent.
    run(&with(
        events,
        [Event::Reviewed {
            reviewer: who("codex", None),
            findings: vec![],
        }],
    ));
}

#[test]
fn closure_needs_an_independent_review() {
    let events = with(prepared(), [edit("a"), test(0, &[])]);
    // Test cannot go straight to Release; the review is the only way on.
    check_refused(
        &events,
        Event::Released,
        RefusalKind::IllegalTransition,
        "Release needs an independent review first",
    );
}

#[test]
fn an_edit_after_validation_makes_it_stale() {
    let events = with(
        prepared(),
        [edit("src/a.rs"), test(0, &["src"]), edit("src/a.rs")],
    );
    let (state, actions) = run(&events);
    assert_eq!(
        actions,
        [Action::ValidationStale {
            path: "src/a.rs".to_owned()
        }]
    );
    assert_eq!(
        state.validation_fresh(),
        Err("src/a.rs was edited after its last validation".to_owned())
    );
    check_refused(
        &with(events.clone(), [test(0, &["src/b.rs"]), review(&[])]),
        Event::Released,
        RefusalKind::StaleValidation,
        "src/a.rs was edited after its last validation",
    );
    // A fresh run covering the path makes it fresh again.
    run(&with(
        events,
        [test(0, &["src/"]), review(&[]), Event::Released],
    ));
}

#[test]
fn stale_validation_cannot_support_closure() {
    // Validation covering another directory does not count for the edit.
    let events = with(
        prepared(),
        [edit("src/a.rs"), test(0, &["docs"]), review(&[])],
    );
    check_refused(
        &events,
        Event::Released,
        RefusalKind::StaleValidation,
        "src/a.rs was edited after its last validation",
    );
    // A failing latest validation does not count either.
    let events = with(
        prepared(),
        [
            edit("a"),
            test(0, &[]),
            edit("a"),
            test(1, &[]),
            review(&[]),
        ],
    );
    check_refused(
        &events,
        Event::Released,
        RefusalKind::StaleValidation,
        "failed with exit code 1",
    );
    // No passing validation at all.
    let events = with(prepared(), [test(1, &[]), review(&[])]);
    check_refused(
        &events,
        Event::Released,
        RefusalKind::StaleValidation,
        "no validation has passed",
    );
}

#[test]
fn a_repair_requires_a_re_review() {
    let reviewed = with(
        prepared(),
        [edit("a"), test(0, &[]), review(&["null deref: boom"])],
    );
    check_refused(
        &reviewed,
        Event::Released,
        RefusalKind::OpenFindings,
        "finding 0 (null deref: boom)",
    );
    let repaired = with(
        reviewed,
        [Event::Repaired { finding: 0 }, edit("a"), test(0, &[])],
    );
    let (_, actions) = run(&repaired[..repaired.len() - 2]);
    assert_eq!(actions, [Action::ReReviewRequired { finding: 0 }]);
    check_refused(
        &repaired,
        Event::Repaired { finding: 0 },
        RefusalKind::UnknownFinding,
        "is Repaired, not Open",
    );
    check_refused(
        &repaired,
        Event::Repaired { finding: 7 },
        RefusalKind::UnknownFinding,
        "no finding 7",
    );
    let self_rereview = Event::ReReviewed {
        reviewer: owner(),
        finding: 0,
        resolved: true,
    };
    check_refused(
        &repaired,
        self_rereview,
        RefusalKind::SelfReview,
        "not independent",
    );
    // A rejected repair reopens the finding.
    let rejected = with(
        repaired.clone(),
        [Event::ReReviewed {
            reviewer: reviewer(),
            finding: 0,
            resolved: false,
        }],
    );
    let (state, _) = run(&rejected);
    assert_eq!(state.findings()[0].1, FindingStatus::Open);
    check_refused(
        &rejected,
        Event::Released,
        RefusalKind::OpenFindings,
        "finding 0",
    );
    let accepted = with(
        repaired,
        [Event::ReReviewed {
            reviewer: reviewer(),
            finding: 0,
            resolved: true,
        }],
    );
    let (state, _) = run(&with(accepted, [Event::Released, closure()]));
    assert_eq!(state.stage(), Stage::Closed);
}

#[test]
fn a_third_attempt_on_the_same_path_is_blocked() {
    let events = with(prepared(), [edit("a"), test(101, &[]), edit("a")]);
    let (_, actions) = run(&with(events.clone(), [test(101, &[])]));
    assert_eq!(
        actions,
        [Action::AttemptsExhausted {
            path: "a".to_owned()
        }]
    );
    let twice = with(events, [test(101, &[])]);
    check_refused(
        &twice,
        edit("a"),
        RefusalKind::ThirdAttempt,
        "a failed `cargo test` with exit code 101 twice",
    );
    // Other paths are not blocked, and a different failure is not the same way.
    run(&with(twice.clone(), [edit("b")]));
    let varied = with(
        prepared(),
        [
            edit("a"),
            test(101, &[]),
            edit("a"),
            test(2, &[]),
            edit("a"),
        ],
    );
    run(&varied);
    // New evidence lifts the block; it must say what is new.
    let empty = Event::NewEvidence {
        path: "a".to_owned(),
        note: " ".to_owned(),
    };
    check_refused(&twice, empty, RefusalKind::MissingEvidence, "what is new");
    let evidence = Event::NewEvidence {
        path: "a".to_owned(),
        note: "the fixture was wrong".to_owned(),
    };
    let planned = plan("cargo test");
    run(&with(twice, [evidence, planned, edit("a")]));
}

#[test]
fn closure_must_state_everything() {
    let events = with(
        prepared(),
        [edit("a"), test(0, &[]), review(&[]), Event::Released],
    );
    let blank = Event::Closed(Closure {
        proven: "x".to_owned(),
        not_proven: "x".to_owned(),
        residual_risk: "".to_owned(),
        next_owner: "x".to_owned(),
    });
    check_refused(
        &events,
        blank,
        RefusalKind::MissingEvidence,
        "closure must state the residual risk",
    );
    let handoff = Event::HandedOff {
        next_owner: "".to_owned(),
    };
    check_refused(
        &events,
        handoff,
        RefusalKind::MissingEvidence,
        "name the next owner",
    );
    run(&with(
        events,
        [
            Event::HandedOff {
                next_owner: "ops".to_owned(),
            },
            closure(),
        ],
    ));
}

#[test]
fn a_refusal_leaves_the_state_unchanged_and_repeats_are_harmless() {
    let (state, _) = run(&prepared());
    let before = state.clone();
    assert!(apply(&state, &closure()).is_err());
    assert_eq!(state, before);
    let events = with(
        prepared(),
        [
            edit("a"),
            edit("a"),
            test(0, &[]),
            test(0, &[]),
            review(&[]),
            review(&[]),
        ],
    );
    let (state, _) = run(&with(events, [Event::Released]));
    assert_eq!(state.stage(), Stage::Release);
}

/// Folds facts through `observe` and returns the state and every violation.
pub(super) fn observed(events: &[Event]) -> (State, Vec<RefusalKind>) {
    let mut state = State::new(owner());
    let mut violations = Vec::new();
    for event in events {
        let outcome = observe(&state, event);
        violations.extend(outcome.violation.map(|v| v.kind));
        state = outcome.state;
    }
    (state, violations)
}

#[test]
fn observing_records_facts_and_names_the_broken_rules() {
    // (events, expected violations, validation fresh afterwards)
    let cases: Vec<(Vec<Event>, Vec<RefusalKind>, bool)> = vec![
        // An unprepared edit is still an edit: it counts for freshness.
        (vec![edit("a")], vec![RefusalKind::IllegalTransition], false),
        (
            vec![edit("a"), test(0, &[])],
            vec![RefusalKind::IllegalTransition],
            true,
        ),
        // An edit after the test makes it stale, legal or not.
        (
            vec![edit("a"), test(0, &[]), edit("a")],
            vec![RefusalKind::IllegalTransition, RefusalKind::MissingEvidence],
            false,
        ),
        // A failing test is not fresh validation.
        (with(prepared(), [edit("a"), test(1, &[])]), vec![], false),
        // A legal ledger breaks nothing.
        (with(prepared(), [edit("a"), test(0, &["a"])]), vec![], true),
    ];
    for (events, violations, fresh) in cases {
        let (state, found) = observed(&events);
        assert_eq!(found, violations, "{events:?}");
        assert_eq!(state.validation_fresh().is_ok(), fresh, "{events:?}");
        assert_eq!(state.seq(), events.len() as u64);
    }
}

#[test]
fn observing_grants_nothing_a_broken_rule_would_have() {
    let events = with(
        prepared(),
        [
            edit("a"),
            test(0, &[]),
            // A self-review: findings count, the review does not.
            Event::Reviewed {
                reviewer: owner(),
                findings: vec!["leak".to_owned()],
            },
            Event::Repaired { finding: 0 },
            // A re-review by the owner resolves nothing.
            Event::ReReviewed {
                reviewer: owner(),
                finding: 0,
                resolved: true,
            },
        ],
    );
    let (state, found) = observed(&events);
    assert_eq!(found, [RefusalKind::SelfReview, RefusalKind::SelfReview]);
    assert!(!state.independently_reviewed());
    assert_eq!(state.findings()[0].1, FindingStatus::Repaired);
    assert_eq!(
        state.ready_to_close().unwrap_err().kind,
        RefusalKind::OpenFindings
    );
    assert_eq!(state.stage(), Stage::ReReview);
    assert_eq!(next_stages(Stage::Release), [Stage::Handoff, Stage::Closed]);
    assert!(next_stages(Stage::Closed).is_empty());
}

#[test]
fn observing_a_third_attempt_reports_it_and_lists_the_blocked_path() {
    let events = with(
        prepared(),
        [edit("a"), test(1, &[]), edit("a"), test(1, &[]), edit("a")],
    );
    let (state, found) = observed(&events);
    assert_eq!(found, [RefusalKind::ThirdAttempt]);
    assert_eq!(
        state.blocked_paths(),
        [("a".to_owned(), "cargo test".to_owned(), 1)]
    );
}
