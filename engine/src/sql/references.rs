//! FOREIGN KEY constraints: their definition (CREATE TABLE, ALTER TABLE ... ADD CONSTRAINT) and
//! their enforcement, as PostgreSQL does it.
//!
//! The constraints live in the catalog ([`crate::catalog::references`]). Every write goes through
//! [`QueryContext::check_writes`], which checks both ends:
//!
//! - rows a write inserts (INSERT, COPY, UPDATE, MERGE, ON CONFLICT) into a referencing table
//!   must find their key in the referenced table's key index (23503 otherwise); a key with a NULL
//!   is not checked (MATCH SIMPLE), and under MATCH FULL it must be all NULL;
//! - keys that a write removes from a referenced table (DELETE, or an UPDATE that changes them)
//!   must not be referenced any more (NO ACTION, RESTRICT: 23503), or the referencing rows are
//!   deleted (ON DELETE CASCADE) or set to NULL or their defaults (SET NULL, SET DEFAULT) by
//!   statements that follow the DELETE in the same transaction ([`QueryContext::run_cascades`]).
//!   An UPDATE that changes referenced keys does the same for ON UPDATE SET NULL and SET
//!   DEFAULT; a key counts as removed when no row the UPDATE writes holds it again, so where
//!   PostgreSQL acts on each row whose key changed (`SET id = id + 1` over 1 and 2 also nulls the
//!   references to 2), Sluice leaves the references to a key that is still there. ON UPDATE
//!   CASCADE is refused (0A000): it needs each old key's new value.
//!
//! Concurrency: outside a transaction block, a writer of a referencing table locks the key
//! indexes of the tables it references (with its own, in the order of the tables' ids, so two
//! writers never wait for each other in a cycle) and holds them until its commit is done; a
//! writer that removes keys holds its own table's index while it looks for referencing rows. So
//! a child row and the removal of its parent key are never both committed. A statement that
//! cascades runs in an implicit transaction (see `Session::run_with`), so the parent's DELETE and
//! the child's changes commit together. Inside a transaction block, the checks see the block's
//! own rows (its copies of the indexes); a conflicting change committed by another session
//! between the check and the block's COMMIT is not detected (see the README).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::{cast_with_options, CastOptions};
use arrow::datatypes::{DataType as ArrowType, Field, Schema, UInt64Type};
use datafusion::catalog::MemTable;
use datafusion::sql::sqlparser::ast::{
    ConstraintReferenceMatchKind, ForeignKeyConstraint, ReferentialAction, Statement,
};
use roaring::RoaringTreemap;

use super::dml::Target;
use crate::catalog::references::{ForeignKey, RefAction};
use crate::catalog::TableEntry;
use crate::error::{Error, Result};
use crate::keys::{KeyDef, KeyGuard, TableKeys};
use crate::names::{normalize, object_name, quoted, table_name, TableName, CATALOG_NAME, TEMP_SCHEMA};
use crate::provider::storage_scan::{FILE_COLUMN, ROW_COLUMN};
use crate::sql::context::QueryContext;
use crate::syntax::parser::SluiceStatement;

/// PostgreSQL's limit on a name's length (NAMEDATALEN - 1).
const NAME_LENGTH_MAX: usize = 63;

/// What a removal of parent keys asks of one referencing table: to delete its rows that hold
/// them, or to set their key columns to NULL or to their defaults.
pub(crate) struct Cascade {
    child: TableEntry,
    key: ForeignKey,
    action: RefAction,
    /// The removed keys, one column per referencing column (in the constraint's order).
    keys: Vec<ArrayRef>,
}

impl Cascade {
    pub(crate) fn key_name(&self) -> &str {
        &self.key.name
    }

    pub(crate) fn action_words(&self) -> &'static str {
        self.action.words()
    }
}

/// The referenced end of a foreign key being defined: the table's name, id, columns and keys.
pub(crate) struct Referenced<'a> {
    pub name: TableName,
    pub id: String,
    pub schema: &'a sluice_storage::schema::StructType,
    pub keys: Vec<KeyDef>,
}

impl QueryContext {
    /// A FOREIGN KEY clause of table `child` (columns `schema`), checked against the table it
    /// references: PostgreSQL's errors for a missing table or column (42P01, 42703), referenced
    /// columns that are no unique key (42830), and key types that cannot be compared (42804).
    /// `own` is the child itself for a self-reference (the table being created, with its keys).
    /// `taken`: the table's constraint names so far (a generated name avoids them).
    pub(crate) async fn define_foreign_key(
        &self,
        child: &TableName,
        schema: &sluice_storage::schema::StructType,
        own: Referenced<'_>,
        taken: &mut HashSet<String>,
        clause: &ForeignKeyConstraint,
    ) -> Result<ForeignKey> {
        if clause.characteristics.as_ref().is_some_and(|c| c.deferrable == Some(true) || c.initially.is_some()) {
            return Err(Error::NotSupported("DEFERRABLE foreign keys (Sluice checks them at each statement)".into()));
        }
        if clause.characteristics.as_ref().is_some_and(|c| c.enforced == Some(false)) {
            return Err(Error::NotSupported("NOT ENFORCED foreign keys".into()));
        }
        let match_full = match clause.match_kind {
            None | Some(ConstraintReferenceMatchKind::Simple) => false,
            Some(ConstraintReferenceMatchKind::Full) => true,
            Some(ConstraintReferenceMatchKind::Partial) => {
                return Err(Error::NotSupported("MATCH PARTIAL not yet implemented".into()))
            }
        };
        let on_delete = action(clause.on_delete);
        let on_update = action(clause.on_update);
        if on_update == RefAction::Cascade {
            return Err(Error::NotSupported(
                "ON UPDATE CASCADE (a changed referenced key is not carried to the referencing rows; ON UPDATE SET \
                 NULL, SET DEFAULT, NO ACTION and RESTRICT are supported)"
                    .into(),
            ));
        }
        let columns: Vec<String> = clause.columns.iter().map(normalize).collect();
        for column in &columns {
            if schema.field(column).is_none() {
                return Err(Error::data(
                    "42703",
                    format!("column \"{column}\" referenced in foreign key constraint does not exist"),
                ));
            }
        }
        // The referenced table: this one, or another table (which must exist and be a table).
        let parent_name = table_name(&clause.foreign_table)?;
        let self_reference = parent_name.name == own.name.name
            && (parent_name.schema == own.name.schema || clause.foreign_table.0.len() == 1);
        let (other_entry, other_snapshot);
        let parent = if self_reference {
            own
        } else {
            let state = self.catalog_state();
            if state.views.contains_key(&crate::catalog::key(&parent_name.schema, &parent_name.name)) {
                return Err(Error::data(
                    "42809",
                    format!("referenced relation \"{}\" is not a table", parent_name.name),
                ));
            }
            let (entry, _, snapshot) = self.resolve_table(&clause.foreign_table).await?;
            if entry.kind == crate::catalog::TableKind::MaterializedView {
                return Err(Error::data("42809", format!("referenced relation \"{}\" is not a table", entry.name)));
            }
            if crate::catalog::is_temporary_schema(&entry.schema) && !crate::catalog::is_temporary_schema(&child.schema)
            {
                return Err(Error::data(
                    "42P16",
                    "constraints on permanent tables may reference only permanent tables",
                ));
            }
            other_entry = entry;
            other_snapshot = snapshot;
            Referenced {
                name: TableName { schema: other_entry.schema.clone(), name: other_entry.name.clone() },
                id: other_entry.id.clone(),
                schema: other_snapshot.schema(),
                keys: crate::keys::key_defs(other_snapshot.configuration()),
            }
        };
        let parent_columns: Vec<String> = if clause.referred_columns.is_empty() {
            match parent.keys.iter().find(|k| k.primary) {
                Some(key) => key.columns.clone(),
                None => {
                    return Err(Error::data(
                        "42704",
                        format!("there is no primary key for referenced table \"{}\"", parent.name.name),
                    ))
                }
            }
        } else {
            clause.referred_columns.iter().map(normalize).collect()
        };
        for column in &parent_columns {
            if parent.schema.field(column).is_none() {
                return Err(Error::data(
                    "42703",
                    format!("column \"{column}\" referenced in foreign key constraint does not exist"),
                ));
            }
        }
        if parent_columns.len() != columns.len() {
            return Err(Error::data("42830", "number of referencing and referenced columns for foreign key disagree"));
        }
        if !parent.keys.iter().any(|k| k.unique && k.nulls_distinct && k.is_on(&parent_columns)) {
            return Err(Error::data(
                "42830",
                format!(
                    "there is no unique constraint matching given keys for referenced table \"{}\"",
                    parent.name.name
                ),
            ));
        }
        let name = match &clause.name {
            Some(name) => {
                let name = normalize(name);
                if !taken.insert(name.clone()) {
                    return Err(Error::data(
                        "42710",
                        format!("constraint \"{name}\" for relation \"{}\" already exists", child.name),
                    ));
                }
                name
            }
            None => generated_name(&child.name, &columns, taken),
        };
        for (column, parent_column) in columns.iter().zip(&parent_columns) {
            let (Some(mine), Some(theirs)) = (schema.field(column), parent.schema.field(parent_column)) else {
                continue;
            };
            let (mine_type, their_type) = (mine.arrow_type(), theirs.arrow_type());
            if !comparable(&mine_type, &their_type) {
                return Err(Error::data(
                    "42804",
                    format!(
                        "foreign key constraint \"{name}\" cannot be implemented: key columns \"{column}\" and \"{parent_column}\" are of incompatible types: {} and {}",
                        crate::types::pg_type_name(mine),
                        crate::types::pg_type_name(theirs)
                    ),
                ));
            }
        }
        Ok(ForeignKey {
            name,
            columns,
            parent: parent.id,
            parent_columns,
            on_delete,
            on_update,
            match_full,
            not_valid: false,
        })
    }

    /// The table with this id as a write's target, at the statement's snapshot.
    pub(crate) async fn target_by_id(&self, id: &str) -> Result<Target> {
        let entry = self
            .catalog_state()
            .table_by_id(id)
            .cloned()
            .ok_or_else(|| Error::Internal(format!("a foreign key names table {id}, which the catalog lacks")))?;
        self.target(&object_name(&entry.schema, &entry.name)).await
    }

    /// Locks the key index of `target` and of every table its foreign keys reference (in the
    /// order of the tables' ids, so that writers never wait for each other in a cycle); the
    /// others are held by the returned guard until its commit is done.
    pub(crate) async fn lock_for_write(&self, target: &Target) -> Result<KeyGuard> {
        let own = target.entry.id.clone();
        let mut ids: Vec<String> = target.entry.foreign_keys.iter().map(|k| k.parent.clone()).collect();
        ids.push(own.clone());
        ids.sort();
        ids.dedup();
        let mut guard = None;
        let mut held = Vec::new();
        for id in ids {
            if id == own {
                guard = Some(Box::pin(self.lock_keys(target)).await?);
            } else {
                let parent = Box::pin(self.target_by_id(&id)).await?;
                held.push((id, Box::pin(self.lock_keys(&parent)).await?));
            }
        }
        let mut guard = guard.ok_or_else(|| Error::Internal("a write's own key index was not locked".into()))?;
        for (id, parent) in held {
            guard.hold(id, parent);
        }
        Ok(guard)
    }

    /// Checks that each row a write inserts into `target` finds the key it references (its
    /// foreign keys' tables are held by `guard`, see [`QueryContext::lock_for_write`]); rows in
    /// `deleted` (of `target`) no longer count as referenced rows of a self-reference, and rows
    /// the write inserts do.
    pub(crate) fn check_parents(
        &self,
        target: &Target,
        guard: &KeyGuard,
        deleted: Option<&HashMap<String, RoaringTreemap>>,
        inserted: &[RecordBatch],
    ) -> Result<()> {
        for key in &target.entry.foreign_keys {
            let own = key.parent == target.entry.id;
            let parent_guard: &KeyGuard = if own {
                guard
            } else {
                guard.held(&key.parent).ok_or_else(|| Error::Internal(format!("{} was not locked", key.parent)))?
            };
            let parent: &TableKeys = parent_guard;
            let index = parent
                .index_on(&key.parent_columns)
                .ok_or_else(|| Error::Internal(format!("the key that foreign key {} references is gone", key.name)))?;
            let Some(def) = parent.def(index).cloned() else { continue };
            let parent_schema = parent_guard.snapshot().arrow_schema();
            let mut types = Vec::with_capacity(def.columns.len());
            for column in &def.columns {
                types.push(parent_schema.field_with_name(column)?.data_type().clone());
            }
            // For each index column, the referencing column that gives it.
            let mut order = Vec::with_capacity(def.columns.len());
            for column in &def.columns {
                let at = key.parent_columns.iter().position(|c| c == column).ok_or_else(|| {
                    Error::Internal(format!("foreign key {} does not cover key {}", key.name, def.name))
                })?;
                order.push(at);
            }
            // A self-reference is satisfied by a row the same write inserts.
            let mut inserted_keys = HashSet::new();
            if own {
                for batch in inserted {
                    inserted_keys.extend(parent.keys_of(index, batch)?.into_iter().flatten());
                }
            }
            let parent_name = self.name_of(&key.parent);
            // In a transaction block, the keys found in the parent's rows are checked again at
            // COMMIT (another session may delete them meanwhile).
            let mut relied = Vec::new();
            for batch in inserted.iter().filter(|b| b.num_rows() > 0) {
                let mut given = Vec::with_capacity(order.len());
                for &at in &order {
                    let column =
                        key.columns.get(at).ok_or_else(|| Error::Internal("a foreign key's columns".into()))?;
                    let array = batch
                        .column_by_name(column)
                        .ok_or_else(|| Error::Internal(format!("rows of {} lack column {column}", target.name)))?;
                    given.push(array.clone());
                }
                let mut cast = Vec::with_capacity(given.len());
                for (array, wanted) in given.iter().zip(&types) {
                    let options = CastOptions { safe: true, ..Default::default() };
                    cast.push(cast_with_options(array, wanted, &options)?);
                }
                let keys = parent.encode(index, &cast)?;
                for row in 0..batch.num_rows() {
                    let nulls = given.iter().filter(|a| a.is_null(row)).count();
                    if nulls > 0 {
                        if key.match_full && nulls < given.len() {
                            return Err(Error::ForeignKeyViolation {
                                message: insert_message(&target.name.name, &key.name),
                                detail: "MATCH FULL does not allow mixing of null and nonnull key values.".into(),
                            });
                        }
                        continue;
                    }
                    // A value that does not fit the referenced type is in no referenced row.
                    let fits = cast.iter().all(|a| !a.is_null(row));
                    let found = fits
                        && keys.get(row).is_some_and(|k| {
                            inserted_keys.contains(k) || parent.holds(index, k, if own { deleted } else { None })
                        });
                    if found && !own {
                        if let Some(k) = keys.get(row) {
                            relied.push(k.clone());
                        }
                    }
                    if !found {
                        let columns: Vec<String> =
                            key.columns.iter().map(|c| crate::names::quoted_if_needed(c)).collect();
                        let values: Vec<String> = key
                            .columns
                            .iter()
                            .filter_map(|c| batch.column_by_name(c))
                            .map(|a| crate::keys::value_text(a, row))
                            .collect();
                        return Err(Error::ForeignKeyViolation {
                            message: insert_message(&target.name.name, &key.name),
                            detail: format!(
                                "Key ({})=({}) is not present in table \"{parent_name}\".",
                                columns.join(", "),
                                values.join(", ")
                            ),
                        });
                    }
                }
            }
            if target.table.is_staged() && !relied.is_empty() {
                relied.sort();
                relied.dedup();
                self.staging.rely(crate::staging::Reliance::Present {
                    parent: key.parent.clone(),
                    columns: def.columns.clone(),
                    keys: relied,
                });
            }
        }
        Ok(())
    }

    /// The keys that a write removes from `target` (the rows in `deleted`, less the keys the
    /// rows it inserts hold again), checked against the foreign keys that reference them: for
    /// NO ACTION and RESTRICT, 23503 if a row still references one; for the others, what the
    /// referencing tables must do next (`deleting`: the write is a DELETE, so ON DELETE applies;
    /// else ON UPDATE). `guard` holds `target`'s index.
    pub(crate) async fn check_children(
        &self,
        target: &Target,
        guard: &KeyGuard,
        deleted: &HashMap<String, RoaringTreemap>,
        inserted: &[RecordBatch],
        deleting: bool,
    ) -> Result<Vec<Cascade>> {
        let state = self.catalog_state();
        let references: Vec<(TableEntry, ForeignKey)> =
            state.references_to(&target.entry.id).map(|(t, k)| (t.clone(), k.clone())).collect();
        let mut cascades = Vec::new();
        for (child, key) in references {
            let index = guard
                .index_on(&key.parent_columns)
                .ok_or_else(|| Error::Internal(format!("the key that foreign key {} references is gone", key.name)))?;
            let Some(def) = guard.def(index).cloned() else { continue };
            let mut still = HashSet::new();
            for batch in inserted {
                still.extend(guard.keys_of(index, batch)?.into_iter().flatten());
            }
            let removed: Vec<Vec<u8>> = {
                let mut seen = HashSet::new();
                guard
                    .keys_in_rows(index, deleted)
                    .into_iter()
                    .filter(|k| !still.contains(k) && seen.insert(k.clone()))
                    .collect()
            };
            if removed.is_empty() {
                continue;
            }
            let arrays = guard.decode(index, &removed)?;
            // One column per referencing column, in the constraint's order.
            let mut keys = Vec::with_capacity(key.columns.len());
            for parent_column in &key.parent_columns {
                let at = def.columns.iter().position(|c| c == parent_column).ok_or_else(|| {
                    Error::Internal(format!("foreign key {} does not cover key {}", key.name, def.name))
                })?;
                keys.push(arrays.get(at).cloned().ok_or_else(|| Error::Internal("a decoded key".into()))?);
            }
            if target.table.is_staged() {
                // Another session may add a row that references the removed keys before the
                // block commits: COMMIT checks that the referencing table did not change.
                let child_target = Box::pin(self.target(&object_name(&child.schema, &child.name))).await?;
                if let Some(version) = child_target.table.stage_base_version() {
                    self.staging.rely(crate::staging::Reliance::Unchanged { child: child.id.clone(), version });
                }
            }
            let action = if deleting { key.on_delete } else { key.on_update };
            if !action.checks_only() {
                cascades.push(Cascade { child, key, action, keys });
                continue;
            }
            let excluded = (child.id == target.entry.id).then_some(deleted);
            if let Some(row) = Box::pin(self.first_referencing(&child, &key, &keys, excluded)).await? {
                let columns: Vec<String> =
                    key.parent_columns.iter().map(|c| crate::names::quoted_if_needed(c)).collect();
                let values: Vec<String> = keys.iter().map(|a| crate::keys::value_text(a, row)).collect();
                return Err(Error::ForeignKeyViolation {
                    message: format!(
                        "update or delete on table \"{}\" violates foreign key constraint \"{}\" on table \"{}\"",
                        target.name.name, key.name, child.name
                    ),
                    detail: format!(
                        "Key ({})=({}) is still referenced from table \"{}\".",
                        columns.join(", "),
                        values.join(", "),
                        child.name
                    ),
                });
            }
        }
        Ok(cascades)
    }

    /// Both ends of `target`'s foreign keys for a write that checked its keys itself (INSERT
    /// ... ON CONFLICT): its inserted rows' references, and the keys its updates remove.
    pub(crate) async fn check_references(
        &self,
        target: &Target,
        guard: &KeyGuard,
        deleted: &HashMap<String, RoaringTreemap>,
        inserted: &[RecordBatch],
    ) -> Result<()> {
        if !target.entry.foreign_keys.is_empty() {
            self.check_parents(target, guard, Some(deleted), inserted)?;
        }
        if !deleted.is_empty() && self.catalog_state().is_referenced(&target.entry.id) {
            let cascades = Box::pin(self.check_children(target, guard, deleted, inserted, false)).await?;
            if let Some(cascade) = cascades.first() {
                return Err(Error::NotSupported(format!(
                    "INSERT ... ON CONFLICT DO UPDATE of a key that foreign key {} references with ON UPDATE {} (use \
                     UPDATE)",
                    cascade.key.name,
                    cascade.action.words()
                )));
            }
        }
        Ok(())
    }

    /// Of `keys` (one column per referencing column of `key`), the position of one that a row of
    /// `child` other than those in `excluded` holds.
    async fn first_referencing(
        &self,
        child: &TableEntry,
        key: &ForeignKey,
        keys: &[ArrayRef],
        excluded: Option<&HashMap<String, RoaringTreemap>>,
    ) -> Result<Option<usize>> {
        let target = self.target(&object_name(&child.schema, &child.name)).await?;
        let relation = self.register_dml_relation(&target);
        let keys_relation = self.register_keys(keys)?;
        let on: Vec<String> =
            key.columns.iter().enumerate().map(|(i, c)| format!("c.{} = k.\"__k{i}\"", quoted(c))).collect();
        let limit = if excluded.is_some() { String::new() } else { " LIMIT 1".into() };
        let sql = format!(
            "SELECT k.\"__n\", c.{}, c.{} FROM {} c JOIN {} k ON {}{limit}",
            quoted(FILE_COLUMN),
            quoted(ROW_COLUMN),
            temp_relation(&relation),
            temp_relation(&keys_relation),
            on.join(" AND ")
        );
        let batches = self.collect_built(query_of(&sql)?).await?;
        for batch in batches.iter().filter(|b| b.num_rows() > 0) {
            let numbers = batch.column(0).as_primitive::<UInt64Type>();
            let files = batch.column(1).as_string::<i32>();
            let rows = batch.column(2).as_primitive::<UInt64Type>();
            for i in 0..batch.num_rows() {
                let gone = excluded.and_then(|d| d.get(files.value(i))).is_some_and(|set| set.contains(rows.value(i)));
                if !gone {
                    return Ok(Some(numbers.value(i) as usize));
                }
            }
        }
        Ok(None)
    }

    /// Registers keys as a relation of this statement: columns `__k0`, `__k1`, ... and `__n`
    /// (each key's position).
    fn register_keys(&self, keys: &[ArrayRef]) -> Result<String> {
        let rows = keys.first().map(|a| a.len()).unwrap_or(0);
        let mut fields: Vec<Field> =
            keys.iter().enumerate().map(|(i, a)| Field::new(format!("__k{i}"), a.data_type().clone(), true)).collect();
        fields.push(Field::new("__n", ArrowType::UInt64, false));
        let mut columns: Vec<ArrayRef> = keys.to_vec();
        columns.push(Arc::new(arrow::array::UInt64Array::from_iter_values(0..rows as u64)));
        let schema = Arc::new(Schema::new(fields));
        let batch = RecordBatch::try_new(schema.clone(), columns)?;
        let table = MemTable::try_new(schema, vec![vec![batch]])?;
        let name = self.temp_name("referenced_keys");
        self.temp.insert(&name, Arc::new(table));
        Ok(name)
    }

    /// Does what removed parent keys ask of the tables that reference them (see [`Cascade`]):
    /// each is a DELETE or UPDATE of the referencing rows, itself checked as any. Runs in the
    /// transaction of the statement that removed the keys, after its write. The cascades a
    /// cascading DELETE asks for join the queue: a chain of any length runs one statement after
    /// another, not nested (its length must not use stack).
    pub(crate) async fn run_cascades(&self, cascades: Vec<Cascade>) -> Result<()> {
        let mut pending: std::collections::VecDeque<Cascade> = cascades.into();
        while let Some(cascade) = pending.pop_front() {
            let child = object_name(&cascade.child.schema, &cascade.child.name);
            let keys_relation = self.register_keys(&cascade.keys)?;
            let matches: Vec<String> = cascade
                .key
                .columns
                .iter()
                .enumerate()
                .map(|(i, c)| format!("k.\"__k{i}\" = {}.{}", quoted(&cascade.child.name), quoted(c)))
                .collect();
            let exists =
                format!("EXISTS (SELECT 1 FROM {} k WHERE {})", temp_relation(&keys_relation), matches.join(" AND "));
            let sql = match cascade.action {
                RefAction::Cascade => format!("DELETE FROM {child} WHERE {exists}"),
                RefAction::SetNull | RefAction::SetDefault => {
                    let set: Vec<String> = cascade
                        .key
                        .columns
                        .iter()
                        .map(|c| {
                            let value = match cascade.action {
                                RefAction::SetDefault => {
                                    cascade.child.defaults.get(c).cloned().unwrap_or_else(|| "NULL".into())
                                }
                                _ => "NULL".into(),
                            };
                            format!("{} = {value}", quoted(c))
                        })
                        .collect();
                    format!("UPDATE {child} SET {} WHERE {exists}", set.join(", "))
                }
                RefAction::NoAction | RefAction::Restrict => continue,
            };
            // The statement reads what the write before it left, not the statement's first
            // snapshots of the tables.
            self.snapshots.lock().unwrap_or_else(|p| p.into_inner()).clear();
            match crate::syntax::parser::parse_statement_text(&sql)? {
                SluiceStatement::Standard(statement) => match *statement {
                    Statement::Delete(delete) => {
                        let (_, more) = Box::pin(self.delete_rows(delete)).await?;
                        pending.extend(more);
                    }
                    Statement::Update(update) => {
                        Box::pin(self.update_statement(update)).await?;
                    }
                    _ => return Err(Error::Internal(format!("a cascade's statement: {sql}"))),
                },
                _ => return Err(Error::Internal(format!("a cascade's statement: {sql}"))),
            }
        }
        Ok(())
    }

    /// Checks that the rows of `child` satisfy a new foreign key (ALTER TABLE ... ADD
    /// CONSTRAINT): 23503 naming the first row whose key is missing.
    pub(crate) async fn validate_foreign_key(&self, child: &TableEntry, key: &ForeignKey) -> Result<()> {
        let parent = self.catalog_state().table_by_id(&key.parent).cloned();
        let Some(parent) = parent else { return Err(Error::UndefinedTable(key.parent.clone())) };
        let columns: Vec<String> = key.columns.iter().map(|c| format!("c.{}", quoted(c))).collect();
        let present: Vec<String> = key.columns.iter().map(|c| format!("c.{} IS NOT NULL", quoted(c))).collect();
        let matches: Vec<String> = key
            .columns
            .iter()
            .zip(&key.parent_columns)
            .map(|(c, p)| format!("p.{} = c.{}", quoted(p), quoted(c)))
            .collect();
        let condition = if key.match_full {
            let any: Vec<String> = key.columns.iter().map(|c| format!("c.{} IS NOT NULL", quoted(c))).collect();
            format!("({})", any.join(" OR "))
        } else {
            present.join(" AND ")
        };
        let sql = format!(
            "SELECT {} FROM {} c WHERE {condition} AND NOT EXISTS (SELECT 1 FROM {} p WHERE {}) LIMIT 1",
            columns.join(", "),
            object_name(&child.schema, &child.name),
            object_name(&parent.schema, &parent.name),
            matches.join(" AND ")
        );
        let batches = self.collect_built(query_of(&sql)?).await?;
        let Some(batch) = batches.iter().find(|b| b.num_rows() > 0) else { return Ok(()) };
        let names: Vec<String> = key.columns.iter().map(|c| crate::names::quoted_if_needed(c)).collect();
        let values: Vec<String> = batch.columns().iter().map(|a| crate::keys::value_text(a, 0)).collect();
        let detail = if batch.columns().iter().any(|a| a.is_null(0)) {
            "MATCH FULL does not allow mixing of null and nonnull key values.".to_string()
        } else {
            format!("Key ({})=({}) is not present in table \"{}\".", names.join(", "), values.join(", "), parent.name)
        };
        Err(Error::ForeignKeyViolation { message: insert_message(&child.name, &key.name), detail })
    }

    /// Before `column` of `entry` takes type `new_type`: the foreign keys on it (either end)
    /// must still compare their columns (42804, as PostgreSQL).
    pub(crate) async fn check_key_type(&self, entry: &TableEntry, column: &str, new_type: &ArrowType) -> Result<()> {
        let state = self.catalog_state();
        let mut pairs: Vec<(ForeignKey, String, String)> = Vec::new();
        for key in &entry.foreign_keys {
            if let Some(at) = key.columns.iter().position(|c| c == column) {
                if let Some(other) = key.parent_columns.get(at) {
                    pairs.push((key.clone(), key.parent.clone(), other.clone()));
                }
            }
        }
        for (child, key) in state.references_to(&entry.id) {
            if let Some(at) = key.parent_columns.iter().position(|c| c == column) {
                if let Some(other) = key.columns.get(at) {
                    pairs.push((key.clone(), child.id.clone(), other.clone()));
                }
            }
        }
        drop(state);
        for (key, other_table, other_column) in pairs {
            let other_type = if other_table == entry.id {
                None
            } else {
                let target = self.target_by_id(&other_table).await?;
                let field = target.snapshot.arrow_schema().field_with_name(&other_column).ok().cloned();
                field.map(|f| f.data_type().clone())
            };
            let Some(other_type) = other_type else { continue };
            if !comparable(new_type, &other_type) {
                return Err(Error::data(
                    "42804",
                    format!(
                        "foreign key constraint \"{}\" cannot be implemented: key columns \"{column}\" and \"{other_column}\" would be of incompatible types",
                        key.name
                    ),
                ));
            }
        }
        Ok(())
    }

    /// A table's name by its id, for messages.
    fn name_of(&self, id: &str) -> String {
        self.catalog_state().table_by_id(id).map(|t| t.name.clone()).unwrap_or_else(|| id.to_string())
    }

    /// Whether a statement removes keys from a table that a foreign key references with ON
    /// DELETE CASCADE, SET NULL or SET DEFAULT (it then runs in a transaction of its own, so the
    /// cascade commits with it).
    pub fn cascades_from(&self, statement: &SluiceStatement) -> bool {
        let SluiceStatement::Standard(statement) = statement else { return false };
        let name = match statement.as_ref() {
            Statement::Delete(delete) => {
                let relations = match &delete.from {
                    datafusion::sql::sqlparser::ast::FromTable::WithFromKeyword(r)
                    | datafusion::sql::sqlparser::ast::FromTable::WithoutKeyword(r) => r,
                };
                match relations.first().map(|r| &r.relation) {
                    Some(datafusion::sql::sqlparser::ast::TableFactor::Table { name, .. }) => name.clone(),
                    _ => return false,
                }
            }
            Statement::Truncate(truncate) => {
                return truncate.cascade == Some(datafusion::sql::sqlparser::ast::CascadeOption::Cascade)
            }
            // An UPDATE of a referenced key with ON UPDATE SET NULL or SET DEFAULT changes the
            // referencing rows too.
            Statement::Update(update) => match &update.table.relation {
                datafusion::sql::sqlparser::ast::TableFactor::Table { name, .. } => {
                    let Ok(name) = table_name(name) else { return false };
                    let state = self.catalog_state();
                    let Some(entry) = state.table(&name.schema, &name.name) else { return false };
                    return state.references_to(&entry.id).any(|(_, k)| !k.on_update.checks_only());
                }
                _ => return false,
            },
            _ => return false,
        };
        let Ok(name) = table_name(&name) else { return false };
        let state = self.catalog_state();
        let Some(entry) = state.table(&name.schema, &name.name) else { return false };
        let cascades = state.references_to(&entry.id).any(|(_, k)| !k.on_delete.checks_only());
        cascades
    }

    /// The tables a TRUNCATE empties: those named, and with CASCADE every table that references
    /// one of them (again and again). Without CASCADE, a table that references a truncated one
    /// and is not truncated with it is 0A000, as in PostgreSQL.
    pub(crate) fn truncated_with_references(&self, named: Vec<TableEntry>, cascade: bool) -> Result<Vec<TableEntry>> {
        let state = self.catalog_state();
        let mut all = named;
        let mut at = 0;
        while let Some(entry) = all.get(at).cloned() {
            at += 1;
            let ids: HashSet<String> = all.iter().map(|t| t.id.clone()).collect();
            for (child, _) in state.references_to(&entry.id) {
                if ids.contains(&child.id) {
                    continue;
                }
                if !cascade {
                    return Err(Error::NotSupported(format!(
                        "cannot truncate a table referenced in a foreign key constraint (table \"{}\" references \
                         \"{}\"; truncate table \"{}\" at the same time, or use TRUNCATE ... CASCADE)",
                        child.name, entry.name, child.name
                    )));
                }
                all.push(child.clone());
            }
        }
        Ok(all)
    }
}

/// `insert or update on table "c" violates foreign key constraint "fk"`.
fn insert_message(table: &str, constraint: &str) -> String {
    format!("insert or update on table \"{table}\" violates foreign key constraint \"{constraint}\"")
}

fn action(action: Option<ReferentialAction>) -> RefAction {
    match action {
        None | Some(ReferentialAction::NoAction) => RefAction::NoAction,
        Some(ReferentialAction::Restrict) => RefAction::Restrict,
        Some(ReferentialAction::Cascade) => RefAction::Cascade,
        Some(ReferentialAction::SetNull) => RefAction::SetNull,
        Some(ReferentialAction::SetDefault) => RefAction::SetDefault,
    }
}

/// PostgreSQL's name for a foreign key: `<table>_<col>[_<col>]_fkey`, cut to 63 bytes, with a
/// number when taken.
fn generated_name(table: &str, columns: &[String], taken: &mut HashSet<String>) -> String {
    let base = format!("{table}_{}", columns.join("_"));
    let mut n = 0;
    loop {
        let suffix = if n == 0 { "_fkey".to_string() } else { format!("_fkey{n}") };
        let mut stem = base.clone();
        while stem.len() + suffix.len() > NAME_LENGTH_MAX {
            stem.pop();
        }
        let name = format!("{stem}{suffix}");
        if taken.insert(name.clone()) {
            return name;
        }
        n += 1;
    }
}

/// Whether PostgreSQL has an equality between key columns of these types (numbers with
/// numbers, text with text, and otherwise the same type).
fn comparable(a: &ArrowType, b: &ArrowType) -> bool {
    let number = |t: &ArrowType| {
        t.is_integer() || t.is_floating() || matches!(t, ArrowType::Decimal128(..) | ArrowType::Decimal256(..))
    };
    let text = |t: &ArrowType| matches!(t, ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View);
    let time = |t: &ArrowType| matches!(t, ArrowType::Date32 | ArrowType::Date64 | ArrowType::Timestamp(..));
    (number(a) && number(b)) || (text(a) && text(b)) || (time(a) && time(b)) || a == b
}

/// A relation registered for the running statement, as SQL.
fn temp_relation(name: &str) -> String {
    format!("{}.{}.{}", quoted(CATALOG_NAME), quoted(TEMP_SCHEMA), quoted(name))
}

/// A query from SQL text Sluice built.
fn query_of(sql: &str) -> Result<datafusion::sql::sqlparser::ast::Query> {
    match crate::syntax::parser::parse_statement_text(sql)? {
        SluiceStatement::Standard(statement) => match *statement {
            Statement::Query(query) => Ok(*query),
            _ => Err(Error::Internal(format!("not a query: {sql}"))),
        },
        _ => Err(Error::Internal(format!("not a query: {sql}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_names_are_postgres_names() {
        let mut taken = HashSet::new();
        assert_eq!(generated_name("child", &["parent_id".into()], &mut taken), "child_parent_id_fkey");
        assert_eq!(generated_name("child", &["parent_id".into()], &mut taken), "child_parent_id_fkey1");
        let long = "t".repeat(70);
        let name = generated_name(&long, &["a".into()], &mut taken);
        assert_eq!(name.len(), NAME_LENGTH_MAX);
        assert!(name.ends_with("_fkey"));
    }

    #[test]
    fn key_types_compare_as_postgres_compares_them() {
        assert!(comparable(&ArrowType::Int32, &ArrowType::Int64));
        assert!(comparable(&ArrowType::Utf8, &ArrowType::LargeUtf8));
        assert!(!comparable(&ArrowType::Utf8, &ArrowType::Int32));
    }
}
