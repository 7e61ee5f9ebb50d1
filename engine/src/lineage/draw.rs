//! The lineage graph as an SVG picture: the [`super::layout`] of its nodes, left to right; each
//! node a box with its name, kind, rows, state and lag; each edge a curve with an arrowhead and
//! its syntax; failing ones red (class `failed`). Every node is a `<g class="node" data-id=...
//! data-kind=... data-state=...>` and every edge a `<g class="edge" data-from=... data-to=...>`,
//! for scripts and tests. Names are user input: all text is escaped for XML.

use std::fmt::Write;

use super::{LineageEdge, LineageGraph, LineageNode};

pub const NODE_WIDTH_PX: f64 = 230.0;
pub const NODE_HEIGHT_PX: f64 = 86.0;
/// Between two layers' boxes (room for the edges' labels).
pub const LAYER_GAP_PX: f64 = 130.0;
/// Between two boxes of a layer.
pub const NODE_GAP_PX: f64 = 26.0;
pub const MARGIN_PX: f64 = 20.0;
/// How far below its boxes an edge that goes back (closing a cycle) bends.
pub const BACK_EDGE_DROP_PX: f64 = 60.0;
/// The characters of a name that fit a box (the whole name is in the box's tooltip).
pub const NAME_CHARS_MAX: usize = 28;
/// The characters of the other lines of a box.
pub const LINE_CHARS_MAX: usize = 36;
/// The characters of an edge's label.
pub const LABEL_CHARS_MAX: usize = 24;

const STYLE: &str = "\
svg.lineage{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;font-size:11px}\
svg.lineage .node rect{fill:#f7fafc;stroke:#4a5568;stroke-width:1.2}\
svg.lineage .node[data-kind='source'] rect{fill:#e6fffa}\
svg.lineage .node[data-kind='streaming table'] rect{fill:#ebf8ff}\
svg.lineage .node[data-kind='materialized view'] rect{fill:#faf5ff}\
svg.lineage .node[data-kind='view'] rect{fill:#fffff0;stroke-dasharray:4 3}\
svg.lineage .node.failed rect{fill:#fff5f5;stroke:#c53030;stroke-width:2.5}\
svg.lineage .node .name{font-size:13px;font-weight:600;fill:#1a202c}\
svg.lineage .node .kind{fill:#718096}\
svg.lineage .node .state{fill:#2d3748}\
svg.lineage .node .lag{fill:#4a5568}\
svg.lineage .node .error{fill:#c53030}\
svg.lineage .node.failed .state{fill:#c53030;font-weight:600}\
svg.lineage .edge path{fill:none;stroke:#718096;stroke-width:1.5}\
svg.lineage .edge.failed path{stroke:#c53030;stroke-width:2.5}\
svg.lineage .edge text{fill:#4a5568;paint-order:stroke;stroke:#fff;stroke-width:3px}\
svg.lineage .edge.failed text{fill:#c53030;font-weight:600}\
svg.lineage .arrow{fill:#718096}\
svg.lineage .arrow.failed{fill:#c53030}";

/// `text` escaped for XML text and attribute values; characters XML 1.0 does not allow (most
/// control characters) become U+FFFD.
pub fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// Where a node's box is (top left corner).
#[derive(Debug, Clone, Copy)]
struct Place {
    x: f64,
    y: f64,
}

/// The graph as an SVG document (standalone, or inlined in an HTML page).
pub fn to_svg(graph: &LineageGraph) -> String {
    let index: std::collections::BTreeMap<&str, usize> =
        graph.nodes.iter().enumerate().map(|(at, node)| (node.id.as_str(), at)).collect();
    let edges: Vec<(usize, usize)> = graph
        .edges
        .iter()
        .map(|e| match (index.get(e.from.as_str()), index.get(e.to.as_str())) {
            (Some(from), Some(to)) => (*from, *to),
            // Not drawn (a graph from build() has no such edge).
            _ => (usize::MAX, usize::MAX),
        })
        .collect();
    let layout = super::layout(graph.nodes.len(), &edges);
    let tallest = layout.order.iter().map(Vec::len).max().unwrap_or(0) as f64;
    let column_height = tallest * NODE_HEIGHT_PX + (tallest - 1.0).max(0.0) * NODE_GAP_PX;
    let places: Vec<Place> = (0..graph.nodes.len())
        .map(|node| {
            let layer = layout.layers.get(node).copied().unwrap_or(0);
            let position = layout.positions.get(node).copied().unwrap_or(0) as f64;
            let count = layout.order.get(layer).map_or(1, Vec::len) as f64;
            let height = count * NODE_HEIGHT_PX + (count - 1.0).max(0.0) * NODE_GAP_PX;
            Place {
                x: MARGIN_PX + layer as f64 * (NODE_WIDTH_PX + LAYER_GAP_PX),
                y: MARGIN_PX + (column_height - height) / 2.0 + position * (NODE_HEIGHT_PX + NODE_GAP_PX),
            }
        })
        .collect();
    let layers = layout.order.len() as f64;
    let width = 2.0 * MARGIN_PX + layers * NODE_WIDTH_PX + (layers - 1.0).max(0.0) * LAYER_GAP_PX;
    let drop = if layout.backward.iter().any(|b| *b) { BACK_EDGE_DROP_PX } else { 0.0 };
    let height = 2.0 * MARGIN_PX + column_height + drop;
    let (width, height) = if graph.nodes.is_empty() { (320.0, 60.0) } else { (width, height) };
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"lineage\" width=\"{width:.0}\" height=\"{height:.0}\" \
         viewBox=\"0 0 {width:.0} {height:.0}\" role=\"img\" aria-label=\"lineage graph\">\
         <style>{STYLE}</style><defs>{}{}</defs>",
        marker("lineage-arrow", "arrow"),
        marker("lineage-arrow-failed", "arrow failed"),
    );
    if graph.nodes.is_empty() {
        svg.push_str("<text x=\"20\" y=\"35\" class=\"empty\">no tables yet</text>");
    }
    svg.push_str("<g class=\"edges\">");
    for (at, edge) in graph.edges.iter().enumerate() {
        let (Some(&(from, to)), Some(&backward)) = (edges.get(at), layout.backward.get(at)) else { continue };
        if let (Some(from), Some(to)) = (places.get(from), places.get(to)) {
            draw_edge(&mut svg, edge, *from, *to, backward);
        }
    }
    svg.push_str("</g><g class=\"nodes\">");
    for (node, place) in graph.nodes.iter().zip(&places) {
        draw_node(&mut svg, node, *place);
    }
    svg.push_str("</g></svg>\n");
    svg
}

fn marker(id: &str, class: &str) -> String {
    format!(
        "<marker id=\"{id}\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" \
         orient=\"auto\"><path d=\"M0,0 L10,5 L0,10 z\" class=\"{class}\"/></marker>"
    )
}

fn draw_node(svg: &mut String, node: &LineageNode, place: Place) {
    let failed = if node.failed() { " failed" } else { "" };
    let mut tooltip = format!("{} ({})", node.id, node.kind);
    if let Some(error) = &node.error {
        let _ = write!(tooltip, "\n{error}");
    }
    let _ = write!(
        svg,
        "<g class=\"node{failed}\" data-id=\"{}\" data-kind=\"{}\" data-state=\"{}\" transform=\"translate({:.1},{:.1})\">\
         <title>{}</title><rect width=\"{NODE_WIDTH_PX}\" height=\"{NODE_HEIGHT_PX}\" rx=\"7\"/>",
        xml(&node.id),
        xml(&node.kind),
        xml(&node.state),
        place.x,
        place.y,
        xml(&tooltip),
    );
    let lines = [
        ("name", super::clipped(super::short_name(&node.id), NAME_CHARS_MAX)),
        ("kind", node.kind.clone()),
        ("state", super::clipped(&super::rows_and_state(node), LINE_CHARS_MAX)),
        ("lag", super::clipped(&super::lag(node), LINE_CHARS_MAX)),
        (
            "error",
            node.error
                .as_deref()
                .filter(|_| node.failed())
                .map(|e| super::clipped(e, LINE_CHARS_MAX))
                .unwrap_or_default(),
        ),
    ];
    let mut y = 20.0;
    for (class, line) in lines {
        if !line.is_empty() {
            let _ = write!(svg, "<text x=\"10\" y=\"{y:.0}\" class=\"{class}\">{}</text>", xml(&line));
        }
        y += if class == "name" { 16.0 } else { 14.0 };
    }
    svg.push_str("</g>");
}

fn draw_edge(svg: &mut String, edge: &LineageEdge, from: Place, to: Place, backward: bool) {
    let failed = edge.failed();
    let (start, c1, c2, end) = if edge.from == edge.to {
        // A loop on the box's right side.
        let (x, y) = (from.x + NODE_WIDTH_PX, from.y + NODE_HEIGHT_PX / 2.0);
        ((x, y - 12.0), (x + 50.0, y - 45.0), (x + 50.0, y + 45.0), (x, y + 12.0))
    } else if backward {
        // Below the boxes, from the bottom of one to the bottom of the other.
        let (sx, sy) = (from.x + NODE_WIDTH_PX / 2.0, from.y + NODE_HEIGHT_PX);
        let (tx, ty) = (to.x + NODE_WIDTH_PX / 2.0 + 12.0, to.y + NODE_HEIGHT_PX);
        let low = sy.max(ty) + BACK_EDGE_DROP_PX;
        ((sx, sy), (sx, low), (tx, low), (tx, ty))
    } else {
        let (sx, sy) = (from.x + NODE_WIDTH_PX, from.y + NODE_HEIGHT_PX / 2.0);
        let (tx, ty) = (to.x, to.y + NODE_HEIGHT_PX / 2.0);
        let bend = ((tx - sx) / 2.0).max(30.0);
        ((sx, sy), (sx + bend, sy), (tx - bend, ty), (tx, ty))
    };
    // The curve's middle (t = 1/2 of the cubic Bézier).
    let middle = ((start.0 + 3.0 * c1.0 + 3.0 * c2.0 + end.0) / 8.0, (start.1 + 3.0 * c1.1 + 3.0 * c2.1 + end.1) / 8.0);
    let mut tooltip = format!("{} ({}): {}", edge.flow, edge.syntax, edge.state);
    if let Some(error) = &edge.error {
        let _ = write!(tooltip, "\n{error}");
    }
    let _ = write!(
        svg,
        "<g class=\"edge{}\" data-from=\"{}\" data-to=\"{}\" data-flow=\"{}\" data-syntax=\"{}\" data-state=\"{}\">\
         <title>{}</title>\
         <path d=\"M{:.1},{:.1} C{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}\" marker-end=\"url(#{})\"/>\
         <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text></g>",
        if failed { " failed" } else { "" },
        xml(&edge.from),
        xml(&edge.to),
        xml(&edge.flow),
        xml(&edge.syntax),
        xml(&edge.state),
        xml(&tooltip),
        start.0,
        start.1,
        c1.0,
        c1.1,
        c2.0,
        c2.1,
        end.0,
        end.1,
        if failed { "lineage-arrow-failed" } else { "lineage-arrow" },
        middle.0,
        middle.1 - 4.0,
        xml(&super::clipped(&super::edge_label(edge), LABEL_CHARS_MAX)),
    );
}

#[cfg(test)]
mod tests {
    use super::super::{LineageEdge, LineageGraph, LineageNode};
    use super::*;

    fn node(id: &str, state: &str) -> LineageNode {
        let mut node = LineageNode::new(id.to_string(), "streaming table");
        node.state = state.to_string();
        node.rows = Some(1234);
        node.lag_versions = Some(2);
        node
    }

    fn edge(from: &str, to: &str, state: &str) -> LineageEdge {
        LineageEdge {
            from: from.to_string(),
            to: to.to_string(),
            flow: format!("{from}_{to}"),
            syntax: "push".to_string(),
            state: state.to_string(),
            lag_versions: None,
            error: Some("division by zero".to_string()),
        }
    }

    #[test]
    fn names_are_escaped() {
        assert_eq!(xml("a<b>&\"c'\u{1}"), "a&lt;b&gt;&amp;&quot;c&#39;\u{FFFD}");
        let evil = "public.\"<script>alert('x')</script>&";
        let graph = LineageGraph {
            nodes: vec![node(evil, "idle"), node("public.t", "failed")],
            edges: vec![edge(evil, "public.t", "failed")],
        };
        let svg = to_svg(&graph);
        assert!(!svg.contains("<script>") && !svg.contains("'x'"), "{svg}");
        assert!(svg.contains("data-id=\"public.&quot;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;\""), "{svg}");
        // Every tag the document opens, it closes (a well-formed tree).
        let mut depth = 0i64;
        for piece in svg.split('<').skip(1) {
            if piece.starts_with('/') {
                depth -= 1;
            } else if !piece.split('>').next().unwrap_or("").ends_with('/') {
                depth += 1;
            }
            assert!(depth >= 0, "{svg}");
        }
        assert_eq!(depth, 0, "{svg}");
    }

    #[test]
    fn nodes_and_edges_carry_their_ids_and_failures() {
        let graph = LineageGraph {
            nodes: vec![node("public.a", "idle"), node("public.b", "failed"), node("public.c", "idle")],
            edges: vec![
                edge("public.a", "public.b", "failed"),
                edge("public.b", "public.c", "idle"),
                edge("public.c", "public.a", "idle"),
            ],
        };
        let svg = to_svg(&graph);
        assert!(
            svg.contains("<g class=\"node\" data-id=\"public.a\" data-kind=\"streaming table\" data-state=\"idle\"")
        );
        assert!(svg.contains("<g class=\"node failed\" data-id=\"public.b\""));
        assert!(svg.contains("<g class=\"edge failed\" data-from=\"public.a\" data-to=\"public.b\""));
        assert!(svg.contains("<g class=\"edge\" data-from=\"public.c\" data-to=\"public.a\""));
        assert!(svg.contains("1,234 rows · failed") && svg.contains("lag 2 versions"));
        assert!(svg.contains("division by zero"));
        assert_eq!(svg.matches(" data-id=").count(), 3);
        assert_eq!(svg.matches(" data-from=").count(), 3);
        assert!(to_svg(&LineageGraph::default()).contains("no tables yet"));
    }
}
