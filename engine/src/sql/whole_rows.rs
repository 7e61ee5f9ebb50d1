//! A relation's whole row as a function argument, as PostgreSQL has it for the JSON functions:
//! `row_to_json(t)`, `to_json(t)`, `to_jsonb(t)`, `json_agg(t)` and `jsonb_agg(t)`, where `t` is
//! a table or an alias in FROM; and `row(a, b)` as their argument (fields `f1`, `f2`).
//!
//! `t` becomes `t.*`, which [`crate::functions::rows::WholeRows`] expands into a row of `t`'s
//! columns once the plan knows them; `row(a, b)` becomes `__pg_row('f1', a, 'f2', b)`.
//!
//! Which names are relations is decided here, from the statement's FROM clauses, before any
//! schema is known: PostgreSQL prefers a column of that name, which this rewrite cannot see, so a
//! table with a column named as its own alias reads the row where PostgreSQL reads the column.

use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, FunctionArguments, ObjectName, Statement, TableFactor, Value, Visit, VisitMut,
    Visitor, VisitorMut,
};

use crate::functions::rows::ROW;

/// The functions that take a whole row.
const TAKE_ROWS: &[&str] = &["row_to_json", "to_json", "to_jsonb", "json_agg", "jsonb_agg"];

/// Rewrites whole-row arguments (see the module's documentation).
pub fn rewrite(statement: &mut Statement) {
    let mut relations = Relations::default();
    let _ = Visit::visit(&*statement, &mut relations);
    let _ = statement.visit(&mut Arguments { relations: relations.names });
}

/// The names by which the statement's FROM clauses refer to relations (lower-cased as unquoted
/// identifiers are).
#[derive(Default)]
struct Relations {
    names: HashSet<String>,
}

impl Visitor for Relations {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
        let alias = match factor {
            TableFactor::Table { alias, .. }
            | TableFactor::Derived { alias, .. }
            | TableFactor::TableFunction { alias, .. }
            | TableFactor::Function { alias, .. }
            | TableFactor::UNNEST { alias, .. } => alias.as_ref(),
            _ => None,
        };
        match (alias, factor) {
            (Some(alias), _) => {
                self.names.insert(alias.name.value.to_lowercase());
            }
            (None, TableFactor::Table { name, .. }) => {
                if let Some(last) = name.0.last() {
                    self.names.insert(last.to_string().trim_matches('"').to_lowercase());
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

struct Arguments {
    relations: HashSet<String>,
}

impl VisitorMut for Arguments {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let Expr::Function(function) = expr else { return ControlFlow::Continue(()) };
        let name = function.name.0.last().map(|p| p.to_string().to_lowercase()).unwrap_or_default();
        if !TAKE_ROWS.contains(&name.as_str()) {
            return ControlFlow::Continue(());
        }
        let FunctionArguments::List(list) = &mut function.args else { return ControlFlow::Continue(()) };
        // The first argument only: `row_to_json(t, pretty)` takes the row first.
        if let Some(FunctionArg::Unnamed(argument)) = list.args.first_mut() {
            match argument {
                FunctionArgExpr::Expr(Expr::Identifier(ident))
                    if self.relations.contains(&ident.value.to_lowercase()) =>
                {
                    *argument = FunctionArgExpr::QualifiedWildcard(ObjectName::from(vec![ident.clone()]));
                }
                FunctionArgExpr::Expr(Expr::Function(row)) if is_row(row) => {
                    if let Some(fields) = row_fields(row) {
                        *argument = FunctionArgExpr::Expr(super::postgres_forms::call(ROW, fields));
                    }
                }
                _ => {}
            }
        }
        ControlFlow::Continue(())
    }
}

fn is_row(function: &datafusion::sql::sqlparser::ast::Function) -> bool {
    function.name.0.len() == 1 && function.name.to_string().eq_ignore_ascii_case("row")
}

/// `row(a, b)`'s arguments as `'f1', a, 'f2', b`.
fn row_fields(function: &datafusion::sql::sqlparser::ast::Function) -> Option<Vec<Expr>> {
    let FunctionArguments::List(list) = &function.args else { return None };
    let mut fields = Vec::new();
    for (i, arg) in list.args.iter().enumerate() {
        let FunctionArg::Unnamed(FunctionArgExpr::Expr(value)) = arg else { return None };
        fields.push(Expr::Value(Value::SingleQuotedString(format!("f{}", i + 1)).into()));
        fields.push(value.clone());
    }
    Some(fields)
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn rewritten(sql: &str) -> String {
        let mut statements = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap_or_default();
        let Some(statement) = statements.first_mut() else { return String::new() };
        super::rewrite(statement);
        statement.to_string()
    }

    #[test]
    fn relation_arguments_become_whole_rows() {
        assert_eq!(rewritten("SELECT row_to_json(t) FROM r AS t"), "SELECT row_to_json(t.*) FROM r AS t");
        assert_eq!(rewritten("SELECT json_agg(r) FROM public.r"), "SELECT json_agg(r.*) FROM public.r");
        // A name that is no relation of the statement stays a column.
        assert_eq!(rewritten("SELECT to_json(name) FROM r AS t"), "SELECT to_json(name) FROM r AS t");
        assert_eq!(rewritten("SELECT row_to_json(row(1, 'x'))"), "SELECT row_to_json(__pg_row('f1', 1, 'f2', 'x'))");
    }
}
