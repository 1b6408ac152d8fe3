//! Where each stage's box goes.
//!
//! Up to [`LAYERED_MAX`] stages, a layered (Sugiyama) layout by the
//! `rust-sugiyama` crate: each stage in a layer after all of its
//! dependencies, the order within each layer chosen to cross few edges,
//! each connected group of stages laid out on its own and the groups
//! stacked. Its time grows faster than the number of stages
//! (bench/README.md has the figures), so a larger run is laid out by depth
//! instead: each stage in the column of its longest chain of dependencies,
//! in index order down the column, crossings not minimised.

use std::collections::HashMap;

use rust_sugiyama::configure::Config;

/// A box's size.
pub(crate) const WIDTH: usize = 170;
pub(crate) const HEIGHT: usize = 30;

/// Most stages laid out by the layered layout.
pub(crate) const LAYERED_MAX: usize = 2_000;

/// Space between two boxes of one layer, and between stacked groups.
const GAP_Y: usize = 16;
/// Space between two layers.
const GAP_X: usize = 40;
const MARGIN: usize = 10;

/// Where the boxes go.
#[derive(Debug)]
pub(crate) struct Layout {
    /// Each node's box's top-left corner, in the nodes' order.
    pub(crate) place: Vec<(usize, usize)>,
    /// The drawing's width and height, margins included.
    pub(crate) size: (usize, usize),
    /// Whether the layered layout placed them (else: by depth).
    pub(crate) layered: bool,
}

/// Lays out `count` nodes joined by `edges` (dependency, dependant),
/// which name nodes below `count` and are neither loops nor repeated.
pub(crate) fn lay_out(count: usize, edges: &[(usize, usize)]) -> Layout {
    let place = (count <= LAYERED_MAX)
        .then(|| layered(count, edges))
        .flatten();
    let layered = place.is_some();
    let place = place.unwrap_or_else(|| by_depth(count, edges));
    let width = place.iter().map(|(x, _)| x + WIDTH).max().unwrap_or(0) + MARGIN;
    let height = place.iter().map(|(_, y)| y + HEIGHT).max().unwrap_or(0) + MARGIN;
    Layout {
        place,
        size: (width, height),
        layered,
    }
}

/// The layered layout, left to right: the crate lays layers out top to
/// bottom, so its x is the page's y and its y the page's x. `None` if the
/// crate fails (it panics on input it does not expect; a page is still
/// drawn, by depth).
fn layered(count: usize, edges: &[(usize, usize)]) -> Option<Vec<(usize, usize)>> {
    let id = |at: usize| u32::try_from(at).ok();
    // (extent across layers, extent along them), as the crate's (x, y).
    let size = (HEIGHT as f64, (WIDTH + GAP_X - GAP_Y) as f64);
    let vertices: Vec<(u32, (f64, f64))> = (0..count)
        .map(|at| Some((id(at)?, size)))
        .collect::<Option<_>>()?;
    let edges: Vec<(u32, u32)> = edges
        .iter()
        .map(|&(from, to)| Some((id(from)?, id(to)?)))
        .collect::<Option<_>>()?;
    let config = Config {
        vertex_spacing: GAP_Y as f64,
        ..Config::default()
    };
    let groups = std::panic::catch_unwind(|| {
        rust_sugiyama::from_vertices_and_edges(&vertices, &edges, &config)
    })
    .ok()?;
    let mut place = vec![None; count];
    let mut top = MARGIN as f64;
    // Groups in the order of their first stage, so a page keeps its shape.
    let mut groups: Vec<_> = groups
        .into_iter()
        .map(|(positions, _, _)| positions)
        .filter(|positions| !positions.is_empty())
        .collect();
    groups.sort_by_key(|positions| positions.iter().map(|(at, _)| *at).min());
    for positions in groups {
        let left = positions
            .iter()
            .map(|(_, (_, y))| *y)
            .fold(f64::MAX, f64::min);
        let high = positions
            .iter()
            .map(|(_, (x, _))| *x)
            .fold(f64::MAX, f64::min);
        let mut bottom = top;
        for (at, (x, y)) in positions {
            let page = (MARGIN as f64 + y - left, top + x - high);
            bottom = bottom.max(page.1 + HEIGHT as f64);
            *place.get_mut(at)? = Some((round(page.0), round(page.1)));
        }
        top = bottom + GAP_Y as f64;
    }
    place.into_iter().collect()
}

fn round(value: f64) -> usize {
    // Coordinates are small and non-negative; `as` saturates anyway.
    value.round().max(0.0) as usize
}

/// Each node in the column of its depth (the length of its longest chain
/// of dependencies), in index order down the column.
fn by_depth(count: usize, edges: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let depth = depths(count, edges);
    let mut rows: HashMap<usize, usize> = HashMap::new();
    depth
        .iter()
        .map(|&column| {
            let row = rows.entry(column).or_default();
            let at = (
                MARGIN + column * (WIDTH + GAP_X),
                MARGIN + *row * (HEIGHT + GAP_Y),
            );
            *row += 1;
            at
        })
        .collect()
}

/// Each node's depth: 0 without dependencies, else one more than its
/// deepest dependency, in one pass over a topological order. Nodes on a
/// cycle (a plan never has one) stay at the depth reached.
pub(crate) fn depths(count: usize, edges: &[(usize, usize)]) -> Vec<usize> {
    let mut waiting = vec![0usize; count];
    let mut after: Vec<Vec<usize>> = vec![Vec::new(); count];
    for &(from, to) in edges {
        waiting[to] += 1;
        after[from].push(to);
    }
    let mut ready: Vec<usize> = (0..count).filter(|&at| waiting[at] == 0).collect();
    let mut depth = vec![0; count];
    while let Some(at) = ready.pop() {
        for &next in &after[at] {
            depth[next] = depth[next].max(depth[at] + 1);
            waiting[next] -= 1;
            if waiting[next] == 0 {
                ready.push(next);
            }
        }
    }
    depth
}
