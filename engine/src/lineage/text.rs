//! The lineage graph as text for other tools: Graphviz DOT and Mermaid flowcharts.
//!
//! Names are user input, and neither language escapes everything in every place (a DOT quoted
//! string cannot end in a backslash; Mermaid's ids are plain words), so nodes get generated ids
//! (`n0`, `n1`, ...) and names appear only in labels: DOT's HTML-like labels (XML-escaped) and
//! Mermaid's quoted labels (with its `#code;` entities).

use std::fmt::Write;

use super::draw::xml;
use super::{LineageGraph, LineageNode};

const FAILED_COLOR: &str = "#c53030";

/// The lines a node's label shows.
fn label_lines(node: &LineageNode) -> Vec<String> {
    let mut lines = vec![node.id.clone(), node.kind.clone(), super::rows_and_state(node)];
    let lag = super::lag(node);
    if !lag.is_empty() {
        lines.push(lag);
    }
    if let (true, Some(error)) = (node.failed(), &node.error) {
        lines.push(super::clipped(error, 60));
    }
    lines
}

/// Each edge's (from, to) node ids; edges naming a node that is not in the graph are left out.
fn edge_ids(graph: &LineageGraph) -> Vec<(usize, usize, &super::LineageEdge)> {
    let index: std::collections::BTreeMap<&str, usize> =
        graph.nodes.iter().enumerate().map(|(at, node)| (node.id.as_str(), at)).collect();
    graph.edges.iter().filter_map(|e| Some((*index.get(e.from.as_str())?, *index.get(e.to.as_str())?, e))).collect()
}

/// The graph in Graphviz's DOT language (`dot -Tsvg` draws it).
pub fn to_dot(graph: &LineageGraph) -> String {
    let mut dot = String::from(
        "digraph lineage {\n  rankdir=LR;\n  node [shape=box, style=\"rounded,filled\", fillcolor=\"#f7fafc\", \
         fontname=\"Helvetica\", fontsize=10];\n  edge [fontname=\"Helvetica\", fontsize=9, color=\"#718096\"];\n",
    );
    for (at, node) in graph.nodes.iter().enumerate() {
        let mut lines = label_lines(node).into_iter().map(|line| xml(&line));
        let name = lines.next().unwrap_or_default();
        let rest: Vec<String> = lines.collect();
        let fill = match node.kind.as_str() {
            "source" => "#e6fffa",
            "streaming table" => "#ebf8ff",
            "materialized view" => "#faf5ff",
            "view" => "#fffff0",
            _ => "#f7fafc",
        };
        let _ = write!(dot, "  n{at} [label=<<B>{name}</B><BR/>{}>, fillcolor=\"{fill}\"", rest.join("<BR/>"));
        if node.failed() {
            let _ = write!(dot, ", color=\"{FAILED_COLOR}\", penwidth=2, class=\"failed\"");
        }
        dot.push_str("];\n");
    }
    for (from, to, edge) in edge_ids(graph) {
        let _ = write!(dot, "  n{from} -> n{to} [label=<{}>", xml(&super::edge_label(edge)));
        if edge.failed() {
            let _ =
                write!(dot, ", color=\"{FAILED_COLOR}\", fontcolor=\"{FAILED_COLOR}\", penwidth=2, class=\"failed\"");
        }
        dot.push_str("];\n");
    }
    dot.push_str("}\n");
    dot
}

/// `text` for a quoted Mermaid label: the characters Mermaid reads as syntax or HTML become
/// `#code;` entities, line breaks spaces.
fn mermaid_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' | '#' | '&' | '<' | '>' | '`' | '|' | '[' | ']' | '{' | '}' | '(' | ')' | ';' => {
                let _ = write!(out, "#{};", c as u32);
            }
            '\n' | '\r' | '\t' => out.push(' '),
            c if (c as u32) < 0x20 => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// The graph as a Mermaid flowchart (GitHub and many wikis draw it).
pub fn to_mermaid(graph: &LineageGraph) -> String {
    let mut chart = String::from("flowchart LR\n");
    for (at, node) in graph.nodes.iter().enumerate() {
        let label = label_lines(node).iter().map(|line| mermaid_text(line)).collect::<Vec<_>>().join("<br/>");
        let (open, close) = match node.kind.as_str() {
            "source" => ("[(", ")]"),
            "view" => ("([", "])"),
            "materialized view" => ("[[", "]]"),
            _ => ("[", "]"),
        };
        let _ = writeln!(chart, "  n{at}{open}\"{label}\"{close}");
    }
    let mut failed_links = Vec::new();
    for (link, (from, to, edge)) in edge_ids(graph).into_iter().enumerate() {
        let _ = writeln!(chart, "  n{from} -->|\"{}\"| n{to}", mermaid_text(&super::edge_label(edge)));
        if edge.failed() {
            failed_links.push(link.to_string());
        }
    }
    let failed: Vec<String> =
        graph.nodes.iter().enumerate().filter(|(_, n)| n.failed()).map(|(at, _)| format!("n{at}")).collect();
    if !failed.is_empty() {
        let _ = writeln!(chart, "  classDef failed stroke:{FAILED_COLOR},stroke-width:2px,color:{FAILED_COLOR}");
        let _ = writeln!(chart, "  class {} failed", failed.join(","));
    }
    if !failed_links.is_empty() {
        let _ = writeln!(chart, "  linkStyle {} stroke:{FAILED_COLOR},stroke-width:2px", failed_links.join(","));
    }
    chart
}

#[cfg(test)]
mod tests {
    use super::super::{LineageEdge, LineageGraph, LineageNode};
    use super::*;

    fn graph() -> LineageGraph {
        let mut bad = LineageNode::new("public.\"we<ird>\\\" [x] | #1;".to_string(), "streaming table");
        bad.state = "failed".to_string();
        bad.error = Some("division\nby zero".to_string());
        LineageGraph {
            nodes: vec![LineageNode::new("shop".to_string(), "source"), bad],
            edges: vec![LineageEdge {
                from: "shop".to_string(),
                to: "public.\"we<ird>\\\" [x] | #1;".to_string(),
                flow: "f".to_string(),
                syntax: "source".to_string(),
                state: "failed".to_string(),
                lag_versions: Some(3),
                error: None,
            }],
        }
    }

    #[test]
    fn dot_quotes_nothing_it_did_not_escape() {
        let dot = to_dot(&graph());
        assert!(dot.starts_with("digraph lineage {\n") && dot.ends_with("}\n"), "{dot}");
        assert!(dot.contains("<B>public.&quot;we&lt;ird&gt;\\&quot; [x] | #1;</B>"), "{dot}");
        assert!(dot.contains("n0 -> n1 [label=<source · lag 3>, color=\"#c53030\""), "{dot}");
        assert!(dot.contains("class=\"failed\""), "{dot}");
        // The names appear only inside HTML-like labels: every line's quotes pair up.
        for line in dot.lines() {
            let outside: String = line.split('<').next().unwrap_or("").to_string();
            assert_eq!(outside.matches('"').count() % 2, 0, "{line}");
        }
    }

    #[test]
    fn mermaid_labels_use_entities() {
        let chart = to_mermaid(&graph());
        assert!(chart.starts_with("flowchart LR\n"), "{chart}");
        assert!(chart.contains("  n0[(\"shop<br/>source<br/>idle\")]\n"), "{chart}");
        assert!(
            chart.contains("n1[\"public.#34;we#60;ird#62;\\#34; #91;x#93; #124; #35;1#59;<br/>streaming table<br/>failed<br/>division by zero\"]"),
            "{chart}"
        );
        assert!(chart.contains("  n0 -->|\"source · lag 3\"| n1\n"), "{chart}");
        assert!(chart.contains("  class n1 failed\n") && chart.contains("  linkStyle 0 stroke:#c53030"), "{chart}");
    }
}
