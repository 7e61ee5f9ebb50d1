//! Correlated conditions of catalog subqueries that DataFusion cannot join on, made plain.
//!
//! DataFusion runs a correlated subquery as a join, on the equalities between its columns and the
//! outer row's; any other condition on the outer row stops it. psql's `\d` asks for a column's
//! collation with `(SELECT c.collname FROM pg_collation c, pg_type t WHERE c.oid =
//! a.attcollation AND t.oid = a.atttypid AND a.attcollation <> t.typcollation)`: once
//! `c.oid = a.attcollation` holds, `a.attcollation <> t.typcollation` is `c.oid <>
//! t.typcollation`, which reads no outer column. [`propagate`] makes that substitution in every
//! subquery: an outer column that an equality of the WHERE ties to an inner one is replaced by
//! the inner one in the WHERE's other conditions (a NULL outer value fails the equality either
//! way, so the rows the WHERE keeps are the same).

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    BinaryOperator, Expr, Ident, Query, SetExpr, Statement, TableFactor, VisitMut, VisitorMut,
};

/// Makes the substitution in every subquery of `statement` (see the module docs).
pub fn propagate(statement: &mut Statement) {
    let _ = statement.visit(&mut Propagate);
}

struct Propagate;

impl VisitorMut for Propagate {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let SetExpr::Select(select) = query.body.as_mut() else { return ControlFlow::Continue(()) };
        let mut inner: HashSet<String> = HashSet::new();
        for from in &select.from {
            for factor in std::iter::once(&from.relation).chain(from.joins.iter().map(|j| &j.relation)) {
                if let Some(name) = factor_name(factor) {
                    inner.insert(name);
                }
            }
        }
        let Some(selection) = select.selection.take() else { return ControlFlow::Continue(()) };
        let mut conditions = Vec::new();
        split_and(selection, &mut conditions);
        // outer column (qualifier, name) -> the inner column equal to it
        let mut tied: HashMap<(String, String), Expr> = HashMap::new();
        let mut equalities = Vec::new();
        for (i, condition) in conditions.iter().enumerate() {
            let Expr::BinaryOp { left, op: BinaryOperator::Eq, right } = condition else { continue };
            let (Some(l), Some(r)) = (column(left), column(right)) else { continue };
            let (outer, inner_side) = match (inner.contains(&l.0), inner.contains(&r.0)) {
                (true, false) => (r, left.as_ref()),
                (false, true) => (l, right.as_ref()),
                _ => continue,
            };
            tied.entry(outer).or_insert_with(|| inner_side.clone());
            equalities.push(i);
        }
        if !tied.is_empty() {
            for (i, condition) in conditions.iter_mut().enumerate() {
                if equalities.contains(&i) {
                    continue;
                }
                let _ = datafusion::sql::sqlparser::ast::visit_expressions_mut(condition, |e| {
                    if let Some(key) = column(e) {
                        if let Some(replacement) = tied.get(&key) {
                            *e = replacement.clone();
                        }
                    }
                    ControlFlow::<()>::Continue(())
                });
            }
        }
        select.selection = conditions.into_iter().reduce(|a, b| Expr::BinaryOp {
            left: Box::new(a),
            op: BinaryOperator::And,
            right: Box::new(b),
        });
        ControlFlow::Continue(())
    }
}

/// The name a FROM item's columns are qualified with: its alias, or its table's name.
fn factor_name(factor: &TableFactor) -> Option<String> {
    match factor {
        TableFactor::Table { alias: Some(alias), .. } | TableFactor::Derived { alias: Some(alias), .. } => {
            Some(lower(&alias.name))
        }
        TableFactor::Table { name, alias: None, .. } => name.0.last().map(|part| part.to_string().to_lowercase()),
        _ => None,
    }
}

fn lower(ident: &Ident) -> String {
    ident.value.to_lowercase()
}

/// A column named with its qualifier: `(qualifier, column)`, the qualifier being the last part
/// before the column (`pg_catalog.pg_type.oid` is `(pg_type, oid)`).
fn column(expr: &Expr) -> Option<(String, String)> {
    let Expr::CompoundIdentifier(parts) = expr else { return None };
    match parts.as_slice() {
        [.., qualifier, name] => Some((lower(qualifier), lower(name))),
        _ => None,
    }
}

/// The conditions of `a AND b AND ...`, parentheses around a conjunction taken off.
fn split_and(expr: Expr, out: &mut Vec<Expr>) {
    match expr {
        Expr::BinaryOp { left, op: BinaryOperator::And, right } => {
            split_and(*left, out);
            split_and(*right, out);
        }
        Expr::Nested(inner) if matches!(inner.as_ref(), Expr::BinaryOp { op: BinaryOperator::And, .. }) => {
            split_and(*inner, out)
        }
        other => out.push(other),
    }
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn propagated(sql: &str) -> String {
        let mut statement = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap().remove(0);
        super::propagate(&mut statement);
        statement.to_string()
    }

    #[test]
    fn an_outer_column_tied_by_an_equality_is_replaced_in_the_other_conditions() {
        assert_eq!(
            propagated(
                "SELECT (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type t \
                 WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND a.attcollation <> t.typcollation) \
                 FROM pg_catalog.pg_attribute a"
            ),
            "SELECT (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type t \
             WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND c.oid <> t.typcollation) \
             FROM pg_catalog.pg_attribute a"
        );
    }

    #[test]
    fn conditions_without_such_an_equality_stay() {
        let sql = "SELECT (SELECT count(*) FROM t WHERE t.x < a.y) FROM a";
        assert_eq!(propagated(sql), "SELECT (SELECT count(*) FROM t WHERE t.x < a.y) FROM a");
    }
}
