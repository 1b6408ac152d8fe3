//! A run's DAG as inline SVG, from the dependencies its recorded plan
//! holds.
//!
//! A stand-in layout for now: each stage in the column of its depth (the
//! length of its longest chain of dependencies), in index order down the
//! column, with straight lines for edges. Crossings are not minimised.

use std::collections::HashMap;

use serde_json::Value;

use crate::html::escape;

const WIDTH: usize = 170;
const HEIGHT: usize = 30;
const COLUMN: usize = 210;
const ROW: usize = 46;
const MARGIN: usize = 10;
/// Characters of a name shown in a box; the full name is in its title.
const SHOWN: usize = 22;

/// One stage to draw: its name, its status, and the names it depends on.
pub(crate) struct Node<'a> {
    pub(crate) name: &'a str,
    pub(crate) status: &'a str,
    pub(crate) depends_on: Vec<&'a str>,
}

/// The names each stage depends on, from a recorded plan's
/// `stage_details`.
pub(crate) fn dependencies(plan: &Value) -> HashMap<&str, Vec<&str>> {
    plan.get("stage_details")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(name, detail)| {
            let depends_on = detail
                .get("depends_on")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            (name.as_str(), depends_on)
        })
        .collect()
}

/// Each node's depth: 0 without dependencies, else one more than its
/// deepest dependency. A dependency on an unknown name is ignored; a cycle
/// (a plan never has one) stops at the number of nodes.
fn depths(nodes: &[Node<'_>]) -> Vec<usize> {
    let index: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(at, node)| (node.name, at))
        .collect();
    let mut depth = vec![0; nodes.len()];
    for _ in 0..nodes.len() {
        let mut changed = false;
        for (at, node) in nodes.iter().enumerate() {
            let deepest = node
                .depends_on
                .iter()
                .filter_map(|name| index.get(name))
                .map(|&dependency| depth[dependency] + 1)
                .max()
                .unwrap_or(0);
            if deepest > depth[at] {
                depth[at] = deepest;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    depth
}

/// The SVG: a box per stage (class `node-<status>`, `data-stage` naming
/// it for the live updates), a line per dependency.
pub(crate) fn svg(nodes: &[Node<'_>]) -> String {
    let depth = depths(nodes);
    let mut rows_used: HashMap<usize, usize> = HashMap::new();
    let mut place = Vec::with_capacity(nodes.len());
    for &column in &depth {
        let row = rows_used.entry(column).or_default();
        place.push((MARGIN + column * COLUMN, MARGIN + *row * ROW));
        *row += 1;
    }
    let columns = depth.iter().max().map_or(0, |deepest| deepest + 1);
    let rows = rows_used.values().max().copied().unwrap_or(0);
    let width = 2 * MARGIN + columns.saturating_sub(1) * COLUMN + WIDTH;
    let height = 2 * MARGIN + rows.saturating_sub(1) * ROW + HEIGHT;
    let at: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(at, node)| (node.name, at))
        .collect();
    let mut svg = format!(
        "<svg class=\"dag\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" role=\"img\" aria-label=\"the run's stages and their dependencies\">"
    );
    for (to, node) in nodes.iter().enumerate() {
        for from in node.depends_on.iter().filter_map(|name| at.get(name)) {
            let (x1, y1) = place[*from];
            let (x2, y2) = place[to];
            svg.push_str(&format!(
                "<line x1=\"{}\" y1=\"{}\" x2=\"{x2}\" y2=\"{}\"/>",
                x1 + WIDTH,
                y1 + HEIGHT / 2,
                y2 + HEIGHT / 2
            ));
        }
    }
    for (node, (x, y)) in nodes.iter().zip(&place) {
        let shown: String = node.name.chars().take(SHOWN).collect();
        let ellipsis = if node.name.chars().count() > SHOWN {
            "…"
        } else {
            ""
        };
        svg.push_str(&format!(
            "<g class=\"node node-{status}\" data-stage=\"{name}\"><title>{name}: {status}</title>\
             <rect x=\"{x}\" y=\"{y}\" width=\"{WIDTH}\" height=\"{HEIGHT}\" rx=\"4\"/>\
             <text x=\"{}\" y=\"{}\">{}{ellipsis}</text></g>",
            x + 8,
            y + HEIGHT / 2 + 4,
            escape(&shown),
            status = escape(node.status),
            name = escape(node.name),
        ));
    }
    svg.push_str("</svg>");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node<'a>(name: &'a str, depends_on: &[&'a str]) -> Node<'a> {
        Node {
            name,
            status: "pending",
            depends_on: depends_on.to_vec(),
        }
    }

    #[test]
    fn a_stage_sits_one_column_past_its_deepest_dependency() {
        let nodes = [
            node("a", &[]),
            node("b", &["a"]),
            node("c", &["a", "b"]),
            node("d", &[]),
            node("e", &["missing"]),
        ];
        assert_eq!(depths(&nodes), [0, 1, 2, 0, 0]);
    }

    #[test]
    fn names_are_escaped_in_text_titles_and_attributes() {
        let nodes = [
            node("<script>alert(1)</script>", &[]),
            node("x\"onload=\"y", &["<script>alert(1)</script>"]),
        ];
        let svg = svg(&nodes);
        assert!(!svg.contains("<script>"), "{svg}");
        assert!(!svg.contains("\"onload"), "{svg}");
        assert!(svg.contains("&lt;script&gt;"), "{svg}");
        assert_eq!(svg.matches("<line ").count(), 1, "{svg}");
    }

    #[test]
    fn dependencies_are_read_from_the_plan_s_stage_details() {
        let plan = serde_json::json!({"stage_details": {
            "a": {"depends_on": []},
            "b": {"depends_on": ["a"]},
        }});
        let found = dependencies(&plan);
        assert_eq!(found["b"], ["a"]);
        assert!(found["a"].is_empty());
        assert!(dependencies(&Value::Null).is_empty());
    }
}
