//! The syntax of alerts: `CREATE [OR REPLACE] ALERT name ON FAILURE [OF FLOW f | OF SOURCE s]
//! NOTIFY WEBHOOK 'url' [WITH (...)]`, `CREATE ALERT name WHEN (condition) NOTIFY WEBHOOK 'url'
//! [WITH (...)]` and `DROP ALERT [IF EXISTS] name` (see [`crate::alerts`]).

use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};

use super::parser::{expect_word, word};
use super::streaming::StreamingStatement;
pub use crate::catalog::AlertCondition;

/// `CREATE ALERT`.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateAlert {
    pub name: String,
    pub or_replace: bool,
    pub if_not_exists: bool,
    pub condition: AlertCondition,
    pub webhook: String,
    pub options: Vec<(String, String)>,
}

/// Whether the statement at the parser (looked at, not consumed) is an alert statement.
pub(super) fn is_alert_statement(parser: &Parser) -> bool {
    let w = |n: usize| word(parser, n);
    match w(0).as_deref() {
        Some("CREATE") => {
            w(1).as_deref() == Some("ALERT")
                || (w(1).as_deref() == Some("OR")
                    && w(2).as_deref() == Some("REPLACE")
                    && w(3).as_deref() == Some("ALERT"))
        }
        Some("DROP") => w(1).as_deref() == Some("ALERT"),
        _ => false,
    }
}

/// Parses an alert statement (see [`is_alert_statement`]).
pub(super) fn parse_alert_statement(parser: &mut Parser) -> Result<StreamingStatement, ParserError> {
    if word(parser, 0).as_deref() == Some("DROP") {
        parser.next_token();
        parser.next_token();
        let if_exists = parser.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
        let name = parser.parse_identifier()?.value;
        return Ok(StreamingStatement::DropAlert { name, if_exists });
    }
    parser.next_token();
    let or_replace = parser.parse_keywords(&[Keyword::OR, Keyword::REPLACE]);
    expect_word(parser, "ALERT")?;
    let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = parser.parse_identifier()?.value;
    let condition = if parser.parse_keyword(Keyword::ON) {
        expect_word(parser, "FAILURE")?;
        if parser.parse_keyword(Keyword::OF) {
            match word(parser, 0).as_deref() {
                Some("FLOW") => {
                    parser.next_token();
                    AlertCondition::Failure { flow: Some(parser.parse_identifier()?.value), source: None }
                }
                Some("SOURCE") => {
                    parser.next_token();
                    AlertCondition::Failure { flow: None, source: Some(parser.parse_identifier()?.value) }
                }
                _ => return parser.expected("FLOW or SOURCE", parser.peek_token()),
            }
        } else {
            AlertCondition::Failure { flow: None, source: None }
        }
    } else if parser.parse_keyword(Keyword::WHEN) {
        AlertCondition::When(parser.parse_expr()?.to_string())
    } else {
        return parser.expected("ON FAILURE or WHEN (condition)", parser.peek_token());
    };
    expect_word(parser, "NOTIFY")?;
    expect_word(parser, "WEBHOOK")?;
    let webhook = parser.parse_literal_string()?;
    let options =
        if parser.parse_keyword(Keyword::WITH) { super::parser::parse_property_list(parser)? } else { vec![] };
    Ok(StreamingStatement::CreateAlert(Box::new(CreateAlert {
        name,
        or_replace,
        if_not_exists,
        condition,
        webhook,
        options,
    })))
}
