//! DDL and table maintenance: CREATE/DROP SCHEMA, CREATE TABLE (columns, AS SELECT, LOCATION),
//! DROP TABLE, ALTER TABLE, DESCRIBE HISTORY, OPTIMIZE, VACUUM, RESTORE.
//!
//! New tables get deletion vectors (`delta.enableDeletionVectors = true`) unless the statement
//! says otherwise, so DELETE and UPDATE mask rows instead of rewriting files; the protocol
//! declares the feature only from the first DELETE or UPDATE (see `sluice_storage::protocol`), so
//! a table that never had one stays readable by readers without deletion vectors. Column defaults live
//! in the catalog; NOT NULL and CHECK constraints live in the Delta table (nullability and
//! `delta.constraints.*`), where other engines see and enforce them too. Renaming or dropping a
//! column turns on column mapping (`delta.columnMapping.mode = name`) as Delta requires.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType as ArrowType, Field, Schema};
use datafusion::sql::sqlparser::ast::ForeignKeyConstraint;
use datafusion::sql::sqlparser::ast::{
    AlterColumnOperation, AlterTable, AlterTableOperation, ColumnDef, ColumnOption, GeneratedAs,
    GeneratedExpressionMode, ObjectName, ObjectType, RenameTableNameKind, SchemaName, SequenceOptions, SqlOption,
    TableConstraint,
};
use serde_json::Value;
use sluice_storage::commit::CommitOutcome;
use sluice_storage::schema::{PrimitiveType, StructField, StructType};
use sluice_storage::table::{CreateTable as CreateDelta, Table};

use crate::catalog::{key, FlowSyntax, SchemaEntry, TableEntry, TableKind};
use crate::change::{ChangedRows, Operation};
use crate::error::{Error, Result};
use crate::identity::Identity;
use crate::keys::KeyDef;
use crate::names::{normalize, schema_name, table_name, TableName};
use crate::sql::context::{QueryContext, StatementResult};
use crate::syntax::parser::{CreateTable, TimeTravel};
use crate::types::{column, declared_type};

/// The Delta property prefix of CHECK constraints.
pub const CONSTRAINT_PREFIX: &str = "delta.constraints.";

/// Columns, defaults and CHECK constraints from column definitions.
pub struct TableDefinition {
    pub schema: StructType,
    pub defaults: BTreeMap<String, String>,
    pub constraints: Vec<(String, String)>,
    /// PRIMARY KEY and UNIQUE constraints.
    pub keys: Vec<KeyDef>,
    /// FOREIGN KEY constraints as written (column REFERENCES with its column filled in): they
    /// are checked against the tables they reference when the table is made.
    pub references: Vec<ForeignKeyConstraint>,
}

pub fn define_columns(table: &str, columns: &[ColumnDef], constraints: &[TableConstraint]) -> Result<TableDefinition> {
    let mut fields = Vec::new();
    let mut defaults = BTreeMap::new();
    let mut checks = Vec::new();
    let mut keys: Vec<KeyDef> = Vec::new();
    let mut references = Vec::new();
    let mut collations = Vec::new();
    for def in columns {
        let name = normalize(&def.name);
        let mut nullable = true;
        let mut comment = None;
        let mut identity = serial_identity(&def.data_type);
        let mut generation = None;
        for option in &def.options {
            let constraint_name = option.name.as_ref().map(normalize);
            match &option.option {
                ColumnOption::Null => nullable = true,
                ColumnOption::NotNull => nullable = false,
                ColumnOption::PrimaryKey(pk) => {
                    refuse_key_options(
                        pk.characteristics.as_ref(),
                        pk.index_type.is_some() || !pk.index_options.is_empty(),
                    )?;
                    nullable = false;
                    let name_given = constraint_name.clone().or_else(|| pk.name.as_ref().map(normalize));
                    keys.push(KeyDef::primary_key(
                        name_given.unwrap_or_else(|| format!("{table}_pkey")),
                        vec![name.clone()],
                    ));
                }
                ColumnOption::Unique(unique) => {
                    refuse_key_options(
                        unique.characteristics.as_ref(),
                        unique.index_type.is_some() || !unique.index_options.is_empty(),
                    )?;
                    let name_given = constraint_name.clone().or_else(|| unique.name.as_ref().map(normalize));
                    keys.push(KeyDef::unique_key(
                        name_given.unwrap_or_else(|| format!("{table}_{name}_key")),
                        vec![name.clone()],
                    ));
                }
                ColumnOption::Default(expr) => {
                    defaults.insert(name.clone(), expr.to_string());
                }
                ColumnOption::Check(check) => {
                    let constraint = constraint_name
                        .clone()
                        .or_else(|| check.name.as_ref().map(normalize))
                        .unwrap_or_else(|| format!("{table}_{name}_check"));
                    checks.push((constraint, check.expr.to_string()));
                }
                ColumnOption::Comment(text) => comment = Some(text.clone()),
                ColumnOption::Generated { generated_as, sequence_options, generation_expr: None, .. } => {
                    let allow_explicit_insert = match generated_as {
                        GeneratedAs::Always => false,
                        GeneratedAs::ByDefault => true,
                        GeneratedAs::ExpStored => {
                            return Err(Error::NotSupported("generated columns (GENERATED ALWAYS AS (expr))".into()))
                        }
                    };
                    identity =
                        Some(identity_of(sequence_options.as_deref().unwrap_or_default(), allow_explicit_insert)?);
                    nullable = false;
                }
                ColumnOption::Generated { generation_expr: Some(expr), generation_expr_mode, .. } => {
                    if matches!(generation_expr_mode, Some(GeneratedExpressionMode::Virtual)) {
                        return Err(Error::NotSupported(
                            "virtual generated columns (GENERATED ALWAYS AS (expr) VIRTUAL); Sluice's are STORED"
                                .into(),
                        ));
                    }
                    generation = Some(expr.to_string());
                }
                ColumnOption::ForeignKey(clause) => {
                    let mut clause = clause.clone();
                    clause.columns = vec![def.name.clone()];
                    if clause.name.is_none() {
                        clause.name = option.name.clone();
                    }
                    references.push(clause);
                }
                ColumnOption::Collation(collation) => {
                    collations.push(super::collations::of_column(&name, &def.data_type, collation)?);
                }
                other => return Err(Error::NotSupported(format!("column option {other}"))),
            }
        }
        let mut declared = declared_type(&def.data_type)?;
        if let Some(expression) = generation {
            let both =
                if identity.is_some() { Some("identity") } else { defaults.contains_key(&name).then_some("default") };
            if let Some(other) = both {
                return Err(Error::data(
                    "42601",
                    format!(
                        "both {other} and generation expression specified for column \"{name}\" of table \"{table}\""
                    ),
                ));
            }
            let mut field = column(&name, declared, nullable);
            field.metadata.insert(super::generated::GENERATION_KEY.into(), Value::String(expression));
            if let Some(comment) = comment {
                field.metadata.insert("comment".into(), Value::String(comment));
            }
            fields.push(field);
            continue;
        }
        if let Some(mut identity) = identity {
            // A cycling sequence turns at bounds: the declared type's when none are given.
            if identity.cycle {
                use crate::catalog::SequenceType;
                let data_type = match declared.data_type {
                    sluice_storage::schema::DataType::Primitive(PrimitiveType::Short) => SequenceType::Smallint,
                    sluice_storage::schema::DataType::Primitive(PrimitiveType::Integer) => SequenceType::Integer,
                    _ => SequenceType::Bigint,
                };
                let (min, max) = data_type.default_bounds(identity.step > 0);
                identity.min = Some(identity.min.unwrap_or(min.min(identity.start)));
                identity.max = Some(identity.max.unwrap_or(max.max(identity.start)));
            }
            // Delta identity columns are of type long, whatever integer type was declared.
            match declared.data_type {
                sluice_storage::schema::DataType::Primitive(
                    PrimitiveType::Long | PrimitiveType::Integer | PrimitiveType::Short,
                ) => declared.data_type = sluice_storage::schema::DataType::Primitive(PrimitiveType::Long),
                _ => {
                    return Err(Error::data(
                        "22023",
                        format!("identity column type must be smallint, integer, or bigint (column \"{name}\")"),
                    ))
                }
            }
            if defaults.contains_key(&name) {
                return Err(Error::data(
                    "42601",
                    format!("both default and identity specified for column \"{name}\" of table \"{table}\""),
                ));
            }
            nullable = false;
            let mut field = column(&name, declared, nullable);
            identity.declare(&mut field);
            if serial_identity(&def.data_type).is_some() && identity.allow_explicit_insert {
                // A serial's identity is its DEFAULT (DROP DEFAULT ends it, as in PostgreSQL).
                field.metadata.insert(crate::identity::SERIAL_KEY.into(), serde_json::Value::Bool(true));
            }
            fields.push(field);
            continue;
        }
        let mut field = column(&name, declared, nullable);
        if let Some(comment) = comment {
            field.metadata.insert("comment".into(), Value::String(comment));
        }
        fields.push(field);
    }
    for (name, collation) in collations.into_iter().flatten() {
        if let Some(field) = fields.iter_mut().find(|f| f.name == name) {
            field.metadata.insert(super::collations::COLLATION_KEY.into(), Value::String(collation.into()));
        }
    }
    let mut schema = StructType::new(fields);
    for constraint in constraints {
        match constraint {
            TableConstraint::Check(check) => {
                let name =
                    check.name.as_ref().map(normalize).unwrap_or_else(|| format!("{table}_check{}", checks.len() + 1));
                checks.push((name, check.expr.to_string()));
            }
            TableConstraint::PrimaryKey(pk) => {
                refuse_key_options(
                    pk.characteristics.as_ref(),
                    pk.index_type.is_some() || !pk.index_options.is_empty() || pk.index_name.is_some(),
                )?;
                let columns = key_columns(&pk.columns)?;
                for name in &columns {
                    let field = schema
                        .fields
                        .iter_mut()
                        .find(|f| &f.name == name)
                        .ok_or_else(|| Error::undefined_key_column(name))?;
                    field.nullable = false;
                }
                keys.push(KeyDef::primary_key(
                    pk.name.as_ref().map(normalize).unwrap_or_else(|| format!("{table}_pkey")),
                    columns,
                ));
            }
            TableConstraint::Unique(unique) => {
                let columns = key_columns(&unique.columns)?;
                for name in &columns {
                    if schema.field(name).is_none() {
                        return Err(Error::undefined_key_column(name));
                    }
                }
                keys.push(unique_def(table, unique, columns)?);
            }
            TableConstraint::ForeignKey(clause) => references.push(clause.clone()),
            other => return Err(Error::NotSupported(format!("table constraint {other}"))),
        }
    }
    if keys.iter().filter(|k| k.primary).count() > 1 {
        return Err(Error::data("42P16", format!("multiple primary keys for table \"{table}\" are not allowed")));
    }
    let mut names = std::collections::HashSet::new();
    for key in &keys {
        if !names.insert(key.name.clone()) {
            return Err(Error::DuplicateTable(key.name.clone()));
        }
    }
    schema.check_names().map_err(|e| Error::Plan(e.to_string()))?;
    Ok(TableDefinition { schema, defaults, constraints: checks, keys, references })
}

/// The identity a `serial`, `bigserial` or `smallserial` column declares (BY DEFAULT, from 1).
fn serial_identity(data_type: &datafusion::sql::sqlparser::ast::DataType) -> Option<Identity> {
    let datafusion::sql::sqlparser::ast::DataType::Custom(name, _) = data_type else { return None };
    let name = name.to_string().to_ascii_lowercase();
    matches!(name.as_str(), "serial" | "bigserial" | "smallserial" | "serial4" | "serial8" | "serial2")
        .then_some(Identity { allow_explicit_insert: true, ..Identity::default() })
}

/// An identity from `GENERATED ... AS IDENTITY (START WITH s INCREMENT BY i)`.
fn identity_of(options: &[SequenceOptions], allow_explicit_insert: bool) -> Result<Identity> {
    let number = |expr: &datafusion::sql::sqlparser::ast::Expr| -> Result<i64> {
        let text = expr.to_string().replace(' ', "");
        text.parse().map_err(|_| Error::NotSupported(format!("identity option {expr} (give a whole number)")))
    };
    let mut identity = Identity { allow_explicit_insert, ..Identity::default() };
    let mut start = None;
    for option in options {
        match option {
            SequenceOptions::StartWith(expr, _) => start = Some(number(expr)?),
            SequenceOptions::IncrementBy(expr, _) => identity.step = number(expr)?,
            SequenceOptions::MinValue(Some(expr)) => identity.min = Some(number(expr)?),
            SequenceOptions::MaxValue(Some(expr)) => identity.max = Some(number(expr)?),
            // What PostgreSQL does without them (pg_dump writes them out): bounds of the column's
            // type, no cycling. (sqlparser's `Cycle(true)` is NO CYCLE.)
            SequenceOptions::MinValue(None) | SequenceOptions::MaxValue(None) => {}
            SequenceOptions::Cycle(no) => identity.cycle = !no,
            // CACHE sets how many values a session takes at once; Sluice's sessions take them
            // one statement at a time, and keep the number for the catalogs (and pg_dump).
            SequenceOptions::Cache(expr) => {
                identity.cache = number(expr)?;
                if identity.cache < 1 {
                    return Err(Error::data("22023", format!("CACHE ({expr}) must be greater than zero")));
                }
            }
        }
    }
    if identity.step == 0 {
        return Err(Error::data("22023", "INCREMENT must not be zero"));
    }
    // PostgreSQL's defaults: an ascending sequence starts at its MINVALUE (1), a descending one
    // at its MAXVALUE (-1).
    identity.start =
        start.unwrap_or(if identity.step > 0 { identity.min.unwrap_or(1) } else { identity.max.unwrap_or(-1) });
    // The defaults PostgreSQL fills in: an ascending sequence's MINVALUE is 1, a descending
    // one's MAXVALUE -1 (the other bound is the type's).
    let (min, max) = if identity.step > 0 {
        (identity.min.or(identity.max.map(|_| 1)), identity.max)
    } else {
        (identity.min, identity.max.or(identity.min.map(|_| -1)))
    };
    if let (Some(min), Some(max)) = (min, max) {
        if min >= max {
            return Err(Error::data("22023", format!("MINVALUE ({min}) must be less than MAXVALUE ({max})")));
        }
    }
    if let Some(min) = identity.min.filter(|min| identity.start < *min) {
        return Err(Error::data(
            "22023",
            format!("START value ({}) cannot be less than MINVALUE ({min})", identity.start),
        ));
    }
    if let Some(max) = identity.max.filter(|max| identity.start > *max) {
        return Err(Error::data(
            "22023",
            format!("START value ({}) cannot be greater than MAXVALUE ({max})", identity.start),
        ));
    }
    Ok(identity)
}

/// Refuses what Sluice's keys cannot do: deferred checks, index methods and options.
fn refuse_key_options(
    characteristics: Option<&datafusion::sql::sqlparser::ast::ConstraintCharacteristics>,
    index: bool,
) -> Result<()> {
    use datafusion::sql::sqlparser::ast::DeferrableInitial;
    if characteristics.is_some_and(|c| c.deferrable == Some(true) || c.initially == Some(DeferrableInitial::Deferred)) {
        return Err(Error::NotSupported("DEFERRABLE keys (Sluice checks keys at each statement)".into()));
    }
    if index {
        return Err(Error::NotSupported("index methods or options on a key constraint".into()));
    }
    Ok(())
}

/// A table's UNIQUE constraint on `columns`: PostgreSQL's default name, NULLS [NOT] DISTINCT.
/// What Sluice's keys cannot do is refused (deferred checks, index methods and options).
fn unique_def(
    table: &str,
    unique: &datafusion::sql::sqlparser::ast::UniqueConstraint,
    columns: Vec<String>,
) -> Result<KeyDef> {
    use datafusion::sql::sqlparser::ast::NullsDistinctOption;
    let index = unique.index_type.is_some() || !unique.index_options.is_empty() || unique.index_name.is_some();
    refuse_key_options(unique.characteristics.as_ref(), index)?;
    let name = unique.name.as_ref().map(normalize).unwrap_or_else(|| format!("{table}_{}_key", columns.join("_")));
    let mut def = KeyDef::unique_key(name, columns);
    def.nulls_distinct = unique.nulls_distinct != NullsDistinctOption::NotDistinct;
    Ok(def)
}

/// The column names of a key (plain columns only, as PostgreSQL's constraints take them).
fn key_columns(columns: &[datafusion::sql::sqlparser::ast::IndexColumn]) -> Result<Vec<String>> {
    columns
        .iter()
        .map(|c| match &c.column.expr {
            datafusion::sql::sqlparser::ast::Expr::Identifier(ident) => Ok(normalize(ident)),
            other => Err(Error::NotSupported(format!("a key on the expression {other}"))),
        })
        .collect()
}

impl QueryContext {
    pub(crate) async fn create_schema(&self, name: &SchemaName, if_not_exists: bool) -> Result<StatementResult> {
        let name = match name {
            SchemaName::Simple(n) | SchemaName::NamedAuthorization(n, _) => schema_name(n)?,
            SchemaName::UnnamedAuthorization(ident) => normalize(ident),
        };
        if name.starts_with("pg_") {
            return Err(Error::data(
                "42939",
                format!("unacceptable schema name \"{name}\": the prefix \"pg_\" is reserved for system schemas"),
            ));
        }
        let now = chrono::Utc::now().timestamp_millis();
        let result = self
            .update_catalog(|state| {
                if state.schemas.contains_key(&name) {
                    return if if_not_exists { Ok(false) } else { Err(Error::DuplicateSchema(name.clone())) };
                }
                state.schemas.insert(name.clone(), SchemaEntry { name: name.clone(), created_ms: now });
                Ok(true)
            })
            .await;
        result.map(|_| StatementResult::command("CREATE SCHEMA"))
    }

    pub(crate) async fn drop(
        &self,
        object_type: ObjectType,
        if_exists: bool,
        names: &[ObjectName],
        cascade: bool,
    ) -> Result<StatementResult> {
        match object_type {
            ObjectType::Table => {
                let together: Vec<TableName> = names.iter().map(table_name).collect::<Result<_>>()?;
                let keys: std::collections::HashSet<String> =
                    together.iter().map(|n| key(&n.schema, &n.name)).collect();
                for name in &together {
                    self.drop_table_with(name, if_exists, cascade, &keys).await?;
                }
                Ok(StatementResult::command("DROP TABLE"))
            }
            ObjectType::Schema => {
                for name in names {
                    self.drop_schema(&schema_name(name)?, if_exists, cascade).await?;
                }
                Ok(StatementResult::command("DROP SCHEMA"))
            }
            ObjectType::Index => self.drop_indexes(names, if_exists).await,
            ObjectType::View => self.drop_views(names, if_exists, cascade).await,
            other => Err(Error::NotSupported(format!("DROP {other}"))),
        }
    }

    pub(crate) async fn drop_table(&self, name: &TableName, if_exists: bool, cascade: bool) -> Result<()> {
        self.drop_table_with(name, if_exists, cascade, &std::collections::HashSet::new()).await
    }

    /// DROP TABLE of `name`, one of the tables `together` (by key) that the statement drops: a
    /// foreign key of one of those does not hold the others back.
    async fn drop_table_with(
        &self,
        name: &TableName,
        if_exists: bool,
        cascade: bool,
        together: &std::collections::HashSet<String>,
    ) -> Result<()> {
        let table_key = key(&name.schema, &name.name);
        let state = self.catalog_state();
        let any_relation = state.tables.contains_key(&table_key)
            || state.views.contains_key(&table_key)
            || state.sequence(&name.schema, &name.name).is_some();
        if if_exists && !any_relation {
            self.notice(format!("table \"{}\" does not exist, skipping", name.name));
        }
        // (A block that wrote rows to the table may drop it: COMMIT drops them with it,
        // crate::staging::Staging::commit.)
        let (held, (removed, flows)) = self.update_catalog(|state| {
                let flows: Vec<String> = state
                    .flows
                    .values()
                    .filter(|f| f.source == table_key || f.target == table_key)
                    .map(|f| f.name.clone())
                    .collect();
                // A streaming table's own flows (those of its `AS SELECT ... FROM STREAM(src)`
                // query) are part of its definition and go with it; any other flow holds it.
                let others: Vec<&str> = state
                    .flows
                    .values()
                    .filter(|f| f.source == table_key || f.target == table_key)
                    .filter(|f| !(f.target == table_key && f.syntax == FlowSyntax::Pull))
                    .map(|f| f.name.as_str())
                    .collect();
                if state.views.contains_key(&table_key) {
                    return Err(Error::data(
                        "42809",
                        format!("\"{}\" is not a table (use DROP VIEW to remove a view)", name.name),
                    ));
                }
                if state.sequences.contains_key(&table_key) {
                    return Err(Error::data(
                        "42809",
                        format!("\"{}\" is not a table (use DROP SEQUENCE to remove a sequence)", name.name),
                    ));
                }
                if state.tables.get(&table_key).is_some_and(|t| t.kind == TableKind::MaterializedView) {
                    return Err(Error::data(
                        "42809",
                        format!("\"{name}\" is a materialized view (use DROP MATERIALIZED VIEW)"),
                    ));
                }
                let views: Vec<String> = state
                    .tables
                    .values()
                    .filter(|t| t.view.as_ref().is_some_and(|v| v.inputs.contains(&table_key)))
                    .map(|t| t.qualified_name())
                    .collect();
                if !views.is_empty() {
                    return Err(Error::data(
                        "2BP01",
                        format!(
                            "cannot drop table {name} because materialized views read it: {} (drop them first)",
                            views.join(", ")
                        ),
                    ));
                }
                if !others.is_empty() && !cascade && state.tables.contains_key(&table_key) {
                    return Err(Error::data(
                        "2BP01",
                        format!(
                            "cannot drop table {name} because flows read from or write to it: {} (use DROP TABLE ... CASCADE to drop them too)",
                            others.join(", ")
                        ),
                    ));
                }
                let subscriptions: Vec<String> = match state.tables.get(&table_key) {
                    Some(table) => state
                        .subscriptions
                        .values()
                        .filter(|s| s.table_id == table.id)
                        .map(|s| s.name.clone())
                        .collect(),
                    None => Vec::new(),
                };
                if !subscriptions.is_empty() && !cascade {
                    return Err(Error::data(
                        "2BP01",
                        format!(
                            "cannot drop table {name} because subscriptions follow it: {} (use DROP TABLE ... CASCADE to drop them too)",
                            subscriptions.join(", ")
                        ),
                    ));
                }
                for subscription in &subscriptions {
                    state.subscriptions.remove(subscription);
                }
                if state.tables.contains_key(&table_key) {
                    super::views::drop_dependents(state, &table_key, cascade)?;
                    drop_references(state, &table_key, cascade, together)?;
                }
                match state.tables.remove(&table_key) {
                    Some(entry) => {
                        super::sequence_ddl::drop_owned_sequences(state, &entry);
                        for flow in &flows {
                            state.flows.remove(flow);
                        }
                        // Its per-value route goes with it; a value whose table it was gets a
                        // new one when it comes again.
                        state.value_routes.remove(&table_key);
                        for route in state.value_routes.values_mut() {
                            route.tables.retain(|_, target| *target != table_key);
                        }
                        Ok((Some(entry), flows))
                    }
                    None if if_exists => Ok((None, vec![])),
                    None => Err(Error::UndefinedTable(name.to_string())),
                }
            })
            .await?;
        // A transaction block's DROP deletes the folder and stops the flows at COMMIT.
        if held {
            if let Some(entry) = removed {
                self.staging.table_dropped(entry);
            }
            return Ok(());
        }
        for flow in flows {
            self.db.hooks.flow_dropped(&flow);
        }
        if let Some(entry) = removed {
            self.db.forget_table(&entry.id);
            if entry.managed {
                self.delete_folder(&entry).await?;
            }
        }
        Ok(())
    }

    /// Deletes every file of a managed table (after the catalog forgot it).
    pub(crate) async fn delete_folder(&self, entry: &TableEntry) -> Result<()> {
        self.db.delete_table_files(entry).await
    }

    async fn drop_schema(&self, name: &str, if_exists: bool, cascade: bool) -> Result<()> {
        if if_exists && !self.catalog_state().schemas.contains_key(name) {
            self.notice(format!("schema \"{name}\" does not exist, skipping"));
        }
        let (held, dropped) = self.update_catalog(|state| {
                if !state.schemas.contains_key(name) {
                    return if if_exists { Ok(vec![]) } else { Err(Error::UndefinedSchema(name.to_string())) };
                }
                let tables: Vec<TableEntry> = state.tables_in(name).cloned().collect();
                let sequences = state.sequences.values().any(|s| s.schema == name);
                if (!tables.is_empty() || sequences) && !cascade {
                    return Err(Error::data(
                        "2BP01",
                        format!("cannot drop schema {name} because other objects depend on it (use DROP SCHEMA ... CASCADE)"),
                    ));
                }
                let keys: std::collections::HashSet<String> = tables.iter().map(|t| t.qualified_name()).collect();
                for table in &tables {
                    drop_references(state, &table.qualified_name(), true, &keys)?;
                }
                for table in &tables {
                    state.tables.remove(&table.qualified_name());
                    state.subscriptions.retain(|_, s| s.table_id != table.id);
                }
                let sequences: Vec<_> = state.sequences.values().filter(|s| s.schema == name).cloned().collect();
                for sequence in sequences {
                    state.sequences.remove(&sequence.qualified_name());
                    state.sequence_marks.remove(&sequence.id);
                }
                state.schemas.remove(name);
                Ok(tables)
            })
            .await?;
        if held {
            for entry in dropped {
                self.staging.table_dropped(entry);
            }
            return Ok(());
        }
        for entry in dropped {
            self.db.forget_table(&entry.id);
            if entry.managed {
                self.delete_folder(&entry).await?;
            }
        }
        Ok(())
    }

    pub(crate) async fn create_table(&self, create: CreateTable) -> Result<StatementResult> {
        let name = table_name(&create.name)?;
        let state = self.catalog_state();
        // A session's temporary schema is made with its first temporary table.
        let temporary = create.temporary && crate::catalog::is_temporary_schema(&name.schema);
        if create.temporary && !temporary {
            return Err(Error::Internal(format!("temporary table {name} outside a temporary schema")));
        }
        if temporary && (create.location.is_some() || create.external) {
            return Err(Error::NotSupported("a temporary table with a LOCATION (EXTERNAL)".into()));
        }
        if !temporary && !state.schemas.contains_key(&name.schema) {
            return Err(Error::UndefinedSchema(name.schema.clone()));
        }
        if state.table(&name.schema, &name.name).is_some() || state.sequence(&name.schema, &name.name).is_some() {
            if create.if_not_exists {
                return Ok(StatementResult::command("CREATE TABLE"));
            }
            if !create.or_replace {
                return Err(Error::DuplicateTable(name.to_string()));
            }
        }
        let (mut definition, query_plan) = match &create.query {
            Some(query) => {
                if !create.columns.is_empty() {
                    return Err(Error::NotSupported("column definitions together with AS SELECT".into()));
                }
                let plan =
                    self.plan_statement(datafusion::sql::sqlparser::ast::Statement::Query(query.clone())).await?;
                let arrow = plan.schema().as_arrow().clone();
                // The metadata keeps a declared type the values' Arrow type does not tell
                // (`timetz`, `uuid`, `jsonb` are strings).
                let fields = arrow
                    .fields()
                    .iter()
                    .map(|f| Field::new(f.name(), f.data_type().clone(), true).with_metadata(declared_only(f)))
                    .collect::<Vec<_>>();
                let schema = StructType::from_arrow(&Schema::new(fields)).map_err(|e| Error::Plan(e.to_string()))?;
                (
                    TableDefinition {
                        schema,
                        defaults: BTreeMap::new(),
                        constraints: vec![],
                        keys: vec![],
                        references: vec![],
                    },
                    Some(plan),
                )
            }
            None => (self.define_columns_with_enums(&name.name, &create.columns, &create.constraints)?, None),
        };
        super::generated::check_definitions(self, &definition.schema)?;
        self.check_sequence_defaults(definition.defaults.values()).await?;
        let partition_columns: Vec<String> = create.partitioned_by.iter().map(normalize).collect();
        let mut properties: HashMap<String, String> = create.properties.iter().cloned().collect();
        crate::rights::check_table_properties(&properties, self.privileges())?;
        crate::keys::refuse_key_properties(&properties)?;
        for (constraint, expr) in &definition.constraints {
            properties.insert(format!("{CONSTRAINT_PREFIX}{constraint}"), expr.clone());
        }
        properties.extend(definition.keys.iter().map(KeyDef::property));
        let id = uuid::Uuid::new_v4().simple().to_string();
        let (location, managed) = match &create.location {
            Some(location) => (self.db.table_location(location, self.privileges())?, false),
            None if temporary => (
                format!(
                    "{}/{}",
                    super::temporary::TEMPORARY_FOLDER,
                    crate::paths::managed_location(&name.schema, &name.name, &id)
                ),
                true,
            ),
            None => (crate::paths::managed_location(&name.schema, &name.name, &id), true),
        };
        let mut foreign_keys = Vec::with_capacity(definition.references.len());
        let mut taken: std::collections::HashSet<String> = definition
            .keys
            .iter()
            .map(|k| k.name.clone())
            .chain(definition.constraints.iter().map(|c| c.0.clone()))
            .collect();
        for clause in &definition.references {
            let own = super::references::Referenced {
                name: name.clone(),
                id: id.clone(),
                schema: &definition.schema,
                keys: definition.keys.clone(),
            };
            foreign_keys.push(self.define_foreign_key(&name, &definition.schema, own, &mut taken, clause).await?);
        }
        let mut options = BTreeMap::new();
        if let Some(on_commit) = create.on_commit.filter(|_| temporary) {
            options.insert(super::temporary::ON_COMMIT_OPTION.to_string(), on_commit.words().to_string());
        }
        let entry = TableEntry {
            id: id.clone(),
            schema: name.schema.clone(),
            name: name.name.clone(),
            location,
            managed,
            kind: TableKind::Table,
            defaults: std::mem::take(&mut definition.defaults),
            created_ms: chrono::Utc::now().timestamp_millis(),
            expectations: vec![],
            options,
            source: None,
            view: None,
            foreign_keys,
        };
        let store = self.db.store_for(&entry)?;
        let table = if !managed && Table::exists(&store).await? {
            let table = Table::open(store).await?;
            if !create.columns.is_empty() {
                check_attached_schema(&definition.schema, table.cached_snapshot().schema(), &name)?;
            }
            table
        } else {
            if definition.schema.fields.is_empty() && !managed {
                // A LOCATION without a Delta table is most likely a mistyped path: a table of no
                // columns there would hide the mistake. (PostgreSQL's tables without columns are
                // managed tables here.)
                return Err(Error::data(
                    "42P01",
                    format!("table {name} needs columns: its LOCATION holds no Delta table"),
                ));
            }
            properties
                .entry(sluice_storage::protocol::ENABLE_DELETION_VECTORS_KEY.into())
                .or_insert_with(|| "true".into());
            let delta = CreateDelta {
                schema: definition.schema.clone(),
                partition_columns,
                properties,
                name: Some(name.name.clone()),
                description: create.comment.clone(),
            };
            Table::create(store, delta).await.map_err(|e| match e {
                sluice_storage::Error::Schema(m) => Error::Plan(m),
                other => Error::from(other),
            })?
        };
        let table = Arc::new(table);
        let mut rows = None;
        if let Some(plan) = query_plan {
            let batches = self.ctx.execute_logical_plan(plan).await?.collect().await;
            let written = match batches {
                Ok(batches) => {
                    let count: usize = batches.iter().map(|b| b.num_rows()).sum();
                    let rows = Some(ChangedRows::inserted(batches.clone()));
                    let outcome = table.append(batches).await?;
                    if self.staging.holds_catalog() {
                        // A table a transaction block creates is its own until COMMIT: no flow
                        // or view reads it, and the name may still be another table's.
                        crate::change::committed(outcome).map(|_| count as u64)
                    } else {
                        self.db
                            .writer
                            .commit(&entry.qualified_name(), Operation::CreateAs, rows, outcome)
                            .await
                            .map(|_| count as u64)
                    }
                }
                Err(e) => Err(e.into()),
            };
            match written {
                Ok(count) => rows = Some(count),
                Err(e) => {
                    if managed {
                        self.delete_folder(&entry).await?;
                    }
                    return Err(e);
                }
            }
        }
        let replace = create.or_replace;
        let new_entry = entry.clone();
        let committed_catalog = self
            .update_catalog(|state| {
                let key = new_entry.qualified_name();
                if state.views.contains_key(&key) || state.sequences.contains_key(&key) {
                    return Err(Error::DuplicateTable(name.to_string()));
                }
                if temporary {
                    state
                        .schemas
                        .entry(name.schema.clone())
                        .or_insert_with(|| SchemaEntry { name: name.schema.clone(), created_ms: new_entry.created_ms });
                }
                match state.tables.get(&key) {
                    Some(_) if !replace => Err(Error::DuplicateTable(name.to_string())),
                    old => {
                        let old = old.cloned();
                        state.tables.insert(key, new_entry.clone());
                        Ok(old)
                    }
                }
            })
            .await;
        match committed_catalog {
            Ok((true, replaced)) => {
                // Held by the transaction block: the new folder goes if it rolls back, the
                // replaced table's when it commits.
                self.db.remember_table(&id, table);
                if managed {
                    self.staging.table_created(entry.clone());
                }
                if let Some(old) = replaced {
                    self.staging.table_dropped(old);
                }
            }
            Ok((false, replaced)) => {
                self.db.remember_table(&id, table);
                if let Some(old) = replaced {
                    self.db.forget_table(&old.id);
                    if old.managed {
                        self.delete_folder(&old).await?;
                    }
                }
            }
            Err(e) => {
                if managed {
                    self.delete_folder(&entry).await?;
                }
                return Err(e);
            }
        }
        Ok(match rows {
            Some(n) => StatementResult::count("SELECT", n),
            None => StatementResult::command("CREATE TABLE"),
        })
    }

    pub(crate) async fn alter_table(&self, alter: AlterTable) -> Result<StatementResult> {
        let name = table_name(&alter.name)?;
        // ALTER TABLE works on views too in PostgreSQL (dbt renames its views this way).
        if self.catalog_state().views.contains_key(&key(&name.schema, &name.name)) {
            return match alter.operations.as_slice() {
                [AlterTableOperation::RenameTable {
                    table_name: RenameTableNameKind::To(new) | RenameTableNameKind::As(new),
                }] => {
                    self.rename_view(&alter.name, new).await?;
                    Ok(StatementResult::command("ALTER TABLE"))
                }
                _ => Err(Error::NotSupported(format!("ALTER TABLE on view {name} other than RENAME TO"))),
            };
        }
        if self.catalog_state().table(&name.schema, &name.name).is_none() {
            return if alter.if_exists {
                Ok(StatementResult::command("ALTER TABLE"))
            } else {
                Err(Error::UndefinedTable(name.to_string()))
            };
        }
        for operation in alter.operations {
            self.alter_one(&alter.name, &name, operation).await?;
            self.snapshots.lock().unwrap_or_else(|p| p.into_inner()).clear();
        }
        Ok(StatementResult::command("ALTER TABLE"))
    }

    async fn alter_one(&self, object: &ObjectName, name: &TableName, operation: AlterTableOperation) -> Result<()> {
        let (entry, table, snapshot) = self.resolve_table(object).await?;
        // In a transaction block the change is staged: it depends on every row (a NOT NULL, a
        // CHECK, a key, a type), so another writer's commit to the table before COMMIT is 40001.
        table.note_whole_read();
        let mut schema = snapshot.schema().clone();
        let mut partitions = snapshot.partition_columns().to_vec();
        let mut configuration = snapshot.configuration().clone();
        match operation {
            AlterTableOperation::AddColumn { if_not_exists, column_def, .. } => {
                let column_name = normalize(&column_def.name);
                if schema.field(&column_name).is_some() {
                    return if if_not_exists {
                        Ok(())
                    } else {
                        Err(Error::data(
                            "42701",
                            format!("column \"{column_name}\" of relation \"{}\" already exists", name.name),
                        ))
                    };
                }
                let definition = self.define_columns_with_enums(&name.name, &[column_def], &[])?;
                if super::generated::has_generated(&definition.schema) {
                    return Err(Error::NotSupported(
                        "ADD COLUMN ... GENERATED ALWAYS AS (expr): Delta tables get generated columns only when \
                         they are created"
                            .into(),
                    ));
                }
                if !definition.keys.is_empty() {
                    return Err(Error::NotSupported(
                        "ADD COLUMN with PRIMARY KEY or UNIQUE (add the column, then ADD CONSTRAINT)".into(),
                    ));
                }
                // A REFERENCES of the new column is checked before the column is added, and
                // added after it (the column's values are its default's).
                let mut foreign_keys = Vec::new();
                if !definition.references.is_empty() {
                    let mut with_column = schema.clone();
                    with_column.fields.extend(definition.schema.fields.iter().cloned());
                    let keys = crate::keys::key_defs(&configuration);
                    let mut taken: std::collections::HashSet<String> = keys
                        .iter()
                        .map(|k| k.name.clone())
                        .chain(entry.foreign_keys.iter().map(|k| k.name.clone()))
                        .collect();
                    for clause in &definition.references {
                        let own = super::references::Referenced {
                            name: name.clone(),
                            id: entry.id.clone(),
                            schema: &with_column,
                            keys: keys.clone(),
                        };
                        foreign_keys.push(self.define_foreign_key(name, &with_column, own, &mut taken, clause).await?);
                    }
                }
                let mut field =
                    definition.schema.fields.into_iter().next().ok_or_else(|| Error::Internal("no column".into()))?;
                if crate::identity::Identity::of(&field).is_some() {
                    return Err(Error::NotSupported("ADD COLUMN of an identity or serial column".into()));
                }
                let has_rows = snapshot.files().any(|f| f.num_records() != Some(0));
                let default = definition.defaults.get(&column_name).cloned();
                if let Some(default) = &default {
                    // A default that cannot be computed fails the statement before the column is added.
                    let data_type = field.arrow_type();
                    self.default_values(default, &data_type, 1, &column_name).await?;
                }
                // Existing rows get the default, as in PostgreSQL: the column is added, filled,
                // then made NOT NULL if it is declared so (three commits).
                let not_null_after_fill = !field.nullable && has_rows && default.is_some();
                if not_null_after_fill {
                    field.nullable = true;
                }
                if !field.nullable && has_rows {
                    return Err(Error::data(
                        "23502",
                        format!("column \"{column_name}\" of relation \"{name}\" contains null values"),
                    ));
                }
                schema.fields.push(field);
                for (constraint, expr) in definition.constraints {
                    configuration.insert(format!("{CONSTRAINT_PREFIX}{constraint}"), expr);
                }
                self.metadata_committed(
                    &entry,
                    table.update_metadata(&snapshot, schema, partitions, configuration, "ADD COLUMNS").await?,
                )
                .await?;
                if let Some(default) = default {
                    self.update_entry(&entry, |e| {
                        e.defaults.insert(column_name.clone(), default.clone());
                    })
                    .await?;
                    if has_rows {
                        self.fill_column(object, &column_name, &default).await?;
                    }
                    if not_null_after_fill {
                        self.set_nullable(object, &entry, &column_name, false).await?;
                    }
                }
                for foreign_key in foreign_keys {
                    self.clear_statement_state();
                    self.validate_foreign_key(&entry, &foreign_key).await?;
                    self.update_entry(&entry, |e| e.foreign_keys.push(foreign_key.clone())).await?;
                }
            }
            AlterTableOperation::AlterColumn { column_name, op } => {
                let column = normalize(&column_name);
                if schema.field(&column).is_none() {
                    return Err(Error::undefined_column_of(&column, &name.name));
                }
                let generated = schema.field(&column).and_then(super::generated::expression_of).is_some();
                if generated && matches!(op, AlterColumnOperation::SetDefault { .. }) {
                    return Err(Error::data(
                        "42601",
                        format!("column \"{column}\" of relation \"{name}\" is a generated column"),
                    ));
                }
                match op {
                    AlterColumnOperation::SetNotNull => self.set_nullable(object, &entry, &column, false).await?,
                    AlterColumnOperation::DropNotNull => {
                        let keys = crate::keys::key_defs(&configuration);
                        if keys.iter().any(|k| k.primary && k.columns.contains(&column)) {
                            return Err(Error::data("42P16", format!("column \"{column}\" is in a primary key")));
                        }
                        self.set_nullable(object, &entry, &column, true).await?
                    }
                    AlterColumnOperation::SetDefault { value } => {
                        if schema.field(&column).and_then(crate::identity::Identity::of).is_some() {
                            return Err(Error::data(
                                "42601",
                                format!("column \"{column}\" of relation \"{name}\" is an identity column"),
                            ));
                        }
                        let text = value.to_string();
                        self.check_sequence_defaults([&text]).await?;
                        self.update_entry(&entry, |e| {
                            e.defaults.insert(column.clone(), text.clone());
                        })
                        .await?
                    }
                    AlterColumnOperation::DropDefault
                        if schema.field(&column).and_then(crate::identity::Identity::of).is_some() =>
                    {
                        let serial = schema.field(&column).is_some_and(crate::identity::is_serial);
                        if !serial {
                            return Err(Error::data(
                                "42601",
                                format!(
                                    "column \"{column}\" of relation \"{name}\" is an identity column (ALTER COLUMN ... \
                                     DROP IDENTITY is not supported)"
                                ),
                            ));
                        }
                        // The serial's values stop: the column stays NOT NULL, without a default.
                        self.change_column(&entry, &table, &snapshot, &column, "DROP DEFAULT", |field| {
                            crate::identity::forget_identity(field)
                        })
                        .await?;
                    }
                    AlterColumnOperation::DropDefault => {
                        self.update_entry(&entry, |e| {
                            e.defaults.remove(&column);
                        })
                        .await?
                    }
                    AlterColumnOperation::SetDataType { data_type, using, .. } => {
                        super::generated::refuse_change_of_read_column(&schema, &column, "changing the type of")?;
                        if schema.field(&column).and_then(super::generated::expression_of).is_some() {
                            return Err(Error::NotSupported(format!(
                                "changing the type of the generated column \"{column}\""
                            )));
                        }
                        let new_type = declared_type(&data_type)?.arrow_type();
                        self.check_key_type(&entry, &column, &new_type).await?;
                        self.set_column_type(object, &entry, &table, &column, &data_type, using.as_ref()).await?
                    }
                    other => return Err(Error::NotSupported(format!("ALTER COLUMN ... {other}"))),
                }
            }
            AlterTableOperation::AddConstraint { constraint: TableConstraint::PrimaryKey(pk), .. } => {
                refuse_key_options(
                    pk.characteristics.as_ref(),
                    pk.index_type.is_some() || !pk.index_options.is_empty() || pk.index_name.is_some(),
                )?;
                let columns = key_columns(&pk.columns)?;
                let key_name = pk.name.as_ref().map(normalize).unwrap_or_else(|| format!("{}_pkey", name.name));
                let def = KeyDef::primary_key(key_name, columns);
                self.add_key(object, &entry, &table, def).await?;
            }
            AlterTableOperation::AddConstraint { constraint: TableConstraint::Unique(unique), .. } => {
                let columns = key_columns(&unique.columns)?;
                let def = unique_def(&name.name, &unique, columns)?;
                self.add_key(object, &entry, &table, def).await?;
            }
            AlterTableOperation::AddConstraint { constraint: TableConstraint::ForeignKey(clause), not_valid } => {
                let keys = crate::keys::key_defs(&configuration);
                let mut taken: std::collections::HashSet<String> = keys
                    .iter()
                    .map(|k| k.name.clone())
                    .chain(configuration.keys().filter_map(|k| k.strip_prefix(CONSTRAINT_PREFIX)).map(String::from))
                    .chain(entry.foreign_keys.iter().map(|k| k.name.clone()))
                    .collect();
                let own =
                    super::references::Referenced { name: name.clone(), id: entry.id.clone(), schema: &schema, keys };
                let mut foreign_key = self.define_foreign_key(name, &schema, own, &mut taken, &clause).await?;
                // NOT VALID: the rows there are not checked (VALIDATE CONSTRAINT checks them).
                if not_valid {
                    foreign_key.not_valid = true;
                } else {
                    self.validate_foreign_key(&entry, &foreign_key).await?;
                }
                self.update_entry(&entry, |e| e.foreign_keys.push(foreign_key.clone())).await?;
            }
            AlterTableOperation::ValidateConstraint { name: constraint } => {
                let constraint = normalize(&constraint);
                match entry.foreign_keys.iter().find(|k| k.name == constraint) {
                    Some(foreign_key) => {
                        self.validate_foreign_key(&entry, foreign_key).await?;
                        self.update_entry(&entry, |e| {
                            for key in e.foreign_keys.iter_mut().filter(|k| k.name == constraint) {
                                key.not_valid = false;
                            }
                        })
                        .await?;
                    }
                    None if configuration.contains_key(&format!("{CONSTRAINT_PREFIX}{constraint}"))
                        || configuration.contains_key(&format!("{}{constraint}", crate::keys::KEY_PREFIX)) => {}
                    None => {
                        return Err(Error::UndefinedObject { kind: "constraint", name: constraint });
                    }
                }
            }
            AlterTableOperation::RenameColumn { old_column_name, new_column_name } => {
                let old = normalize(&old_column_name);
                let new = normalize(&new_column_name);
                super::generated::refuse_change_of_read_column(&schema, &old, "renaming")?;
                if schema.field(&new).is_some() {
                    return Err(Error::DuplicateObject { kind: "column", name: new });
                }
                let configuration =
                    self.with_column_mapping(&entry, &table, &snapshot, &mut schema, configuration).await?;
                let field = schema
                    .fields
                    .iter_mut()
                    .find(|f| f.name.eq_ignore_ascii_case(&old))
                    .ok_or_else(|| Error::UndefinedColumn(old.clone()))?;
                let previous = std::mem::replace(&mut field.name, new.clone());
                for partition in partitions.iter_mut().filter(|p| p.eq_ignore_ascii_case(&previous)) {
                    *partition = new.clone();
                }
                // Keys and indexes name their columns: they follow the rename.
                let mut configuration = configuration;
                for mut def in crate::keys::key_defs(&configuration) {
                    if def.uses_column(&previous) {
                        rename_in(&mut def.columns, &previous, &new);
                        rename_in(&mut def.include, &previous, &new);
                        let (property, text) = def.property();
                        configuration.insert(property, text);
                    }
                }
                let snapshot = table.snapshot().await?;
                self.metadata_committed(
                    &entry,
                    table.update_metadata(&snapshot, schema, partitions, configuration, "RENAME COLUMN").await?,
                )
                .await?;
                self.update_entry(&entry, |e| {
                    if let Some(default) = e.defaults.remove(&previous) {
                        e.defaults.insert(new.clone(), default);
                    }
                })
                .await?;
                let id = entry.id.clone();
                self.update_catalog(|state| {
                    for table in state.tables.values_mut() {
                        let own = table.id == id;
                        for foreign_key in &mut table.foreign_keys {
                            if own {
                                rename_in(&mut foreign_key.columns, &previous, &new);
                            }
                            if foreign_key.parent == id {
                                rename_in(&mut foreign_key.parent_columns, &previous, &new);
                            }
                        }
                    }
                    Ok(())
                })
                .await?;
            }
            AlterTableOperation::DropColumn { column_names, if_exists, drop_behavior, .. } => {
                let dropped: Vec<String> = column_names.iter().map(normalize).collect();
                // Foreign keys that reference the columns go with CASCADE (2BP01 without); the
                // table's own foreign keys on them go with them, as in PostgreSQL.
                let cascade = matches!(drop_behavior, Some(datafusion::sql::sqlparser::ast::DropBehavior::Cascade));
                let what = format!("column {}", dropped.join(", "));
                for column in &dropped {
                    let readers = super::generated::readers_of(&schema, column);
                    if let Some(reader) = readers.iter().find(|r| !dropped.contains(r)) {
                        return Err(if cascade {
                            Error::NotSupported(format!(
                                "DROP COLUMN {column} ... CASCADE, which would drop the generated column \"{reader}\" \
                                 (drop it too, by name)"
                            ))
                        } else {
                            Error::data(
                                "2BP01",
                                format!(
                                    "cannot drop column {column} of table {} because other objects depend on it",
                                    name.name
                                ),
                            )
                        });
                    }
                }
                self.drop_references_to_columns(&entry, &dropped, cascade, &[], &what).await?;
                if entry.foreign_keys.iter().any(|k| k.columns.iter().any(|c| dropped.contains(c))) {
                    self.update_entry(&entry, |e| {
                        e.foreign_keys.retain(|k| !k.columns.iter().any(|c| dropped.contains(c)))
                    })
                    .await?;
                }
                let mut configuration =
                    self.with_column_mapping(&entry, &table, &snapshot, &mut schema, configuration).await?;
                // The keys and indexes on a dropped column go with it, as in PostgreSQL (the
                // foreign keys that reference them were dealt with above).
                let keys_before = configuration.len();
                configuration.retain(|key, value| {
                    crate::keys::KeyDef::from_property(key, value)
                        .is_none_or(|def| !dropped.iter().any(|column| def.uses_column(column)))
                });
                // As DROP INDEX: no write of the table is between its key index and the change.
                let _keys = match configuration.len() < keys_before {
                    true => Some(self.lock_table_keys(&entry.id, &table).await?),
                    false => None,
                };
                for column in column_names {
                    let column = normalize(&column);
                    if partitions.iter().any(|p| p.eq_ignore_ascii_case(&column)) {
                        return Err(Error::NotSupported(format!("dropping partition column {column}")));
                    }
                    let before = schema.fields.len();
                    schema.fields.retain(|f| !f.name.eq_ignore_ascii_case(&column));
                    if schema.fields.len() == before && !if_exists {
                        return Err(Error::UndefinedColumn(column));
                    }
                }
                if schema.fields.is_empty() {
                    return Err(Error::Plan(format!("table {name} must keep at least one column")));
                }
                let snapshot = table.snapshot().await?;
                partitions.retain(|p| schema.field(p).is_some());
                self.metadata_committed(
                    &entry,
                    table.update_metadata(&snapshot, schema, partitions, configuration, "DROP COLUMNS").await?,
                )
                .await?;
            }
            AlterTableOperation::SetTblProperties { table_properties } => {
                let properties = table_properties.iter().map(option_pair).collect::<Result<HashMap<_, _>>>()?;
                crate::rights::check_table_properties(&properties, self.privileges())?;
                crate::keys::refuse_key_properties(&properties)?;
                self.metadata_committed(&entry, table.set_properties(properties, &[]).await.map_err(plan_error)?)
                    .await?;
            }
            AlterTableOperation::AddConstraint { constraint: TableConstraint::Check(check), .. } => {
                let constraint = check.name.as_ref().map(normalize).unwrap_or_else(|| format!("{}_check", name.name));
                let violations = self.count_violations(object, &check.expr.to_string()).await?;
                if violations > 0 {
                    return Err(Error::CheckViolation { table: name.to_string(), constraint });
                }
                let properties = HashMap::from([(format!("{CONSTRAINT_PREFIX}{constraint}"), check.expr.to_string())]);
                self.metadata_committed(&entry, table.set_properties(properties, &[]).await?).await?;
            }
            AlterTableOperation::DropConstraint { name: constraint, if_exists, drop_behavior } => {
                let dropped = normalize(&constraint);
                // The constraint's comment (see crate::sql::comments) goes with it.
                let comment = super::comments::constraint_comment_key(&dropped);
                if entry.foreign_keys.iter().any(|k| k.name == dropped) {
                    self.update_entry(&entry, |e| e.foreign_keys.retain(|k| k.name != dropped)).await?;
                    return self.drop_constraint_comment(&entry, &table, &configuration, &dropped).await;
                }
                let key_property = format!("{}{}", crate::keys::KEY_PREFIX, normalize(&constraint));
                if let Some(def) = configuration.get(&key_property).and_then(|text| KeyDef::parse(&dropped, text)) {
                    // The foreign keys that use it (a unique key on the same columns still serves them).
                    let cascade = matches!(drop_behavior, Some(datafusion::sql::sqlparser::ast::DropBehavior::Cascade));
                    let others: Vec<KeyDef> =
                        crate::keys::key_defs(&configuration).into_iter().filter(|k| k.name != dropped).collect();
                    self.drop_references_to_columns(
                        &entry,
                        &def.columns,
                        cascade,
                        &others,
                        &format!("constraint {dropped}"),
                    )
                    .await?;
                }
                if configuration.contains_key(&key_property) {
                    let _lock = self.lock_table_keys(&entry.id, &table).await?;
                    return self
                        .metadata_committed(
                            &entry,
                            table.set_properties(HashMap::new(), &[key_property, comment]).await?,
                        )
                        .await
                        .map(|_| ());
                }
                let key = format!("{CONSTRAINT_PREFIX}{}", normalize(&constraint));
                if !configuration.contains_key(&key) {
                    return if if_exists {
                        Ok(())
                    } else {
                        Err(Error::UndefinedObject { kind: "constraint", name: constraint.value })
                    };
                }
                self.metadata_committed(&entry, table.set_properties(HashMap::new(), &[key, comment]).await?).await?;
            }
            AlterTableOperation::RenameConstraint { old_name, new_name }
                if entry.foreign_keys.iter().any(|k| k.name == normalize(&old_name)) =>
            {
                let (old, new) = (normalize(&old_name), normalize(&new_name));
                let keys = crate::keys::key_defs(&configuration);
                let taken = keys.iter().any(|k| k.name == new)
                    || configuration.contains_key(&format!("{CONSTRAINT_PREFIX}{new}"))
                    || entry.foreign_keys.iter().any(|k| k.name == new);
                if taken {
                    return Err(Error::data(
                        "42710",
                        format!("constraint \"{new}\" for relation \"{}\" already exists", name.name),
                    ));
                }
                self.update_entry(&entry, |e| {
                    for key in e.foreign_keys.iter_mut().filter(|k| k.name == old) {
                        key.name = new.clone();
                    }
                })
                .await?;
                self.rename_constraint_comment(&entry, &table, &configuration, &old, &new).await?;
            }
            AlterTableOperation::RenameTable {
                table_name: RenameTableNameKind::To(new) | RenameTableNameKind::As(new),
            } => {
                let qualified = new.0.len() > 1;
                let mut new = crate::names::table_name(&new)?;
                if !qualified {
                    new.schema = name.schema.clone();
                }
                if crate::catalog::is_temporary_schema(&new.schema) != crate::catalog::is_temporary_schema(&name.schema)
                {
                    return Err(Error::NotSupported("cannot move objects into or out of temporary schemas".into()));
                }
                let old_key = entry.qualified_name();
                self.update_catalog(|state| {
                    if state.table(&new.schema, &new.name).is_some()
                        || state.views.contains_key(&key(&new.schema, &new.name))
                    {
                        return Err(Error::DuplicateTable(new.to_string()));
                    }
                    let mut moved =
                        state.tables.remove(&old_key).ok_or_else(|| Error::UndefinedTable(name.to_string()))?;
                    moved.schema = new.schema.clone();
                    moved.name = new.name.clone();
                    state.tables.insert(moved.qualified_name(), moved);
                    Ok(())
                })
                .await?;
            }
            other => return Err(Error::NotSupported(format!("ALTER TABLE {other}"))),
        }
        Ok(())
    }

    /// Turns on column mapping (name mode) if it is off, keeping the current names as physical
    /// names so existing files still read; returns the configuration to commit with.
    async fn with_column_mapping(
        &self,
        entry: &TableEntry,
        table: &Table,
        snapshot: &sluice_storage::snapshot::Snapshot,
        schema: &mut StructType,
        configuration: HashMap<String, String>,
    ) -> Result<HashMap<String, String>> {
        if snapshot.column_mapping_mode() != sluice_storage::schema::ColumnMappingMode::None {
            return Ok(configuration);
        }
        let properties =
            HashMap::from([(sluice_storage::schema::COLUMN_MAPPING_MODE_KEY.to_string(), "name".to_string())]);
        self.metadata_committed(entry, table.set_properties(properties, &[]).await?).await?;
        let upgraded = table.snapshot().await?;
        *schema = upgraded.schema().clone();
        Ok(upgraded.configuration().clone())
    }

    /// Tells the writer's listeners about a commit of the table's schema or properties.
    /// Sets existing rows' `column` to its new default (ADD COLUMN ... DEFAULT).
    async fn fill_column(&self, object: &ObjectName, column: &str, default: &str) -> Result<()> {
        self.clear_statement_state();
        let sql = format!(
            "UPDATE {object} SET {} = {default}",
            datafusion::sql::sqlparser::ast::Ident::with_quote('"', column)
        );
        let crate::syntax::parser::SluiceStatement::Standard(statement) =
            crate::syntax::parser::parse_statement_text(&sql)?
        else {
            return Err(Error::Internal("the fill of a new column is not an UPDATE".into()));
        };
        let datafusion::sql::sqlparser::ast::Statement::Update(update) = *statement else {
            return Err(Error::Internal("the fill of a new column is not an UPDATE".into()));
        };
        // Boxed: an UPDATE's future is large, and this one runs inside ALTER TABLE's.
        Box::pin(self.update_statement(update)).await?;
        self.clear_statement_state();
        Ok(())
    }

    /// SET NOT NULL (refused while a row holds NULL) or DROP NOT NULL.
    async fn set_nullable(&self, object: &ObjectName, entry: &TableEntry, column: &str, nullable: bool) -> Result<()> {
        self.clear_statement_state();
        let (_, table, _) = self.resolve_table(object).await?;
        let _lock = self.lock_table_keys(&entry.id, &table).await?;
        let snapshot = table.snapshot().await?;
        if !nullable {
            let quoted = datafusion::sql::sqlparser::ast::Ident::with_quote('"', column);
            if self.count_violations(object, &format!("{quoted} IS NOT NULL")).await? > 0 {
                return Err(Error::data(
                    "23502",
                    format!("column \"{column}\" of relation \"{}\" contains null values", entry.name),
                ));
            }
        }
        self.change_column(entry, &table, &snapshot, column, "CHANGE COLUMN", |field| field.nullable = nullable)
            .await?;
        self.clear_statement_state();
        Ok(())
    }

    /// Commits one column's change (its nullability, its metadata) on `snapshot`; the caller
    /// holds the table's writer lock.
    pub(crate) async fn change_column(
        &self,
        entry: &TableEntry,
        table: &Table,
        snapshot: &sluice_storage::snapshot::Snapshot,
        column: &str,
        operation: &str,
        change: impl FnOnce(&mut StructField),
    ) -> Result<u64> {
        let mut schema = snapshot.schema().clone();
        let field = schema
            .fields
            .iter_mut()
            .find(|f| f.name == column)
            .ok_or_else(|| Error::undefined_column_of(column, &entry.name))?;
        change(field);
        let partitions = snapshot.partition_columns().to_vec();
        let outcome =
            table.update_metadata(snapshot, schema, partitions, snapshot.configuration().clone(), operation).await?;
        self.metadata_committed(entry, outcome).await
    }

    /// ADD PRIMARY KEY / ADD UNIQUE: refused while two rows share a key (or, for a primary key,
    /// a key column holds NULL); key columns of a primary key become NOT NULL.
    pub(crate) async fn add_key(
        &self,
        object: &ObjectName,
        entry: &TableEntry,
        table: &Arc<Table>,
        def: KeyDef,
    ) -> Result<()> {
        let guard = self.lock_table_keys(&entry.id, table).await?;
        let snapshot = guard.snapshot().clone();
        let existing = crate::keys::key_defs(snapshot.configuration());
        if def.primary && existing.iter().any(|k| k.primary) {
            return Err(Error::data(
                "42P16",
                format!("multiple primary keys for table \"{}\" are not allowed", entry.name),
            ));
        }
        if existing.iter().any(|k| k.name == def.name) {
            return Err(Error::DuplicateTable(def.name));
        }
        for column in &def.columns {
            if snapshot.schema().field(column).is_none() {
                return Err(Error::undefined_key_column(column));
            }
        }
        let quoted: Vec<String> = def
            .columns
            .iter()
            .map(|c| datafusion::sql::sqlparser::ast::Ident::with_quote('"', c).to_string())
            .collect();
        let list = quoted.join(", ");
        // NULLs never collide, unless the key says NULLS NOT DISTINCT.
        let not_null = match def.nulls_distinct {
            true => quoted.iter().map(|c| format!("{c} IS NOT NULL")).collect::<Vec<_>>().join(" AND "),
            false => "true".to_string(),
        };
        let sql = format!("SELECT {list} FROM {object} WHERE {not_null} GROUP BY {list} HAVING count(*) > 1 LIMIT 1");
        let result = if def.unique { self.run_sql_text(&sql).await? } else { vec![] };
        if let Some(batch) = result.iter().find(|b| b.num_rows() > 0) {
            let columns: Vec<usize> = (0..batch.num_columns()).collect();
            let detail = crate::keys::key_text(&def, batch, &columns, 0);
            return Err(Error::data(
                "23505",
                format!("could not create unique index \"{}\": key {detail} is duplicated", def.name),
            ));
        }
        let mut schema = snapshot.schema().clone();
        if def.primary {
            let nulls = quoted.iter().map(|c| format!("{c} IS NULL")).collect::<Vec<_>>().join(" OR ");
            let rows = self.run_sql_text(&format!("SELECT 1 FROM {object} WHERE {nulls} LIMIT 1")).await?;
            if rows.iter().any(|b| b.num_rows() > 0) {
                return Err(Error::data(
                    "23502",
                    format!("column of relation \"{}\" in the primary key contains null values", entry.name),
                ));
            }
            for field in schema.fields.iter_mut().filter(|f| def.columns.contains(&f.name)) {
                field.nullable = false;
            }
        }
        let mut configuration = snapshot.configuration().clone();
        let (key, value) = def.property();
        configuration.insert(key, value);
        let outcome = table
            .update_metadata(&snapshot, schema, snapshot.partition_columns().to_vec(), configuration, "ADD CONSTRAINT")
            .await?;
        self.metadata_committed(entry, outcome).await?;
        drop(guard);
        Ok(())
    }

    pub(crate) async fn run_sql_text(&self, sql: &str) -> Result<Vec<RecordBatch>> {
        self.clear_statement_state();
        let crate::syntax::parser::SluiceStatement::Standard(statement) =
            crate::syntax::parser::parse_statement_text(sql)?
        else {
            return Err(Error::Internal("not a query".into()));
        };
        let datafusion::sql::sqlparser::ast::Statement::Query(query) = *statement else {
            return Err(Error::Internal("not a query".into()));
        };
        let result = self.run_query(*query).await?;
        self.clear_statement_state();
        Ok(result.batches().to_vec())
    }

    pub(crate) async fn metadata_committed(&self, entry: &TableEntry, outcome: CommitOutcome) -> Result<u64> {
        self.db.writer.commit(&entry.qualified_name(), Operation::Metadata, None, outcome).await
    }

    /// Before `what` (a key or columns of `entry`) goes: the foreign keys of other tables that
    /// reference any of `columns` through no key among `others` are dropped with `cascade`,
    /// and refuse it without (2BP01).
    async fn drop_references_to_columns(
        &self,
        entry: &TableEntry,
        columns: &[String],
        cascade: bool,
        others: &[KeyDef],
        what: &str,
    ) -> Result<()> {
        let id = entry.id.clone();
        let served = |parent_columns: &[String]| others.iter().any(|k| k.unique && k.is_on(parent_columns));
        let dependent = |k: &crate::catalog::references::ForeignKey| {
            k.parent == id && k.parent_columns.iter().any(|c| columns.contains(c)) && !served(&k.parent_columns)
        };
        let state = self.catalog_state();
        let Some((child, key)) = state.references_to(&id).find(|(_, k)| dependent(k)) else { return Ok(()) };
        if !cascade {
            return Err(Error::data(
                "2BP01",
                format!(
                    "cannot drop {what} of table {} because other objects depend on it (constraint {} on table {} \
                     depends on it; use DROP ... CASCADE to drop the dependent objects too)",
                    entry.name, key.name, child.name
                ),
            ));
        }
        drop(state);
        self.update_catalog(|state| {
            for table in state.tables.values_mut() {
                table.foreign_keys.retain(|k| !dependent(k));
            }
            Ok(())
        })
        .await
        .map(|_| ())
    }

    async fn update_entry(&self, entry: &TableEntry, change: impl Fn(&mut TableEntry)) -> Result<()> {
        let key = entry.qualified_name();
        self.update_catalog(|state| {
            if let Some(e) = state.tables.get_mut(&key) {
                change(e);
            }
            Ok(())
        })
        .await
        .map(|_| ())
    }

    async fn count_violations(&self, table: &ObjectName, expr: &str) -> Result<u64> {
        let sql = format!("SELECT count(*) FROM {table} WHERE NOT ({expr})");
        let batches = self.ctx.sql(&sql).await?.collect().await?;
        Ok(batches
            .first()
            .and_then(|b| b.column(0).as_any().downcast_ref::<Int64Array>().map(|a| a.value(0)))
            .unwrap_or(0)
            .max(0) as u64)
    }

    pub(crate) async fn describe_history(&self, table: &ObjectName, limit: Option<u64>) -> Result<StatementResult> {
        let (_, table, _) = self.resolve_table(table).await?;
        let history = table.history(limit.map(|l| l as usize)).await?;
        let batch = crate::provider::history::history_batch(&history)?;
        Ok(StatementResult::Rows { schema: batch.schema(), batches: vec![batch] })
    }

    pub(crate) async fn optimize(&self, table: &ObjectName) -> Result<StatementResult> {
        let (entry, table, _) = self.resolve_table(table).await?;
        let result = table.optimize(None).await?;
        self.rewritten(&entry, result).await
    }

    /// `REORG TABLE t APPLY (PURGE)`: the files with deletion vectors rewritten without them.
    pub(crate) async fn reorg_purge(&self, table: &ObjectName) -> Result<StatementResult> {
        let (entry, table, _) = self.resolve_table(table).await?;
        let result = table.purge_deletion_vectors().await?;
        self.rewritten(&entry, result).await
    }

    /// `ALTER TABLE t DROP FEATURE deletionVectors`: the property turned off, the deletion
    /// vectors purged and the protocol lowered, in three commits (see
    /// `sluice_storage::table::Table::drop_feature`).
    pub(crate) async fn drop_feature(
        &self,
        name: &ObjectName,
        feature: &str,
        truncate_history: bool,
    ) -> Result<StatementResult> {
        if truncate_history {
            return Err(Error::NotSupported(
                "DROP FEATURE ... TRUNCATE HISTORY (Sluice drops the feature at once and keeps the history, \
                 which delta.logRetentionDuration trims)"
                    .into(),
            ));
        }
        if feature != "deletionVectors" {
            return Err(Error::NotSupported(format!("DROP FEATURE {feature} (only deletionVectors can be dropped)")));
        }
        let (entry, table, snapshot) = self.resolve_table(name).await?;
        let protocol = snapshot.protocol();
        if !sluice_storage::protocol::has_reader_feature(protocol, feature)
            && !sluice_storage::protocol::has_writer_feature(protocol, feature)
        {
            return Err(Error::Plan(format!(
                "table {} does not have the table feature {feature}",
                entry.qualified_name()
            )));
        }
        if snapshot.property_is_true(sluice_storage::protocol::ENABLE_DELETION_VECTORS_KEY) {
            let off = HashMap::from([(
                sluice_storage::protocol::ENABLE_DELETION_VECTORS_KEY.to_string(),
                "false".to_string(),
            )]);
            self.metadata_committed(&entry, table.set_properties(off, &[]).await.map_err(plan_error)?).await?;
        }
        let purged = table.purge_deletion_vectors().await?;
        if let Some(outcome) = purged.outcome {
            self.db.writer.commit(&entry.qualified_name(), Operation::Optimize, None, outcome).await?;
        }
        if let Some(outcome) = table.drop_feature(feature).await.map_err(plan_error)? {
            self.metadata_committed(&entry, outcome).await?;
        }
        Ok(StatementResult::command("ALTER TABLE"))
    }

    /// The result of OPTIMIZE or REORG, once its commit is told.
    async fn rewritten(
        &self,
        entry: &TableEntry,
        result: sluice_storage::maintenance::OptimizeResult,
    ) -> Result<StatementResult> {
        if let Some(outcome) = result.outcome {
            self.db.writer.commit(&entry.qualified_name(), Operation::Optimize, None, outcome).await?;
        }
        let schema = optimize_schema();
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(vec![result.files_removed as i64])),
                Arc::new(Int64Array::from(vec![result.files_added as i64])),
            ],
        )?;
        Ok(StatementResult::Rows { schema, batches: vec![batch] })
    }

    pub(crate) async fn vacuum(
        &self,
        table: &ObjectName,
        retain_hours: Option<f64>,
        dry_run: bool,
    ) -> Result<StatementResult> {
        let (entry, table, _) = self.resolve_table(table).await?;
        // What durable subscriptions still read stays, also those another process made.
        table.retain_changes_from(self.db.catalog.refresh().await?.changes_needed_from(&entry.id));
        let retention = retain_hours.map(|h| (h * 3_600_000.0) as i64);
        let result = table.vacuum(retention, dry_run, true).await.map_err(plan_error)?;
        let schema = vacuum_schema();
        let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(StringArray::from(result.files_deleted))])?;
        Ok(StatementResult::Rows { schema, batches: vec![batch] })
    }

    pub(crate) async fn restore(&self, table: &ObjectName, target: TimeTravel) -> Result<StatementResult> {
        let (entry, handle, _) = self.resolve_table(table).await?;
        let snapshot = self.snapshot_at(&handle, &target).await?;
        let outcome = handle.restore(snapshot.version()).await?;
        self.db.writer.commit(&entry.qualified_name(), Operation::Restore, None, outcome).await?;
        Ok(StatementResult::command("RESTORE"))
    }
}

/// Before a DROP of the table `table_key`: the foreign keys of other tables (not among
/// `together`, dropped by the same statement) that reference it are dropped with CASCADE, and
/// refuse the DROP without (2BP01, as PostgreSQL).
fn drop_references(
    state: &mut crate::catalog::CatalogState,
    table_key: &str,
    cascade: bool,
    together: &std::collections::HashSet<String>,
) -> Result<()> {
    let Some(entry) = state.tables.get(table_key) else { return Ok(()) };
    let (id, name) = (entry.id.clone(), entry.name.clone());
    let dependents: Vec<(String, String)> = state
        .references_to(&id)
        .filter(|(child, _)| child.id != id && !together.contains(&child.qualified_name()))
        .map(|(child, key)| (child.qualified_name(), key.name.clone()))
        .collect();
    if dependents.is_empty() {
        return Ok(());
    }
    if !cascade {
        let (child, constraint) = dependents.first().cloned().unwrap_or_default();
        return Err(Error::data(
            "2BP01",
            format!(
                "cannot drop table {name} because other objects depend on it (constraint {constraint} on table {} \
                 depends on table {name}; use DROP ... CASCADE to drop the dependent objects too)",
                child.rsplit('.').next().unwrap_or(&child)
            ),
        ));
    }
    for (child, constraint) in dependents {
        if let Some(child) = state.tables.get_mut(&child) {
            child.foreign_keys.retain(|k| !(k.parent == id && k.name == constraint));
        }
    }
    Ok(())
}

/// Renames `old` to `new` in a list of column names.
fn rename_in(columns: &mut [String], old: &str, new: &str) {
    for column in columns.iter_mut().filter(|c| c.as_str() == old) {
        *column = new.to_string();
    }
}

fn plan_error(e: sluice_storage::Error) -> Error {
    match e {
        sluice_storage::Error::InvalidArgument(m) | sluice_storage::Error::Schema(m) => Error::Plan(m),
        other => Error::from(other),
    }
}

fn option_pair(option: &SqlOption) -> Result<(String, String)> {
    match option {
        SqlOption::KeyValue { key, value } => {
            let key = key.to_string().trim_matches('\'').trim_matches('"').to_string();
            let value = match value {
                datafusion::sql::sqlparser::ast::Expr::Value(v) => {
                    crate::syntax::parser::literal_text(&v.value).unwrap_or_else(|| v.to_string())
                }
                other => other.to_string(),
            };
            Ok((key, value))
        }
        other => Err(Error::NotSupported(format!("table option {other}"))),
    }
}

/// A table attached with LOCATION must match the columns the statement gives.
fn check_attached_schema(declared: &StructType, actual: &StructType, name: &TableName) -> Result<()> {
    let summary =
        |s: &StructType| s.fields.iter().map(|f| (f.name.to_lowercase(), f.data_type.clone())).collect::<Vec<_>>();
    if summary(declared) != summary(actual) {
        let shown = |s: &StructType| {
            s.fields
                .iter()
                .map(|f: &StructField| format!("{} {}", f.name, crate::types::pg_type_name(f)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(Error::Plan(format!(
            "the Delta table at the location of {name} has columns ({}), not the declared ({})",
            shown(actual),
            shown(declared)
        )));
    }
    Ok(())
}

/// The columns OPTIMIZE returns.
pub fn optimize_schema() -> arrow::datatypes::SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("files_removed", ArrowType::Int64, false),
        Field::new("files_added", ArrowType::Int64, false),
    ]))
}

/// The columns VACUUM returns.
pub fn vacuum_schema() -> arrow::datatypes::SchemaRef {
    Arc::new(Schema::new(vec![Field::new("path", ArrowType::Utf8, false)]))
}

/// A query column's declared type (`sluice.type`, and an enum type's OID), the metadata a table
/// column takes from it.
fn declared_only(field: &Field) -> HashMap<String, String> {
    // An enum type is named twice: by name and by OID (see crate::catalog::enums).
    [crate::types::DECLARED_TYPE_KEY, crate::catalog::enums::ENUM_OID_KEY]
        .into_iter()
        .filter_map(|key| Some((key.to_string(), field.metadata().get(key)?.clone())))
        .collect()
}
