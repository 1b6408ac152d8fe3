use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use super::*;
use crate::phase::{FileInfo, detect};
use crate::verdict::{FollowUpKind, parse};

/// The status of a folder holding `files`, written one second apart in
/// this order.
fn status(files: &[&str]) -> Status {
    let files: BTreeMap<String, FileInfo> = files
        .iter()
        .enumerate()
        .map(|(n, name)| {
            let modified = SystemTime::UNIX_EPOCH + Duration::from_secs(n as u64 + 1);
            let info = FileInfo {
                non_empty: true,
                modified,
            };
            ((*name).to_owned(), info)
        })
        .collect();
    detect(&files)
}

const ALL: Optional = Optional {
    decompose: false,
    design: true,
    test_plan: true,
};

#[test]
fn phases_still_to_run_from_every_row() {
    use Phase::*;
    let rest = [Implementation, BugFind, Adversarial, DocReview, Referee];
    let chain = [
        "SPEC.md",
        "IMPLEMENTATION.md",
        "BUG_REPORT.md",
        "ADVERSARIAL_BUG_REPORT.md",
        "DOC_REVIEW.md",
        "VERDICT.md",
    ];
    let none = Optional::default();
    // New runs everything; each later row runs what follows it.
    let mut all = vec![Research];
    all.extend(rest);
    assert_eq!(phases(&status(&[]), none, false), all);
    for n in 0..chain.len() {
        assert_eq!(phases(&status(&chain[..=n]), none, false), &rest[n..]);
    }
    // Optional phases run when asked for, in table order.
    assert_eq!(
        phases(&status(&["SPEC.md"]), ALL, false)[..3],
        [Design, TestDesign, Implementation]
    );
    assert_eq!(
        phases(&status(&["SPEC.md", "DESIGN.md"]), ALL, false)[0],
        TestDesign
    );
    assert_eq!(
        phases(
            &status(&["SPEC.md", "DESIGN.md", "TEST_PLAN.md"]),
            ALL,
            false
        )[0],
        Implementation
    );
    // A hand-written design counts although none was asked for.
    assert_eq!(
        phases(&status(&["SPEC.md", "DESIGN.md"]), none, false)[0],
        Implementation
    );
}

#[test]
fn decomposition_stops_the_run_and_the_parent_continues_after_it() {
    use Phase::*;
    let decompose = Optional {
        decompose: true,
        ..Optional::default()
    };
    assert_eq!(
        phases(&status(&[]), decompose, false),
        [Research, Decomposition]
    );
    assert_eq!(
        phases(&status(&["SPEC.md"]), decompose, false),
        [Decomposition]
    );
    let after = phases(&status(&["SPEC.md", "DECOMPOSITION.md"]), decompose, false);
    assert_eq!(after[0], Implementation);
    assert_eq!(after.len(), 5);
}

#[test]
fn fix_tasks_start_at_implementation_and_tie_breaks_at_research() {
    // A fix task: copied reports and an empty IMPLEMENTATION.md.
    let mut files: BTreeMap<String, FileInfo> = BTreeMap::new();
    for (n, name) in [
        "SPEC.md",
        "BUG_REPORT.md",
        "ADVERSARIAL_BUG_REPORT.md",
        "IMPLEMENTATION.md",
    ]
    .iter()
    .enumerate()
    {
        let info = FileInfo {
            non_empty: *name != "IMPLEMENTATION.md",
            modified: SystemTime::UNIX_EPOCH + Duration::from_secs(n as u64 + 1),
        };
        files.insert((*name).to_owned(), info);
    }
    let copied = detect(&files);
    assert_eq!(copied.phase, Phase::Research);
    let fix = phases(&copied, Optional::default(), false);
    assert_eq!(fix[0], Phase::Implementation);
    let tie = phases(&copied, Optional::default(), true);
    assert_eq!(tie[..2], [Phase::Research, Phase::Implementation]);
}

#[test]
fn a_stale_report_is_run_again() {
    // BUG_REPORT.md older than IMPLEMENTATION.md: bug find runs again.
    let stale = status(&["SPEC.md", "BUG_REPORT.md", "IMPLEMENTATION.md"]);
    assert_eq!(stale.phase, Phase::Implementation);
    assert_eq!(
        phases(&stale, Optional::default(), false)[0],
        Phase::BugFind
    );
}

fn verdict(text: &str) -> Verdict {
    parse(text).expect("the verdict parses")
}

fn names(decision: &Decision) -> Vec<(FollowUpKind, &str)> {
    decision
        .create
        .iter()
        .map(|f| (f.kind, f.name.as_str()))
        .collect()
}

#[test]
fn every_verdict_kind_in_both_modes() {
    let pass = verdict("PASS\n");
    let pass_with_issue = verdict("PASS\n## Remaining Issues\n- Docs: stale\n");
    let fail = verdict("FAIL\n## Findings\n- Crash: on empty input\n- odd\n");
    let review = verdict("NEEDS_REVIEW\n## Tasks for Review / Tie-Breaks\n- API shape: ?\n");
    let bare_review = verdict("NEEDS_REVIEW\n");
    let bare_fail = verdict("FAIL\n");
    let free = |_: &str| false;
    use FollowUpKind::*;
    use Mode::*;

    let d = decide("auth", &pass, &[], Manual, false, free);
    assert!(d.archive && d.create.is_empty() && d.pause.is_none());
    let d = decide("auth", &pass, &[], Autopilot, false, free);
    assert!(d.archive && d.create.is_empty() && d.pause.is_none());

    let d = decide("auth", &pass_with_issue, &[], Manual, false, free);
    assert!(d.archive && d.pause.is_none());
    assert_eq!(names(&d), [(Review, "auth-review-docs")]);
    let d = decide("auth", &pass_with_issue, &[], Autopilot, false, free);
    assert!(!d.archive && d.create.is_empty());
    assert!(d.pause.expect("pauses").contains("auth-review-docs"));

    let d = decide("auth", &fail, &[], Manual, false, free);
    assert!(!d.archive && d.pause.is_none());
    assert_eq!(
        names(&d),
        [(Fix, "auth-fix-crash"), (Fix, "auth-fix-issue-2")]
    );
    let d = decide("auth", &fail, &[], Autopilot, false, free);
    assert!(!d.archive && d.create.is_empty());
    let reason = d.pause.expect("pauses");
    assert!(
        reason.contains("FAIL") && reason.contains("a person must decide"),
        "{reason}"
    );

    let d = decide("auth", &review, &[], Manual, false, free);
    assert_eq!(names(&d), [(TieBreak, "auth-tiebreak-api-shape")]);
    assert!(!d.archive && d.pause.is_none());
    let d = decide("auth", &review, &[], Autopilot, false, free);
    assert!(d.create.is_empty() && d.pause.is_some());

    for bare in [&bare_review, &bare_fail] {
        for mode in [Manual, Autopilot] {
            let d = decide("auth", bare, &[], mode, false, free);
            assert!(!d.archive && d.create.is_empty());
            assert!(d.pause.expect("pauses").contains("a person must decide"));
        }
    }
    // Names already taken get a suffix.
    let d = decide("auth", &fail, &[], Manual, false, |n| n == "auth-fix-crash");
    assert_eq!(d.create[0].name, "auth-fix-crash-2");
}

#[test]
fn sub_task_verdicts() {
    let pass = verdict("PASS\n");
    let fail = verdict("FAIL\n## Findings\n- a: b\n");
    let tie = verdict("NEEDS_REVIEW\n## Tie-Breaks\n- c: d\n");
    let free = |_: &str| false;
    use FollowUpKind::*;
    use Mode::*;

    // Every sub-task passed: the parent's PASS archives it.
    let d = decide(
        "auth",
        &pass,
        &[("login", &pass), ("ui", &pass)],
        Manual,
        false,
        free,
    );
    assert!(d.archive && d.create.is_empty());
    // A failed sub-task fails the parent, whatever the parent's own verdict.
    let subs = [("login", &fail), ("tokens", &tie), ("ui", &pass)];
    let d = decide("auth", &pass, &subs, Manual, false, free);
    assert!(!d.archive && d.pause.is_none());
    assert_eq!(
        names(&d),
        [(Fix, "auth-fix-login"), (TieBreak, "auth-tiebreak-tokens")]
    );
    let d = decide("auth", &fail, &subs, Manual, false, free);
    assert_eq!(names(&d)[0], (Fix, "auth-fix-a"));
    assert_eq!(names(&d)[1], (Fix, "auth-fix-login"));
    let d = decide("auth", &pass, &subs, Autopilot, false, free);
    assert!(!d.archive && d.create.is_empty());
    assert!(d.pause.expect("pauses").contains("sub-task did not pass"));
    // A sub-task that needs review but lists nothing: a person decides.
    let bare = verdict("NEEDS_REVIEW\n");
    let d = decide("auth", &pass, &[("login", &bare)], Manual, false, free);
    assert!(!d.archive && d.create.is_empty());
    let reason = d.pause.expect("pauses");
    assert!(
        reason.starts_with("a sub-task's verdict is not PASS"),
        "{reason}"
    );
    // A sub-task's own verdict creates nothing: its parent's names the work.
    for mode in [Manual, Autopilot] {
        let d = decide("auth-login", &fail, &[], mode, true, free);
        assert!(!d.archive && d.create.is_empty() && d.pause.is_none());
        let d = decide("auth-login", &pass, &[], mode, true, free);
        assert!(d.archive);
    }
}
