//! Set-returning functions in FROM, as PostgreSQL has them: `FROM unnest(arr) AS u(x)`,
//! `FROM t, jsonb_array_elements(t.doc -> 'items') e`, `FROM t CROSS JOIN LATERAL
//! generate_series(1, t.n) g`, `FROM t LEFT JOIN LATERAL jsonb_each(t.doc) j ON true`.
//!
//! DataFusion plans a table function only over constants, and cannot run a lateral reference to
//! the tables before it. So the call becomes a derived table of its select-list form (which
//! [`super::postgres_forms`] turns into `unnest`), named as PostgreSQL names its columns. When
//! its arguments refer to the tables before it, the derived table expands each distinct argument
//! value once (`SELECT k, unnest(f(k)) FROM (SELECT DISTINCT arg AS k FROM <tables before>)`) and
//! is joined back on `k = arg`: the same rows as PostgreSQL's nested loop, planned as a hash join.
//! The key columns are hidden from `*`.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    self, Expr, FunctionArg, FunctionArgExpr, Ident, JoinConstraint, JoinOperator, Query, SelectItem, SetExpr,
    Statement, TableAlias, TableFactor, TableWithJoins, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;

use crate::error::{Error, Result};
use crate::functions::SERIES;

/// Rewrites the set-returning functions in the statement's FROM clauses (see the module's
/// documentation).
pub fn rewrite(statement: &mut Statement) -> Result<()> {
    let mut visitor = Lateral { error: None, count: 0 };
    let _ = statement.visit(&mut visitor);
    visitor.error.map_or(Ok(()), Err)
}

struct Lateral {
    error: Option<Error>,
    /// Derived tables made so far (their names are numbered).
    count: usize,
}

impl VisitorMut for Lateral {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        if let SetExpr::Select(select) = query.body.as_mut() {
            if let Err(e) = self.select(select) {
                self.error = Some(e);
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }
}

/// A set-returning call in FROM.
struct Call {
    name: String,
    args: Vec<Expr>,
    alias: Option<TableAlias>,
    /// `WITH ORDINALITY`: a last column `ordinality` (bigint) numbering each call's rows from 1.
    ordinality: bool,
}

/// The set-returning functions that can stand in FROM: those a select list unnests
/// ([`crate::functions::json::SET_RETURNING`]), `unnest` itself, and the `each` functions, whose
/// rows have two columns.
fn set_returning(name: &str) -> bool {
    matches!(name, "unnest" | "jsonb_each" | "json_each" | "jsonb_each_text" | "json_each_text")
        || crate::functions::json::SET_RETURNING.contains(&name)
}

fn call_in(factor: &TableFactor) -> Result<Option<Call>> {
    let plain = |args: &[FunctionArg]| -> Option<Vec<Expr>> {
        args.iter()
            .map(|a| match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e.clone()),
                _ => None,
            })
            .collect()
    };
    let (name, args, alias, ordinality) = match factor {
        TableFactor::Table { name, args: Some(args), alias, with_ordinality, .. } => {
            (name.to_string().to_lowercase(), plain(&args.args), alias, *with_ordinality)
        }
        TableFactor::Function { name, args, alias, with_ordinality, .. } => {
            (name.to_string().to_lowercase(), plain(args), alias, *with_ordinality)
        }
        TableFactor::UNNEST { alias, array_exprs, with_offset, with_ordinality, .. } => {
            if *with_offset {
                return Err(Error::NotSupported("UNNEST ... WITH OFFSET".into()));
            }
            ("unnest".to_string(), Some(array_exprs.clone()), alias, *with_ordinality)
        }
        _ => return Ok(None),
    };
    if !set_returning(&name) {
        return Ok(None);
    }
    let Some(args) = args else { return Ok(None) };
    Ok(Some(Call { name, args, alias: alias.clone(), ordinality }))
}

/// Whether an expression reads a column (of the tables before it, in FROM).
fn reads_columns(expr: &Expr) -> bool {
    use datafusion::sql::sqlparser::ast::Visit;
    struct Columns(bool);
    impl ast::Visitor for Columns {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
            if matches!(expr, Expr::Identifier(_) | Expr::CompoundIdentifier(_)) {
                self.0 = true;
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
    }
    let mut columns = Columns(false);
    let _ = expr.visit(&mut columns);
    columns.0
}

fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl Lateral {
    fn select(&mut self, select: &mut ast::Select) -> Result<()> {
        let mut hidden: Vec<(String, String)> = vec![];
        let mut done: Vec<TableWithJoins> = Vec::with_capacity(select.from.len());
        for mut item in std::mem::take(&mut select.from) {
            if let Some(call) = call_in(&item.relation)? {
                let before =
                    (!done.is_empty()).then(|| done.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "));
                let (factor, condition, keys) = self.derived(call, before)?;
                item.relation = factor;
                if let Some(condition) = condition {
                    select.selection = Some(match select.selection.take() {
                        Some(selection) => and(Expr::Nested(Box::new(selection)), condition),
                        None => condition,
                    });
                }
                hidden.extend(keys);
            }
            for mut join in std::mem::take(&mut item.joins) {
                if let Some(call) = call_in(&join.relation)? {
                    let before = TableWithJoins { relation: item.relation.clone(), joins: item.joins.clone() };
                    let (factor, condition, keys) = self.derived(call, Some(before.to_string()))?;
                    join.relation = factor;
                    if let Some(condition) = condition {
                        join.join_operator = joined_on(&join.join_operator, condition)?;
                    }
                    hidden.extend(keys);
                }
                item.joins.push(join);
            }
            done.push(item);
        }
        select.from = done;
        if !hidden.is_empty() {
            hide(&mut select.projection, &hidden);
        }
        Ok(())
    }

    /// The derived table for `call`, the condition that joins it to the tables before it (when
    /// its arguments read them), and its hidden key columns as `(table, column)`.
    #[allow(clippy::type_complexity)]
    fn derived(
        &mut self,
        call: Call,
        before: Option<String>,
    ) -> Result<(TableFactor, Option<Expr>, Vec<(String, String)>)> {
        self.count += 1;
        let n = self.count;
        let table = call.alias.as_ref().map(|a| a.name.value.clone()).unwrap_or_else(|| call.name.clone());
        let correlated = before.is_some() && call.args.iter().any(reads_columns);
        let keys: Vec<String> = (0..call.args.len()).map(|k| format!("__sluice_lateral_{n}_{k}")).collect();
        let args: Vec<String> = if correlated {
            keys.iter().map(|k| quoted(k)).collect()
        } else {
            call.args.iter().map(ToString::to_string).collect()
        };
        let columns = columns(&call, &args)?;
        let names: Vec<String> = match call.alias.as_ref().map(|a| &a.columns) {
            Some(given) if !given.is_empty() => {
                if given.len() > columns.len() {
                    return Err(Error::data(
                        "42P10",
                        format!(
                            "table \"{table}\" has {} columns available but {} columns specified",
                            columns.len(),
                            given.len()
                        ),
                    ));
                }
                let mut names: Vec<String> = given.iter().map(|c| c.name.value.clone()).collect();
                names.extend(columns.iter().skip(given.len()).map(|(_, name)| name.clone()));
                names
            }
            _ => columns.iter().map(|(_, name)| name.clone()).collect(),
        };
        let projection: Vec<String> =
            columns.iter().zip(&names).map(|((expr, _), name)| format!("{expr} AS {}", quoted(name))).collect();
        let (text, condition, hidden) = match (correlated, before) {
            (true, Some(before)) => {
                let distinct: Vec<String> =
                    call.args.iter().zip(&keys).map(|(arg, key)| format!("{arg} AS {}", quoted(key))).collect();
                let key_list: Vec<String> = keys.iter().map(|k| quoted(k)).collect();
                let text = format!(
                    "SELECT {}, {} FROM (SELECT DISTINCT {} FROM {before}) AS {}",
                    key_list.join(", "),
                    projection.join(", "),
                    distinct.join(", "),
                    quoted(&format!("__sluice_lateral_{n}"))
                );
                let condition = call
                    .args
                    .iter()
                    .zip(&keys)
                    .map(|(arg, key)| Expr::BinaryOp {
                        left: Box::new(Expr::CompoundIdentifier(vec![
                            Ident::with_quote('"', table.clone()),
                            Ident::with_quote('"', key.clone()),
                        ])),
                        op: ast::BinaryOperator::Eq,
                        right: Box::new(Expr::Nested(Box::new(arg.clone()))),
                    })
                    .reduce(and);
                (text, condition, keys.iter().map(|k| (table.clone(), k.clone())).collect())
            }
            // DataFusion's own generate_series streams its rows (a scalar call would hold the
            // whole list): it stays, with its column named as PostgreSQL names it.
            _ if call.name == "generate_series" => {
                let integers = call.args.iter().all(small_integer);
                let value = if integers { "CAST(value AS INT)" } else { "value" };
                let name = names.first().map(|n| quoted(n)).unwrap_or_default();
                // The n-th row of a series is start + (n - 1) * step.
                let ordinality = match names.get(1) {
                    Some(column) if call.ordinality => {
                        let start = args.first().cloned().unwrap_or_default();
                        let step = args.get(2).cloned().unwrap_or_else(|| "1".into());
                        format!(", CAST((value - ({start})) / ({step}) + 1 AS BIGINT) AS {}", quoted(column))
                    }
                    _ => String::new(),
                };
                (format!("SELECT {value} AS {name}{ordinality} FROM {SERIES}({})", args.join(", ")), None, vec![])
            }
            _ => (format!("SELECT {}", projection.join(", ")), None, vec![]),
        };
        let sql = format!("SELECT * FROM ({text}) AS {}", quoted(&table));
        let parsed = Parser::parse_sql(&PostgreSqlDialect {}, &sql)
            .map_err(|e| Error::Internal(format!("the derived table of {}(...) does not parse: {e}", call.name)))?;
        let factor = match parsed.into_iter().next() {
            Some(Statement::Query(query)) => match *query.body {
                SetExpr::Select(select) => select.from.into_iter().next().map(|t| t.relation),
                _ => None,
            },
            _ => None,
        };
        let factor = factor.ok_or_else(|| Error::Internal(format!("no derived table for {}(...)", call.name)))?;
        Ok((factor, condition, hidden))
    }
}

/// The select-list expressions of a call (its arguments as `args`) with the names PostgreSQL
/// gives its columns.
fn columns(call: &Call, args: &[String]) -> Result<Vec<(String, String)>> {
    let mut columns = value_columns(call, args)?;
    if call.ordinality {
        columns.push((ordinality(call, args)?, "ordinality".into()));
    }
    Ok(columns)
}

/// The `ordinality` column of a call WITH ORDINALITY: a list of 1 to the number of rows the call
/// makes, unnested beside its other columns (so row n gets n: unnests in one select list run in
/// step). A constant `generate_series` numbers its rows from their values instead (see
/// [`Lateral::derived`]).
fn ordinality(call: &Call, args: &[String]) -> Result<String> {
    let rows = match call.name.as_str() {
        "unnest" => match args {
            [one] => format!("cardinality({one})"),
            many => {
                let lengths: Vec<String> = many.iter().map(|a| format!("coalesce(cardinality({a}), 0)")).collect();
                format!("greatest({})", lengths.join(", "))
            }
        },
        "jsonb_array_elements" | "json_array_elements" | "jsonb_array_elements_text" | "json_array_elements_text" => {
            format!("jsonb_array_length({})", args.first().cloned().unwrap_or_default())
        }
        "jsonb_each" | "json_each" | "jsonb_each_text" | "json_each_text" => {
            format!("cardinality(jsonb_object_keys({}))", args.first().cloned().unwrap_or_default())
        }
        // Integer series only (a series of timestamps steps by an interval).
        "generate_series" if args.iter().all(|a| !a.contains('\'')) => {
            let (start, stop) = (args.first().cloned().unwrap_or_default(), args.get(1).cloned().unwrap_or_default());
            let step = args.get(2).cloned().unwrap_or_else(|| "1".into());
            format!("greatest((({stop}) - ({start})) / ({step}) + 1, 0)")
        }
        other => return Err(Error::NotSupported(format!("{other}(...) WITH ORDINALITY"))),
    };
    Ok(format!("unnest(range(1, {rows} + 1))"))
}

/// The columns of a call's values (without `ordinality`).
fn value_columns(call: &Call, args: &[String]) -> Result<Vec<(String, String)>> {
    let alias = call.alias.as_ref().map(|a| a.name.value.clone());
    let one = |default: &str| alias.clone().unwrap_or_else(|| default.to_string());
    let name = call.name.as_str();
    let first =
        || args.first().cloned().ok_or_else(|| Error::data("42883", format!("function {name}() does not exist")));
    Ok(match name {
        "unnest" if args.len() == 1 => vec![(format!("unnest({})", first()?), one("unnest"))],
        // Each column is `unnest`: the later ones by an alias that is shown as that name.
        "unnest" => args
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let name =
                    if i == 0 { "unnest".to_string() } else { super::postgres_forms::duplicate_alias(i, "unnest") };
                (format!("unnest({a})"), name)
            })
            .collect(),
        // Their output column is named `value` whatever the alias (its OUT parameter's name).
        "jsonb_array_elements" | "json_array_elements" | "jsonb_array_elements_text" | "json_array_elements_text" => {
            vec![(format!("{name}({})", first()?), "value".into())]
        }
        "jsonb_each" | "json_each" => vec![
            (format!("unnest(jsonb_object_keys({}))", first()?), "key".into()),
            (format!("__pg_jsonb(unnest(__pg_jsonb_each_values({})))", first()?), "value".into()),
        ],
        "jsonb_each_text" | "json_each_text" => vec![
            (format!("unnest(jsonb_object_keys({}))", first()?), "key".into()),
            (format!("unnest(__pg_jsonb_each_text_values({}))", first()?), "value".into()),
        ],
        _ => vec![(format!("{name}({})", args.join(", ")), one(name))],
    })
}

/// An integer literal that fits `integer` (`generate_series` of them is integer).
fn small_integer(expr: &Expr) -> bool {
    match expr {
        Expr::Value(v) => matches!(&v.value, ast::Value::Number(n, _) if n.parse::<i32>().is_ok()),
        Expr::UnaryOp { op: ast::UnaryOperator::Minus, expr } => small_integer(expr),
        _ => false,
    }
}

fn and(left: Expr, right: Expr) -> Expr {
    Expr::BinaryOp { left: Box::new(left), op: ast::BinaryOperator::And, right: Box::new(right) }
}

/// A join to a derived table, with `condition` added to what it joins on.
fn joined_on(operator: &JoinOperator, condition: Expr) -> Result<JoinOperator> {
    let on = |constraint: &JoinConstraint| -> Result<JoinConstraint> {
        Ok(JoinConstraint::On(match constraint {
            JoinConstraint::On(given) => and(Expr::Nested(Box::new(given.clone())), condition.clone()),
            JoinConstraint::None => condition.clone(),
            _ => return Err(Error::NotSupported("USING or NATURAL with a set-returning function".into())),
        }))
    };
    Ok(match operator {
        JoinOperator::CrossJoin(_) => JoinOperator::Inner(JoinConstraint::On(condition)),
        JoinOperator::Join(c) => JoinOperator::Join(on(c)?),
        JoinOperator::Inner(c) => JoinOperator::Inner(on(c)?),
        JoinOperator::Left(c) => JoinOperator::Left(on(c)?),
        JoinOperator::LeftOuter(c) => JoinOperator::LeftOuter(on(c)?),
        other => {
            return Err(Error::NotSupported(format!(
                "a set-returning function reading the tables before it in {}",
                other_name(other)
            )))
        }
    })
}

fn other_name(operator: &JoinOperator) -> &'static str {
    match operator {
        JoinOperator::Right(_) | JoinOperator::RightOuter(_) => "RIGHT JOIN",
        JoinOperator::FullOuter(_) => "FULL JOIN",
        _ => "this join",
    }
}

/// Hides the key columns from `*` and `table.*`.
fn hide(projection: &mut [SelectItem], hidden: &[(String, String)]) {
    for item in projection.iter_mut() {
        let (options, table) = match item {
            SelectItem::Wildcard(options) => (options, None),
            SelectItem::QualifiedWildcard(ast::SelectItemQualifiedWildcardKind::ObjectName(name), options) => {
                (options, name.0.last().map(|p| p.to_string().trim_matches('"').to_string()))
            }
            _ => continue,
        };
        let names: Vec<Ident> = hidden
            .iter()
            .filter(|(t, _)| table.as_ref().is_none_or(|name| name == t))
            .map(|(_, column)| Ident::with_quote('"', column.clone()))
            .collect();
        if names.is_empty() {
            continue;
        }
        let mut all = match options.opt_exclude.take() {
            Some(ast::ExcludeSelectItem::Single(one)) => vec![one],
            Some(ast::ExcludeSelectItem::Multiple(many)) => many,
            None => vec![],
        };
        all.extend(names.into_iter().map(Into::into));
        options.opt_exclude = Some(ast::ExcludeSelectItem::Multiple(all));
    }
}
