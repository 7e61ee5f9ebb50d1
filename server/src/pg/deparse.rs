//! Expressions printed the way PostgreSQL's deparser (`ruleutils.c`) prints them in
//! `pg_get_constraintdef`: every operator expression in parentheses of its own, and no others
//! (`CHECK ((((x > 0))))` is shown as `CHECK ((x > 0))`, `x > 0 AND y < 5` as
//! `CHECK (((x > 0) AND (y < 5)))`). Clients read a definition back and create it again
//! (SQLAlchemy's reflection, `pg_dump`), so the printed form must print the same once more.
//!
//! Only the parentheses follow PostgreSQL: literals keep their own form (PostgreSQL adds casts,
//! `'x'::text`), which is still an expression both parse the same.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{Expr, VisitMut, VisitorMut};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;

/// Removes every parenthesis, then puts one around each operator expression.
struct Parenthesize;

impl VisitorMut for Parenthesize {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        while let Expr::Nested(inner) = expr {
            *expr = std::mem::replace(inner.as_mut(), Expr::value(datafusion::sql::sqlparser::ast::Value::Null));
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let operator = matches!(
            expr,
            Expr::BinaryOp { .. }
                | Expr::UnaryOp { .. }
                | Expr::IsNull(_)
                | Expr::IsNotNull(_)
                | Expr::IsTrue(_)
                | Expr::IsNotTrue(_)
                | Expr::IsFalse(_)
                | Expr::IsNotFalse(_)
                | Expr::IsUnknown(_)
                | Expr::IsNotUnknown(_)
                | Expr::IsDistinctFrom(..)
                | Expr::IsNotDistinctFrom(..)
                | Expr::Between { .. }
                | Expr::InList { .. }
                | Expr::Like { .. }
                | Expr::ILike { .. }
                | Expr::SimilarTo { .. }
                | Expr::AnyOp { .. }
                | Expr::AllOp { .. }
        );
        if operator {
            let inner = std::mem::replace(expr, Expr::value(datafusion::sql::sqlparser::ast::Value::Null));
            *expr = Expr::Nested(Box::new(inner));
        }
        ControlFlow::Continue(())
    }
}

/// A CHECK constraint's (or generated column's) expression as `pg_get_constraintdef` shows it
/// inside `CHECK (...)` (and `pg_get_expr` shows a generation expression); the text as stored
/// when it does not parse.
pub fn check_expression(expression: &str) -> String {
    let parsed = Parser::new(&PostgreSqlDialect {}).try_with_sql(expression).and_then(|mut p| p.parse_expr());
    match parsed {
        Ok(mut expr) => {
            let _ = expr.visit(&mut Parenthesize);
            expr.to_string()
        }
        Err(_) => expression.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::check_expression;

    #[test]
    fn operator_expressions_get_one_pair_of_parentheses_each() {
        assert_eq!(check_expression("x > 0"), "(x > 0)");
        assert_eq!(check_expression("((((x > 0))))"), "(x > 0)");
        assert_eq!(check_expression("((x > 1) AND (x < 5))"), "((x > 1) AND (x < 5))");
        assert_eq!(check_expression("x > 1 AND x < 5"), "((x > 1) AND (x < 5))");
        assert_eq!(check_expression("a = '(' AND b = ')'"), "((a = '(') AND (b = ')'))");
        assert_eq!(check_expression("a = 'it''s'"), "(a = 'it''s')");
        assert_eq!(check_expression("length(name) > 2"), "(length(name) > 2)");
        assert_eq!(check_expression("not a is null"), "(NOT (a IS NULL))");
    }

    #[test]
    fn the_printed_form_prints_the_same_again() {
        for expression in [
            "(x IS NULL OR y IS NULL) AND (x IS NULL OR y IS NULL)",
            "a = '(' AND b = ')'",
            "((((x > 0))))",
            "x BETWEEN 1 AND 5 OR x IN (7, 8)",
            "-x < 3",
        ] {
            let once = check_expression(expression);
            assert_eq!(check_expression(&once), once, "{expression}");
        }
    }

    #[test]
    fn what_does_not_parse_is_kept() {
        assert_eq!(check_expression("x >"), "x >");
    }
}
