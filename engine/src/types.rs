//! Column types: Postgres type names (as written in CREATE TABLE) to Delta types, and back to the
//! names clients are shown.
//!
//! Delta has fewer types than Postgres, so some names share a storage type and the declared name
//! is kept in the column's metadata (`sluice.type`): `json`/`jsonb`/`uuid`/`varchar(n)` are stored
//! as `string`, `numeric` without precision as `decimal(38,10)`, `timestamp` (without time zone)
//! as `timestamp_ntz` and `timestamptz` as `timestamp`, as Postgres users expect.
//!
//! Delta has no time-of-day types. `time` (and `time(p)`) is stored as a `long` of microseconds
//! since midnight, which Sluice reads as Arrow `Time64(µs)` (see `sluice_storage::schema`) and
//! Spark or delta-rs read as the number. `timetz` is stored as a `string` in PostgreSQL's output
//! form (`12:57:18.000396+05:30`, see [`crate::timetz`]): the offset round-trips exactly, and
//! every Delta reader shows the value as psql prints it.
//!
//! Delta has no interval type either: an `interval` is stored as a `string` in Arrow's text form
//! (`1 mons 2 days 3.500000000 secs`, see `sluice_storage::schema`), read as Arrow's
//! `Interval(MonthDayNano)`, which keeps months, days and time apart as PostgreSQL does.

use datafusion::sql::sqlparser::ast::{self, ArrayElemTypeDef, ExactNumberInfo, TimezoneInfo};
use serde_json::Value;
use sluice_storage::schema::{ArrayType, DataType, PrimitiveType, StructField};

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::compute::cast;
use arrow::datatypes::SchemaRef;

use crate::error::{Error, Result};
use arrow::array::{Array, AsArray};
use arrow::error::ArrowError;

/// Column metadata key holding the declared Postgres type name.
pub const DECLARED_TYPE_KEY: &str = sluice_storage::schema::DECLARED_TYPE_KEY;

/// The most fractional digits of seconds a `time`, `timetz` or `timestamp` keeps.
pub const SECONDS_PRECISION_MAX: u64 = 6;

/// Precision and scale of `numeric` written without them (an unconstrained numeric).
pub const NUMERIC_DEFAULT: (u8, i8) = (38, 10);

/// A column type as declared: the Delta type and, where it differs from the default name for that
/// type, the declared name.
#[derive(Debug, Clone, PartialEq)]
pub struct DeclaredType {
    pub data_type: DataType,
    pub declared: Option<String>,
}

impl DeclaredType {
    /// The Arrow type of the declared type's values (a `time` is `Time64`, stored as a `long`).
    pub fn arrow_type(&self) -> arrow::datatypes::DataType {
        match &self.declared {
            Some(declared) if sluice_storage::schema::is_time_of_day(declared) => sluice_storage::schema::TIME_OF_DAY,
            Some(declared) if declared == sluice_storage::schema::INTERVAL_NAME => sluice_storage::schema::INTERVAL,
            _ => self.data_type.to_arrow(),
        }
    }
}

fn primitive(p: PrimitiveType) -> DeclaredType {
    DeclaredType { data_type: DataType::Primitive(p), declared: None }
}

fn named(p: PrimitiveType, name: &str) -> DeclaredType {
    DeclaredType { data_type: DataType::Primitive(p), declared: Some(name.to_string()) }
}

/// Maps a type from SQL to its Delta type.
pub fn declared_type(sql: &ast::DataType) -> Result<DeclaredType> {
    use ast::DataType as T;
    use PrimitiveType as P;
    Ok(match sql {
        T::SmallInt(_) | T::Int2(_) | T::Int16 => primitive(P::Short),
        T::TinyInt(_) => primitive(P::Byte),
        T::Int(_) | T::Integer(_) | T::Int4(_) | T::Int32 => primitive(P::Integer),
        T::BigInt(_) | T::Int8(_) | T::Int64 => primitive(P::Long),
        T::Real | T::Float4 | T::Float32 => primitive(P::Float),
        T::Float(info) => match info {
            ExactNumberInfo::Precision(p) if *p <= 24 => primitive(P::Float),
            _ => primitive(P::Double),
        },
        T::Double(_) | T::DoublePrecision | T::Float8 | T::Float64 => primitive(P::Double),
        T::Bool | T::Boolean => primitive(P::Boolean),
        T::Text | T::String(_) => primitive(P::String),
        T::Varchar(length) | T::CharacterVarying(length) | T::CharVarying(length) | T::Nvarchar(length) => match length
        {
            Some(ast::CharacterLength::IntegerLength { length, .. }) => named(P::String, &format!("varchar({length})")),
            _ => named(P::String, "varchar"),
        },
        T::Char(length) | T::Character(length) => match length {
            Some(ast::CharacterLength::IntegerLength { length, .. }) => named(P::String, &format!("char({length})")),
            _ => named(P::String, "char(1)"),
        },
        T::Uuid => named(P::String, "uuid"),
        T::JSON => named(P::String, "json"),
        T::JSONB => named(P::String, "jsonb"),
        T::Bytea | T::Binary(_) | T::Varbinary(_) | T::Blob(_) | T::Bytes(_) => primitive(P::Binary),
        T::Date => primitive(P::Date),
        T::Time(precision, zone) => {
            // PostgreSQL reduces a larger precision to 6 (with a warning).
            let precision = precision.map(|p| p.min(SECONDS_PRECISION_MAX));
            let with_zone = matches!(zone, TimezoneInfo::WithTimeZone | TimezoneInfo::Tz);
            let (stored, name) = if with_zone { (P::String, "timetz") } else { (P::Long, "time") };
            match precision {
                Some(p) => named(stored, &format!("{name}({p})")),
                None => named(stored, name),
            }
        }
        // PostgreSQL's field restrictions (`interval day to second`) and precisions round input;
        // Sluice keeps every interval whole rather than accept them and ignore them.
        T::Interval { fields: None, precision: None } => named(P::String, sluice_storage::schema::INTERVAL_NAME),
        // PostgreSQL reduces a precision above 6 to 6, its whole microsecond resolution: such an
        // interval is a plain one.
        T::Interval { fields: None, precision: Some(p) } if *p >= SECONDS_PRECISION_MAX => {
            named(P::String, sluice_storage::schema::INTERVAL_NAME)
        }
        T::Timestamp(_, TimezoneInfo::WithTimeZone | TimezoneInfo::Tz) => primitive(P::Timestamp),
        T::Timestamp(_, _) | T::TimestampNtz(_) | T::Datetime(_) => primitive(P::TimestampNtz),
        T::Numeric(info) | T::Decimal(info) | T::Dec(info) => {
            let (precision, scale) = match info {
                ExactNumberInfo::None => NUMERIC_DEFAULT,
                ExactNumberInfo::Precision(p) => (to_precision(*p)?, 0),
                ExactNumberInfo::PrecisionAndScale(p, s) => {
                    (to_precision(*p)?, i8::try_from(*s).map_err(|_| bad_type(sql))?)
                }
            };
            if scale < 0 || scale as u8 > precision {
                return Err(Error::Plan(format!(
                    "numeric scale {scale} must be between 0 and the precision {precision}"
                )));
            }
            let declared = matches!(info, ExactNumberInfo::None).then(|| "numeric".to_string());
            DeclaredType { data_type: DataType::Primitive(P::Decimal { precision, scale }), declared }
        }
        T::Array(
            ArrayElemTypeDef::SquareBracket(inner, _)
            | ArrayElemTypeDef::AngleBracket(inner)
            | ArrayElemTypeDef::Parenthesis(inner),
        ) => {
            let element = declared_type(inner)?;
            if matches!(inner.as_ref(), T::Time(..)) {
                // A list's elements carry no declared type in Delta: a `time[]` would read as
                // `bigint[]`.
                return Err(bad_type(sql));
            }
            DeclaredType {
                data_type: DataType::Array(Box::new(ArrayType {
                    element_type: element.data_type,
                    contains_null: true,
                })),
                declared: element.declared.map(|d| format!("{d}[]")),
            }
        }
        T::Custom(name, _) => {
            let text = name.to_string().to_ascii_lowercase();
            match text.as_str() {
                "timestamptz" => primitive(P::Timestamp),
                "serial" | "int4" => primitive(P::Integer),
                "bigserial" | "int8" => primitive(P::Long),
                "long" => primitive(P::Long),
                "short" => primitive(P::Short),
                "byte" => primitive(P::Byte),
                "double" => primitive(P::Double),
                "string" => primitive(P::String),
                "citext" => named(P::String, "citext"),
                _ => return Err(bad_type(sql)),
            }
        }
        _ => return Err(bad_type(sql)),
    })
}

fn to_precision(p: u64) -> Result<u8> {
    match u8::try_from(p) {
        Ok(p) if (1..=38).contains(&p) => Ok(p),
        _ => Err(Error::NotSupported(format!("numeric precision {p} (Sluice stores at most 38 digits)"))),
    }
}

fn bad_type(sql: &ast::DataType) -> Error {
    Error::NotSupported(format!("type {sql}"))
}

/// A table column of a declared type.
pub fn column(name: &str, declared: DeclaredType, nullable: bool) -> StructField {
    let mut field = StructField::new(name, declared.data_type, nullable);
    if let Some(declared) = declared.declared {
        field.metadata.insert(DECLARED_TYPE_KEY.into(), Value::String(declared));
    }
    field
}

/// The Postgres name of a column's type, as clients are shown it.
pub fn pg_type_name(field: &StructField) -> String {
    if let Some(Value::String(declared)) = field.metadata.get(DECLARED_TYPE_KEY) {
        return declared.clone();
    }
    delta_type_pg_name(&field.data_type)
}

/// The Postgres name for a Delta type.
pub fn delta_type_pg_name(data_type: &DataType) -> String {
    use PrimitiveType as P;
    match data_type {
        DataType::Primitive(p) => match p {
            P::String => "text".into(),
            P::Long => "bigint".into(),
            P::Integer => "integer".into(),
            P::Short | P::Byte => "smallint".into(),
            P::Float => "real".into(),
            P::Double => "double precision".into(),
            P::Boolean => "boolean".into(),
            P::Binary => "bytea".into(),
            P::Date => "date".into(),
            P::Timestamp => "timestamp with time zone".into(),
            P::TimestampNtz => "timestamp without time zone".into(),
            P::Decimal { precision, scale } => format!("numeric({precision},{scale})"),
            P::Void => "unknown".into(),
        },
        DataType::Array(a) => format!("{}[]", delta_type_pg_name(&a.element_type)),
        DataType::Map(_) => "jsonb".into(),
        DataType::Struct(_) => "record".into(),
    }
}

/// The PostgreSQL name of an Arrow type (what `pg_typeof` shows).
pub fn arrow_type_pg_name(data_type: &arrow::datatypes::DataType) -> String {
    use arrow::datatypes::DataType as A;
    match data_type {
        A::Null => "unknown".into(),
        A::Boolean => "boolean".into(),
        A::Int8 | A::Int16 | A::UInt8 => "smallint".into(),
        A::Int32 | A::UInt16 => "integer".into(),
        A::Int64 | A::UInt32 | A::UInt64 => "bigint".into(),
        A::Float16 | A::Float32 => "real".into(),
        A::Float64 => "double precision".into(),
        A::Decimal32(..) | A::Decimal64(..) | A::Decimal128(..) | A::Decimal256(..) => "numeric".into(),
        A::Utf8 | A::LargeUtf8 | A::Utf8View => "text".into(),
        A::Binary | A::LargeBinary | A::BinaryView | A::FixedSizeBinary(_) => "bytea".into(),
        A::Date32 | A::Date64 => "date".into(),
        A::Timestamp(_, None) => "timestamp without time zone".into(),
        A::Timestamp(_, Some(_)) => "timestamp with time zone".into(),
        A::Time32(_) | A::Time64(_) => "time without time zone".into(),
        A::Interval(_) | A::Duration(_) => "interval".into(),
        A::List(f) | A::LargeList(f) | A::FixedSizeList(f, _) | A::ListView(f) | A::LargeListView(f) => {
            format!("{}[]", arrow_type_pg_name(f.data_type()))
        }
        A::Dictionary(_, value) => arrow_type_pg_name(value),
        A::Map(..) => "jsonb".into(),
        _ => "record".into(),
    }
}

/// A batch of `schema` from columns, cast where a column's type differs from the field's.
pub fn batch_of(schema: &SchemaRef, columns: Vec<ArrayRef>, rows: usize) -> Result<RecordBatch> {
    let columns = columns
        .into_iter()
        .zip(schema.fields())
        .map(|(c, f)| if c.data_type() == f.data_type() { Ok(c) } else { cast(&c, f.data_type()) })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )?)
}

/// A decimal column's values as PostgreSQL's text: every digit to the scale, without trailing
/// fractional zeros for an unconstrained numeric ([`NUMERIC_DEFAULT`], which the sums and
/// differences of one, and its products with integers, keep): `1.5`, `3`, not `1.5000000000`.
/// Quotients and means have PostgreSQL's scale of 16 or more and products of two numerics the
/// sum of their scales: those print every digit. A column declared `numeric(38, 10)` prints as
/// an unconstrained one (Sluice cannot tell them apart).
pub fn decimal_column_text(column: &ArrayRef) -> std::result::Result<ArrayRef, ArrowError> {
    let text = cast(column, &arrow::datatypes::DataType::Utf8)?;
    if !matches!(column.data_type(), arrow::datatypes::DataType::Decimal128(p, s) if (*p, *s) == NUMERIC_DEFAULT) {
        return Ok(text);
    }
    let trimmed: arrow::array::StringArray =
        text.as_string::<i32>().iter().map(|v| v.map(without_fraction_zeros)).collect();
    Ok(std::sync::Arc::new(trimmed))
}

/// A decimal's text without trailing fractional zeros: `1.5000` as `1.5`, `3.000` as `3`,
/// `-0.000` as `0`.
pub fn without_fraction_zeros(text: &str) -> String {
    if !text.contains('.') {
        return text.to_string();
    }
    let trimmed = text.trim_end_matches('0').trim_end_matches('.');
    if trimmed == "-0" {
        "0".to_string()
    } else {
        trimmed.to_string()
    }
}

/// Arrays (lists, of any depth) as PostgreSQL prints them: `{{a,b},{c,NULL}}`, an element quoted when it is empty, `NULL` or has a brace,
/// comma, quote, backslash or blank (with `\` before a quote or backslash in it).
pub fn array_column_text(column: &ArrayRef) -> std::result::Result<ArrayRef, ArrowError> {
    let mut out = arrow::array::StringBuilder::with_capacity(column.len(), column.len() * 16);
    let leaves = leaf_text(column)?;
    for row in 0..column.len() {
        if column.is_null(row) {
            out.append_null();
            continue;
        }
        let mut text = String::new();
        write_array_text(column.as_ref(), row, &leaves, &mut text)?;
        out.append_value(text);
    }
    Ok(std::sync::Arc::new(out.finish()))
}

/// The innermost values of nested lists as text (booleans as `t`/`f`, as PostgreSQL prints
/// them), indexed as the innermost array's rows.
fn leaf_text(column: &ArrayRef) -> std::result::Result<arrow::array::StringArray, ArrowError> {
    let mut leaf = column.clone();
    while let Some(list) = leaf.as_list_opt::<i32>() {
        leaf = list.values().clone();
    }
    if let Some(flags) = leaf.as_boolean_opt() {
        return Ok(flags.iter().map(|v| v.map(|b| if b { "t" } else { "f" })).collect());
    }
    use arrow::datatypes::DataType as A;
    let timestamps = matches!(leaf.data_type(), A::Timestamp(..));
    let text = match leaf.data_type() {
        A::Decimal128(..) | A::Decimal256(..) => return Ok(decimal_column_text(&leaf)?.as_string::<i32>().clone()),
        // `2` for 2.0, as PostgreSQL prints a float.
        A::Float16 | A::Float32 | A::Float64 => {
            let text = cast(&leaf, &A::Utf8)?;
            return Ok(text
                .as_string::<i32>()
                .iter()
                .map(|v| v.map(|t| t.strip_suffix(".0").unwrap_or(t).to_string()))
                .collect());
        }
        _ => cast(&leaf, &A::Utf8)?,
    };
    let text = text.as_string::<i32>();
    if timestamps {
        // `2024-01-01 10:00:00`, as PostgreSQL (Arrow's text has a `T`).
        return Ok(text.iter().map(|v| v.map(|t| t.replacen('T', " ", 1))).collect());
    }
    Ok(text.clone())
}

fn write_array_text(
    array: &dyn arrow::array::Array,
    row: usize,
    leaves: &arrow::array::StringArray,
    out: &mut String,
) -> std::result::Result<(), ArrowError> {
    match array.as_list_opt::<i32>() {
        Some(list) => {
            let offsets = list.value_offsets();
            let (Some(start), Some(end)) = (offsets.get(row), offsets.get(row + 1)) else {
                return Err(ArrowError::InvalidArgumentError(format!("no list row {row}")));
            };
            out.push('{');
            for (n, inner) in (*start as usize..*end as usize).enumerate() {
                if n > 0 {
                    out.push(',');
                }
                if list.values().is_null(inner) {
                    out.push_str("NULL");
                } else {
                    write_array_text(list.values().as_ref(), inner, leaves, out)?;
                }
            }
            out.push('}');
        }
        None => {
            let value = if leaves.is_null(row) { None } else { Some(leaves.value(row)) };
            match value {
                None => out.push_str("NULL"),
                Some(v) => {
                    let quoted = v.is_empty()
                        || v.eq_ignore_ascii_case("null")
                        || v.chars().any(|c| matches!(c, '{' | '}' | ',' | '"' | '\\') || c.is_whitespace());
                    if quoted {
                        out.push('"');
                        for c in v.chars() {
                            if c == '"' || c == '\\' {
                                out.push('\\');
                            }
                            out.push(c);
                        }
                        out.push('"');
                    } else {
                        out.push_str(v);
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn parse(text: &str) -> ast::DataType {
        Parser::new(&PostgreSqlDialect {}).try_with_sql(text).unwrap().parse_data_type().unwrap()
    }

    #[test]
    fn maps_postgres_names() {
        let cases = [
            ("int", "integer"),
            ("bigint", "bigint"),
            ("text", "text"),
            ("varchar(20)", "varchar(20)"),
            ("numeric(10,2)", "numeric(10,2)"),
            ("numeric", "numeric"),
            ("timestamptz", "timestamp with time zone"),
            ("timestamp", "timestamp without time zone"),
            ("double precision", "double precision"),
            ("jsonb", "jsonb"),
            ("bytea", "bytea"),
            ("int[]", "integer[]"),
            ("bool", "boolean"),
            ("time", "time"),
            ("time(3) without time zone", "time(3)"),
            ("time with time zone", "timetz"),
            ("timetz(9)", "timetz(6)"),
            ("interval", "interval"),
        ];
        for (sql, shown) in cases {
            let field = column("c", declared_type(&parse(sql)).unwrap(), true);
            assert_eq!(pg_type_name(&field), shown, "{sql}");
        }
        assert!(declared_type(&parse("numeric(50,2)")).is_err());
        assert!(declared_type(&parse("point")).is_err());
    }
}

/// Postgres' text input of bytea: `\x` then hex digits, or the escape format (`\\` for a
/// backslash, `\nnn` octal, other characters as their bytes).
pub fn bytea_from_text(text: &str) -> std::result::Result<Vec<u8>, String> {
    if let Some(hex) = text.strip_prefix("\\x") {
        let digits: Vec<u8> = hex.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        if !digits.len().is_multiple_of(2) {
            return Err(format!("invalid hexadecimal data: odd number of digits in \"{text}\""));
        }
        return digits
            .chunks(2)
            .map(|pair| {
                let pair = std::str::from_utf8(pair).map_err(|e| e.to_string())?;
                u8::from_str_radix(pair, 16).map_err(|_| format!("invalid hexadecimal digit in \"{text}\""))
            })
            .collect();
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&byte) = bytes.get(i) {
        if byte != b'\\' {
            out.push(byte);
            i += 1;
        } else if bytes.get(i + 1) == Some(&b'\\') {
            out.push(b'\\');
            i += 2;
        } else {
            let octal = bytes.get(i + 1..i + 4).and_then(|d| std::str::from_utf8(d).ok());
            let value = octal.and_then(|d| u8::from_str_radix(d, 8).ok());
            let Some(value) = value else { return Err(format!("invalid input syntax for type bytea: \"{text}\"")) };
            out.push(value);
            i += 4;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod bytea_tests {
    #[test]
    fn bytea_text_formats() {
        assert_eq!(super::bytea_from_text("\\x0102ff").unwrap(), vec![1, 2, 255]);
        assert_eq!(super::bytea_from_text("a\\\\b\\001").unwrap(), b"a\\b\x01".to_vec());
        assert!(super::bytea_from_text("\\x0").is_err());
        assert!(super::bytea_from_text("\\9").is_err());
    }
}

/// An array in PostgreSQL's text form: its elements, or its sub-arrays (`{{1,2},{3,4}}`).
#[derive(Debug, Clone, PartialEq)]
pub enum ArrayText {
    Elements(Vec<Option<String>>),
    Arrays(Vec<ArrayText>),
}

impl ArrayText {
    /// How many dimensions it has (`{}` has one).
    pub fn dimensions(&self) -> usize {
        match self {
            ArrayText::Elements(_) => 1,
            ArrayText::Arrays(arrays) => 1 + arrays.first().map_or(0, ArrayText::dimensions),
        }
    }
}

/// The elements of a one-dimensional array in PostgreSQL's text form (`{a,"b c",NULL}`): quoted
/// elements with backslash escapes, unquoted ones trimmed, unquoted `NULL` as NULL. 22P02 for text
/// that is not an array; 0A000 for one of more dimensions (which PostgreSQL would take).
pub fn array_from_text(text: &str) -> Result<Vec<Option<String>>> {
    match array_text(text)? {
        ArrayText::Elements(items) => Ok(items),
        ArrayText::Arrays(_) => Err(Error::NotSupported(format!(
            "the multidimensional array \"{text}\" where Sluice takes a one-dimensional one"
        ))),
    }
}

/// An array of any number of dimensions in PostgreSQL's text form (see [`array_from_text`]);
/// 22P02 also for sub-arrays of different lengths or depths, as PostgreSQL reports them.
pub fn array_text(text: &str) -> Result<ArrayText> {
    let malformed = |why: &str| Error::data("22P02", format!("malformed array literal: \"{text}\"{why}"));
    let mut chars = text.trim().chars().peekable();
    if chars.next() != Some('{') {
        return Err(malformed(""));
    }
    let array = read_array(&mut chars, &malformed, 1)?;
    if chars.next().is_some() {
        return Err(malformed(""));
    }
    Ok(array)
}

/// The most dimensions PostgreSQL's arrays have (`MAXDIM`).
const ARRAY_DIMENSIONS_MAX: usize = 6;

/// Reads an array's contents after its `{`, through its `}`.
fn read_array(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    malformed: &dyn Fn(&str) -> Error,
    depth: usize,
) -> Result<ArrayText> {
    if depth > ARRAY_DIMENSIONS_MAX {
        return Err(Error::data(
            "54000",
            format!("number of array dimensions exceeds the maximum allowed ({ARRAY_DIMENSIONS_MAX})"),
        ));
    }
    let skip_spaces = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>| {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
    };
    skip_spaces(chars);
    if chars.peek() == Some(&'}') {
        chars.next();
        return Ok(ArrayText::Elements(Vec::new()));
    }
    let mut items = Vec::new();
    let mut arrays = Vec::new();
    loop {
        skip_spaces(chars);
        match chars.peek() {
            Some('{') => {
                chars.next();
                if !items.is_empty() {
                    return Err(malformed(""));
                }
                arrays.push(read_array(chars, malformed, depth + 1)?);
                skip_spaces(chars);
            }
            _ if !arrays.is_empty() => return Err(malformed("")),
            Some('"') => {
                chars.next();
                let mut item = String::new();
                loop {
                    match chars.next() {
                        Some('\\') => item.push(chars.next().ok_or_else(|| malformed(""))?),
                        Some('"') => break,
                        Some(c) => item.push(c),
                        None => return Err(malformed("")),
                    }
                }
                skip_spaces(chars);
                items.push(Some(item));
            }
            _ => {
                let mut item = String::new();
                while let Some(&c) = chars.peek() {
                    if c == ',' || c == '}' {
                        break;
                    }
                    chars.next();
                    match c {
                        '\\' => item.push(chars.next().ok_or_else(|| malformed(""))?),
                        '"' | '{' => return Err(malformed("")),
                        c => item.push(c),
                    }
                }
                let item = item.trim_end();
                if item.is_empty() {
                    return Err(malformed(""));
                }
                items.push(if item.eq_ignore_ascii_case("null") { None } else { Some(item.to_string()) });
            }
        }
        match chars.next() {
            Some(',') => continue,
            Some('}') => break,
            _ => return Err(malformed("")),
        }
    }
    if arrays.is_empty() {
        return Ok(ArrayText::Elements(items));
    }
    let shape = |a: &ArrayText| match a {
        ArrayText::Elements(items) => (1, items.len()),
        ArrayText::Arrays(arrays) => (a.dimensions(), arrays.len()),
    };
    let first = arrays.first().map(shape);
    if arrays.iter().any(|a| Some(shape(a)) != first) {
        return Err(malformed(" (multidimensional arrays must have sub-arrays with matching dimensions)"));
    }
    Ok(ArrayText::Arrays(arrays))
}

/// A text column of PostgreSQL array literals as a list column of `data_type` (a list, or a list
/// of lists for a two-dimensional array, ...); 0A000 for text of other dimensions (a PostgreSQL
/// array column takes any, a Sluice one those it was declared with).
pub fn array_column_from_text(
    column: &arrow::array::ArrayRef,
    data_type: &arrow::datatypes::DataType,
) -> Result<arrow::array::ArrayRef> {
    use arrow::array::AsArray;
    let text = arrow::compute::cast(column, &arrow::datatypes::DataType::Utf8)?;
    let text = text.as_string::<i32>();
    let mut dimensions = 0;
    let mut element = data_type;
    while let arrow::datatypes::DataType::List(field) | arrow::datatypes::DataType::LargeList(field) = element {
        dimensions += 1;
        element = field.data_type();
    }
    let arrays: Vec<Option<ArrayText>> = text
        .iter()
        .map(|value| {
            let Some(value) = value else { return Ok(None) };
            let array = array_text(value)?;
            let empty = matches!(&array, ArrayText::Elements(items) if items.is_empty());
            if !empty && array.dimensions() != dimensions {
                return Err(Error::NotSupported(format!(
                    "an array of {} dimensions (\"{value}\") in an array column of {dimensions} (Sluice's array \
                     columns keep the dimensions they were declared with)",
                    array.dimensions()
                )));
            }
            Ok(Some(array))
        })
        .collect::<Result<_>>()?;
    let strings = nested_strings(arrays.iter().map(Option::as_ref).collect(), dimensions)?;
    arrow::compute::cast_with_options(
        &strings,
        data_type,
        &arrow::compute::CastOptions { safe: false, ..Default::default() },
    )
    .map_err(|e| Error::data("22P02", format!("invalid array element: {e}")))
}

/// `arrays` as a column of `dimensions` nested lists of text.
fn nested_strings(arrays: Vec<Option<&ArrayText>>, dimensions: usize) -> Result<arrow::array::ArrayRef> {
    use arrow::array::{ListArray, StringArray};
    use arrow::buffer::{NullBuffer, OffsetBuffer};
    let mut lengths = Vec::with_capacity(arrays.len());
    let mut valid = Vec::with_capacity(arrays.len());
    let mut children: Vec<Option<&ArrayText>> = Vec::new();
    let mut elements: Vec<Option<&str>> = Vec::new();
    for array in &arrays {
        valid.push(array.is_some());
        match array {
            None => lengths.push(0),
            Some(ArrayText::Elements(items)) => {
                lengths.push(items.len());
                elements.extend(items.iter().map(Option::as_deref));
            }
            Some(ArrayText::Arrays(nested)) => {
                lengths.push(nested.len());
                children.extend(nested.iter().map(Some));
            }
        }
    }
    let values: arrow::array::ArrayRef = if dimensions > 1 {
        nested_strings(children, dimensions - 1)?
    } else {
        std::sync::Arc::new(StringArray::from(elements))
    };
    let field = std::sync::Arc::new(arrow::datatypes::Field::new_list_field(values.data_type().clone(), true));
    Ok(std::sync::Arc::new(ListArray::try_new(
        field,
        OffsetBuffer::from_lengths(lengths),
        values,
        Some(NullBuffer::from(valid)),
    )?))
}

#[cfg(test)]
mod array_tests {
    #[test]
    fn array_text_reads_as_postgresql_reads_it() {
        let read = |t: &str| super::array_from_text(t).unwrap();
        assert_eq!(read("{a,b}"), vec![Some("a".to_string()), Some("b".to_string())]);
        assert_eq!(
            read("{ a b , \"c,d\" , NULL,\"NULL\"}"),
            vec![Some("a b".to_string()), Some("c,d".to_string()), None, Some("NULL".to_string())]
        );
        assert_eq!(read("{}"), Vec::<Option<String>>::new());
        assert_eq!(read("{\"a\\\"b\"}"), vec![Some("a\"b".to_string())]);
        assert_eq!(super::array_from_text("a,b").unwrap_err().sqlstate(), "22P02");
        assert_eq!(super::array_from_text("{a,}").unwrap_err().sqlstate(), "22P02");
        assert_eq!(super::array_from_text("{{1},{2}}").unwrap_err().sqlstate(), "0A000");
        use super::ArrayText::{Arrays, Elements};
        let items = |v: &[&str]| Elements(v.iter().map(|s| Some(s.to_string())).collect());
        assert_eq!(super::array_text("{{1,2},{3,4}}").unwrap(), Arrays(vec![items(&["1", "2"]), items(&["3", "4"])]));
        assert_eq!(super::array_text(" { { a } } ").unwrap().dimensions(), 2);
        assert_eq!(super::array_text("{{1,2},{3}}").unwrap_err().sqlstate(), "22P02");
        assert_eq!(super::array_text("{{1},2}").unwrap_err().sqlstate(), "22P02");
        assert_eq!(super::array_text("{1,{2}}").unwrap_err().sqlstate(), "22P02");
        assert_eq!(super::array_text("{{{{{{{1}}}}}}}").unwrap_err().sqlstate(), "54000");
        assert_eq!(super::array_text("{a}b").unwrap_err().sqlstate(), "22P02");
    }
}

/// A column's values as the column's declared type stores them: `uuid`, `json` and `jsonb` read
/// (22P02 for text that is not one) and normalized, `varchar(n)`/`char(n)` lengths enforced,
/// `timetz` read (without an offset: `zone`'s, the session's) and `time(p)`/`timetz(p)` rounded.
pub fn conform(field: &StructField, column: &arrow::array::ArrayRef, zone: &str) -> Result<arrow::array::ArrayRef> {
    if let Some(Value::String(declared)) = field.metadata.get(DECLARED_TYPE_KEY) {
        if let Some(text_type) = crate::documents::TextType::from_name(declared) {
            return text_type.input_column(column);
        }
        let precision = crate::time_of_day::precision_of(declared);
        if crate::time_of_day::is_timetz(declared) {
            return crate::time_of_day::timetz_column(column, zone, precision);
        }
        if let (true, Some(precision)) = (field.is_time_of_day(), precision) {
            return crate::time_of_day::round_column(column, precision);
        }
    }
    enforce_length(field, column)
}

/// The length limit of a `varchar(n)` or `char(n)` column: `(n, is_char)`.
pub fn length_limit(field: &StructField) -> Option<(usize, bool)> {
    let Some(Value::String(declared)) = field.metadata.get(DECLARED_TYPE_KEY) else { return None };
    let (inner, is_char) = if let Some(rest) = declared.strip_prefix("varchar(") {
        (rest, false)
    } else {
        (declared.strip_prefix("char(")?, true)
    };
    Some((inner.strip_suffix(')')?.parse().ok()?, is_char))
}

/// Values of a `varchar(n)` or `char(n)` column as PostgreSQL stores them: longer ones fail with
/// 22001 unless what is past `n` is spaces (then cut); `char(n)` values are kept without their
/// trailing spaces (PostgreSQL pads them on output, Sluice does not).
pub fn enforce_length(field: &StructField, column: &arrow::array::ArrayRef) -> Result<arrow::array::ArrayRef> {
    use arrow::array::{Array, AsArray, StringArray};
    let Some((limit, is_char)) = length_limit(field) else { return Ok(column.clone()) };
    let Some(strings) = column.as_string_opt::<i32>() else { return Ok(column.clone()) };
    let mut changed = false;
    let mut out: Vec<Option<String>> = Vec::with_capacity(strings.len());
    for value in strings.iter() {
        let Some(value) = value else {
            out.push(None);
            continue;
        };
        let length = value.chars().count();
        if length > limit {
            let cut: String = value.chars().take(limit).collect();
            if !value[cut.len()..].chars().all(|c| c == ' ') {
                let kind = if is_char { "character" } else { "character varying" };
                return Err(Error::data("22001", format!("value too long for type {kind}({limit})")));
            }
            changed = true;
            out.push(Some(if is_char { cut.trim_end_matches(' ').to_string() } else { cut }));
        } else if is_char && value.ends_with(' ') {
            // PostgreSQL ignores a char(n)'s trailing spaces in comparisons and length(); kept
            // without them, the value compares and measures the same here.
            changed = true;
            out.push(Some(value.trim_end_matches(' ').to_string()));
        } else {
            out.push(Some(value.to_string()));
        }
    }
    if !changed {
        return Ok(column.clone());
    }
    Ok(std::sync::Arc::new(StringArray::from(out)))
}
