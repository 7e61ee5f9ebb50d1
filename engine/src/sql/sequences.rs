//! `nextval`, `currval`, `setval` and `lastval` on sequences, and `pg_get_serial_sequence`. A
//! sequence name (text, as PostgreSQL's `regclass` reads it: `s`, `"S"`, `schema.s`) names either
//! a standalone sequence (`CREATE SEQUENCE`, see [`crate::sequence`]) or the sequence of a
//! `SERIAL` or identity column, named as PostgreSQL names it (`<table>_<column>_seq`);
//! `pg_get_serial_sequence(table, column)` gives the latter's name, or the name of a standalone
//! sequence `OWNED BY` the column.
//!
//! A query's calls are resolved before it is planned: a call with a constant name that runs once
//! (in VALUES, in a SELECT without FROM) becomes the value it gives. A standalone sequence's
//! `nextval` that runs once per row (in a SELECT with FROM, an UPDATE's SET) becomes
//! `__sluice_nextval(id)`, which takes a value per row from the sequence while the query runs
//! ([`PerRowValues`]); a SERIAL or identity column's sequence gives one value per statement
//! there (where PostgreSQL gives one per row). `nextval` and `setval` commit the sequence's new
//! state before anyone sees the values (a column's high-water mark under the table's writer lock;
//! a standalone sequence's mark, see [`crate::sequence`]), so a value handed out is never handed
//! out again, after a restart too, whether or not the statement or its transaction commits.
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

/// A column default as the catalog keeps it (text), parsed.
pub(crate) fn parse_default(default: &str) -> Result<Expr> {
    let dialect = crate::syntax::dialect::SluiceDialect::default();
    Ok(datafusion::sql::sqlparser::parser::Parser::new(&dialect).try_with_sql(default)?.parse_expr()?)
}

/// `default` with the sequence calls that name `from` naming `to` instead (a renamed sequence),
/// or None when it names no such sequence.
pub(crate) fn renamed_in_default(default: &str, from: &TableName, to: &TableName) -> Option<String> {
    struct Rename<'a> {
        from: &'a TableName,
        to: String,
        renamed: bool,
    }
    impl VisitorMut for Rename<'_> {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
            let names_it = called_sequence(expr)
                .and_then(|text| crate::names::parse_table_name(&text).ok())
                .is_some_and(|name| name == *self.from);
            let Expr::Function(function) = expr else { return ControlFlow::Continue(()) };
            let FunctionArguments::List(list) = &mut function.args else { return ControlFlow::Continue(()) };
            if let (true, Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(argument)))) =
                (names_it, list.args.first_mut())
            {
                let text = match argument {
                    Expr::Cast { expr, .. } => expr.as_mut(),
                    other => other,
                };
                *text = Expr::value(Value::SingleQuotedString(self.to.clone()));
                self.renamed = true;
            }
            ControlFlow::Continue(())
        }
    }
    let mut expr = parse_default(default).ok()?;
    let to = if to.schema == crate::catalog::DEFAULT_SCHEMA {
        crate::names::quoted_if_needed(&to.name)
    } else {
        format!("{}.{}", crate::names::quoted_if_needed(&to.schema), crate::names::quoted_if_needed(&to.name))
    };
    let mut rename = Rename { from, to, renamed: false };
    let _ = expr.visit(&mut rename);
    rename.renamed.then(|| expr.to_string())
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

/// The name of the function a per-row `nextval` becomes (its argument is the sequence's id).
const PER_ROW_NEXTVAL: &str = "__sluice_nextval";

/// The sequences a query calls `nextval` on per row, each drawn from while the query runs (see
/// [`crate::sequence::Drawing`]): [`PerRowValues::begin`] once the query is planned (planning may
/// read a sequence, `SELECT * FROM s`), [`PerRowValues::finish`] once the query's rows are all
/// there, which makes the values taken handed out; dropped, it hands out none.
#[derive(Debug, Default)]
pub(crate) struct PerRowValues {
    drawings: Arc<std::sync::Mutex<HashMap<String, crate::sequence::Drawing>>>,
    /// The sequences to draw from, in the order their locks are taken (by id).
    sequences: Vec<SequenceEntry>,
}

/// A query that failed hands out none of the values it took: the sequences are let go (the
/// function registered for the query still holds the map, now empty).
impl Drop for PerRowValues {
    fn drop(&mut self) {
        self.drawings.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

impl PerRowValues {
    /// Starts drawing from the sequences (taking their locks, in one order).
    pub(crate) async fn begin(&self, context: &QueryContext) {
        for entry in &self.sequences {
            let drawing = context.db.sequences.draw(&context.db.catalog, entry).await;
            self.drawings.lock().unwrap_or_else(|p| p.into_inner()).insert(entry.id.clone(), drawing);
        }
    }

    /// Writes the marks that cover the values taken, and makes the last one each sequence gave
    /// the session's `currval` and `lastval`.
    pub(crate) async fn finish(self, context: &QueryContext) -> Result<()> {
        let drawings = std::mem::take(&mut *self.drawings.lock().unwrap_or_else(|p| p.into_inner()));
        for (id, drawing) in drawings {
            let last = drawing.last_taken();
            drawing.finish(&context.db.catalog).await?;
            if let Some(value) = last {
                context.remember_sequence_value(format!("sequence:{id}"), value, true);
            }
        }
        Ok(())
    }
}

/// `__sluice_nextval(id)`: a standalone sequence's next value, once per row, from the query's
/// [`PerRowValues`].
#[derive(Debug)]
struct PerRowNextval {
    drawings: Arc<std::sync::Mutex<HashMap<String, crate::sequence::Drawing>>>,
    signature: datafusion::logical_expr::Signature,
}

impl PartialEq for PerRowNextval {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.drawings, &other.drawings)
    }
}

impl Eq for PerRowNextval {}

impl std::hash::Hash for PerRowNextval {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        PER_ROW_NEXTVAL.hash(state);
    }
}

impl datafusion::logical_expr::ScalarUDFImpl for PerRowNextval {
    fn name(&self) -> &str {
        PER_ROW_NEXTVAL
    }

    fn signature(&self) -> &datafusion::logical_expr::Signature {
        &self.signature
    }

    fn return_type(
        &self,
        _arg_types: &[arrow::datatypes::DataType],
    ) -> datafusion::common::Result<arrow::datatypes::DataType> {
        Ok(arrow::datatypes::DataType::Int64)
    }

    fn invoke_with_args(
        &self,
        args: datafusion::logical_expr::ScalarFunctionArgs,
    ) -> datafusion::common::Result<datafusion::logical_expr::ColumnarValue> {
        use datafusion::logical_expr::ColumnarValue;
        let id = match args.args.first() {
            Some(ColumnarValue::Scalar(scalar)) => scalar.try_as_str().flatten().map(str::to_string),
            _ => None,
        };
        let mut drawings = self.drawings.lock().unwrap_or_else(|p| p.into_inner());
        let drawing = id.and_then(|id| drawings.get_mut(&id)).ok_or_else(|| {
            datafusion::error::DataFusionError::Internal(format!("{PER_ROW_NEXTVAL} of a sequence not drawn from"))
        })?;
        let values = (0..args.number_rows).map(|_| drawing.take()).collect::<Result<Vec<i64>>>()?;
        Ok(ColumnarValue::Array(Arc::new(arrow::array::Int64Array::from(values))))
    }
}

/// Calls `visit` on each SELECT of `query` that has a FROM clause (whose expressions run once
/// per row), in CTEs, set operations and derived tables too.
fn selects_with_rows(query: &mut Query, visit: &mut impl FnMut(&mut datafusion::sql::sqlparser::ast::Select)) {
    use datafusion::sql::sqlparser::ast::{SetExpr, TableFactor};
    fn body(set: &mut SetExpr, visit: &mut impl FnMut(&mut datafusion::sql::sqlparser::ast::Select)) {
        match set {
            SetExpr::Select(select) => {
                for table in &mut select.from {
                    let factors =
                        std::iter::once(&mut table.relation).chain(table.joins.iter_mut().map(|j| &mut j.relation));
                    for factor in factors {
                        if let TableFactor::Derived { subquery, .. } = factor {
                            selects_with_rows(subquery, visit);
                        }
                    }
                }
                if !select.from.is_empty() {
                    visit(select);
                }
            }
            SetExpr::Query(query) => selects_with_rows(query, visit),
            SetExpr::SetOperation { left, right, .. } => {
                body(left, visit);
                body(right, visit);
            }
            _ => {}
        }
    }
    if let Some(with) = query.with.as_mut() {
        for cte in &mut with.cte_tables {
            selects_with_rows(&mut cte.query, visit);
        }
    }
    body(&mut query.body, visit);
}

/// Calls `visit` on each `nextval('name')` that runs once per row (see [`selects_with_rows`]).
fn per_row_calls(query: &mut Query, visit: &mut impl FnMut(&mut Expr)) {
    struct Calls<'a, F: FnMut(&mut Expr)>(&'a mut F);
    impl<F: FnMut(&mut Expr)> VisitorMut for Calls<'_, F> {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
            if matches!(call_of(expr), Some((Call::Next, _))) {
                (self.0)(expr);
            }
            ControlFlow::Continue(())
        }
    }
    selects_with_rows(query, &mut |select| {
        let mut calls = Calls(&mut *visit);
        for item in &mut select.projection {
            let _ = item.visit(&mut calls);
        }
        if let Some(selection) = select.selection.as_mut() {
            let _ = selection.visit(&mut calls);
        }
        if let Some(having) = select.having.as_mut() {
            let _ = having.visit(&mut calls);
        }
    });
}

impl QueryContext {
    /// Replaces the sequence calls of a query by their values (see the module's text), and a
    /// standalone sequence's `nextval` that runs once per row by a function that gives a value
    /// per row, drawn from the sequence while the query runs (the caller begins the returned
    /// [`PerRowValues`] once the query is planned, and finishes it once it has the rows, before
    /// it shows or writes them).
    pub(crate) async fn resolve_sequences(&self, mut query: Query) -> Result<(Query, PerRowValues)> {
        // Per-row calls first, as names; each becomes __sluice_nextval(id).
        let mut names = Vec::new();
        per_row_calls(&mut query, &mut |expr| names.extend(called_sequence(expr)));
        let mut ids: HashMap<String, SequenceEntry> = HashMap::new();
        for name in names {
            if let Sequence::Standalone(entry) = self.sequence(&name).await? {
                ids.insert(name, entry);
            }
        }
        if !ids.is_empty() {
            per_row_calls(&mut query, &mut |expr| {
                let Some(entry) = called_sequence(expr).and_then(|name| ids.get(&name)) else { return };
                let id = Expr::value(Value::SingleQuotedString(entry.id.clone()));
                *expr = Expr::Function(datafusion::sql::sqlparser::ast::Function {
                    name: datafusion::sql::sqlparser::ast::ObjectName::from(vec![
                        datafusion::sql::sqlparser::ast::Ident::new(PER_ROW_NEXTVAL),
                    ]),
                    uses_odbc_syntax: false,
                    parameters: FunctionArguments::None,
                    args: FunctionArguments::List(datafusion::sql::sqlparser::ast::FunctionArgumentList {
                        duplicate_treatment: None,
                        args: vec![FunctionArg::Unnamed(FunctionArgExpr::Expr(id))],
                        clauses: vec![],
                    }),
                    filter: None,
                    null_treatment: None,
                    over: None,
                    within_group: vec![],
                });
            });
        }
        let query = self.resolve_constant_calls(query).await?;
        // The sequences drawn from per row, locked in one order (their ids').
        let mut entries: Vec<SequenceEntry> = ids.into_values().collect();
        entries.sort_by(|a, b| a.id.cmp(&b.id));
        entries.dedup_by(|a, b| a.id == b.id);
        if entries.is_empty() {
            return Ok((query, PerRowValues::default()));
        }
        let per_row = PerRowValues { drawings: Default::default(), sequences: entries };
        let function = PerRowNextval {
            drawings: per_row.drawings.clone(),
            signature: datafusion::logical_expr::Signature::any(1, datafusion::logical_expr::Volatility::Volatile),
        };
        self.ctx.register_udf(datafusion::logical_expr::ScalarUDF::from(function));
        Ok((query, per_row))
    }

    /// Replaces the sequence calls that run once per statement by their values.
    async fn resolve_constant_calls(&self, mut query: Query) -> Result<Query> {
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
        let Ok(mut expr) = parse_default(default) else { return Ok(None) };
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

    /// Refuses column defaults that call a sequence function on a sequence that does not exist
    /// (42P01), as PostgreSQL resolves their `regclass` when the default is made.
    pub(crate) async fn check_sequence_defaults<'a>(
        &self,
        defaults: impl IntoIterator<Item = &'a String>,
    ) -> Result<()> {
        for default in defaults {
            if !default.to_ascii_lowercase().contains("val(") {
                continue;
            }
            let Ok(expr) = parse_default(default) else { continue };
            let mut named = Vec::new();
            let _ = datafusion::sql::sqlparser::ast::visit_expressions(&expr, |expr| {
                named.extend(called_sequence(expr));
                ControlFlow::<()>::Continue(())
            });
            for name in named {
                self.sequence(&name).await?;
            }
        }
        Ok(())
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
        // As PostgreSQL prints it: schema-qualified, each part quoted where it must be.
        let qualified = |schema: &str, name: &str| {
            format!("{}.{}", crate::names::quoted_if_needed(schema), crate::names::quoted_if_needed(name))
        };
        if Identity::of(field).is_some() {
            return Ok(Some(qualified(&entry.schema, &crate::identity::sequence_name(&entry.name, column))));
        }
        let state = self.catalog_state();
        let owned = state
            .sequences
            .values()
            .find(|s| s.owned_by.as_ref().is_some_and(|owner| owner.table_id == entry.id && owner.column == column));
        Ok(owned.map(|s| qualified(&s.schema, &s.name)))
    }

    /// The sequence a name names: a standalone sequence, or a SERIAL or identity column's
    /// (`[schema.]<table>_<column>_seq`). 42P01 when there is none, 42809 when the name is
    /// another kind of relation's.
    async fn sequence(&self, text: &str) -> Result<Sequence> {
        let missing = || Error::data("42P01", format!("relation \"{text}\" does not exist"));
        let name = crate::names::parse_table_name(text).map_err(|_| missing())?;
        let state = self.catalog_state();
        if !state.schemas.contains_key(&name.schema) {
            return Err(Error::UndefinedSchema(name.schema));
        }
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

/// The sequences of `state` (a catalog as a session sees it) as the catalogs list them: the
/// standalone ones, then the SERIAL and identity columns' (a table that does not open is left
/// out, as [`crate::system::relations_in`] leaves it out).
pub async fn sequences_in(
    db: &crate::warehouse::Warehouse,
    state: &crate::catalog::CatalogState,
) -> Vec<crate::sequence::SequenceInfo> {
    use crate::catalog::SequenceType;
    let mut out = Vec::new();
    for entry in state.sequences.values() {
        let now = db.sequences.state(&db.catalog, entry).await;
        out.push(crate::sequence::SequenceInfo::standalone(entry, &now));
    }
    for entry in state.tables.values().filter(|t| t.kind != crate::catalog::TableKind::MaterializedView) {
        let Ok(table) = db.open_table(entry).await else { continue };
        let Ok(snapshot) = table.snapshot().await else { continue };
        for field in &snapshot.schema().fields {
            let Some(identity) = Identity::of(field) else { continue };
            // The column's declared type (a SERIAL's `integer` is stored as a long).
            let data_type = match crate::types::pg_type_name(field).as_str() {
                "smallint" => SequenceType::Smallint,
                "integer" => SequenceType::Integer,
                _ => SequenceType::Bigint,
            };
            let (min_value, max_value) = data_type.default_bounds(identity.step > 0);
            out.push(crate::sequence::SequenceInfo {
                schema: entry.schema.clone(),
                name: crate::identity::sequence_name(&entry.name, &field.name),
                data_type,
                start: identity.start,
                increment: identity.step,
                min_value: identity.min.unwrap_or(min_value.min(identity.start)),
                max_value: identity.max.unwrap_or(max_value.max(identity.start)),
                cache: identity.cache,
                cycle: identity.cycle,
                last_value: identity.high_water_mark,
                column: Some((entry.name.clone(), field.name.clone())),
            });
        }
    }
    out
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
