//! `WITH ... INSERT | UPDATE | DELETE`: a data-modifying statement after a WITH clause, which the
//! SQL parser returns as a query whose body is the statement. It becomes the plain statement with
//! its common table expressions put where they are read, at parse time, so that every later
//! step (rights, transactions, the DML itself) sees an INSERT, UPDATE or DELETE:
//!
//! - INSERT: the WITH goes to the INSERT's source query (`WITH c AS (...) INSERT INTO t SELECT
//!   ... FROM c` reads as `INSERT INTO t WITH c AS (...) SELECT ... FROM c`);
//! - UPDATE and DELETE: each relation that names a CTE (in FROM, USING or a subquery) becomes
//!   that CTE's query as a derived table under the CTE's name (a CTE that reads earlier ones has
//!   theirs put in it the same way).
//!
//! Refused (0A000): WITH RECURSIVE before DML, and data-modifying statements inside a WITH (the
//! parser does not take those).

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Cte, Ident, ObjectNamePart, Query, SetExpr, Statement, TableAlias, TableFactor, VisitMut, VisitorMut, With,
};
use datafusion::sql::sqlparser::parser::ParserError;

/// The plain DML statement a query with a DML body stands for; `None` for any other statement.
pub fn unwrap(statement: &Statement) -> Result<Option<Statement>, ParserError> {
    let Statement::Query(query) = statement else { return Ok(None) };
    let inner = match query.body.as_ref() {
        SetExpr::Insert(inner) | SetExpr::Update(inner) | SetExpr::Delete(inner) => inner,
        _ => return Ok(None),
    };
    let Some(with) = &query.with else { return Ok(Some(inner.clone())) };
    if with.recursive {
        return Err(ParserError::ParserError(
            "not supported: WITH RECURSIVE before INSERT, UPDATE or DELETE".to_string(),
        ));
    }
    let mut statement = inner.clone();
    match &mut statement {
        Statement::Insert(insert) => match insert.source.as_mut() {
            Some(source) => prepend(source, with),
            None => return Ok(Some(statement)),
        },
        // The statement's target is a table, never a CTE: it is set aside while the rest is
        // visited.
        Statement::Update(update) => {
            let ctes = resolved(&with.cte_tables);
            let mut inline = Inline { ctes: &ctes };
            let _ = update.assignments.visit(&mut inline);
            let _ = update.from.visit(&mut inline);
            let _ = update.selection.visit(&mut inline);
            let _ = update.returning.visit(&mut inline);
        }
        Statement::Delete(delete) => {
            let ctes = resolved(&with.cte_tables);
            let mut inline = Inline { ctes: &ctes };
            let _ = delete.using.visit(&mut inline);
            let _ = delete.selection.visit(&mut inline);
            let _ = delete.returning.visit(&mut inline);
        }
        _ => return Ok(None),
    }
    Ok(Some(statement))
}

/// Puts `with`'s CTEs before those the query has.
fn prepend(query: &mut Query, with: &With) {
    match &mut query.with {
        Some(own) => {
            let mut ctes = with.cte_tables.clone();
            ctes.append(&mut own.cte_tables);
            own.cte_tables = ctes;
        }
        None => query.with = Some(with.clone()),
    }
}

/// Replaces relations named as one of `ctes` by their queries (after visiting what is inside
/// them, so a CTE's query is not searched again: a CTE's own name inside it is the table).
struct Inline<'a> {
    ctes: &'a [Cte],
}

impl VisitorMut for Inline<'_> {
    type Break = ();

    fn post_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        let TableFactor::Table { name, alias, args: None, version: None, .. } = factor else {
            return ControlFlow::Continue(());
        };
        let [ObjectNamePart::Identifier(ident)] = name.0.as_slice() else { return ControlFlow::Continue(()) };
        let Some(cte) = self.ctes.iter().find(|cte| same_name(&cte.alias.name, ident)) else {
            return ControlFlow::Continue(());
        };
        let alias = alias.clone().unwrap_or_else(|| TableAlias {
            explicit: true,
            name: cte.alias.name.clone(),
            columns: cte.alias.columns.clone(),
            at: None,
        });
        *factor =
            TableFactor::Derived { lateral: false, subquery: cte.query.clone(), alias: Some(alias), sample: None };
        ControlFlow::Continue(())
    }
}

/// The CTEs with the earlier ones each reads put in its query.
fn resolved(ctes: &[Cte]) -> Vec<Cte> {
    let mut done: Vec<Cte> = Vec::with_capacity(ctes.len());
    for cte in ctes {
        let mut cte = cte.clone();
        let _ = cte.query.visit(&mut Inline { ctes: &done });
        done.push(cte);
    }
    done
}

/// Whether a relation's name names the CTE (unquoted names fold to lower case).
fn same_name(cte: &Ident, name: &Ident) -> bool {
    let fold = |i: &Ident| if i.quote_style.is_some() { i.value.clone() } else { i.value.to_lowercase() };
    fold(cte) == fold(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unwrapped(sql: &str) -> String {
        let dialect = datafusion::sql::sqlparser::dialect::PostgreSqlDialect {};
        let statement = datafusion::sql::sqlparser::parser::Parser::parse_sql(&dialect, sql).unwrap().remove(0);
        unwrap(&statement).unwrap().map(|s| s.to_string()).unwrap_or_default()
    }

    #[test]
    fn insert_takes_the_with_into_its_source() {
        assert_eq!(
            unwrapped("WITH c AS (SELECT 1 AS a) INSERT INTO t (a) SELECT a FROM c"),
            "INSERT INTO t (a) WITH c AS (SELECT 1 AS a) SELECT a FROM c"
        );
    }

    #[test]
    fn update_and_delete_read_each_cte_as_a_derived_table() {
        assert_eq!(
            unwrapped("WITH c AS (SELECT 1 AS a) DELETE FROM t WHERE t.a = (SELECT c.a FROM c WHERE c.a = t.a)"),
            "DELETE FROM t WHERE t.a = (SELECT c.a FROM (SELECT 1 AS a) AS c WHERE c.a = t.a)"
        );
        assert_eq!(
            unwrapped("WITH c AS (SELECT 1 AS a), d AS (SELECT a FROM c) UPDATE t SET b = 1 FROM d WHERE t.a = d.a"),
            "UPDATE t SET b = 1 FROM (SELECT a FROM (SELECT 1 AS a) AS c) AS d WHERE t.a = d.a"
        );
    }

    #[test]
    fn a_cte_named_as_the_table_it_reads_reads_the_table() {
        assert_eq!(
            unwrapped("WITH t AS (SELECT * FROM t WHERE a > 1) DELETE FROM u USING t WHERE u.a = t.a"),
            "DELETE FROM u USING (SELECT * FROM t WHERE a > 1) AS t WHERE u.a = t.a"
        );
        // The target is the table, whatever the CTEs are named.
        assert_eq!(
            unwrapped("WITH t AS (SELECT 1 AS a) UPDATE t SET a = 2 WHERE a IN (SELECT a FROM t)"),
            "UPDATE t SET a = 2 WHERE a IN (SELECT a FROM (SELECT 1 AS a) AS t)"
        );
    }

    #[test]
    fn other_statements_are_left_alone() {
        assert_eq!(unwrapped("WITH c AS (SELECT 1) SELECT * FROM c"), "");
    }
}
