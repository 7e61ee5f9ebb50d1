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

/// A column default as `pg_get_expr(adbin, adrelid)` (and `information_schema.columns`) shows
/// it: operator expressions in parentheses; a string literal with the type PostgreSQL resolves it
/// to, the column's own at the top (`'x'::text`, `'v'::character varying`, a `uuid` or `jsonb`
/// in its normal form) and `text` as an operand or a function's argument (`upper('x'::text)`,
/// but not those of `concat`, `concat_ws` and `format`, which take any type); a negative number
/// at the top as a literal of its type (`'-1'::integer`). The text as stored when it does not
/// parse.
pub fn default_expression(expression: &str, column_type: &str) -> String {
    use datafusion::sql::sqlparser::ast::{UnaryOperator, Value};
    let parsed = Parser::new(&PostgreSqlDialect {}).try_with_sql(expression).and_then(|mut p| p.parse_expr());
    let Ok(mut expr) = parsed else { return expression.to_string() };
    let _ = expr.visit(&mut Parenthesize);
    let _ = expr.visit(&mut TextLiterals);
    without_parentheses(&mut expr);
    if let Some(text) = string_literal(&expr) {
        if column_type == "boolean" {
            let truth = match text.trim().to_ascii_lowercase().as_str() {
                "t" | "true" | "y" | "yes" | "on" | "1" => Some("true"),
                "f" | "false" | "n" | "no" | "off" | "0" => Some("false"),
                _ => None,
            };
            if let Some(truth) = truth {
                return truth.to_string();
            }
        }
        return match cast_name(column_type) {
            Some((name, normal)) => format!("{}::{name}", quoted(&normal.map(|f| f(&text)).unwrap_or(text))),
            None => expr.to_string(),
        };
    }
    if let Expr::UnaryOp { op: UnaryOperator::Minus, expr: operand } = &expr {
        if let Expr::Value(v) = operand.as_ref() {
            if let Value::Number(digits, _) = &v.value {
                let negative = format!("-{digits}");
                let type_name = if negative.parse::<i32>().is_ok() {
                    "integer"
                } else if negative.parse::<i64>().is_ok() {
                    "bigint"
                } else {
                    "numeric"
                };
                return format!("{}::{type_name}", quoted(&negative));
            }
        }
    }
    if precedence(&expr).is_some() {
        parenthesize(&mut expr);
    }
    expr.to_string()
}

/// `text` as a single-quoted SQL literal.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The text of a string literal (single- or dollar-quoted).
fn string_literal(expr: &Expr) -> Option<String> {
    use datafusion::sql::sqlparser::ast::Value;
    match expr {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) => Some(s.clone()),
            Value::DollarQuotedString(d) => Some(d.value.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// The name PostgreSQL prints after `::` for a string literal in a column of `column_type` (as
/// `format_type` names it, without a length), and how the value is normalized; None for types
/// whose constants PostgreSQL prints in a form of their own (numbers, times).
#[allow(clippy::type_complexity)]
fn cast_name(column_type: &str) -> Option<(String, Option<fn(&str) -> String>)> {
    let (base, array) = match column_type.strip_suffix("[]") {
        Some(element) => (element, "[]"),
        None => (column_type, ""),
    };
    let base = base.split('(').next().unwrap_or(base).trim();
    let name = match base {
        "text" => "text",
        "varchar" | "character varying" => "character varying",
        "char" | "character" | "bpchar" => "bpchar",
        "uuid" | "json" | "jsonb" | "date" | "bytea" => base,
        "integer" | "bigint" | "smallint" | "boolean" if !array.is_empty() => base,
        _ => return None,
    };
    let normal: Option<fn(&str) -> String> = match (name, array) {
        ("uuid", "") => Some(|t| sluice::documents::TextType::Uuid.input(t).unwrap_or_else(|_| t.to_string())),
        ("jsonb", "") => Some(|t| sluice::documents::TextType::Jsonb.input(t).unwrap_or_else(|_| t.to_string())),
        _ => None,
    };
    Some((format!("{name}{array}"), normal))
}

/// `text` as PostgreSQL prints it (sqlparser's own `Text` prints as `TEXT`).
fn text_type() -> datafusion::sql::sqlparser::ast::DataType {
    use datafusion::sql::sqlparser::ast::{DataType, Ident, ObjectName};
    DataType::Custom(ObjectName::from(vec![Ident::new("text")]), vec![])
}

/// Casts each string literal that is an operator's operand or a function's argument to `text`.
struct TextLiterals;

impl TextLiterals {
    fn cast(expr: &mut Expr) {
        use datafusion::sql::sqlparser::ast::CastKind;
        if string_literal(expr).is_some() {
            let literal = std::mem::replace(expr, Expr::value(datafusion::sql::sqlparser::ast::Value::Null));
            *expr = Expr::Cast {
                kind: CastKind::DoubleColon,
                expr: Box::new(literal),
                data_type: text_type(),
                array: false,
                format: None,
            };
        }
    }
}

impl VisitorMut for TextLiterals {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        use datafusion::sql::sqlparser::ast::{
            DataType, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, ObjectName,
        };
        match expr {
            // Type names in lower case, as PostgreSQL prints them (sqlparser prints `TEXT`).
            Expr::Cast { data_type, .. } => {
                let name = data_type.to_string().to_ascii_lowercase();
                *data_type = DataType::Custom(ObjectName::from(vec![Ident::new(name)]), vec![]);
            }
            Expr::BinaryOp { left, right, .. } => {
                for operand in [left, right] {
                    let mut inner = operand.as_mut();
                    while let Expr::Nested(nested) = inner {
                        inner = nested.as_mut();
                    }
                    Self::cast(inner);
                }
            }
            Expr::Function(function) => {
                let name = function.name.to_string().to_ascii_lowercase();
                if matches!(name.as_str(), "concat" | "concat_ws" | "format") {
                    return ControlFlow::Continue(());
                }
                if let FunctionArguments::List(list) = &mut function.args {
                    for arg in &mut list.args {
                        if let FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) = arg {
                            Self::cast(e);
                        }
                    }
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::check_expression;

    #[test]
    fn defaults_print_as_postgresql_prints_them() {
        use super::default_expression as shown;
        // PostgreSQL 15's information_schema.columns.column_default for the same defaults.
        assert_eq!(shown("'x'", "text"), "'x'::text");
        assert_eq!(shown("$$y$$", "text"), "'y'::text");
        assert_eq!(shown("'it''s'", "varchar(5)"), "'it''s'::character varying");
        assert_eq!(shown("'ab'", "character(2)"), "'ab'::bpchar");
        assert_eq!(shown("'{}'", "text[]"), "'{}'::text[]");
        assert_eq!(shown("'{a}'", "varchar(3)[]"), "'{a}'::character varying[]");
        assert_eq!(shown("'2024-01-01'", "date"), "'2024-01-01'::date");
        assert_eq!(
            shown("'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'", "uuid"),
            "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid"
        );
        assert_eq!(shown(r#"'{"b":1, "a":2}'"#, "jsonb"), r#"'{"a": 2, "b": 1}'::jsonb"#);
        assert_eq!(shown("1+2", "integer"), "(1 + 2)");
        assert_eq!(shown("'a' || 'b'", "text"), "('a'::text || 'b'::text)");
        assert_eq!(shown("upper('x')", "text"), "upper('x'::text)");
        assert_eq!(shown("concat('a', 1)", "text"), "concat('a', 1)");
        assert_eq!(shown("-1", "integer"), "'-1'::integer");
        assert_eq!(shown("-1.5", "numeric(5,2)"), "'-1.5'::numeric");
        assert_eq!(shown("5", "bigint"), "5");
        assert_eq!(shown("true", "boolean"), "true");
        assert_eq!(shown("'t'", "boolean"), "true");
        assert_eq!(shown("now()", "timestamp with time zone"), "now()");
        assert_eq!(shown("'x'::text", "text"), "'x'::text");
        assert_eq!(shown("nextval('s'::regclass)", "integer"), "nextval('s'::regclass)");
    }

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
