//! COPY FROM in Postgres' binary format: the signature and header, then per row a 16-bit field
//! count and each field as a 32-bit length (-1 for NULL) and its binary value, then a trailer of
//! -1. Values are decoded straight into the table's Arrow types (no text step), as Postgres'
//! binary receive functions define them: big-endian integers and floats, dates and timestamps
//! counted from 2000-01-01, `numeric` as base-10000 digits, `uuid` as 16 bytes, `jsonb` with a
//! version byte, `time` as microseconds since midnight, `timetz` as those and the offset west of
//! UTC.
//!
//! Like the text parser it takes data in chunks of any size and only decodes rows that have
//! fully arrived.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, Float32Builder, Float64Builder,
    Int16Builder, Int32Builder, Int64Builder, Int8Builder, RecordBatch, StringBuilder, Time64MicrosecondBuilder,
    TimestampMicrosecondBuilder,
};
use arrow::datatypes::{DataType, Field, SchemaRef, TimeUnit};

use super::copy::{COPY_BATCH_ROWS, COPY_LINE_BYTES_MAX};

/// The 11 bytes every binary COPY stream starts with.
pub const SIGNATURE: &[u8] = b"PGCOPY\n\xff\r\n\0";
/// Days from 1970-01-01 (Arrow) to 2000-01-01 (Postgres).
const POSTGRES_EPOCH_DAYS: i32 = 10_957;
/// Microseconds from 1970-01-01 to 2000-01-01.
const POSTGRES_EPOCH_MICROS: i64 = 946_684_800_000_000;
/// Bit 16 of the header flags: OIDs are included (never by Sluice's clients; refused).
const FLAG_WITH_OIDS: u32 = 1 << 16;

/// One column's builder, chosen from the table's type.
enum Column {
    Boolean(BooleanBuilder),
    Int8(Int8Builder),
    Int16(Int16Builder),
    Int32(Int32Builder),
    Int64(Int64Builder),
    Float32(Float32Builder),
    Float64(Float64Builder),
    Text(StringBuilder, TextKind),
    Bytes(BinaryBuilder),
    Date(Date32Builder),
    Timestamp(TimestampMicrosecondBuilder, Option<Arc<str>>),
    Time(Time64MicrosecondBuilder),
    Decimal(Decimal128Builder, u8, i8),
}

/// How a string column's values arrive in binary.
#[derive(Clone, Copy)]
enum TextKind {
    Plain,
    Uuid,
    Jsonb,
    TimeTz,
}

impl Column {
    fn new(field: &Field) -> Result<Self, String> {
        let declared = field.metadata().get(sluice::types::DECLARED_TYPE_KEY).map(String::as_str);
        Ok(match field.data_type() {
            DataType::Boolean => Column::Boolean(BooleanBuilder::new()),
            DataType::Int8 => Column::Int8(Int8Builder::new()),
            DataType::Int16 => Column::Int16(Int16Builder::new()),
            DataType::Int32 => Column::Int32(Int32Builder::new()),
            DataType::Int64 => Column::Int64(Int64Builder::new()),
            DataType::Float32 => Column::Float32(Float32Builder::new()),
            DataType::Float64 => Column::Float64(Float64Builder::new()),
            DataType::Utf8 => {
                let kind = match declared {
                    Some("uuid") => TextKind::Uuid,
                    Some("jsonb") => TextKind::Jsonb,
                    Some(name) if sluice::time_of_day::is_timetz(name) => TextKind::TimeTz,
                    _ => TextKind::Plain,
                };
                Column::Text(StringBuilder::new(), kind)
            }
            DataType::Binary => Column::Bytes(BinaryBuilder::new()),
            DataType::Date32 => Column::Date(Date32Builder::new()),
            DataType::Timestamp(TimeUnit::Microsecond, zone) => {
                Column::Timestamp(TimestampMicrosecondBuilder::new(), zone.clone())
            }
            DataType::Time64(TimeUnit::Microsecond) => Column::Time(Time64MicrosecondBuilder::new()),
            DataType::Decimal128(precision, scale) => Column::Decimal(Decimal128Builder::new(), *precision, *scale),
            other => {
                return Err(format!(
                    "COPY FROM in binary format does not support column \"{}\" of type {other}; use text or csv",
                    field.name()
                ))
            }
        })
    }

    fn append_null(&mut self) {
        match self {
            Column::Boolean(b) => b.append_null(),
            Column::Int8(b) => b.append_null(),
            Column::Int16(b) => b.append_null(),
            Column::Int32(b) => b.append_null(),
            Column::Int64(b) => b.append_null(),
            Column::Float32(b) => b.append_null(),
            Column::Float64(b) => b.append_null(),
            Column::Text(b, _) => b.append_null(),
            Column::Bytes(b) => b.append_null(),
            Column::Date(b) => b.append_null(),
            Column::Timestamp(b, _) => b.append_null(),
            Column::Time(b) => b.append_null(),
            Column::Decimal(b, _, _) => b.append_null(),
        }
    }

    fn append(&mut self, value: &[u8]) -> Result<(), String> {
        match self {
            Column::Boolean(b) => match value {
                [byte] => b.append_value(*byte != 0),
                _ => return Err(length_error("boolean", value)),
            },
            Column::Int8(b) => {
                let wide = integer(value)?;
                b.append_value(i8::try_from(wide).map_err(|_| format!("{wide} is out of range for tinyint"))?);
            }
            Column::Int16(b) => {
                let wide = integer(value)?;
                b.append_value(i16::try_from(wide).map_err(|_| format!("{wide} is out of range for smallint"))?);
            }
            Column::Int32(b) => {
                let wide = integer(value)?;
                b.append_value(i32::try_from(wide).map_err(|_| format!("{wide} is out of range for integer"))?);
            }
            Column::Int64(b) => b.append_value(integer(value)?),
            Column::Float32(b) => b.append_value(float(value)? as f32),
            Column::Float64(b) => b.append_value(float(value)?),
            Column::Text(b, kind) => b.append_value(text(value, *kind)?),
            Column::Bytes(b) => b.append_value(value),
            Column::Date(b) => {
                let days = i32::from_be_bytes(fixed(value, "date")?);
                b.append_value(days.checked_add(POSTGRES_EPOCH_DAYS).ok_or("date out of range")?);
            }
            Column::Timestamp(b, _) => {
                let micros = i64::from_be_bytes(fixed(value, "timestamp")?);
                b.append_value(micros.checked_add(POSTGRES_EPOCH_MICROS).ok_or("timestamp out of range")?);
            }
            Column::Time(b) => {
                let micros = i64::from_be_bytes(fixed(value, "time")?);
                if !(0..=sluice::time_of_day::DAY_MICROS).contains(&micros) {
                    return Err("time out of range".into());
                }
                b.append_value(micros);
            }
            Column::Decimal(b, precision, scale) => b.append_value(numeric(value, *precision, *scale)?),
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<ArrayRef, String> {
        Ok(match self {
            Column::Boolean(b) => Arc::new(b.finish()),
            Column::Int8(b) => Arc::new(b.finish()),
            Column::Int16(b) => Arc::new(b.finish()),
            Column::Int32(b) => Arc::new(b.finish()),
            Column::Int64(b) => Arc::new(b.finish()),
            Column::Float32(b) => Arc::new(b.finish()),
            Column::Float64(b) => Arc::new(b.finish()),
            Column::Text(b, _) => Arc::new(b.finish()),
            Column::Bytes(b) => Arc::new(b.finish()),
            Column::Date(b) => Arc::new(b.finish()),
            Column::Timestamp(b, zone) => Arc::new(b.finish().with_timezone_opt(zone.clone())),
            Column::Time(b) => Arc::new(b.finish()),
            Column::Decimal(b, precision, scale) => {
                Arc::new(b.finish().with_precision_and_scale(*precision, *scale).map_err(|e| e.to_string())?)
            }
        })
    }
}

fn length_error(type_name: &str, value: &[u8]) -> String {
    format!("a binary {type_name} value cannot be {} bytes long", value.len())
}

fn fixed<const N: usize>(value: &[u8], type_name: &str) -> Result<[u8; N], String> {
    value.try_into().map_err(|_| length_error(type_name, value))
}

/// int2, int4 or int8 (clients may send a narrower integer than the column).
fn integer(value: &[u8]) -> Result<i64, String> {
    Ok(match value.len() {
        2 => i64::from(i16::from_be_bytes(fixed(value, "integer")?)),
        4 => i64::from(i32::from_be_bytes(fixed(value, "integer")?)),
        8 => i64::from_be_bytes(fixed(value, "integer")?),
        _ => return Err(length_error("integer", value)),
    })
}

/// float4 or float8.
fn float(value: &[u8]) -> Result<f64, String> {
    Ok(match value.len() {
        4 => f64::from(f32::from_be_bytes(fixed(value, "float")?)),
        8 => f64::from_be_bytes(fixed(value, "float")?),
        _ => return Err(length_error("float", value)),
    })
}

fn text(value: &[u8], kind: TextKind) -> Result<String, String> {
    match kind {
        TextKind::Uuid => {
            let bytes: [u8; 16] = fixed(value, "uuid")?;
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            Ok(format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32]))
        }
        TextKind::Jsonb => match value.split_first() {
            Some((1, json)) => utf8(json),
            _ => Err("a binary jsonb value must start with version 1".into()),
        },
        TextKind::TimeTz => {
            sluice::time_of_day::TimeTz::from_binary(value).map(|t| t.text()).map_err(|e| e.to_string())
        }
        TextKind::Plain => utf8(value),
    }
}

fn utf8(value: &[u8]) -> Result<String, String> {
    String::from_utf8(value.to_vec()).map_err(|_| "invalid UTF-8 in a text value".to_string())
}

/// Postgres' binary numeric (base-10000 digits with a weight) as a decimal of the column's scale,
/// rounded half away from zero as Postgres rounds to a column's scale.
fn numeric(value: &[u8], precision: u8, scale: i8) -> Result<i128, String> {
    let word =
        |i: usize| -> Result<u16, String> { read_u16(value, i * 2).ok_or_else(|| length_error("numeric", value)) };
    let digits = word(0)? as usize;
    let weight = i64::from(word(1)? as i16);
    let sign = word(2)?;
    if sign == 0xC000 {
        return Err("NaN cannot be stored in a decimal column".into());
    }
    if value.len() != 8 + digits * 2 {
        return Err(length_error("numeric", value));
    }
    let overflow = || format!("numeric value does not fit decimal({precision},{scale})");
    let mut whole: i128 = 0;
    for i in 0..digits {
        let digit = i128::from(word(4 + i)?);
        whole = whole.checked_mul(10_000).and_then(|w| w.checked_add(digit)).ok_or_else(overflow)?;
    }
    // whole * 10000^(weight - digits + 1), scaled by 10^scale.
    let exponent = 4 * (weight - digits as i64 + 1) + i64::from(scale);
    let mut scaled = if exponent >= 0 {
        let factor = 10i128.checked_pow(u32::try_from(exponent).map_err(|_| overflow())?).ok_or_else(overflow)?;
        whole.checked_mul(factor).ok_or_else(overflow)?
    } else {
        let divisor = 10i128.checked_pow(u32::try_from(-exponent).map_err(|_| overflow())?);
        match divisor {
            Some(divisor) => {
                let (quotient, remainder) = (whole / divisor, whole % divisor);
                quotient + i128::from(remainder * 2 >= divisor)
            }
            // More fractional digits than an i128 can hold: the value rounds to 0.
            None => 0,
        }
    };
    if sign == 0x4000 {
        scaled = -scaled;
    }
    let limit = 10i128.checked_pow(u32::from(precision)).ok_or_else(overflow)?;
    if scaled.abs() >= limit {
        return Err(overflow());
    }
    Ok(scaled)
}

/// Parses binary COPY data into batches of the target schema.
pub struct BinaryCopyParser {
    schema: SchemaRef,
    columns: Vec<Column>,
    pending: Vec<u8>,
    header_done: bool,
    ended: bool,
    rows: usize,
    /// Rows decoded so far (for error messages).
    pub row: usize,
}

impl BinaryCopyParser {
    pub fn new(schema: SchemaRef) -> Result<Self, String> {
        let columns = schema.fields().iter().map(|f| Column::new(f)).collect::<Result<Vec<_>, _>>()?;
        Ok(Self { schema, columns, pending: Vec::new(), header_done: false, ended: false, rows: 0, row: 0 })
    }

    /// Takes a chunk of data; returns the batches completed by it.
    pub fn push(&mut self, data: &[u8]) -> Result<Vec<RecordBatch>, String> {
        self.pending.extend_from_slice(data);
        let mut start = 0;
        if !self.header_done {
            match self.header()? {
                Some(length) => {
                    self.header_done = true;
                    start = length;
                }
                None => return Ok(vec![]),
            }
        }
        let mut batches = Vec::new();
        while !self.ended {
            let Some(end) = self.row_end(start)? else { break };
            self.decode_row(start, end).map_err(|e| format!("row {}: {e}", self.row + 1))?;
            start = end;
            if self.rows >= COPY_BATCH_ROWS {
                batches.push(self.take_batch()?);
            }
        }
        self.pending.drain(..start);
        if self.ended && !self.pending.is_empty() {
            return Err("data after the binary COPY trailer".into());
        }
        if self.pending.len() > COPY_LINE_BYTES_MAX {
            return Err(format!("a binary COPY row is longer than {COPY_LINE_BYTES_MAX} bytes"));
        }
        Ok(batches)
    }

    /// Ends the data; returns the last batch.
    pub fn finish(&mut self) -> Result<Vec<RecordBatch>, String> {
        if !self.header_done {
            return Err("binary COPY data must start with the PGCOPY signature".into());
        }
        if !self.pending.is_empty() {
            return Err(format!("binary COPY data ends inside row {}", self.row + 1));
        }
        if self.rows == 0 {
            return Ok(vec![]);
        }
        Ok(vec![self.take_batch()?])
    }

    /// The header's length once it has fully arrived.
    fn header(&self) -> Result<Option<usize>, String> {
        let prefix = self.pending.len().min(SIGNATURE.len());
        if self.pending.get(..prefix) != SIGNATURE.get(..prefix) {
            return Err("binary COPY data must start with the PGCOPY signature".into());
        }
        let Some(flags) = read_u32(&self.pending, 11) else { return Ok(None) };
        if flags & FLAG_WITH_OIDS != 0 {
            return Err("binary COPY data with OIDs is not supported".into());
        }
        let Some(extension) = read_u32(&self.pending, 15) else { return Ok(None) };
        let length = 19 + extension as usize;
        Ok((self.pending.len() >= length).then_some(length))
    }

    /// Where the row starting at `start` ends, if it has fully arrived; marks the trailer.
    fn row_end(&mut self, start: usize) -> Result<Option<usize>, String> {
        let Some(count) = read_u16(&self.pending, start) else { return Ok(None) };
        if count as i16 == -1 {
            self.ended = true;
            return Ok(Some(start + 2));
        }
        if count as usize != self.columns.len() {
            return Err(format!("row {}: expected {} fields, found {}", self.row + 1, self.columns.len(), count));
        }
        let mut at = start + 2;
        for _ in 0..count {
            let Some(length) = read_u32(&self.pending, at) else { return Ok(None) };
            at += 4;
            if length as i32 >= 0 {
                at += length as usize;
            }
        }
        Ok((at <= self.pending.len()).then_some(at))
    }

    fn decode_row(&mut self, start: usize, end: usize) -> Result<(), String> {
        if self.ended && end == start + 2 {
            return Ok(());
        }
        let mut at = start + 2;
        for (index, column) in self.columns.iter_mut().enumerate() {
            let length = read_u32(&self.pending, at).ok_or("truncated row")? as i32;
            at += 4;
            if length < 0 {
                column.append_null();
                continue;
            }
            let value = self.pending.get(at..at + length as usize).ok_or("truncated row")?;
            at += length as usize;
            column.append(value).map_err(|e| format!("column \"{}\": {e}", self.schema.field(index).name()))?;
        }
        self.rows += 1;
        self.row += 1;
        Ok(())
    }

    fn take_batch(&mut self) -> Result<RecordBatch, String> {
        let columns = self.columns.iter_mut().map(Column::finish).collect::<Result<Vec<_>, _>>()?;
        self.rows = 0;
        RecordBatch::try_new(self.schema.clone(), columns).map_err(|e| e.to_string())
    }
}

fn read_u16(data: &[u8], at: usize) -> Option<u16> {
    data.get(at..).and_then(|b| b.first_chunk::<2>()).map(|b| u16::from_be_bytes(*b))
}

fn read_u32(data: &[u8], at: usize) -> Option<u32> {
    data.get(at..).and_then(|b| b.first_chunk::<4>()).map(|b| u32::from_be_bytes(*b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::AsArray;
    use arrow::datatypes::{Decimal128Type, Int64Type, Schema};
    use std::collections::HashMap;

    fn numeric_bytes(digits: &[u16], weight: i16, negative: bool, dscale: u16) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend((digits.len() as u16).to_be_bytes());
        out.extend(weight.to_be_bytes());
        out.extend(if negative { 0x4000u16 } else { 0 }.to_be_bytes());
        out.extend(dscale.to_be_bytes());
        for d in digits {
            out.extend(d.to_be_bytes());
        }
        out
    }

    #[test]
    fn decodes_numeric_to_the_column_scale() {
        // 12345.678 = [1, 2345, 6780] weight 1.
        assert_eq!(numeric(&numeric_bytes(&[1, 2345, 6780], 1, false, 3), 10, 2).unwrap(), 1_234_568);
        assert_eq!(numeric(&numeric_bytes(&[2500], -1, true, 4), 10, 2).unwrap(), -25);
        assert_eq!(numeric(&numeric_bytes(&[], 0, false, 0), 10, 2).unwrap(), 0);
        assert!(numeric(&numeric_bytes(&[1, 0, 0], 2, false, 0), 5, 2).is_err());
    }

    #[test]
    fn parses_rows_split_anywhere() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("amount", DataType::Decimal128(10, 2), true),
        ]));
        let mut data = SIGNATURE.to_vec();
        data.extend([0u8; 8]);
        for i in 0..3i64 {
            data.extend(2u16.to_be_bytes());
            data.extend(8u32.to_be_bytes());
            data.extend(i.to_be_bytes());
            if i == 1 {
                data.extend((-1i32).to_be_bytes());
            } else {
                let value = numeric_bytes(&[7, 5000], 0, false, 2);
                data.extend((value.len() as u32).to_be_bytes());
                data.extend(value);
            }
        }
        data.extend((-1i16).to_be_bytes());
        let mut parser = BinaryCopyParser::new(schema).unwrap();
        for chunk in data.chunks(5) {
            assert!(parser.push(chunk).unwrap().is_empty());
        }
        let batch = parser.finish().unwrap().remove(0);
        assert_eq!(batch.column(0).as_primitive::<Int64Type>().values(), &[0, 1, 2]);
        assert_eq!(batch.column(1).as_primitive::<Decimal128Type>().value(0), 750);
        assert!(batch.column(1).is_null(1));
        let mut bad = BinaryCopyParser::new(batch.schema()).unwrap();
        assert!(bad.push(b"PGCOPX\n").is_err());
    }

    #[test]
    fn decodes_times() {
        let timetz = HashMap::from([(sluice::types::DECLARED_TYPE_KEY.to_string(), "timetz".to_string())]);
        let schema = Arc::new(Schema::new(vec![
            Field::new("t", DataType::Time64(TimeUnit::Microsecond), true),
            Field::new("tz", DataType::Utf8, true).with_metadata(timetz),
        ]));
        let mut data = SIGNATURE.to_vec();
        data.extend([0u8; 8]);
        data.extend(2u16.to_be_bytes());
        data.extend(8u32.to_be_bytes());
        data.extend(46_638_000_396i64.to_be_bytes());
        data.extend(12u32.to_be_bytes());
        data.extend(46_638_000_396i64.to_be_bytes());
        data.extend((-19_800i32).to_be_bytes());
        data.extend((-1i16).to_be_bytes());
        let mut parser = BinaryCopyParser::new(schema).unwrap();
        assert!(parser.push(&data).unwrap().is_empty());
        let batch = parser.finish().unwrap().remove(0);
        assert_eq!(batch.column(0).as_primitive::<arrow::datatypes::Time64MicrosecondType>().value(0), 46_638_000_396);
        assert_eq!(batch.column(1).as_string::<i32>().value(0), "12:57:18.000396+05:30");
    }
}
