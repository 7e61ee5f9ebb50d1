//! Auto-compaction: streaming tables are written by many small commits (one per source commit,
//! one per single-row INSERT), so the background worker bin-packs a table's small files once
//! [`SMALL_FILES_MAX`] of them have gathered. It applies to streaming tables, and to other tables
//! whose `delta.autoOptimize.autoCompact` property is `true`; a streaming table can turn it off
//! with that property set to `false`.
//!
//! Compaction commits rewrite files with `dataChange = false`, so flows reading the table's
//! changes skip them, and it does not conflict with concurrent appends.

use std::sync::Arc;

use crate::catalog::{TableEntry, TableKind};
use crate::change::Operation;
use crate::error::Result;
use crate::warehouse::Warehouse;

/// Small files (under a quarter of the target file size) a table may gather before compaction.
pub const SMALL_FILES_MAX: usize = 50;
/// The Databricks table property that turns auto-compaction on or off.
pub const AUTO_COMPACT_KEY: &str = "delta.autoOptimize.autoCompact";

/// Compacts `entry` if it is due; returns whether it did.
pub async fn maybe_compact(db: &Arc<Warehouse>, entry: &TableEntry) -> Result<bool> {
    let table = db.open_table(entry).await?;
    // The cached snapshot is enough to decide (no storage round trip for tables not due).
    let snapshot = table.cached_snapshot();
    let setting = snapshot.configuration().get(AUTO_COMPACT_KEY).map(|v| v.eq_ignore_ascii_case("true"));
    let enabled = setting.unwrap_or(entry.kind == TableKind::StreamingTable);
    if !enabled {
        return Ok(false);
    }
    let small = table.write_options().target_file_size_bytes / 4;
    let small_files = snapshot.files().filter(|f| (f.size as u64) < small).count();
    if small_files < SMALL_FILES_MAX {
        return Ok(false);
    }
    let result = table.optimize(None).await?;
    match result.outcome {
        Some(outcome) => {
            let version = db.writer.commit(&entry.qualified_name(), Operation::Optimize, None, outcome).await?;
            db.events.record(crate::events::FlowEvent {
                at_ms: crate::util::now_ms(),
                flow: entry.qualified_name(),
                kind: "compaction",
                source_to: i64::try_from(version).ok(),
                message: Some(format!("{} small files rewritten into {}", result.files_removed, result.files_added)),
                ..Default::default()
            });
            Ok(true)
        }
        None => Ok(false),
    }
}
