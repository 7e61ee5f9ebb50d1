//! PostgreSQL's `format(formatstr, args...)`: `%s` (text; NULL as empty), `%I` (an identifier,
//! quoted where needed), `%L` (a literal, quoted; NULL as `NULL`), `%%`, with an argument
//! position (`%2$s`), the `-` flag and a width (`%-10s`, `%*s` is not supported).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use arrow::datatypes::DataType;
use datafusion::common::{exec_datafusion_err, Result as DfResult, ScalarValue};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};

use crate::error::{Error, Result};

#[derive(Debug, PartialEq, Eq, Hash)]
struct Format {
    signature: Signature,
}

/// The function, to register in a session.
pub fn function() -> ScalarUDF {
    ScalarUDF::from(Format { signature: Signature::variadic_any(Volatility::Stable) })
}

/// An identifier as `quote_ident` writes it.
pub fn quote_ident(name: &str) -> String {
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '$');
    if plain {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

/// A literal as `quote_literal` writes it.
pub fn quote_literal(text: &str) -> String {
    let quoted = text.replace('\'', "''");
    if text.contains('\\') {
        format!("E'{}'", quoted.replace('\\', "\\\\"))
    } else {
        format!("'{quoted}'")
    }
}

/// One row: `pattern` with `args` (None: NULL) put in.
pub fn format(pattern: &str, args: &[Option<String>]) -> Result<String> {
    let mut out = String::new();
    let mut chars = pattern.chars().peekable();
    let mut next = 0usize;
    let invalid = |why: &str| Error::data("22023", why.to_string());
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'%') {
            chars.next();
            out.push('%');
            continue;
        }
        // [position$][-][width]type
        let mut digits = String::new();
        while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
            digits.push(*d);
            chars.next();
        }
        let mut position = None;
        if chars.peek() == Some(&'$') {
            chars.next();
            let n: usize = digits.parse().map_err(|_| invalid("invalid argument position"))?;
            if n == 0 {
                return Err(invalid("format specifies argument 0, but arguments are numbered from 1"));
            }
            position = Some(n - 1);
            digits.clear();
        }
        let left = chars.peek() == Some(&'-');
        if left {
            chars.next();
        }
        while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
            digits.push(*d);
            chars.next();
        }
        let width: usize = if digits.is_empty() { 0 } else { digits.parse().map_err(|_| invalid("invalid width"))? };
        let kind = chars.next().ok_or_else(|| invalid("unterminated format() type specifier"))?;
        let index = position.unwrap_or(next);
        next = index + 1;
        let value = args.get(index).ok_or_else(|| invalid("too few arguments for format()"))?;
        let text = match (kind, value) {
            ('s', Some(v)) => v.clone(),
            ('s', None) => String::new(),
            ('I', Some(v)) => quote_ident(v),
            ('I', None) => return Err(Error::data("22004", "null values cannot be formatted as an SQL identifier")),
            ('L', Some(v)) => quote_literal(v),
            ('L', None) => "NULL".into(),
            (other, _) => {
                return Err(invalid(&format!("unrecognized format() type specifier \"{other}\"")));
            }
        };
        let pad = width.saturating_sub(text.chars().count());
        if left {
            out.push_str(&text);
            out.push_str(&" ".repeat(pad));
        } else {
            out.push_str(&" ".repeat(pad));
            out.push_str(&text);
        }
    }
    Ok(out)
}

impl ScalarUDFImpl for Format {
    fn name(&self) -> &str {
        "format"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let scalar = args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let columns: Vec<ArrayRef> = args
            .args
            .iter()
            .map(|a| a.clone().into_array(rows).and_then(|a| Ok(arrow::compute::cast(&a, &DataType::Utf8)?)))
            .collect::<DfResult<_>>()?;
        let Some((patterns, values)) = columns.split_first() else {
            return Err(exec_datafusion_err!("format needs a format string"));
        };
        let patterns = patterns.as_string::<i32>();
        let values: Vec<_> = values.iter().map(|v| v.as_string::<i32>()).collect();
        let mut builder = StringBuilder::new();
        for row in 0..rows {
            if patterns.is_null(row) {
                builder.append_null();
                continue;
            }
            let row_args: Vec<Option<String>> =
                values.iter().map(|v| v.is_valid(row).then(|| v.value(row).to_string())).collect();
            let text = format(patterns.value(row), &row_args).map_err(|e| exec_datafusion_err!("{e}"))?;
            builder.append_value(text);
        }
        let array: ArrayRef = Arc::new(builder.finish());
        Ok(if scalar && rows == 1 {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&array, 0)?)
        } else {
            ColumnarValue::Array(array)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_as_postgresql() {
        let some = |v: &str| Some(v.to_string());
        assert_eq!(format("Hello %s", &[some("World")]).unwrap(), "Hello World");
        assert_eq!(
            format("INSERT INTO %I VALUES(%L)", &[some("Foo bar"), some("O'Reilly")]).unwrap(),
            "INSERT INTO \"Foo bar\" VALUES('O''Reilly')"
        );
        assert_eq!(format("%2$s %1$s", &[some("a"), some("b")]).unwrap(), "b a");
        assert_eq!(format("|%-5s|%5s|", &[some("ab"), some("cd")]).unwrap(), "|ab   |   cd|");
        assert_eq!(format("%L, %s.", &[None, None]).unwrap(), "NULL, .");
        assert_eq!(format("%I", &[None]).unwrap_err().sqlstate(), "22004");
        assert_eq!(format("%s %s", &[some("a")]).unwrap_err().sqlstate(), "22023");
        assert_eq!(format("100%%", &[]).unwrap(), "100%");
    }
}
