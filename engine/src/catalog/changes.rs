//! The catalog changes a transaction block holds until COMMIT: transactional DDL.
//!
//! DDL in a block (CREATE and DROP of tables, views and schemas, CREATE TABLE AS, ALTER ...
//! RENAME TO) changes the block's own view of the catalog: the block sees what others committed
//! with its own changes over it, and nobody else sees them before COMMIT. Each changed object
//! (a schema, table, view, ... by its catalog key) is kept with its value as the block first found
//! it (`before`) and as the block left it (`after`).
//!
//! COMMIT applies every `after` to the newest catalog as one catalog version, provided each
//! object is still what the block found (else another session changed the same object
//! concurrently: 40001, nothing applied). With table writes in the same block the catalog version
//! is the transaction's last step and its commit point (see [`crate::staging`]).
//!
//! Files: a table the block creates gets its folder at once, a new one that no catalog names, so
//! nobody else sees it; ROLLBACK (or ROLLBACK TO a savepoint before it) deletes it. A table the
//! block drops (or replaces) keeps its folder until COMMIT, after which it is deleted.
//!
//! What is checked at COMMIT is the objects the block changed, not every object its DDL looked
//! at: a view another session creates over a table this block drops, both committing at once,
//! is not caught (PostgreSQL's locks would order them).

use std::collections::{BTreeMap, BTreeSet};

use super::{
    CatalogState, EnumEntry, FlowEntry, RoleEntry, SchemaEntry, SequenceEntry, SourceEntry, SubscriptionEntry,
    TableEntry, ViewEntry,
};
use crate::error::{Error, Result};

/// One object as the block found it and as it left it (None: absent).
#[derive(Debug, Clone, PartialEq)]
struct Change<V> {
    before: Option<V>,
    after: Option<V>,
}

type Changes<V> = BTreeMap<String, Change<V>>;

/// A block's changes to the catalog, and the table folders they made and freed.
#[derive(Debug, Clone, Default)]
pub struct CatalogChanges {
    schemas: Changes<SchemaEntry>,
    tables: Changes<TableEntry>,
    roles: Changes<RoleEntry>,
    flows: Changes<FlowEntry>,
    sources: Changes<SourceEntry>,
    subscriptions: Changes<SubscriptionEntry>,
    views: Changes<ViewEntry>,
    /// Sequence definitions (their marks are not transactional: see [`CatalogState::sequence_marks`]).
    sequences: Changes<SequenceEntry>,
    /// Enum types (`CREATE TYPE ... AS ENUM`).
    enums: Changes<EnumEntry>,
    /// Managed tables whose folders the block created, oldest first (a rollback deletes them).
    created: Vec<TableEntry>,
    /// Tables the block dropped or replaced (COMMIT deletes the managed ones' folders).
    dropped: Vec<TableEntry>,
}

/// What changed between two versions of one kind of object.
fn diff_map<V: Clone + PartialEq>(before: &BTreeMap<String, V>, after: &BTreeMap<String, V>) -> Changes<V> {
    let keys: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    keys.into_iter()
        .filter_map(|key| {
            let (was, is) = (before.get(key), after.get(key));
            (was != is).then(|| (key.clone(), Change { before: was.cloned(), after: is.cloned() }))
        })
        .collect()
}

/// Adds a statement's changes to the block's: an object the block changed already keeps its
/// first `before`, and is no change any more when it is back to it.
fn merge_map<V: PartialEq>(changes: &mut Changes<V>, step: Changes<V>) {
    for (key, change) in step {
        match changes.get_mut(&key) {
            Some(held) => {
                held.after = change.after;
                if held.after == held.before {
                    changes.remove(&key);
                }
            }
            None => {
                changes.insert(key, change);
            }
        }
    }
}

fn apply_map<V: Clone>(changes: &Changes<V>, map: &mut BTreeMap<String, V>) {
    for (key, change) in changes {
        match &change.after {
            Some(value) => map.insert(key.clone(), value.clone()),
            None => map.remove(key),
        };
    }
}

fn check_map<V: PartialEq>(changes: &Changes<V>, map: &BTreeMap<String, V>, kind: &str) -> Result<()> {
    match changes.iter().find(|(key, change)| map.get(*key) != change.before.as_ref()) {
        Some((key, _)) => Err(Error::SerializationFailure(format!(
            "could not serialize access due to a concurrent change of {kind} {key} (another transaction changed \
             it since this one did)"
        ))),
        None => Ok(()),
    }
}

impl CatalogChanges {
    /// Whether the block changed nothing in the catalog and made no table folder.
    pub fn is_empty(&self) -> bool {
        !self.changes_catalog() && self.created.is_empty() && self.dropped.is_empty()
    }

    /// Whether any catalog object changed.
    pub fn changes_catalog(&self) -> bool {
        !(self.schemas.is_empty()
            && self.tables.is_empty()
            && self.roles.is_empty()
            && self.flows.is_empty()
            && self.sources.is_empty()
            && self.subscriptions.is_empty()
            && self.views.is_empty()
            && self.sequences.is_empty()
            && self.enums.is_empty())
    }

    /// What a DDL statement changed: `before` and `after` are the block's view of the
    /// persisted catalog (no temporary schemas) around the statement.
    pub fn between(before: &CatalogState, after: &CatalogState) -> Self {
        CatalogChanges {
            schemas: diff_map(&before.schemas, &after.schemas),
            tables: diff_map(&before.tables, &after.tables),
            roles: diff_map(&before.roles, &after.roles),
            flows: diff_map(&before.flows, &after.flows),
            sources: diff_map(&before.sources, &after.sources),
            subscriptions: diff_map(&before.subscriptions, &after.subscriptions),
            views: diff_map(&before.views, &after.views),
            sequences: diff_map(&before.sequences, &after.sequences),
            enums: diff_map(&before.enums, &after.enums),
            created: vec![],
            dropped: vec![],
        }
    }

    /// Records what a DDL statement changed (see [`CatalogChanges::between`]).
    pub fn record(&mut self, before: &CatalogState, after: &CatalogState) {
        self.merge(Self::between(before, after));
    }

    /// Adds a statement's changes (from [`CatalogChanges::between`]) to the block's.
    pub fn merge(&mut self, step: CatalogChanges) {
        merge_map(&mut self.schemas, step.schemas);
        merge_map(&mut self.tables, step.tables);
        merge_map(&mut self.roles, step.roles);
        merge_map(&mut self.flows, step.flows);
        merge_map(&mut self.sources, step.sources);
        merge_map(&mut self.subscriptions, step.subscriptions);
        merge_map(&mut self.views, step.views);
        merge_map(&mut self.sequences, step.sequences);
        merge_map(&mut self.enums, step.enums);
    }

    /// Lays the block's changes over `state` (the block's view of the catalog).
    pub fn apply_to(&self, state: &mut CatalogState) {
        apply_map(&self.schemas, &mut state.schemas);
        apply_map(&self.tables, &mut state.tables);
        apply_map(&self.roles, &mut state.roles);
        apply_map(&self.flows, &mut state.flows);
        apply_map(&self.sources, &mut state.sources);
        apply_map(&self.subscriptions, &mut state.subscriptions);
        apply_map(&self.views, &mut state.views);
        apply_map(&self.sequences, &mut state.sequences);
        apply_map(&self.enums, &mut state.enums);
        // A dropped sequence's mark goes with it (a rename keeps the id, so the mark too).
        for change in self.sequences.values() {
            if let (Some(before), None) = (&change.before, &change.after) {
                state.sequence_marks.remove(&before.id);
            }
        }
    }

    /// Checks that every object the block changed is still as the block found it in `state`
    /// (the newest catalog, at COMMIT): 40001 otherwise.
    pub fn check(&self, state: &CatalogState) -> Result<()> {
        check_map(&self.schemas, &state.schemas, "schema")?;
        check_map(&self.tables, &state.tables, "table")?;
        check_map(&self.roles, &state.roles, "role")?;
        check_map(&self.flows, &state.flows, "flow")?;
        check_map(&self.sources, &state.sources, "source")?;
        check_map(&self.subscriptions, &state.subscriptions, "subscription")?;
        check_map(&self.views, &state.views, "view")?;
        check_map(&self.sequences, &state.sequences, "sequence")?;
        check_map(&self.enums, &state.enums, "type")
    }

    /// Whether every object a statement changed (`step`, from [`CatalogChanges::between`]) is a
    /// table or sequence this block created (nobody else can see such a change, whatever made it).
    pub fn only_created_objects(&self, step: &CatalogChanges) -> bool {
        step.schemas.is_empty()
            && step.roles.is_empty()
            && step.flows.is_empty()
            && step.sources.is_empty()
            && step.subscriptions.is_empty()
            && step.views.is_empty()
            && step.enums.is_empty()
            && step.sequences.keys().all(|key| self.sequences.get(key).is_some_and(|c| c.before.is_none()))
            && step.tables.values().all(|change| {
                [&change.before, &change.after].into_iter().flatten().all(|entry| self.created_table(&entry.id))
            })
    }

    /// Notes a table whose folder the block created.
    pub fn created(&mut self, entry: TableEntry) {
        self.created.push(entry);
    }

    /// Notes a table the block dropped (or replaced): its folder goes at COMMIT.
    pub fn dropped(&mut self, entry: TableEntry) {
        self.dropped.push(entry);
    }

    /// Whether the block created the table with this id.
    pub fn created_table(&self, id: &str) -> bool {
        self.created.iter().any(|t| t.id == id)
    }

    /// How many tables the block had created (a savepoint's position among them).
    pub fn created_count(&self) -> usize {
        self.created.len()
    }

    /// The position among the block's created tables of the one with this id.
    pub fn created_position(&self, id: &str) -> Option<usize> {
        self.created.iter().position(|t| t.id == id)
    }

    /// The tables this block created that `kept` (an earlier state of it) had not: what a
    /// rollback to `kept` must delete.
    pub fn created_since(&self, kept: &CatalogChanges) -> Vec<TableEntry> {
        self.created.iter().filter(|t| !kept.created_table(&t.id)).cloned().collect()
    }

    /// The tables whose folders go once the block committed: those it dropped, and those it
    /// created that the committed catalog does not name (created and dropped in the block).
    pub fn folders_freed(&self) -> Vec<TableEntry> {
        let mut freed = self.gone();
        freed.retain(|t| t.managed);
        freed
    }

    /// Whether the block dropped (or replaced) the table with this id, or created and dropped it:
    /// its staged rows are not to be committed.
    pub fn drops_table(&self, id: &str) -> bool {
        self.gone().iter().any(|t| t.id == id)
    }

    /// The tables the block dropped, and those it created that the committed catalog does not name.
    fn gone(&self) -> Vec<TableEntry> {
        let mut freed = self.dropped.clone();
        for created in &self.created {
            let named = self.tables.values().any(|c| c.after.as_ref().is_some_and(|t| t.id == created.id));
            if !named && !freed.iter().any(|t| t.id == created.id) {
                freed.push(created.clone());
            }
        }
        freed
    }

    /// The tables the block created (a full rollback deletes them all).
    pub fn created_tables(&self) -> &[TableEntry] {
        &self.created
    }

    /// The flows the block's changes remove.
    pub fn flows_removed(&self) -> Vec<String> {
        self.flows.iter().filter(|(_, c)| c.before.is_some() && c.after.is_none()).map(|(k, _)| k.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(name: &str, id: &str) -> TableEntry {
        TableEntry::for_tests("public", name, id, name)
    }

    fn with(tables: &[TableEntry]) -> CatalogState {
        let mut state = CatalogState::default();
        for t in tables {
            state.tables.insert(t.qualified_name(), t.clone());
        }
        state
    }

    #[test]
    fn a_change_undone_in_the_block_leaves_nothing_to_commit() {
        let base = with(&[table("a", "1")]);
        let mut changes = CatalogChanges::default();
        let renamed = with(&[table("b", "1")]);
        changes.record(&base, &renamed);
        assert!(changes.changes_catalog());
        changes.record(&renamed, &base);
        assert!(!changes.changes_catalog());
    }

    #[test]
    fn commit_applies_onto_others_changes_and_refuses_a_changed_object() {
        let base = with(&[table("a", "1")]);
        let mut changes = CatalogChanges::default();
        let mut mine = base.clone();
        mine.tables.remove("public.a");
        mine.tables.insert("public.c".into(), table("c", "3"));
        changes.record(&base, &mine);
        // Another session added b: the block's commit keeps it.
        let mut newest = with(&[table("a", "1"), table("b", "2")]);
        changes.check(&newest).unwrap();
        changes.apply_to(&mut newest);
        assert_eq!(newest.tables.keys().collect::<Vec<_>>(), ["public.b", "public.c"]);
        // Another session renamed a away: the block's DROP of a is a conflict.
        let moved = with(&[table("x", "1")]);
        assert!(matches!(changes.check(&moved), Err(Error::SerializationFailure(_))));
        // Another session created c too.
        let both = with(&[table("a", "1"), table("c", "9")]);
        assert!(matches!(changes.check(&both), Err(Error::SerializationFailure(_))));
    }

    #[test]
    fn a_table_created_and_dropped_in_the_block_frees_its_folder() {
        let base = CatalogState::default();
        let mut changes = CatalogChanges::default();
        let made = with(&[table("t", "1")]);
        changes.created(table("t", "1"));
        changes.record(&base, &made);
        assert!(changes.only_created_objects(&CatalogChanges::between(&base, &made)));
        assert!(changes.folders_freed().is_empty());
        changes.record(&made, &base);
        changes.dropped(table("t", "1"));
        assert_eq!(changes.folders_freed().len(), 1);
        assert!(!changes.changes_catalog());
        assert!(!changes.is_empty());
    }
}
