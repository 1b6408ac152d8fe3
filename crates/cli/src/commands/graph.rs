//! Drawing a plan as a Mermaid flowchart or a Graphviz digraph.
//!
//! Shapes say what a stage is: a hexagon for a human gate, a double border
//! (`[[…]]` in Mermaid, `peripheries=2` in DOT) for a fan-out, and a dashed
//! "revise" edge from a validating stage back to what it validates.

use baton_workflow::Plan;
use baton_workflow::plan::PlanStage;

fn label(stage: &PlanStage) -> String {
    let spec = &stage.spec;
    let mut label = format!("{:03} {}", stage.index, stage.name());
    if let Some(fan_out) = &spec.fan_out {
        label.push_str(&format!(" [each {}]", fan_out.key));
    }
    if spec.human_gate {
        label.push_str(" (gate)");
    }
    label
}

/// Stages whose validation sends corrections back to their inputs.
fn revise_edges(plan: &Plan) -> Vec<(usize, usize)> {
    let mut edges = Vec::new();
    for stage in &plan.stages {
        if stage.spec.validation.is_some() {
            let targets = if stage.reads_from.is_empty() {
                &stage.depends_on
            } else {
                &stage.reads_from
            };
            for &target in targets {
                edges.push((stage.index, target));
            }
        }
    }
    edges
}

fn mermaid_text(text: &str) -> String {
    text.replace('"', "#quot;")
}

/// A Mermaid `flowchart`.
pub(crate) fn mermaid(plan: &Plan) -> String {
    let mut out = String::from("flowchart TD\n");
    for stage in &plan.stages {
        let text = mermaid_text(&label(stage));
        let node = if stage.spec.human_gate {
            format!("  s{}{{{{\"{text}\"}}}}\n", stage.index)
        } else if stage.spec.fan_out.is_some() {
            format!("  s{}[[\"{text}\"]]\n", stage.index)
        } else {
            format!("  s{}[\"{text}\"]\n", stage.index)
        };
        out.push_str(&node);
    }
    for stage in &plan.stages {
        for &dependency in &stage.depends_on {
            out.push_str(&format!("  s{dependency} --> s{}\n", stage.index));
        }
    }
    for (from, to) in revise_edges(plan) {
        out.push_str(&format!("  s{from} -. revise .-> s{to}\n"));
    }
    out
}

fn dot_text(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A Graphviz `digraph`.
pub(crate) fn dot(plan: &Plan) -> String {
    let mut out = format!(
        "digraph \"{}\" {{\n  rankdir=TB;\n  node [shape=box, style=rounded];\n",
        dot_text(&plan.name)
    );
    for stage in &plan.stages {
        let mut attributes = format!("label=\"{}\"", dot_text(&label(stage)));
        if stage.spec.human_gate {
            attributes.push_str(", shape=hexagon");
        }
        if stage.spec.fan_out.is_some() {
            attributes.push_str(", peripheries=2");
        }
        out.push_str(&format!("  s{} [{attributes}];\n", stage.index));
    }
    for stage in &plan.stages {
        for &dependency in &stage.depends_on {
            out.push_str(&format!("  s{dependency} -> s{};\n", stage.index));
        }
    }
    for (from, to) in revise_edges(plan) {
        out.push_str(&format!(
            "  s{from} -> s{to} [style=dashed, label=\"revise\", constraint=false];\n"
        ));
    }
    out.push_str("}\n");
    out
}
