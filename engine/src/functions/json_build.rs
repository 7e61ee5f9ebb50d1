//! `json_build_object(key, value, ...)` and `jsonb_build_object`: a JSON object as text, and
//! `__pg_json_array(list)`, the last step of `json_agg`/`jsonb_agg` (planned as the array of
//! `array_agg`). Keys are taken as text; integers, floats and decimals become JSON numbers,
//! booleans JSON booleans, NULL JSON null, lists arrays, structs objects, `json`/`jsonb` values the
//! documents they hold, and every other value its text as a JSON string. `json` results keep the
//! keys in the order given and print as PostgreSQL prints `json_build_object`
//! (`{"a" : 1, "b" : 2}`); `jsonb` results are canonical (see `crate::documents`).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use arrow::datatypes::{DataType, Float64Type, Int64Type};
use datafusion::common::{exec_err, Result as DfResult};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};
use serde_json::{Map, Value};

use crate::documents::TextType;

#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonBuildObject {
    name: &'static str,
    output: TextType,
    /// An array from a list (`json_agg`), not an object from pairs.
    array: bool,
    /// An object from a list of keys and a list of values (`json_object_agg`).
    lists: bool,
    signature: Signature,
}

/// The functions, to register in a session.
pub fn functions() -> Vec<ScalarUDF> {
    let make = |name, output, array, lists| {
        ScalarUDF::from(JsonBuildObject {
            name,
            output,
            array,
            lists,
            signature: Signature::variadic_any(Volatility::Immutable),
        })
    };
    vec![
        make("json_build_object", TextType::Json, false, false),
        make("jsonb_build_object", TextType::Jsonb, false, false),
        make("__pg_json_array", TextType::Json, true, false),
        make("__pg_jsonb_array", TextType::Jsonb, true, false),
        // `json_object_agg(k, v)` is planned as this of `array_agg(k)` and `array_agg(v)`.
        make("__pg_json_object_agg", TextType::Json, false, true),
        make("__pg_jsonb_object_agg", TextType::Jsonb, false, true),
    ]
}

/// `json` text as PostgreSQL's json-building functions print it: `{"a" : 1}`, `[1, 2]`.
fn json_text(value: &Value, keys: &[String]) -> String {
    match value {
        Value::Object(map) => {
            let entries: Vec<String> = keys
                .iter()
                .filter_map(|k| map.get(k).map(|v| format!("{} : {}", Value::String(k.clone()), v)))
                .collect();
            format!("{{{}}}", entries.join(", "))
        }
        Value::Array(items) => {
            format!("[{}]", items.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", "))
        }
        other => other.to_string(),
    }
}

/// `json_agg`'s text of each list: its elements as `to_json` prints them, after `, ` (and a line
/// break before a row or an array, as PostgreSQL's `json_agg` does).
fn json_array_texts(lists: &ArrayRef) -> DfResult<Vec<Option<String>>> {
    let element = list_field(lists);
    let lists = arrow::compute::cast(lists, &DataType::List(element.clone()))?;
    let lists = lists.as_list::<i32>();
    let items = super::rows::json_texts(lists.values(), &element)?;
    let separator = if matches!(element.data_type(), DataType::Struct(_) | DataType::List(_) | DataType::LargeList(_))
        && crate::documents::TextType::of_field(&element).is_none()
    {
        ", \n "
    } else {
        ", "
    };
    let offsets = lists.value_offsets();
    Ok((0..lists.len())
        .map(|i| {
            let (start, end) = (offsets.get(i).copied().unwrap_or(0), offsets.get(i + 1).copied().unwrap_or(0));
            let (start, end) = (usize::try_from(start).unwrap_or(0), usize::try_from(end).unwrap_or(0));
            let texts: Vec<&str> =
                items.get(start..end).unwrap_or_default().iter().map(|t| t.as_deref().unwrap_or("null")).collect();
            (!lists.is_null(i)).then(|| format!("[{}]", texts.join(separator)))
        })
        .collect())
}

/// A float as a JSON number: its shortest text without an exponent; NaN and the infinities,
/// which JSON cannot hold as numbers, as strings (as PostgreSQL's `to_jsonb`).
fn float_number(value: f64) -> Value {
    if value.is_nan() {
        return Value::String("NaN".into());
    }
    if value.is_infinite() {
        return Value::String(if value > 0.0 { "Infinity" } else { "-Infinity" }.into());
    }
    let text = if value == 0.0 { "0".to_string() } else { format!("{value}") };
    text.parse::<serde_json::Number>().map(Value::Number).unwrap_or(Value::Null)
}

pub(super) fn values(array: &ArrayRef) -> DfResult<Vec<Value>> {
    let len = array.len();
    let out = match array.data_type() {
        DataType::Null => vec![Value::Null; len],
        DataType::Boolean => array.as_boolean().iter().map(|v| v.map(Value::Bool).unwrap_or(Value::Null)).collect(),
        t if t.is_integer() => {
            let ints = arrow::compute::cast(array, &DataType::Int64)?;
            ints.as_primitive::<Int64Type>().iter().map(|v| v.map(Value::from).unwrap_or(Value::Null)).collect()
        }
        // A number keeps its digits (and a decimal its scale), as PostgreSQL's `to_jsonb` of a
        // numeric; a float reads as its shortest text (`100`, `0.1`), as float8 to numeric does.
        t if t.is_floating() => {
            let floats = arrow::compute::cast(array, &DataType::Float64)?;
            floats.as_primitive::<Float64Type>().iter().map(|v| v.map(float_number).unwrap_or(Value::Null)).collect()
        }
        DataType::Decimal128(..) | DataType::Decimal256(..) => {
            // An unconstrained numeric without its fractional zeros, as over pgwire.
            let texts = crate::types::decimal_column_text(array)?;
            texts
                .as_string::<i32>()
                .iter()
                .map(|v| v.and_then(|t| t.parse::<serde_json::Number>().ok()).map(Value::Number).unwrap_or(Value::Null))
                .collect()
        }
        DataType::List(_) | DataType::LargeList(_) => {
            let list = arrow::compute::cast(array, &DataType::List(list_field(array)))?;
            let list = list.as_list::<i32>();
            let mut out = Vec::with_capacity(len);
            for i in 0..len {
                out.push(if list.is_null(i) { Value::Null } else { Value::Array(values(&list.value(i))?) });
            }
            out
        }
        DataType::Struct(fields) => {
            let columns = array.as_struct();
            let converted: Vec<Vec<Value>> = columns
                .columns()
                .iter()
                .zip(fields.iter())
                .map(|(c, f)| typed_values(c, f))
                .collect::<DfResult<_>>()?;
            (0..len)
                .map(|i| {
                    if array.is_null(i) {
                        return Value::Null;
                    }
                    let mut object = Map::new();
                    for (field, column) in fields.iter().zip(&converted) {
                        object.insert(field.name().clone(), column.get(i).cloned().unwrap_or(Value::Null));
                    }
                    Value::Object(object)
                })
                .collect()
        }
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => {
            // bytea as PostgreSQL's text of it, `\x0102`.
            let bytes = arrow::compute::cast(array, &DataType::Binary)?;
            bytes
                .as_binary::<i32>()
                .iter()
                .map(|v| {
                    v.map_or(Value::Null, |b| {
                        Value::String(format!("\\x{}", b.iter().map(|byte| format!("{byte:02x}")).collect::<String>()))
                    })
                })
                .collect()
        }
        DataType::Timestamp(_, zone) => {
            let micros =
                arrow::compute::cast(array, &DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, None))?;
            micros
                .as_primitive::<arrow::datatypes::TimestampMicrosecondType>()
                .iter()
                .map(|v| v.map_or(Value::Null, |v| Value::String(super::rows::timestamp_text(v, zone.is_some()))))
                .collect()
        }
        _ => {
            let text = arrow::compute::cast(array, &DataType::Utf8)?;
            text.as_string::<i32>().iter().map(|v| v.map(|s| Value::String(s.into())).unwrap_or(Value::Null)).collect()
        }
    };
    Ok(out)
}

fn list_field(array: &ArrayRef) -> Arc<arrow::datatypes::Field> {
    match array.data_type() {
        DataType::List(f) | DataType::LargeList(f) => f.clone(),
        _ => Arc::new(arrow::datatypes::Field::new_list_field(DataType::Utf8, true)),
    }
}

/// The values of a column as JSON, reading `json`/`jsonb` text (by the field's type) as the
/// documents it holds rather than as strings.
pub(super) fn typed_values(array: &ArrayRef, field: &arrow::datatypes::Field) -> DfResult<Vec<Value>> {
    use crate::documents::TextType;
    let element_typed = match field.data_type() {
        DataType::List(element) | DataType::LargeList(element) => {
            matches!(TextType::of_field(element), Some(TextType::Json | TextType::Jsonb))
        }
        _ => false,
    };
    if matches!(TextType::of_field(field), Some(TextType::Json | TextType::Jsonb)) {
        let text = arrow::compute::cast(array, &DataType::Utf8)?;
        return Ok(text
            .as_string::<i32>()
            .iter()
            .map(|v| v.and_then(|s| serde_json::from_str(s).ok()).unwrap_or(Value::Null))
            .collect());
    }
    let mut out = values(array)?;
    if element_typed {
        for value in out.iter_mut() {
            if let Value::Array(items) = value {
                for item in items.iter_mut() {
                    if let Value::String(s) = item {
                        if let Ok(parsed) = serde_json::from_str(s) {
                            *item = parsed;
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

impl ScalarUDFImpl for JsonBuildObject {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn return_field_from_args(
        &self,
        _args: datafusion::logical_expr::ReturnFieldArgs,
    ) -> DfResult<arrow::datatypes::FieldRef> {
        Ok(Arc::new(self.output.field(self.name, true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        if !self.array && !self.lists && !args.args.len().is_multiple_of(2) {
            return exec_err!("argument list must have even number of elements");
        }
        let rows = args.number_rows;
        let columns: Vec<Vec<Value>> = args
            .args
            .iter()
            .zip(&args.arg_fields)
            .map(|(a, f)| a.clone().into_array(rows).and_then(|a| typed_values(&a, f)))
            .collect::<DfResult<_>>()?;
        let json_agg_texts = match (self.array && self.output == TextType::Json, args.args.first()) {
            (true, Some(list)) => json_array_texts(&list.clone().into_array(rows)?)?,
            _ => Vec::new(),
        };
        let mut builder = StringBuilder::new();
        for row in 0..rows {
            if self.lists {
                let (Some(Value::Array(keys)), Some(Value::Array(values))) =
                    (columns.first().and_then(|c| c.get(row)), columns.get(1).and_then(|c| c.get(row)))
                else {
                    builder.append_null();
                    continue;
                };
                let mut entries = Vec::with_capacity(keys.len());
                for (key, value) in keys.iter().zip(values) {
                    let key = match key {
                        Value::String(s) => s.clone(),
                        Value::Null => return exec_err!("field name must not be null"),
                        other => other.to_string(),
                    };
                    entries.push((key, value.clone()));
                }
                builder.append_value(match self.output {
                    TextType::Jsonb => crate::documents::jsonb_text(&Value::Object(entries.into_iter().collect())),
                    // json keeps every pair, duplicates too, as PostgreSQL prints it.
                    _ => format!(
                        "{{ {} }}",
                        entries
                            .iter()
                            .map(|(k, v)| format!("{} : {v}", Value::String(k.clone())))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
                continue;
            }
            if self.array && self.output == TextType::Json {
                builder.append_option(json_agg_texts.get(row).cloned().flatten());
                continue;
            }
            if self.array {
                match columns.first().and_then(|c| c.get(row)) {
                    Some(Value::Null) | None => builder.append_null(),
                    Some(value) => builder.append_value(match self.output {
                        TextType::Jsonb => crate::documents::jsonb_text(value),
                        _ => json_text(value, &[]),
                    }),
                }
                continue;
            }
            let mut object = Map::new();
            let mut order = Vec::new();
            for pair in columns.chunks(2) {
                // Each column holds `rows` values (into_array above).
                let [keys, values] = pair else { continue };
                let (Some(key), Some(value)) = (keys.get(row), values.get(row)) else { continue };
                let key = match key {
                    Value::String(s) => s.clone(),
                    Value::Null => return exec_err!("argument 1: key must not be null"),
                    other => other.to_string(),
                };
                if object.insert(key.clone(), value.clone()).is_none() {
                    order.push(key);
                }
            }
            let object = Value::Object(object);
            builder.append_value(match self.output {
                TextType::Jsonb => crate::documents::jsonb_text(&object),
                _ => json_text(&object, &order),
            });
        }
        let array: ArrayRef = Arc::new(builder.finish());
        Ok(if rows == 1 && args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_))) {
            ColumnarValue::Scalar(datafusion::common::ScalarValue::try_from_array(&array, 0)?)
        } else {
            ColumnarValue::Array(array)
        })
    }
}
