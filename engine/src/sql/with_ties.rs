//! `FETCH FIRST n ROWS WITH TIES`: the first n rows (after OFFSET) and every further row that
//! ties with the last of them in the ORDER BY, which DataFusion does not plan. The query becomes
//!
//! ```sql
//! SELECT * EXCLUDE (rn, rk, cut) FROM (
//!   SELECT *, max(CASE WHEN rn = offset + n THEN rk END) OVER () AS cut FROM (
//!     SELECT <its select list>, row_number() OVER (ORDER BY ...) AS rn,
//!            rank() OVER (ORDER BY ...) AS rk FROM ...) a) b
//! WHERE rn > offset AND (cut IS NULL OR rk <= cut) ORDER BY rn
//! ```
//!
//! (with fewer than offset + n rows, `cut` is NULL and every row after the offset is kept).
//! Refused: WITH TIES without ORDER BY (2201W, as PostgreSQL), over UNION and the like, with
//! `PERCENT`, or with ORDER BY by position.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{self, Expr, Query, SetExpr, Statement, VisitMut, VisitorMut};

use crate::error::{Error, Result};

const ROW_NUMBER: &str = "__sluice_ties_rn";
const RANK: &str = "__sluice_ties_rk";
const CUT: &str = "__sluice_ties_cut";

/// Rewrites every `FETCH ... WITH TIES` of a statement.
pub fn rewrite(statement: &mut Statement) -> Result<()> {
    let mut ties = Ties { error: None };
    let _ = statement.visit(&mut ties);
    ties.error.map_or(Ok(()), Err)
}

struct Ties {
    error: Option<Error>,
}

impl VisitorMut for Ties {
    type Break = ();

    fn post_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        if !query.fetch.as_ref().is_some_and(|f| f.with_ties) {
            return ControlFlow::Continue(());
        }
        match with_ties(query) {
            Ok(rewritten) => {
                *query = rewritten;
                ControlFlow::Continue(())
            }
            Err(e) => {
                self.error = Some(e);
                ControlFlow::Break(())
            }
        }
    }
}

fn with_ties(query: &Query) -> Result<Query> {
    let fetch = query.fetch.as_ref().ok_or_else(|| Error::Internal("WITH TIES without FETCH".into()))?;
    if fetch.percent {
        return Err(Error::NotSupported("FETCH ... PERCENT".into()));
    }
    let order: Vec<String> = match &query.order_by {
        Some(ast::OrderBy { kind: ast::OrderByKind::Expressions(exprs), .. }) if !exprs.is_empty() => {
            exprs.iter().map(|e| e.to_string()).collect()
        }
        _ => return Err(Error::data("2201W", "WITH TIES cannot be specified without ORDER BY clause")),
    };
    if let Some(ast::OrderBy { kind: ast::OrderByKind::Expressions(exprs), .. }) = &query.order_by {
        if exprs.iter().any(|e| matches!(e.expr, Expr::Value(_))) {
            return Err(Error::NotSupported("FETCH ... WITH TIES with ORDER BY a column position".into()));
        }
    }
    let SetExpr::Select(select) = query.body.as_ref() else {
        return Err(Error::NotSupported("FETCH ... WITH TIES over UNION, INTERSECT or EXCEPT".into()));
    };
    let (offset, limit) = match &query.limit_clause {
        None => (None, None),
        Some(ast::LimitClause::LimitOffset { limit, offset, limit_by }) if limit_by.is_empty() => {
            (offset.as_ref().map(|o| o.value.to_string()), limit.clone())
        }
        Some(_) => return Err(Error::NotSupported("FETCH ... WITH TIES with this LIMIT".into())),
    };
    if limit.is_some() {
        return Err(Error::data("42601", "syntax error: LIMIT and FETCH both given"));
    }
    let count = fetch.quantity.as_ref().map_or_else(|| "1".to_string(), |q| q.to_string());
    let offset = offset.unwrap_or_else(|| "0".to_string());
    let window = order.join(", ");
    let mut inner = select.as_ref().clone();
    for (name, function) in [(ROW_NUMBER, "row_number"), (RANK, "rank")] {
        let text = format!("{function}() OVER (ORDER BY {window})");
        let expr = crate::syntax::parser::parse_expression_text(&text)?;
        inner.projection.push(ast::SelectItem::ExprWithAlias { expr, alias: ast::Ident::new(name) });
    }
    let sql = format!(
        "SELECT * FROM (SELECT *, max(CASE WHEN {ROW_NUMBER} = ({offset}) + \
         ({count}) THEN {RANK} END) OVER () AS {CUT} FROM ({inner}) AS __sluice_ties_a) AS __sluice_ties_b WHERE \
         {ROW_NUMBER} > ({offset}) AND ({CUT} IS NULL OR {RANK} <= {CUT}) ORDER BY {ROW_NUMBER}"
    );
    let statement = crate::syntax::parser::parse_statement_text(&sql)?;
    let crate::syntax::parser::SluiceStatement::Standard(statement) = statement else {
        return Err(Error::Internal("the WITH TIES query did not parse as a query".into()));
    };
    let Statement::Query(mut rewritten) = *statement else {
        return Err(Error::Internal("the WITH TIES query did not parse as a query".into()));
    };
    // `* EXCLUDE (...)`, which the dialect does not parse, but DataFusion plans.
    if let SetExpr::Select(outer) = rewritten.body.as_mut() {
        if let Some(ast::SelectItem::Wildcard(options)) = outer.projection.first_mut() {
            let names =
                [ROW_NUMBER, RANK, CUT].into_iter().map(|n| ast::ObjectName::from(vec![ast::Ident::new(n)])).collect();
            options.opt_exclude = Some(ast::ExcludeSelectItem::Multiple(names));
        }
    }
    rewritten.with = query.with.clone();
    Ok(*rewritten)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(sql: &str) -> Result<String> {
        let mut statement = match crate::syntax::parser::parse_statement_text(sql)? {
            crate::syntax::parser::SluiceStatement::Standard(s) => *s,
            _ => return Err(Error::Internal("not a query".into())),
        };
        rewrite(&mut statement)?;
        Ok(statement.to_string())
    }

    #[test]
    fn ties_become_ranks_cut_at_the_last_row() {
        let sql = rewritten("SELECT id FROM t ORDER BY x OFFSET 2 ROWS FETCH FIRST 3 ROWS WITH TIES").unwrap();
        assert!(sql.contains("rank() OVER (ORDER BY x)"), "{sql}");
        assert!(sql.contains("= (2) + (3)"), "{sql}");
        assert!(!sql.contains("FETCH"), "{sql}");
    }

    #[test]
    fn without_order_by_it_is_refused_as_postgresql_refuses_it() {
        let error = rewritten("SELECT id FROM t FETCH FIRST 3 ROWS WITH TIES").unwrap_err();
        assert_eq!(error.sqlstate(), "2201W");
    }
}
