//! Views: `CREATE [OR REPLACE] VIEW`, `DROP VIEW`, `ALTER VIEW ... RENAME TO`, stored in the
//! catalog (so they survive restarts and every session sees them). A statement that names a view
//! reads it as its query: before planning, each reference becomes the view's query as a derived
//! table under the view's name (views over views expand in turn, to a depth of
//! [`VIEW_DEPTH_MAX`]). Dropping a relation a view reads is refused with 2BP01 unless CASCADE,
//! which drops the views too; writing into a view is refused (0A000).

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    CreateView, Expr, GroupByExpr, Ident, ObjectName, Query, Select, SelectItem, SetExpr, Statement, TableAlias,
    TableAliasColumnDef, TableFactor, VisitMut, VisitorMut,
};

use crate::catalog::{key, ViewEntry};
use crate::error::{Error, Result};
use crate::names::table_name;
use crate::sql::context::{QueryContext, StatementResult};

/// How deep views over views expand (deeper: a cycle, or a definition too deep to plan).
pub const VIEW_DEPTH_MAX: usize = 32;

fn parse_query(sql: &str) -> Result<Query> {
    match crate::syntax::parser::parse_statement_text(sql)? {
        crate::syntax::parser::SluiceStatement::Standard(statement) => match *statement {
            Statement::Query(query) => Ok(*query),
            _ => Err(Error::Internal(format!("a stored view is not a query: {sql}"))),
        },
        _ => Err(Error::Internal(format!("a stored view is not a query: {sql}"))),
    }
}

/// The relations a query names, qualified (`schema.name`).
fn inputs_of(query: &Query) -> Vec<String> {
    crate::names::relations_in(query).iter().map(|n| key(&n.schema, &n.name)).collect()
}

/// Replaces references to views by their queries.
struct Expand<'a> {
    views: &'a std::collections::BTreeMap<String, ViewEntry>,
    expanded: usize,
    error: Option<Error>,
}

impl VisitorMut for Expand<'_> {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        let TableFactor::Table { name, alias, args: None, version: None, .. } = factor else {
            return ControlFlow::Continue(());
        };
        let Ok(table) = table_name(name) else { return ControlFlow::Continue(()) };
        let Some(view) = self.views.get(&key(&table.schema, &table.name)) else { return ControlFlow::Continue(()) };
        let query = match parse_query(&view.query) {
            Ok(query) => query,
            Err(e) => {
                self.error = Some(e);
                return ControlFlow::Break(());
            }
        };
        let alias = alias.clone().unwrap_or_else(|| TableAlias {
            explicit: true,
            name: Ident::with_quote('"', &view.name),
            columns: vec![],
            at: None,
        });
        let alias = if alias.columns.is_empty() && !view.columns.is_empty() {
            TableAlias {
                columns: view
                    .columns
                    .iter()
                    .map(|c| TableAliasColumnDef { name: Ident::with_quote('"', c), data_type: None })
                    .collect(),
                ..alias
            }
        } else {
            alias
        };
        *factor = TableFactor::Derived { lateral: false, subquery: Box::new(query), alias: Some(alias), sample: None };
        self.expanded += 1;
        ControlFlow::Continue(())
    }
}

/// The materialized views a transaction block created and has not committed, as views: the block
/// reads each as its query (see `crate::ivm::ddl`).
pub(crate) fn pending_views(
    state: &crate::catalog::CatalogState,
    staging: &crate::staging::Staging,
) -> Vec<(String, crate::catalog::ViewEntry)> {
    // Every statement asks: most sessions are in no block that created anything.
    if staging.created_count() == 0 {
        return Vec::new();
    }
    state
        .tables
        .iter()
        .filter(|(_, entry)| entry.kind == crate::catalog::TableKind::MaterializedView)
        .filter(|(_, entry)| staging.created_position(&entry.id).is_some())
        .filter_map(|(key, entry)| {
            let definition = entry.view.as_ref()?;
            let view = crate::catalog::ViewEntry {
                schema: entry.schema.clone(),
                name: entry.name.clone(),
                query: definition.query.clone(),
                columns: vec![],
                inputs: definition.inputs.clone(),
                output: None,
                created_ms: entry.created_ms,
                comment: None,
            };
            Some((key.clone(), view))
        })
        .collect()
}

/// Expands the views a statement reads (see the module docs).
pub fn expand(views: &std::collections::BTreeMap<String, ViewEntry>, statement: &mut Statement) -> Result<()> {
    if views.is_empty() {
        return Ok(());
    }
    for _ in 0..VIEW_DEPTH_MAX {
        let mut expand = Expand { views, expanded: 0, error: None };
        let _ = statement.visit(&mut expand);
        if let Some(e) = expand.error {
            return Err(e);
        }
        if expand.expanded == 0 {
            return Ok(());
        }
    }
    Err(Error::data("54001", format!("views nest more than {VIEW_DEPTH_MAX} deep (or a view reads itself)")))
}

/// The `SELECT`s whose items are a query's output columns: its body's, through set operations
/// and parentheses (not those of subqueries and CTEs, whose columns the outer items pick by name).
fn output_selects(body: &mut SetExpr) -> Vec<&mut Select> {
    match body {
        SetExpr::Select(select) => vec![select.as_mut()],
        SetExpr::SetOperation { left, right, .. } => {
            let mut selects = output_selects(left);
            selects.extend(output_selects(right));
            selects
        }
        SetExpr::Query(query) => output_selects(&mut query.body),
        _ => vec![],
    }
}

/// A name as an identifier, quoted only when it must be (as PostgreSQL prints a view).
fn identifier(name: &str) -> Ident {
    let keyword = datafusion::sql::sqlparser::keywords::ALL_KEYWORDS.contains(&name.to_ascii_uppercase().as_str());
    if crate::names::quoted_if_needed(name) == name && !keyword {
        Ident::new(name)
    } else {
        Ident::with_quote('"', name)
    }
}

fn is_wildcard(item: &SelectItem) -> bool {
    matches!(item, SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..))
}

impl QueryContext {
    /// A view's `*` (and `t.*`) replaced by the columns it names now, as PostgreSQL stores a view:
    /// a column added to a table later does not appear in the view. Each wildcard is planned
    /// alone over its `SELECT`'s FROM (with the query's CTEs) and becomes its columns, qualified.
    async fn expand_wildcards(&self, query: &mut Query) -> Result<()> {
        let with = query.with.clone();
        for select in output_selects(&mut query.body) {
            if !select.projection.iter().any(is_wildcard) {
                continue;
            }
            let mut projection = Vec::with_capacity(select.projection.len());
            for item in std::mem::take(&mut select.projection) {
                if !is_wildcard(&item) {
                    projection.push(item);
                    continue;
                }
                let mut probe = select.clone();
                probe.projection = vec![item];
                probe.selection = None;
                probe.having = None;
                probe.qualify = None;
                probe.distinct = None;
                probe.group_by = GroupByExpr::Expressions(vec![], vec![]);
                probe.sort_by = vec![];
                let probe = Query {
                    with: with.clone(),
                    body: Box::new(SetExpr::Select(Box::new(probe))),
                    order_by: None,
                    limit_clause: None,
                    fetch: None,
                    locks: vec![],
                    for_clause: None,
                    settings: None,
                    format_clause: None,
                    pipe_operators: vec![],
                };
                let plan = self.plan_statement(Statement::Query(Box::new(probe))).await?;
                for (qualifier, field) in plan.schema().iter() {
                    let mut parts: Vec<Ident> = qualifier
                        .map(|q| q.schema().into_iter().chain([q.table()]).map(identifier).collect())
                        .unwrap_or_default();
                    parts.push(identifier(field.name()));
                    let expr = if parts.len() == 1 {
                        Expr::Identifier(parts.remove(0))
                    } else {
                        Expr::CompoundIdentifier(parts)
                    };
                    projection.push(SelectItem::UnnamedExpr(expr));
                }
            }
            select.projection = projection;
        }
        Ok(())
    }

    pub(crate) async fn create_view(&self, create: CreateView) -> Result<StatementResult> {
        if create.materialized {
            return Err(Error::Internal("CREATE MATERIALIZED VIEW reached the view statement".into()));
        }
        let name = table_name(&create.name)?;
        // A session's temporary views are in its temporary schema (crate::sql::temporary).
        let temporary = crate::catalog::is_temporary_schema(&name.schema);
        if create.temporary && !temporary {
            return Err(Error::Internal(format!("temporary view {name} outside a temporary schema")));
        }
        let columns: Vec<String> = create.columns.iter().map(|c| crate::names::normalize(&c.name)).collect();
        let mut create = create;
        self.expand_wildcards(&mut create.query).await?;
        // The query must plan (its relations exist, its columns resolve), and give as many
        // columns as the definition names.
        let plan = self.plan_statement(Statement::Query(create.query.clone())).await?;
        let width = plan.schema().fields().len();
        if !columns.is_empty() && columns.len() > width {
            return Err(Error::data("42601", "CREATE VIEW specifies more column names than columns"));
        }
        let view_key = key(&name.schema, &name.name);
        if create.or_replace {
            if let Some(old) = self.catalog_state().views.get(&view_key).cloned() {
                let old_plan = self.plan_statement(Statement::Query(Box::new(parse_query(&old.query)?))).await?;
                keeps_columns(&view_columns(old_plan.schema(), &old.columns), &view_columns(plan.schema(), &columns))?;
            }
        }
        let entry = ViewEntry {
            schema: name.schema.clone(),
            name: name.name.clone(),
            query: create.query.to_string(),
            output: output_schema(&view_columns(plan.schema(), &columns), plan.schema()),
            columns,
            inputs: inputs_of(&create.query),
            created_ms: sluice_storage::actions::now_ms(),
            comment: None,
        };
        if entry.inputs.contains(&view_key) {
            return Err(Error::data("42P17", format!("view \"{}\" cannot read itself", name.name)));
        }
        let (or_replace, if_not_exists) = (create.or_replace, create.if_not_exists);
        self.update_catalog(|state| {
            if temporary {
                let schema = entry.schema.clone();
                state
                    .schemas
                    .entry(schema.clone())
                    .or_insert(crate::catalog::SchemaEntry { name: schema, created_ms: entry.created_ms });
            }
            if !state.schemas.contains_key(&entry.schema) {
                return Err(Error::data("3F000", format!("schema \"{}\" does not exist", entry.schema)));
            }
            if state.tables.contains_key(&view_key) {
                return Err(Error::data("42P07", format!("relation \"{}\" already exists", entry.name)));
            }
            match state.views.get(&view_key) {
                Some(_) if if_not_exists => return Ok(()),
                Some(_) if !or_replace => {
                    return Err(Error::data("42P07", format!("relation \"{}\" already exists", entry.name)))
                }
                _ => {}
            }
            // A replaced view keeps its comment.
            let comment = state.views.get(&view_key).and_then(|old| old.comment.clone());
            state.views.insert(view_key.clone(), ViewEntry { comment, ..entry.clone() });
            Ok(())
        })
        .await?;
        Ok(StatementResult::command("CREATE VIEW"))
    }

    pub(crate) async fn drop_views(
        &self,
        names: &[ObjectName],
        if_exists: bool,
        cascade: bool,
    ) -> Result<StatementResult> {
        let keys: Vec<(String, String)> =
            names.iter().map(|n| table_name(n).map(|t| (key(&t.schema, &t.name), t.name))).collect::<Result<_>>()?;
        if if_exists {
            let state = self.catalog_state();
            for (view_key, name) in &keys {
                if !state.views.contains_key(view_key) && !state.tables.contains_key(view_key) {
                    self.notice(format!("view \"{name}\" does not exist, skipping"));
                }
            }
        }
        self.update_catalog(|state| {
            for (view_key, name) in &keys {
                if !state.views.contains_key(view_key) {
                    if if_exists {
                        continue;
                    }
                    if state.tables.contains_key(view_key) {
                        return Err(Error::data("42809", format!("\"{name}\" is not a view")));
                    }
                    return Err(Error::data("42P01", format!("view \"{name}\" does not exist")));
                }
                drop_dependents(state, view_key, cascade)?;
                state.views.remove(view_key);
            }
            Ok(())
        })
        .await?;
        Ok(StatementResult::command("DROP VIEW"))
    }

    /// `COMMENT ON VIEW name IS 'text' | NULL`: the comment is the view's, in the catalog.
    pub(crate) async fn comment_on_view(&self, name: &crate::names::TableName, comment: Option<String>) -> Result<()> {
        let view_key = key(&name.schema, &name.name);
        self.update_catalog(|state| {
            let Some(view) = state.views.get_mut(&view_key) else {
                return Err(Error::data("42P01", format!("relation \"{}\" does not exist", name.name)));
            };
            view.comment = comment.clone();
            Ok(())
        })
        .await?;
        Ok(())
    }

    /// ALTER VIEW ... RENAME TO.
    pub(crate) async fn rename_view(&self, from: &ObjectName, to: &ObjectName) -> Result<StatementResult> {
        let from = table_name(from)?;
        let to_name = crate::names::normalize(
            to.0.last()
                .and_then(|p| p.as_ident())
                .ok_or_else(|| Error::data("42601", "ALTER VIEW ... RENAME TO needs a name"))?,
        );
        let (from_key, to_key) = (key(&from.schema, &from.name), key(&from.schema, &to_name));
        self.update_catalog(|state| {
            if state.views.contains_key(&to_key) || state.tables.contains_key(&to_key) {
                return Err(Error::data("42P07", format!("relation \"{to_name}\" already exists")));
            }
            let Some(mut view) = state.views.remove(&from_key) else {
                return Err(Error::data("42P01", format!("view \"{}\" does not exist", from.name)));
            };
            view.name = to_name.clone();
            state.views.insert(to_key.clone(), view);
            Ok(())
        })
        .await?;
        Ok(StatementResult::command("ALTER VIEW"))
    }
}

/// A view's columns: the query's, under the names the definition gave.
fn view_columns(schema: &datafusion::common::DFSchema, names: &[String]) -> Vec<(String, arrow::datatypes::DataType)> {
    schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| (names.get(i).cloned().unwrap_or_else(|| f.name().clone()), f.data_type().clone()))
        .collect()
}

/// A view's columns as a Delta schema string (see [`ViewEntry::output`]).
fn output_schema(
    columns: &[(String, arrow::datatypes::DataType)],
    schema: &datafusion::common::DFSchema,
) -> Option<String> {
    let fields: Vec<arrow::datatypes::Field> = columns
        .iter()
        .zip(schema.fields())
        .map(|((name, data_type), field)| arrow::datatypes::Field::new(name, data_type.clone(), field.is_nullable()))
        .collect();
    let schema = arrow::datatypes::Schema::new(fields);
    sluice_storage::schema::StructType::from_arrow(&schema).ok().map(|s| s.to_schema_string())
}

/// CREATE OR REPLACE VIEW may add columns at the end, not drop, rename or retype one (42P16, as
/// PostgreSQL).
fn keeps_columns(
    old: &[(String, arrow::datatypes::DataType)],
    new: &[(String, arrow::datatypes::DataType)],
) -> Result<()> {
    if new.len() < old.len() {
        return Err(Error::data("42P16", "cannot drop columns from view"));
    }
    for ((old_name, old_type), (new_name, new_type)) in old.iter().zip(new) {
        if old_name != new_name {
            return Err(Error::data(
                "42P16",
                format!("cannot change name of view column \"{old_name}\" to \"{new_name}\""),
            ));
        }
        if old_type != new_type {
            return Err(Error::data(
                "42P16",
                format!("cannot change data type of view column \"{old_name}\" from {old_type} to {new_type}"),
            ));
        }
    }
    Ok(())
}

/// Refuses to drop `relation` while views read it (2BP01), or with `cascade` drops them (and the
/// views over them).
pub fn drop_dependents(state: &mut crate::catalog::CatalogState, relation: &str, cascade: bool) -> Result<()> {
    let dependents: Vec<String> = state
        .views
        .iter()
        .filter(|(k, v)| *k != relation && v.inputs.iter().any(|i| i == relation))
        .map(|(k, _)| k.clone())
        .collect();
    if dependents.is_empty() {
        return Ok(());
    }
    if !cascade {
        return Err(Error::data(
            "2BP01",
            format!(
                "cannot drop {relation} because other objects depend on it: view {} (use CASCADE to drop them too)",
                dependents.join(", view ")
            ),
        ));
    }
    for dependent in dependents {
        state.views.remove(&dependent);
        drop_dependents(state, &dependent, true)?;
    }
    Ok(())
}
