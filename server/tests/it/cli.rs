//! `sluice sql`: one-shot commands, files, CSV output, and errors.

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
