//! CREATE INDEX and DROP INDEX.
//!
//! An index is a table property `sluice.index.<name>` = `INDEX (a, b)` or `UNIQUE INDEX (a)`,
//! kept in memory by the table's key index ([`crate::keys`]) like a key: key → rows. Scans that
//! filter on every column of an index with `=` or `IN` read only the rows it finds. A unique
//! index is enforced as a UNIQUE constraint is (23505), and ON CONFLICT (cols) may infer it.
//! `INCLUDE (cols)` is kept with the index (listed and reflected, see `KeyDef::include`).
//!
//! Index names share a schema's namespace with its tables, as in PostgreSQL: `DROP INDEX name`
//! finds the index's table among the schema's tables.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{CreateIndex, Expr as SqlExpr, IndexType, ObjectName};
use sluice_storage::snapshot::Snapshot;
use sluice_storage::table::Table;

use super::context::QueryContext;
use super::context::StatementResult;
use crate::catalog::{TableEntry, TableKind};
use crate::error::{Error, Result};
use crate::keys::{KeyDef, INDEX_PREFIX, KEY_PREFIX};
use crate::names::{normalize, table_name};

/// Where an index (or a key, whose index a constraint owns) is.
struct Owner {
    entry: TableEntry,
    table: Arc<Table>,
    /// A key's property (`sluice.key.`) rather than an index's.
    constraint: bool,
}

impl QueryContext {
    /// `CREATE [UNIQUE] INDEX [IF NOT EXISTS] [name] ON t [USING btree | hash] (col, ...)`.
    pub(crate) async fn create_index(&self, create: CreateIndex) -> Result<StatementResult> {
        let refuse = |what: &str| Err(Error::NotSupported(format!("CREATE INDEX with {what}")));
        if create.predicate.is_some() {
            return refuse("WHERE (partial indexes)");
        }
        if !create.with.is_empty() || !create.index_options.is_empty() || !create.alter_options.is_empty() {
            return refuse("storage parameters or index options");
        }
        match &create.using {
            None | Some(IndexType::BTree) | Some(IndexType::Hash) => {}
            Some(other) => return refuse(&format!("USING {other} (Sluice's indexes answer equality lookups)")),
        }
        let (entry, table, snapshot) = self.resolve_table(&create.table_name).await?;
        // Staged in a transaction block: another writer's commit to the table before COMMIT is 40001.
        table.note_whole_read();
        // A materialized view's rows are its query's: a unique index would have to refuse what
        // the view's maintenance writes. A plain one is kept in its table's properties (listed,
        // reflected, dropped with the view); the view's rows are read from memory, not through it.
        if entry.kind == TableKind::MaterializedView && create.unique {
            return Err(Error::NotSupported(format!(
                "CREATE UNIQUE INDEX on the materialized view \"{}\"",
                entry.name
            )));
        }
        let mut columns = Vec::with_capacity(create.columns.len());
        for column in &create.columns {
            if column.operator_class.is_some() {
                return refuse("an operator class");
            }
            let name = match &column.column.expr {
                SqlExpr::Identifier(ident) => normalize(ident),
                SqlExpr::CompoundIdentifier(parts) if parts.len() == 1 => parts.iter().map(normalize).collect(),
                other => return refuse(&format!("an expression ({other}); index columns only")),
            };
            if snapshot.schema().field(&name).is_none() {
                return Err(Error::UndefinedColumn(name));
            }
            if columns.contains(&name) {
                return Err(Error::data("42701", format!("column \"{name}\" appears twice in index")));
            }
            columns.push(name);
        }
        if columns.is_empty() {
            return refuse("no columns");
        }
        // INCLUDE columns: checked and kept (see KeyDef::include); a key column may be one too.
        let mut include = Vec::with_capacity(create.include.len());
        for column in &create.include {
            let name = normalize(column);
            if snapshot.schema().field(&name).is_none() {
                return Err(Error::UndefinedColumn(name));
            }
            if include.contains(&name) {
                return Err(Error::data("42701", format!("column \"{name}\" appears twice in index")));
            }
            include.push(name);
        }
        let name = match &create.name {
            Some(name) => {
                let given = table_name(name)?;
                if name.0.len() > 1 && given.schema != entry.schema {
                    return Err(Error::data(
                        "42P16",
                        "an index must be in the schema of its table (CREATE INDEX name ON schema.table)",
                    ));
                }
                given.name
            }
            None => self.free_index_name(&entry, &format!("{}_{}_idx", entry.name, columns.join("_"))).await?,
        };
        if self.relation_exists(&entry.schema, &name).await? {
            return if create.if_not_exists {
                Ok(StatementResult::command("CREATE INDEX"))
            } else {
                Err(Error::DuplicateTable(name))
            };
        }
        let def = KeyDef {
            nulls_distinct: create.nulls_distinct != Some(false),
            include,
            ..KeyDef::index(name, columns, create.unique)
        };
        let object = crate::names::object_name(&entry.schema, &entry.name);
        self.add_key(&object, &entry, &table, def).await?;
        self.snapshots.lock().unwrap_or_else(|p| p.into_inner()).clear();
        Ok(StatementResult::command("CREATE INDEX"))
    }

    /// Makes a plain index on exactly `columns` of the table `object` (named `base`, or the
    /// first free name after it) unless one of its keys or indexes is on them already; whether
    /// it made one. What AUTO CDC keeps on its KEYS, so that a run finds its keys' rows by index.
    pub(crate) async fn ensure_index(&self, object: &ObjectName, columns: &[String], base: &str) -> Result<bool> {
        let (entry, table, snapshot) = self.resolve_table(object).await?;
        if crate::keys::key_defs(snapshot.configuration()).iter().any(|d| d.is_on(columns)) {
            return Ok(false);
        }
        let name = self.free_index_name(&entry, base).await?;
        self.add_key(object, &entry, &table, KeyDef::index(name, columns.to_vec(), false)).await?;
        self.snapshots.lock().unwrap_or_else(|p| p.into_inner()).clear();
        Ok(true)
    }

    /// `DROP INDEX [IF EXISTS] name [, ...]`: an index made by CREATE INDEX (a key's index goes
    /// with its constraint: ALTER TABLE ... DROP CONSTRAINT).
    pub(crate) async fn drop_indexes(&self, names: &[ObjectName], if_exists: bool) -> Result<StatementResult> {
        for name in names {
            let name = table_name(name)?;
            let Some(owner) = self.index_owner(&name.schema, &name.name).await? else {
                if if_exists {
                    self.notice(format!("index \"{}\" does not exist, skipping", name.name));
                    continue;
                }
                return Err(Error::UndefinedObject { kind: "index", name: name.name });
            };
            if owner.constraint {
                return Err(Error::data(
                    "2BP01",
                    format!(
                        "cannot drop index {0} because constraint {0} on table {1} requires it",
                        name.name, owner.entry.name
                    ),
                ));
            }
            owner.table.note_whole_read();
            let _lock = self.lock_table_keys(&owner.entry.id, &owner.table).await?;
            let property = format!("{INDEX_PREFIX}{}", name.name);
            let outcome = owner.table.set_properties(HashMap::new(), &[property]).await?;
            self.metadata_committed(&owner.entry, outcome).await?;
        }
        self.snapshots.lock().unwrap_or_else(|p| p.into_inner()).clear();
        Ok(StatementResult::command("DROP INDEX"))
    }

    /// The table of schema `schema` with an index or key named `name`.
    async fn index_owner(&self, schema: &str, name: &str) -> Result<Option<Owner>> {
        let state = self.catalog_state();
        let entries: Vec<TableEntry> = state.tables_in(schema).cloned().collect();
        for entry in entries {
            // Indexes are table properties: a transaction block sees them on its staged handle
            // of a table it touched (with the indexes it made or dropped), else on the table.
            let real = self.db.open_table(&entry).await?;
            let table = match self.staging.staged_handle(&entry.id) {
                Some(staged) if self.staging.holds_catalog() => staged,
                _ => real.clone(),
            };
            let snapshot = table.snapshot().await?;
            if let Some(constraint) = names_index(&snapshot, name) {
                // A block's DROP INDEX goes through its staged handle (made now if need be).
                let table = if self.staging.holds_catalog() {
                    self.staging.table_for(&self.db, &entry, real).await?
                } else {
                    table
                };
                return Ok(Some(Owner { entry, table, constraint }));
            }
        }
        Ok(None)
    }

    /// Whether a table, view or index of `schema` is named `name`.
    async fn relation_exists(&self, schema: &str, name: &str) -> Result<bool> {
        if self.catalog_state().table(schema, name).is_some() {
            return Ok(true);
        }
        Ok(self.index_owner(schema, name).await?.is_some())
    }

    /// `base`, or `base1`, `base2`, ...: the first name no relation of the table's schema has
    /// (as PostgreSQL names indexes).
    async fn free_index_name(&self, entry: &TableEntry, base: &str) -> Result<String> {
        let mut candidate = base.to_string();
        for n in 1.. {
            if !self.relation_exists(&entry.schema, &candidate).await? {
                break;
            }
            candidate = format!("{base}{n}");
        }
        Ok(candidate)
    }
}

/// Whether a snapshot's table has an index named `name`: `Some(true)` for a key's (a
/// constraint's), `Some(false)` for one made by CREATE INDEX.
fn names_index(snapshot: &Snapshot, name: &str) -> Option<bool> {
    let configuration = snapshot.configuration();
    if configuration.contains_key(&format!("{KEY_PREFIX}{name}")) {
        return Some(true);
    }
    configuration.contains_key(&format!("{INDEX_PREFIX}{name}")).then_some(false)
}
