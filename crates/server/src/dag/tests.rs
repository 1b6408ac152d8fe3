use super::layout::{LAYERED_MAX, Layout, depths, lay_out};
use super::*;

fn node<'a>(name: &'a str, depends_on: &[&'a str]) -> Node<'a> {
    Node {
        name,
        status: "pending",
        depends_on: depends_on.to_vec(),
    }
}

/// No two boxes overlap, every box is inside the drawing, and every edge
/// runs left to right: its dependency's box ends before its dependant's
/// starts.
fn assert_sound(laid: &Layout, edges: &[(usize, usize)]) {
    let (width, height) = laid.size;
    for (at, &(x, y)) in laid.place.iter().enumerate() {
        assert!(
            x + WIDTH <= width && y + HEIGHT <= height,
            "box {at} outside"
        );
        for (other, &(x2, y2)) in laid.place.iter().enumerate().skip(at + 1) {
            let apart = x + WIDTH <= x2 || x2 + WIDTH <= x || y + HEIGHT <= y2 || y2 + HEIGHT <= y;
            assert!(
                apart,
                "boxes {at} {:?} and {other} {:?} overlap",
                (x, y),
                (x2, y2)
            );
        }
    }
    for &(from, to) in edges {
        assert!(
            laid.place[from].0 + WIDTH < laid.place[to].0,
            "edge {from} -> {to} does not go to a later layer: {:?} {:?}",
            laid.place[from],
            laid.place[to]
        );
    }
}

/// A workflow-like plan of `count` stages: each depends on one or two of
/// the few before it (a fixed pseudo-random choice).
fn workflow(count: usize) -> Vec<(usize, usize)> {
    let mut seed: u64 = 7;
    let mut next = || {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        usize::try_from(seed >> 33).expect("31 bits")
    };
    let mut edges = Vec::new();
    for to in 1..count {
        let first = to - 1 - next() % to.min(6);
        edges.push((first, to));
        let second = to - 1 - next() % to.min(12);
        if next() % 3 == 0 && second != first {
            edges.push((second, to));
        }
    }
    edges
}

#[test]
fn a_diamond_is_laid_out_in_three_layers() {
    let edges = [(0, 1), (0, 2), (1, 3), (2, 3)];
    let laid = lay_out(4, &edges);
    assert!(laid.layered);
    assert_sound(&laid, &edges);
    let x: Vec<usize> = laid.place.iter().map(|(x, _)| *x).collect();
    assert_eq!(x[1], x[2], "the two sides share a layer: {x:?}");
    assert!(x[0] < x[1] && x[1] < x[3], "{x:?}");
}

#[test]
fn a_wide_fan_out_lays_out_in_two_layers() {
    let edges: Vec<(usize, usize)> = (1..200).map(|to| (0, to)).collect();
    let laid = lay_out(200, &edges);
    assert!(laid.layered);
    assert_sound(&laid, &edges);
    let layers: HashSet<usize> = laid.place.iter().map(|(x, _)| *x).collect();
    assert_eq!(layers.len(), 2, "{layers:?}");
}

#[test]
fn a_workflow_and_stages_on_their_own_lay_out_without_overlaps() {
    let mut edges = workflow(300);
    // Ten more stages, unconnected: groups are stacked, not drawn over
    // each other.
    edges.push((300, 301));
    let laid = lay_out(310, &edges);
    assert!(laid.layered);
    assert_sound(&laid, &edges);
}

#[test]
fn crossings_are_minimised() {
    // a→d, b→c drawn in index order would cross; laid out, they do not.
    let edges = [(0, 3), (1, 2)];
    let laid = lay_out(4, &edges);
    let above = |one: usize, other: usize| laid.place[one].1 < laid.place[other].1;
    assert_eq!(above(0, 1), above(3, 2), "{:?}", laid.place);
}

#[test]
fn a_run_too_large_for_the_layered_layout_is_drawn_by_depth_and_says_so() {
    let count = LAYERED_MAX + 1;
    let edges = workflow(count);
    let laid = lay_out(count, &edges);
    assert!(!laid.layered);
    assert_sound(&laid, &edges);
    let names: Vec<String> = (0..count).map(|at| format!("s{at}")).collect();
    let nodes: Vec<Node<'_>> = names.iter().map(|name| node(name, &[])).collect();
    assert!(drawing(&nodes).starts_with("<p class=\"note\">2001 stages: drawn by depth"));
    assert!(!drawing(&nodes[..3]).contains("class=\"note\""));
}

#[test]
fn a_stage_sits_one_column_past_its_deepest_dependency() {
    let nodes = [
        node("a", &[]),
        node("b", &["a"]),
        node("c", &["a", "b"]),
        node("d", &[]),
        node("e", &["missing", "e"]),
    ];
    assert_eq!(depths(nodes.len(), &edges(&nodes)), [0, 1, 2, 0, 0]);
}

#[test]
fn names_are_escaped_in_text_titles_and_attributes() {
    let nodes = [
        node("<script>alert(1)</script>", &[]),
        node("x\"onload=\"y", &["<script>alert(1)</script>"]),
    ];
    let svg = drawing(&nodes);
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
