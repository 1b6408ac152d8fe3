//! The task descriptions of validation units. baton renders them: the
//! validated stage's own description is the producer's task, not the
//! validator's, so it is quoted only where the strategy judges the work
//! against its goal.

use std::fmt::Write as _;

use baton_workflow::schema::{Strategy, Validation};

use super::findings::Finding;
use super::units::Target;

/// What every validation prompt needs to know about the validated output.
pub(crate) struct Subject<'a> {
    /// The validated stage (whose findings these are).
    pub(crate) stage: &'a str,
    /// The stages whose outputs are judged.
    pub(crate) producers: Vec<&'a str>,
    /// Their files, workspace-relative.
    pub(crate) files: &'a [String],
    /// The producing stage's description (its task).
    pub(crate) task: &'a str,
}

/// A validator's task: judge `target` (or the whole output) by the
/// strategy and write findings to `output`.
pub(crate) fn validator(
    validation: &Validation,
    subject: &Subject<'_>,
    target: Option<&Target>,
    output: &str,
) -> String {
    let mut text = String::new();
    let judged = judged(subject);
    let _ = writeln!(
        text,
        "Validate {judged} for the `{}` stage (strategy: {}). Read the files and run commands as you need, change nothing, and write your findings to {{workspace}}/{output}.\n",
        subject.stage, validation.strategy
    );
    let _ = writeln!(text, "## Strategy\n\n{}\n", strategy(validation.strategy));
    if validation.strategy == Strategy::Deliverable {
        let _ = writeln!(
            text,
            "## The goal\n\nThe producing stage's task was:\n\n{}\n",
            quote(subject.task)
        );
    }
    criteria(&mut text, validation);
    match target {
        Some(target) => unit(&mut text, target),
        None => everything(&mut text, subject),
    }
    findings_format(&mut text, output);
    text
}

/// A challenger's task: find every claim of `target` that might be wrong.
pub(crate) fn challenger(
    validation: &Validation,
    subject: &Subject<'_>,
    target: &Target,
    output: &str,
) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "Challenge {} for the `{}` stage (adversarial validation, wave 1 of 2). Assume the unit below is wrong somewhere: find every claim in it that might be false, unsupported or inconsistent. Change nothing; write your challenges to {{workspace}}/{output}.\n",
        judged(subject),
        subject.stage
    );
    criteria(&mut text, validation);
    unit(&mut text, target);
    let _ = writeln!(
        text,
        "## Challenges format\n\nWrite a JSON array (and nothing else) to {{workspace}}/{output}, one object per challenge:\n\n```json\n[\n  {{\"id\": \"C1\", \"claim\": \"what the unit says\", \"challenge\": \"why it might be wrong\", \"source\": \"file, line or command to check it with\"}}\n]\n```\n\nWrite `[]` if nothing in the unit deserves a challenge. Evidence gatherers will rule on each challenge."
    );
    text
}

/// An evidence gatherer's task: rule on each challenge with evidence.
pub(crate) fn evidence(
    validation: &Validation,
    subject: &Subject<'_>,
    challenges_file: &str,
    challenges: &str,
    output: &str,
) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "Gather evidence on the challenges raised against {} for the `{}` stage (adversarial validation, wave 2 of 2). For each challenge, check the claim against the workspace's files and the output of commands, then rule: FAIL if the challenge holds, PASS if the claim is right, WARN if the evidence is inconclusive. Change nothing; write your findings to {{workspace}}/{output}.\n",
        judged(subject),
        subject.stage
    );
    criteria(&mut text, validation);
    let _ = writeln!(
        text,
        "## Challenges\n\nFrom {{workspace}}/{challenges_file}:\n\n```json\n{}\n```\n",
        challenges.trim_end()
    );
    everything(&mut text, subject);
    findings_format(&mut text, output);
    text
}

/// What found the findings a correction fixes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Round {
    /// A validation cycle (its number).
    Validation(i64),
    /// The stage's `validates_output` checks.
    Checks,
}

/// A corrector's task: fix exactly the critical findings of one cycle (or
/// the failed output checks).
pub(crate) fn correction(
    subject: &Subject<'_>,
    round: Round,
    critical: &[Finding],
    output: &str,
) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "Correct {} for the `{}` stage: {} found {} below. {FIX_ONLY}\n",
        judged(subject),
        subject.stage,
        round.origin(),
        count(critical),
    );
    let _ = writeln!(
        text,
        "## The producing stage's task\n\n{}\n",
        quote(subject.task)
    );
    to_fix(&mut text, subject, round, critical, output);
    text
}

/// A corrector's task in the session that did the work: only what is new
/// since, the findings and where to log the fixes; the task and the inputs
/// are in the session already.
pub(crate) fn continued_correction(
    subject: &Subject<'_>,
    round: Round,
    critical: &[Finding],
    output: &str,
) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "Your work in this session was checked: {} found {} in {}, below. {FIX_ONLY}\n",
        round.origin(),
        count(critical),
        judged(subject),
    );
    to_fix(&mut text, subject, round, critical, output);
    text
}

/// What both correction prompts ask.
const FIX_ONLY: &str = "Fix only these findings, with the smallest change that makes each one true; do not rewrite anything else, and keep every file's format. Then log what you changed.";

impl Round {
    /// What found the findings, in words.
    fn origin(self) -> String {
        match self {
            Round::Validation(cycle) => format!("validation cycle {cycle}"),
            Round::Checks => "its output checks (`validates_output`)".to_owned(),
        }
    }

    /// What baton does once the corrections are logged.
    fn then(self) -> &'static str {
        match self {
            Round::Validation(_) => "validates again",
            Round::Checks => "runs the checks again",
        }
    }
}

/// `1 critical finding`, `3 critical findings`.
fn count(critical: &[Finding]) -> String {
    let plural = if critical.len() == 1 { "" } else { "s" };
    format!("{} critical finding{plural}", critical.len())
}

/// The files to correct, the findings, and the corrections log.
fn to_fix(
    text: &mut String,
    subject: &Subject<'_>,
    round: Round,
    critical: &[Finding],
    output: &str,
) {
    let _ = writeln!(text, "## Files to correct\n");
    listed_files(text, subject);
    let _ = writeln!(text, "## Findings to fix\n");
    for finding in critical {
        let _ = writeln!(
            text,
            "```json\n{}\n```\n",
            serde_json::to_string_pretty(finding).expect("plain data")
        );
    }
    let _ = writeln!(
        text,
        "## Corrections log\n\nWrite a JSON array (and nothing else) to {{workspace}}/{output}, one object per finding you fixed:\n\n```json\n[\n  {{\"finding_id\": \"F1\", \"change\": \"what you changed, in which file\"}}\n]\n```\n\nbaton adds these entries to {{workspace}}/validation/corrections-applied.json and then {}.",
        round.then()
    );
}

/// Which output is judged, in words.
fn judged(subject: &Subject<'_>) -> String {
    let names: Vec<String> = subject
        .producers
        .iter()
        .map(|name| format!("`{name}`"))
        .collect();
    format!(
        "the output of {}",
        match names.len() {
            0 => "the stage".to_owned(),
            1 => names[0].clone(),
            _ => names.join(", "),
        }
    )
}

fn strategy(strategy: Strategy) -> &'static str {
    match strategy {
        Strategy::Unit => {
            "unit: you judge one unit of the output (one list item or one file); other validators judge the other units in parallel, so judge only yours, on its own merits and against the sources it cites."
        }
        Strategy::CrossUnit => {
            "cross_unit: you judge the output as a whole. Check that its units agree with each other: shared numbers, names, dates, identifiers and references are the same everywhere, nothing contradicts anything else, and nothing is missing or repeated."
        }
        Strategy::Deliverable => {
            "deliverable: you judge whether the output achieves its goal (below). The criteria are goals: a criterion the deliverable does not meet is a FAIL even if everything in it is correct."
        }
        Strategy::FactCheck => {
            "fact_check: you check every factual claim of the output (numbers, names, dates, identifiers, quotations) against the workspace's source data and the output of commands. Each claim checked is one finding; a claim you cannot trace to a source is a FAIL."
        }
        Strategy::Adversarial => {
            "adversarial: challengers raise doubts and evidence gatherers rule on them."
        }
    }
}

fn criteria(text: &mut String, validation: &Validation) {
    let _ = writeln!(text, "## Criteria\n");
    if validation.criteria.is_empty() {
        let _ = writeln!(
            text,
            "- The output is correct, complete and consistent with its sources."
        );
    }
    for criterion in &validation.criteria {
        let _ = writeln!(text, "- {criterion}");
    }
    let _ = writeln!(text);
    if validation.domain_rules.is_empty() {
        return;
    }
    let _ = writeln!(
        text,
        "## Domain rules\n\nA broken rule is a FAIL finding with the rule's id in `source`, its severity and its category.\n"
    );
    for rule in &validation.domain_rules {
        let _ = write!(
            text,
            "- {} [{}, {}]: {}",
            rule.id, rule.severity, rule.category, rule.description
        );
        if let Some(command) = &rule.source_cmd {
            let _ = write!(text, " Verify with: `{command}`");
        }
        let _ = writeln!(text);
    }
    let _ = writeln!(text);
}

fn unit(text: &mut String, target: &Target) {
    let _ = writeln!(text, "## The unit to judge\n");
    match (target.item, &target.value) {
        (Some(position), Some(value)) => {
            let _ = writeln!(
                text,
                "Item {position} of the list in {{workspace}}/{} (written by `{}`):\n\n```json\n{}\n```\n",
                target.file,
                target.stage,
                serde_json::to_string_pretty(value).expect("plain data")
            );
        }
        (Some(position), None) => {
            let _ = writeln!(
                text,
                "Item {position} (counting from 1) of the list in {{workspace}}/{} (written by `{}`); it is too large to show here, so read it from the file.\n",
                target.file, target.stage
            );
        }
        (None, _) => {
            let _ = writeln!(
                text,
                "The file {{workspace}}/{} (written by `{}`).\n",
                target.file, target.stage
            );
        }
    }
}

fn everything(text: &mut String, subject: &Subject<'_>) {
    let _ = writeln!(text, "## The output\n");
    listed_files(text, subject);
}

/// The subject's files, one `- {workspace}/file` line each.
fn listed_files(text: &mut String, subject: &Subject<'_>) {
    if subject.files.is_empty() {
        let _ = writeln!(text, "(no files were declared or written)");
    }
    for file in subject.files {
        let _ = writeln!(text, "- {{workspace}}/{file}");
    }
    let _ = writeln!(text);
}

fn findings_format(text: &mut String, output: &str) {
    let _ = writeln!(
        text,
        "## Findings format\n\nWrite a JSON array (and nothing else) to {{workspace}}/{output}, one object per check you made:\n\n```json\n[\n  {{\"id\": \"F1\", \"status\": \"FAIL\", \"claim\": \"what the output says\", \"expected\": \"what it should say\", \"actual\": \"what the source says\", \"severity\": \"critical\", \"category\": \"accuracy\", \"source\": \"file, line or command\", \"fix\": \"how to fix it\"}}\n]\n```\n\n- `status`: PASS (the check holds), FAIL (it does not) or WARN (doubtful).\n- `severity`: critical (wrong or missing in a way that must be fixed before the output is used: baton runs a correction for every critical FAIL), minor or info.\n- `category`: accuracy, consistency, completeness, style, cross_reference, or a domain rule's category.\n\nWrite `[]` only if there was nothing to check."
    );
}

/// Quotes text as a markdown block quote, so that it reads as material
/// rather than as instructions to this agent.
fn quote(text: &str) -> String {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return "> (no description)".to_owned();
    }
    trimmed
        .lines()
        .map(|line| {
            if line.is_empty() {
                ">".to_owned()
            } else {
                format!("> {line}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}
