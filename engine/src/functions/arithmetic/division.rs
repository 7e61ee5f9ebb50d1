//! Numeric division with PostgreSQL's result scale.
//!
//! PostgreSQL's `numeric` keeps a scale per value, and its division picks the quotient's scale
//! from the operands' values (`select_div_scale` in `numeric.c`): at least 16 significant
//! digits, `16 - 4 * estimated weight of the quotient` (weights count base-10000 digits), never
//! less than either operand's scale, at most 1000, the last digit rounded half away from zero.
//! So `1/3::numeric` is `0.33333333333333333333` (scale 20) and `10::numeric/4` is
//! `2.5000000000000000` (scale 16).
//!
//! An Arrow decimal has one scale per column, fixed when the query is planned. Where both
//! operands are constants (`1/3::numeric`, `7.0/2`), the analyzer evaluates them and uses
//! PostgreSQL's rule on their values, so the result is PostgreSQL's. Otherwise the scale is
//! what the rule gives a quotient of weight 0 (between 1 and 9999, the first digit group of the
//! dividend above the divisor's): `max(16, dividend scale, divisor scale)`; PostgreSQL's own
//! scale varies by row (20 for `1.00/3`, 12 for `50000/2`), which one column cannot follow.
//!
//! The result is a `Decimal128` of precision 38 (Arrow's largest that Delta can store, so a
//! `CREATE TABLE AS` keeps it): where the rule's scale would leave too few integer digits for a
//! constant quotient, the scale is cut to fit; a row whose quotient does not fit raises 22003.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Decimal128Array};
use arrow::datatypes::{i256, DataType, Decimal128Type};
use datafusion::common::{DataFusionError, Result as DfResult, ScalarValue};
use datafusion::logical_expr::simplify::SimplifyContext;
use datafusion::logical_expr::{ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};
use datafusion::optimizer::simplify_expressions::ExprSimplifier;

use super::{data_error, division_by_zero};

/// PostgreSQL's `NUMERIC_MIN_SIG_DIGITS`: a quotient has at least this many significant digits.
pub(super) const SIGNIFICANT_DIGITS_MIN: i32 = 16;
/// Decimal digits in one of PostgreSQL's base-10000 numeric digits (`DEC_DIGITS`).
pub(super) const DIGITS_PER_GROUP: i32 = 4;
/// Arrow's `Decimal128` precision, the widest Delta stores.
pub(super) const PRECISION_MAX: u8 = 38;

/// `a / b` on two decimals, rounded half away from zero to `scale` digits.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct NumericDivision {
    scale: i8,
    signature: Signature,
}

pub(super) const NAME: &str = "__pg_numeric_div";

impl NumericDivision {
    pub(super) fn new(scale: i8) -> Self {
        Self { scale, signature: Signature::any(2, Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for NumericDivision {
    fn name(&self) -> &str {
        NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Decimal128(PRECISION_MAX, self.scale))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let [left, right] = arrays.as_slice() else {
            return Err(DataFusionError::Plan(format!("{NAME} needs two arguments")));
        };
        let result = divide(left, right, self.scale)?;
        if scalar {
            return Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&result, 0)?));
        }
        Ok(ColumnarValue::Array(result))
    }
}

/// The scale of every row's quotient and the two operands' decimal types.
fn divide(left: &ArrayRef, right: &ArrayRef, scale: i8) -> DfResult<ArrayRef> {
    let (DataType::Decimal128(_, left_scale), DataType::Decimal128(_, right_scale)) =
        (left.data_type(), right.data_type())
    else {
        return Err(DataFusionError::Plan(format!(
            "{NAME} takes two decimals, not {} and {}",
            left.data_type(),
            right.data_type()
        )));
    };
    // a / b at `scale` = a * 10^(scale - left_scale + right_scale) / b, in unscaled integers.
    let shift = i32::from(scale) - i32::from(*left_scale) + i32::from(*right_scale);
    let (left, right) = (left.as_primitive::<Decimal128Type>(), right.as_primitive::<Decimal128Type>());
    let quotients: Decimal128Array = left
        .iter()
        .zip(right.iter())
        .map(|pair| match pair {
            (Some(a), Some(b)) => quotient(a, b, shift).map(Some),
            _ => Ok(None),
        })
        .collect::<DfResult<_>>()?;
    Ok(Arc::new(quotients.with_precision_and_scale(PRECISION_MAX, scale)?))
}

/// `a * 10^shift` and `b` (or `a` and `b * 10^-shift`) as 256-bit integers, for a quotient of
/// `shift` more decimal digits than `a / b` has; 22012 when `b` is 0.
fn scaled_operands(a: i128, b: i128, shift: i32) -> DfResult<(i256, i256)> {
    if b == 0 {
        return Err(division_by_zero());
    }
    let overflow = || data_error("22003", "numeric field overflow (Sluice's numerics hold 38 digits)");
    let (mut numerator, mut denominator) = (i256::from_i128(a), i256::from_i128(b));
    let ten_to = |n: u32| i256::from_i128(10).checked_pow(n).ok_or_else(overflow);
    if shift >= 0 {
        numerator = numerator.checked_mul(ten_to(shift.unsigned_abs())?).ok_or_else(overflow)?;
    } else {
        denominator = denominator.checked_mul(ten_to(shift.unsigned_abs())?).ok_or_else(overflow)?;
    }
    Ok((numerator, denominator))
}

/// `round(a * 10^shift / b)`, half away from zero, as an unscaled decimal of precision 38.
pub(super) fn quotient(a: i128, b: i128, shift: i32) -> DfResult<i128> {
    let overflow = || data_error("22003", "numeric field overflow (Sluice's numerics hold 38 digits)");
    let (numerator, denominator) = scaled_operands(a, b, shift)?;
    let (q, r) = (numerator.wrapping_div(denominator), numerator.wrapping_rem(denominator));
    let twice = r.wrapping_abs().wrapping_mul(i256::from_i128(2));
    let rounded = if twice >= denominator.wrapping_abs() {
        if (numerator < i256::ZERO) != (denominator < i256::ZERO) {
            q.wrapping_sub(i256::ONE)
        } else {
            q.wrapping_add(i256::ONE)
        }
    } else {
        q
    };
    let limit = i256::from_i128(10).checked_pow(u32::from(PRECISION_MAX)).ok_or_else(overflow)?;
    if rounded.wrapping_abs() >= limit {
        return Err(overflow());
    }
    rounded.to_i128().ok_or_else(overflow)
}

/// `div(a, b)`: PostgreSQL's integer quotient of two numerics, truncated toward zero, a numeric
/// of scale 0 (`div(-7.5, 2)` is `-3`); 22012 for a zero divisor. Integers are numerics of
/// scale 0.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct IntegerQuotient {
    signature: Signature,
}

impl IntegerQuotient {
    pub(super) fn new() -> Self {
        Self { signature: Signature::user_defined(Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for IntegerQuotient {
    fn name(&self) -> &str {
        "div"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        if arg_types.len() != 2 {
            return Err(data_error("42883", "function div takes two numerics"));
        }
        arg_types
            .iter()
            .map(|t| match t {
                DataType::Decimal128(..) => Ok(t.clone()),
                DataType::Null => Ok(DataType::Decimal128(PRECISION_MAX, 0)),
                t if t.is_integer() => Ok(DataType::Decimal128(20, 0)),
                other => Err(data_error(
                    "42883",
                    &format!("function div({}, numeric) does not exist", crate::types::arrow_type_pg_name(other)),
                )),
            })
            .collect()
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Decimal128(PRECISION_MAX, 0))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let [left, right] = arrays.as_slice() else {
            return Err(DataFusionError::Plan("div needs two arguments".into()));
        };
        let (DataType::Decimal128(_, left_scale), DataType::Decimal128(_, right_scale)) =
            (left.data_type(), right.data_type())
        else {
            return Err(DataFusionError::Plan(format!("div of {} and {}", left.data_type(), right.data_type())));
        };
        // a / 10^ls over b / 10^rs = a * 10^rs / (b * 10^ls).
        let shift = i32::from(*right_scale) - i32::from(*left_scale);
        let (left, right) = (left.as_primitive::<Decimal128Type>(), right.as_primitive::<Decimal128Type>());
        let quotients: Decimal128Array = left
            .iter()
            .zip(right.iter())
            .map(|pair| match pair {
                (Some(a), Some(b)) => truncated_quotient(a, b, shift).map(Some),
                _ => Ok(None),
            })
            .collect::<DfResult<_>>()?;
        let result: ArrayRef = Arc::new(quotients.with_precision_and_scale(PRECISION_MAX, 0)?);
        if scalar {
            return Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&result, 0)?));
        }
        Ok(ColumnarValue::Array(result))
    }
}

/// `trunc(a * 10^shift / b)`, as an unscaled decimal of precision 38 and scale 0.
fn truncated_quotient(a: i128, b: i128, shift: i32) -> DfResult<i128> {
    let overflow = || data_error("22003", "numeric field overflow (Sluice's numerics hold 38 digits)");
    let (numerator, denominator) = scaled_operands(a, b, shift)?;
    let q = numerator.wrapping_div(denominator);
    let limit = i256::from_i128(10).checked_pow(u32::from(PRECISION_MAX)).ok_or_else(overflow)?;
    if q.wrapping_abs() >= limit {
        return Err(overflow());
    }
    q.to_i128().ok_or_else(overflow)
}

/// A decimal operand's unscaled value and scale, where the operand is a constant.
fn constant(expr: &Expr) -> Option<(i128, i8)> {
    if expr.any_column_refs() || expr.is_volatile() {
        return None;
    }
    let simplifier = ExprSimplifier::new(SimplifyContext::builder().build());
    match simplifier.simplify(expr.clone()).ok()? {
        Expr::Literal(ScalarValue::Decimal128(Some(v), _, s), _) => Some((v, s)),
        _ => None,
    }
}

/// PostgreSQL's weight (index of the first non-zero base-10000 digit, 0 for units) and that
/// digit, of `value * 10^-scale`; `(0, 0)` for zero.
pub(super) fn weight_and_first_group(value: i128, scale: i8) -> (i32, u32) {
    if value == 0 {
        return (0, 0);
    }
    // Pad the fraction to whole groups, so the digits split into base-10000 digits from the right.
    let scale = i32::from(scale.max(0));
    let padded = (scale + DIGITS_PER_GROUP - 1) / DIGITS_PER_GROUP * DIGITS_PER_GROUP;
    let mut digits = value.unsigned_abs().to_string();
    digits.extend(std::iter::repeat_n('0', (padded - scale) as usize));
    let length = digits.len() as i32;
    let top = (length - 1) / DIGITS_PER_GROUP;
    let first = digits.get(..(length - top * DIGITS_PER_GROUP) as usize).and_then(|d| d.parse().ok()).unwrap_or(0);
    (top - padded / DIGITS_PER_GROUP, first)
}

/// The scale PostgreSQL gives `a / b` (`select_div_scale`), from the operands' values where both
/// are constants, else for a quotient of weight 0; cut so the quotient fits 38 digits.
pub(super) fn result_scale(left: &Expr, right: &Expr, left_scale: i8, right_scale: i8) -> i8 {
    let operand_scale = i32::from(left_scale.max(right_scale).max(0));
    let (Some((a, a_scale)), Some((b, b_scale))) = (constant(left), constant(right)) else {
        return SIGNIFICANT_DIGITS_MIN.max(operand_scale).min(i32::from(PRECISION_MAX) - 1) as i8;
    };
    let ((weight1, first1), (weight2, first2)) =
        (weight_and_first_group(a, a_scale), weight_and_first_group(b, b_scale));
    let mut quotient_weight = weight1 - weight2;
    if first1 <= first2 {
        quotient_weight -= 1;
    }
    let scale = (SIGNIFICANT_DIGITS_MIN - quotient_weight * DIGITS_PER_GROUP).max(operand_scale).max(0);
    // The integer digits of |a / b|, which the scale must leave room for.
    let integer_digits = quotient(a, b, i32::from(b_scale) - i32::from(a_scale))
        .map(|q| q.unsigned_abs().checked_ilog10().map_or(1, |d| d as i32 + 1))
        .unwrap_or(1);
    scale.min(i32::from(PRECISION_MAX) - integer_digits).clamp(0, i32::from(PRECISION_MAX)) as i8
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::logical_expr::lit;

    fn decimal(v: i128, p: u8, s: i8) -> Expr {
        lit(ScalarValue::Decimal128(Some(v), p, s))
    }

    #[test]
    fn constant_quotients_take_postgres_scale() {
        // 1/3, 10/4, 7.0/2, 1000000/3, 0.001/7, 50000/2
        assert_eq!(result_scale(&decimal(1, 10, 0), &decimal(3, 10, 0), 0, 0), 20);
        assert_eq!(result_scale(&decimal(10, 10, 0), &decimal(4, 10, 0), 0, 0), 16);
        assert_eq!(result_scale(&decimal(70, 2, 1), &decimal(2, 10, 0), 1, 0), 16);
        assert_eq!(result_scale(&decimal(1_000_000, 10, 0), &decimal(3, 10, 0), 0, 0), 12);
        assert_eq!(result_scale(&decimal(1, 3, 3), &decimal(7, 10, 0), 3, 0), 20);
        assert_eq!(result_scale(&decimal(50000, 10, 0), &decimal(2, 10, 0), 0, 0), 12);
        assert_eq!(result_scale(&decimal(1, 10, 0), &decimal(30000, 10, 0), 0, 0), 24);
    }

    #[test]
    fn integer_quotients_truncate_toward_zero() {
        assert_eq!(truncated_quotient(-75, 2, -1).unwrap(), -3);
        assert_eq!(truncated_quotient(79, 21, 0).unwrap(), 3);
        assert_eq!(truncated_quotient(9, 4, 0).unwrap(), 2);
        assert_eq!(truncated_quotient(7, 25, 1).unwrap(), 2);
        assert!(truncated_quotient(1, 0, 0).is_err());
    }

    #[test]
    fn quotients_round_half_away_from_zero() {
        assert_eq!(quotient(2, 3, 2).unwrap(), 67);
        assert_eq!(quotient(-2, 3, 2).unwrap(), -67);
        assert_eq!(quotient(1, 8, 2).unwrap(), 13);
        assert_eq!(quotient(-1, -8, 2).unwrap(), 13);
        assert!(quotient(1, 0, 2).is_err());
        assert!(quotient(i128::MAX, 1, 10).is_err());
    }
}
