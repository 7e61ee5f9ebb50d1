//! `nextval`, `currval` and `setval` on the sequence of a `SERIAL` or identity column, named as
//! PostgreSQL names it (`<table>_<column>_seq`, optionally schema-qualified), and
//! `pg_get_serial_sequence(table, column)`, which gives that name.
//!
//! A query's calls are resolved before it is planned: each call with a constant name becomes the
//! value it gives (so a call gives one value per statement, not one per row). `nextval` and
//! `setval` commit the column's new high-water mark at once, under the table's writer lock, so a
//! value handed out is never handed out again, after a restart too.

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Query, Value, VisitMut, VisitorMut,
};
use sluice_storage::table::Table;

use crate::catalog::TableEntry;
use crate::error::{Error, Result};
use crate::identity::Identity;
use crate::sql::context::QueryContext;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Call {
    Next,
    Current,
    Set(i64),
    /// `pg_get_serial_sequence(table, column)`: the name is the table's, this the column.
    SerialName(String),
}

/// A call found in a query: which, on which sequence name; the value replaces it.
struct Found {
    call: Call,
    name: String,
    value: Option<Value>,
}

fn call_of(expr: &Expr) -> Option<(Call, String)> {
    let Expr::Function(function) = expr else { return None };
    let name = function.name.0.last()?.to_string().to_ascii_lowercase();
    let FunctionArguments::List(list) = &function.args else { return None };
    let args: Vec<&Expr> = list
        .args
        .iter()
        .filter_map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e),
            _ => None,
        })
        .collect();
    let text = |e: &Expr| -> Option<String> {
        let e = match e {
            Expr::Cast { expr, .. } => expr.as_ref(),
            other => other,
        };
        match e {
            Expr::Value(v) => match &v.value {
                Value::SingleQuotedString(s) => Some(s.clone()),
                _ => None,
            },
            _ => None,
        }
    };
    let number = |e: &Expr| -> Option<i64> {
        match e {
            Expr::Value(v) => match &v.value {
                Value::Number(n, _) => n.parse().ok(),
                _ => None,
            },
            Expr::UnaryOp { op: datafusion::sql::sqlparser::ast::UnaryOperator::Minus, expr } => match expr.as_ref() {
                Expr::Value(v) => match &v.value {
                    Value::Number(n, _) => n.parse::<i64>().ok().map(|n| -n),
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        }
    };
    match (name.as_str(), args.as_slice()) {
        ("nextval", [seq]) => Some((Call::Next, text(seq)?)),
        ("currval", [seq]) => Some((Call::Current, text(seq)?)),
        ("setval", [seq, value]) => Some((Call::Set(number(value)?), text(seq)?)),
        ("pg_get_serial_sequence", [table, column]) => Some((Call::SerialName(text(column)?), text(table)?)),
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
                *expr = Expr::value(value);
            }
        }
        ControlFlow::Continue(())
    }
}

/// The session's key of a sequence (for `currval`): `schema.table_column_seq`.
pub(crate) fn sequence_key(schema: &str, table: &str, column: &str) -> String {
    format!("{schema}.{}", crate::identity::sequence_name(table, column))
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
                Some((Call::SerialName(_), _)) => {
                    (Value::SingleQuotedString(n.to_string()), datafusion::sql::sqlparser::ast::DataType::Text)
                }
                Some(_) => {
                    (Value::Number(n.to_string(), false), datafusion::sql::sqlparser::ast::DataType::BigInt(None))
                }
                None => return ControlFlow::Continue(()),
            };
            self.0 += 1;
            *expr = Expr::Cast {
                kind: datafusion::sql::sqlparser::ast::CastKind::DoubleColon,
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

impl QueryContext {
    /// Replaces the sequence calls of a query by their values (see the module's text).
    pub(crate) async fn resolve_sequences(&self, mut query: Query) -> Result<Query> {
        let mut collect = Collect { found: Vec::new() };
        let _ = query.visit(&mut collect);
        if collect.found.is_empty() {
            return Ok(query);
        }
        for found in &mut collect.found {
            found.value = Some(match &found.call {
                Call::SerialName(column) => match self.serial_sequence(&found.name, column).await? {
                    Some(name) => Value::SingleQuotedString(name),
                    None => Value::Null,
                },
                call => Value::Number(self.sequence_call(call.clone(), &found.name).await?.to_string(), false),
            });
        }
        // A call that is a whole select item keeps its name (`nextval`), as PostgreSQL names it;
        // only the first of a name does (DataFusion's columns need distinct names).
        if let datafusion::sql::sqlparser::ast::SetExpr::Select(select) = query.body.as_mut() {
            let mut named = std::collections::HashSet::new();
            for item in &mut select.projection {
                if let datafusion::sql::sqlparser::ast::SelectItem::UnnamedExpr(expr) = item {
                    if let Some((call, _)) = call_of(expr) {
                        let name = match call {
                            Call::Next => "nextval",
                            Call::Current => "currval",
                            Call::Set(_) => "setval",
                            Call::SerialName(_) => "pg_get_serial_sequence",
                        };
                        if !named.insert(name) {
                            continue;
                        }
                        *item = datafusion::sql::sqlparser::ast::SelectItem::ExprWithAlias {
                            expr: expr.clone(),
                            alias: datafusion::sql::sqlparser::ast::Ident::new(name),
                        };
                    }
                }
            }
        }
        let mut replace = Replace { found: collect.found.iter() };
        let _ = query.visit(&mut replace);
        Ok(query)
    }

    async fn sequence_call(&self, call: Call, name: &str) -> Result<i64> {
        let (entry, table, column) = self.sequence(name).await?;
        let key = sequence_key(&entry.schema, &entry.name, &column);
        if call == Call::Current {
            let current = self.sequences.lock().unwrap_or_else(|p| p.into_inner()).get(&key).copied();
            return current.ok_or_else(|| {
                Error::data("55000", format!("currval of sequence \"{name}\" is not yet defined in this session"))
            });
        }
        let guard = self.db.keys.lock(&entry.id, &table).await?;
        let snapshot = guard.snapshot().clone();
        let identity = snapshot
            .schema()
            .field(&column)
            .and_then(Identity::of)
            .ok_or_else(|| Error::UndefinedTable(name.to_string()))?;
        let value = match call {
            Call::Set(value) => {
                self.db.identity.set(&entry.id, &column, value);
                value
            }
            _ => self.db.identity.allocate(&entry.id, &column, identity, 1)?.value(0),
        };
        let marked = Identity { high_water_mark: Some(value), ..identity };
        self.change_column(&entry, &table, &snapshot, &column, "SET IDENTITY HIGH WATER MARK", |field| {
            marked.declare(field)
        })
        .await?;
        drop(guard);
        self.sequences.lock().unwrap_or_else(|p| p.into_inner()).insert(key, value);
        Ok(value)
    }

    /// `pg_get_serial_sequence`: `schema.<table>_<column>_seq` when the column is a SERIAL or
    /// identity column, None when it is another column.
    async fn serial_sequence(&self, table_name: &str, column: &str) -> Result<Option<String>> {
        let name = crate::names::parse_table_name(table_name)?;
        let (entry, _, snapshot) = self.resolve_table(&crate::names::object_name(&name.schema, &name.name)).await?;
        let column = column.trim_matches('"');
        let field = snapshot.schema().field(column).ok_or_else(|| {
            Error::data("42703", format!("column \"{column}\" of relation \"{}\" does not exist", entry.name))
        })?;
        Ok(Identity::of(field).map(|_| sequence_key(&entry.schema, &entry.name, column)))
    }

    /// The table and identity column of a sequence name (`[schema.]<table>_<column>_seq`).
    async fn sequence(&self, name: &str) -> Result<(TableEntry, Arc<Table>, String)> {
        let missing = || Error::data("42P01", format!("relation \"{name}\" does not exist"));
        let (schema, sequence) = match name.split_once('.') {
            Some((schema, sequence)) => (schema.to_string(), sequence.to_string()),
            None => (crate::catalog::DEFAULT_SCHEMA.to_string(), name.to_string()),
        };
        let stem = sequence.strip_suffix("_seq").ok_or_else(missing)?;
        let state = self.catalog_state();
        let candidates: Vec<TableEntry> = state
            .tables
            .values()
            .filter(|t| t.schema == schema && stem.starts_with(&format!("{}_", t.name)))
            .cloned()
            .collect();
        for entry in candidates {
            let column = &stem[entry.name.len() + 1..];
            let table = self.db.open_table(&entry).await?;
            let snapshot = table.snapshot().await?;
            if snapshot.schema().field(column).and_then(Identity::of).is_some() {
                return Ok((entry, table, column.to_string()));
            }
        }
        Err(missing())
    }
}
