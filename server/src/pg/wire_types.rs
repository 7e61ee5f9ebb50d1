//! PostgreSQL types that Sluice stores as other Arrow types, and their wire forms.
//!
//! `uuid`, `json`, `jsonb`, `varchar(n)`, `char(n)` and `timetz` are Arrow strings whose field
//! metadata (`sluice.type`) names the PostgreSQL type, for table columns and for expressions alike
//! (see `sluice::documents` and `sluice::time_of_day`); a `time(p)` column is a `Time64` whose
//! metadata keeps the precision. Here that name becomes the type OID and type modifier in
//! RowDescription, the binary forms clients ask for (`uuid`: 16 bytes; `jsonb`: a version byte
//! then the text; `timetz`: microseconds and the offset west of UTC), and parameters declared with
//! those types are read from their text or binary forms.
//!
//! Bind parameters are read here too where arrow-pg (which reads the others) reads them unlike
//! PostgreSQL: integers and integer arrays in text (spaces, `+`, 22003 out of range), text
//! arrays in text (`""` and `"NULL"` are strings), numerics wider than their column (22003).

use std::num::IntErrorKind;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BinaryBuilder, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::error::ArrowError;
use datafusion::common::config::ConfigOptions;
use datafusion::common::ScalarValue;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::results::FieldInfo;
use pgwire::api::stmt::StoredStatement;
use pgwire::api::Type;
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use sluice::documents::{self, TextType};
use sluice::time_of_day;
use sluice::types::DECLARED_TYPE_KEY;

/// The PostgreSQL type (and type modifier) a field's declared type names, when it is not the one
/// its Arrow type maps to.
pub fn declared_pg_type(field: &Field) -> Option<(Type, i32)> {
    if let Some(enum_type) = super::enums::wire_type(field) {
        return Some((enum_type, -1));
    }
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
        "time" => (Type::TIME, -1),
        "timetz" => (Type::TIMETZ, -1),
        "interval" => (Type::INTERVAL, -1),
        // pg_typeof's values: type names.
        "regtype" => (Type::REGTYPE, -1),
        // A driver's type look-up's columns (see enums.rs).
        super::enums::OID_TYPE => (Type::OID, -1),
        super::enums::CHAR_TYPE => (Type::CHAR, -1),
        _ => {
            if let Some(n) = length("varchar(") {
                (Type::VARCHAR, n + 4)
            } else if let Some(n) = length("char(") {
                (Type::BPCHAR, n + 4)
            } else if let Some(p) = length("timetz(") {
                // A time's modifier is its precision.
                (Type::TIMETZ, p)
            } else if let Some(p) = length("time(") {
                (Type::TIME, p)
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
        Type::TIME => Type::TIME_ARRAY,
        Type::TIMETZ => Type::TIMETZ_ARRAY,
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

/// A text-stored type whose binary form is not its text.
#[derive(Clone, Copy)]
enum BinaryForm {
    Uuid,
    Jsonb,
    TimeTz,
    /// A `regtype` (pg_typeof's values): the type's OID (an enum type's, known from the column).
    RegType(Option<u32>),
}

impl BinaryForm {
    fn of_field(field: &Field) -> Option<Self> {
        match TextType::of_field(field) {
            Some(TextType::Uuid) => Some(Self::Uuid),
            Some(TextType::Jsonb) => Some(Self::Jsonb),
            _ if time_of_day::is_timetz_field(field) => Some(Self::TimeTz),
            _ if field.metadata().get(DECLARED_TYPE_KEY).is_some_and(|d| d == "regtype") => {
                let oid = field.metadata().get(sluice::functions::math::REGTYPE_OID_KEY).and_then(|o| o.parse().ok());
                Some(Self::RegType(oid))
            }
            _ => None,
        }
    }

    fn bytes(self, text: &str) -> sluice::Result<Vec<u8>> {
        Ok(match self {
            Self::Uuid => documents::uuid_bytes(text)?.to_vec(),
            Self::Jsonb => {
                let mut bytes = Vec::with_capacity(text.len() + 1);
                bytes.push(1);
                bytes.extend_from_slice(text.as_bytes());
                bytes
            }
            Self::TimeTz => time_of_day::TimeTz::input(text, "UTC")?.binary().to_vec(),
            Self::RegType(oid) => {
                let oid = oid.or_else(|| super::catalog::type_oid(text).and_then(|o| u32::try_from(o).ok()));
                oid.unwrap_or(0).to_be_bytes().to_vec()
            }
        })
    }
}

/// `batch` with its binary-format `uuid`, `jsonb` and `timetz` columns in their binary forms.
pub fn binary_forms(batch: RecordBatch, format: &Format) -> Result<RecordBatch, ArrowError> {
    let schema = batch.schema();
    let mut columns: Option<Vec<ArrayRef>> = None;
    for (i, field) in schema.fields().iter().enumerate() {
        if super::text::is_text(format, i) {
            continue;
        }
        let Some(form) = BinaryForm::of_field(field) else { continue };
        let Some(column) = batch.columns().get(i) else { continue };
        let text = arrow::compute::cast(column, &DataType::Utf8)?;
        let text = text.as_string::<i32>();
        let mut builder = BinaryBuilder::with_capacity(text.len(), text.len() * 16);
        for value in text.iter() {
            match value {
                None => builder.append_null(),
                Some(v) => builder.append_value(form.bytes(v).map_err(|e| ArrowError::CastError(e.to_string()))?),
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

/// Who reads a parameter: arrow-pg, or this module where arrow-pg cannot read the type or reads
/// it unlike PostgreSQL.
#[derive(Debug, Clone, PartialEq)]
enum Reader {
    ArrowPg,
    /// A `date`, `timestamp` or `timestamptz` in text, of the target's type: read as PostgreSQL
    /// reads it under the session's `DateStyle` and `TimeZone` (`06/01/2024` is January 6 with
    /// DMY); arrow-pg reads only ISO.
    DateTime(DataType),
    /// `uuid`, `json`, `jsonb` and arrays of them, text or binary: text values in stored form.
    Document(Type),
    /// `timetz`, text or binary: its stored text (a text without an offset is read in UTC).
    TimeTz,
    /// `time` in text, as PostgreSQL reads it (`1:05 pm`, an offset ignored); arrow-pg reads only
    /// `HH:MM:SS[.f]`.
    Time,
    /// An integer in text, of the parameter's type, as a value of the target type (the inferred
    /// one). PostgreSQL allows spaces around it and a `+`, and tells a number out of range
    /// (22003) from text that is not one (22P02); arrow-pg says 22P02 for both.
    Integer {
        declared: IntegerType,
        target: IntegerType,
    },
    /// An array of integers in text, each element read as [`Reader::Integer`] reads one.
    IntegerArray(IntegerType),
    /// `text[]` or `varchar[]` in text: pgwire reads the elements `""` and `"NULL"` as NULL.
    TextArray,
    /// A numeric in text for a `Decimal128(precision, scale)` target: arrow-pg's decimals hold
    /// 28 digits, and one that does not fit the target's scale keeps a smaller scale, read as the
    /// target's (100000000000000000000 became 1000000000000000000).
    Numeric {
        precision: u8,
        scale: i8,
    },
}

/// The integer types, with PostgreSQL's names and ranges.
#[derive(Debug, Clone, Copy, PartialEq)]
enum IntegerType {
    Smallint,
    Integer,
    Bigint,
}

impl IntegerType {
    fn of_pg(pg: &Type) -> Option<Self> {
        Some(match *pg {
            Type::INT2 => Self::Smallint,
            Type::INT4 => Self::Integer,
            Type::INT8 => Self::Bigint,
            _ => return None,
        })
    }

    fn of_pg_array(pg: &Type) -> Option<Self> {
        Some(match *pg {
            Type::INT2_ARRAY => Self::Smallint,
            Type::INT4_ARRAY => Self::Integer,
            Type::INT8_ARRAY => Self::Bigint,
            _ => return None,
        })
    }

    fn of_arrow(data_type: &DataType) -> Option<Self> {
        Some(match data_type {
            DataType::Int16 => Self::Smallint,
            DataType::Int32 => Self::Integer,
            DataType::Int64 => Self::Bigint,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Self::Smallint => "smallint",
            Self::Integer => "integer",
            Self::Bigint => "bigint",
        }
    }

    fn arrow(self) -> DataType {
        match self {
            Self::Smallint => DataType::Int16,
            Self::Integer => DataType::Int32,
            Self::Bigint => DataType::Int64,
        }
    }

    /// `value` as a scalar of this type, or 22003 (`text` is what the client sent).
    fn scalar(self, value: Option<i64>, text: &str) -> sluice::Result<ScalarValue> {
        let out_of_range = || self.out_of_range(text);
        Ok(match self {
            Self::Smallint => ScalarValue::Int16(value.map(i16::try_from).transpose().map_err(|_| out_of_range())?),
            Self::Integer => ScalarValue::Int32(value.map(i32::try_from).transpose().map_err(|_| out_of_range())?),
            Self::Bigint => ScalarValue::Int64(value),
        })
    }

    fn out_of_range(self, text: &str) -> sluice::Error {
        sluice::Error::data("22003", format!("value \"{text}\" is out of range for type {}", self.name()))
    }

    /// An integer's text as PostgreSQL 15 reads it (`int2in`, `int4in`, `int8in`): spaces around
    /// it, an optional sign, decimal digits.
    fn input(self, text: &str) -> sluice::Result<i64> {
        let digits = text.trim_matches(is_pg_space);
        let value = match digits.parse::<i64>() {
            Ok(value) => value,
            Err(e) if matches!(e.kind(), IntErrorKind::PosOverflow | IntErrorKind::NegOverflow) => {
                return Err(self.out_of_range(text))
            }
            Err(_) => {
                let message = format!("invalid input syntax for type {}: \"{text}\"", self.name());
                return Err(sluice::Error::data("22P02", message));
            }
        };
        self.scalar(Some(value), text)?;
        Ok(value)
    }
}

/// The spaces PostgreSQL's number input skips around a number (C's `isspace`).
fn is_pg_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c')
}

/// A numeric's text as PostgreSQL reads it (`numeric_in`: spaces around it, a sign, digits with
/// a point, an exponent), rounded half away from zero to `scale` digits after the point: the
/// mantissa of a `Decimal128(_, scale)`, saturated at `i128::MAX` in size (too wide for any
/// precision, which [`check_numeric_precision`] then reports). 22P02 for text that is not a number.
fn numeric_input(text: &str, scale: i8) -> sluice::Result<i128> {
    let invalid = || sluice::Error::data("22P02", format!("invalid input syntax for type numeric: \"{text}\""));
    let trimmed = text.trim_matches(is_pg_space);
    let lower = trimmed.to_ascii_lowercase();
    if ["nan", "infinity", "+infinity", "-infinity", "inf", "+inf", "-inf"].contains(&lower.as_str()) {
        return Err(sluice::Error::NotSupported(format!("numeric {trimmed} (Sluice stores numerics as decimals)")));
    }
    let (negative, unsigned) = match trimmed.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, trimmed.strip_prefix('+').unwrap_or(trimmed)),
    };
    let (number, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((number, exponent)) => (number, exponent.parse::<i32>().map_err(|_| invalid())?),
        None => (unsigned, 0),
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let all_digits = whole.bytes().chain(fraction.bytes()).all(|b| b.is_ascii_digit());
    if !all_digits || (whole.is_empty() && fraction.is_empty()) {
        return Err(invalid());
    }
    let digits: String = whole.chars().chain(fraction.chars()).collect();
    let digits = digits.trim_start_matches('0');
    // The value times 10^scale is `digits` times 10^shift.
    let fraction_digits = i64::try_from(fraction.len()).map_err(|_| invalid())?;
    let shift = i64::from(exponent) - fraction_digits + i64::from(scale);
    let saturated = |d: &str| if d.is_empty() { 0 } else { d.parse::<i128>().unwrap_or(i128::MAX) };
    let magnitude = match u32::try_from(shift) {
        Ok(_) if digits.is_empty() => 0,
        Ok(shift) => 10i128.checked_pow(shift).and_then(|p| saturated(digits).checked_mul(p)).unwrap_or(i128::MAX),
        Err(_) => {
            let dropped = usize::try_from(shift.unsigned_abs()).unwrap_or(usize::MAX);
            let (kept, rest) = digits.split_at(digits.len().saturating_sub(dropped));
            // Past all the digits, the first dropped digit is a leading zero.
            let round_up = dropped <= digits.len() && rest.starts_with(['5', '6', '7', '8', '9']);
            saturated(kept).saturating_add(i128::from(round_up))
        }
    };
    Ok(if negative { -magnitude } else { magnitude })
}

/// The type a parameter arrives in, as arrow-pg decides it: the client's, else the inferred one's.
fn arrival_type(client: Option<&Type>, inferred: Option<&DataType>) -> Option<Type> {
    client.cloned().or_else(|| inferred.and_then(|t| arrow_pg::datatypes::into_pg_type(t).ok()))
}

fn reader(pg: &Type, binary: bool, inferred: Option<&DataType>) -> Reader {
    if matches!(*pg, Type::UUID | Type::JSON | Type::JSONB | Type::UUID_ARRAY | Type::JSON_ARRAY | Type::JSONB_ARRAY) {
        return Reader::Document(pg.clone());
    }
    if *pg == Type::TIMETZ {
        return Reader::TimeTz;
    }
    if *pg == Type::TIME && !binary {
        return Reader::Time;
    }
    if binary {
        return Reader::ArrowPg;
    }
    if matches!(*pg, Type::DATE | Type::TIMESTAMP | Type::TIMESTAMPTZ) {
        if let Some(target @ (DataType::Date32 | DataType::Timestamp(..))) = inferred {
            return Reader::DateTime(target.clone());
        }
    }
    if let Some(declared) = IntegerType::of_pg(pg) {
        // A target that is not an integer type (an int4 parameter for a float column) is
        // arrow-pg's to coerce.
        return match inferred.map(IntegerType::of_arrow) {
            None => Reader::Integer { declared, target: declared },
            Some(Some(target)) => Reader::Integer { declared, target },
            Some(None) => Reader::ArrowPg,
        };
    }
    if let Some(element) = IntegerType::of_pg_array(pg) {
        return Reader::IntegerArray(element);
    }
    if let (&Type::NUMERIC, Some(&DataType::Decimal128(precision, scale))) = (pg, inferred) {
        return Reader::Numeric { precision, scale };
    }
    if matches!(*pg, Type::TEXT_ARRAY | Type::VARCHAR_ARRAY) {
        return Reader::TextArray;
    }
    Reader::ArrowPg
}

impl Reader {
    /// A parameter's value from its bytes (None: NULL).
    fn read(&self, bytes: Option<&[u8]>, binary: bool, session: &ConfigOptions) -> sluice::Result<ScalarValue> {
        let list = |items: &[ScalarValue], element: &DataType| {
            ScalarValue::List(ScalarValue::new_list_nullable(items, element))
        };
        let Some(bytes) = bytes else {
            return Ok(match self {
                Reader::Integer { target, .. } => target.scalar(None, "")?,
                Reader::IntegerArray(element) => ScalarValue::new_null_list(element.arrow(), true, 1),
                Reader::Numeric { precision, scale } => ScalarValue::Decimal128(None, *precision, *scale),
                Reader::Document(pg) if !is_document_array(pg) => ScalarValue::Utf8(None),
                Reader::TimeTz => ScalarValue::Utf8(None),
                Reader::Time => ScalarValue::Time64Microsecond(None),
                Reader::DateTime(target) => ScalarValue::try_from(target)?,
                _ => ScalarValue::new_null_list(DataType::Utf8, true, 1),
            });
        };
        if let Reader::Document(pg) = self {
            return document(pg, bytes, binary);
        }
        if *self == Reader::TimeTz {
            let value = if binary {
                time_of_day::TimeTz::from_binary(bytes)?
            } else {
                time_of_day::TimeTz::input(std::str::from_utf8(bytes).map_err(|_| invalid_bytes())?, "UTC")?
            };
            return Ok(ScalarValue::Utf8(Some(value.text())));
        }
        if let Reader::DateTime(target) = self {
            let text: ArrayRef = Arc::new(arrow::array::StringArray::from(vec![
                std::str::from_utf8(bytes).map_err(|_| invalid_bytes())?
            ]));
            let order = sluice::datetime::DateOrder::of_config(session);
            let zone = session.execution.time_zone.as_deref().unwrap_or("UTC");
            let value = sluice::datetime::column_from_session_text(&text, target, order, zone)?;
            return Ok(ScalarValue::try_from_array(&value, 0)?);
        }
        if *self == Reader::Time {
            let text: ArrayRef = Arc::new(arrow::array::StringArray::from(vec![
                std::str::from_utf8(bytes).map_err(|_| invalid_bytes())?
            ]));
            let time = sluice::datetime::column_from_text(&text, &time_of_day::TIME_MICROS)?;
            return Ok(ScalarValue::try_from_array(&time, 0)?);
        }
        let text = std::str::from_utf8(bytes).map_err(|_| invalid_bytes())?;
        Ok(match self {
            Reader::Integer { declared, target } => target.scalar(Some(declared.input(text)?), text)?,
            Reader::IntegerArray(element) => {
                let items = sluice::types::array_from_text(text)?
                    .into_iter()
                    .map(|item| element.scalar(item.as_deref().map(|t| element.input(t)).transpose()?, text))
                    .collect::<sluice::Result<Vec<_>>>()?;
                list(&items, &element.arrow())
            }
            Reader::Numeric { precision, scale } => {
                ScalarValue::Decimal128(Some(numeric_input(text, *scale)?), *precision, *scale)
            }
            _ => {
                let items: Vec<ScalarValue> =
                    sluice::types::array_from_text(text)?.into_iter().map(ScalarValue::Utf8).collect();
                list(&items, &DataType::Utf8)
            }
        })
    }
}

/// The parameters of a portal: `uuid`, `json` and `jsonb` (and arrays of them) read here, from
/// text or binary, as text values; integers, integer arrays, text arrays and dates and
/// timestamps (in the settings of the `session`'s options) in text read here as PostgreSQL
/// reads them; the others by arrow-pg. Numerics wider than their column are 22003.
pub fn decode_parameters<S: Clone + Default>(
    portal: &Portal<S>,
    inferred: &[Option<&DataType>],
    session: &ConfigOptions,
) -> PgWireResult<Vec<ScalarValue>> {
    let readers: Vec<Reader> = (0..portal.parameter_len())
        .map(|i| {
            let target = inferred.get(i).copied().flatten();
            let client = portal.statement.parameter_types.get(i).and_then(Option::as_ref);
            match arrival_type(client, target) {
                Some(pg) => reader(&pg, portal.parameter_format.is_binary(i), target),
                None => Reader::ArrowPg,
            }
        })
        .collect();
    if readers.iter().all(|r| *r == Reader::ArrowPg) {
        let values =
            super::statements::param_values(arrow_pg::datatypes::df::deserialize_parameters(portal, inferred)?);
        check_numeric_precision(&values)?;
        return Ok(values);
    }
    // The others through arrow-pg, with these as text NULLs in their place.
    let mut statement = StoredStatement::new(
        portal.statement.id.clone(),
        portal.statement.statement.clone(),
        portal.statement.parameter_types.clone(),
    );
    statement.parameter_types.resize(readers.len().max(statement.parameter_types.len()), None);
    let mut parameters = portal.parameters.clone();
    for (i, reader) in readers.iter().enumerate() {
        if *reader == Reader::ArrowPg {
            continue;
        }
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
    for (i, reader) in readers.iter().enumerate() {
        let Some(slot) = values.get_mut(i) else { continue };
        if *reader != Reader::ArrowPg {
            let raw = portal.parameters.get(i).cloned().flatten();
            *slot = reader
                .read(raw.as_deref(), portal.parameter_format.is_binary(i), session)
                .map_err(|e| super::encode::error(&e))?;
        }
    }
    check_numeric_precision(&values)?;
    Ok(values)
}

/// 22003 for a numeric parameter with more digits than its target's precision allows (arrow-pg
/// rounds binary ones to the target's scale but does not check the precision), as PostgreSQL
/// says it.
fn check_numeric_precision(values: &[ScalarValue]) -> PgWireResult<()> {
    for value in values {
        let ScalarValue::Decimal128(Some(mantissa), precision, scale) = value else { continue };
        let limit = 10u128.checked_pow(u32::from(*precision)).unwrap_or(u128::MAX);
        if mantissa.unsigned_abs() < limit {
            continue;
        }
        let integer_digits = i32::from(*precision) - i32::from(*scale);
        let bound = if integer_digits > 0 { format!("10^{integer_digits}") } else { "1".to_string() };
        let mut info = ErrorInfo::new("ERROR".into(), "22003".into(), "numeric field overflow".into());
        info.detail = Some(format!(
            "A field with precision {precision}, scale {scale} must round to an absolute value less than {bound}."
        ));
        return Err(PgWireError::UserError(Box::new(info)));
    }
    Ok(())
}

fn is_document_array(pg: &Type) -> bool {
    matches!(*pg, Type::UUID_ARRAY | Type::JSON_ARRAY | Type::JSONB_ARRAY)
}

fn element_type(pg: &Type) -> TextType {
    match *pg {
        Type::UUID | Type::UUID_ARRAY => TextType::Uuid,
        Type::JSON | Type::JSON_ARRAY => TextType::Json,
        _ => TextType::Jsonb,
    }
}

fn document(pg: &Type, bytes: &[u8], binary: bool) -> sluice::Result<ScalarValue> {
    let text_type = element_type(pg);
    if !is_document_array(pg) {
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
        let value = document(&Type::UUID_ARRAY, &bytes, true).unwrap();
        assert!(matches!(value, ScalarValue::List(_)));
        assert_eq!(
            document(&Type::JSONB, b"\x01{\"b\":1,\"a\":2}", true).unwrap(),
            ScalarValue::Utf8(Some("{\"a\": 2, \"b\": 1}".into()))
        );
        assert!(document(&Type::UUID, b"nope", false).is_err());
    }

    /// Text parameters as a client that sends no types (node-postgres) binds them.
    fn decode(
        texts: &[Option<&str>],
        inferred: &[&DataType],
        client_types: Vec<Option<Type>>,
    ) -> PgWireResult<Vec<ScalarValue>> {
        let mut portal: Portal<()> = Portal::default();
        portal.statement = Arc::new(StoredStatement::new("s".into(), (), client_types));
        portal.parameters = texts.iter().map(|t| t.map(|t| bytes::Bytes::copy_from_slice(t.as_bytes()))).collect();
        portal.parameter_format = Format::UnifiedText;
        let inferred: Vec<Option<&DataType>> = inferred.iter().copied().map(Some).collect();
        decode_parameters(&portal, &inferred, &ConfigOptions::default())
    }

    fn error(result: PgWireResult<Vec<ScalarValue>>) -> (String, String, Option<String>) {
        match result {
            Err(PgWireError::UserError(info)) => (info.code, info.message, info.detail),
            other => panic!("not a user error: {other:?}"),
        }
    }

    fn list(items: &[ScalarValue], element: &DataType) -> ScalarValue {
        ScalarValue::List(ScalarValue::new_list_nullable(items, element))
    }

    #[test]
    fn dates_read_in_the_sessions_date_style() {
        let mut portal: Portal<()> = Portal::default();
        portal.statement = Arc::new(StoredStatement::new("s".into(), (), vec![Some(Type::DATE)]));
        portal.parameters = vec![Some(bytes::Bytes::from_static(b"06/01/2024"))];
        portal.parameter_format = Format::UnifiedText;
        let mut session = ConfigOptions::default();
        session.extensions.insert(sluice::datetime::DateOrder::DayMonthYear);
        let day_first = decode_parameters(&portal, &[Some(&DataType::Date32)], &session).unwrap();
        assert_eq!(day_first, [ScalarValue::Date32(Some(19728))]);
        let month_first = decode_parameters(&portal, &[Some(&DataType::Date32)], &ConfigOptions::default()).unwrap();
        assert_eq!(month_first, [ScalarValue::Date32(Some(19875))]);
        portal.parameters = vec![Some(bytes::Bytes::from_static(b"31/02/2024"))];
        assert_eq!(error(decode_parameters(&portal, &[Some(&DataType::Date32)], &session)).0, "22008");
    }

    #[test]
    fn integers_read_as_postgresql_reads_them() {
        let values = decode(
            &[Some(" 42 "), Some("+7"), Some("-8"), None],
            &[&DataType::Int32, &DataType::Int16, &DataType::Int64, &DataType::Int32],
            vec![],
        )
        .unwrap();
        assert_eq!(
            values,
            [
                ScalarValue::Int32(Some(42)),
                ScalarValue::Int16(Some(7)),
                ScalarValue::Int64(Some(-8)),
                ScalarValue::Int32(None)
            ]
        );
        let range = error(decode(&[Some("40000")], &[&DataType::Int16], vec![]));
        assert_eq!(
            (range.0.as_str(), range.1.as_str()),
            ("22003", "value \"40000\" is out of range for type smallint")
        );
        let range = error(decode(&[Some("9223372036854775808")], &[&DataType::Int64], vec![]));
        assert_eq!(range.0, "22003");
        // A bigint the client declared, for an integer column.
        let range = error(decode(&[Some("3000000000")], &[&DataType::Int32], vec![Some(Type::INT8)]));
        assert_eq!(range.1, "value \"3000000000\" is out of range for type integer");
        let syntax = error(decode(&[Some("1.5")], &[&DataType::Int32], vec![]));
        assert_eq!((syntax.0.as_str(), syntax.1.as_str()), ("22P02", "invalid input syntax for type integer: \"1.5\""));
        assert_eq!(error(decode(&[Some("")], &[&DataType::Int32], vec![])).0, "22P02");
        assert_eq!(error(decode(&[Some("- 1")], &[&DataType::Int32], vec![])).0, "22P02");
    }

    #[test]
    fn arrays_read_as_postgresql_reads_them() {
        let int_list = DataType::List(Arc::new(Field::new_list_field(DataType::Int32, true)));
        let text_list = DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true)));
        let values =
            decode(&[Some("{1, NULL,3}"), Some(r#"{"",NULL,"NULL",x}"#)], &[&int_list, &text_list], vec![]).unwrap();
        let text = |t: Option<&str>| ScalarValue::Utf8(t.map(str::to_string));
        assert_eq!(
            values,
            [
                list(
                    &[ScalarValue::Int32(Some(1)), ScalarValue::Int32(None), ScalarValue::Int32(Some(3))],
                    &DataType::Int32
                ),
                list(&[text(Some("")), text(None), text(Some("NULL")), text(Some("x"))], &DataType::Utf8),
            ]
        );
        let range = error(decode(&[Some("{1,3000000000}")], &[&int_list], vec![]));
        assert_eq!(
            (range.0.as_str(), range.1.as_str()),
            ("22003", "value \"3000000000\" is out of range for type integer")
        );
        assert_eq!(error(decode(&[Some("{1,x}")], &[&int_list], vec![])).0, "22P02");
        assert_eq!(error(decode(&[Some("1,2")], &[&text_list], vec![])).0, "22P02");
        // NULL arrays are NULL, not empty (a declared uuid[] too).
        let values =
            decode(&[None, None, None], &[&int_list, &text_list, &text_list], vec![None, None, Some(Type::UUID_ARRAY)])
                .unwrap();
        assert!(values.iter().all(ScalarValue::is_null), "{values:?}");
    }

    #[test]
    fn times_read_as_postgresql_reads_them() {
        let time = DataType::Time64(arrow::datatypes::TimeUnit::Microsecond);
        let values = decode(
            &[Some("1:05 pm +02"), Some("12:57:18.000396+05:30"), None],
            &[&time, &DataType::Utf8, &DataType::Utf8],
            vec![Some(Type::TIME), Some(Type::TIMETZ), Some(Type::TIMETZ)],
        )
        .unwrap();
        assert_eq!(
            values,
            [
                ScalarValue::Time64Microsecond(Some(47_100_000_000)),
                ScalarValue::Utf8(Some("12:57:18.000396+05:30".into())),
                ScalarValue::Utf8(None)
            ]
        );
        assert_eq!(error(decode(&[Some("noon")], &[&time], vec![Some(Type::TIME)])).0, "22007");
        assert_eq!(error(decode(&[Some("25:00+00")], &[&DataType::Utf8], vec![Some(Type::TIMETZ)])).0, "22008");
    }

    #[test]
    fn numerics_read_as_postgresql_reads_them() {
        assert_eq!(numeric_input("1.005", 2).unwrap(), 101);
        assert_eq!(numeric_input("-1.005", 2).unwrap(), -101);
        assert_eq!(numeric_input(" 12.5e-1 ", 1).unwrap(), 13);
        assert_eq!(numeric_input(".5", 0).unwrap(), 1);
        assert_eq!(numeric_input("+5.", 0).unwrap(), 5);
        assert_eq!(numeric_input("0.0000001", 2).unwrap(), 0);
        assert_eq!(numeric_input("0.5E-2", 2).unwrap(), 1);
        assert_eq!(numeric_input("000", 10).unwrap(), 0);
        assert_eq!(numeric_input("100000000000000000000", 10).unwrap(), 10i128.pow(30));
        assert_eq!(numeric_input("1e100", 0).unwrap(), i128::MAX);
        assert_eq!(numeric_input("-1e100", 0).unwrap(), -i128::MAX);
        for bad in ["", ".", "abc", "1e", "1.2.3", "--1", "1 2"] {
            assert_eq!(numeric_input(bad, 2).unwrap_err().sqlstate(), "22P02", "{bad}");
        }
        assert_eq!(numeric_input("NaN", 2).unwrap_err().sqlstate(), "0A000");
        // Wider than arrow-pg's 28-digit decimals: read whole, not rescaled to another scale.
        let values = decode(&[Some("100000000000000000000")], &[&DataType::Decimal128(38, 10)], vec![]).unwrap();
        assert_eq!(values, [ScalarValue::Decimal128(Some(10i128.pow(30)), 38, 10)]);
        let values = decode(&[Some("99999999.994")], &[&DataType::Decimal128(10, 2)], vec![]).unwrap();
        assert_eq!(values, [ScalarValue::Decimal128(Some(9_999_999_999), 10, 2)]);
        let overflow = error(decode(&[Some("99999999.995")], &[&DataType::Decimal128(10, 2)], vec![]));
        assert_eq!(
            overflow,
            (
                "22003".to_string(),
                "numeric field overflow".to_string(),
                Some("A field with precision 10, scale 2 must round to an absolute value less than 10^8.".to_string())
            )
        );
        let overflow = error(decode(&[Some("1")], &[&DataType::Decimal128(2, 2)], vec![]));
        assert_eq!(
            overflow.2.as_deref(),
            Some("A field with precision 2, scale 2 must round to an absolute value less than 1.")
        );
    }
}
