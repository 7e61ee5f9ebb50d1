//! Correlated scalar subqueries that are not aggregates: `WHERE t.data = (SELECT c.data FROM c
//! WHERE c.id = t.id)`.
//!
//! PostgreSQL runs such a subquery per row and errs (21000) when it returns more than one row.
//! DataFusion decorrelates scalar subqueries into joins and so takes only those that cannot
//! return more than one row (an aggregate, or `LIMIT 1`); it refuses the others at planning.
//! The analyzer rule [`SingleRowSubqueries`] puts the subquery's one column under the aggregate
//! [`SingleRow`], whose value is the number of rows with the value of the last, and the
//! subquery under [`SingleValue`], which gives that value, NULL for no row, and 21000 for more
//! than one. The count travels to the outer row (through the join DataFusion makes), so only a
//! row whose subquery has several rows errs, as in PostgreSQL, and not one whose key merely
//! shares the table with such rows.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{DataType, Field, FieldRef, Fields, UInt64Type};
use datafusion::common::config::ConfigOptions;
use datafusion::common::scalar::ScalarStructBuilder;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, DataFusionError, Result as DfResult, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, ColumnarValue, Expr, LogicalPlan, LogicalPlanBuilder,
    ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Subquery, Volatility,
};
use datafusion::optimizer::AnalyzerRule;

use crate::error::Error;

/// The analyzer rule (last of Sluice's): see the module docs.
#[derive(Debug)]
pub struct SingleRowSubqueries;

impl AnalyzerRule for SingleRowSubqueries {
    fn name(&self) -> &str {
        "sluice_single_row_subqueries"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        let mut found = false;
        plan.apply_with_subqueries(|node| {
            node.apply_expressions(|expr| {
                expr.apply(|e| {
                    found |= matches!(e, Expr::ScalarSubquery(s) if needs_single_row(s) || has_name_clash(s));
                    Ok(if found {
                        datafusion::common::tree_node::TreeNodeRecursion::Stop
                    } else {
                        datafusion::common::tree_node::TreeNodeRecursion::Continue
                    })
                })
            })
        })?;
        if !found {
            return Ok(plan);
        }
        let udaf = Arc::new(AggregateUDF::from(SingleRow { signature: Signature::any(1, Volatility::Immutable) }));
        let udf = Arc::new(ScalarUDF::from(SingleValue { signature: Signature::any(1, Volatility::Immutable) }));
        Ok(plan
            .transform_up_with_subqueries(|node| {
                super::rewrite_node_expressions(node, |expr| {
                    expr.transform_up(|e| {
                        let Expr::ScalarSubquery(subquery) = e else { return Ok(Transformed::no(e)) };
                        let subquery = if has_name_clash(&subquery) {
                            Transformed::yes(unique_correlated_names(subquery)?)
                        } else {
                            Transformed::no(subquery)
                        };
                        if needs_single_row(&subquery.data) {
                            let counted = Expr::ScalarSubquery(single_row(subquery.data, &udaf)?);
                            return Ok(Transformed::yes(udf.call(vec![counted])));
                        }
                        Ok(subquery.update_data(Expr::ScalarSubquery))
                    })
                })
            })?
            .data)
    }
}

/// The inner columns of a subquery's correlated equalities (`inner = outer`), per Filter.
fn correlated_columns(predicate: &Expr) -> Vec<Column> {
    datafusion::logical_expr::utils::split_conjunction(predicate)
        .into_iter()
        .filter_map(|conjunct| match conjunct {
            Expr::BinaryExpr(b) if b.op == datafusion::logical_expr::Operator::Eq => {
                match (b.left.as_ref(), b.right.as_ref()) {
                    (Expr::Column(c), Expr::OuterReferenceColumn(..))
                    | (Expr::OuterReferenceColumn(..), Expr::Column(c)) => Some(c.clone()),
                    _ => None,
                }
            }
            _ => None,
        })
        .collect()
}

/// Whether two inner columns of `subquery`'s correlated equalities share a name (`c.oid =
/// a.attcollation AND t.oid = a.atttypid`). DataFusion's decorrelation (55) projects the join
/// keys by their names, keeps one `oid`, and joins both outer columns to it: wrong rows, no
/// error. Such columns get names of their own first ([`unique_correlated_names`]).
fn has_name_clash(subquery: &Subquery) -> bool {
    if subquery.outer_ref_columns.is_empty() {
        return false;
    }
    let mut columns = Vec::new();
    let _ = subquery.subquery.apply(|node| {
        if let LogicalPlan::Filter(filter) = node {
            columns.extend(correlated_columns(&filter.predicate));
        }
        Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
    });
    columns.iter().enumerate().any(|(i, c)| columns.iter().skip(i + 1).any(|d| d.name == c.name && d != c))
}

/// `subquery` with each inner column of a correlated equality aliased to a name of its own
/// (`__sluice_correlated_<n>`, projected beside the Filter's input).
fn unique_correlated_names(subquery: Subquery) -> DfResult<Subquery> {
    let mut next = 0;
    let plan = Arc::unwrap_or_clone(subquery.subquery).transform_up(|node| {
        let LogicalPlan::Filter(filter) = node else { return Ok(Transformed::no(node)) };
        let columns = correlated_columns(&filter.predicate);
        if columns.is_empty() {
            return Ok(Transformed::no(LogicalPlan::Filter(filter)));
        }
        let mut renamed = std::collections::HashMap::new();
        let mut projection: Vec<Expr> = filter.input.schema().columns().into_iter().map(Expr::Column).collect();
        for column in columns {
            if renamed.contains_key(&column) {
                continue;
            }
            next += 1;
            let name = format!("__sluice_correlated_{next}");
            projection.push(Expr::Column(column.clone()).alias(name.clone()));
            renamed.insert(column, Column::from_name(name));
        }
        let input = LogicalPlanBuilder::from(Arc::unwrap_or_clone(filter.input)).project(projection)?.build()?;
        let predicate = datafusion::logical_expr::utils::split_conjunction_owned(filter.predicate)
            .into_iter()
            .map(|conjunct| match conjunct {
                Expr::BinaryExpr(mut b) if b.op == datafusion::logical_expr::Operator::Eq => {
                    for side in [&mut b.left, &mut b.right] {
                        if let Expr::Column(c) = side.as_ref() {
                            if let Some(new) = renamed.get(c) {
                                **side = Expr::Column(new.clone());
                            }
                        }
                    }
                    Expr::BinaryExpr(b)
                }
                other => other,
            })
            .reduce(datafusion::logical_expr::and)
            .unwrap_or(Expr::Literal(ScalarValue::Boolean(Some(true)), None));
        Ok(Transformed::yes(LogicalPlan::Filter(datafusion::logical_expr::Filter::try_new(
            predicate,
            Arc::new(input),
        )?)))
    })?;
    Ok(Subquery { subquery: Arc::new(plan.data), ..subquery })
}

/// Whether DataFusion would refuse `subquery` as one that may return several rows.
fn needs_single_row(subquery: &Subquery) -> bool {
    fn strip(plan: &LogicalPlan) -> &LogicalPlan {
        match plan {
            LogicalPlan::Projection(p) => strip(&p.input),
            LogicalPlan::SubqueryAlias(a) => strip(&a.input),
            other => other,
        }
    }
    if subquery.outer_ref_columns.is_empty() || subquery.subquery.schema().fields().len() != 1 {
        return false;
    }
    let aggregated = match strip(&subquery.subquery) {
        LogicalPlan::Aggregate(a) => !a.aggr_expr.is_empty(),
        LogicalPlan::Filter(f) => matches!(f.input.as_ref(), LogicalPlan::Aggregate(a) if !a.aggr_expr.is_empty()),
        _ => false,
    };
    !aggregated && subquery.subquery.max_rows().is_none_or(|rows| rows > 1)
}

/// `subquery` with its column under [`SingleRow`]. (The column's own name would clash with the
/// inner columns DataFusion's join adds beside it: `p.id` for `WHERE p.id = outer.x`.)
fn single_row(subquery: Subquery, udaf: &Arc<AggregateUDF>) -> DfResult<Subquery> {
    let plan = Arc::unwrap_or_clone(subquery.subquery);
    let (qualifier, field) = plan.schema().qualified_field(0);
    let column = Expr::Column(Column::new(qualifier.cloned(), field.name().clone()));
    let plan = LogicalPlanBuilder::from(plan)
        .aggregate(Vec::<Expr>::new(), vec![udaf.call(vec![column]).alias("__pg_single_row")])?
        .build()?;
    Ok(Subquery { subquery: Arc::new(plan), ..subquery })
}

fn more_than_one_row() -> DataFusionError {
    DataFusionError::External(Box::new(Error::data(
        "21000",
        "more than one row returned by a subquery used as an expression",
    )))
}

/// The fields of [`SingleRow`]'s struct: the count of rows and the (last) value.
fn counted_fields(data_type: &DataType) -> (Field, Field) {
    (Field::new("rows", DataType::UInt64, false), Field::new("value", data_type.clone(), true))
}

/// The aggregate of a scalar subquery's rows: `{rows, value}` (see the module docs).
#[derive(Debug, PartialEq, Eq, Hash)]
struct SingleRow {
    signature: Signature,
}

impl AggregateUDFImpl for SingleRow {
    fn name(&self) -> &str {
        "__pg_single_row"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        let (rows, value) = counted_fields(arg_types.first().unwrap_or(&DataType::Null));
        Ok(DataType::Struct(Fields::from(vec![rows, value])))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
        let data_type = args.input_fields.first().map_or(DataType::Null, |f| f.data_type().clone());
        Ok(vec![
            Field::new(format!("{}[rows]", args.name), DataType::UInt64, true).into(),
            Field::new(format!("{}[value]", args.name), data_type, true).into(),
        ])
    }

    fn accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        let data_type = args.expr_fields.first().map_or(DataType::Null, |f| f.data_type().clone());
        Ok(Box::new(SingleRowAccumulator { rows: 0, value: ScalarValue::try_from(&data_type)?, data_type }))
    }
}

#[derive(Debug)]
struct SingleRowAccumulator {
    rows: u64,
    value: ScalarValue,
    data_type: DataType,
}

impl Accumulator for SingleRowAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        let Some(values) = values.first() else { return Ok(()) };
        if let Some(last) = values.len().checked_sub(1) {
            self.rows = self.rows.saturating_add(values.len() as u64);
            self.value = ScalarValue::try_from_array(values, last)?;
        }
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        let [rows, values] = states else {
            return Err(DataFusionError::Plan("single row state has two fields".into()));
        };
        let Some(rows) = rows.as_primitive_opt::<UInt64Type>() else {
            return Err(DataFusionError::Plan("single row state counts rows in a UInt64".into()));
        };
        for (index, count) in rows.iter().enumerate() {
            let count = count.unwrap_or(0);
            if count > 0 {
                self.rows = self.rows.saturating_add(count);
                self.value = ScalarValue::try_from_array(values, index)?;
            }
        }
        Ok(())
    }

    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        Ok(vec![ScalarValue::UInt64(Some(self.rows)), self.value.clone()])
    }

    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        let (rows, value) = counted_fields(&self.data_type);
        ScalarStructBuilder::new()
            .with_scalar(rows, ScalarValue::UInt64(Some(self.rows)))
            .with_scalar(value, self.value.clone())
            .build()
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.value.size()
    }
}

/// The value of a [`SingleRow`] struct: NULL for no row, 21000 for more than one.
#[derive(Debug, PartialEq, Eq, Hash)]
struct SingleValue {
    signature: Signature,
}

impl ScalarUDFImpl for SingleValue {
    fn name(&self) -> &str {
        "__pg_single_value"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        match arg_types.first() {
            Some(DataType::Struct(fields)) => match fields.iter().find(|f| f.name() == "value") {
                Some(value) => Ok(value.data_type().clone()),
                None => Err(DataFusionError::Plan("__pg_single_value of a struct without a value".into())),
            },
            other => Err(DataFusionError::Plan(format!("__pg_single_value of {other:?}"))),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let [counted] = args.args.as_slice() else {
            return Err(DataFusionError::Plan("__pg_single_value takes one argument".into()));
        };
        let scalar = matches!(counted, ColumnarValue::Scalar(_));
        let array = counted.to_array(args.number_rows)?;
        let malformed = || DataFusionError::Plan("__pg_single_value of other than a {rows, value} struct".into());
        let counted = array.as_struct_opt().ok_or_else(malformed)?;
        let (Some(rows), Some(values)) = (counted.column_by_name("rows"), counted.column_by_name("value")) else {
            return Err(malformed());
        };
        let rows = rows.as_primitive_opt::<UInt64Type>().ok_or_else(malformed)?;
        for index in 0..counted.len() {
            if counted.is_valid(index) && rows.is_valid(index) && rows.value(index) > 1 {
                return Err(more_than_one_row());
            }
        }
        // A row without a match (the join's NULL struct) has no value.
        let present = arrow::compute::is_not_null(&array)?;
        let none = arrow::array::Scalar::new(arrow::array::new_null_array(values.data_type(), 1));
        let out = arrow::compute::kernels::zip::zip(&present, values, &none)?;
        if scalar {
            Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?))
        } else {
            Ok(ColumnarValue::Array(out))
        }
    }
}
