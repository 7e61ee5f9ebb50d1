//! `uuid`, `json` and `jsonb` values: stored as Delta strings (as Spark and delta-rs read them),
//! read and printed as PostgreSQL reads and prints them.
//!
//! - `uuid`: PostgreSQL's input forms (upper or lower case, braces, hyphens after any group of
//!   four digits) to its one output form, lower case `8-4-4-4-12`.
//! - `json`: any valid JSON text, kept as written.
//! - `jsonb`: the canonical text of the document: keys of an object ordered shorter first, then
//!   bytewise, the last of duplicate keys kept, `", "` and `": "` between items, strings with
//!   their escapes resolved. Numbers are PostgreSQL's `numeric`: every digit kept (serde_json's
//!   `arbitrary_precision`), printed without an exponent and with the scale they were written with
//!   (`1.50` stays `1.50`, `1e2` is `100`), and beyond `numeric`'s range they are 22003.
//!
//! The column or expression type travels in the Arrow field's metadata under
//! [`DECLARED_TYPE_KEY`](crate::types::DECLARED_TYPE_KEY), as the declared type of a table column
//! does; the pgwire layer reports it to clients with its type OID.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringArray};
use arrow::datatypes::{DataType, Field};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::types::DECLARED_TYPE_KEY;

/// The text types whose values Sluice checks and normalizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TextType {
    Uuid,
    Json,
    Jsonb,
}

impl TextType {
    /// The type a declared name (`sluice.type` metadata) names.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "uuid" => Some(Self::Uuid),
            "json" => Some(Self::Json),
            "jsonb" => Some(Self::Jsonb),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Uuid => "uuid",
            Self::Json => "json",
            Self::Jsonb => "jsonb",
        }
    }

    /// The type an Arrow field carries in its metadata.
    pub fn of_field(field: &Field) -> Option<Self> {
        field.metadata().get(DECLARED_TYPE_KEY).and_then(|name| Self::from_name(name))
    }

    /// A `Utf8` field of this type.
    pub fn field(self, name: &str, nullable: bool) -> Field {
        Field::new(name, DataType::Utf8, nullable)
            .with_metadata(HashMap::from([(DECLARED_TYPE_KEY.to_string(), self.name().to_string())]))
    }

    /// One value as PostgreSQL reads it: its stored (output) form, or 22P02.
    pub fn input(self, text: &str) -> Result<String> {
        match self {
            Self::Uuid => uuid_in(text),
            Self::Json => json_in(text).map(|_| text.to_string()),
            Self::Jsonb => jsonb_in(text).map(|v| jsonb_text(&v)),
        }
    }

    /// A column of text read as this type.
    pub fn input_column(self, column: &ArrayRef) -> Result<ArrayRef> {
        let text = arrow::compute::cast(column, &DataType::Utf8)?;
        let text = text.as_string::<i32>();
        let mut out: Vec<Option<String>> = Vec::with_capacity(text.len());
        for value in text.iter() {
            out.push(value.map(|v| self.input(v)).transpose()?);
        }
        Ok(Arc::new(StringArray::from(out)))
    }
}

fn invalid(type_name: &str, text: &str) -> Error {
    Error::data("22P02", format!("invalid input syntax for type {type_name}: \"{text}\""))
}

/// A UUID in PostgreSQL's output form.
pub fn uuid_in(text: &str) -> Result<String> {
    let trimmed = text.trim();
    let inner = match trimmed.strip_prefix('{') {
        Some(rest) => rest.strip_suffix('}').ok_or_else(|| invalid("uuid", text))?,
        None => trimmed,
    };
    // A hyphen may follow any group of four digits, and nowhere else.
    let mut digits = String::with_capacity(32);
    let mut previous_hyphen = false;
    for c in inner.chars() {
        if c == '-' {
            if digits.is_empty() || !digits.len().is_multiple_of(4) || previous_hyphen {
                return Err(invalid("uuid", text));
            }
            previous_hyphen = true;
        } else if c.is_ascii_hexdigit() {
            digits.push(c.to_ascii_lowercase());
            previous_hyphen = false;
        } else {
            return Err(invalid("uuid", text));
        }
    }
    if previous_hyphen {
        return Err(invalid("uuid", text));
    }
    let parsed = uuid::Uuid::try_parse(&digits).map_err(|_| invalid("uuid", text))?;
    Ok(parsed.hyphenated().to_string())
}

/// A UUID's 16 bytes from its text (the binary wire form).
pub fn uuid_bytes(text: &str) -> Result<[u8; 16]> {
    Ok(*uuid::Uuid::try_parse(&uuid_in(text)?).map_err(|_| invalid("uuid", text))?.as_bytes())
}

/// A UUID's text from its 16 bytes.
pub fn uuid_from_bytes(bytes: &[u8]) -> Result<String> {
    let parsed = uuid::Uuid::from_slice(bytes).map_err(|_| Error::data("22P03", "invalid uuid: not 16 bytes"))?;
    Ok(parsed.hyphenated().to_string())
}

/// A JSON document, or 22P02 as PostgreSQL reports text that is not JSON.
pub fn json_in(text: &str) -> Result<Value> {
    serde_json::from_str::<Value>(text)
        .map_err(|e| Error::data("22P02", format!("invalid input syntax for type json: {e} in \"{}\"", short(text))))
}

/// A `jsonb` document: JSON whose numbers are all within `numeric`'s range (else 22003).
pub fn jsonb_in(text: &str) -> Result<Value> {
    let value = json_in(text)?;
    check_numbers(&value)?;
    Ok(value)
}

fn check_numbers(value: &Value) -> Result<()> {
    match value {
        // Read, not printed: the document is printed once, by its caller.
        Value::Number(n) => match NumericForm::read(&n.to_string()) {
            Some(_) => Ok(()),
            None => Err(Error::data("22003", "value overflows numeric format")),
        },
        Value::Array(items) => items.iter().try_for_each(check_numbers),
        Value::Object(map) => map.values().try_for_each(check_numbers),
        _ => Ok(()),
    }
}

/// The most digits `numeric` keeps before the decimal point, and after it.
const NUMERIC_MAX_INTEGER_DIGITS: usize = 131_072;
const NUMERIC_MAX_SCALE: i64 = 16_383;

/// A JSON number read as PostgreSQL's `numeric` reads it: its digits, where the point falls
/// among them, and the scale it was written with.
struct NumericForm {
    negative: bool,
    digits: String,
    /// Where the point falls among `digits`, counted from their start (may be outside them).
    point: i64,
    scale: usize,
    zero: bool,
}

impl NumericForm {
    /// `None` when it is not a number, or `numeric` cannot hold it (more than 131,072 digits
    /// before the point or 16,383 after it), which also bounds the text [`Self::text`] makes.
    fn read(number: &str) -> Option<Self> {
        let (negative, unsigned) = match number.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, number),
        };
        let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
            Some(at) => (unsigned.get(..at)?, unsigned.get(at + 1..)?.trim_start_matches('+').parse::<i64>().ok()?),
            None => (unsigned, 0),
        };
        let (integer, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        if integer.is_empty() || !integer.bytes().chain(fraction.bytes()).all(|b| b.is_ascii_digit()) {
            return None;
        }
        let scale = i64::try_from(fraction.len()).ok()?.saturating_sub(exponent).max(0);
        if scale > NUMERIC_MAX_SCALE {
            return None;
        }
        let digits = format!("{integer}{fraction}");
        let leading_zeros = i64::try_from(digits.len() - digits.trim_start_matches('0').len()).ok()?;
        let zero = digits.bytes().all(|b| b == b'0');
        let point = i64::try_from(integer.len()).ok()?.saturating_add(exponent);
        if !zero && point.saturating_sub(leading_zeros) > NUMERIC_MAX_INTEGER_DIGITS as i64 {
            return None;
        }
        Some(Self { negative, digits, point, scale: usize::try_from(scale).ok()?, zero })
    }

    /// As `numeric` prints it: no exponent, `scale` digits after the point, no sign on zero.
    fn text(&self) -> Option<String> {
        let mut out = String::new();
        if self.negative && !self.zero {
            out.push('-');
        }
        if self.zero || self.point <= 0 {
            out.push('0');
        } else {
            let point = usize::try_from(self.point).ok()?;
            let integer_part: String = self.digits.chars().chain(std::iter::repeat('0')).take(point).collect();
            let integer_part = integer_part.trim_start_matches('0');
            out.push_str(if integer_part.is_empty() { "0" } else { integer_part });
        }
        if self.scale > 0 {
            out.push('.');
            let fraction_part: String = if self.zero {
                String::new()
            } else if self.point < 0 {
                let zeros = usize::try_from(self.point.unsigned_abs()).ok()?;
                std::iter::repeat_n('0', zeros).chain(self.digits.chars()).collect()
            } else {
                self.digits.chars().skip(usize::try_from(self.point).ok()?).collect()
            };
            out.extend(fraction_part.chars().chain(std::iter::repeat('0')).take(self.scale));
        }
        Some(out)
    }
}

/// A JSON number as PostgreSQL's `numeric` prints it: no exponent, as many digits after the point
/// as were written less the exponent (`1.2300e1` is `12.300`), no sign on zero. `None` when
/// `numeric` cannot hold it (see [`NumericForm::read`]).
pub fn numeric_text(number: &str) -> Option<String> {
    NumericForm::read(number)?.text()
}

fn short(text: &str) -> String {
    match text.char_indices().nth(60) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_string(),
    }
}

/// A document as `jsonb` prints it.
/// `jsonb_strip_nulls`: every object field whose value is null removed, at any depth (nulls in
/// arrays stay).
pub fn strip_nulls(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            Value::Object(map.into_iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k, strip_nulls(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(strip_nulls).collect()),
        other => other,
    }
}

/// `jsonb_pretty`: jsonb text indented by four spaces, one element or field per line.
pub fn pretty(value: &Value) -> String {
    fn write(value: &Value, depth: usize, out: &mut String) {
        let indent = |out: &mut String, depth: usize| out.push_str(&"    ".repeat(depth));
        match value {
            Value::Array(items) => {
                out.push_str("[\n");
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(",\n");
                    }
                    indent(out, depth + 1);
                    write(item, depth + 1, out);
                }
                if !items.is_empty() {
                    out.push('\n');
                }
                indent(out, depth);
                out.push(']');
            }
            Value::Object(map) => {
                out.push_str("{\n");
                let entries = ordered(map);
                for (i, (key, item)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push_str(",\n");
                    }
                    indent(out, depth + 1);
                    out.push_str(&Value::String((*key).clone()).to_string());
                    out.push_str(": ");
                    write(item, depth + 1, out);
                }
                if !entries.is_empty() {
                    out.push('\n');
                }
                indent(out, depth);
                out.push('}');
            }
            other => out.push_str(&jsonb_text(other)),
        }
    }
    let mut out = String::new();
    write(value, 0, &mut out);
    out
}

pub fn jsonb_text(value: &Value) -> String {
    let mut out = String::new();
    write_jsonb(value, &mut out);
    out
}

fn write_jsonb(value: &Value, out: &mut String) {
    match value {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_jsonb(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in ordered(map).into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push_str(": ");
                write_jsonb(item, out);
            }
            out.push('}');
        }
        Value::Number(n) => {
            let text = n.to_string();
            out.push_str(numeric_text(&text).as_deref().unwrap_or(&text));
        }
        other => out.push_str(&other.to_string()),
    }
}

/// An object's entries in jsonb's order: shorter keys first, then bytewise.
pub fn ordered(map: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_by(|(a, _), (b, _)| a.len().cmp(&b.len()).then_with(|| a.as_bytes().cmp(b.as_bytes())));
    entries
}

/// Whether `a @> b` (jsonb containment, as PostgreSQL defines it).
pub fn contains(a: &Value, b: &Value) -> bool {
    contains_at(a, b, true)
}

fn contains_at(a: &Value, b: &Value, top: bool) -> bool {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            b.iter().all(|(key, wanted)| a.get(key).is_some_and(|have| contains_at(have, wanted, false)))
        }
        (Value::Array(a), Value::Array(b)) => b.iter().all(|wanted| {
            a.iter().any(|have| match (have, wanted) {
                (Value::Array(_), Value::Array(_)) | (Value::Object(_), Value::Object(_)) => {
                    contains_at(have, wanted, false)
                }
                _ => scalar_eq(have, wanted),
            })
        }),
        // A scalar is contained in an array that has it, at the top level only.
        (Value::Array(a), scalar) if top && !scalar.is_object() => a.iter().any(|have| scalar_eq(have, scalar)),
        (Value::Array(_) | Value::Object(_), _) | (_, Value::Array(_) | Value::Object(_)) => false,
        (a, b) => scalar_eq(a, b),
    }
}

fn scalar_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => numeric_value(&x.to_string()) == numeric_value(&y.to_string()),
        _ => a == b,
    }
}

/// Whether two documents are equal as `jsonb` values: the same keys with equal values, the same
/// elements in the same order, numbers by value (`1.0` equals `1`).
pub fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(key, x)| b.get(key).is_some_and(|y| equal(x, y)))
        }
        (Value::Array(a), Value::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| equal(x, y)),
        (a, b) => scalar_eq(a, b),
    }
}

/// A number's value as text that is equal for equal values (`1.50` and `1.5`, `1e2` and `100`):
/// its `numeric` form without trailing zeros after the point.
fn numeric_value(number: &str) -> String {
    match numeric_text(number) {
        Some(text) => crate::types::without_fraction_zeros(&text),
        None => number.to_string(),
    }
}

/// Whether `doc ? key`: an object's key, an array's string element, or the string itself.
pub fn has_key(doc: &Value, key: &str) -> bool {
    match doc {
        Value::Object(map) => map.contains_key(key),
        Value::Array(items) => items.iter().any(|i| i.as_str() == Some(key)),
        Value::String(s) => s == key,
        _ => false,
    }
}

/// One step of a path: an object's key, or an array's index (negative from the end).
pub fn step<'a>(doc: &'a Value, key: &str) -> Option<&'a Value> {
    match doc {
        Value::Object(map) => map.get(key),
        Value::Array(items) => index(items.len(), key.trim().parse().ok()?).and_then(|i| items.get(i)),
        _ => None,
    }
}

fn index(len: usize, i: i64) -> Option<usize> {
    let len = i64::try_from(len).ok()?;
    let i = if i < 0 { len + i } else { i };
    (0..len).contains(&i).then_some(i as usize)
}

/// `doc #> path`.
pub fn at_path<'a>(doc: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(doc, |current, key| step(current, key))
}

/// A value as `->>` and `#>>` give it: a string unquoted, JSON null as SQL NULL, others as jsonb.
pub fn as_text(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        // As written: a `jsonb` document's numbers are already in their `numeric` form.
        Value::Number(n) => Some(n.to_string()),
        other => Some(jsonb_text(other)),
    }
}

/// `a || b`.
pub fn concat(a: Value, b: Value) -> Value {
    match (a, b) {
        (Value::Object(mut a), Value::Object(b)) => {
            a.extend(b);
            Value::Object(a)
        }
        (Value::Array(mut a), Value::Array(b)) => {
            a.extend(b);
            Value::Array(a)
        }
        (Value::Array(mut a), b) => {
            a.push(b);
            Value::Array(a)
        }
        (a, Value::Array(b)) => {
            let mut items = vec![a];
            items.extend(b);
            Value::Array(items)
        }
        (a, b) => Value::Array(vec![a, b]),
    }
}

/// `doc - key`: an object without the key, an array without its string elements equal to it.
pub fn remove_key(doc: Value, key: &str) -> Result<Value> {
    match doc {
        Value::Object(mut map) => {
            map.remove(key);
            Ok(Value::Object(map))
        }
        Value::Array(items) => Ok(Value::Array(items.into_iter().filter(|i| i.as_str() != Some(key)).collect())),
        _ => Err(Error::data("22023", "cannot delete from scalar")),
    }
}

/// `doc - index`: an array without the element at `index` (negative from the end).
pub fn remove_index(doc: Value, i: i64) -> Result<Value> {
    match doc {
        Value::Array(mut items) => {
            if let Some(at) = index(items.len(), i) {
                items.remove(at);
            }
            Ok(Value::Array(items))
        }
        Value::Object(_) => Err(Error::data("22023", "cannot delete from object using integer index")),
        _ => Err(Error::data("22023", "cannot delete from scalar")),
    }
}

/// `jsonb_set(doc, path, new, create_missing)`.
pub fn set_path(doc: Value, path: &[String], new: Value, create: bool) -> Result<Value> {
    let Some((first, rest)) = path.split_first() else { return Ok(doc) };
    match doc {
        Value::Object(mut map) => {
            if rest.is_empty() {
                if create || map.contains_key(first) {
                    map.insert(first.clone(), new);
                }
            } else if let Some(inner) = map.remove(first) {
                map.insert(first.clone(), set_path(inner, rest, new, create)?);
            }
            Ok(Value::Object(map))
        }
        Value::Array(mut items) => {
            let i: i64 = first.trim().parse().map_err(|_| {
                Error::data("22P02", format!("path element at position 1 is not an integer: \"{first}\""))
            })?;
            match index(items.len(), i) {
                Some(at) if rest.is_empty() => {
                    if let Some(slot) = items.get_mut(at) {
                        *slot = new;
                    }
                }
                Some(at) => {
                    let inner = items.remove(at);
                    items.insert(at, set_path(inner, rest, new, create)?);
                }
                // Past either end: added at that end when the path ends here.
                None if rest.is_empty() && create => {
                    if i < 0 {
                        items.insert(0, new);
                    } else {
                        items.push(new);
                    }
                }
                None => {}
            }
            Ok(Value::Array(items))
        }
        _ => Err(Error::data("22023", "cannot set path in scalar")),
    }
}

/// The type name `jsonb_typeof` gives.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_read_as_postgresql_reads_them() {
        let canonical = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11";
        for text in [
            "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11",
            "{a0eebc99-9c0b4ef8-bb6d6bb9-bd380a11}",
            "a0eebc999c0b4ef8bb6d6bb9bd380a11",
            "a0ee-bc99-9c0b-4ef8-bb6d-6bb9-bd38-0a11",
            "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}",
        ] {
            assert_eq!(uuid_in(text).unwrap(), canonical, "{text}");
        }
        for text in
            ["not-a-uuid", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1", "-a0eebc999c0b4ef8bb6d6bb9bd380a11", "a0e-ebc99"]
        {
            assert_eq!(uuid_in(text).unwrap_err().sqlstate(), "22P02", "{text}");
        }
        assert_eq!(uuid_from_bytes(&uuid_bytes(canonical).unwrap()).unwrap(), canonical);
    }

    #[test]
    fn jsonb_prints_canonically() {
        let doc = json_in(r#"{"bb": 1, "a": [1,2,{"z":null}], "c": "x\u0041", "a": true}"#).unwrap();
        assert_eq!(jsonb_text(&doc), r#"{"a": true, "c": "xA", "bb": 1}"#);
        assert_eq!(jsonb_text(&json_in("[]").unwrap()), "[]");
        assert_eq!(json_in("{").unwrap_err().sqlstate(), "22P02");
    }

    #[test]
    fn jsonb_numbers_are_numerics() {
        // The forms PostgreSQL 15 prints for `'[...]'::jsonb`.
        let doc = TextType::Jsonb
            .input("[1e2, 1.50, 1.5e-3, -0.0, 0.00001e3, 1.2300e1, 99998969694839.983485848, 1E+2, -0, 12345678901234567890123, 1e-20, -7.25e1]")
            .unwrap();
        assert_eq!(
            doc,
            "[100, 1.50, 0.0015, 0.0, 0.01, 12.300, 99998969694839.983485848, 100, 0, 12345678901234567890123, 0.00000000000000000001, -72.5]"
        );
        assert_eq!(numeric_text("1e131071").map(|t| t.len()), Some(131_072));
        assert_eq!(numeric_text("1e-16383").map(|t| t.len()), Some(16_385));
        assert_eq!(numeric_text("0e200000").as_deref(), Some("0"));
        for overflow in ["1e131072", "1e-16384", "0e-20000", "0.5e-16383", "1e999999999999999999999"] {
            assert_eq!(TextType::Jsonb.input(overflow).unwrap_err().sqlstate(), "22003", "{overflow}");
        }
        // `json` keeps what was written.
        assert_eq!(TextType::Json.input("1e2").unwrap(), "1e2");
        let a = json_in(r#"{"a": [1.0, 2e0]}"#).unwrap();
        let b = json_in(r#"{"a": [2, 1]}"#).unwrap();
        assert!(contains(&a, &b) && contains(&b, &a));
        assert_eq!(as_text(&json_in("1.50").unwrap()).as_deref(), Some("1.50"));
        let (x, y) = (json_in(r#"{"a": [1.0, {"b": 2e0}]}"#).unwrap(), json_in(r#"{"a": [1, {"b": 2}]}"#).unwrap());
        assert!(equal(&x, &y));
        assert!(!equal(&json_in("[1, 1]").unwrap(), &json_in("[1]").unwrap()));
        assert!(!equal(&json_in(r#"{"a": 1}"#).unwrap(), &json_in(r#"{"a": 1, "b": 2}"#).unwrap()));
    }

    #[test]
    fn containment_follows_postgresql() {
        let c = |a: &str, b: &str| contains(&json_in(a).unwrap(), &json_in(b).unwrap());
        assert!(c(r#"{"a": 1, "b": [1, 2, 3]}"#, r#"{"b": [3, 1]}"#));
        assert!(!c(r#"{"a": 1}"#, r#"{"a": 2}"#));
        assert!(c("[1, 2, [3, 4]]", "[[4]]"));
        assert!(c(r#"["a", "b"]"#, r#""a""#));
        assert!(!c(r#"{"a": [1, 2]}"#, r#"{"a": 1}"#));
        assert!(c("1", "1.0"));
        assert!(has_key(&json_in(r#"["a", 1]"#).unwrap(), "a"));
    }

    #[test]
    fn paths_sets_and_removals() {
        let doc = json_in(r#"{"a": [1, {"b": 2}]}"#).unwrap();
        let path = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(at_path(&doc, &path(&["a", "-1", "b"])), Some(&Value::from(2)));
        let set = set_path(doc.clone(), &path(&["a", "1", "c"]), Value::from(3), true).unwrap();
        assert_eq!(jsonb_text(&set), r#"{"a": [1, {"b": 2, "c": 3}]}"#);
        let appended = set_path(doc.clone(), &path(&["a", "9"]), Value::from(3), true).unwrap();
        assert_eq!(jsonb_text(&appended), r#"{"a": [1, {"b": 2}, 3]}"#);
        assert_eq!(jsonb_text(&remove_key(doc, "a").unwrap()), "{}");
        assert_eq!(remove_index(Value::from(1), 0).unwrap_err().sqlstate(), "22023");
        assert_eq!(jsonb_text(&concat(json_in("[1]").unwrap(), json_in(r#"{"a":1}"#).unwrap())), r#"[1, {"a": 1}]"#);
    }
}
