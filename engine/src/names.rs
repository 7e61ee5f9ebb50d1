//! Names: SQL object names to catalog keys, folding unquoted identifiers to lower case as
//! Postgres does.

use datafusion::sql::sqlparser::ast::{Ident, ObjectName, ObjectNamePart};

use crate::catalog::DEFAULT_SCHEMA;
use crate::error::{Error, Result};

/// The one catalog DataFusion sees (`sluice.<schema>.<table>`).
pub const CATALOG_NAME: &str = "sluice";
/// The schema of a statement's temporary relations (a DML target with hidden columns, a flow's
/// source rows).
pub const TEMP_SCHEMA: &str = "__temp";

/// A table's schema and name, normalized.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TableName {
    pub schema: String,
    pub name: String,
}

impl std::fmt::Display for TableName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.schema == DEFAULT_SCHEMA {
            write!(f, "{}", self.name)
        } else {
            write!(f, "{}.{}", self.schema, self.name)
        }
    }
}

/// An identifier as the catalog stores it: unquoted ones in lower case.
pub fn normalize(ident: &Ident) -> String {
    if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_lowercase()
    }
}

fn parts(name: &ObjectName) -> Result<Vec<String>> {
    name.0
        .iter()
        .map(|part| match part {
            ObjectNamePart::Identifier(ident) => Ok(normalize(ident)),
            other => Err(Error::NotSupported(format!("name part {other}"))),
        })
        .collect()
}

/// Resolves `name`, `schema.name` or `sluice.schema.name`.
pub fn table_name(name: &ObjectName) -> Result<TableName> {
    let parts = parts(name)?;
    match parts.as_slice() {
        [name] => Ok(TableName { schema: DEFAULT_SCHEMA.into(), name: name.clone() }),
        [schema, name] => Ok(TableName { schema: schema.clone(), name: name.clone() }),
        [catalog, schema, name] if catalog == CATALOG_NAME => {
            Ok(TableName { schema: schema.clone(), name: name.clone() })
        }
        _ => Err(Error::Plan(format!("invalid table name {name}"))),
    }
}

/// The relations a statement or query names (as [`table_name`] resolves them), each once, in
/// order; names that do not resolve (functions' `schema.catalog.x`) are left out.
pub fn relations_in<V: datafusion::sql::sqlparser::ast::Visit>(node: &V) -> Vec<TableName> {
    let mut names: Vec<TableName> = Vec::new();
    let _ = datafusion::sql::sqlparser::ast::visit_relations(node, |name: &ObjectName| {
        if let Ok(name) = table_name(name) {
            if !names.iter().any(|n| n.schema == name.schema && n.name == name.name) {
                names.push(name);
            }
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    names
}

/// Resolves a schema name (`schema` or `sluice.schema`).
pub fn schema_name(name: &ObjectName) -> Result<String> {
    let parts = parts(name)?;
    match parts.as_slice() {
        [schema] => Ok(schema.clone()),
        [catalog, schema] if catalog == CATALOG_NAME => Ok(schema.clone()),
        _ => Err(Error::Plan(format!("invalid schema name {name}"))),
    }
}

/// Parses a table name given as text (`t`, `s.t`, `"Mixed".t`).
pub fn parse_table_name(text: &str) -> Result<TableName> {
    table_name(&parse_object_name(text)?)
}

/// Parses an object name given as text, as SQL spells it.
pub fn parse_object_name(text: &str) -> Result<ObjectName> {
    let dialect = crate::syntax::dialect::SluiceDialect::default();
    let mut parser = datafusion::sql::sqlparser::parser::Parser::new(&dialect).try_with_sql(text)?;
    Ok(parser.parse_object_name(false)?)
}

/// An identifier as quoted SQL: `"name"` (inner quotes doubled).
pub fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// An identifier as PostgreSQL prints it in a definition: as it is when it is a plain lowercase
/// name, else quoted.
pub fn quoted_if_needed(name: &str) -> String {
    let plain = name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.chars().next().is_some_and(|c| !c.is_ascii_digit());
    if plain {
        name.to_string()
    } else {
        quoted(name)
    }
}

/// An object name for a table (used when building statements).
pub fn object_name(schema: &str, name: &str) -> ObjectName {
    ObjectName(vec![
        ObjectNamePart::Identifier(Ident::with_quote('"', CATALOG_NAME)),
        ObjectNamePart::Identifier(Ident::with_quote('"', schema)),
        ObjectNamePart::Identifier(Ident::with_quote('"', name)),
    ])
}
