//! `__pg_cast_named(CAST(x AS T), 'T')`: `x` cast to `T`, under a name that shows the cast.
//!
//! DataFusion names a cast by what it casts (`max(CAST(x AS bigint))` is `max(t.x)`), so a query
//! with `max(x)` and `max(x::bigint)` made an aggregate with two columns of one name and failed
//! ("duplicate unqualified field name", apache/datafusion#18975). `crate::sql::cast_names` wraps
//! such casts in this function, whose name carries the type written.

use std::sync::Arc;

use arrow::datatypes::{DataType, FieldRef};
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

/// The function's name, which `crate::sql::cast_names` calls.
pub const NAME: &str = "__pg_cast_named";

#[derive(Debug, PartialEq, Eq, Hash)]
struct CastNamed {
    signature: Signature,
}

impl ScalarUDFImpl for CastNamed {
    fn name(&self) -> &str {
        NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        arg_types.first().cloned().ok_or_else(|| datafusion::common::plan_datafusion_err!("{NAME} takes two arguments"))
    }

    /// The cast value's field, with its metadata (a declared type such as `varchar(3)`).
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let field = args
            .arg_fields
            .first()
            .ok_or_else(|| datafusion::common::plan_datafusion_err!("{NAME} takes two arguments"))?;
        Ok(Arc::new(field.as_ref().clone().with_name(NAME)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        args.args
            .into_iter()
            .next()
            .ok_or_else(|| datafusion::common::plan_datafusion_err!("{NAME} takes two arguments"))
    }
}

/// The function, to register.
pub fn function() -> ScalarUDF {
    ScalarUDF::new_from_impl(CastNamed { signature: Signature::any(2, Volatility::Immutable) })
}
