//! Runs every `sql-tests/*.slt` file twice, each time against a fresh database: in-process, and
//! over pgwire through tokio-postgres (label `pgwire`, for `skipif pgwire` / `onlyif pgwire`).
//! `cargo test --workspace --test slt -- <filter>` runs the files whose name contains the filter.

use std::path::PathBuf;

use sluice_sql_tests::pg::PgDb;
use sluice_sql_tests::SluiceDb;

fn main() {
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("sql-tests/ is readable")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "slt"))
        .filter(|p| filter.as_ref().is_none_or(|f| p.to_string_lossy().contains(f.as_str())))
        .collect();
    files.sort();
    // Files that attach other engines' tables find them through this variable.
    std::env::set_var("SLUICE_FIXTURES", dir.parent().expect("a workspace").join("testdata/delta"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .thread_stack_size(sluice::STATEMENT_STACK_BYTES)
        .enable_all()
        .build()
        .expect("a runtime");
    let mut failures = Vec::new();
    let mut records = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).expect("the file is readable");
        records += text.lines().filter(|l| l.starts_with("statement ") || l.starts_with("query ")).count();
        let name = file.file_name().unwrap_or_default().to_string_lossy().to_string();
        let in_process = runtime.block_on(async {
            let mut runner = sqllogictest::Runner::new(|| async { SluiceDb::new().await });
            runner.add_label("in-process");
            runner.run_file_async(file).await.map_err(|e| e.to_string())
        });
        let over_pgwire = runtime.block_on(async {
            let mut runner = sqllogictest::Runner::new(|| async { PgDb::new().await });
            runner.add_label("pgwire");
            runner.run_file_async(file).await.map_err(|e| e.to_string())
        });
        for (mode, result) in [("in-process", in_process), ("pgwire", over_pgwire)] {
            match result {
                Ok(()) => println!("ok   {name} ({mode})"),
                Err(e) => {
                    println!("FAIL {name} ({mode})\n{e}");
                    failures.push(format!("{name} ({mode})"));
                }
            }
        }
    }
    println!("{} files, {records} records, run in-process and over pgwire; failed: {failures:?}", files.len());
    if !failures.is_empty() {
        std::process::exit(1);
    }
}
