//! `CREATE SEQUENCE`, `ALTER SEQUENCE` and `DROP SEQUENCE` on standalone sequences (see
//! [`crate::sequence`] for their definitions' rules and values, [`super::sequences`] for the
//! functions that read and move them).
//!
//! A sequence shares the relations' namespace: its name may not be a table's, a view's or a
//! SERIAL column's sequence's (42P07). In a transaction block, CREATE, DROP and ALTER ... RENAME
//! TO are held until COMMIT like a table's DDL (see [`crate::catalog::changes`]). Other ALTER
//! SEQUENCEs change how the sequence's values go on, and its values are not transactional here
//! (PostgreSQL makes them transactional from such an ALTER on), so in a block they commit when
//! they return, and a ROLLBACK that would have to undo one is refused (see
//! [`crate::transaction`]).
//!
//! `OWNED BY table.column` ties the sequence to a column of a table in the same schema: DROP
//! TABLE drops it. A column DEFAULT that calls `nextval` on a sequence holds DROP SEQUENCE back
//! (2BP01) unless CASCADE, which drops the default.

use datafusion::sql::sqlparser::ast::ObjectName;

use crate::catalog::{key, CatalogState, SequenceEntry, SequenceOwner, TableEntry};
use crate::error::{Error, Result};
use crate::names::{table_name, TableName};
use crate::sequence::SequenceOptions;
use crate::sql::context::{QueryContext, StatementResult};
use crate::syntax::sequence::{AlterSequence, OwnedBy, SequenceStatement};

/// Whether a relation of any kind (not a sequence) already has the name.
fn relation_taken(state: &CatalogState, name: &TableName) -> bool {
    let key = key(&name.schema, &name.name);
    state.tables.contains_key(&key) || state.views.contains_key(&key)
}

/// Whether a column default calls `nextval` (or another sequence function) on `name`.
fn default_uses(default: &str, name: &TableName) -> bool {
    if !default.to_ascii_lowercase().contains(&name.name.to_ascii_lowercase()) {
        return false;
    }
    let Ok(expr) = super::sequences::parse_default(default) else { return false };
    datafusion::sql::sqlparser::ast::visit_expressions(&expr, |expr| {
        let named = super::sequences::called_sequence(expr).and_then(|text| crate::names::parse_table_name(&text).ok());
        if named.is_some_and(|named| named == *name) {
            std::ops::ControlFlow::Break(())
        } else {
            std::ops::ControlFlow::Continue(())
        }
    })
    .is_break()
}

/// The columns whose defaults use the sequence `name`: table key and column.
fn dependent_defaults(state: &CatalogState, name: &TableName) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for table in state.tables.values() {
        for (column, default) in &table.defaults {
            if default_uses(default, name) {
                out.push((table.qualified_name(), column.clone()));
            }
        }
    }
    out
}

impl QueryContext {
    /// Runs `CREATE SEQUENCE` or `ALTER SEQUENCE`.
    pub(crate) async fn sequence_statement(&self, statement: SequenceStatement) -> Result<StatementResult> {
        match statement {
            SequenceStatement::Create { name, if_not_exists, temporary, options, owned_by } => {
                if temporary {
                    return Err(Error::NotSupported(
                        "CREATE TEMPORARY SEQUENCE (Sluice's sequences are permanent: create one and drop it)".into(),
                    ));
                }
                self.create_sequence(&name, if_not_exists, &options, owned_by.as_ref()).await
            }
            SequenceStatement::Alter { name, if_exists, change } => match change {
                AlterSequence::RenameTo(new) => self.rename_sequence(&name, if_exists, &new).await,
                AlterSequence::Options { options, owned_by } => {
                    self.alter_sequence(&name, if_exists, &options, owned_by.as_ref()).await
                }
                AlterSequence::Other(words) => Err(Error::NotSupported(format!(
                    "ALTER SEQUENCE ... {words} (Sluice's ALTER SEQUENCE takes the sequence options, RESTART, OWNED \
                     BY and RENAME TO)"
                ))),
            },
        }
    }

    async fn create_sequence(
        &self,
        name: &ObjectName,
        if_not_exists: bool,
        options: &SequenceOptions,
        owned_by: Option<&OwnedBy>,
    ) -> Result<StatementResult> {
        let done = || Ok(StatementResult::command("CREATE SEQUENCE"));
        let name = table_name(name)?;
        let state = self.catalog_state();
        if !state.schemas.contains_key(&name.schema) {
            return Err(Error::UndefinedSchema(name.schema.clone()));
        }
        let taken = state.sequence(&name.schema, &name.name).is_some()
            || relation_taken(&state, &name)
            || self.column_sequence(&name).await?.is_some();
        if taken {
            return if if_not_exists { done() } else { Err(Error::DuplicateTable(name.name.clone())) };
        }
        let blank = SequenceEntry::blank(
            uuid::Uuid::new_v4().to_string(),
            name.schema.clone(),
            name.name.clone(),
            chrono::Utc::now().timestamp_millis(),
        );
        let (mut entry, _) = crate::sequence::define(&blank, true, options, 0)?;
        entry.owned_by = match owned_by {
            Some(owned_by) => self.sequence_owner(&name, owned_by).await?,
            None => None,
        };
        let created = self
            .update_catalog(|state| {
                let key = entry.qualified_name();
                if state.sequences.contains_key(&key) || relation_taken(state, &name) {
                    return if if_not_exists { Ok(false) } else { Err(Error::DuplicateTable(name.name.clone())) };
                }
                state.sequences.insert(key, entry.clone());
                Ok(true)
            })
            .await;
        created.and_then(|_| done())
    }

    /// The column `OWNED BY` names (None for `OWNED BY NONE`), checked as PostgreSQL checks it.
    async fn sequence_owner(&self, sequence: &TableName, owned_by: &OwnedBy) -> Result<Option<SequenceOwner>> {
        let OwnedBy::Column(column_name) = owned_by else { return Ok(None) };
        let mut parts = column_name.clone();
        let column = match parts.0.pop().as_ref().and_then(|part| part.as_ident()) {
            Some(column) if !parts.0.is_empty() => crate::names::normalize(column),
            _ => return Err(Error::data("42601", "invalid OWNED BY option (OWNED BY table.column or OWNED BY NONE)")),
        };
        let table = table_name(&parts)?;
        let (entry, _, snapshot) = self.resolve_table(&crate::names::object_name(&table.schema, &table.name)).await?;
        if entry.kind != crate::catalog::TableKind::Table {
            return Err(Error::data("42809", format!("sequence cannot be owned by relation \"{}\"", entry.name)));
        }
        if entry.schema != sequence.schema {
            return Err(Error::data("55000", "sequence must be in same schema as table it is linked to"));
        }
        if snapshot.schema().field(&column).is_none() {
            return Err(Error::data(
                "42703",
                format!("column \"{column}\" of relation \"{}\" does not exist", entry.name),
            ));
        }
        Ok(Some(SequenceOwner { table_id: entry.id, column }))
    }

    /// The standalone sequence `name` names: None when there is none and `if_exists`; 42809 when
    /// it is another kind of relation, 42P01 when there is none.
    fn named_sequence(&self, name: &TableName, if_exists: bool) -> Result<Option<SequenceEntry>> {
        let state = self.catalog_state();
        if let Some(entry) = state.sequence(&name.schema, &name.name) {
            return Ok(Some(entry.clone()));
        }
        if relation_taken(&state, name) {
            return Err(Error::data("42809", format!("\"{}\" is not a sequence", name.name)));
        }
        if if_exists {
            return Ok(None);
        }
        Err(Error::data("42P01", format!("relation \"{}\" does not exist", name.name)))
    }

    async fn rename_sequence(
        &self,
        name: &ObjectName,
        if_exists: bool,
        new: &datafusion::sql::sqlparser::ast::Ident,
    ) -> Result<StatementResult> {
        let name = table_name(name)?;
        let Some(entry) = self.named_sequence(&name, if_exists)? else {
            self.notice(format!("relation \"{}\" does not exist, skipping", name.name));
            return Ok(StatementResult::command("ALTER SEQUENCE"));
        };
        let new = TableName { schema: entry.schema.clone(), name: crate::names::normalize(new) };
        if self.column_sequence(&new).await?.is_some() {
            return Err(Error::DuplicateTable(new.name.clone()));
        }
        self.update_catalog(|state| {
            if state.sequence(&new.schema, &new.name).is_some() || relation_taken(state, &new) {
                return Err(Error::DuplicateTable(new.name.clone()));
            }
            let mut moved = state
                .sequences
                .remove(&entry.qualified_name())
                .ok_or_else(|| Error::data("42P01", format!("relation \"{}\" does not exist", name.name)))?;
            moved.name = new.name.clone();
            state.sequences.insert(moved.qualified_name(), moved);
            // Column defaults follow the sequence (PostgreSQL's name it by OID).
            for table in state.tables.values_mut() {
                for default in table.defaults.values_mut() {
                    if let Some(renamed) = super::sequences::renamed_in_default(default, &name, &new) {
                        *default = renamed;
                    }
                }
            }
            Ok(())
        })
        .await?;
        Ok(StatementResult::command("ALTER SEQUENCE"))
    }

    async fn alter_sequence(
        &self,
        name: &ObjectName,
        if_exists: bool,
        options: &SequenceOptions,
        owned_by: Option<&OwnedBy>,
    ) -> Result<StatementResult> {
        let done = || Ok(StatementResult::command("ALTER SEQUENCE"));
        let name = table_name(name)?;
        let Some(entry) = self.named_sequence(&name, if_exists)? else {
            self.notice(format!("relation \"{}\" does not exist, skipping", name.name));
            return done();
        };
        let state = self.db.sequences.state(&self.db.catalog, &entry).await;
        let (mut altered, restart) = crate::sequence::define(&entry, false, options, state.last_value)?;
        if let Some(owned_by) = owned_by {
            altered.owned_by = self.sequence_owner(&name, owned_by).await?;
        }
        if altered != entry {
            self.update_catalog(|state| {
                let key = entry.qualified_name();
                match state.sequences.get(&key) {
                    Some(now) if now.id == entry.id => {
                        state.sequences.insert(key, altered.clone());
                        Ok(())
                    }
                    _ => Err(Error::data("42P01", format!("relation \"{}\" does not exist", name.name))),
                }
            })
            .await?;
        }
        match restart {
            Some(value) => self.db.sequences.set(&self.db.catalog, &altered, value, false).await?,
            // What was reserved under the old definition is given back.
            None => self.db.sequences.settle(&self.db.catalog, &altered).await?,
        }
        done()
    }

    /// `DROP SEQUENCE a, b [CASCADE | RESTRICT]`: all or none.
    pub(crate) async fn drop_sequences(
        &self,
        names: &[ObjectName],
        if_exists: bool,
        cascade: bool,
    ) -> Result<StatementResult> {
        let names: Vec<TableName> = names.iter().map(table_name).collect::<Result<_>>()?;
        let mut dropped: Vec<SequenceEntry> = Vec::new();
        for name in &names {
            if self.column_sequence(name).await?.is_some() {
                return Err(Error::data(
                    "2BP01",
                    format!(
                        "cannot drop sequence {} because other objects depend on it (it is the sequence of a SERIAL \
                         or identity column: drop the column or its default)",
                        name.name
                    ),
                ));
            }
            match self.named_sequence(name, if_exists) {
                Ok(Some(entry)) => dropped.push(entry),
                Ok(None) => self.notice(format!("sequence \"{}\" does not exist, skipping", name.name)),
                Err(e) if e.sqlstate() == "42P01" => {
                    return Err(Error::data("42P01", format!("sequence \"{}\" does not exist", name.name)))
                }
                Err(e) => return Err(e),
            }
        }
        let (held, ()) = self
            .update_catalog(|state| {
                for entry in &dropped {
                    let name = TableName { schema: entry.schema.clone(), name: entry.name.clone() };
                    let dependents = dependent_defaults(state, &name);
                    if !dependents.is_empty() && !cascade {
                        let (table, column) = dependents.first().cloned().unwrap_or_default();
                        return Err(Error::data(
                            "2BP01",
                            format!(
                                "cannot drop sequence {} because other objects depend on it (default value for \
                                 column {column} of table {table} depends on it; use DROP ... CASCADE to drop the \
                                 default too)",
                                entry.name
                            ),
                        ));
                    }
                    for (table, column) in dependents {
                        if let Some(table) = state.tables.get_mut(&table) {
                            table.defaults.remove(&column);
                        }
                    }
                    if state.sequences.remove(&entry.qualified_name()).is_none() {
                        return Err(Error::data("42P01", format!("sequence \"{}\" does not exist", entry.name)));
                    }
                    state.sequence_marks.remove(&entry.id);
                }
                Ok(())
            })
            .await?;
        if !held {
            for entry in &dropped {
                self.db.sequences.forget(&entry.id);
            }
        }
        Ok(StatementResult::command("DROP SEQUENCE"))
    }
}

/// The sequences owned by a table's columns (DROP TABLE drops them with it): removes them and
/// their marks from `state`.
pub(crate) fn drop_owned_sequences(state: &mut CatalogState, table: &TableEntry) {
    let owned: Vec<SequenceEntry> = state
        .sequences
        .values()
        .filter(|s| s.owned_by.as_ref().is_some_and(|owner| owner.table_id == table.id))
        .cloned()
        .collect();
    for sequence in owned {
        state.sequences.remove(&sequence.qualified_name());
        state.sequence_marks.remove(&sequence.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_default_uses_the_sequence_it_calls() {
        let name = TableName { schema: "public".into(), name: "s".into() };
        assert!(default_uses("nextval('s')", &name));
        assert!(default_uses("nextval('public.s'::regclass)", &name));
        assert!(default_uses("NEXTVAL('S')", &name));
        assert!(!default_uses("nextval('\"S\"')", &name));
        assert!(!default_uses("nextval('ss')", &name));
        assert!(!default_uses("'s'", &name));
    }
}
