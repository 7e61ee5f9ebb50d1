//! A layered layout of a directed graph, left to right: each node's layer is the longest path to
//! it from a root, with the edges that close a cycle set aside (found by a depth-first search),
//! and the nodes of a layer are ordered to cross fewer edges by barycenter passes (each node
//! placed at the mean position of its neighbours in the layers already placed).

use std::collections::VecDeque;

/// The passes of the barycenter ordering (each sweeps the layers forward, then back).
pub const BARYCENTER_PASSES: usize = 4;

/// Where each node goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Per node: its layer (0: the roots).
    pub layers: Vec<usize>,
    /// Per node: its position in its layer (0: the top).
    pub positions: Vec<usize>,
    /// Per layer: its nodes, top to bottom.
    pub order: Vec<Vec<usize>>,
    /// Per edge: whether it goes back (or stays in its layer), closing a cycle or a loop.
    pub backward: Vec<bool>,
}

/// Lays out `node_count` nodes joined by `edges` (node indexes, from and to); an edge naming a
/// node that does not exist is left out.
pub fn layout(node_count: usize, edges: &[(usize, usize)]) -> Layout {
    let usable = |&(from, to): &(usize, usize)| from < node_count && to < node_count && from != to;
    let back = back_edges(node_count, edges);
    let forward: Vec<(usize, usize)> =
        edges.iter().zip(&back).filter(|(edge, back)| usable(edge) && !**back).map(|(edge, _)| *edge).collect();
    let layers = longest_paths(node_count, &forward);
    let layer_count = layers.iter().max().map_or(0, |m| m + 1);
    let mut order: Vec<Vec<usize>> = vec![Vec::new(); layer_count];
    for (node, layer) in layers.iter().enumerate() {
        if let Some(nodes) = order.get_mut(*layer) {
            nodes.push(node);
        }
    }
    let mut positions = vec![0; node_count];
    place(&order, &mut positions);
    let mut before: Vec<Vec<usize>> = vec![Vec::new(); node_count];
    let mut after: Vec<Vec<usize>> = vec![Vec::new(); node_count];
    for &(from, to) in &forward {
        if let Some(list) = before.get_mut(to) {
            list.push(from);
        }
        if let Some(list) = after.get_mut(from) {
            list.push(to);
        }
    }
    for _ in 0..BARYCENTER_PASSES {
        for layer in 1..layer_count {
            sort_layer(&mut order, layer, &mut positions, &before);
        }
        for layer in (0..layer_count.saturating_sub(1)).rev() {
            sort_layer(&mut order, layer, &mut positions, &after);
        }
    }
    let backward = edges
        .iter()
        .map(|&(from, to)| match (layers.get(from), layers.get(to)) {
            (Some(from), Some(to)) => to <= from,
            _ => false,
        })
        .collect();
    Layout { layers, positions, order, backward }
}

/// Per edge: whether it closes a cycle in a depth-first search from each node in turn (so that
/// without them the graph has none). Iterative: a long chain does not grow the stack.
fn back_edges(node_count: usize, edges: &[(usize, usize)]) -> Vec<bool> {
    let mut out: Vec<Vec<(usize, usize)>> = vec![Vec::new(); node_count];
    for (index, &(from, to)) in edges.iter().enumerate() {
        if let (Some(list), true) = (out.get_mut(from), to < node_count) {
            list.push((index, to));
        }
    }
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    let mut marks = vec![Mark::New; node_count];
    let mut back = vec![false; edges.len()];
    for root in 0..node_count {
        if marks.get(root) != Some(&Mark::New) {
            continue;
        }
        // (node, the next of its out edges to follow)
        let mut stack = vec![(root, 0usize)];
        if let Some(mark) = marks.get_mut(root) {
            *mark = Mark::OnPath;
        }
        while let Some((node, next)) = stack.pop() {
            let Some(&(edge, to)) = out.get(node).and_then(|list| list.get(next)) else {
                if let Some(mark) = marks.get_mut(node) {
                    *mark = Mark::Done;
                }
                continue;
            };
            stack.push((node, next + 1));
            match marks.get(to) {
                Some(Mark::New) => {
                    if let Some(mark) = marks.get_mut(to) {
                        *mark = Mark::OnPath;
                    }
                    stack.push((to, 0));
                }
                Some(Mark::OnPath) => {
                    if let Some(back) = back.get_mut(edge) {
                        *back = true;
                    }
                }
                _ => {}
            }
        }
    }
    back
}

/// Each node's longest path from a root over acyclic `edges` (Kahn's order). A node left over
/// (which acyclic edges cannot leave) stays in layer 0.
fn longest_paths(node_count: usize, edges: &[(usize, usize)]) -> Vec<usize> {
    let mut incoming = vec![0usize; node_count];
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); node_count];
    for &(from, to) in edges {
        if let (Some(list), Some(count)) = (out.get_mut(from), incoming.get_mut(to)) {
            list.push(to);
            *count += 1;
        }
    }
    let mut layers = vec![0usize; node_count];
    let mut ready: VecDeque<usize> = (0..node_count).filter(|n| incoming.get(*n) == Some(&0)).collect();
    while let Some(node) = ready.pop_front() {
        let layer = layers.get(node).copied().unwrap_or(0);
        for &to in out.get(node).map(Vec::as_slice).unwrap_or_default() {
            if let Some(next) = layers.get_mut(to) {
                *next = (*next).max(layer + 1);
            }
            if let Some(count) = incoming.get_mut(to) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    ready.push_back(to);
                }
            }
        }
    }
    layers
}

fn place(order: &[Vec<usize>], positions: &mut [usize]) {
    for nodes in order {
        for (position, node) in nodes.iter().enumerate() {
            if let Some(slot) = positions.get_mut(*node) {
                *slot = position;
            }
        }
    }
}

/// Sorts `layer` by the mean position of each node's `neighbours` (in the layers before it, or
/// after it); a node without any keeps its position.
fn sort_layer(order: &mut [Vec<usize>], layer: usize, positions: &mut [usize], neighbours: &[Vec<usize>]) {
    let Some(nodes) = order.get(layer) else { return };
    let mut keyed: Vec<(f64, usize)> = nodes
        .iter()
        .map(|&node| {
            let at: Vec<usize> = neighbours
                .get(node)
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .filter_map(|other| positions.get(*other).copied())
                .collect();
            let key = if at.is_empty() {
                positions.get(node).copied().unwrap_or(0) as f64
            } else {
                at.iter().sum::<usize>() as f64 / at.len() as f64
            };
            (key, node)
        })
        .collect();
    keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
    let sorted: Vec<usize> = keyed.into_iter().map(|(_, node)| node).collect();
    for (position, node) in sorted.iter().enumerate() {
        if let Some(slot) = positions.get_mut(*node) {
            *slot = position;
        }
    }
    if let Some(nodes) = order.get_mut(layer) {
        *nodes = sorted;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_are_longest_paths_from_the_roots() {
        // 0 -> 1 -> 2, 0 -> 2, 3 -> 2, 4 alone
        let layout = layout(5, &[(0, 1), (1, 2), (0, 2), (3, 2)]);
        assert_eq!(layout.layers, vec![0, 1, 2, 0, 0]);
        assert_eq!(layout.backward, vec![false; 4]);
        assert_eq!(layout.order.len(), 3);
        for (layer, nodes) in layout.order.iter().enumerate() {
            for (position, node) in nodes.iter().enumerate() {
                assert_eq!((layout.layers[*node], layout.positions[*node]), (layer, position));
            }
        }
    }

    #[test]
    fn a_cycle_is_laid_out_with_its_closing_edge_backward() {
        // 0 -> 1 -> 2 -> 0, a self loop on 1, and an edge to a node that does not exist.
        let layout = layout(3, &[(0, 1), (1, 2), (2, 0), (1, 1), (2, 9)]);
        assert_eq!(layout.layers, vec![0, 1, 2]);
        assert_eq!(layout.backward, vec![false, false, true, true, false]);
        // Two cycles through one node, and a long chain (the search is not recursive).
        let mut edges: Vec<(usize, usize)> = (0..20_000).map(|n| (n, n + 1)).collect();
        edges.extend([(20_000, 0), (10_000, 5)]);
        let long = super::layout(20_001, &edges);
        assert_eq!(long.layers[20_000], 20_000);
        assert_eq!(long.backward.iter().filter(|b| **b).count(), 2);
    }

    #[test]
    fn barycenters_uncross_edges() {
        // Roots 0 and 1; 0 feeds 3, 1 feeds 2: in index order the two edges cross.
        let layout = layout(4, &[(0, 3), (1, 2)]);
        assert_eq!(layout.order, vec![vec![0, 1], vec![3, 2]]);
        assert_eq!(layout.positions, vec![0, 1, 1, 0]);
    }

    #[test]
    fn an_empty_graph_has_no_layers() {
        let layout = layout(0, &[]);
        assert!(layout.order.is_empty() && layout.layers.is_empty());
    }
}
