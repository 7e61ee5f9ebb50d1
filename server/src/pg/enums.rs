//! Enum types (`CREATE TYPE mood AS ENUM (...)`, see `sluice::catalog::enums`) in what clients
//! read: their `pg_type` rows (`typtype` `e`, and the array type `_mood` PostgreSQL makes with
//! each), `pg_enum`, `format_type` of their OIDs, the `atttypid` of columns of an enum type, and
//! the type OID in RowDescription (the enum's own, which drivers such as psycopg read as text).
//! Drivers that look an unknown type OID up (tokio-postgres: `pg_type`, then `pg_enum` for an
//! enum's labels) bind the OID as an `oid` parameter, which [`oid_parameters`] lets them.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Float32Array, Int32Array, RecordBatch, StringArray};
use arrow::datatypes::{Field, SchemaRef};
use datafusion::common::Result as DfResult;
use pgwire::api::Type;
use sluice::catalog::enums::{field_enum_oid, EnumEntry};
use sluice::types::DECLARED_TYPE_KEY;

/// The PostgreSQL type of a field of enum values: the enum's own OID.
pub fn wire_type(field: &Field) -> Option<Type> {
    let oid = field_enum_oid(field.metadata())?;
    let name = field.metadata().get(DECLARED_TYPE_KEY).cloned().unwrap_or_default();
    // A simple kind: what is sent is the OID; the values are text.
    Some(Type::new(name, oid, Type::TEXT.kind().clone(), "public".into()))
}

/// The enum types a session sees, for the functions that name types (`format_type`). Equal to
/// every other (a function's identity does not depend on it).
#[derive(Clone)]
pub struct EnumNames(pub sluice::CatalogView);

impl EnumNames {
    /// The enum types now.
    pub fn enums(&self) -> Vec<EnumEntry> {
        self.0.enums()
    }

    /// The name `format_type` gives the type (or array type) with this OID, if it is one of
    /// `enums`.
    pub fn name_of(enums: &[EnumEntry], oid: u32) -> Option<String> {
        if let Some(entry) = enums.iter().find(|e| e.oid == oid) {
            return Some(entry.declared_name());
        }
        enums.iter().find(|e| e.array_oid() == oid).map(|e| format!("{}[]", e.declared_name()))
    }
}

impl std::fmt::Debug for EnumNames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EnumNames")
    }
}

impl PartialEq for EnumNames {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for EnumNames {}

impl std::hash::Hash for EnumNames {
    fn hash<H: std::hash::Hasher>(&self, _: &mut H) {}
}

/// The `pg_type` OID of each enum type by the name columns of it carry (their declared type
/// name), for `pg_attribute.atttypid`.
pub fn oids_by_name(enums: &[EnumEntry]) -> HashMap<String, i32> {
    enums.iter().filter_map(|e| Some((e.declared_name(), i32::try_from(e.oid).ok()?))).collect()
}

fn int(oid: u32) -> i32 {
    i32::try_from(oid).unwrap_or(0)
}

/// `pg_type`'s rows for the enum types and their array types. `schemas`: each schema's OID by
/// name (a type in a schema `pg_namespace` does not list is left out).
pub fn pg_type_rows(schema: &SchemaRef, schemas: &HashMap<String, i32>, enums: &[EnumEntry]) -> DfResult<RecordBatch> {
    // (oid, name, namespace, element, array): element 0 for the enum type itself.
    let mut rows: Vec<(i32, String, i32, i32, i32)> = Vec::new();
    for entry in enums {
        let Some(namespace) = schemas.get(&entry.schema) else { continue };
        rows.push((int(entry.oid), entry.name.clone(), *namespace, 0, int(entry.array_oid())));
        rows.push((int(entry.array_oid()), format!("_{}", entry.name), *namespace, int(entry.oid), 0));
    }
    let is_enum: Vec<bool> = rows.iter().map(|r| r.3 == 0).collect();
    let ints = |f: fn(&(i32, String, i32, i32, i32)) -> i32| -> ArrayRef {
        Arc::new(rows.iter().map(|r| Some(f(r))).collect::<Int32Array>())
    };
    let by_kind = |enum_value: &str, array_value: &str| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(is_enum.iter().map(|e| if *e { enum_value } else { array_value })))
    };
    let values: Vec<(&str, ArrayRef)> = vec![
        ("oid", ints(|r| r.0)),
        ("typname", Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1.clone())))),
        ("typnamespace", ints(|r| r.2)),
        ("typowner", ints(|_| 10)),
        ("typlen", ints(|r| if r.3 == 0 { 4 } else { -1 })),
        ("typbyval", Arc::new(BooleanArray::from(is_enum.clone()))),
        ("typtype", by_kind("e", "b")),
        ("typcategory", by_kind("E", "A")),
        ("typispreferred", Arc::new(BooleanArray::from(vec![false; rows.len()]))),
        ("typisdefined", Arc::new(BooleanArray::from(vec![true; rows.len()]))),
        ("typdelim", by_kind(",", ",")),
        ("typrelid", ints(|_| 0)),
        ("typsubscript", by_kind("-", "array_subscript_handler")),
        ("typelem", ints(|r| r.3)),
        ("typarray", ints(|r| r.4)),
        ("typinput", by_kind("enum_in", "array_in")),
        ("typoutput", by_kind("enum_out", "array_out")),
        ("typreceive", by_kind("enum_recv", "array_recv")),
        ("typsend", by_kind("enum_send", "array_send")),
        ("typmodin", by_kind("-", "-")),
        ("typmodout", by_kind("-", "-")),
        ("typanalyze", by_kind("-", "array_typanalyze")),
        ("typalign", by_kind("i", "i")),
        ("typstorage", by_kind("p", "x")),
        ("typnotnull", Arc::new(BooleanArray::from(vec![false; rows.len()]))),
        ("typbasetype", ints(|_| 0)),
        ("typtypmod", ints(|_| -1)),
        ("typndims", ints(|_| 0)),
        ("typcollation", ints(|_| 0)),
    ];
    super::relations::batch_by_name(schema, rows.len(), values)
}

/// `pg_enum`'s rows: each label of each enum type.
pub fn pg_enum_rows(schema: &SchemaRef, enums: &[EnumEntry]) -> DfResult<RecordBatch> {
    let labels: Vec<(&EnumEntry, &sluice::catalog::enums::EnumLabel)> =
        enums.iter().flat_map(|e| e.labels.iter().map(move |l| (e, l))).collect();
    let values: Vec<(&str, ArrayRef)> = vec![
        ("oid", Arc::new(labels.iter().map(|(_, l)| Some(int(l.oid))).collect::<Int32Array>())),
        ("enumtypid", Arc::new(labels.iter().map(|(e, _)| Some(int(e.oid))).collect::<Int32Array>())),
        ("enumsortorder", Arc::new(labels.iter().map(|(_, l)| Some(l.sort_order)).collect::<Float32Array>())),
        ("enumlabel", Arc::new(StringArray::from_iter_values(labels.iter().map(|(_, l)| l.label.clone())))),
    ];
    super::relations::batch_by_name(schema, labels.len(), values)
}

/// Whether a statement is a driver's look-up of a type by OID (tokio-postgres's: `... FROM
/// pg_catalog.pg_type t ... WHERE t.oid = $1`, `... FROM pg_catalog.pg_enum WHERE enumtypid =
/// $1`, a composite's `... FROM pg_catalog.pg_attribute WHERE attrelid = $1`), whose parameter
/// PostgreSQL describes as `oid` (Sluice's catalogs keep OIDs as `integer`, and a driver binds
/// only an `oid` parameter from its OID type).
pub fn oid_parameters(sql: &str) -> bool {
    let words: Vec<&str> = sql.split_whitespace().collect();
    let text = words.join(" ");
    let catalog = text.contains("FROM pg_catalog.pg_type t")
        || text.contains("FROM pg_catalog.pg_enum")
        || text.contains("FROM pg_catalog.pg_attribute");
    let by_oid = ["WHERE t.oid = $1", "WHERE enumtypid = $1", "WHERE attrelid = $1"].iter().any(|w| text.contains(w));
    catalog && by_oid
}

/// The result columns of a driver's type look-up (see [`oid_parameters`]) typed as PostgreSQL
/// types them: OID columns as `oid`, `typtype` as `"char"` (tokio-postgres reads those only from
/// those types). Their values are the same bytes in either type (an `oid` is a 4-byte integer, a
/// `"char"` one byte of text).
pub fn typeinfo_schema(schema: &SchemaRef) -> SchemaRef {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|field| {
            let declared = match field.name().as_str() {
                "typtype" => Some(CHAR_TYPE),
                "typelem" | "rngsubtype" | "typbasetype" | "typrelid" | "atttypid" | "oid" => Some(OID_TYPE),
                _ => None,
            };
            match declared {
                Some(name) => {
                    let mut metadata = field.metadata().clone();
                    metadata.insert(DECLARED_TYPE_KEY.to_string(), name.to_string());
                    field.as_ref().clone().with_metadata(metadata)
                }
                None => field.as_ref().clone(),
            }
        })
        .collect();
    Arc::new(arrow::datatypes::Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// The declared type names [`typeinfo_schema`] gives (see `wire_types::declared_pg_type`).
pub const OID_TYPE: &str = "oid";
pub const CHAR_TYPE: &str = "\"char\"";

#[cfg(test)]
mod tests {
    #[test]
    fn driver_type_lookups_take_oids() {
        assert!(super::oid_parameters(
            "SELECT enumlabel\nFROM pg_catalog.pg_enum\nWHERE enumtypid = $1\nORDER BY enumsortorder\n"
        ));
        assert!(super::oid_parameters(
            "SELECT t.typname, t.typtype FROM pg_catalog.pg_type t\n INNER JOIN pg_catalog.pg_namespace n ON \
             t.typnamespace = n.oid WHERE t.oid = $1"
        ));
        assert!(!super::oid_parameters("SELECT * FROM t WHERE id = $1"));
    }
}
