//! `nextval`, `currval`, `setval` and `lastval` on sequences, and `pg_get_serial_sequence`. A
//! sequence name (text, as PostgreSQL's `regclass` reads it: `s`, `"S"`, `schema.s`) names either
//! a standalone sequence (`CREATE SEQUENCE`, see [`crate::sequence`]) or the sequence of a
//! `SERIAL` or identity column, named as PostgreSQL names it (`<table>_<column>_seq`);
//! `pg_get_serial_sequence(table, column)` gives the latter's name, or the name of a standalone
//! sequence `OWNED BY` the column.
//!
//! A query's calls are resolved before it is planned: each call with a constant name becomes the
//! value it gives (so a call gives one value per statement, not one per row, where PostgreSQL
//! calls it per row). `nextval` and `setval` commit the sequence's new state at once (a column's
//! high-water mark under the table's writer lock; a standalone sequence's mark, see
//! [`crate::sequence`]), so a value handed out is never handed out again, after a restart too,
//! whether or not the statement or its transaction commits.
//!
//! A column whose DEFAULT is `nextval('s')` takes one value per row. `SELECT * FROM s` reads a
//! standalone sequence's `last_value`, `log_cnt` and `is_called` ([`sequence_relation`]).
//!
//! The session keeps the last value each sequence gave it (`currval`) and which sequence gave the
//! last one (`lastval`).

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{
    CastKind, DataType as SqlType, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Query, Value, VisitMut,
    VisitorMut,
};
use sluice_storage::table::Table;

use crate::catalog::{SequenceEntry, TableEntry};
use crate::error::{Error, Result};
use crate::identity::Identity;
use crate::names::TableName;
use crate::sql::context::QueryContext;

/// How many times the calls of a query are resolved: a call's argument may be another call
/// (`nextval(pg_get_serial_sequence('t', 'id'))`), resolved first.
const CALL_NESTING_MAX: usize = 4;

#[derive(Debug, Clone, PartialEq)]
enum Call {
    Next,
    Current,
    /// `setval(name, value [, is_called])`.
    Set(Box<Expr>, bool),
    /// `lastval()`: no name.
    Last,
    /// `pg_get_serial_sequence(table, column)`: the name is the table's, this the column.
    SerialName(String),
}

impl Call {
    /// The function's name (a select item's column name).
    fn function(&self) -> &'static str {
        match self {
            Call::Next => "nextval",
            Call::Current => "currval",
            Call::Set(..) => "setval",
            Call::Last => "lastval",
            Call::SerialName(_) => "pg_get_serial_sequence",
        }
    }
}

/// A call found in a query: which, on which sequence name; the value replaces it.
struct Found {
    call: Call,
    name: String,
    value: Option<Expr>,
}

/// A constant text argument (also cast: `'s'::regclass`).
fn text_of(expr: &Expr) -> Option<String> {
    let expr = match expr {
        Expr::Cast { expr, .. } => expr.as_ref(),
        other => other,
    };
    match expr {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) => Some(s.clone()),
            _ => None,
        },
        _ => None,
    }
}

fn boolean_of(expr: &Expr) -> Option<bool> {
    match expr {
        Expr::Value(v) => match &v.value {
            Value::Boolean(b) => Some(*b),
            _ => None,
        },
        _ => None,
    }
}

fn call_of(expr: &Expr) -> Option<(Call, String)> {
    let Expr::Function(function) = expr else { return None };
    let name = function.name.0.last()?.to_string().to_ascii_lowercase();
    let FunctionArguments::List(list) = &function.args else {
        return (name == "lastval" && matches!(function.args, FunctionArguments::None))
            .then(|| (Call::Last, String::new()));
    };
    let args: Vec<&Expr> = list
        .args
        .iter()
        .filter_map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e),
            _ => None,
        })
        .collect();
    if args.len() != list.args.len() {
        return None;
    }
    match (name.as_str(), args.as_slice()) {
        ("nextval", [seq]) => Some((Call::Next, text_of(seq)?)),
        ("currval", [seq]) => Some((Call::Current, text_of(seq)?)),
        ("setval", [seq, value]) => Some((Call::Set(Box::new((*value).clone()), true), text_of(seq)?)),
        ("setval", [seq, value, called]) => {
            Some((Call::Set(Box::new((*value).clone()), boolean_of(called)?), text_of(seq)?))
        }
        ("lastval", []) => Some((Call::Last, String::new())),
        ("pg_get_serial_sequence", [table, column]) => Some((Call::SerialName(text_of(column)?), text_of(table)?)),
        _ => None,
    }
}

/// The sequence a call of `nextval`, `currval` or `setval` names, if `expr` is one with a
/// constant name.
pub(crate) fn called_sequence(expr: &Expr) -> Option<String> {
    match call_of(expr)? {
        (Call::Next | Call::Current | Call::Set(..), name) => Some(name),
        _ => None,
    }
}

struct Collect {
    found: Vec<Found>,
}

impl VisitorMut for Collect {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Some((call, name)) = call_of(expr) {
            self.found.push(Found { call, name, value: None });
        }
        ControlFlow::Continue(())
    }
}

struct Replace<'a> {
    found: std::slice::Iter<'a, Found>,
}

impl VisitorMut for Replace<'_> {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if call_of(expr).is_some() {
            if let Some(value) = self.found.next().and_then(|f| f.value.clone()) {
                *expr = value;
            }
        }
        ControlFlow::Continue(())
    }
}

/// The session's key of a column's sequence (for `currval`): `schema.table_column_seq`.
pub(crate) fn sequence_key(schema: &str, table: &str, column: &str) -> String {
    format!("{schema}.{}", crate::identity::sequence_name(table, column))
}

/// The session's key of a standalone sequence: its id (a rename keeps `currval`, as in
/// PostgreSQL, where it is the sequence's OID).
fn standalone_key(entry: &SequenceEntry) -> String {
    format!("sequence:{}", entry.id)
}

/// `value` as a `bigint` expression (the type of every sequence function's result).
fn bigint(value: i64) -> Expr {
    Expr::Cast {
        kind: CastKind::DoubleColon,
        expr: Box::new(Expr::value(Value::Number(value.to_string(), false))),
        data_type: SqlType::BigInt(None),
        format: None,
        array: false,
    }
}

/// The values the session's sequence calls gave.
#[derive(Debug, Default)]
pub(crate) struct SessionValues {
    /// The last value each sequence gave the session (by [`sequence_key`] or [`standalone_key`]).
    values: HashMap<String, i64>,
    /// The key of the sequence whose `nextval` was called last.
    last: Option<String>,
}

/// A sequence a name resolves to.
enum Sequence {
    Standalone(SequenceEntry),
    /// The sequence of a SERIAL or identity column: its table and column.
    Column(TableEntry, Arc<Table>, String),
}

/// A statement with its sequence calls replaced by constants of their types: its shape, for
/// Describe, which must not advance a sequence.
pub(crate) fn without_sequence_calls(
    mut statement: datafusion::sql::sqlparser::ast::Statement,
) -> datafusion::sql::sqlparser::ast::Statement {
    // Each call becomes a different constant of its type, so that the select items keep
    // distinct names.
    struct Mask(usize);
    impl VisitorMut for Mask {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
            let n = self.0;
            let (value, data_type) = match call_of(expr) {
                Some((Call::SerialName(_), _)) => (Value::SingleQuotedString(n.to_string()), SqlType::Text),
                Some(_) => (Value::Number(n.to_string(), false), SqlType::BigInt(None)),
                None => return ControlFlow::Continue(()),
            };
            self.0 += 1;
            *expr = Expr::Cast {
                kind: CastKind::DoubleColon,
                expr: Box::new(Expr::value(value)),
                data_type,
                format: None,
                array: false,
            };
            ControlFlow::Continue(())
        }
    }
    let _ = statement.visit(&mut Mask(0));
    statement
}

/// The relation `SELECT * FROM s` reads for a standalone sequence: one row of `last_value`,
/// `log_cnt` and `is_called`, as PostgreSQL shows a sequence.
pub(crate) async fn sequence_relation(
    db: &crate::warehouse::Warehouse,
    entry: &SequenceEntry,
) -> Result<datafusion::datasource::MemTable> {
    use arrow::array::{BooleanArray, Int64Array};
    use arrow::datatypes::{DataType, Field, Schema};
    let state = db.sequences.state(&db.catalog, entry).await;
    let schema = Arc::new(Schema::new(vec![
        Field::new("last_value", DataType::Int64, false),
        Field::new("log_cnt", DataType::Int64, false),
        Field::new("is_called", DataType::Boolean, false),
    ]));
    let batch = arrow::array::RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from(vec![state.last_value])),
            Arc::new(Int64Array::from(vec![state.log_cnt])),
            Arc::new(BooleanArray::from(vec![state.is_called])),
        ],
    )?;
    Ok(datafusion::datasource::MemTable::try_new(schema, vec![vec![batch]])?)
}

impl QueryContext {
    /// Replaces the sequence calls of a query by their values (see the module's text).
    pub(crate) async fn resolve_sequences(&self, mut query: Query) -> Result<Query> {
        for _ in 0..CALL_NESTING_MAX {
            let mut collect = Collect { found: Vec::new() };
            let _ = query.visit(&mut collect);
            if collect.found.is_empty() {
                return Ok(query);
            }
            for found in &mut collect.found {
                found.value = Some(match &found.call {
                    Call::SerialName(column) => match self.serial_sequence(&found.name, column).await? {
                        Some(name) => Expr::value(Value::SingleQuotedString(name)),
                        None => Expr::value(Value::Null),
                    },
                    call => bigint(self.sequence_call(call, &found.name).await?),
                });
            }
            name_select_items(&mut query);
            let mut replace = Replace { found: collect.found.iter() };
            let _ = query.visit(&mut replace);
        }
        Ok(query)
    }

    /// What one call gives.
    async fn sequence_call(&self, call: &Call, name: &str) -> Result<i64> {
        if *call == Call::Last {
            return self.last_value().await;
        }
        let sequence = self.sequence(name).await?;
        let key = match &sequence {
            Sequence::Standalone(entry) => standalone_key(entry),
            Sequence::Column(entry, _, column) => sequence_key(&entry.schema, &entry.name, column),
        };
        match call {
            Call::Current => {
                let values = self.sequences.lock().unwrap_or_else(|p| p.into_inner());
                values.values.get(&key).copied().ok_or_else(|| {
                    Error::data("55000", format!("currval of sequence \"{name}\" is not yet defined in this session"))
                })
            }
            Call::Next => {
                let value = match &sequence {
                    Sequence::Standalone(entry) => {
                        let values = self.db.sequences.next(&self.db.catalog, entry, 1).await?;
                        values.first().copied().ok_or_else(|| Error::Internal("nextval gave no value".into()))?
                    }
                    Sequence::Column(entry, table, column) => self.column_next(entry, table, column, None).await?,
                };
                self.remember_sequence_value(key, value, true);
                Ok(value)
            }
            Call::Set(value, is_called) => {
                let value = self.set_value(value).await?;
                match &sequence {
                    Sequence::Standalone(entry) => {
                        if value < entry.min_value || value > entry.max_value {
                            return Err(Error::data(
                                "22003",
                                format!(
                                    "setval: value {value} is out of bounds for sequence \"{}\" ({}..{})",
                                    entry.name, entry.min_value, entry.max_value
                                ),
                            ));
                        }
                        self.db.sequences.set(&self.db.catalog, entry, value, *is_called).await?;
                    }
                    Sequence::Column(entry, table, column) => {
                        self.column_next(entry, table, column, Some((value, *is_called))).await?;
                    }
                }
                // PostgreSQL's setval sets currval only when the value counts as called, and
                // never lastval.
                if *is_called {
                    self.remember_sequence_value(key, value, false);
                }
                Ok(value)
            }
            Call::Last | Call::SerialName(_) => Err(Error::Internal("not a call on a sequence".into())),
        }
    }

    /// `setval`'s value: a constant expression (a scalar subquery too).
    async fn set_value(&self, value: &Expr) -> Result<i64> {
        let reads_columns = datafusion::sql::sqlparser::ast::visit_expressions(value, |expr| match expr {
            Expr::Subquery(_) => ControlFlow::Continue(()),
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) => ControlFlow::Break(()),
            _ => ControlFlow::Continue(()),
        });
        if reads_columns.is_break() && !matches!(value, Expr::Subquery(_)) {
            return Err(Error::NotSupported(
                "setval with a value computed from the query's rows (give a constant or a scalar subquery: \
                 setval('s', (SELECT max(id) FROM t)))"
                    .into(),
            ));
        }
        let array = self.evaluate_constant(value, &arrow::datatypes::DataType::Int64).await?;
        let array = arrow::array::AsArray::as_primitive_opt::<arrow::datatypes::Int64Type>(array.as_ref())
            .ok_or_else(|| Error::Internal("setval's value is not a bigint".into()))?
            .clone();
        array.iter().next().flatten().ok_or_else(|| Error::Internal("setval's value is NULL".into()))
    }

    /// The next value of a column's sequence, or with `set` (`setval`'s value and `is_called`),
    /// sets it: its new high-water mark is committed at once under the table's writer lock.
    async fn column_next(
        &self,
        entry: &TableEntry,
        table: &Arc<Table>,
        column: &str,
        set: Option<(i64, bool)>,
    ) -> Result<i64> {
        let guard = self.db.keys.lock(&entry.id, table).await?;
        let snapshot = guard.snapshot().clone();
        let identity = snapshot
            .schema()
            .field(column)
            .and_then(Identity::of)
            .ok_or_else(|| Error::UndefinedTable(crate::identity::sequence_name(&entry.name, column)))?;
        // The mark is the last value handed out: one step before a value not yet called.
        let value = match set {
            Some((value, is_called)) => {
                let mark = if is_called { value } else { value.saturating_sub(identity.step) };
                self.db.identity.set(&entry.id, column, mark);
                mark
            }
            None => self.db.identity.allocate(&entry.id, column, identity, 1)?.value(0),
        };
        let marked = Identity { high_water_mark: Some(value), ..identity };
        self.change_column(entry, table, &snapshot, column, "SET IDENTITY HIGH WATER MARK", |field| {
            marked.declare(field)
        })
        .await?;
        drop(guard);
        Ok(value)
    }

    /// `lastval()`: the value the session's last `nextval` gave, while its sequence exists.
    async fn last_value(&self) -> Result<i64> {
        let not_yet = || Error::data("55000", "lastval is not yet defined in this session");
        let (key, value) = {
            let values = self.sequences.lock().unwrap_or_else(|p| p.into_inner());
            let key = values.last.clone().ok_or_else(not_yet)?;
            let value = values.values.get(&key).copied().ok_or_else(not_yet)?;
            (key, value)
        };
        if let Some(id) = key.strip_prefix("sequence:") {
            if !self.catalog_state().sequences.values().any(|s| s.id == id) {
                return Err(not_yet());
            }
        }
        Ok(value)
    }

    /// Records the value a sequence gave the session (`currval`; with `last`, `lastval` too).
    pub(crate) fn remember_sequence_value(&self, key: String, value: i64, last: bool) {
        let mut values = self.sequences.lock().unwrap_or_else(|p| p.into_inner());
        if last {
            values.last = Some(key.clone());
        }
        values.values.insert(key, value);
    }

    /// A column DEFAULT that is `nextval('s')` (its casts aside): `rows` values of the sequence,
    /// one per row, as PostgreSQL calls it per row. None for any other default.
    pub(crate) async fn sequence_default(&self, default: &str, rows: usize) -> Result<Option<arrow::array::ArrayRef>> {
        if !default.to_ascii_lowercase().contains("nextval") {
            return Ok(None);
        }
        let dialect = crate::syntax::dialect::SluiceDialect::default();
        let parsed = datafusion::sql::sqlparser::parser::Parser::new(&dialect)
            .try_with_sql(default)
            .and_then(|mut parser| parser.parse_expr());
        let Ok(mut expr) = parsed else { return Ok(None) };
        while let Expr::Cast { expr: inner, .. } | Expr::Nested(inner) = expr {
            expr = *inner;
        }
        let Some((Call::Next, name)) = call_of(&expr) else { return Ok(None) };
        let sequence = self.sequence(&name).await?;
        let (key, values) = match &sequence {
            Sequence::Standalone(entry) => {
                (standalone_key(entry), self.db.sequences.next(&self.db.catalog, entry, rows).await?)
            }
            Sequence::Column(entry, table, column) => {
                let mut values = Vec::with_capacity(rows);
                for _ in 0..rows {
                    values.push(self.column_next(entry, table, column, None).await?);
                }
                (sequence_key(&entry.schema, &entry.name, column), values)
            }
        };
        if let Some(last) = values.last() {
            self.remember_sequence_value(key, *last, true);
        }
        Ok(Some(Arc::new(arrow::array::Int64Array::from(values))))
    }

    /// `pg_get_serial_sequence`: `schema.<table>_<column>_seq` when the column is a SERIAL or
    /// identity column, the standalone sequence `OWNED BY` it if there is one, else None.
    async fn serial_sequence(&self, table_name: &str, column: &str) -> Result<Option<String>> {
        let name = crate::names::parse_table_name(table_name)?;
        let (entry, _, snapshot) = self.resolve_table(&crate::names::object_name(&name.schema, &name.name)).await?;
        let column = column.trim_matches('"');
        let field = snapshot.schema().field(column).ok_or_else(|| {
            Error::data("42703", format!("column \"{column}\" of relation \"{}\" does not exist", entry.name))
        })?;
        if Identity::of(field).is_some() {
            return Ok(Some(sequence_key(&entry.schema, &entry.name, column)));
        }
        let state = self.catalog_state();
        let owned = state
            .sequences
            .values()
            .find(|s| s.owned_by.as_ref().is_some_and(|owner| owner.table_id == entry.id && owner.column == column));
        Ok(owned.map(|s| format!("{}.{}", s.schema, s.name)))
    }

    /// The sequence a name names: a standalone sequence, or a SERIAL or identity column's
    /// (`[schema.]<table>_<column>_seq`). 42P01 when there is none, 42809 when the name is
    /// another kind of relation's.
    async fn sequence(&self, text: &str) -> Result<Sequence> {
        let missing = || Error::data("42P01", format!("relation \"{text}\" does not exist"));
        let name = crate::names::parse_table_name(text).map_err(|_| missing())?;
        let state = self.catalog_state();
        if let Some(entry) = state.sequence(&name.schema, &name.name) {
            return Ok(Sequence::Standalone(entry.clone()));
        }
        if let Some((entry, table, column)) = self.column_sequence(&name).await? {
            return Ok(Sequence::Column(entry, table, column));
        }
        let key = crate::catalog::key(&name.schema, &name.name);
        if state.tables.contains_key(&key) || state.views.contains_key(&key) {
            return Err(Error::data("42809", format!("\"{}\" is not a sequence", name.name)));
        }
        Err(missing())
    }

    /// The table and identity column whose sequence is `<table>_<column>_seq`, if any.
    pub(crate) async fn column_sequence(&self, name: &TableName) -> Result<Option<(TableEntry, Arc<Table>, String)>> {
        let Some(stem) = name.name.strip_suffix("_seq") else { return Ok(None) };
        let state = self.catalog_state();
        let candidates: Vec<TableEntry> = state
            .tables
            .values()
            .filter(|t| t.schema == name.schema && stem.starts_with(&format!("{}_", t.name)))
            .cloned()
            .collect();
        for entry in candidates {
            let Some(column) = stem.get(entry.name.len() + 1..) else { continue };
            let table = self.db.open_table(&entry).await?;
            let snapshot = table.snapshot().await?;
            if snapshot.schema().field(column).and_then(Identity::of).is_some() {
                return Ok(Some((entry, table, column.to_string())));
            }
        }
        Ok(None)
    }
}

/// A call that is a whole select item keeps its name (`nextval`), as PostgreSQL names it; only
/// the first of a name does (DataFusion's columns need distinct names).
fn name_select_items(query: &mut Query) {
    use datafusion::sql::sqlparser::ast::{Ident, SelectItem, SetExpr};
    let SetExpr::Select(select) = query.body.as_mut() else { return };
    let mut named = std::collections::HashSet::new();
    for item in &mut select.projection {
        let SelectItem::UnnamedExpr(expr) = item else { continue };
        let Some((call, _)) = call_of(expr) else { continue };
        let name = call.function();
        if !named.insert(name) {
            continue;
        }
        *item = SelectItem::ExprWithAlias { expr: expr.clone(), alias: Ident::new(name) };
    }
}
