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

/// Takes the parentheses off `expr` (`((e))` becomes `e`).
fn without_parentheses(expr: &mut Expr) {
    while let Expr::Nested(inner) = expr {
        *expr = std::mem::replace(inner.as_mut(), Expr::value(datafusion::sql::sqlparser::ast::Value::Null));
    }
}

/// Puts `expr` in parentheses.
fn parenthesize(expr: &mut Expr) {
    let inner = std::mem::replace(expr, Expr::value(datafusion::sql::sqlparser::ast::Value::Null));
    *expr = Expr::Nested(Box::new(inner));
}

/// `expression` parsed, rewritten by `visitor` and printed; as stored when it does not parse.
fn reprinted(expression: &str, visitor: &mut impl VisitorMut<Break = ()>) -> String {
    let parsed = Parser::new(&PostgreSqlDialect {}).try_with_sql(expression).and_then(|mut p| p.parse_expr());
    match parsed {
        Ok(mut expr) => {
            let _ = expr.visit(visitor);
            expr.to_string()
        }
        Err(_) => expression.to_string(),
    }
}

/// Removes every parenthesis, then puts one around each operator expression.
struct Parenthesize;

impl VisitorMut for Parenthesize {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        without_parentheses(expr);
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let operator = precedence(expr).is_some();
        if operator {
            parenthesize(expr);
        }
        ControlFlow::Continue(())
    }
}

/// How tightly an expression binds, as PostgreSQL's grammar has it (higher binds tighter); None
/// for one that never needs parentheses around it (a column, a literal, a call).
fn precedence(expr: &Expr) -> Option<u8> {
    use datafusion::sql::sqlparser::ast::{BinaryOperator as B, UnaryOperator as U};
    Some(match expr {
        Expr::BinaryOp { op: B::Or, .. } => 1,
        Expr::BinaryOp { op: B::And, .. } => 2,
        Expr::UnaryOp { op: U::Not, .. } => 3,
        Expr::IsNull(_)
        | Expr::IsNotNull(_)
        | Expr::IsTrue(_)
        | Expr::IsNotTrue(_)
        | Expr::IsFalse(_)
        | Expr::IsNotFalse(_)
        | Expr::IsUnknown(_)
        | Expr::IsNotUnknown(_)
        | Expr::IsDistinctFrom(..)
        | Expr::IsNotDistinctFrom(..) => 4,
        Expr::BinaryOp { op: B::Eq | B::NotEq | B::Lt | B::LtEq | B::Gt | B::GtEq, .. } => 5,
        Expr::Between { .. }
        | Expr::InList { .. }
        | Expr::Like { .. }
        | Expr::ILike { .. }
        | Expr::SimilarTo { .. }
        | Expr::AnyOp { .. }
        | Expr::AllOp { .. } => 6,
        Expr::BinaryOp { op: B::Plus | B::Minus, .. } => 8,
        Expr::BinaryOp { op: B::Multiply | B::Divide | B::Modulo, .. } => 9,
        Expr::BinaryOp { .. } => 7,
        Expr::UnaryOp { .. } => 10,
        _ => return None,
    })
}

/// Removes every parenthesis, then puts back those an operand needs: one that binds less
/// tightly than its operator (or as tightly, on the right of a binary operator).
struct Minimal;

impl Minimal {
    fn wrap(operand: &mut Expr, at_least: u8) {
        if precedence(operand).is_some_and(|p| p < at_least) {
            parenthesize(operand);
        }
    }
}

impl VisitorMut for Minimal {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        without_parentheses(expr);
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let Some(own) = precedence(expr) else { return ControlFlow::Continue(()) };
        match expr {
            Expr::BinaryOp { left, right, .. } => {
                Self::wrap(left, own);
                Self::wrap(right, own.saturating_add(1));
            }
            Expr::UnaryOp { expr: operand, .. }
            | Expr::IsNull(operand)
            | Expr::IsNotNull(operand)
            | Expr::IsTrue(operand)
            | Expr::IsNotTrue(operand)
            | Expr::IsFalse(operand)
            | Expr::IsNotFalse(operand)
            | Expr::IsUnknown(operand)
            | Expr::IsNotUnknown(operand) => Self::wrap(operand, own.saturating_add(1)),
            Expr::Between { expr: operand, low, high, .. } => {
                for e in [operand, low, high] {
                    Self::wrap(e, own.saturating_add(1));
                }
            }
            Expr::InList { expr: operand, .. }
            | Expr::Like { expr: operand, .. }
            | Expr::ILike { expr: operand, .. } => Self::wrap(operand, own.saturating_add(1)),
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// A CHECK constraint's expression as `pg_get_constraintdef(oid, true)` (psql's `\d`) shows it:
/// only the parentheses the operators' precedence needs (`((((x > 0))))` is `x > 0`); the
/// text as stored when it does not parse.
pub fn pretty_check_expression(expression: &str) -> String {
    reprinted(expression, &mut Minimal)
}

/// A CHECK constraint's (or generated column's) expression as `pg_get_constraintdef` shows it
/// inside `CHECK (...)` (and `pg_get_expr` shows a generation expression); the text as stored
/// when it does not parse.
pub fn check_expression(expression: &str) -> String {
    reprinted(expression, &mut Parenthesize)
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
    fn the_pretty_form_has_only_the_parentheses_precedence_needs() {
        use super::pretty_check_expression as pretty;
        assert_eq!(pretty("((((x > 0))))"), "x > 0");
        assert_eq!(pretty("((x > 1) AND (x < 5))"), "x > 1 AND x < 5");
        assert_eq!(
            pretty("(x IS NULL OR y IS NULL) AND (x IS NULL OR y IS NULL)"),
            "(x IS NULL OR y IS NULL) AND (x IS NULL OR y IS NULL)"
        );
        assert_eq!(pretty("a = '(' AND b = ')'"), "a = '(' AND b = ')'");
        assert_eq!(pretty("(a - b) - c"), "a - b - c");
        assert_eq!(pretty("a - (b - c)"), "a - (b - c)");
        assert_eq!(pretty("(a + b) * c > 0"), "(a + b) * c > 0");
        assert_eq!(pretty("NOT (a OR b)"), "NOT (a OR b)");
        for expression in ["((((x > 0))))", "(x IS NULL OR y IS NULL) AND (x > 1)", "a - (b - c) < 3"] {
            let once = pretty(expression);
            assert_eq!(pretty(&once), once, "{expression}");
        }
    }

    #[test]
    fn what_does_not_parse_is_kept() {
        assert_eq!(check_expression("x >"), "x >");
    }
}
