//! `sluice sql`: one-shot commands, files, CSV output, and errors; `sluice lineage`.

use std::process::Command;

fn sluice(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sluice")).args(args).output().unwrap()
}

#[test]
fn runs_statements_and_prints_tables() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let out = sluice(&[
        "sql",
        "--data",
        data,
        "-c",
        "CREATE TABLE t (id int, name text); INSERT INTO t VALUES (1, 'a'), (22, NULL); SELECT * FROM t ORDER BY id",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("CREATE TABLE\nINSERT 0 2\n id | name \n----+------\n  1 | a\n 22 |\n(2 rows)\n"), "{text}");
    // The data stays in the folder for the next run.
    let out = sluice(&[
        "sql",
        "--data",
        data,
        "--csv",
        "-c",
        "SELECT count(*) AS n FROM t; SELECT id, name FROM t ORDER BY id",
    ]);
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "id,name\n1,a\n22,\n");
}

#[test]
fn runs_files_and_fails_on_errors() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("w");
    let script = dir.path().join("script.sql");
    std::fs::write(
        &script,
        "CREATE TABLE f (a int);\nINSERT INTO f VALUES (1);\nSELECT * FROM missing;\nINSERT INTO f VALUES (2);\n",
    )
    .unwrap();
    let out = sluice(&["sql", "--data", data.to_str().unwrap(), "-f", script.to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("ERROR") && stderr.contains("relation \"missing\" does not exist"), "{stderr}");
    // Statements after the failing one did not run.
    let out = sluice(&["sql", "--data", data.to_str().unwrap(), "--csv", "-c", "SELECT count(*) AS n FROM f"]);
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "n\n1\n");
    let out = sluice(&["sql", "--data", data.to_str().unwrap(), "-c", "SELEC 1"]);
    assert!(!out.status.success());
    assert!(String::from_utf8(out.stderr).unwrap().contains("syntax error at line 1"));
}

/// The venv's Python (scripts/test makes it), to check documents with a real parser.
fn python() -> String {
    std::env::var("SLUICE_PYTHON").unwrap_or_else(|_| format!("{}/../.venv/bin/python", env!("CARGO_MANIFEST_DIR")))
}

/// `sluice lineage` draws a pipeline (a bronze streaming table with push routes, a pull flow, a
/// materialized view, a view, a table with a hostile name) as SVG, DOT and Mermaid; the SVG parses
/// as XML with one `g.node` per relation and one `g.edge` per flow.
#[test]
fn lineage_draws_the_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("w");
    let data = data.to_str().unwrap();
    let out = sluice(&[
        "sql",
        "--data",
        data,
        "-c",
        "CREATE STREAMING TABLE bronze (topic text, payload text) \
           PUSH INTO orders AS SELECT payload FROM bronze WHERE topic = 'orders' \
           PUSH INTO clicks AS SELECT payload FROM bronze WHERE topic = 'clicks'; \
         CREATE STREAMING TABLE gold AS SELECT payload FROM STREAM(orders); \
         CREATE MATERIALIZED VIEW counts AS SELECT count(*) AS n FROM clicks; \
         CREATE VIEW recent AS SELECT * FROM orders; \
         CREATE TABLE \"we<i>rd&\" (a int); \
         INSERT INTO bronze VALUES ('orders', 'a'), ('orders', 'b'), ('clicks', 'c')",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = sluice(&["lineage", "--data", data]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let svg = String::from_utf8(out.stdout).unwrap();
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""), "{svg}");
    for (id, kind) in [
        ("public.bronze", "streaming table"),
        ("public.orders", "streaming table"),
        ("public.gold", "streaming table"),
        ("public.counts", "materialized view"),
        ("public.recent", "view"),
        ("public.we&lt;i&gt;rd&amp;", "table"),
    ] {
        assert!(svg.contains(&format!("data-id=\"{id}\" data-kind=\"{kind}\"")), "{id} {kind}: {svg}");
    }
    for (from, to, syntax) in [
        ("public.bronze", "public.orders", "push"),
        ("public.bronze", "public.clicks", "push"),
        ("public.orders", "public.gold", "pull"),
        ("public.clicks", "public.counts", "materialized view"),
        ("public.orders", "public.recent", "view"),
    ] {
        let edge = format!("data-from=\"{from}\" data-to=\"{to}\"");
        let at = svg.find(&edge).unwrap_or_else(|| panic!("no edge {edge}: {svg}"));
        assert!(svg[at..].split('>').next().unwrap().contains(&format!("data-syntax=\"{syntax}\"")), "{edge}");
    }
    assert!(svg.contains("3 rows · "), "bronze's rows: {svg}");
    // A real XML parser reads it, and finds every node and edge.
    let file = dir.path().join("lineage.svg");
    let out = sluice(&["lineage", "--data", data, "--format", "svg", "--output", file.to_str().unwrap()]);
    assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");
    let parsed = Command::new(python())
        .args([
            "-c",
            "import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); \
             gs = d.getElementsByTagName('g'); \
             print(sum('node' in g.getAttribute('class').split() for g in gs), \
                   sum('edge' in g.getAttribute('class').split() for g in gs))",
            file.to_str().unwrap(),
        ])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {} (run ./scripts/test, which makes the venv): {e}", python()));
    assert!(parsed.status.success(), "{}", String::from_utf8_lossy(&parsed.stderr));
    // bronze, orders, clicks, gold, counts, recent, the odd one; 2 routes, the pull, the view's
    // input and the materialized view's.
    assert_eq!(String::from_utf8(parsed.stdout).unwrap().trim(), "7 5");
    let out = sluice(&["lineage", "--data", data, "--format", "dot"]);
    let dot = String::from_utf8(out.stdout).unwrap();
    assert!(dot.starts_with("digraph lineage {") && dot.contains("<B>public.we&lt;i&gt;rd&amp;</B>"), "{dot}");
    assert_eq!(dot.matches(" -> ").count(), 5, "{dot}");
    let out = sluice(&["lineage", "--data", data, "--format", "mermaid"]);
    let chart = String::from_utf8(out.stdout).unwrap();
    assert!(chart.starts_with("flowchart LR\n") && chart.contains("public.we#60;i#62;rd#38;"), "{chart}");
    assert_eq!(chart.matches(" -->|").count(), 5, "{chart}");
    let out = sluice(&["lineage", "--data", data, "--format", "png"]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("svg, dot, mermaid"), "{out:?}");
}
