//! `COMMENT ON TABLE | COLUMN | CONSTRAINT`: comments kept in the Delta table, where Spark and
//! delta-rs show them too.
//!
//! - A table's comment is the Delta `metaData.description` (as `CREATE TABLE ... COMMENT` writes
//!   it).
//! - A column's is the `comment` key of its field's metadata in the Delta schema (as a column's
//!   `COMMENT` in CREATE TABLE, and Spark, write it).
//! - A constraint's is the table property `sluice.comment.constraint.<name>`, whatever kind of
//!   constraint it is (CHECK constraints live in Delta properties, keys in `sluice.key.*`
//!   properties, foreign keys in Sluice's catalog): one place for all of them, in the table the
//!   constraint belongs to. DROP CONSTRAINT and RENAME CONSTRAINT (`ddl.rs`) drop and move it.
//!
//! A view is not a Delta table: its comment is kept with its definition in Sluice's catalog.
//! A materialized view's table is rewritten by its maintenance: comments on it are refused
//! (0A000), as are comments on kinds of object Sluice does not have.

use std::collections::HashMap;

use datafusion::sql::sqlparser::ast::{Ident, ObjectName};
use sluice_storage::snapshot::Snapshot;
use sluice_storage::table::Table;

use crate::catalog::{key, TableEntry, TableKind};
use crate::error::{Error, Result};
use crate::names::{normalize, table_name};
use crate::sql::context::{QueryContext, StatementResult};
use crate::syntax::comment::{CommentOn, CommentTarget};

/// The table property prefix of constraint comments.
pub const CONSTRAINT_COMMENT_PREFIX: &str = "sluice.comment.constraint.";

/// The key of a column's comment in its Delta field metadata.
pub const COLUMN_COMMENT_KEY: &str = "comment";

/// The table property that holds the comment of the constraint `name`.
pub fn constraint_comment_key(name: &str) -> String {
    format!("{CONSTRAINT_COMMENT_PREFIX}{name}")
}

/// The comments on a table's constraints, by constraint name, from its properties.
pub fn constraint_comments(configuration: &HashMap<String, String>) -> Vec<(String, String)> {
    let mut comments: Vec<(String, String)> = configuration
        .iter()
        .filter_map(|(key, text)| {
            key.strip_prefix(CONSTRAINT_COMMENT_PREFIX).map(|name| (name.to_string(), text.clone()))
        })
        .collect();
    comments.sort();
    comments
}

/// The kind of relation a COMMENT ON names, for its checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Named {
    Table,
    View,
    MaterializedView,
}

impl QueryContext {
    /// Runs a `COMMENT ON`.
    pub(crate) async fn comment_on(&self, comment: CommentOn) -> Result<StatementResult> {
        let CommentOn { target, comment } = comment;
        match target {
            CommentTarget::Table(name) => {
                let (entry, table, snapshot) = self.commented_table(&name, Named::Table).await?;
                if snapshot.metadata().description != comment {
                    let outcome = table.set_description(&snapshot, comment).await?;
                    self.metadata_committed(&entry, outcome).await?;
                }
            }
            CommentTarget::Column { table: name, column } => {
                let (entry, table, snapshot) = self.commented_table(&name, Named::Table).await?;
                self.comment_on_column(&entry, &table, &snapshot, &column, comment).await?;
            }
            CommentTarget::Constraint { name: constraint, table: name } => {
                let (entry, table, snapshot) = self.commented_table(&name, Named::Table).await?;
                self.comment_on_constraint(&entry, &table, &snapshot, &constraint, comment).await?;
            }
            CommentTarget::View(name) => {
                let qualified = table_name(&name)?;
                self.commented_kind(&qualified, Named::View)?;
                self.comment_on_view(&qualified, comment).await?;
            }
            CommentTarget::MaterializedView(name) => {
                self.commented_table(&name, Named::MaterializedView).await?;
            }
            CommentTarget::Other(kind) => {
                return Err(Error::NotSupported(format!(
                    "COMMENT ON {kind} (Sluice keeps comments on tables, columns and constraints)"
                )))
            }
        }
        self.clear_statement_state();
        Ok(StatementResult::command("COMMENT"))
    }

    /// The table a comment goes on, checked to be of the kind the statement names (42809 as
    /// PostgreSQL's `"t" is not a view`); views and materialized views are refused (see the
    /// module docs).
    async fn commented_table(
        &self,
        name: &ObjectName,
        named: Named,
    ) -> Result<(TableEntry, std::sync::Arc<Table>, std::sync::Arc<Snapshot>)> {
        let qualified = table_name(name)?;
        match self.commented_kind(&qualified, named)? {
            Named::Table => self.resolve_table(name).await,
            Named::View => Err(Error::Internal("a view's comment is not a table's".into())),
            Named::MaterializedView => Err(Error::NotSupported(
                "COMMENT ON MATERIALIZED VIEW (its Delta table is rewritten by its maintenance)".into(),
            )),
        }
    }

    /// The kind of relation `qualified` is, checked to be `named` (42809 as PostgreSQL's `"t"
    /// is not a view`; 42P01 when there is none).
    fn commented_kind(&self, qualified: &crate::names::TableName, named: Named) -> Result<Named> {
        let state = self.catalog_state();
        let is_view = state.views.contains_key(&key(&qualified.schema, &qualified.name));
        let entry = state.table(&qualified.schema, &qualified.name);
        let found = match (is_view, entry.map(|e| e.kind)) {
            (true, _) => Named::View,
            (false, Some(TableKind::MaterializedView)) => Named::MaterializedView,
            (false, Some(_)) => Named::Table,
            (false, None) => return Err(Error::UndefinedTable(qualified.to_string())),
        };
        if found != named {
            let kind = match named {
                Named::Table => "table",
                Named::View => "view",
                Named::MaterializedView => "materialized view",
            };
            return Err(Error::data("42809", format!("\"{}\" is not a {kind}", qualified.name)));
        }
        Ok(found)
    }

    /// Sets or removes the `comment` of a column's Delta field metadata.
    async fn comment_on_column(
        &self,
        entry: &TableEntry,
        table: &Table,
        snapshot: &Snapshot,
        column: &Ident,
        comment: Option<String>,
    ) -> Result<()> {
        let column = normalize(column);
        let Some(field) = snapshot.schema().fields.iter().find(|f| f.name == column) else {
            return Err(Error::data(
                "42703",
                format!("column \"{column}\" of relation \"{}\" does not exist", entry.name),
            ));
        };
        let current = field.metadata.get(COLUMN_COMMENT_KEY).and_then(|v| v.as_str());
        if current == comment.as_deref() {
            return Ok(());
        }
        self.change_column(entry, table, snapshot, &column, "CHANGE COLUMN", |field| match comment {
            Some(text) => {
                field.metadata.insert(COLUMN_COMMENT_KEY.to_string(), serde_json::Value::String(text));
            }
            None => {
                field.metadata.remove(COLUMN_COMMENT_KEY);
            }
        })
        .await?;
        Ok(())
    }

    /// Sets or removes the `sluice.comment.constraint.<name>` property of a table, for one of its
    /// constraints (a PRIMARY KEY, UNIQUE, CHECK or FOREIGN KEY constraint).
    async fn comment_on_constraint(
        &self,
        entry: &TableEntry,
        table: &Table,
        snapshot: &Snapshot,
        constraint: &Ident,
        comment: Option<String>,
    ) -> Result<()> {
        let name = normalize(constraint);
        let configuration = snapshot.configuration();
        let exists = crate::keys::key_defs(configuration).iter().any(|k| !k.index && k.name == name)
            || snapshot.constraints().iter().any(|(check, _)| *check == name)
            || entry.foreign_keys.iter().any(|k| k.name == name);
        if !exists {
            return Err(Error::data(
                "42704",
                format!("constraint \"{name}\" for table \"{}\" does not exist", entry.name),
            ));
        }
        let property = constraint_comment_key(&name);
        if configuration.get(&property) == comment.as_ref() {
            return Ok(());
        }
        let outcome = match comment {
            Some(text) => table.set_properties(HashMap::from([(property, text)]), &[]).await?,
            None => table.set_properties(HashMap::new(), &[property]).await?,
        };
        self.metadata_committed(entry, outcome).await?;
        Ok(())
    }

    /// After a constraint of `entry` was renamed from `old` to `new` somewhere other than its
    /// Delta properties (a foreign key, in the catalog), its comment follows it. `configuration`
    /// is the table's properties before.
    pub(crate) async fn rename_constraint_comment(
        &self,
        entry: &TableEntry,
        table: &Table,
        configuration: &HashMap<String, String>,
        old: &str,
        new: &str,
    ) -> Result<()> {
        let old_key = constraint_comment_key(old);
        let Some(text) = configuration.get(&old_key).cloned() else { return Ok(()) };
        let outcome = table.set_properties(HashMap::from([(constraint_comment_key(new), text)]), &[old_key]).await?;
        self.metadata_committed(entry, outcome).await?;
        Ok(())
    }

    /// After a constraint of `entry` was dropped somewhere other than its Delta properties (a
    /// foreign key, from the catalog), its comment goes too.
    pub(crate) async fn drop_constraint_comment(
        &self,
        entry: &TableEntry,
        table: &Table,
        configuration: &HashMap<String, String>,
        name: &str,
    ) -> Result<()> {
        let property = constraint_comment_key(name);
        if !configuration.contains_key(&property) {
            return Ok(());
        }
        let outcome = table.set_properties(HashMap::new(), &[property]).await?;
        self.metadata_committed(entry, outcome).await?;
        Ok(())
    }
}
