//! VACUUM deletes only files that the table's own log gave up: files it never named survive, and
//! log paths that lead out of the table's folder are never followed.

use std::path::Path;

use sluice_storage::actions::{Action, DeletionVectorDescriptor, Remove};
use sluice_storage::commit::{CommitOutcome, Transaction};

use crate::roundtrip::{batch, create, id_in, ids};

fn committed(outcome: CommitOutcome) -> u64 {
    match outcome {
        CommitOutcome::Committed(c) => c.version,
        CommitOutcome::Conflict(c) => panic!("unexpected conflict: {c}"),
    }
}

fn tombstone(path: &str) -> Remove {
    Remove {
        path: path.into(),
        deletion_timestamp: Some(0),
        data_change: true,
        extended_file_metadata: None,
        partition_values: None,
        size: None,
        stats: None,
        tags: None,
        deletion_vector: None,
        base_row_id: None,
        default_row_commit_version: None,
    }
}

fn plant(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

#[tokio::test]
async fn vacuum_deletes_removed_files_and_spares_unknown_ones() {
    let dir = tempfile::tempdir().unwrap();
    let table = create(dir.path(), &[], &[("delta.enableDeletionVectors", "true")]).await;
    for start in 0..3 {
        committed(table.append(vec![batch(start * 10_000..start * 10_000 + 10_000)]).await.unwrap());
    }
    // Half the rows of a file: a deletion vector too large to go inline, so it has a file.
    committed(table.delete_where(|_| true, |b| id_in(b, |i| i < 10_000 && i % 2 == 0)).await.unwrap().outcome);
    let removed: Vec<String> = table.snapshot().await.unwrap().files_sorted().iter().map(|f| f.path.clone()).collect();
    committed(table.optimize(None).await.unwrap().outcome.unwrap());
    let before = ids(&table, None).await;
    // Files that no commit of this table ever named: another writer's data file (a copy of one of
    // ours, so it looks like table data), a text file, and a file in a sub-folder.
    let strangers = ["stranger.parquet", "notes.txt", "other_table/part-00000.parquet"];
    let data = std::fs::read(dir.path().join(&removed[0])).unwrap();
    for stranger in strangers {
        plant(&dir.path().join(stranger), &data);
    }

    let dry = table.vacuum(Some(0), true, false).await.unwrap();
    let vacuumed = table.vacuum(Some(0), false, false).await.unwrap();
    assert_eq!(dry.files_deleted, vacuumed.files_deleted);
    for stranger in strangers {
        assert!(dir.path().join(stranger).exists(), "VACUUM deleted {stranger}, which the log never named");
        assert!(!vacuumed.files_deleted.iter().any(|f| f == stranger), "{:?}", vacuumed.files_deleted);
    }
    // The files DELETE and OPTIMIZE removed, and the deletion vector, are gone.
    for path in &removed {
        assert!(vacuumed.files_deleted.contains(path), "{path} not in {:?}", vacuumed.files_deleted);
        assert!(!dir.path().join(path).exists(), "{path} survived VACUUM");
    }
    assert!(vacuumed.files_deleted.iter().any(|f| f.starts_with("deletion_vector_")), "{:?}", vacuumed.files_deleted);
    assert_eq!(vacuumed.files_deleted.len(), removed.len() + 1, "{:?}", vacuumed.files_deleted);
    assert_eq!(ids(&table, None).await, before);
    // The log itself is untouched and a second VACUUM finds nothing left.
    assert!(dir.path().join("_delta_log/00000000000000000000.json").exists());
    assert!(table.vacuum(Some(0), false, false).await.unwrap().files_deleted.is_empty());
}

#[tokio::test]
async fn vacuum_keeps_removed_files_within_the_retention() {
    let dir = tempfile::tempdir().unwrap();
    let table = create(dir.path(), &[], &[]).await;
    committed(table.append(vec![batch(0..10)]).await.unwrap());
    let first = table.snapshot().await.unwrap().files_sorted()[0].path.clone();
    committed(table.overwrite(vec![batch(10..20)]).await.unwrap());
    // One hour of retention (the table's week is overridden): the overwrite is younger.
    let vacuumed = table.vacuum(Some(3_600_000), false, false).await.unwrap();
    assert!(vacuumed.files_deleted.is_empty(), "{:?}", vacuumed.files_deleted);
    assert!(dir.path().join(&first).exists());
    let vacuumed = table.vacuum(Some(0), false, false).await.unwrap();
    assert_eq!(vacuumed.files_deleted, [first]);
}

#[tokio::test]
async fn vacuum_never_follows_log_paths_out_of_the_table() {
    let parent = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let root = parent.path().join("table");
    let table = create(&root, &[], &[]).await;
    committed(table.append(vec![batch(0..5)]).await.unwrap());
    let victims = [
        parent.path().join("other/part.parquet"),
        parent.path().join("other/deletion_vector_00000000-0000-0000-0000-000000000001.bin"),
        parent.path().join("other/linked.parquet"),
        outside.path().join("victim.parquet"),
    ];
    for victim in &victims {
        plant(victim, b"not yours");
    }
    #[cfg(unix)]
    std::os::unix::fs::symlink(parent.path().join("other"), root.join("link")).unwrap();
    let absolute = url::Url::from_file_path(outside.path().join("victim.parquet")).unwrap().to_string();
    let uuid = [0u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    let dv = DeletionVectorDescriptor {
        storage_type: "u".into(),
        path_or_inline_dv: format!("../other{}", sluice_storage::deletion_vector::z85_encode(&uuid)),
        offset: Some(1),
        size_in_bytes: 10,
        cardinality: 1,
    };
    let crafted = [
        tombstone("../other/part.parquet"),
        tombstone("..%2Fother%2Fpart.parquet"),
        tombstone("%252E%252E/other/part.parquet"),
        tombstone("%2e%2e/other/part.parquet"),
        tombstone("/../other/part.parquet"),
        tombstone(&absolute),
        tombstone("link/linked.parquet"),
        Remove { deletion_vector: Some(dv), ..tombstone("part-missing.parquet") },
    ];
    let snapshot = table.snapshot().await.unwrap();
    let mut transaction = Transaction::new(Some(&snapshot), "CRAFTED");
    transaction.add_actions(crafted.into_iter().map(Action::Remove));
    committed(table.commit(&snapshot, transaction).await.unwrap());

    let vacuumed = table.vacuum(Some(0), false, false).await.unwrap();
    assert!(vacuumed.files_deleted.is_empty(), "{:?}", vacuumed.files_deleted);
    for victim in &victims {
        assert!(victim.exists(), "VACUUM deleted {}", victim.display());
    }
    assert_eq!(ids(&table, None).await, (0..5).collect::<Vec<_>>());
}

#[tokio::test]
async fn vacuum_keeps_what_a_change_reader_still_needs() {
    let dir = tempfile::tempdir().unwrap();
    let table = create(dir.path(), &[], &[]).await;
    committed(table.append(vec![batch(0..10)]).await.unwrap());
    let first = table.snapshot().await.unwrap().files_sorted()[0].path.clone();
    let overwritten = committed(table.overwrite(vec![batch(10..20)]).await.unwrap());
    committed(table.append(vec![batch(20..30)]).await.unwrap());
    let changes_before = table.changes(overwritten, None).await.unwrap();
    // A reader still needs the overwrite's changes: its removed file stays, whatever the retention.
    table.retain_changes_from(Some(overwritten));
    let vacuumed = table.vacuum(Some(0), false, false).await.unwrap();
    assert!(vacuumed.files_deleted.is_empty(), "{:?}", vacuumed.files_deleted);
    assert!(dir.path().join(&first).exists());
    let changes_after = table.changes(overwritten, None).await.unwrap();
    let rows = |changes: &[sluice_storage::cdf::ChangeBatch]| {
        changes.iter().flat_map(|c| c.batches.iter()).map(|b| b.num_rows()).sum::<usize>()
    };
    assert_eq!(rows(&changes_after), rows(&changes_before));
    assert_eq!(rows(&changes_after), 30, "10 deleted and 10 inserted by the overwrite, 10 appended");
    // Once the reader moved past the overwrite, the file goes.
    table.retain_changes_from(Some(overwritten + 1));
    assert_eq!(table.vacuum(Some(0), false, false).await.unwrap().files_deleted, [first]);
}
