//! Collations. Sluice compares text bytewise, which for UTF-8 is the order of PostgreSQL's "C"
//! and "POSIX" collations (and of "ucs_basic"), and of a database created with `LC_COLLATE=C`,
//! so "default" is that order too. Those are accepted, in `expr COLLATE "C"` and in a column's
//! definition (`name text COLLATE "C"`, kept in the column's field metadata under
//! [`COLLATION_KEY`] for `pg_attribute.attcollation` and `information_schema.columns`).
//!
//! Any other collation is refused: with 0A000 when PostgreSQL ships it (its ICU collations,
//! `und-x-icu`, and the libc locales it copies at initdb, `en_US`, `de_DE.utf8`), since
//! PostgreSQL would sort by it and Sluice cannot; with PostgreSQL's 42704 otherwise.
//!
//! `expr COLLATE "C"` is planned as `__pg_collate(expr)`, which returns its argument and refuses
//! (42804) an argument of a type that has no collation, as PostgreSQL does.

use std::ops::ControlFlow;
use std::sync::Arc;

use arrow::datatypes::{DataType, FieldRef};
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::sql::sqlparser::ast::{Expr, ObjectName, Statement, VisitMut, VisitorMut};

use crate::error::{Error, Result};

/// The key of a column's collation in its Delta field metadata (absent for "default").
pub const COLLATION_KEY: &str = "sluice.collation";

/// The function `expr COLLATE "C"` is planned as.
pub const COLLATE: &str = "__pg_collate";

/// The collations whose order is Sluice's bytewise order, with their `pg_collation` OIDs.
const BYTEWISE: &[(&str, i32)] = &[("default", 100), ("C", 950), ("POSIX", 951), ("ucs_basic", 12340)];

/// A collation's name as written (`"C"`, `pg_catalog."C"`), checked: Sluice's name for it.
pub fn checked(name: &ObjectName) -> Result<&'static str> {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| match p.as_ident() {
            Some(ident) if ident.quote_style.is_some() => ident.value.clone(),
            Some(ident) => ident.value.to_lowercase(),
            None => p.to_string(),
        })
        .collect();
    let (schema, collation) = match parts.as_slice() {
        [collation] => (None, collation.as_str()),
        [schema, collation] => (Some(schema.as_str()), collation.as_str()),
        _ => return Err(unknown(&parts)),
    };
    if let Some((known, _)) = BYTEWISE.iter().find(|(known, _)| *known == collation) {
        if schema.is_none_or(|s| s == "pg_catalog") {
            return Ok(known);
        }
    }
    if schema.is_none_or(|s| s == "pg_catalog") && shipped_by_postgres(collation) {
        return Err(Error::NotSupported(format!(
            "collation \"{collation}\" (Sluice compares text bytewise: only \"C\", \"POSIX\", \"ucs_basic\" and \
             \"default\")"
        )));
    }
    Err(unknown(&parts))
}

fn unknown(parts: &[String]) -> Error {
    Error::data("42704", format!("collation \"{}\" for encoding \"UTF8\" does not exist", parts.join(".")))
}

/// A column definition's `COLLATE name`, checked against the column's type: the collation to
/// record in its metadata (None for "default", which every text column has).
pub fn of_column(
    column: &str,
    data_type: &datafusion::sql::sqlparser::ast::DataType,
    collation: &ObjectName,
) -> Result<Option<(String, &'static str)>> {
    let collation = checked(collation)?;
    let declared = crate::types::declared_type(data_type)?;
    let text = matches!(
        declared.data_type,
        sluice_storage::schema::DataType::Primitive(sluice_storage::schema::PrimitiveType::String)
    ) && declared.declared.as_deref().and_then(crate::documents::TextType::from_name).is_none();
    if !text {
        let type_name =
            declared.declared.clone().unwrap_or_else(|| crate::types::delta_type_pg_name(&declared.data_type));
        return Err(Error::data("42804", format!("collations are not supported by type {type_name}")));
    }
    Ok((collation != "default").then(|| (column.to_string(), collation)))
}

/// The `pg_collation` OID of a collation Sluice accepts.
pub fn oid(collation: &str) -> Option<i32> {
    BYTEWISE.iter().find(|(known, _)| *known == collation).map(|(_, oid)| *oid)
}

/// Whether PostgreSQL creates a collation of this name: its ICU collations (`und-x-icu`,
/// `de-AT-x-icu`) and the libc locales (`en_US`, `en_US.utf8`, `C.utf8`).
fn shipped_by_postgres(collation: &str) -> bool {
    if collation.ends_with("-x-icu") {
        return true;
    }
    let (locale, encoding) = collation.split_once('.').unwrap_or((collation, ""));
    let encoding_ok = encoding.is_empty() || encoding.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    let (language, territory) = locale.split_once('_').unwrap_or((locale, ""));
    let language_ok = (2..=3).contains(&language.len()) && language.chars().all(|c| c.is_ascii_lowercase());
    let territory_ok = territory.is_empty() || territory.chars().all(|c| c.is_ascii_uppercase());
    (locale == "C" && !encoding.is_empty()) || (language_ok && territory_ok && encoding_ok)
}

/// Rewrites `expr COLLATE name` as `__pg_collate(expr)` after checking the collation.
pub fn rewrite(statement: &mut Statement) -> Result<()> {
    let mut visitor = Collations { error: None };
    let _ = statement.visit(&mut visitor);
    visitor.error.map_or(Ok(()), Err)
}

struct Collations {
    error: Option<Error>,
}

impl VisitorMut for Collations {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let Expr::Collate { expr: inner, collation } = expr else { return ControlFlow::Continue(()) };
        if let Err(e) = checked(collation) {
            self.error = Some(e);
            return ControlFlow::Break(());
        }
        let inner = std::mem::replace(inner.as_mut(), Expr::Value(datafusion::sql::sqlparser::ast::Value::Null.into()));
        *expr = super::postgres_forms::call(COLLATE, vec![inner]);
        ControlFlow::Continue(())
    }
}

/// `__pg_collate(x)`: `x`, if its type has a collation.
pub fn function() -> ScalarUDF {
    ScalarUDF::from(CollateFunction { signature: Signature::any(1, Volatility::Immutable) })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct CollateFunction {
    signature: Signature,
}

impl ScalarUDFImpl for CollateFunction {
    fn name(&self) -> &str {
        COLLATE
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(arg_types.first().cloned().unwrap_or(DataType::Utf8))
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let Some(field) = args.arg_fields.first() else {
            return Err(Error::Internal(format!("{COLLATE} takes one argument")).into());
        };
        let text =
            matches!(field.data_type(), DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null);
        let typed = crate::documents::TextType::of_field(field).is_some();
        if !text || typed {
            let type_name = match crate::documents::TextType::of_field(field) {
                Some(typed) => typed.name().to_string(),
                None => crate::types::arrow_type_pg_name(field.data_type()),
            };
            return Err(Error::data("42804", format!("collations are not supported by type {type_name}")).into());
        }
        Ok(Arc::new(field.as_ref().clone().with_name(COLLATE)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        match args.args.into_iter().next() {
            Some(value) => Ok(value),
            None => Err(Error::Internal(format!("{COLLATE} takes one argument")).into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::ast::Ident;

    fn name(parts: &[&str]) -> ObjectName {
        ObjectName::from(parts.iter().map(|p| Ident::with_quote('"', *p)).collect::<Vec<_>>())
    }

    fn code(result: Result<&'static str>) -> String {
        match result {
            Ok(name) => name.to_string(),
            Err(e) => e.sqlstate().to_string(),
        }
    }

    #[test]
    fn bytewise_collations_are_accepted_others_refused_by_whether_postgres_has_them() {
        assert_eq!(code(checked(&name(&["C"]))), "C");
        assert_eq!(code(checked(&name(&["pg_catalog", "POSIX"]))), "POSIX");
        assert_eq!(code(checked(&name(&["default"]))), "default");
        assert_eq!(code(checked(&name(&["und-x-icu"]))), "0A000");
        assert_eq!(code(checked(&name(&["en_US"]))), "0A000");
        assert_eq!(code(checked(&name(&["de_DE.utf8"]))), "0A000");
        assert_eq!(code(checked(&name(&["c"]))), "42704");
        assert_eq!(code(checked(&name(&["no such collation"]))), "42704");
        assert_eq!(code(checked(&name(&["public", "C"]))), "42704");
    }
}
