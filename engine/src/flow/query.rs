//! The SQL of flows: finding `STREAM(src)` (and `STREAM(table_changes('src'))`, the source's
//! change feed) in a query, binding a flow's source (and the other streams of its query) to the
//! relations one run reads, and deriving the queries of push routes (`PUSH INTO t WHERE p`, the
//! ELSE route).

use datafusion::sql::sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, Ident, ObjectName, ObjectNamePart, Query, Statement, TableFactor, VisitMut,
    VisitorMut,
};
use std::ops::ControlFlow;

use crate::error::{Error, Result};
use crate::names::TEMP_SCHEMA;
use crate::names::{quoted, table_name};

/// The relation a run's source rows are registered under (in the statement's temp schema).
pub const SOURCE_RELATION: &str = "__flow_source";

/// The table key (`schema.name`) an object name refers to.
pub fn key_of(name: &ObjectName) -> Result<String> {
    let name = table_name(name)?;
    Ok(crate::catalog::key(&name.schema, &name.name))
}

/// The name of the table function whose stream is a table's change feed.
pub const CHANGES_FUNCTION: &str = "table_changes";

/// The table a `STREAM(x)` or `STREAM(table_changes('x'))` table factor reads, if this factor is
/// one, and whether it reads the change feed.
fn stream_argument(factor: &TableFactor) -> Option<(ObjectName, bool)> {
    let TableFactor::Table { name, args: Some(args), .. } = factor else { return None };
    if name.0.len() != 1 || !name.to_string().eq_ignore_ascii_case("stream") || args.args.len() != 1 {
        return None;
    }
    let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(expr))) = args.args.first() else { return None };
    match expr {
        Expr::Identifier(ident) => Some((ObjectName(vec![ObjectNamePart::Identifier(ident.clone())]), false)),
        Expr::CompoundIdentifier(parts) => {
            Some((ObjectName(parts.iter().cloned().map(ObjectNamePart::Identifier).collect()), false))
        }
        Expr::Function(function) if function.name.to_string().eq_ignore_ascii_case(CHANGES_FUNCTION) => {
            let datafusion::sql::sqlparser::ast::FunctionArguments::List(list) = &function.args else { return None };
            let [FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(value)))] = list.args.as_slice() else {
                return None;
            };
            let datafusion::sql::sqlparser::ast::Value::SingleQuotedString(text) = &value.value else { return None };
            crate::names::parse_object_name(text).ok().map(|name| (name, true))
        }
        _ => None,
    }
}

struct StreamFinder {
    found: Vec<(ObjectName, bool)>,
}

impl VisitorMut for StreamFinder {
    type Break = ();
    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if let Some(found) = stream_argument(factor) {
            self.found.push(found);
        }
        ControlFlow::Continue(())
    }
}

/// The tables a query reads as change feeds (`STREAM(table_changes('t'))`), as keys.
pub fn change_streams(query: &Query) -> Result<Vec<String>> {
    let mut finder = StreamFinder { found: vec![] };
    let mut copy = query.clone();
    let _ = copy.visit(&mut finder);
    finder.found.into_iter().filter(|(_, changes)| *changes).map(|(name, _)| key_of(&name)).collect()
}

/// The tables a query reads with `STREAM(...)`, as keys, in order, without repeats.
pub fn stream_sources(query: &Query) -> Result<Vec<String>> {
    let mut finder = StreamFinder { found: vec![] };
    let mut copy = query.clone();
    let _ = copy.visit(&mut finder);
    let mut keys: Vec<String> = Vec::new();
    for (name, _) in finder.found {
        let key = key_of(&name)?;
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    Ok(keys)
}

struct Unstream;

impl VisitorMut for Unstream {
    type Break = ();
    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if let Some((source, changes)) = stream_argument(factor) {
            if let TableFactor::Table { name, args, .. } = factor {
                if changes {
                    // The whole change feed: `table_changes('x', 0)`.
                    let text =
                        format!("SELECT * FROM {CHANGES_FUNCTION}('{}', 0)", source.to_string().replace('\'', "''"));
                    if let Ok(crate::syntax::parser::SluiceStatement::Standard(statement)) =
                        crate::syntax::parser::parse_statement_text(&text)
                    {
                        if let Statement::Query(query) = *statement {
                            if let datafusion::sql::sqlparser::ast::SetExpr::Select(select) = *query.body {
                                if let Some(from) = select.from.into_iter().next() {
                                    *factor = from.relation;
                                    return ControlFlow::Continue(());
                                }
                            }
                        }
                    }
                }
                *name = source;
                *args = None;
            }
        }
        ControlFlow::Continue(())
    }
}

/// Replaces `STREAM(x)` with `x` and `STREAM(table_changes('x'))` with `table_changes('x', 0)` (to
/// plan a flow's query over its sources' current contents).
pub fn unstream(query: &mut Query) {
    let _ = query.visit(&mut Unstream);
}

/// Rewrites a flow's query for one run: the source (as `STREAM(source)`, or by name in a push
/// route's query) becomes the run's rows; any other `STREAM(x)` becomes an empty relation (its
/// rows arrive through x's own flow). Returns the keys of those other streams with the temp names
/// to register them under.
pub fn bind_source(statement: &mut Statement, source_key: &str) -> Result<Vec<(String, String)>> {
    let mut binder = SourceBinder { source_key, has_streams: false, others: vec![], error: None };
    let mut finder = StreamFinder { found: vec![] };
    let _ = statement.visit(&mut finder);
    binder.has_streams = !finder.found.is_empty();
    let _ = statement.visit(&mut binder);
    if let Some(e) = binder.error {
        return Err(e);
    }
    Ok(binder.others)
}

struct SourceBinder<'a> {
    source_key: &'a str,
    /// Whether the query names its sources with STREAM() (pull); else the source is read by name.
    has_streams: bool,
    others: Vec<(String, String)>,
    error: Option<Error>,
}

fn temp_name(relation: &str) -> ObjectName {
    ObjectName(vec![
        ObjectNamePart::Identifier(Ident::new(TEMP_SCHEMA)),
        ObjectNamePart::Identifier(Ident::new(relation)),
    ])
}

impl VisitorMut for SourceBinder<'_> {
    type Break = ();
    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        let stream = stream_argument(factor).map(|(name, _)| name);
        let TableFactor::Table { name, args, .. } = factor else { return ControlFlow::Continue(()) };
        let named = match (&stream, self.has_streams) {
            (Some(stream), _) => stream.clone(),
            (None, false) => name.clone(),
            (None, true) => return ControlFlow::Continue(()),
        };
        let key = match key_of(&named) {
            Ok(key) => key,
            Err(e) => {
                self.error = Some(e);
                return ControlFlow::Break(());
            }
        };
        if key == self.source_key {
            *name = temp_name(SOURCE_RELATION);
            *args = None;
        } else if stream.is_some() {
            let relation = format!("__flow_empty_{}", self.others.len());
            *name = temp_name(&relation);
            *args = None;
            self.others.push((key, relation));
        }
        ControlFlow::Continue(())
    }
}

/// The query of `PUSH INTO t [WHERE predicate]`: every column of the source.
pub fn route_query(source: &str, predicate: Option<&Expr>) -> String {
    match predicate {
        Some(p) => format!("SELECT * FROM {} WHERE {p}", quoted_key(source)),
        None => format!("SELECT * FROM {}", quoted_key(source)),
    }
}

/// The query of an ELSE route: the rows no other route's predicate took (a route without a
/// predicate takes every row).
pub fn else_query(source: &str, predicates: &[Option<String>]) -> String {
    if predicates.iter().any(Option::is_none) {
        return format!("SELECT * FROM {} WHERE false", quoted_key(source));
    }
    if predicates.is_empty() {
        return format!("SELECT * FROM {}", quoted_key(source));
    }
    let taken: Vec<String> = predicates.iter().flatten().map(|p| format!("coalesce(({p}), false)")).collect();
    format!("SELECT * FROM {} WHERE NOT ({})", quoted_key(source), taken.join(" OR "))
}

/// A route query's own predicate: the WHERE of a plain `SELECT ... FROM source WHERE p`.
pub fn query_predicate(query: &Query) -> Option<String> {
    use datafusion::sql::sqlparser::ast::SetExpr;
    let SetExpr::Select(select) = query.body.as_ref() else { return None };
    if select.from.len() != 1
        || select.from.first().is_some_and(|from| !from.joins.is_empty())
        || !matches!(&select.group_by, datafusion::sql::sqlparser::ast::GroupByExpr::Expressions(e, _) if e.is_empty())
    {
        return None;
    }
    select.selection.as_ref().map(|p| p.to_string())
}

/// `"schema"."name"` from a key.
pub fn quoted_key(key: &str) -> String {
    match key.split_once('.') {
        Some((schema, name)) => format!("{}.{}", quoted(schema), quoted(name)),
        None => quoted(key),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::parser::{parse_statement_text, SluiceStatement};

    fn statement(sql: &str) -> Statement {
        match parse_statement_text(sql).unwrap() {
            SluiceStatement::Standard(s) => *s,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn binds_the_source_and_empties_other_streams() {
        let mut s = statement(
            "SELECT a FROM STREAM(silver_a) UNION ALL SELECT b FROM STREAM(public.silver_b) JOIN dim ON true",
        );
        let others = bind_source(&mut s, "public.silver_a").unwrap();
        assert_eq!(others, vec![("public.silver_b".to_string(), "__flow_empty_0".to_string())]);
        let text = s.to_string();
        assert!(text.contains("__temp.__flow_source"), "{text}");
        assert!(text.contains("JOIN dim"), "{text}");
        let mut push = statement("SELECT * FROM bronze b WHERE topic = 'x'");
        bind_source(&mut push, "public.bronze").unwrap();
        assert!(push.to_string().contains("__temp.__flow_source b"), "{push}");
    }

    #[test]
    fn else_takes_what_no_route_took() {
        let q = else_query("public.b", &[Some("t = 'a'".into()), Some("t = 'b'".into())]);
        assert_eq!(
            q,
            "SELECT * FROM \"public\".\"b\" WHERE NOT (coalesce((t = 'a'), false) OR coalesce((t = 'b'), false))"
        );
        assert!(else_query("public.b", &[None]).ends_with("WHERE false"));
    }
}
