//! PostgreSQL's number patterns: `to_char(number, '9G999D99')` and `to_number(text,
//! '99G999D99')`, in the C locale (`D` is `.`, `G` is `,`, `L` is a blank).
//!
//! `9` is a digit (a blank where the number has none), `0` a digit shown as 0, `.`/`D` the
//! decimal point, `,`/`G` a group separator (blank left of the number), `S` the sign (`+`/`-`),
//! `MI` a minus (blank when positive), `PR` angle brackets around a negative number, `FM` no
//! padding (nor trailing zeros where `9`s stand), any other character itself. Without `S`, `MI`
//! or `PR` a blank or `-` stands before the number. Too many digits print `#` in every digit
//! place. `V`, `EEEE`, `RN`, `TH`, `PL` and `SG` are refused (0A000).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Decimal128Builder, StringBuilder};
use arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{exec_err, Result as DfResult, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::error::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token {
    Digit { zero: bool },
    Point,
    Group,
    Sign,
    Minus,
    Brackets,
    Blank,
    Literal(char),
}

/// A parsed number pattern.
#[derive(Debug)]
struct Pattern {
    tokens: Vec<Token>,
    fill_mode: bool,
}

impl Pattern {
    fn parse(text: &str) -> Result<Self> {
        let mut tokens = vec![];
        let mut fill_mode = false;
        let upper: Vec<char> = text.chars().map(|c| c.to_ascii_uppercase()).collect();
        let mut i = 0;
        let starts = |i: usize, word: &str| {
            upper.get(i..).is_some_and(|rest| rest.iter().take(word.len()).copied().eq(word.chars()))
        };
        while let Some(&c) = upper.get(i) {
            if ["V", "EEEE", "RN", "TH", "PL", "SG"].iter().any(|w| starts(i, w)) {
                return Err(Error::NotSupported(format!("the number pattern {text:?} (V, EEEE, RN, TH, PL, SG)")));
            }
            let (token, width) = match c {
                '9' => (Some(Token::Digit { zero: false }), 1),
                '0' => (Some(Token::Digit { zero: true }), 1),
                '.' | 'D' => (Some(Token::Point), 1),
                ',' | 'G' => (Some(Token::Group), 1),
                'S' => (Some(Token::Sign), 1),
                'L' => (Some(Token::Blank), 1),
                'F' if starts(i, "FM") => {
                    fill_mode = true;
                    (None, 2)
                }
                'M' if starts(i, "MI") => (Some(Token::Minus), 2),
                'P' if starts(i, "PR") => (Some(Token::Brackets), 2),
                // Any other character stands for itself (as written, not upper-cased).
                _ => (Some(Token::Literal(text.chars().nth(i).unwrap_or(c))), 1),
            };
            tokens.extend(token);
            i += width;
        }
        if tokens.iter().filter(|t| **t == Token::Point).count() > 1 {
            return Err(Error::data("42601", "multiple decimal points"));
        }
        Ok(Self { tokens, fill_mode })
    }

    fn digits(&self) -> (usize, usize) {
        let point = self.tokens.iter().position(|t| *t == Token::Point).unwrap_or(self.tokens.len());
        let count = |tokens: &[Token]| tokens.iter().filter(|t| matches!(t, Token::Digit { .. })).count();
        let (whole, fraction) = self.tokens.split_at(point.min(self.tokens.len()));
        (count(whole), count(fraction))
    }

    /// What precedes the number's first digit or its point: the padding of the places left
    /// empty (none in fill mode) and the sign, where the pattern puts none of its own (`-` or a
    /// blank), a leading `S`, or PR's `<`.
    fn begin(
        &self,
        out: &mut String,
        pending_pad: &mut String,
        sign_done: &mut bool,
        negative: bool,
        explicit_sign: bool,
    ) {
        if !self.fill_mode {
            out.push_str(pending_pad);
        }
        pending_pad.clear();
        if *sign_done {
            return;
        }
        if !explicit_sign {
            if negative {
                out.push('-');
            } else if !self.fill_mode {
                out.push(' ');
            }
            *sign_done = true;
        } else if self.tokens.first() == Some(&Token::Sign) {
            out.push(if negative { '-' } else { '+' });
            *sign_done = true;
        } else if self.tokens.contains(&Token::Brackets) && negative {
            out.push('<');
            *sign_done = true;
        }
    }

    /// `number` (its digits before and after the point, and whether it is negative) as the
    /// pattern prints it.
    fn render(&self, whole: &str, fraction: &str, negative: bool) -> String {
        let (int_places, _) = self.digits();
        let overflow = whole.len() > int_places && whole != "0";
        // The integer digits, right-aligned in the pattern's integer places.
        let shown_whole = if whole == "0" { "" } else { whole };
        let first_zero =
            self.tokens.iter().take_while(|t| **t != Token::Point).position(|t| *t == Token::Digit { zero: true });
        let explicit_sign = self.tokens.iter().any(|t| matches!(t, Token::Sign | Token::Minus | Token::Brackets));
        let mut out = String::new();
        let mut place = 0usize; // integer digit places seen
        let mut fraction_digits = fraction.chars();
        let mut started = false; // a digit has been printed
        let mut in_fraction = false;
        let mut sign_done = false;
        let mut pending_pad = String::new();
        // Trailing zeros of the fraction printed where `9`s stand are dropped in fill mode.
        let mut fraction_out = String::new();
        let mut trailing_droppable = 0usize;
        for (index, token) in self.tokens.iter().enumerate() {
            match token {
                Token::Digit { zero } if !in_fraction => {
                    let digit = if overflow {
                        Some('#')
                    } else {
                        let offset = int_places - place;
                        // The place's digit, counting from the right.
                        (offset <= shown_whole.len())
                            .then(|| shown_whole.as_bytes().get(shown_whole.len() - offset).map(|b| *b as char))
                            .flatten()
                    };
                    let zero_filled = first_zero.is_some_and(|z| index >= z) || *zero;
                    let last_place = place + 1 == int_places;
                    let digit = digit.or_else(|| {
                        // 0 is printed in the last place when nothing else would show it.
                        let alone = last_place && shown_whole.is_empty() && (self.digits().1 == 0 || self.fill_mode);
                        (zero_filled || alone).then_some('0')
                    });
                    place += 1;
                    match digit {
                        Some(d) => {
                            if !started {
                                self.begin(&mut out, &mut pending_pad, &mut sign_done, negative, explicit_sign);
                            }
                            started = true;
                            out.push(d);
                        }
                        None => pending_pad.push(' '),
                    }
                }
                Token::Digit { zero } => {
                    let d = if overflow { '#' } else { fraction_digits.next().unwrap_or('0') };
                    fraction_out.push(d);
                    if d == '0' && !zero && self.fill_mode {
                        trailing_droppable += 1;
                    } else {
                        trailing_droppable = 0;
                    }
                }
                Token::Point => {
                    if !started {
                        self.begin(&mut out, &mut pending_pad, &mut sign_done, negative, explicit_sign);
                        started = true;
                    }
                    in_fraction = true;
                    out.push('.');
                }
                Token::Group if !in_fraction => {
                    if started {
                        out.push(',');
                    } else {
                        pending_pad.push(' ');
                    }
                }
                Token::Group => fraction_out.push(','),
                Token::Sign if index == 0 => {}
                Token::Sign => out.push(if negative { '-' } else { '+' }),
                Token::Minus => out.push(if negative { '-' } else { ' ' }),
                Token::Brackets => {
                    flush(&mut out, &mut fraction_out, trailing_droppable);
                    trailing_droppable = 0;
                    out.push(if negative { '>' } else { ' ' });
                    if !negative && !self.fill_mode {
                        out.insert(0, ' ');
                    }
                }
                Token::Blank => {
                    if !self.fill_mode {
                        out.push(' ')
                    }
                }
                Token::Literal(c) => {
                    flush(&mut out, &mut fraction_out, trailing_droppable);
                    trailing_droppable = 0;
                    if !started {
                        if !self.fill_mode {
                            out.push_str(&pending_pad);
                        }
                        pending_pad.clear();
                    }
                    out.push(*c);
                }
            }
        }
        flush(&mut out, &mut fraction_out, trailing_droppable);
        out
    }
}

fn flush(out: &mut String, fraction: &mut String, droppable: usize) {
    let keep = fraction.len().saturating_sub(droppable);
    out.push_str(&fraction[..keep]);
    fraction.clear();
}

/// A number as its digit strings, rounded half away from zero to `places` decimals: (whole,
/// fraction, negative).
fn digits_of(unscaled: i128, scale: u32, places: usize) -> (String, String, bool) {
    let places = places as u32;
    let negative = unscaled < 0;
    let mut magnitude = unscaled.unsigned_abs();
    if scale > places {
        let divisor = 10u128.saturating_pow(scale - places);
        let rest = magnitude % divisor;
        magnitude /= divisor;
        if rest * 2 >= divisor {
            magnitude += 1;
        }
    } else {
        magnitude = magnitude.saturating_mul(10u128.saturating_pow(places - scale));
    }
    let text = format!("{magnitude:0>width$}", width = places as usize + 1);
    let (whole, fraction) = text.split_at(text.len() - places as usize);
    let whole = whole.trim_start_matches('0');
    let whole = if whole.is_empty() { "0" } else { whole };
    let is_zero = magnitude == 0;
    (whole.to_string(), fraction.to_string(), negative && !is_zero)
}

/// `to_char(number, pattern)` for one value.
pub fn to_char(value: &ScalarValue, pattern: &str) -> Result<Option<String>> {
    let pattern = Pattern::parse(pattern)?;
    let (_, places) = pattern.digits();
    let (whole, fraction, negative) = match value {
        v if v.is_null() => return Ok(None),
        ScalarValue::Decimal128(Some(v), _, s) => digits_of(*v, (*s).max(0) as u32, places),
        ScalarValue::Float64(Some(f)) => float_digits(*f, places),
        ScalarValue::Float32(Some(f)) => float_digits(f64::from(*f), places),
        other => match other.cast_to(&DataType::Int64).ok() {
            Some(ScalarValue::Int64(Some(i))) => digits_of(i128::from(i), 0, places),
            _ => {
                return Err(Error::data(
                    "42883",
                    format!("function to_char({}, text) does not exist", other.data_type()),
                ))
            }
        },
    };
    Ok(Some(pattern.render(&whole, &fraction, negative)))
}

fn float_digits(f: f64, places: usize) -> (String, String, bool) {
    let text = format!("{:.*}", places, f.abs());
    let (whole, fraction) = text.split_once('.').unwrap_or((&text, ""));
    let zero = whole.chars().chain(fraction.chars()).all(|c| c == '0');
    let whole = whole.trim_start_matches('0');
    let whole = if whole.is_empty() { "0" } else { whole };
    (whole.to_string(), fraction.to_string(), f < 0.0 && !zero)
}

/// `to_number(text, pattern)` for one value: the number's digits, sign and point, at the
/// pattern's scale.
pub fn to_number(text: &str, pattern: &str, scale: u32) -> Result<i128> {
    let _ = Pattern::parse(pattern)?;
    let negative = text.contains('-') || (text.contains('<') && text.contains('>'));
    let mut whole = String::new();
    let mut fraction = String::new();
    let mut seen_point = false;
    for c in text.chars() {
        match c {
            '0'..='9' if seen_point => fraction.push(c),
            '0'..='9' => whole.push(c),
            '.' => seen_point = true,
            _ => {}
        }
    }
    if whole.is_empty() && fraction.is_empty() {
        return Err(Error::data("22P02", "invalid input syntax for type numeric: \" \""));
    }
    let overflow = || Error::data("22003", "numeric field overflow");
    let digits: String = whole.chars().chain(fraction.chars()).collect();
    let unscaled: i128 = digits.parse().map_err(|_| overflow())?;
    let value = unscaled;
    let current = fraction.len() as u32;
    let value = if current > scale {
        let divisor = 10i128.checked_pow(current - scale).ok_or_else(overflow)?;
        value / divisor + i128::from((value % divisor) * 2 >= divisor)
    } else {
        value.checked_mul(10i128.checked_pow(scale - current).ok_or_else(overflow)?).ok_or_else(overflow)?
    };
    Ok(if negative { -value } else { value })
}

/// The scale `to_number` gives for a pattern: its digits after the point.
fn pattern_scale(pattern: &str) -> u32 {
    Pattern::parse(pattern).map(|p| p.digits().1 as u32).unwrap_or(0)
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ToChar {
    signature: Signature,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ToNumber {
    signature: Signature,
}

/// The functions, to register in a session: `__pg_to_char_number` (which `to_char` of a number
/// pattern is rewritten to) and `to_number`.
pub fn functions() -> Vec<ScalarUDF> {
    vec![
        ScalarUDF::from(ToChar { signature: Signature::any(2, Volatility::Immutable) }),
        ScalarUDF::from(ToNumber { signature: Signature::any(2, Volatility::Immutable) }),
    ]
}

fn pattern_at(args: &[ColumnarValue], row: usize) -> DfResult<Option<String>> {
    Ok(match args.get(1) {
        Some(ColumnarValue::Scalar(s)) => match s.cast_to(&DataType::Utf8)? {
            ScalarValue::Utf8(p) => p,
            _ => None,
        },
        Some(ColumnarValue::Array(a)) => {
            let a = arrow::compute::cast(a, &DataType::Utf8)?;
            let a = a.as_string::<i32>();
            a.is_valid(row).then(|| a.value(row).to_string())
        }
        None => None,
    })
}

impl ScalarUDFImpl for ToChar {
    fn name(&self) -> &str {
        "__pg_to_char_number"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let Some(values) = args.args.first() else { return exec_err!("to_char takes a value and a pattern") };
        let values = values.to_array(rows)?;
        let mut out = StringBuilder::new();
        for row in 0..rows {
            let value = ScalarValue::try_from_array(&values, row)?;
            match pattern_at(&args.args, row)? {
                Some(pattern) => {
                    out.append_option(to_char(&value, &pattern).map_err(datafusion::error::DataFusionError::from)?)
                }
                None => out.append_null(),
            }
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish()) as ArrayRef))
    }
}

impl ScalarUDFImpl for ToNumber {
    fn name(&self) -> &str {
        "to_number"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Decimal128(38, 0))
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let scale = match args.scalar_arguments.get(1) {
            Some(Some(
                ScalarValue::Utf8(Some(p)) | ScalarValue::LargeUtf8(Some(p)) | ScalarValue::Utf8View(Some(p)),
            )) => pattern_scale(p),
            _ => 0,
        };
        Ok(Arc::new(Field::new(self.name(), DataType::Decimal128(38, scale.min(38) as i8), true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let DataType::Decimal128(precision, scale) = args.return_field.data_type().clone() else {
            return Err(datafusion::error::DataFusionError::Internal("to_number returns a decimal".into()));
        };
        let Some(texts) = args.args.first() else { return exec_err!("to_number takes a text and a pattern") };
        let texts = arrow::compute::cast(&texts.to_array(rows)?, &DataType::Utf8)?;
        let texts = texts.as_string::<i32>();
        let mut out = Decimal128Builder::with_capacity(rows);
        for row in 0..rows {
            match (texts.is_valid(row), pattern_at(&args.args, row)?) {
                (true, Some(pattern)) => out.append_value(
                    to_number(texts.value(row), &pattern, scale.max(0) as u32)
                        .map_err(datafusion::error::DataFusionError::from)?,
                ),
                _ => out.append_null(),
            }
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish().with_precision_and_scale(precision, scale)?) as ArrayRef))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn number(value: f64, pattern: &str) -> String {
        let decimal = ScalarValue::Decimal128(Some((value * 1000.0).round() as i128), 20, 3);
        format!("[{}]", to_char(&decimal, pattern).unwrap().unwrap())
    }

    #[test]
    fn prints_numbers_as_postgresql_does() {
        // Each as PostgreSQL 15 prints it.
        assert_eq!(number(123.456, "999D99"), "[ 123.46]");
        assert_eq!(number(1234567.8, "FM9,999,999.00"), "[1,234,567.80]");
        assert_eq!(number(42.0, "0000"), "[ 0042]");
        assert_eq!(number(42.0, "S999"), "[ +42]");
        assert_eq!(number(-42.0, "S999"), "[ -42]");
        assert_eq!(number(42.0, "999MI"), "[ 42 ]");
        assert_eq!(number(-42.0, "999MI"), "[ 42-]");
        assert_eq!(number(-42.0, "9999"), "[  -42]");
        assert_eq!(number(0.5, "9.99"), "[  .50]");
        assert_eq!(number(0.5, "0.99"), "[ 0.50]");
        assert_eq!(number(42.0, "9099"), "[  042]");
        assert_eq!(number(1.0, "FM9.99"), "[1.]");
        assert_eq!(number(1234.0, "9,999"), "[ 1,234]");
        assert_eq!(number(12.0, "9,999"), "[    12]");
        assert_eq!(number(12.0, "FM9,999"), "[12]");
        assert_eq!(number(12345.0, "999"), "[ ###]");
        assert_eq!(number(12.345, "99.9"), "[ 12.3]");
        assert_eq!(number(-0.004, "9.99"), "[  .00]");
        assert_eq!(number(1234.5, "$9,999.99"), "[$ 1,234.50]");
        assert_eq!(number(1234.5, "L9G999D99"), "[  1,234.50]");
        assert_eq!(number(-5.0, "FM999"), "[-5]");
        assert_eq!(number(5.0, "FM000"), "[005]");
        assert_eq!(number(1.5, "FM990.90"), "[1.50]");
        assert_eq!(number(-42.0, "999PR"), "[ <42>]");
        assert_eq!(number(1234567.891, "9G999G999D999"), "[ 1,234,567.891]");
        assert_eq!(number(0.0, "999"), "[   0]");
        assert_eq!(number(0.0, "9.99"), "[  .00]");
        assert_eq!(number(42.0, "999PR"), "[  42 ]");
        assert_eq!(number(0.0, "FM999"), "[0]");
        assert_eq!(number(0.0, "FM9.99"), "[0.]");
        assert_eq!(number(-1234.5, "FM9,999.99"), "[-1,234.5]");
        assert_eq!(number(-1234.5, "$9,999.99"), "[$-1,234.50]");
        assert_eq!(to_char(&ScalarValue::Float64(Some(1.23456)), "9.999").unwrap().as_deref(), Some(" 1.235"));
        assert!(to_char(&ScalarValue::Int64(Some(1)), "9.9EEEE").is_err());
    }

    #[test]
    fn reads_numbers_as_postgresql_does() {
        assert_eq!(to_number("12,345.67", "99G999D99", 2).unwrap(), 1234567);
        assert_eq!(to_number("-12.5", "999.9", 1).unwrap(), -125);
        assert_eq!(to_number("$1,234", "L9,999", 0).unwrap(), 1234);
        assert_eq!(to_number("  42", "9999", 0).unwrap(), 42);
        assert_eq!(to_number("abc", "999", 0).unwrap_err().sqlstate(), "22P02");
    }
}
