//! `json_build_object(key, value, ...)` (and `jsonb_build_object`): a JSON object as text.
//! Keys are taken as text; integers, floats and decimals become JSON numbers, booleans JSON
//! booleans, NULL JSON null, and every other value its text as a JSON string.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use arrow::datatypes::{DataType, Float64Type, Int64Type};
use datafusion::common::{exec_err, Result as DfResult};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};
use serde_json::{Map, Value};

#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonBuildObject {
    aliases: Vec<String>,
    signature: Signature,
}

/// The function, to register in a session.
pub fn function() -> ScalarUDF {
    ScalarUDF::from(JsonBuildObject {
        aliases: vec!["jsonb_build_object".into()],
        signature: Signature::variadic_any(Volatility::Immutable),
    })
}

fn values(array: &ArrayRef) -> DfResult<Vec<Value>> {
    let len = array.len();
    let out = match array.data_type() {
        DataType::Null => vec![Value::Null; len],
        DataType::Boolean => array.as_boolean().iter().map(|v| v.map(Value::Bool).unwrap_or(Value::Null)).collect(),
        t if t.is_integer() => {
            let ints = arrow::compute::cast(array, &DataType::Int64)?;
            ints.as_primitive::<Int64Type>().iter().map(|v| v.map(Value::from).unwrap_or(Value::Null)).collect()
        }
        t if t.is_floating() || matches!(t, DataType::Decimal128(..) | DataType::Decimal256(..)) => {
            let floats = arrow::compute::cast(array, &DataType::Float64)?;
            floats
                .as_primitive::<Float64Type>()
                .iter()
                .map(|v| v.and_then(serde_json::Number::from_f64).map(Value::Number).unwrap_or(Value::Null))
                .collect()
        }
        _ => {
            let text = arrow::compute::cast(array, &DataType::Utf8)?;
            text.as_string::<i32>().iter().map(|v| v.map(|s| Value::String(s.into())).unwrap_or(Value::Null)).collect()
        }
    };
    Ok(out)
}

impl ScalarUDFImpl for JsonBuildObject {
    fn name(&self) -> &str {
        "json_build_object"
    }

    fn aliases(&self) -> &[String] {
        &self.aliases
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        if !args.args.len().is_multiple_of(2) {
            return exec_err!("json_build_object needs an even number of arguments (key, value, ...)");
        }
        let rows = args.number_rows;
        let columns: Vec<Vec<Value>> =
            args.args.iter().map(|a| a.clone().into_array(rows).and_then(|a| values(&a))).collect::<DfResult<_>>()?;
        let mut builder = StringBuilder::new();
        for row in 0..rows {
            let mut object = Map::new();
            for pair in columns.chunks(2) {
                // Each column holds `rows` values (into_array above).
                let [keys, values] = pair else { continue };
                let (Some(key), Some(value)) = (keys.get(row), values.get(row)) else { continue };
                let key = match key {
                    Value::String(s) => s.clone(),
                    Value::Null => return exec_err!("json_build_object: a key is NULL"),
                    other => other.to_string(),
                };
                object.insert(key, value.clone());
            }
            builder.append_value(Value::Object(object).to_string());
        }
        let array: ArrayRef = Arc::new(builder.finish());
        Ok(if rows == 1 && args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_))) {
            ColumnarValue::Scalar(datafusion::common::ScalarValue::try_from_array(&array, 0)?)
        } else {
            ColumnarValue::Array(array)
        })
    }
}
