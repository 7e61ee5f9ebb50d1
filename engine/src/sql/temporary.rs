//! Temporary tables (`CREATE TEMP TABLE`, also `AS SELECT`), as PostgreSQL has them: visible only
//! to the session that made them, in its own schema `pg_temp_<n>` (which `pg_temp` names), found
//! before the other schemas by unqualified names, and dropped when the session ends. `ON COMMIT
//! DELETE ROWS` empties one at the end of every transaction, `ON COMMIT DROP` drops it then.
//!
//! A temporary table is a Delta table like any other (so DML, keys and COPY work on it unchanged)
//! in the warehouse's scratch folder `_sluice/temp/`, and its catalog entry lives in the
//! catalog's overlay of temporary schemas, never written to the catalog's versions (see
//! [`crate::catalog`]). What makes a table the session's is its name: [`Namespace::qualify`]
//! rewrites each relation a statement names that is one of the session's temporary tables
//! (unqualified, or in `pg_temp`) to its `pg_temp_<n>` name before the statement runs, and
//! refuses names in another session's temporary schema (0A000, as PostgreSQL).
//!
//! In a transaction block, creating a temporary table is undone by ROLLBACK (and by ROLLBACK TO
//! a savepoint made before it): the table is dropped. Its rows, written in the block, are staged
//! like any table's.
//!
//! Temporary views (`CREATE TEMP VIEW`, and a view that reads a temporary table) live in the
//! same schema and go with it.
//!
//! Not here: temporary sequences; a table left by a process that
//! crashed stays in `_sluice/temp/` (no catalog names it) until removed by hand.

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};

use datafusion::sql::sqlparser::ast::{
    visit_relations_mut, Ident, ObjectName, ObjectNamePart, ObjectType, Query, Statement, Visit, Visitor,
};

use crate::catalog::{is_temporary_schema, CatalogState, TableEntry, TEMPORARY_SCHEMA_PREFIX};
use crate::error::{Error, Result};
use crate::names::{normalize, TableName, CATALOG_NAME};
use crate::sql::context::QueryContext;
use crate::syntax::parser::{OnCommit, SluiceStatement};
use crate::warehouse::Warehouse;

/// The name that stands for the session's own temporary schema.
pub const SESSION_TEMPORARY_SCHEMA: &str = "pg_temp";

/// The option of a temporary table's catalog entry that holds its `ON COMMIT` clause.
pub const ON_COMMIT_OPTION: &str = "on_commit";

/// Where temporary tables' folders go, inside the warehouse.
pub const TEMPORARY_FOLDER: &str = "_sluice/temp";

/// Sessions' temporary schemas are numbered from 1 in each process.
static NEXT_NAMESPACE: AtomicU64 = AtomicU64::new(1);

/// One session's temporary schema.
#[derive(Debug)]
pub struct Namespace {
    schema: String,
}

impl Default for Namespace {
    fn default() -> Self {
        Self::new()
    }
}

fn other_session() -> Error {
    Error::NotSupported("cannot access temporary tables of other sessions".into())
}

impl Namespace {
    pub fn new() -> Self {
        let number = NEXT_NAMESPACE.fetch_add(1, Ordering::Relaxed);
        Self { schema: format!("{TEMPORARY_SCHEMA_PREFIX}{number}") }
    }

    /// The schema's name (`pg_temp_<n>`).
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// Whether the session has a temporary relation now.
    pub fn exists(&self, state: &CatalogState) -> bool {
        state.schemas.contains_key(&self.schema)
    }

    /// The session's temporary tables and their `ON COMMIT` clauses.
    pub fn tables(&self, state: &CatalogState) -> Vec<(String, OnCommit)> {
        state
            .tables_in(&self.schema)
            .map(|t| {
                let on_commit = t.options.get(ON_COMMIT_OPTION).and_then(|w| OnCommit::from_words(w));
                (t.name.clone(), on_commit.unwrap_or(OnCommit::PreserveRows))
            })
            .collect()
    }

    /// Rewrites the relations `statement` names that are the session's temporary tables to
    /// their `pg_temp_<n>` names, and a new temporary table's name into the session's schema.
    pub fn qualify(&self, state: &CatalogState, statement: &mut SluiceStatement) -> Result<()> {
        let ctes = cte_names(statement);
        let rewrite = |name: &mut ObjectName| self.qualify_relation(state, &ctes, name);
        match statement {
            SluiceStatement::CreateTable(create) => {
                self.qualify_new_table(create)?;
                if let Some(query) = create.query.as_mut() {
                    visit_names(query.as_mut(), rewrite)?;
                }
                // The tables its foreign keys reference (a temporary table's may be temporary).
                for column in create.columns.iter_mut() {
                    for option in column.options.iter_mut() {
                        if let datafusion::sql::sqlparser::ast::ColumnOption::ForeignKey(key) = &mut option.option {
                            rewrite(&mut key.foreign_table)?;
                        }
                    }
                }
                for constraint in create.constraints.iter_mut() {
                    if let datafusion::sql::sqlparser::ast::TableConstraint::ForeignKey(key) = constraint {
                        rewrite(&mut key.foreign_table)?;
                    }
                }
            }
            SluiceStatement::InsertByName { table, query, .. } => {
                rewrite(table)?;
                visit_names(query.as_mut(), rewrite)?;
            }
            SluiceStatement::InsertOverriding { insert, .. } => visit_names(insert.as_mut(), rewrite)?,
            SluiceStatement::DescribeHistory { table, .. }
            | SluiceStatement::Optimize { table, .. }
            | SluiceStatement::DropFeature { table, .. }
            | SluiceStatement::Restore { table, .. } => rewrite(table)?,
            SluiceStatement::Vacuum { table, .. } => rewrite(table)?,
            SluiceStatement::Comment(comment) => {
                if let Some(table) = comment.target.relation_mut() {
                    rewrite(table)?;
                }
            }
            SluiceStatement::Standard(statement) => {
                if let Statement::Drop { object_type: ObjectType::Table | ObjectType::View, names, .. } =
                    statement.as_mut()
                {
                    for name in names.iter_mut() {
                        rewrite(name)?;
                    }
                }
                visit_names(statement.as_mut(), rewrite)?;
                if let Statement::AlterTable(alter) = statement.as_mut() {
                    for operation in alter.operations.iter_mut() {
                        if let datafusion::sql::sqlparser::ast::AlterTableOperation::AddConstraint {
                            constraint: datafusion::sql::sqlparser::ast::TableConstraint::ForeignKey(key),
                            ..
                        } = operation
                        {
                            rewrite(&mut key.foreign_table)?;
                        }
                        if let datafusion::sql::sqlparser::ast::AlterTableOperation::AddColumn { column_def, .. } =
                            operation
                        {
                            for option in column_def.options.iter_mut() {
                                if let datafusion::sql::sqlparser::ast::ColumnOption::ForeignKey(key) =
                                    &mut option.option
                                {
                                    rewrite(&mut key.foreign_table)?;
                                }
                            }
                        }
                    }
                }
                if let Statement::CreateView(create) = statement.as_mut() {
                    self.qualify_new_view(create)?;
                }
            }
            // Streaming tables, flows, sources and materialized views outlive the session: they
            // never read its temporary tables. Sequences are never temporary.
            SluiceStatement::Streaming(_) | SluiceStatement::Sequence(_) | SluiceStatement::Move { .. } => {}
        }
        Ok(())
    }

    /// Rewrites a table name given as text (COPY's, the Rust API's).
    pub fn qualify_text(&self, state: &CatalogState, name: &str) -> Result<String> {
        let mut parsed = crate::names::parse_object_name(name)?;
        let before = parsed.clone();
        self.qualify_relation(state, &HashSet::new(), &mut parsed)?;
        if parsed == before {
            return Ok(name.to_string());
        }
        Ok(parsed.to_string())
    }

    fn qualify_relation(&self, state: &CatalogState, ctes: &HashSet<String>, name: &mut ObjectName) -> Result<()> {
        let parts: Vec<Option<String>> = name
            .0
            .iter()
            .map(|part| match part {
                ObjectNamePart::Identifier(ident) => Some(normalize(ident)),
                _ => None,
            })
            .collect();
        let schema_at = match parts.as_slice() {
            [Some(table)] => {
                let ours = state.table(&self.schema, table).is_some() || state.views.contains_key(&self.key(table));
                if ours && !ctes.contains(table) {
                    name.0.insert(0, ObjectNamePart::Identifier(Ident::new(self.schema.clone())));
                }
                return Ok(());
            }
            [Some(_), Some(_)] => 0,
            [Some(catalog), Some(_), Some(_)] if catalog == CATALOG_NAME => 1,
            _ => return Ok(()),
        };
        let Some(Some(schema)) = parts.get(schema_at) else { return Ok(()) };
        if schema == SESSION_TEMPORARY_SCHEMA {
            if let Some(part) = name.0.get_mut(schema_at) {
                *part = ObjectNamePart::Identifier(Ident::new(self.schema.clone()));
            }
        } else if is_temporary_schema(schema) && *schema != self.schema {
            return Err(other_session());
        }
        Ok(())
    }

    /// A temporary table is made in the session's schema (and a table named in `pg_temp` is
    /// temporary, as in PostgreSQL).
    fn qualify_new_table(&self, create: &mut crate::syntax::parser::CreateTable) -> Result<()> {
        let parts: Vec<String> = create
            .name
            .0
            .iter()
            .filter_map(|part| match part {
                ObjectNamePart::Identifier(ident) => Some(normalize(ident)),
                _ => None,
            })
            .collect();
        let (schema, table) = match parts.as_slice() {
            [table] => (None, table.clone()),
            [schema, table] => (Some(schema.clone()), table.clone()),
            [catalog, schema, table] if catalog == CATALOG_NAME => (Some(schema.clone()), table.clone()),
            _ => return Ok(()),
        };
        let named_temporary = schema.as_deref().is_some_and(|s| s == SESSION_TEMPORARY_SCHEMA || s == self.schema);
        if schema.as_deref().is_some_and(|s| is_temporary_schema(s) && s != self.schema) {
            return Err(other_session());
        }
        if create.temporary && schema.is_some() && !named_temporary {
            return Err(Error::data("42P16", "cannot create temporary relation in non-temporary schema"));
        }
        if !(create.temporary || named_temporary) {
            if create.on_commit.is_some() {
                return Err(Error::data("42P16", "ON COMMIT can only be used on temporary tables"));
            }
            return Ok(());
        }
        create.temporary = true;
        let last = create.name.0.pop();
        let ident = match last {
            Some(ObjectNamePart::Identifier(ident)) => ident,
            _ => Ident::new(table),
        };
        create.name = ObjectName(vec![
            ObjectNamePart::Identifier(Ident::new(self.schema.clone())),
            ObjectNamePart::Identifier(ident),
        ]);
        Ok(())
    }

    /// A temporary view is made in the session's schema, and so is a view that reads the
    /// session's temporary relations (PostgreSQL makes it temporary, with a notice).
    fn qualify_new_view(&self, create: &mut datafusion::sql::sqlparser::ast::CreateView) -> Result<()> {
        let reads_temporary =
            crate::names::relations_in(&create.query).iter().any(|relation| relation.schema == self.schema);
        let (schema, ident) = match create.name.0.as_slice() {
            [ObjectNamePart::Identifier(table)] => (None, table.clone()),
            [ObjectNamePart::Identifier(schema), ObjectNamePart::Identifier(table)] => {
                (Some(normalize(schema)), table.clone())
            }
            _ => return Ok(()),
        };
        let named_temporary = schema.as_deref().is_some_and(|s| s == SESSION_TEMPORARY_SCHEMA || s == self.schema);
        if schema.as_deref().is_some_and(|s| is_temporary_schema(s) && s != self.schema) {
            return Err(other_session());
        }
        if !(create.temporary || named_temporary || reads_temporary) {
            return Ok(());
        }
        if schema.is_some() && !named_temporary {
            return Err(Error::data("42P16", "cannot create temporary relation in non-temporary schema"));
        }
        create.temporary = true;
        create.name = ObjectName(vec![
            ObjectNamePart::Identifier(Ident::new(self.schema.clone())),
            ObjectNamePart::Identifier(ident),
        ]);
        Ok(())
    }

    fn key(&self, name: &str) -> String {
        crate::catalog::key(&self.schema, name)
    }
}

/// The temporary relation a statement (already qualified) creates, if it creates one.
pub fn created_relation(statement: &SluiceStatement) -> Option<TableName> {
    let name = match statement {
        SluiceStatement::CreateTable(create) if create.temporary => &create.name,
        SluiceStatement::Standard(statement) => match statement.as_ref() {
            Statement::CreateView(create) if create.temporary => &create.name,
            _ => return None,
        },
        _ => return None,
    };
    crate::names::table_name(name).ok()
}

/// Drops a temporary schema with every relation in it (the session ended, or DISCARD TEMP).
pub async fn drop_schema(db: &Warehouse, schema: &str) -> Result<()> {
    if !is_temporary_schema(schema) {
        return Err(Error::Internal(format!("{schema} is not a temporary schema")));
    }
    let (_, tables) = db
        .catalog
        .update(|state| {
            let tables: Vec<TableEntry> = state.tables_in(schema).cloned().collect();
            for table in &tables {
                state.tables.remove(&table.qualified_name());
            }
            state.views.retain(|_, view| view.schema != schema);
            state.schemas.remove(schema);
            Ok(tables)
        })
        .await?;
    for entry in tables {
        db.forget_table(&entry.id);
        db.delete_table_files(&entry).await?;
    }
    Ok(())
}

impl QueryContext {
    /// Drops a temporary table or view, if it is there (a rollback undid its creation).
    pub(crate) async fn drop_temporary(&self, name: &TableName) -> Result<()> {
        let state = self.catalog_state();
        if state.views.contains_key(&crate::catalog::key(&name.schema, &name.name)) {
            let object = crate::names::object_name(&name.schema, &name.name);
            return self.drop_views(&[object], true, true).await.map(|_| ());
        }
        self.drop_table(name, true, true).await
    }

    /// A transaction committed: the session's `ON COMMIT DROP` tables are dropped, its `ON
    /// COMMIT DELETE ROWS` ones emptied.
    pub(crate) async fn on_commit(&self, namespace: &Namespace) -> Result<()> {
        let state = self.catalog_state();
        if !namespace.exists(&state) {
            return Ok(());
        }
        for (table, on_commit) in namespace.tables(&state) {
            let name = TableName { schema: namespace.schema().to_string(), name: table };
            match on_commit {
                OnCommit::PreserveRows => {}
                OnCommit::Drop => self.drop_table(&name, true, true).await?,
                OnCommit::DeleteRows => self.empty_table(&name).await?,
            }
        }
        Ok(())
    }

    /// Deletes every row of a table that has any.
    async fn empty_table(&self, name: &TableName) -> Result<()> {
        self.clear_statement_state();
        let object = crate::names::object_name(&name.schema, &name.name);
        let (_, _, snapshot) = self.resolve_table(&object).await?;
        if snapshot.file_count() > 0 {
            let statement = crate::syntax::parser::parse_statement_text(&format!("TRUNCATE {object}"))?;
            let SluiceStatement::Standard(statement) = statement else {
                return Err(Error::Internal("TRUNCATE did not parse as TRUNCATE".into()));
            };
            let Statement::Truncate(truncate) = *statement else {
                return Err(Error::Internal("TRUNCATE did not parse as TRUNCATE".into()));
            };
            self.truncate_statement(truncate).await?;
        }
        self.clear_statement_state();
        Ok(())
    }
}

/// Applies `rewrite` to every relation name in `node`, stopping at the first error.
fn visit_names<V: datafusion::sql::sqlparser::ast::VisitMut>(
    node: &mut V,
    mut rewrite: impl FnMut(&mut ObjectName) -> Result<()>,
) -> Result<()> {
    match visit_relations_mut(node, |name| match rewrite(name) {
        Ok(()) => ControlFlow::Continue(()),
        Err(e) => ControlFlow::Break(e),
    }) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// The names of the common table expressions anywhere in a statement: an unqualified name that
/// is one of them is left alone (a CTE hides a table of its name, as in PostgreSQL; this is
/// coarser, by name over the whole statement).
fn cte_names(statement: &SluiceStatement) -> HashSet<String> {
    struct Ctes(HashSet<String>);
    impl Visitor for Ctes {
        type Break = ();
        fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
            if let Some(with) = &query.with {
                self.0.extend(with.cte_tables.iter().map(|cte| normalize(&cte.alias.name)));
            }
            ControlFlow::Continue(())
        }
    }
    let mut ctes = Ctes(HashSet::new());
    let _ = match statement {
        SluiceStatement::Standard(statement) => statement.visit(&mut ctes),
        SluiceStatement::CreateTable(create) => match &create.query {
            Some(query) => query.visit(&mut ctes),
            None => ControlFlow::Continue(()),
        },
        SluiceStatement::InsertByName { query, .. } => query.visit(&mut ctes),
        SluiceStatement::InsertOverriding { insert, .. } => insert.visit(&mut ctes),
        _ => ControlFlow::Continue(()),
    };
    ctes.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{SchemaEntry, TableEntry};
    use crate::syntax::parser::parse_statement_text;

    fn state_with(namespace: &Namespace, table: &str) -> CatalogState {
        let mut state = CatalogState::default();
        let schema = namespace.schema().to_string();
        state.schemas.insert(schema.clone(), SchemaEntry { name: schema.clone(), created_ms: 0 });
        state.tables.insert(crate::catalog::key(&schema, table), TableEntry::for_tests(&schema, table, "1", "x"));
        state
    }

    fn qualified(namespace: &Namespace, state: &CatalogState, sql: &str) -> Result<String> {
        let mut statement = parse_statement_text(sql)?;
        namespace.qualify(state, &mut statement)?;
        Ok(match statement {
            SluiceStatement::Standard(s) => s.to_string(),
            SluiceStatement::CreateTable(c) => c.name.to_string(),
            other => format!("{other:?}"),
        })
    }

    #[test]
    fn the_sessions_temporary_tables_hide_others_of_their_name() {
        let namespace = Namespace::new();
        let schema = namespace.schema().to_string();
        let state = state_with(&namespace, "t");
        let got = qualified(&namespace, &state, "SELECT * FROM t JOIN u ON true").unwrap();
        assert_eq!(got, format!("SELECT * FROM {schema}.t JOIN u ON true"));
        let got = qualified(&namespace, &state, "INSERT INTO pg_temp.t SELECT * FROM public.t").unwrap();
        assert_eq!(got, format!("INSERT INTO {schema}.t SELECT * FROM public.t"));
        let got = qualified(&namespace, &state, "DROP TABLE t, u").unwrap();
        assert_eq!(got, format!("DROP TABLE {schema}.t, u"));
        // A CTE of the name hides the table.
        let got = qualified(&namespace, &state, "WITH t AS (SELECT 1) SELECT * FROM t").unwrap();
        assert_eq!(got, "WITH t AS (SELECT 1) SELECT * FROM t");
        let other = qualified(&namespace, &state, "SELECT * FROM pg_temp_999999.t").unwrap_err();
        assert_eq!(other.sqlstate(), "0A000");
    }

    #[test]
    fn new_temporary_tables_go_to_the_sessions_schema() {
        let namespace = Namespace::new();
        let schema = namespace.schema().to_string();
        let state = CatalogState::default();
        assert_eq!(qualified(&namespace, &state, "CREATE TEMP TABLE x (a int)").unwrap(), format!("{schema}.x"));
        assert_eq!(
            qualified(&namespace, &state, "CREATE TABLE pg_temp.x (a int)").unwrap(),
            format!("{schema}.x"),
            "a table made in pg_temp is temporary"
        );
        assert_eq!(qualified(&namespace, &state, "CREATE TABLE x (a int)").unwrap(), "x");
        let refused = qualified(&namespace, &state, "CREATE TEMP TABLE public.x (a int)").unwrap_err();
        assert_eq!(refused.sqlstate(), "42P16");
        let refused = qualified(&namespace, &state, "CREATE TABLE x (a int) ON COMMIT DROP").unwrap_err();
        assert_eq!(refused.sqlstate(), "42P16");
    }
}
