//! Comments in the Postgres catalogs: the `pg_description` rows of Sluice's tables, columns and
//! constraints (after datafusion-pg-catalog's rows of the built-in objects), the functions
//! that read them, `obj_description(oid [, catalog])` and `col_description(table, column)`, and
//! PostgreSQL's OIDs of the system catalogs, which their `classoid` is (`'pg_class'::regclass`
//! is 1259, as in PostgreSQL; see compat.rs).
//!
//! The comments themselves are the engine's (see `sluice::sql::comments`: the Delta description,
//! field metadata and `sluice.comment.constraint.*` properties); `relations.rs` reads them with
//! each table's description and gives them the OIDs its `pg_class` and `pg_constraint` rows have,
//! so that `objoid` joins with those catalogs. The functions answer from the session's last
//! catalog scan, as `sluice_regclass_name` does: a query that names its object by `'t'::regclass`
//! or reads `pg_class`, `pg_attribute` or `pg_description` makes one.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int32Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Int64Type, SchemaRef};
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use super::relations::Objects;

/// `pg_class`'s OID: the `classoid` of a comment on a table or column.
pub const PG_CLASS_OID: i32 = 1259;
/// `pg_constraint`'s OID: the `classoid` of a comment on a constraint.
pub const PG_CONSTRAINT_OID: i32 = 2606;

/// What a `pg_description` row describes: the object's OID, its catalog's OID and, for a
/// column, its number (0 otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Described {
    pub objoid: i32,
    pub classoid: i32,
    pub objsubid: i32,
}

/// The comments of Sluice's objects, by what they describe.
pub type Comments = HashMap<Described, String>;

/// Our rows of `pg_description` (in its schema), in OID order.
pub fn rows(schema: &SchemaRef, comments: &Comments) -> DfResult<RecordBatch> {
    let mut rows: Vec<(&Described, &String)> = comments.iter().collect();
    rows.sort();
    let ints = |f: fn(&Described) -> i32| -> ArrayRef {
        Arc::new(rows.iter().map(|(d, _)| Some(f(d))).collect::<Int32Array>())
    };
    let texts: ArrayRef = Arc::new(StringArray::from_iter_values(rows.iter().map(|(_, text)| text.as_str())));
    let columns = schema
        .fields()
        .iter()
        .map(|field| {
            let array = match field.name().as_str() {
                "objoid" => ints(|d| d.objoid),
                "classoid" => ints(|d| d.classoid),
                "objsubid" => ints(|d| d.objsubid),
                "description" => texts.clone(),
                other => return Err(DataFusionError::Internal(format!("pg_description has a column {other}"))),
            };
            Ok(arrow::compute::cast(&array, field.data_type())?)
        })
        .collect::<DfResult<Vec<_>>>()?;
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

/// PostgreSQL 15's fixed OIDs of the system catalogs that clients name as a `classoid`
/// (`pg_description.classoid = 'pg_catalog.pg_class'::regclass`, `obj_description(oid,
/// 'pg_class')`, `pg_depend`, `pg_shdescription`).
const CATALOG_OIDS: &[(&str, i32)] = &[
    ("pg_am", 2601),
    ("pg_attrdef", 2604),
    ("pg_attribute", 1249),
    ("pg_authid", 1260),
    ("pg_cast", 2605),
    ("pg_class", PG_CLASS_OID),
    ("pg_collation", 3456),
    ("pg_constraint", PG_CONSTRAINT_OID),
    ("pg_conversion", 2607),
    ("pg_database", 1262),
    ("pg_depend", 2608),
    ("pg_description", 2609),
    ("pg_extension", 3079),
    ("pg_index", 2610),
    ("pg_language", 2612),
    ("pg_namespace", 2615),
    ("pg_opclass", 2616),
    ("pg_operator", 2617),
    ("pg_opfamily", 2753),
    ("pg_proc", 1255),
    ("pg_rewrite", 2618),
    ("pg_tablespace", 1213),
    ("pg_trigger", 2620),
    ("pg_ts_config", 3602),
    ("pg_ts_dict", 3600),
    ("pg_ts_parser", 3601),
    ("pg_ts_template", 3764),
    ("pg_type", 1247),
];

/// PostgreSQL's OID of a system catalog of [`CATALOG_OIDS`] named `name` (with or without
/// `pg_catalog.`, in any case).
pub fn catalog_oid(name: &str) -> Option<i32> {
    let name = name.trim().to_lowercase();
    let name = name.strip_prefix("pg_catalog.").unwrap_or(&name);
    CATALOG_OIDS.iter().find(|(catalog, _)| *catalog == name).map(|(_, oid)| *oid)
}

/// `sluice_catalog_oid(name)`: [`catalog_oid`] of a name given as a parameter (compat.rs makes
/// `COALESCE(sluice_catalog_oid($1), $1::regclass)` of `$1::regclass`); NULL for other names.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct CatalogOid {
    signature: Signature,
}

impl Default for CatalogOid {
    fn default() -> Self {
        Self { signature: Signature::any(1, Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for CatalogOid {
    fn name(&self) -> &str {
        "sluice_catalog_oid"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Int32)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let Some(first) = args.args.first() else {
            return Err(DataFusionError::Plan("sluice_catalog_oid needs a name".into()));
        };
        let names = arrow::compute::cast(&first.clone().into_array(rows)?, &DataType::Utf8)?;
        let oids: Int32Array = names.as_string::<i32>().iter().map(|name| name.and_then(catalog_oid)).collect();
        Ok(ColumnarValue::Array(Arc::new(oids)))
    }
}

/// Which describer a [`DescriptionFunction`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Describer {
    /// `obj_description(oid, catalog)`, or `obj_description(oid)` for any catalog.
    Object,
    /// `col_description(table, column)`.
    Column,
}

/// `obj_description` and `col_description` over the comments of the session's last catalog scan;
/// NULL where there is none, as in PostgreSQL.
#[derive(Debug)]
pub struct DescriptionFunction {
    describer: Describer,
    objects: Arc<Objects>,
    signature: Signature,
}

impl DescriptionFunction {
    /// `obj_description` and `col_description`.
    pub fn all(objects: &Arc<Objects>) -> [Self; 2] {
        [
            Self {
                describer: Describer::Object,
                objects: objects.clone(),
                signature: Signature::variadic_any(Volatility::Stable),
            },
            Self {
                describer: Describer::Column,
                objects: objects.clone(),
                signature: Signature::any(2, Volatility::Stable),
            },
        ]
    }
}

impl PartialEq for DescriptionFunction {
    fn eq(&self, other: &Self) -> bool {
        self.describer == other.describer && Arc::ptr_eq(&self.objects, &other.objects)
    }
}

impl Eq for DescriptionFunction {}

impl std::hash::Hash for DescriptionFunction {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.describer.hash(state);
    }
}

/// An argument's values as integers (NULL where it is NULL or no integer).
fn integers(value: &ArrayRef) -> DfResult<Vec<Option<i64>>> {
    let value = match value.data_type() {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            let text = arrow::compute::cast(value, &DataType::Utf8)?;
            return Ok(text.as_string::<i32>().iter().map(|t| t.and_then(|t| t.trim().parse().ok())).collect());
        }
        _ => arrow::compute::cast(value, &DataType::Int64)?,
    };
    Ok(value.as_primitive::<Int64Type>().iter().collect())
}

impl ScalarUDFImpl for DescriptionFunction {
    fn name(&self) -> &str {
        match self.describer {
            Describer::Object => "obj_description",
            Describer::Column => "col_description",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let arrays = args.args.iter().map(|a| a.clone().into_array(rows)).collect::<DfResult<Vec<_>>>()?;
        let Some(first) = arrays.first() else {
            return Err(DataFusionError::Plan(format!("{} needs an object's OID", self.name())));
        };
        let oids = integers(first)?;
        // The second argument: a column number, or a catalog's name.
        let second = arrays.get(1);
        let numbers = second.map(integers).transpose()?;
        let catalogs = match (self.describer, second) {
            (Describer::Object, Some(names)) => {
                let names = arrow::compute::cast(names, &DataType::Utf8)?;
                Some(names.as_string::<i32>().iter().map(|n| n.map(catalog_oid)).collect::<Vec<_>>())
            }
            _ => None,
        };
        let comments = self.objects.comments();
        let out: StringArray = (0..rows)
            .map(|row| {
                let objoid = i32::try_from(oids.get(row).copied().flatten()?).ok()?;
                let (classoid, objsubid) = match self.describer {
                    Describer::Column => {
                        let number = numbers.as_ref()?.get(row).copied().flatten()?;
                        (Some(PG_CLASS_OID), i32::try_from(number).ok()?)
                    }
                    Describer::Object => match &catalogs {
                        // A catalog Sluice keeps no comments in describes nothing.
                        Some(catalogs) => (Some(catalogs.get(row).copied().flatten()??), 0),
                        None => (None, 0),
                    },
                };
                comments
                    .iter()
                    .filter(|(d, _)| d.objoid == objoid && d.objsubid == objsubid)
                    .find(|(d, _)| classoid.is_none_or(|c| c == d.classoid))
                    .map(|(_, text)| text.clone())
            })
            .collect();
        if out.len() != rows {
            return Err(DataFusionError::Internal("a describer lost rows".into()));
        }
        Ok(ColumnarValue::Array(Arc::new(out) as ArrayRef))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn catalogs_are_named_with_or_without_their_schema() {
        assert_eq!(super::catalog_oid("pg_class"), Some(super::PG_CLASS_OID));
        assert_eq!(super::catalog_oid("PG_CATALOG.pg_constraint"), Some(super::PG_CONSTRAINT_OID));
        assert_eq!(super::catalog_oid("pg_namespace"), Some(2615));
        assert_eq!(super::catalog_oid("orders"), None);
    }
}
