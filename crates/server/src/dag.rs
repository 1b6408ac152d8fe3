//! A run's DAG as inline SVG, from the dependencies its recorded plan
//! holds. Where the boxes go is [`layout`]'s; the drawing is this
//! module's: a box per stage coloured by its status, its name escaped and
//! cut short (the full name in its title), a line per dependency.

mod layout;

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use serde_json::Value;

use crate::html::escape;
use layout::{HEIGHT, WIDTH};

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

/// The edges as (dependency, dependant) positions in `nodes`: a name no
/// node has, a stage depending on itself and a repeated dependency are
/// left out.
fn edges(nodes: &[Node<'_>]) -> Vec<(usize, usize)> {
    let at: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(at, node)| (node.name, at))
        .collect();
    let mut seen = HashSet::new();
    let mut edges = Vec::new();
    for (to, node) in nodes.iter().enumerate() {
        for &from in node.depends_on.iter().filter_map(|name| at.get(name)) {
            if from != to && seen.insert((from, to)) {
                edges.push((from, to));
            }
        }
    }
    edges
}

/// The drawing: a note when the run is too large for the layered layout,
/// then the SVG, a box per stage (class `node-<status>`, `data-stage`
/// naming it for the live updates) and a line per dependency.
pub(crate) fn drawing(nodes: &[Node<'_>]) -> String {
    let edges = edges(nodes);
    let laid = layout::lay_out(nodes.len(), &edges);
    let mut html = String::new();
    if !laid.layered {
        let _ = write!(
            html,
            "<p class=\"note\">{} stages: drawn by depth, crossings not minimised \
             (the layered layout takes up to {} stages).</p>",
            nodes.len(),
            layout::LAYERED_MAX
        );
    }
    let (width, height) = laid.size;
    let _ = write!(
        html,
        "<svg class=\"dag\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" role=\"img\" aria-label=\"the run's stages and their dependencies\">"
    );
    for &(from, to) in &edges {
        let (x1, y1) = laid.place[from];
        let (x2, y2) = laid.place[to];
        let _ = write!(
            html,
            "<line x1=\"{}\" y1=\"{}\" x2=\"{x2}\" y2=\"{}\"/>",
            x1 + WIDTH,
            y1 + HEIGHT / 2,
            y2 + HEIGHT / 2
        );
    }
    for (node, (x, y)) in nodes.iter().zip(&laid.place) {
        let shown: String = node.name.chars().take(SHOWN).collect();
        let ellipsis = if node.name.chars().count() > SHOWN {
            "…"
        } else {
            ""
        };
        let _ = write!(
            html,
            "<g class=\"node node-{status}\" data-stage=\"{name}\"><title>{name}: {status}</title>\
             <rect x=\"{x}\" y=\"{y}\" width=\"{WIDTH}\" height=\"{HEIGHT}\" rx=\"4\"/>\
             <text x=\"{}\" y=\"{}\">{}{ellipsis}</text></g>",
            x + 8,
            y + HEIGHT / 2 + 4,
            escape(&shown),
            status = escape(node.status),
            name = escape(node.name),
        );
    }
    html.push_str("</svg>");
    html
}

#[cfg(test)]
mod tests;
