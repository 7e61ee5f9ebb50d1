//! Killing the process during DDL and DML: after each kill the warehouse reopens, every table the
//! catalog names opens, and the catalog and rows are exactly what the acknowledged statements
//! made (plus, perhaps, the statement in flight).
//!
//! The child is this test binary (`--ignored --exact crash::child`), running a fixed sequence of
//! statements and printing `ok <n>` after statement n returns.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use rand::Rng;
use sluice::Database;

use crate::common::rows;

/// Statement `n` of the sequence: five per round `i`.
fn statement(n: u64) -> String {
    let i = n / 5;
    match n % 5 {
        0 => format!("CREATE TABLE t_{i} (a int)"),
        1 => format!("INSERT INTO t_{i} VALUES ({i})"),
        2 => format!("INSERT INTO base VALUES ({i}, 0)"),
        3 if i.is_multiple_of(2) && i > 0 => format!("DELETE FROM base WHERE a = {}", i - 1),
        3 => format!("UPDATE base SET b = b + 1 WHERE a = {i}"),
        _ if i.is_multiple_of(3) && i >= 3 => format!("DROP TABLE t_{}", i - 3),
        _ => format!("ALTER TABLE t_{i} ADD COLUMN c_{i} int"),
    }
}

/// What the warehouse holds after statements `0..count`: tables t_i with their rows, and base.
#[derive(Debug, PartialEq, Default, Clone)]
struct Model {
    tables: BTreeMap<u64, BTreeSet<u64>>,
    base: BTreeMap<u64, u64>,
}

impl Model {
    fn after(count: u64) -> Self {
        let mut model = Model::default();
        for n in 0..count {
            let i = n / 5;
            match n % 5 {
                0 => {
                    model.tables.insert(i, BTreeSet::new());
                }
                1 => {
                    model.tables.entry(i).or_default().insert(i);
                }
                2 => {
                    model.base.insert(i, 0);
                }
                3 if i.is_multiple_of(2) && i > 0 => {
                    model.base.remove(&(i - 1));
                }
                3 => {
                    if let Some(b) = model.base.get_mut(&i) {
                        *b += 1;
                    }
                }
                _ if i.is_multiple_of(3) && i >= 3 => {
                    model.tables.remove(&(i - 3));
                }
                _ => {}
            }
        }
        model
    }
}

async fn observe(path: &str) -> Model {
    let db = Database::open(path).await.unwrap_or_else(|e| panic!("the warehouse does not open: {e}"));
    let mut model = Model::default();
    let names = rows(
        &db.query("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'").await.unwrap(),
    );
    for name in names {
        let Some(i) = name.strip_prefix("t_") else { continue };
        let i: u64 = i.parse().unwrap();
        let values = rows(
            &db.query(&format!("SELECT a FROM t_{i}")).await.unwrap_or_else(|e| panic!("t_{i} does not read: {e}")),
        );
        model.tables.insert(i, values.iter().map(|v| v.parse().unwrap()).collect());
    }
    for row in rows(&db.query("SELECT a, b FROM base").await.unwrap()) {
        let (a, b) = row.split_once('|').unwrap();
        model.base.insert(a.parse().unwrap(), b.parse().unwrap());
    }
    model
}

#[test]
#[ignore]
fn child() {
    let Ok(path) = std::env::var("SLUICE_CRASH_WAREHOUSE") else { return };
    let start: u64 = std::env::var("SLUICE_CRASH_START").unwrap().parse().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async move {
        let db = Database::open(&path).await.unwrap();
        for n in start.. {
            db.execute(&statement(n)).await.unwrap_or_else(|e| panic!("statement {n} ({}): {e}", statement(n)));
            println!("ok {n}");
        }
    });
}

/// Runs the child from statement `done` for `running`, kills it, and returns how many statements
/// were acknowledged in all. With `one_at_least`, the kill waits (up to two minutes) until the
/// child has acknowledged a statement, so that a slow start on a loaded machine does not make a
/// round in which nothing was written; a child that exits first fails the test, with what it
/// printed.
fn run_child(path: &str, done: u64, running: Duration, one_at_least: bool) -> u64 {
    let mut child = crate::common::ChildTest::spawn(
        "crash::child",
        &[("SLUICE_CRASH_WAREHOUSE", path.to_string()), ("SLUICE_CRASH_START", done.to_string())],
    );
    std::thread::sleep(running);
    let mut printed: Vec<String> = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    if one_at_least {
        loop {
            printed.extend(child.lines.try_iter());
            if crate::common::last_ok(&printed).is_some() {
                break;
            }
            assert!(child.running(), "the child exited before acknowledging a statement; it printed {printed:?}");
            assert!(std::time::Instant::now() < deadline, "the child acknowledged no statement in two minutes");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    printed.extend(child.kill());
    crate::common::last_ok(&printed).map_or(done, |n| n + 1)
}

/// How many statements the reopened warehouse holds: exactly the `acknowledged` ones, or one more
/// (the one in flight); panics, naming `context`, on anything else.
async fn statements_held(path: &str, acknowledged: u64, context: &str) -> u64 {
    let seen = observe(path).await;
    if seen == Model::after(acknowledged) {
        acknowledged
    } else if seen == Model::after(acknowledged + 1) {
        acknowledged + 1
    } else {
        panic!(
            "{context}: after {acknowledged} acknowledged statements the warehouse holds {seen:?}, expected {:?}",
            Model::after(acknowledged)
        )
    }
}

#[tokio::test]
async fn killing_during_ddl_and_dml_keeps_the_warehouse_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    Database::open(&path).await.unwrap().execute("CREATE TABLE base (a int, b int)").await.unwrap();
    let mut done = 0u64;
    let mut rng = crate::common::rng_from(crate::common::seed("crash"));
    let kills = 25;
    for round in 0..kills {
        let acknowledged = run_child(&path, done, Duration::from_millis(rng.random_range(100..900)), false);
        done = statements_held(&path, acknowledged, &format!("round {round}")).await;
    }
    assert!(done > kills, "statements ran between the kills ({done})");
}

/// The files under `dir` with their size and modification time.
fn files_under(dir: &std::path::Path) -> BTreeMap<std::path::PathBuf, (u64, std::time::SystemTime)> {
    let mut files = BTreeMap::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap().flatten() {
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                folders.push(entry.path());
            } else {
                files.insert(entry.path(), (meta.len(), meta.modified().unwrap()));
            }
        }
    }
    files
}

/// A crash of the machine, simulated: the child runs statements and is killed; then each file it
/// wrote without a sync of its own (through the warehouse's journal, see
/// `sluice_storage::journal`) is lost, emptied, cut short or kept, as writes the operating system
/// had not yet made durable can be after a power loss. The warehouse reopens, replays the
/// journal, and holds exactly what the acknowledged statements made (plus, perhaps, the one in
/// flight).
#[tokio::test]
async fn a_machine_crash_is_repaired_from_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    Database::open(&path).await.unwrap().execute("CREATE TABLE base (a int, b int)").await.unwrap();
    // No journal where puts are not synced (SLUICE_FSYNC=off) or off Linux: nothing to repair.
    if !dir.path().join("_sluice/journal").exists() {
        return;
    }
    let seed = crate::common::seed("journal");
    let mut rng = crate::common::rng_from(seed);
    let mut done = 0u64;
    for round in 0..3 {
        let before = files_under(dir.path());
        let acknowledged = run_child(&path, done, Duration::from_millis(rng.random_range(800..1600)), true);
        let mut damaged = 0;
        for (file, (size, modified)) in files_under(dir.path()) {
            let name = file.to_string_lossy().to_string();
            // Synced by themselves (checkpoints), or the journal itself.
            let synced =
                name.contains("/_sluice/journal/") || name.contains(".checkpoint") || name.contains("_last_checkpoint");
            if synced || before.get(&file) == Some(&(size, modified)) {
                continue;
            }
            damaged += 1;
            match rng.random_range(0..4) {
                0 => std::fs::remove_file(&file).unwrap(),
                1 => std::fs::write(&file, b"").unwrap(),
                2 => std::fs::write(&file, &std::fs::read(&file).unwrap()[..(size / 2) as usize]).unwrap(),
                _ => {}
            }
        }
        assert!(damaged > 0, "round {round}: the child wrote files");
        let context = format!("seed {seed}, round {round}, after a simulated machine crash");
        done = statements_held(&path, acknowledged, &context).await;
    }
    assert!(done > 10, "statements ran before the crashes ({done})");
}
