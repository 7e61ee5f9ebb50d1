//! The syntax of `AUTO CDC` (Databricks' and Spark Declarative Pipelines' spelling; `APPLY
//! CHANGES` is accepted as the older one), in both of its places:
//!
//! ```sql
//! CREATE FLOW f AS AUTO CDC INTO target FROM STREAM(src) KEYS (id) SEQUENCE BY seq ...;
//! CREATE STREAMING TABLE target FLOW AUTO CDC FROM STREAM(src) KEYS (id) SEQUENCE BY seq ...;
//! ```
//!
//! After `FROM STREAM(src)` come `KEYS (...)` and `SEQUENCE BY expr` (both required) and, in any
//! order, `IGNORE NULL UPDATES`, `APPLY AS DELETE WHEN expr`, `APPLY AS TRUNCATE WHEN expr`,
//! `COLUMNS (a, b) | COLUMNS * EXCEPT (a, b)`, `STORED AS SCD TYPE 1 | 2` and `TRACK HISTORY ON
//! (a, b) | * EXCEPT (a, b)`. Expressions are kept as SQL text ([`CdcSpec`]).

use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;

use datafusion::sql::sqlparser::ast::{ObjectName, Query};

use super::dialect::SluiceDialect;
use super::parser::{word, PARSER_RECURSION_MAX};
use crate::catalog::{CdcColumns, CdcSpec};

/// The columns of an AUTO CDC flow's query (its input) carrying each event's sequence value and
/// its delete and truncate conditions, beside the source's own columns.
pub const SEQUENCE_COLUMN: &str = "__cdc_sequence";
pub const DELETE_COLUMN: &str = "__cdc_delete";
pub const TRUNCATE_COLUMN: &str = "__cdc_truncate";

/// Where an AUTO CDC flow reads its events: a table's appended rows, or its change feed.
#[derive(Debug, Clone, PartialEq)]
pub enum CdcSource {
    Table(ObjectName),
    /// `STREAM(table_changes('t'))`.
    Changes(ObjectName),
}

/// The query an AUTO CDC clause stands for: every column of the source, plus the event's
/// sequence value and its delete and truncate conditions (what `flow::cdc` applies). Over a
/// change feed the `update_preimage` rows are left out (an update is its postimage).
pub fn input_query(source: &CdcSource, spec: &CdcSpec) -> Result<Box<Query>, ParserError> {
    let delete = spec.delete_when.as_deref().unwrap_or("false");
    let truncate = spec.truncate_when.as_deref().unwrap_or("false");
    let from = match source {
        CdcSource::Table(name) => format!("STREAM({name})"),
        CdcSource::Changes(name) => format!(
            "STREAM(table_changes('{}')) WHERE _change_type <> 'update_preimage'",
            name.to_string().replace('\'', "''")
        ),
    };
    let text = format!(
        "SELECT *, ({}) AS {SEQUENCE_COLUMN}, coalesce(({delete}), false) AS {DELETE_COLUMN}, \
         coalesce(({truncate}), false) AS {TRUNCATE_COLUMN} FROM {from}",
        spec.sequence_by
    );
    let dialect = SluiceDialect::new();
    Parser::new(&dialect).with_recursion_limit(PARSER_RECURSION_MAX).try_with_sql(&text)?.parse_query()
}

/// `AUTO CDC` or `APPLY CHANGES` at the parser (looked at without consuming).
pub fn at_auto_cdc(parser: &Parser) -> bool {
    matches!(
        (word(parser, 0).as_deref(), word(parser, 1).as_deref()),
        (Some("AUTO"), Some("CDC")) | (Some("APPLY"), Some("CHANGES"))
    )
}

/// Consumes `AUTO CDC` or `APPLY CHANGES`.
pub fn expect_auto_cdc(parser: &mut Parser) -> Result<(), ParserError> {
    if !at_auto_cdc(parser) {
        return parser.expected("AUTO CDC", parser.peek_token());
    }
    parser.next_token();
    parser.next_token();
    Ok(())
}

fn expect_words(parser: &mut Parser, words: &[&str]) -> Result<(), ParserError> {
    for expected in words {
        if word(parser, 0).as_deref() != Some(*expected) {
            return parser.expected(&words.join(" "), parser.peek_token());
        }
        parser.next_token();
    }
    Ok(())
}

fn at_words(parser: &Parser, words: &[&str]) -> bool {
    words.iter().enumerate().all(|(n, w)| word(parser, n).as_deref() == Some(*w))
}

/// An identifier as a name: as written when quoted, else in lower case (as `crate::names`
/// normalizes, which this layer does not use).
fn normalize(ident: &datafusion::sql::sqlparser::ast::Ident) -> String {
    if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_lowercase()
    }
}

fn identifier_list(parser: &mut Parser) -> Result<Vec<String>, ParserError> {
    parser.expect_token(&Token::LParen)?;
    let idents = parser.parse_comma_separated(|p| p.parse_identifier())?;
    parser.expect_token(&Token::RParen)?;
    Ok(idents.iter().map(normalize).collect())
}

/// `(a, b)`, `*` or `* EXCEPT (a, b)`.
fn column_choice(parser: &mut Parser) -> Result<CdcColumns, ParserError> {
    if parser.consume_token(&Token::Mul) {
        if parser.parse_keyword(Keyword::EXCEPT) {
            return Ok(CdcColumns::Except(identifier_list(parser)?));
        }
        return Ok(CdcColumns::All);
    }
    Ok(CdcColumns::Only(identifier_list(parser)?))
}

/// `FROM STREAM(src) KEYS (...) ... SEQUENCE BY ...` (or `FROM STREAM(table_changes('src'))`):
/// the source and the flow's spec.
pub fn parse_cdc_body(parser: &mut Parser) -> Result<(CdcSource, CdcSpec), ParserError> {
    parser.expect_keyword_is(Keyword::FROM)?;
    expect_words(parser, &["STREAM"])?;
    parser.expect_token(&Token::LParen)?;
    let source =
        if word(parser, 0).as_deref() == Some("TABLE_CHANGES") && parser.peek_nth_token(1).token == Token::LParen {
            parser.next_token();
            parser.next_token();
            let text = parser.parse_literal_string()?;
            parser.expect_token(&Token::RParen)?;
            let dialect = SluiceDialect::new();
            let name = Parser::new(&dialect).try_with_sql(&text)?.parse_object_name(false)?;
            CdcSource::Changes(name)
        } else {
            CdcSource::Table(parser.parse_object_name(false)?)
        };
    parser.expect_token(&Token::RParen)?;
    expect_words(parser, &["KEYS"])?;
    let keys = identifier_list(parser)?;
    let mut spec = CdcSpec {
        keys,
        sequence_by: String::new(),
        delete_when: None,
        truncate_when: None,
        ignore_null_updates: false,
        columns: CdcColumns::All,
        scd_type: 1,
        track_history: None,
    };
    let mut sequence = None;
    loop {
        if at_words(parser, &["IGNORE", "NULL", "UPDATES"]) {
            expect_words(parser, &["IGNORE", "NULL", "UPDATES"])?;
            spec.ignore_null_updates = true;
        } else if at_words(parser, &["APPLY", "AS", "DELETE", "WHEN"]) {
            expect_words(parser, &["APPLY", "AS", "DELETE", "WHEN"])?;
            spec.delete_when = Some(parser.parse_expr()?.to_string());
        } else if at_words(parser, &["APPLY", "AS", "TRUNCATE", "WHEN"]) {
            expect_words(parser, &["APPLY", "AS", "TRUNCATE", "WHEN"])?;
            spec.truncate_when = Some(parser.parse_expr()?.to_string());
        } else if at_words(parser, &["SEQUENCE", "BY"]) {
            expect_words(parser, &["SEQUENCE", "BY"])?;
            sequence = Some(parser.parse_expr()?.to_string());
        } else if at_words(parser, &["COLUMNS"]) {
            parser.next_token();
            spec.columns = column_choice(parser)?;
        } else if at_words(parser, &["STORED", "AS", "SCD", "TYPE"]) {
            expect_words(parser, &["STORED", "AS", "SCD", "TYPE"])?;
            let token = parser.next_token();
            spec.scd_type = match &token.token {
                Token::Number(n, _) if n == "1" => 1,
                Token::Number(n, _) if n == "2" => 2,
                _ => return parser.expected("SCD TYPE 1 or 2", token),
            };
        } else if at_words(parser, &["TRACK", "HISTORY", "ON"]) {
            expect_words(parser, &["TRACK", "HISTORY", "ON"])?;
            spec.track_history = Some(column_choice(parser)?);
        } else {
            break;
        }
    }
    match sequence {
        Some(sequence) => spec.sequence_by = sequence,
        None => return parser.expected("SEQUENCE BY", parser.peek_token()),
    }
    Ok((source, spec))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(sql: &str) -> CdcSpec {
        let dialect = SluiceDialect::new();
        let mut parser = Parser::new(&dialect).try_with_sql(sql).expect("tokens");
        parse_cdc_body(&mut parser).expect("parses").1
    }

    #[test]
    fn parses_every_clause_in_any_order() {
        let spec = body(
            "FROM STREAM(raw) KEYS (Id, \"Region\") IGNORE NULL UPDATES APPLY AS DELETE WHEN op = 'D' \
             SEQUENCE BY seq COLUMNS * EXCEPT (op, seq) STORED AS SCD TYPE 2 TRACK HISTORY ON (name)",
        );
        assert_eq!(spec.keys, vec!["id".to_string(), "Region".to_string()]);
        assert!(spec.ignore_null_updates);
        assert_eq!(spec.delete_when.as_deref(), Some("op = 'D'"));
        assert_eq!(spec.sequence_by, "seq");
        assert_eq!(spec.columns, CdcColumns::Except(vec!["op".into(), "seq".into()]));
        assert_eq!(spec.scd_type, 2);
        assert_eq!(spec.track_history, Some(CdcColumns::Only(vec!["name".into()])));
    }

    #[test]
    fn sequence_by_is_required() {
        let dialect = SluiceDialect::new();
        let mut parser = Parser::new(&dialect).try_with_sql("FROM STREAM(raw) KEYS (id)").expect("tokens");
        assert!(parse_cdc_body(&mut parser).is_err());
        let mut parser = Parser::new(&dialect)
            .try_with_sql("FROM STREAM(raw) KEYS (id) SEQUENCE BY s STORED AS SCD TYPE 3")
            .expect("tokens");
        assert!(parse_cdc_body(&mut parser).is_err());
    }
}
