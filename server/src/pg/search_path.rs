//! `search_path`: the schemas an unqualified name is looked up in, as PostgreSQL looks it up.
//!
//! Before a statement is planned, each unqualified relation it names (not a CTE's name) is
//! qualified with the first schema of the path that has a table or view of that name; a name found
//! in none is left as it is (a temporary table, a `pg_catalog` table, or a name the engine reports
//! as missing). What CREATE TABLE, CREATE VIEW and the like create goes into the first schema of
//! the path that exists (3F000 when none does, as in PostgreSQL). `"$user"` stands for the
//! session user's schema, when there is one. With the default path (`"$user", public`, no schema
//! named after the user) statements are left untouched.

use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    visit_relations_mut, Ident, ObjectName, ObjectNamePart, ObjectType, Query, Statement, Visit, Visitor,
};
use sluice::catalog::CatalogState;

/// The existing schemas of a `search_path` value, in order.
pub fn schemas(setting: &str, user: &str, catalog: &CatalogState) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for part in setting.split(',') {
        let part = part.trim();
        let name = if let Some(quoted) = part.strip_prefix('"').and_then(|p| p.strip_suffix('"')) {
            quoted.replace("\"\"", "\"")
        } else {
            part.to_lowercase()
        };
        let name = if name == "$user" { user.to_string() } else { name };
        if catalog.schemas.contains_key(&name) && !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// Whether a path is the default one (only `public`), which needs no rewriting.
pub fn is_default(path: &[String]) -> bool {
    matches!(path, [only] if only == sluice::catalog::DEFAULT_SCHEMA)
}

fn unqualified(name: &ObjectName) -> Option<&Ident> {
    match name.0.as_slice() {
        [ObjectNamePart::Identifier(ident)] => Some(ident),
        _ => None,
    }
}

fn qualified(schema: &str, table: &Ident) -> ObjectName {
    ObjectName(vec![
        ObjectNamePart::Identifier(Ident::with_quote('"', schema)),
        ObjectNamePart::Identifier(table.clone()),
    ])
}

fn folded(ident: &Ident) -> String {
    if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_lowercase()
    }
}

/// The names a statement's CTEs give (left unqualified).
#[derive(Default)]
struct CteNames(HashSet<String>);

impl Visitor for CteNames {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                self.0.insert(folded(&cte.alias.name));
            }
        }
        ControlFlow::Continue(())
    }
}

/// Qualifies the name of what a statement creates with the first schema of `path`.
pub fn qualify_created(name: &mut ObjectName, path: &[String]) -> Result<(), String> {
    if is_default(path) {
        return Ok(());
    }
    if let Some(ident) = unqualified(name).cloned() {
        let Some(first) = path.first() else { return Err("no schema has been selected to create in".into()) };
        *name = qualified(first, &ident);
    }
    Ok(())
}

/// Qualifies a statement's unqualified names along `path` (see the module's documentation);
/// `Err` with 3F000's message when it creates something and no schema of the path exists.
pub fn qualify(statement: &mut Statement, path: &[String], catalog: &CatalogState) -> Result<(), String> {
    if is_default(path) {
        return Ok(());
    }
    let exists = |schema: &str, table: &str| {
        let key = sluice::catalog::key(schema, table);
        catalog.tables.contains_key(&key) || catalog.views.contains_key(&key)
    };
    let lookup = |ident: &Ident| {
        let table = folded(ident);
        path.iter().find(|schema| exists(schema, &table)).map(|schema| qualified(schema, ident))
    };
    // What a statement creates goes into the first schema of the path.
    let created = match statement {
        Statement::CreateTable(create) => Some(&mut create.name),
        Statement::CreateView(create) => Some(&mut create.name),
        _ => None,
    };
    if let Some(name) = created {
        qualify_created(name, path)?;
    }
    // Tables and views are looked up; the other objects DROP names (schemas, indexes) are not.
    if let Statement::Drop {
        names,
        object_type: ObjectType::Table | ObjectType::View | ObjectType::MaterializedView,
        ..
    } = statement
    {
        for name in names.iter_mut() {
            if let Some(found) = unqualified(name).and_then(lookup) {
                *name = found;
            }
        }
    }
    let mut ctes = CteNames::default();
    let _ = statement.visit(&mut ctes);
    let _ = visit_relations_mut(statement, |name| {
        if let Some(ident) = unqualified(name) {
            if !ctes.0.contains(&folded(ident)) {
                if let Some(found) = lookup(ident) {
                    *name = found;
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
    Ok(())
}

/// `current_schemas(true)` and `current_schemas(false)`: the schemas of the path, with
/// `pg_catalog` first when implicit ones are asked for and the path does not name it, as
/// PostgreSQL answers (pgcli's and pgjdbc's name lookups read it).
pub fn current_schemas(statement: &mut Statement, path: &[String]) {
    use datafusion::sql::sqlparser::ast::{Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Value};
    // A select item `current_schema()` or `current_schemas(b)` is headed by the function's
    // name, as PostgreSQL heads it.
    if let Statement::Query(query) = statement {
        if let datafusion::sql::sqlparser::ast::SetExpr::Select(select) = query.body.as_mut() {
            for item in &mut select.projection {
                let datafusion::sql::sqlparser::ast::SelectItem::UnnamedExpr(expr) = item else { continue };
                let named = match expr {
                    Expr::Identifier(i)
                        if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("current_schema") =>
                    {
                        Some("current_schema".to_string())
                    }
                    Expr::Function(f) => f
                        .name
                        .0
                        .last()
                        .map(|p| p.to_string().to_lowercase())
                        .filter(|n| n == "current_schema" || n == "current_schemas"),
                    _ => None,
                };
                if let Some(name) = named {
                    *item = datafusion::sql::sqlparser::ast::SelectItem::ExprWithAlias {
                        expr: expr.clone(),
                        alias: datafusion::sql::sqlparser::ast::Ident::new(name),
                    };
                }
            }
        }
    }
    let _ = datafusion::sql::sqlparser::ast::visit_expressions_mut(statement, |expr| {
        // `current_schema()` (or `current_schema`): the first schema of the path that exists,
        // NULL for none, as in PostgreSQL (SQLAlchemy reads the default schema so).
        let bare_current_schema = matches!(expr, Expr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("current_schema"));
        let call_current_schema = matches!(&*expr, Expr::Function(f)
        if f.name.0.last().is_some_and(|p| p.to_string().eq_ignore_ascii_case("current_schema"))
            && match &f.args {
                FunctionArguments::None => true,
                FunctionArguments::List(list) => list.args.is_empty(),
                FunctionArguments::Subquery(_) => false,
            });
        if bare_current_schema || call_current_schema {
            let sql = match path.first() {
                Some(schema) => format!("CAST('{}' AS TEXT)", schema.replace('\'', "''")),
                None => "CAST(NULL AS TEXT)".to_string(),
            };
            if let Ok(value) = super::compat::parse_expr(&sql) {
                *expr = value;
            }
            return ControlFlow::Continue(());
        }
        let Expr::Function(function) = expr else { return ControlFlow::<()>::Continue(()) };
        let name = function.name.0.last().map(|p| p.to_string().to_lowercase()).unwrap_or_default();
        if name != "current_schemas" {
            return ControlFlow::Continue(());
        }
        let FunctionArguments::List(list) = &function.args else { return ControlFlow::Continue(()) };
        let implicit = match list.args.as_slice() {
            [FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v)))] => match &v.value {
                Value::Boolean(b) => *b,
                _ => return ControlFlow::Continue(()),
            },
            _ => return ControlFlow::Continue(()),
        };
        let mut schemas: Vec<String> = Vec::with_capacity(path.len() + 1);
        if implicit && !path.iter().any(|s| s == "pg_catalog") {
            schemas.push("pg_catalog".into());
        }
        schemas.extend(path.iter().cloned());
        let items: Vec<String> = schemas.iter().map(|s| format!("'{}'", s.replace('\'', "''"))).collect();
        let sql = format!("CAST(ARRAY[{}] AS TEXT[])", items.join(", "));
        if let Ok(array) = super::compat::parse_expr(&sql) {
            *expr = array;
        }
        ControlFlow::Continue(())
    });
}
