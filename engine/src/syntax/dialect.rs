//! The SQL dialect: PostgreSQL, plus Delta's `VERSION AS OF` / `TIMESTAMP AS OF` after a table
//! name. It forwards every choice to sqlparser's `PostgreSqlDialect` and reports itself as that
//! dialect, so the parser's Postgres-specific paths stay on.

use std::any::TypeId;

use datafusion::sql::sqlparser::ast::Expr;
use datafusion::sql::sqlparser::dialect::{Dialect, PostgreSqlDialect, Precedence};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};

/// PostgreSQL with table versioning.
#[derive(Debug, Default)]
pub struct SluiceDialect {
    postgres: PostgreSqlDialect,
}

impl SluiceDialect {
    pub const fn new() -> Self {
        Self { postgres: PostgreSqlDialect {} }
    }
}

impl Dialect for SluiceDialect {
    fn dialect(&self) -> TypeId {
        TypeId::of::<PostgreSqlDialect>()
    }
    fn supports_table_versioning(&self) -> bool {
        true
    }
    fn identifier_quote_style(&self, identifier: &str) -> Option<char> {
        self.postgres.identifier_quote_style(identifier)
    }
    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        self.postgres.is_delimited_identifier_start(ch)
    }
    fn is_identifier_start(&self, ch: char) -> bool {
        self.postgres.is_identifier_start(ch)
    }
    fn is_identifier_part(&self, ch: char) -> bool {
        self.postgres.is_identifier_part(ch)
    }
    fn supports_unicode_string_literal(&self) -> bool {
        self.postgres.supports_unicode_string_literal()
    }
    fn is_reserved_for_identifier(&self, kw: Keyword) -> bool {
        self.postgres.is_reserved_for_identifier(kw)
    }
    /// FOR is reserved in PostgreSQL: `SELECT 1 FOR UPDATE` locks, it does not name a column
    /// `for`.
    fn is_column_alias(&self, kw: &Keyword, parser: &mut Parser) -> bool {
        *kw != Keyword::FOR && self.postgres.is_column_alias(kw, parser)
    }
    fn is_custom_operator_part(&self, ch: char) -> bool {
        self.postgres.is_custom_operator_part(ch)
    }
    fn get_next_precedence(&self, parser: &Parser) -> Option<Result<u8, ParserError>> {
        self.postgres.get_next_precedence(parser)
    }
    /// `COLLATE name` after an operator (`x::text COLLATE "C"`): PostgreSQL's precedence lets it
    /// follow `::`, but sqlparser reads COLLATE only right after a prefix expression and has no
    /// infix parser for it. (PostgreSQL's precedence only asks for the infix in an expression,
    /// not in a column definition's `COLLATE`.)
    fn parse_infix(&self, parser: &mut Parser, expr: &Expr, precedence: u8) -> Option<Result<Expr, ParserError>> {
        if !parser.parse_keyword(Keyword::COLLATE) {
            return self.postgres.parse_infix(parser, expr, precedence);
        }
        Some(parser.parse_object_name(false).map(|collation| Expr::Collate { expr: Box::new(expr.clone()), collation }))
    }
    fn supports_filter_during_aggregation(&self) -> bool {
        self.postgres.supports_filter_during_aggregation()
    }
    fn supports_group_by_expr(&self) -> bool {
        self.postgres.supports_group_by_expr()
    }
    fn prec_value(&self, prec: Precedence) -> u8 {
        self.postgres.prec_value(prec)
    }
    fn allow_extract_custom(&self) -> bool {
        self.postgres.allow_extract_custom()
    }
    fn allow_extract_single_quotes(&self) -> bool {
        self.postgres.allow_extract_single_quotes()
    }
    fn supports_create_index_with_clause(&self) -> bool {
        self.postgres.supports_create_index_with_clause()
    }
    fn supports_explain_with_utility_options(&self) -> bool {
        self.postgres.supports_explain_with_utility_options()
    }
    fn supports_listen_notify(&self) -> bool {
        self.postgres.supports_listen_notify()
    }
    fn supports_factorial_operator(&self) -> bool {
        self.postgres.supports_factorial_operator()
    }
    fn supports_bitwise_shift_operators(&self) -> bool {
        self.postgres.supports_bitwise_shift_operators()
    }
    fn supports_comment_on(&self) -> bool {
        self.postgres.supports_comment_on()
    }
    fn supports_load_extension(&self) -> bool {
        self.postgres.supports_load_extension()
    }
    fn supports_named_fn_args_with_colon_operator(&self) -> bool {
        self.postgres.supports_named_fn_args_with_colon_operator()
    }
    fn supports_named_fn_args_with_expr_name(&self) -> bool {
        self.postgres.supports_named_fn_args_with_expr_name()
    }
    fn supports_empty_projections(&self) -> bool {
        self.postgres.supports_empty_projections()
    }
    fn supports_nested_comments(&self) -> bool {
        self.postgres.supports_nested_comments()
    }
    fn supports_string_escape_constant(&self) -> bool {
        self.postgres.supports_string_escape_constant()
    }
    fn supports_numeric_literal_underscores(&self) -> bool {
        self.postgres.supports_numeric_literal_underscores()
    }
    fn supports_array_typedef_with_brackets(&self) -> bool {
        self.postgres.supports_array_typedef_with_brackets()
    }
    fn supports_geometric_types(&self) -> bool {
        self.postgres.supports_geometric_types()
    }
    fn supports_set_names(&self) -> bool {
        self.postgres.supports_set_names()
    }
    fn supports_alter_column_type_using(&self) -> bool {
        self.postgres.supports_alter_column_type_using()
    }
    fn supports_notnull_operator(&self) -> bool {
        self.postgres.supports_notnull_operator()
    }
    fn supports_interval_options(&self) -> bool {
        self.postgres.supports_interval_options()
    }
    fn supports_insert_table_alias(&self) -> bool {
        self.postgres.supports_insert_table_alias()
    }
    fn supports_create_table_like_parenthesized(&self) -> bool {
        self.postgres.supports_create_table_like_parenthesized()
    }
    fn supports_select_wildcard_with_alias(&self) -> bool {
        self.postgres.supports_select_wildcard_with_alias()
    }
    fn supports_comma_separated_trim(&self) -> bool {
        self.postgres.supports_comma_separated_trim()
    }
    fn supports_xml_expressions(&self) -> bool {
        self.postgres.supports_xml_expressions()
    }
    fn supports_comment_optimizer_hint(&self) -> bool {
        self.postgres.supports_comment_optimizer_hint()
    }
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::ast::{Expr, SelectItem, SetExpr, Statement};

    use crate::syntax::parser::{parse_statement_text, SluiceStatement};

    /// The first select item of a `SELECT`.
    fn selected(sql: &str) -> Expr {
        let SluiceStatement::Standard(statement) = parse_statement_text(sql).unwrap() else { panic!("{sql}") };
        let Statement::Query(query) = *statement else { panic!("{sql}") };
        let SetExpr::Select(select) = *query.body else { panic!("{sql}") };
        match select.projection.into_iter().next() {
            Some(SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. }) => expr,
            other => panic!("{sql}: {other:?}"),
        }
    }

    #[test]
    fn reads_collate_after_a_cast_as_postgresql_does() {
        // `::` binds tighter than COLLATE, COLLATE tighter than `||`.
        let Expr::Collate { expr, collation } = selected(r#"SELECT x::text COLLATE "C""#) else { panic!() };
        assert!(matches!(*expr, Expr::Cast { .. }));
        assert_eq!(collation.to_string(), r#""C""#);
        let Expr::BinaryOp { right, .. } = selected(r#"SELECT 'a' || x::text COLLATE "C""#) else { panic!() };
        assert!(matches!(*right, Expr::Collate { .. }));
        let Expr::Cast { expr, .. } = selected(r#"SELECT x::text COLLATE "C"::varchar"#) else { panic!() };
        assert!(matches!(*expr, Expr::Collate { .. }));
        assert!(parse_statement_text(r#"CREATE TABLE t (x text COLLATE "C" NOT NULL)"#).is_ok());
    }
}
