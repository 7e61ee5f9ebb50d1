//! Enum types, as PostgreSQL 15 has them: `CREATE TYPE mood AS ENUM (...)`, `DROP TYPE`,
//! `ALTER TYPE ... ADD VALUE | RENAME VALUE | RENAME TO`, columns of an enum type, and casts to one
//! (`'ok'::mood`). The types themselves are in the catalog (see [`crate::catalog::enums`]); how
//! queries compare and sort their values is [`crate::functions::enums`].
//!
//! - A column of an enum type is a `string` column whose metadata names the type (see
//!   [`crate::catalog::enums`]); CREATE TABLE and ADD COLUMN define it as a `text` column and
//!   then mark it.
//! - Every write checks its values through [`QueryContext::check_enum_values`] (called from the
//!   one row-shaping step of INSERT, UPDATE, MERGE and COPY): a value that is no label is 22P02.
//! - `CAST(x AS mood)` and `x::mood` are rewritten to a call of the input function
//!   (`__pg_enum(x, 'mood', <oid>, 'sad', 'ok', ...)`) with the labels as they are when the
//!   statement is planned.
//! - DROP TYPE refuses a type a column uses (2BP01) unless CASCADE, which drops those columns as
//!   PostgreSQL does; RENAME TO renames the type in those columns' metadata (a metadata commit
//!   per table, after the catalog's).
//!
//! Not done: arrays of an enum type, ALTER COLUMN ... TYPE to one (both 0A000), and a type's
//! use by a view's columns (a view keeps the name its columns had when it was made).

use std::ops::ControlFlow;

use arrow::array::{ArrayRef, AsArray};
use datafusion::sql::sqlparser::ast::{
    self, AlterType, AlterTypeAddValuePosition, AlterTypeOperation, ColumnDef, DataType as SqlType, Expr, Ident,
    ObjectName, Statement, TableConstraint, UserDefinedTypeRepresentation, VisitMut, VisitorMut,
};
use serde_json::Value;
use sluice_storage::schema::StructField;

use crate::catalog::enums::{check_label, invalid_input, EnumEntry, EnumLabel, LabelPlace, ENUM_OID_KEY};
use crate::catalog::{key, CatalogState, TableEntry};
use crate::error::{Error, Result};
use crate::names::{normalize, table_name, TableName};
use crate::sql::context::{QueryContext, StatementResult};
use crate::types::DECLARED_TYPE_KEY;

use crate::functions::enums::ENUM_INPUT;

fn undefined_type(name: &TableName) -> Error {
    Error::UndefinedObject { kind: "type", name: name.to_string() }
}

/// The enum type a type name names, if it names one (`mood`, `sc.mood`; unqualified names are
/// looked up in `public`).
pub fn enum_named<'a>(state: &'a CatalogState, name: &ObjectName) -> Option<&'a EnumEntry> {
    let name = table_name(name).ok()?;
    state.enum_type(&name.schema, &name.name)
}

/// The enum type a SQL type names, if it is one.
fn enum_of_type<'a>(state: &'a CatalogState, data_type: &SqlType) -> Option<&'a EnumEntry> {
    match data_type {
        SqlType::Custom(name, modifiers) if modifiers.is_empty() => enum_named(state, name),
        _ => None,
    }
}

/// A column that is of an enum type: marked with the type's name and OID.
fn mark(field: &mut StructField, entry: &EnumEntry) {
    field.metadata.insert(DECLARED_TYPE_KEY.into(), Value::String(entry.declared_name()));
    field.metadata.insert(ENUM_OID_KEY.into(), Value::String(entry.oid.to_string()));
}

/// The enum type OID a table column's metadata names.
pub fn column_enum_oid(field: &StructField) -> Option<u32> {
    field.metadata.get(ENUM_OID_KEY).and_then(Value::as_str).and_then(|oid| oid.parse().ok())
}

impl QueryContext {
    /// [`super::ddl::define_columns`] for columns some of which may be of an enum type: those
    /// are defined as `text`, then marked as of their type.
    pub(crate) fn define_columns_with_enums(
        &self,
        table: &str,
        columns: &[ColumnDef],
        constraints: &[TableConstraint],
    ) -> Result<super::ddl::TableDefinition> {
        let state = self.catalog_state();
        let mut plain = columns.to_vec();
        let mut typed = Vec::new();
        for column in &mut plain {
            if let SqlType::Array(ast::ArrayElemTypeDef::SquareBracket(inner, _)) = &column.data_type {
                if enum_of_type(&state, inner).is_some() {
                    return Err(Error::NotSupported(format!("arrays of an enum type ({})", column.data_type)));
                }
            }
            if let Some(entry) = enum_of_type(&state, &column.data_type) {
                typed.push((normalize(&column.name), entry.clone()));
                column.data_type = SqlType::Text;
            }
        }
        let mut definition = super::ddl::define_columns(table, &plain, constraints)?;
        for (name, entry) in typed {
            if let Some(field) = definition.schema.fields.iter_mut().find(|f| f.name == name) {
                mark(field, &entry);
            }
        }
        Ok(definition)
    }

    /// Checks that a column's values (about to be written) are labels of its enum type, if it
    /// is of one: 22P02 for the first that is not.
    pub(crate) fn check_enum_values(&self, field: &StructField, column: &ArrayRef) -> Result<()> {
        let Some(oid) = column_enum_oid(field) else { return Ok(()) };
        let state = self.catalog_state();
        let Some(entry) = state.enum_by_oid(oid) else {
            return Err(Error::Internal(format!("column {} names enum type {oid}, which is gone", field.name)));
        };
        let text = arrow::compute::cast(column, &arrow::datatypes::DataType::Utf8)?;
        let labels: std::collections::HashSet<&str> = entry.labels.iter().map(|l| l.label.as_str()).collect();
        match text.as_string::<i32>().iter().flatten().find(|value| !labels.contains(value)) {
            Some(value) => Err(invalid_input(&entry.declared_name(), value)),
            None => Ok(()),
        }
    }

    /// `CREATE TYPE name AS ENUM (...)`; other kinds of type are 0A000.
    pub(crate) async fn create_type(
        &self,
        name: &ObjectName,
        representation: Option<UserDefinedTypeRepresentation>,
    ) -> Result<StatementResult> {
        let Some(UserDefinedTypeRepresentation::Enum { labels }) = representation else {
            return Err(Error::NotSupported("CREATE TYPE other than AS ENUM (...)".into()));
        };
        let type_name = table_name(name)?;
        let labels: Vec<String> = labels.iter().map(|l| l.value.clone()).collect();
        for (i, label) in labels.iter().enumerate() {
            check_label(label)?;
            if labels.iter().take(i).any(|l| l == label) {
                return Err(Error::data("42710", format!("enum label \"{label}\" used more than once")));
            }
        }
        let builtin =
            crate::types::declared_type(&SqlType::Custom(ObjectName::from(vec![Ident::new(&type_name.name)]), vec![]));
        if builtin.is_ok() && type_name.schema == crate::catalog::DEFAULT_SCHEMA {
            return Err(Error::NotSupported(format!(
                "an enum type named as a built-in type ({}): give it another name or schema",
                type_name.name
            )));
        }
        let created_ms = crate::util::now_ms();
        self.update_catalog(|state| {
            if !state.schemas.contains_key(&type_name.schema) {
                return Err(Error::UndefinedSchema(type_name.schema.clone()));
            }
            let key = key(&type_name.schema, &type_name.name);
            // A table's or view's name is its row type's too, in PostgreSQL.
            if state.enums.contains_key(&key) || state.tables.contains_key(&key) || state.views.contains_key(&key) {
                return Err(Error::DuplicateObject { kind: "type", name: type_name.name.clone() });
            }
            let oid = state.next_enum_oid();
            let labels = labels
                .iter()
                .zip(0u32..)
                .map(|(label, i)| EnumLabel {
                    label: label.clone(),
                    sort_order: (i + 1) as f32,
                    oid: oid.saturating_add(2).saturating_add(i),
                })
                .collect();
            let entry =
                EnumEntry { oid, schema: type_name.schema.clone(), name: type_name.name.clone(), labels, created_ms };
            state.enums.insert(key, entry);
            Ok(())
        })
        .await?;
        Ok(StatementResult::command("CREATE TYPE"))
    }

    /// The columns of tables that are of the enum type `oid`: each table with its column names.
    async fn columns_of_type(&self, oid: u32) -> Result<Vec<(TableEntry, Vec<String>)>> {
        let state = self.catalog_state();
        let mut found = Vec::new();
        for entry in state.tables.values() {
            let (_, snapshot) =
                super::catalog_provider::statement_snapshot(&self.db, &self.snapshots, &self.staging, entry).await?;
            let columns: Vec<String> = snapshot
                .schema()
                .fields
                .iter()
                .filter(|f| column_enum_oid(f) == Some(oid))
                .map(|f| f.name.clone())
                .collect();
            if !columns.is_empty() {
                found.push((entry.clone(), columns));
            }
        }
        Ok(found)
    }

    /// `DROP TYPE [IF EXISTS] name, ... [CASCADE | RESTRICT]`.
    pub(crate) async fn drop_types(
        &self,
        names: &[ObjectName],
        if_exists: bool,
        cascade: bool,
    ) -> Result<StatementResult> {
        let mut dropped = Vec::new();
        for name in names {
            let type_name = table_name(name)?;
            let state = self.catalog_state();
            let Some(entry) = state.enum_type(&type_name.schema, &type_name.name).cloned() else {
                if if_exists {
                    self.notice(format!("type \"{}\" does not exist, skipping", type_name.name));
                    continue;
                }
                return Err(undefined_type(&type_name));
            };
            let users = self.columns_of_type(entry.oid).await?;
            if let Some((table, columns)) = users.first().filter(|_| !cascade) {
                let column = columns.first().cloned().unwrap_or_default();
                return Err(Error::data(
                    "2BP01",
                    format!(
                        "cannot drop type {} because other objects depend on it (column {column} of table {} \
                         depends on type {}; use DROP ... CASCADE to drop the dependent objects too)",
                        entry.declared_name(),
                        table.name,
                        entry.declared_name()
                    ),
                ));
            }
            for (table, columns) in users {
                for column in columns {
                    self.notice(format!("drop cascades to column {column} of table {}", table.name));
                    let sql = format!(
                        "ALTER TABLE {}.{} DROP COLUMN {}",
                        crate::names::quoted(&table.schema),
                        crate::names::quoted(&table.name),
                        crate::names::quoted(&column)
                    );
                    self.clear_statement_state();
                    self.run_alter_table(&sql).await?;
                }
            }
            dropped.push(entry);
        }
        if !dropped.is_empty() {
            self.update_catalog(|state| {
                for entry in &dropped {
                    state.enums.remove(&key(&entry.schema, &entry.name));
                }
                Ok(())
            })
            .await?;
        }
        Ok(StatementResult::command("DROP TYPE"))
    }

    /// Runs an ALTER TABLE given as SQL text.
    async fn run_alter_table(&self, sql: &str) -> Result<()> {
        let dialect = datafusion::sql::sqlparser::dialect::PostgreSqlDialect {};
        let statements = datafusion::sql::sqlparser::parser::Parser::parse_sql(&dialect, sql)?;
        match statements.into_iter().next() {
            Some(Statement::AlterTable(alter)) => self.alter_table(alter).await.map(|_| ()),
            _ => Err(Error::Internal(format!("not an ALTER TABLE: {sql}"))),
        }
    }

    /// `ALTER TYPE name ADD VALUE | RENAME VALUE | RENAME TO`.
    pub(crate) async fn alter_type(&self, alter: AlterType) -> Result<StatementResult> {
        let type_name = table_name(&alter.name)?;
        let missing = || undefined_type(&type_name);
        let key = key(&type_name.schema, &type_name.name);
        match alter.operation {
            AlterTypeOperation::AddValue(add) => {
                let place = match &add.position {
                    None => LabelPlace::Last,
                    Some(AlterTypeAddValuePosition::Before(l)) => LabelPlace::Before(l.value.clone()),
                    Some(AlterTypeAddValuePosition::After(l)) => LabelPlace::After(l.value.clone()),
                };
                let label = add.value.value.clone();
                let (_, added) = self
                    .update_catalog(|state| {
                        let oid = state.next_enum_oid();
                        let entry = state.enums.get_mut(&key).ok_or_else(missing)?;
                        entry.add_label(&label, &place, add.if_not_exists, oid)
                    })
                    .await?;
                if !added {
                    self.notice(format!("enum label \"{label}\" already exists, skipping"));
                }
            }
            AlterTypeOperation::RenameValue(rename) => {
                self.update_catalog(|state| {
                    let entry = state.enums.get_mut(&key).ok_or_else(missing)?;
                    entry.rename_label(&rename.from.value, &rename.to.value)
                })
                .await?;
            }
            AlterTypeOperation::Rename(rename) => self.rename_type(&type_name, &normalize(&rename.new_name)).await?,
        }
        Ok(StatementResult::command("ALTER TYPE"))
    }

    /// `ALTER TYPE name RENAME TO new`: the catalog first, then the type's name in the metadata
    /// of the columns of that type (which Sluice looks the type up in by OID, not by name).
    async fn rename_type(&self, type_name: &TableName, new_name: &str) -> Result<()> {
        let old_key = key(&type_name.schema, &type_name.name);
        let new_key = key(&type_name.schema, new_name);
        let (_, entry) = self
            .update_catalog(|state| {
                let mut entry = state.enums.get(&old_key).cloned().ok_or_else(|| undefined_type(type_name))?;
                if state.enums.contains_key(&new_key)
                    || state.tables.contains_key(&new_key)
                    || state.views.contains_key(&new_key)
                {
                    return Err(Error::DuplicateObject { kind: "type", name: new_name.to_string() });
                }
                state.enums.remove(&old_key);
                entry.name = new_name.to_string();
                state.enums.insert(new_key.clone(), entry.clone());
                Ok(entry)
            })
            .await?;
        for (table_entry, columns) in self.columns_of_type(entry.oid).await? {
            for column in columns {
                self.clear_statement_state();
                let object = crate::names::object_name(&table_entry.schema, &table_entry.name);
                let (_, table, _) = self.resolve_table(&object).await?;
                let _lock = self.lock_table_keys(&table_entry.id, &table).await?;
                let snapshot = table.snapshot().await?;
                self.change_column(&table_entry, &table, &snapshot, &column, "CHANGE COLUMN", |field| {
                    mark(field, &entry)
                })
                .await?;
            }
        }
        self.clear_statement_state();
        Ok(())
    }
}

/// Rewrites casts to enum types (`x::mood`, `CAST(x AS sc.mood)`) as calls of their input
/// function with the labels of `state` (see the module's documentation).
pub fn rewrite_casts(state: &CatalogState, statement: &mut Statement) -> Result<()> {
    if state.enums.is_empty() {
        return Ok(());
    }
    let mut casts = Casts { state, error: None };
    let _ = statement.visit(&mut casts);
    casts.error.map_or(Ok(()), Err)
}

struct Casts<'a> {
    state: &'a CatalogState,
    error: Option<Error>,
}

impl VisitorMut for Casts<'_> {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let Expr::Cast { expr: inner, data_type, .. } = expr else { return ControlFlow::Continue(()) };
        if let SqlType::Array(ast::ArrayElemTypeDef::SquareBracket(element, _)) = data_type {
            if enum_of_type(self.state, element).is_some() {
                self.error = Some(Error::NotSupported(format!("arrays of an enum type ({data_type})")));
                return ControlFlow::Break(());
            }
        }
        let Some(entry) = enum_of_type(self.state, data_type) else { return ControlFlow::Continue(()) };
        *expr = enum_input_call((**inner).clone(), entry);
        ControlFlow::Continue(())
    }
}

/// `__pg_enum(value, 'name', oid, 'label', ...)`.
pub fn enum_input_call(value: Expr, entry: &EnumEntry) -> Expr {
    let text = |s: String| Expr::Value(ast::Value::SingleQuotedString(s).into());
    let mut args =
        vec![value, text(entry.declared_name()), Expr::Value(ast::Value::Number(entry.oid.to_string(), false).into())];
    args.extend(entry.labels.iter().map(|l| text(l.label.clone())));
    super::postgres_forms::call(ENUM_INPUT, args)
}

/// The name PostgreSQL gives an unaliased cast to an enum type (a call of [`ENUM_INPUT`] here):
/// the name of what it casts (by `expression_name`, else `column_name`), else the type's name.
pub(crate) fn cast_name(
    function: &ast::Function,
    expression_name: fn(&Expr) -> Option<String>,
    column_name: fn(&Expr) -> Option<String>,
) -> String {
    let ast::FunctionArguments::List(list) = &function.args else { return "?column?".into() };
    let arg = |i: usize| match list.args.get(i) {
        Some(ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e))) => Some(e),
        _ => None,
    };
    let own = arg(0).and_then(|value| expression_name(value).or_else(|| column_name(value)));
    if let Some(name) = own.filter(|n| n != "?column?") {
        return name;
    }
    let type_name = arg(1).and_then(|e| match e {
        Expr::Value(v) => match &v.value {
            ast::Value::SingleQuotedString(text) => crate::names::parse_object_name(text).ok(),
            _ => None,
        },
        _ => None,
    });
    type_name
        .and_then(|name| name.0.last().and_then(|part| part.as_ident().map(|i| i.value.clone())))
        .unwrap_or_else(|| "?column?".into())
}
