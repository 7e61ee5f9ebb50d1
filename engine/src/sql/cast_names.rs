//! Calls that differ only in a cast of an argument (`max(x)` and `max(x::bigint)`), told apart.
//!
//! DataFusion names `CAST(x AS T)` as `x`, so two such aggregates in one query made two columns
//! of one name and the query failed. Every call of a set whose members differ only in their
//! arguments' casts has each cast argument wrapped in `__pg_cast_named(CAST(x AS T), 'T')`
//! ([`crate::functions::cast_names`]), whose name shows the type. Every occurrence of one call is
//! rewritten alike, so a GROUP BY, HAVING or ORDER BY still matches the select list's call.
//! Other queries are left as they are.

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    self, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Statement, Value, ValueWithSpan,
};

use crate::functions::cast_names::NAME;

/// Rewrites the statement's calls whose names would collide (see the module's documentation).
pub fn rewrite(statement: &mut Statement) {
    // Most statements call nothing with a cast argument: they are left without another look.
    let any_cast = ast::visit_expressions(statement, |expr| match expr {
        Expr::Function(function) if has_cast_argument(function) => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    });
    if any_cast.is_continue() {
        return;
    }
    // Each call's text, by its text without argument casts.
    let mut calls: HashMap<String, HashSet<String>> = HashMap::new();
    let _ = ast::visit_expressions(statement, |expr| {
        if let Expr::Function(function) = expr {
            let text = function.to_string();
            calls.entry(without_casts(function).unwrap_or_else(|| text.clone())).or_default().insert(text);
        }
        ControlFlow::<()>::Continue(())
    });
    let colliding: HashSet<String> =
        calls.into_iter().filter(|(_, texts)| texts.len() > 1).map(|(uncast, _)| uncast).collect();
    if colliding.is_empty() {
        return;
    }
    let _ = ast::visit_expressions_mut(statement, |expr| {
        if let Expr::Function(function) = expr {
            if without_casts(function).is_some_and(|uncast| colliding.contains(&uncast)) {
                name_casts(function);
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

/// The argument expressions of a call's list.
fn arguments(function: &ast::Function) -> impl Iterator<Item = &Expr> {
    let list = match &function.args {
        FunctionArguments::List(list) => Some(list),
        _ => None,
    };
    list.into_iter().flat_map(|list| list.args.iter()).filter_map(|arg| match arg {
        FunctionArg::Unnamed(FunctionArgExpr::Expr(e))
        | FunctionArg::Named { arg: FunctionArgExpr::Expr(e), .. }
        | FunctionArg::ExprNamed { arg: FunctionArgExpr::Expr(e), .. } => Some(e),
        _ => None,
    })
}

fn has_cast_argument(function: &ast::Function) -> bool {
    arguments(function).any(|e| matches!(e, Expr::Cast { .. }))
}

fn cast_arguments(function: &mut ast::Function) -> impl Iterator<Item = &mut Expr> {
    let list = match &mut function.args {
        FunctionArguments::List(list) => Some(list),
        _ => None,
    };
    list.into_iter().flat_map(|list| list.args.iter_mut()).filter_map(|arg| match arg {
        FunctionArg::Unnamed(FunctionArgExpr::Expr(e))
        | FunctionArg::Named { arg: FunctionArgExpr::Expr(e), .. }
        | FunctionArg::ExprNamed { arg: FunctionArgExpr::Expr(e), .. } => matches!(e, Expr::Cast { .. }).then_some(e),
        _ => None,
    })
}

/// The call's text with its arguments' casts taken off; `None` when it has no cast argument.
fn without_casts(function: &ast::Function) -> Option<String> {
    if !has_cast_argument(function) {
        return None;
    }
    let mut uncast = function.clone();
    for arg in cast_arguments(&mut uncast) {
        if let Expr::Cast { expr, .. } = arg {
            *arg = (**expr).clone();
        }
    }
    Some(uncast.to_string())
}

/// Wraps each cast argument in the naming function.
fn name_casts(function: &mut ast::Function) {
    for arg in cast_arguments(function) {
        let Expr::Cast { data_type, .. } = &*arg else { continue };
        let written = Expr::Value(ValueWithSpan::from(Value::SingleQuotedString(data_type.to_string())));
        let cast = std::mem::replace(arg, Expr::Value(Value::Null.into()));
        *arg = super::postgres_forms::call(NAME, vec![cast, written]);
    }
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn rewritten(sql: &str) -> String {
        let mut statements = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap();
        let statement = statements.first_mut().unwrap();
        super::rewrite(statement);
        statement.to_string()
    }

    #[test]
    fn only_calls_that_differ_by_casts_are_named() {
        assert_eq!(
            rewritten("SELECT max(x), max(x::bigint) FROM t HAVING max(x::bigint) > 1"),
            "SELECT max(x), max(__pg_cast_named(x::BIGINT, 'BIGINT')) FROM t \
             HAVING max(__pg_cast_named(x::BIGINT, 'BIGINT')) > 1"
        );
        assert_eq!(rewritten("SELECT max(x::bigint), min(x) FROM t"), "SELECT max(x::BIGINT), min(x) FROM t");
        assert_eq!(
            rewritten("SELECT sum(x::int8), sum(x::numeric) FROM t"),
            "SELECT sum(__pg_cast_named(x::INT8, 'INT8')), sum(__pg_cast_named(x::NUMERIC, 'NUMERIC')) FROM t"
        );
    }
}
