//! PostgreSQL types that Sluice stores as other Arrow types, and their wire forms.
//!
//! `uuid`, `json`, `jsonb`, `varchar(n)` and `char(n)` are Arrow strings whose field metadata
//! (`sluice.type`) names the PostgreSQL type, for table columns and for expressions alike (see
//! `sluice::documents`). Here that name becomes the type OID and type modifier in RowDescription,
//! the binary forms clients ask for (`uuid`: 16 bytes; `jsonb`: a version byte then the text), and
//! parameters declared with those types are read from their text or binary forms.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BinaryBuilder, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::error::ArrowError;
use datafusion::common::ScalarValue;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::results::FieldInfo;
use pgwire::api::stmt::StoredStatement;
use pgwire::api::Type;
use pgwire::error::PgWireResult;
use sluice::documents::{self, TextType};
use sluice::types::DECLARED_TYPE_KEY;

/// The PostgreSQL type (and type modifier) a field's declared type names, when it is not the one
/// its Arrow type maps to.
pub fn declared_pg_type(field: &Field) -> Option<(Type, i32)> {
    let declared = match field.data_type() {
        DataType::List(element) | DataType::LargeList(element) => {
            let own = field.metadata().get(DECLARED_TYPE_KEY).and_then(|d| d.strip_suffix("[]").map(str::to_string));
            let of_element = element.metadata().get(DECLARED_TYPE_KEY).cloned();
            let (element_type, _) = match own.or(of_element) {
                Some(name) => named(&name)?,
                None => return None,
            };
            return array_of(&element_type).map(|t| (t, -1));
        }
        _ => field.metadata().get(DECLARED_TYPE_KEY)?,
    };
    named(declared)
}

fn named(declared: &str) -> Option<(Type, i32)> {
    let length = |prefix: &str| {
        declared.strip_prefix(prefix).and_then(|rest| rest.strip_suffix(')')).and_then(|n| n.parse::<i32>().ok())
    };
    Some(match declared {
        "uuid" => (Type::UUID, -1),
        "json" => (Type::JSON, -1),
        "jsonb" => (Type::JSONB, -1),
        "varchar" => (Type::VARCHAR, -1),
        _ => {
            if let Some(n) = length("varchar(") {
                (Type::VARCHAR, n + 4)
            } else if let Some(n) = length("char(") {
                (Type::BPCHAR, n + 4)
            } else {
                return None;
            }
        }
    })
}

/// The type OID and modifier of a column's declared type name (as `pg_attribute` gives them),
/// for the names whose Arrow type alone does not tell: `uuid`, `json`, `jsonb`, `varchar(n)`,
/// `char(n)`, arrays of those, and `numeric(p,s)`'s modifier.
pub fn declared_oid(type_name: &str) -> Option<(i32, i32)> {
    if let Some(element) = type_name.strip_suffix("[]") {
        let (element, _) = named(element)?;
        return array_of(&element).map(|t| (t.oid() as i32, -1));
    }
    if let Some(spec) = type_name.strip_prefix("numeric(").and_then(|t| t.strip_suffix(')')) {
        let (p, s) = spec.split_once(',')?;
        let (p, s): (i32, i32) = (p.trim().parse().ok()?, s.trim().parse().ok()?);
        return Some((Type::NUMERIC.oid() as i32, ((p << 16) | s) + 4));
    }
    named(type_name).map(|(t, modifier)| (t.oid() as i32, modifier))
}

fn array_of(element: &Type) -> Option<Type> {
    Some(match *element {
        Type::UUID => Type::UUID_ARRAY,
        Type::JSON => Type::JSON_ARRAY,
        Type::JSONB => Type::JSONB_ARRAY,
        Type::VARCHAR => Type::VARCHAR_ARRAY,
        Type::BPCHAR => Type::BPCHAR_ARRAY,
        _ => return None,
    })
}

/// Row description fields with the declared types put in.
pub fn with_declared_types(schema: &Schema, fields: Vec<FieldInfo>) -> Vec<FieldInfo> {
    fields
        .into_iter()
        .zip(schema.fields())
        .map(|(info, field)| match declared_pg_type(field) {
            Some((pg, modifier)) => {
                FieldInfo::new(info.name().to_string(), info.table_id(), info.column_id(), pg, info.format())
                    .with_format_options(info.format_options().clone())
                    .with_type_modifier(modifier)
            }
            None => info,
        })
        .collect()
}

/// `batch` with its binary-format `uuid` and `jsonb` columns in their binary forms.
pub fn binary_forms(batch: RecordBatch, format: &Format) -> Result<RecordBatch, ArrowError> {
    let schema = batch.schema();
    let mut columns: Option<Vec<ArrayRef>> = None;
    for (i, field) in schema.fields().iter().enumerate() {
        if super::text::is_text(format, i) {
            continue;
        }
        let Some(text_type @ (TextType::Uuid | TextType::Jsonb)) = TextType::of_field(field) else { continue };
        let Some(column) = batch.columns().get(i) else { continue };
        let text = arrow::compute::cast(column, &DataType::Utf8)?;
        let text = text.as_string::<i32>();
        let mut builder = BinaryBuilder::with_capacity(text.len(), text.len() * 16);
        for value in text.iter() {
            match (value, text_type) {
                (None, _) => builder.append_null(),
                (Some(v), TextType::Uuid) => {
                    let bytes = documents::uuid_bytes(v).map_err(|e| ArrowError::CastError(e.to_string()))?;
                    builder.append_value(bytes);
                }
                (Some(v), _) => {
                    let mut bytes = Vec::with_capacity(v.len() + 1);
                    bytes.push(1);
                    bytes.extend_from_slice(v.as_bytes());
                    builder.append_value(bytes);
                }
            }
        }
        if let Some(slot) = columns.get_or_insert_with(|| batch.columns().to_vec()).get_mut(i) {
            *slot = Arc::new(builder.finish());
        }
    }
    let Some(columns) = columns else { return Ok(batch) };
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .zip(&columns)
        .map(|(f, c)| Field::new(f.name(), c.data_type().clone(), true).with_metadata(f.metadata().clone()))
        .collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
}

/// Whether a parameter type is one arrow-pg cannot read, which [`decode_parameters`] reads itself.
fn own_parameter_type(pg: &Type) -> bool {
    matches!(*pg, Type::UUID | Type::JSON | Type::JSONB | Type::UUID_ARRAY | Type::JSON_ARRAY | Type::JSONB_ARRAY)
}

/// The parameters of a portal: `uuid`, `json` and `jsonb` (and arrays of them) read here, from
/// text or binary, as text values; the others by arrow-pg.
pub fn decode_parameters<S: Clone + Default>(
    portal: &Portal<S>,
    inferred: &[Option<&DataType>],
) -> PgWireResult<Vec<ScalarValue>> {
    let declared: Vec<Option<Type>> = portal.statement.parameter_types.clone();
    let own: Vec<usize> = declared
        .iter()
        .enumerate()
        .filter(|(_, t)| t.as_ref().is_some_and(own_parameter_type))
        .map(|(i, _)| i)
        .collect();
    if own.is_empty() {
        let values = arrow_pg::datatypes::df::deserialize_parameters(portal, inferred)?;
        return Ok(super::statements::param_values(values));
    }
    // The others through arrow-pg, with these as text NULLs in their place.
    let mut statement = StoredStatement::new(
        portal.statement.id.clone(),
        portal.statement.statement.clone(),
        portal.statement.parameter_types.clone(),
    );
    let mut parameters = portal.parameters.clone();
    for &i in &own {
        if let Some(slot) = statement.parameter_types.get_mut(i) {
            *slot = Some(Type::TEXT);
        }
        if let Some(slot) = parameters.get_mut(i) {
            *slot = None;
        }
    }
    let mut others: Portal<S> = Portal::default();
    others.name = portal.name.clone();
    others.statement = Arc::new(statement);
    others.parameter_format = portal.parameter_format.clone();
    others.parameters = parameters;
    others.result_column_format = portal.result_column_format.clone();
    let mut values =
        super::statements::param_values(arrow_pg::datatypes::df::deserialize_parameters(&others, inferred)?);
    for i in own {
        let (Some(Some(pg)), Some(slot)) = (declared.get(i), values.get_mut(i)) else { continue };
        let raw = portal.parameters.get(i).cloned().flatten();
        let binary = portal.parameter_format.is_binary(i);
        *slot = match raw {
            None => null_of(pg),
            Some(bytes) => parameter(pg, &bytes, binary).map_err(|e| super::encode::error(&e))?,
        };
    }
    Ok(values)
}

fn null_of(pg: &Type) -> ScalarValue {
    match *pg {
        Type::UUID_ARRAY | Type::JSON_ARRAY | Type::JSONB_ARRAY => {
            ScalarValue::List(ScalarValue::new_list_nullable(&[], &DataType::Utf8))
        }
        _ => ScalarValue::Utf8(None),
    }
}

fn element_type(pg: &Type) -> TextType {
    match *pg {
        Type::UUID | Type::UUID_ARRAY => TextType::Uuid,
        Type::JSON | Type::JSON_ARRAY => TextType::Json,
        _ => TextType::Jsonb,
    }
}

fn parameter(pg: &Type, bytes: &[u8], binary: bool) -> sluice::Result<ScalarValue> {
    let text_type = element_type(pg);
    let array = matches!(*pg, Type::UUID_ARRAY | Type::JSON_ARRAY | Type::JSONB_ARRAY);
    if !array {
        return Ok(ScalarValue::Utf8(Some(element(text_type, bytes, binary)?)));
    }
    let items: Vec<Option<String>> = if binary {
        binary_array(bytes)?
            .into_iter()
            .map(|item| item.map(|b| element(text_type, &b, true)).transpose())
            .collect::<sluice::Result<_>>()?
    } else {
        let text = std::str::from_utf8(bytes).map_err(|_| invalid_bytes())?;
        sluice::types::array_from_text(text)?
            .into_iter()
            .map(|item| item.map(|t| text_type.input(&t)).transpose())
            .collect::<sluice::Result<_>>()?
    };
    let scalars: Vec<ScalarValue> = items.into_iter().map(ScalarValue::Utf8).collect();
    Ok(ScalarValue::List(ScalarValue::new_list_nullable(&scalars, &DataType::Utf8)))
}

fn invalid_bytes() -> sluice::Error {
    sluice::Error::data("22P03", "incorrect binary data format in bind parameter")
}

/// One value from its text or binary form, in the type's stored form.
fn element(text_type: TextType, bytes: &[u8], binary: bool) -> sluice::Result<String> {
    if binary && text_type == TextType::Uuid {
        return documents::uuid_from_bytes(bytes);
    }
    let bytes = match (binary, text_type, bytes.split_first()) {
        (true, TextType::Jsonb, Some((1, rest))) => rest,
        (true, TextType::Jsonb, _) => return Err(sluice::Error::data("22P03", "unsupported jsonb version number")),
        _ => bytes,
    };
    let text = std::str::from_utf8(bytes).map_err(|_| invalid_bytes())?;
    text_type.input(text)
}

/// Reads the binary form of an array from its start.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> sluice::Result<&'a [u8]> {
        let (head, tail) = (self.0.get(..n).ok_or_else(invalid_bytes)?, self.0.get(n..).ok_or_else(invalid_bytes)?);
        self.0 = tail;
        Ok(head)
    }

    fn int(&mut self) -> sluice::Result<i32> {
        let word: [u8; 4] = self.take(4)?.try_into().map_err(|_| invalid_bytes())?;
        Ok(i32::from_be_bytes(word))
    }
}

/// The elements of a one-dimensional array in the binary form (`array_send`).
fn binary_array(bytes: &[u8]) -> sluice::Result<Vec<Option<Vec<u8>>>> {
    let mut cursor = Cursor(bytes);
    let dimensions = cursor.int()?;
    let _has_nulls = cursor.int()?;
    let _element_oid = cursor.int()?;
    if dimensions == 0 {
        return Ok(vec![]);
    }
    if dimensions != 1 {
        return Err(sluice::Error::NotSupported("multidimensional array parameters".into()));
    }
    let length = cursor.int()?;
    let _lower_bound = cursor.int()?;
    let mut items = Vec::new();
    for _ in 0..length.max(0) {
        let size = cursor.int()?;
        items.push(match usize::try_from(size) {
            Ok(size) => Some(cursor.take(size)?.to_vec()),
            Err(_) => None,
        });
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_arrays_read() {
        let mut bytes = Vec::new();
        for word in [1i32, 1, 2950, 2, 1, 16] {
            bytes.extend_from_slice(&word.to_be_bytes());
        }
        bytes.extend_from_slice(&[7u8; 16]);
        bytes.extend_from_slice(&(-1i32).to_be_bytes());
        let items = binary_array(&bytes).unwrap();
        assert_eq!(items, vec![Some(vec![7u8; 16]), None]);
        assert!(binary_array(&bytes[..10]).is_err());
        let value = parameter(&Type::UUID_ARRAY, &bytes, true).unwrap();
        assert!(matches!(value, ScalarValue::List(_)));
        assert_eq!(
            parameter(&Type::JSONB, b"\x01{\"b\":1,\"a\":2}", true).unwrap(),
            ScalarValue::Utf8(Some("{\"a\": 2, \"b\": 1}".into()))
        );
        assert!(parameter(&Type::UUID, b"nope", false).is_err());
    }
}
