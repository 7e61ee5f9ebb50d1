//! From a view's optimized DataFusion logical plan to its [`Node`] tree, or the reason it must be
//! recomputed in full instead.
//!
//! Supported: table scans (with pushed filters and projections), projection, filter (also HAVING),
//! subquery aliases, inner and left equi-joins (an inner join may have further conditions),
//! aggregates with count, count(DISTINCT), sum, avg, min and max, DISTINCT and UNION ALL; every
//! expression must be deterministic. Anything else is a [`Fallback`] naming what is not.

use std::sync::Arc;

use arrow::array::new_null_array;
use arrow::datatypes::{DataType, Schema, SchemaRef};
use arrow::row::{RowConverter, SortField};
use datafusion::common::tree_node::TreeNode;
use datafusion::common::{DFSchema, HashMap, JoinType, NullEquality, TableReference};
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::{Distinct, Expr, ExprSchemable, LogicalPlan, Volatility};
use datafusion::physical_expr::PhysicalExpr;

use super::aggregate::{AggKind, AggSpec, AggregateNode, SumKind};
use super::dataflow::{DistinctNode, Node, ScanNode};
use super::groups::Groups;
use super::join::{JoinNode, SideIndex};
use crate::catalog::{CatalogState, DEFAULT_SCHEMA};

/// Why a view is recomputed in full rather than maintained.
#[derive(Debug, Clone, PartialEq)]
pub struct Fallback(pub String);

type Compiled<T> = std::result::Result<T, Fallback>;

fn fallback<T>(reason: impl Into<String>) -> Compiled<T> {
    Err(Fallback(reason.into()))
}

pub struct CompileContext<'a> {
    pub state: &'a SessionState,
    pub catalog: &'a CatalogState,
}

/// The catalog key of a table a plan scans.
pub fn table_key(reference: &TableReference) -> String {
    crate::catalog::key(reference.schema().unwrap_or(DEFAULT_SCHEMA), reference.table())
}

fn arrow_schema(schema: &DFSchema) -> SchemaRef {
    Arc::new(schema.as_arrow().clone())
}

impl CompileContext<'_> {
    fn physical(&self, expr: &Expr, schema: &DFSchema) -> Compiled<Arc<dyn PhysicalExpr>> {
        let changing = expr
            .exists(|e| {
                Ok(matches!(e, Expr::ScalarFunction(f) if f.func.signature().volatility != Volatility::Immutable))
            })
            .unwrap_or(true);
        if changing {
            return fallback(format!("{expr} is not deterministic"));
        }
        self.state.create_physical_expr(expr.clone(), schema).or_else(|e| fallback(format!("{expr}: {e}")))
    }

    fn physicals(&self, exprs: &[Expr], schema: &DFSchema) -> Compiled<Vec<Arc<dyn PhysicalExpr>>> {
        exprs.iter().map(|e| self.physical(e, schema)).collect()
    }

    /// Compiles a plan node and its inputs.
    pub fn compile(&self, plan: &LogicalPlan) -> Compiled<Node> {
        match plan {
            LogicalPlan::TableScan(scan) => {
                if scan.fetch.is_some() {
                    return fallback("a scan with a row limit");
                }
                let key = table_key(&scan.table_name);
                if !self.catalog.tables.contains_key(&key) {
                    return fallback(format!("it reads {}, which is not a Sluice table", scan.table_name));
                }
                let full = DFSchema::try_from_qualified_schema(scan.table_name.clone(), &scan.source.schema())
                    .or_else(|e| fallback(e.to_string()))?;
                let filters = self.physicals(&scan.filters, &full)?;
                let text = format!("Scan: {key}{}", if filters.is_empty() { "" } else { " (filtered)" });
                Ok(Node::Scan(ScanNode { table: key, projection: scan.projection.clone(), filters, text }))
            }
            LogicalPlan::Projection(p) => Ok(Node::Project {
                exprs: self.physicals(&p.expr, p.input.schema())?,
                input: Box::new(self.compile(&p.input)?),
                schema: arrow_schema(&p.schema),
                text: p.expr.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", "),
            }),
            LogicalPlan::Filter(f) => Ok(Node::Filter {
                predicate: self.physical(&f.predicate, f.input.schema())?,
                input: Box::new(self.compile(&f.input)?),
                text: f.predicate.to_string(),
            }),
            LogicalPlan::SubqueryAlias(a) => self.compile(&a.input),
            LogicalPlan::Join(join) => self.join(join),
            LogicalPlan::Aggregate(aggregate) => self.aggregate(aggregate),
            LogicalPlan::Distinct(Distinct::All(input)) => {
                let schema = arrow_schema(input.schema());
                Ok(Node::Distinct(DistinctNode {
                    input: Box::new(self.compile(input)?),
                    rows: converter(&schema)?,
                    counts: HashMap::new(),
                }))
            }
            LogicalPlan::Union(union) => Ok(Node::Union {
                inputs: union.inputs.iter().map(|i| self.compile(i)).collect::<Compiled<_>>()?,
                schema: arrow_schema(&union.schema),
            }),
            other => fallback(format!("{} is not maintained incrementally", node_name(other))),
        }
    }

    fn join(&self, join: &datafusion::logical_expr::Join) -> Compiled<Node> {
        let left_outer = match join.join_type {
            JoinType::Inner => false,
            JoinType::Left => true,
            other => return fallback(format!("a {other} join is not maintained incrementally")),
        };
        if join.null_equality != NullEquality::NullEqualsNothing {
            return fallback("a join where NULL keys match");
        }
        if join.on.is_empty() {
            return fallback("a join without equality conditions");
        }
        if left_outer && join.filter.is_some() {
            return fallback("a left join with non-equality conditions");
        }
        let (left_schema, right_schema) = (join.left.schema(), join.right.schema());
        let left_exprs: Vec<Expr> = join.on.iter().map(|(l, _)| l.clone()).collect();
        let right_exprs: Vec<Expr> = join.on.iter().map(|(_, r)| r.clone()).collect();
        let key_types = left_exprs
            .iter()
            .map(|e| e.get_type(left_schema.as_ref()))
            .collect::<datafusion::common::Result<Vec<DataType>>>()
            .or_else(|e| fallback(e.to_string()))?;
        let left_arrow = arrow_schema(left_schema);
        let right_arrow = arrow_schema(right_schema);
        let right_rows = converter(&right_arrow)?;
        let nulls: Vec<_> = right_arrow.fields().iter().map(|f| new_null_array(f.data_type(), 1)).collect();
        let null_right =
            right_rows.convert_columns(&nulls).or_else(|e| fallback(e.to_string()))?.row(0).as_ref().into();
        // One hash for both sides' indexes: a key is hashed once for both.
        let left_index = SideIndex::new();
        let right_index = SideIndex::with_state(left_index.state().clone());
        Ok(Node::Join(Box::new(JoinNode {
            left_keys: self.physicals(&left_exprs, left_schema)?,
            right_keys: self.physicals(&right_exprs, right_schema)?,
            filter: join.filter.as_ref().map(|f| self.physical(f, &join.schema)).transpose()?,
            keys: RowConverter::new(key_types.iter().map(|t| SortField::new(t.clone())).collect())
                .or_else(|e| fallback(e.to_string()))?,
            key_types,
            left_rows: converter(&left_arrow)?,
            right_rows,
            left_schema: left_arrow,
            right_schema: right_arrow,
            schema: arrow_schema(&join.schema),
            null_right,
            left_index,
            right_index,
            left: self.compile(&join.left)?,
            right: self.compile(&join.right)?,
            left_outer,
            text: format!(
                "{} Join: {}",
                if left_outer { "Left" } else { "Inner" },
                join.on.iter().map(|(l, r)| format!("{l} = {r}")).collect::<Vec<_>>().join(" AND ")
            ),
        })))
    }

    fn aggregate(&self, aggregate: &datafusion::logical_expr::Aggregate) -> Compiled<Node> {
        let input_schema = aggregate.input.schema();
        if aggregate.group_expr.iter().any(|e| matches!(e, Expr::GroupingSet(_))) {
            return fallback("GROUPING SETS, CUBE or ROLLUP");
        }
        let group_types = aggregate
            .group_expr
            .iter()
            .map(|e| e.get_type(input_schema.as_ref()))
            .collect::<datafusion::common::Result<Vec<DataType>>>()
            .or_else(|e| fallback(e.to_string()))?;
        let schema = arrow_schema(&aggregate.schema);
        let groups = aggregate.group_expr.len();
        let mut specs = Vec::new();
        for (i, expr) in aggregate.aggr_expr.iter().enumerate() {
            let output_type = schema.field(groups + i).data_type().clone();
            specs.push(self.agg_spec(expr, input_schema, output_type)?);
        }
        let text = format!(
            "Aggregate: groups=[{}], aggregates=[{}]",
            aggregate.group_expr.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", "),
            aggregate.aggr_expr.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", ")
        );
        Ok(Node::Aggregate(Box::new(AggregateNode {
            input: self.compile(&aggregate.input)?,
            group_exprs: self.physicals(&aggregate.group_expr, input_schema)?,
            group_logical: aggregate.group_expr.clone(),
            groups_converter: RowConverter::new(group_types.iter().map(|t| SortField::new(t.clone())).collect())
                .or_else(|e| fallback(e.to_string()))?,
            group_types,
            global: groups == 0,
            specs,
            groups: Groups::default(),
            input_plan: aggregate.input.clone(),
            schema,
            text,
            started: false,
            epoch: 0,
        })))
    }

    fn agg_spec(&self, expr: &Expr, input: &DFSchema, output_type: DataType) -> Compiled<AggSpec> {
        let inner = match expr {
            Expr::Alias(alias) => alias.expr.as_ref(),
            other => other,
        };
        let Expr::AggregateFunction(function) = inner else {
            return fallback(format!("aggregate {expr}"));
        };
        let params = &function.params;
        let name = function.func.name().to_ascii_lowercase();
        if params.filter.is_some() || !params.order_by.is_empty() {
            return fallback(format!("{expr}: FILTER or ORDER BY in an aggregate"));
        }
        let kind = match (name.as_str(), params.distinct) {
            ("count", false) => AggKind::Count,
            ("count", true) => AggKind::CountDistinct,
            ("sum", false) => AggKind::Sum,
            ("avg" | "mean", false) => AggKind::Avg,
            ("min", _) => AggKind::Min,
            ("max", _) => AggKind::Max,
            _ => return fallback(format!("{expr} is not maintained incrementally")),
        };
        let arg_expr = match params.args.as_slice() {
            [arg] => arg.clone(),
            [] if kind == AggKind::Count => Expr::Literal(datafusion::common::ScalarValue::Int64(Some(1)), None),
            _ => return fallback(format!("{expr}: more than one argument")),
        };
        let arg_type = arg_expr.get_type(input).or_else(|e| fallback(e.to_string()))?;
        let sum_kind = match (&arg_type, kind) {
            (_, AggKind::Count | AggKind::CountDistinct | AggKind::Min | AggKind::Max) => SumKind::Int,
            (t, _) if t.is_signed_integer() || matches!(t, DataType::UInt8 | DataType::UInt16 | DataType::UInt32) => {
                SumKind::Int
            }
            (DataType::Float16 | DataType::Float32 | DataType::Float64, _) => SumKind::Float,
            (DataType::Decimal128(_, scale), AggKind::Sum | AggKind::Avg) => {
                if kind == AggKind::Avg && !matches!(output_type, DataType::Decimal128(..)) {
                    return fallback(format!("{expr} over {arg_type} into {output_type}"));
                }
                SumKind::Decimal(*scale)
            }
            (t, _) => return fallback(format!("{expr} over {t}")),
        };
        let values = match kind {
            AggKind::CountDistinct | AggKind::Min | AggKind::Max => {
                Some(RowConverter::new(vec![SortField::new(arg_type.clone())]).or_else(|e| fallback(e.to_string()))?)
            }
            _ => None,
        };
        Ok(AggSpec { kind, arg: self.physical(&arg_expr, input)?, arg_expr, sum_kind, values, output_type })
    }
}

fn converter(schema: &Schema) -> Compiled<RowConverter> {
    RowConverter::new(schema.fields().iter().map(|f| SortField::new(f.data_type().clone())).collect())
        .or_else(|e| fallback(e.to_string()))
}

fn node_name(plan: &LogicalPlan) -> String {
    match plan {
        LogicalPlan::Sort(_) => "ORDER BY".into(),
        LogicalPlan::Limit(_) => "LIMIT / OFFSET".into(),
        LogicalPlan::Window(_) => "a window function".into(),
        LogicalPlan::Values(_) | LogicalPlan::EmptyRelation(_) => "a constant relation".into(),
        LogicalPlan::Distinct(Distinct::On(_)) => "DISTINCT ON".into(),
        LogicalPlan::Unnest(_) => "UNNEST".into(),
        LogicalPlan::RecursiveQuery(_) => "a recursive query".into(),
        other => other.display().to_string(),
    }
}
