//! `avg` of numerics with PostgreSQL's result: the sum divided by the count as numeric division
//! does it ([`super::division`]), so `avg` of 1, 2 and 2 is `1.6666666666666667`.
//!
//! PostgreSQL picks each group's scale from its sum and count (16 significant digits, more for a
//! mean below 1). The column's scale is fixed when the query is planned: it is what the rule
//! gives a mean of weight 0, `max(16, the input's scale)`. Each group's mean is rounded where
//! PostgreSQL rounds it (half away from zero) and then written at the column's scale, so its
//! value is PostgreSQL's whenever PostgreSQL's scale is not larger than the column's (a mean
//! below 1 whose digits do not end by the 16th decimal is rounded there instead).
//!
//! The sum is kept in 38 digits (Arrow's `Decimal128`); a sum beyond is 22003.

use arrow::array::{ArrayRef, AsArray};
use arrow::datatypes::{DataType, Decimal128Type, Field, FieldRef, Int64Type};
use datafusion::common::{DataFusionError, Result as DfResult, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{Accumulator, AggregateUDFImpl, Signature, Volatility};

use super::data_error;
use super::division::{quotient, weight_and_first_group, DIGITS_PER_GROUP, PRECISION_MAX, SIGNIFICANT_DIGITS_MIN};

/// `avg(numeric)`, which the arithmetic rule puts in place of DataFusion's `avg` of a decimal.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct NumericAverage {
    signature: Signature,
}

impl NumericAverage {
    pub(super) fn new() -> Self {
        Self { signature: Signature::any(1, Volatility::Immutable) }
    }
}

/// The scale of the mean of values of scale `scale`.
pub(super) fn mean_scale(scale: i8) -> i8 {
    (SIGNIFICANT_DIGITS_MIN as i8).max(scale).min(PRECISION_MAX as i8 - 1)
}

fn input_scale(data_type: &DataType) -> DfResult<i8> {
    match data_type {
        DataType::Decimal128(_, scale) => Ok(*scale),
        other => Err(DataFusionError::Plan(format!("numeric avg of {other}"))),
    }
}

impl AggregateUDFImpl for NumericAverage {
    fn name(&self) -> &str {
        "avg"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        let scale = input_scale(arg_types.first().unwrap_or(&DataType::Null))?;
        Ok(DataType::Decimal128(PRECISION_MAX, mean_scale(scale)))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
        let scale = input_scale(args.input_fields.first().map_or(&DataType::Null, |f| f.data_type()))?;
        Ok(vec![
            Field::new(format!("{}[sum]", args.name), DataType::Decimal128(PRECISION_MAX, scale), true).into(),
            Field::new(format!("{}[count]", args.name), DataType::Int64, true).into(),
        ])
    }

    fn accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        let scale = input_scale(args.expr_fields.first().map_or(&DataType::Null, |f| f.data_type()))?;
        Ok(Box::new(MeanAccumulator { scale, sum: 0, count: 0 }))
    }
}

#[derive(Debug)]
struct MeanAccumulator {
    /// The scale of the values (and of `sum`).
    scale: i8,
    sum: i128,
    count: i64,
}

fn overflow() -> DataFusionError {
    data_error("22003", "numeric field overflow (Sluice's numerics hold 38 digits)")
}

impl MeanAccumulator {
    fn add(&mut self, values: &ArrayRef, sign: i128) -> DfResult<()> {
        let values = arrow::compute::cast(values, &DataType::Decimal128(PRECISION_MAX, self.scale))?;
        for value in values.as_primitive::<Decimal128Type>().iter().flatten() {
            self.sum = self.sum.checked_add(sign * value).ok_or_else(overflow)?;
            self.count += if sign > 0 { 1 } else { -1 };
        }
        Ok(())
    }
}

impl Accumulator for MeanAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        values.first().map_or(Ok(()), |v| self.add(v, 1))
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        values.first().map_or(Ok(()), |v| self.add(v, -1))
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        let [sums, counts] = states else { return Err(DataFusionError::Plan("avg state has two fields".into())) };
        let sums = arrow::compute::cast(sums, &DataType::Decimal128(PRECISION_MAX, self.scale))?;
        for sum in sums.as_primitive::<Decimal128Type>().iter().flatten() {
            self.sum = self.sum.checked_add(sum).ok_or_else(overflow)?;
        }
        for count in counts.as_primitive::<Int64Type>().iter().flatten() {
            self.count += count;
        }
        Ok(())
    }

    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        Ok(vec![
            ScalarValue::Decimal128(Some(self.sum), PRECISION_MAX, self.scale),
            ScalarValue::Int64(Some(self.count)),
        ])
    }

    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        let column_scale = mean_scale(self.scale);
        if self.count <= 0 {
            return Ok(ScalarValue::Decimal128(None, PRECISION_MAX, column_scale));
        }
        Ok(ScalarValue::Decimal128(
            Some(mean(self.sum, self.scale, self.count, column_scale)?),
            PRECISION_MAX,
            column_scale,
        ))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }
}

/// `sum / count` (`sum` of scale `scale`) rounded at PostgreSQL's scale for it, written at
/// `column_scale`.
pub(crate) fn mean(sum: i128, scale: i8, count: i64, column_scale: i8) -> DfResult<i128> {
    let count = i128::from(count);
    let ((weight1, first1), (weight2, first2)) = (weight_and_first_group(sum, scale), weight_and_first_group(count, 0));
    let mut quotient_weight = weight1 - weight2;
    if first1 <= first2 {
        quotient_weight -= 1;
    }
    let postgres_scale = (SIGNIFICANT_DIGITS_MIN - quotient_weight * DIGITS_PER_GROUP).max(i32::from(scale)).max(0);
    let rounded_at = postgres_scale.min(i32::from(column_scale));
    let value = quotient(sum, count, rounded_at - i32::from(scale))?;
    let padding = 10i128.checked_pow((i32::from(column_scale) - rounded_at).unsigned_abs()).ok_or_else(overflow)?;
    value.checked_mul(padding).ok_or_else(overflow)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn means_are_postgresql_s() {
        // avg(1, 2, 2) = 1.6666666666666667 (scale 16).
        assert_eq!(mean(5, 0, 3, 16).unwrap(), 16_666_666_666_666_667);
        // avg(100000001, 1, 1) = 33333334.333333333333 (PostgreSQL's scale 12), padded to 16.
        assert_eq!(mean(100_000_003, 0, 3, 16).unwrap(), 333_333_343_333_333_333_330_000);
        // avg(1.5, 2.25) = 1.875, sum of scale 2.
        assert_eq!(mean(375, 2, 2, 16).unwrap(), 18_750_000_000_000_000);
        // Negative means round half away from zero.
        assert_eq!(mean(-5, 0, 3, 16).unwrap(), -16_666_666_666_666_667);
    }
}
