//! Math functions that raise PostgreSQL's errors where DataFusion returns NaN or infinity:
//! `ln(0)` and `log(-1)` (2201E), `sqrt(-1)` and `power(0, -1)` (2201F), `exp(1000)` (22003).
//! Each wraps DataFusion's function of the same name, which computes the value once the
//! arguments passed the check; `pg_typeof` names an argument's type as PostgreSQL does.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringArray};
use arrow::datatypes::FieldRef;
use arrow::datatypes::{DataType, Float64Type};
use datafusion::common::{DataFusionError, Result as DfResult, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::error::Error;

/// What a function's arguments must satisfy, checked on the arguments as float8.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Check {
    Logarithm,
    SquareRoot,
    Power,
    Nothing,
}

impl Check {
    fn run(self, args: &[Option<f64>]) -> Result<(), Error> {
        match self {
            Check::Logarithm => logarithm(args),
            Check::SquareRoot => square_root(args),
            Check::Power => power(args),
            Check::Nothing => Ok(()),
        }
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Checked {
    inner: Arc<ScalarUDF>,
    check: Check,
}

impl ScalarUDFImpl for Checked {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        self.inner.return_field_from_args(args)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let doubles = args
            .args
            .iter()
            .map(|a| {
                let array = a.clone().into_array(rows)?;
                Ok(arrow::compute::cast(&array, &DataType::Float64)?)
            })
            .collect::<DfResult<Vec<ArrayRef>>>()?;
        let columns: Vec<_> = doubles.iter().map(|d| d.as_primitive::<Float64Type>()).collect();
        let mut row = Vec::with_capacity(columns.len());
        for i in 0..rows {
            row.clear();
            row.extend(columns.iter().map(|c| (c.len() > i && c.is_valid(i)).then(|| c.value(i))));
            self.check.run(&row).map_err(|e| DataFusionError::External(Box::new(e)))?;
        }
        let result = self.inner.invoke_with_args(args)?;
        if matches!(self.inner.name(), "exp" | "power") {
            let array = result.clone().into_array(rows)?;
            if let Ok(values) = arrow::compute::cast(&array, &DataType::Float64) {
                let values = values.as_primitive::<Float64Type>();
                let finite_args = |i: usize| columns.iter().all(|c| !c.is_valid(i) || c.value(i).is_finite());
                if (0..values.len()).any(|i| values.is_valid(i) && values.value(i).is_infinite() && finite_args(i)) {
                    return Err(DataFusionError::External(Box::new(Error::data(
                        "22003",
                        "value out of range: overflow",
                    ))));
                }
            }
        }
        Ok(result)
    }
}

fn logarithm_of(x: f64) -> Result<(), Error> {
    if x == 0.0 {
        return Err(Error::data("2201E", "cannot take logarithm of zero"));
    }
    if x < 0.0 {
        return Err(Error::data("2201E", "cannot take logarithm of a negative number"));
    }
    Ok(())
}

fn logarithm(args: &[Option<f64>]) -> Result<(), Error> {
    match args {
        [Some(x)] => logarithm_of(*x),
        [Some(base), Some(x)] => {
            logarithm_of(*base)?;
            logarithm_of(*x)?;
            if *base == 1.0 {
                return Err(Error::data("22012", "division by zero"));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn square_root(args: &[Option<f64>]) -> Result<(), Error> {
    match args {
        [Some(x)] if *x < 0.0 => Err(Error::data("2201F", "cannot take square root of a negative number")),
        _ => Ok(()),
    }
}

fn power(args: &[Option<f64>]) -> Result<(), Error> {
    match args {
        [Some(base), Some(exponent)] if *base == 0.0 && *exponent < 0.0 => {
            Err(Error::data("2201F", "zero raised to a negative power is undefined"))
        }
        [Some(base), Some(exponent)] if *base < 0.0 && exponent.fract() != 0.0 => {
            Err(Error::data("2201F", "a negative number raised to a non-integer power yields a complex result"))
        }
        _ => Ok(()),
    }
}

fn checked(inner: Arc<ScalarUDF>, check: Check) -> ScalarUDF {
    ScalarUDF::new_from_impl(Checked { inner, check })
}

/// The field metadata of a `pg_typeof` column that holds the OID of an enum type it names.
pub const REGTYPE_OID_KEY: &str = "sluice.regtype_oid";

/// `pg_typeof(x)`: the PostgreSQL name of the argument's type.
#[derive(Debug, PartialEq, Eq, Hash)]
struct TypeOf {
    signature: Signature,
}

impl ScalarUDFImpl for TypeOf {
    fn name(&self) -> &str {
        "pg_typeof"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    /// A `regtype`, as in PostgreSQL: its value is the type's name, which clients see typed; an
    /// enum type's OID goes with it ([`REGTYPE_OID_KEY`], for the binary form, which is the OID).
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let mut metadata =
            std::collections::HashMap::from([(crate::types::DECLARED_TYPE_KEY.to_string(), "regtype".into())]);
        let enum_oid = args.arg_fields.first().and_then(|f| crate::catalog::enums::field_enum_oid(f.metadata()));
        if let Some(oid) = enum_oid {
            metadata.insert(REGTYPE_OID_KEY.into(), oid.to_string());
        }
        Ok(Arc::new(arrow::datatypes::Field::new(self.name(), DataType::Utf8, true).with_metadata(metadata)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let Some(field) = args.arg_fields.first() else {
            return Err(DataFusionError::Plan("pg_typeof needs one argument".into()));
        };
        let enum_name = field
            .metadata()
            .get(crate::types::DECLARED_TYPE_KEY)
            .filter(|_| crate::catalog::enums::field_enum_oid(field.metadata()).is_some());
        let name = match crate::documents::TextType::of_field(field) {
            _ if enum_name.is_some() => enum_name.cloned().unwrap_or_default(),
            Some(declared) => declared.name().to_string(),
            None if crate::time_of_day::is_timetz_field(field) => "time with time zone".to_string(),
            None => crate::types::arrow_type_pg_name(field.data_type()),
        };
        if args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_))) {
            return Ok(ColumnarValue::Scalar(ScalarValue::Utf8(Some(name))));
        }
        let array: StringArray = std::iter::repeat_n(Some(name.as_str()), args.number_rows).collect();
        Ok(ColumnarValue::Array(Arc::new(array)))
    }
}

/// The name `~x` (PostgreSQL's bitwise NOT) is planned as: a call of [`BitwiseNot`].
pub const BITWISE_NOT: &str = "__pg_bitwise_not";

/// `~x` on an integer: its bits flipped, in its own type (DataFusion has no such operator).
#[derive(Debug, PartialEq, Eq, Hash)]
struct BitwiseNot {
    signature: Signature,
}

impl ScalarUDFImpl for BitwiseNot {
    fn name(&self) -> &str {
        BITWISE_NOT
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        match arg_types.first() {
            Some(t @ (DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64)) => Ok(t.clone()),
            Some(DataType::Null) => Ok(DataType::Int32),
            Some(other) => Err(DataFusionError::External(Box::new(Error::data(
                "42883",
                format!("operator does not exist: ~ {}", crate::types::arrow_type_pg_name(other)),
            )))),
            None => Err(DataFusionError::Plan("~ needs an operand".into())),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        use arrow::compute::kernels::bitwise::bitwise_not;
        use arrow::datatypes::{Int16Type, Int32Type, Int64Type, Int8Type};
        let Some(arg) = args.args.first() else { return Err(DataFusionError::Plan("~ needs an operand".into())) };
        let array = arg.to_array(args.number_rows)?;
        let flipped: ArrayRef = match array.data_type() {
            DataType::Int8 => Arc::new(bitwise_not(array.as_primitive::<Int8Type>())?),
            DataType::Int16 => Arc::new(bitwise_not(array.as_primitive::<Int16Type>())?),
            DataType::Int32 => Arc::new(bitwise_not(array.as_primitive::<Int32Type>())?),
            DataType::Int64 => Arc::new(bitwise_not(array.as_primitive::<Int64Type>())?),
            DataType::Null => arrow::array::new_null_array(&DataType::Int32, array.len()),
            other => return Err(DataFusionError::Plan(format!("~ of {other}"))),
        };
        if matches!(arg, ColumnarValue::Scalar(_)) {
            return Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&flipped, 0)?));
        }
        Ok(ColumnarValue::Array(flipped))
    }
}

/// The functions of this module, to register over DataFusion's of the same names.
pub fn functions() -> Vec<ScalarUDF> {
    use datafusion::functions::math;
    vec![
        checked(math::ln(), Check::Logarithm),
        checked(math::log(), Check::Logarithm),
        checked(math::log10(), Check::Logarithm),
        checked(math::log2(), Check::Logarithm),
        checked(math::sqrt(), Check::SquareRoot),
        checked(math::power(), Check::Power),
        checked(math::exp(), Check::Nothing),
        ScalarUDF::new_from_impl(TypeOf { signature: Signature::any(1, Volatility::Immutable) }),
        ScalarUDF::new_from_impl(BitwiseNot { signature: Signature::any(1, Volatility::Immutable) }),
    ]
}
