//! The syntax of following a table's changes: `SUBSCRIBE [TO] t [WITH (SNAPSHOT = bool)]` alone,
//! in `COPY (...) TO STDOUT` and in `DECLARE c CURSOR FOR ...`, and durable subscriptions:
//! `CREATE SUBSCRIPTION [IF NOT EXISTS] s FROM [TABLE] t [WITH (SNAPSHOT = bool)]`,
//! `SUBSCRIBE [TO] SUBSCRIPTION s`, `ALTER SUBSCRIPTION s ACKNOWLEDGE [VERSION] n` and `DROP
//! SUBSCRIPTION [IF EXISTS] s`.
//!
//! PostgreSQL's own `CREATE SUBSCRIPTION s CONNECTION ... PUBLICATION ...` (logical replication
//! from another server) and its other `ALTER SUBSCRIPTION` forms are refused with 0A000.

use datafusion::sql::sqlparser::ast::ObjectName;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;

use super::parser::{expect_word, word};
use super::streaming::StreamingStatement;

/// What a SUBSCRIBE follows.
#[derive(Debug, Clone, PartialEq)]
pub enum SubscribeTarget {
    /// A table from its next commit on, its rows first unless `snapshot` is false.
    Table { table: ObjectName, snapshot: bool },
    /// A durable subscription, from what its consumer acknowledged.
    Durable(String),
}

/// Whether the statement at the parser (looked at, not consumed) is one of this module's.
pub(super) fn is_subscription_statement(parser: &Parser) -> bool {
    let w = |n: usize| word(parser, n);
    match w(0).as_deref() {
        Some("SUBSCRIBE") => true,
        Some("DECLARE") => (1..8).any(|n| w(n).as_deref() == Some("FOR") && w(n + 1).as_deref() == Some("SUBSCRIBE")),
        Some("COPY") => parser.peek_nth_token(1).token == Token::LParen && w(2).as_deref() == Some("SUBSCRIBE"),
        Some("CREATE" | "ALTER" | "DROP") => w(1).as_deref() == Some("SUBSCRIPTION"),
        _ => false,
    }
}

/// Parses one of this module's statements (see [`is_subscription_statement`]).
pub(super) fn parse_subscription_statement(parser: &mut Parser) -> Result<StreamingStatement, ParserError> {
    match word(parser, 0).as_deref() {
        Some("SUBSCRIBE") => Ok(StreamingStatement::Subscribe { target: parse_subscribe(parser)?, copy: false }),
        Some("DECLARE") => {
            parser.next_token();
            let cursor = parser.parse_identifier()?.value;
            let (mut hold, mut binary) = (false, false);
            while word(parser, 0).as_deref() != Some("FOR") {
                match word(parser, 0).as_deref() {
                    Some("WITH") if word(parser, 1).as_deref() == Some("HOLD") => hold = true,
                    Some("WITHOUT") if word(parser, 1).as_deref() == Some("HOLD") => hold = false,
                    Some("BINARY") => binary = true,
                    Some("NO" | "SCROLL" | "CURSOR" | "HOLD" | "INSENSITIVE") => {}
                    _ => return parser.expected("CURSOR FOR SUBSCRIBE", parser.peek_token()),
                }
                parser.next_token();
            }
            parser.next_token();
            Ok(StreamingStatement::DeclareSubscribe { cursor, target: parse_subscribe(parser)?, hold, binary })
        }
        Some("COPY") => {
            parser.next_token();
            parser.expect_token(&Token::LParen)?;
            let target = parse_subscribe(parser)?;
            parser.expect_token(&Token::RParen)?;
            parser.expect_keyword_is(Keyword::TO)?;
            expect_word(parser, "STDOUT")?;
            // Only the text format: `WITH (FORMAT text)` or nothing.
            if parser.parse_keyword(Keyword::WITH) || parser.peek_token().token == Token::LParen {
                let options = parse_options(parser)?;
                if let Some((key, value)) = options.iter().find(|(k, v)| !(k == "FORMAT" && v == "TEXT")) {
                    return Err(ParserError::ParserError(format!(
                        "COPY (SUBSCRIBE ...) TO STDOUT supports only the text format, not {key} {value}"
                    )));
                }
            }
            Ok(StreamingStatement::Subscribe { target, copy: true })
        }
        Some("CREATE") => {
            parser.next_token();
            expect_word(parser, "SUBSCRIPTION")?;
            let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
            let name = parser.parse_identifier()?.value;
            if word(parser, 0).as_deref() == Some("CONNECTION") {
                skip_statement(parser);
                return Ok(StreamingStatement::NotSupported(
                    "CREATE SUBSCRIPTION ... CONNECTION (PostgreSQL's logical replication from another server); \
                     Sluice's CREATE SUBSCRIPTION s FROM t follows one of its own tables"
                        .into(),
                ));
            }
            parser.expect_keyword_is(Keyword::FROM)?;
            let _ = parser.parse_keyword(Keyword::TABLE);
            let table = parser.parse_object_name(false)?;
            let snapshot = parse_snapshot_option(parser, "CREATE SUBSCRIPTION")?;
            Ok(StreamingStatement::CreateSubscription { name, table, snapshot, if_not_exists })
        }
        Some("ALTER") => {
            parser.next_token();
            expect_word(parser, "SUBSCRIPTION")?;
            let name = parser.parse_identifier()?.value;
            if word(parser, 0).as_deref() != Some("ACKNOWLEDGE") {
                let rest = word(parser, 0).unwrap_or_default();
                skip_statement(parser);
                return Ok(StreamingStatement::NotSupported(format!(
                    "ALTER SUBSCRIPTION ... {rest} (a Sluice subscription takes ALTER SUBSCRIPTION s ACKNOWLEDGE \
                     [VERSION] n)"
                )));
            }
            parser.next_token();
            let _ = parser.parse_keyword(Keyword::VERSION);
            let version = match parser.next_token().token {
                Token::Number(n, _) => n.parse::<u64>().map_err(|_| {
                    ParserError::ParserError(format!("a version is a whole number of zero or more, not {n}"))
                })?,
                other => return Err(ParserError::ParserError(format!("expected a version number, found {other}"))),
            };
            Ok(StreamingStatement::AcknowledgeSubscription { name, version })
        }
        Some("DROP") => {
            parser.next_token();
            expect_word(parser, "SUBSCRIPTION")?;
            let if_exists = parser.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
            let name = parser.parse_identifier()?.value;
            // PostgreSQL's RESTRICT and CASCADE change nothing for a subscription.
            let _ = parser.parse_one_of_keywords(&[Keyword::CASCADE, Keyword::RESTRICT]);
            Ok(StreamingStatement::DropSubscription { name, if_exists })
        }
        _ => parser.expected("a subscription statement", parser.peek_token()),
    }
}

/// Skips the rest of a statement refused as a whole.
fn skip_statement(parser: &mut Parser) {
    while !matches!(parser.peek_token().token, Token::EOF | Token::SemiColon) {
        parser.next_token();
    }
}

/// `SUBSCRIBE [TO] t [WITH (SNAPSHOT [=] bool)]` or `SUBSCRIBE [TO] SUBSCRIPTION s`, the word
/// SUBSCRIBE at the parser.
fn parse_subscribe(parser: &mut Parser) -> Result<SubscribeTarget, ParserError> {
    expect_word(parser, "SUBSCRIBE")?;
    let _ = parser.parse_keyword(Keyword::TO);
    // `SUBSCRIPTION s`; `SUBSCRIPTION` alone is a table of that name.
    if word(parser, 0).as_deref() == Some("SUBSCRIPTION") && matches!(parser.peek_nth_token(1).token, Token::Word(_)) {
        parser.next_token();
        let name = parser.parse_identifier()?.value;
        if parser.parse_keyword(Keyword::WITH) {
            return Err(ParserError::ParserError(
                "SUBSCRIBE TO SUBSCRIPTION takes no options: whether it starts with a snapshot was chosen at CREATE \
                 SUBSCRIPTION"
                    .into(),
            ));
        }
        return Ok(SubscribeTarget::Durable(name));
    }
    let table = parser.parse_object_name(false)?;
    let snapshot = parse_snapshot_option(parser, "SUBSCRIBE")?;
    Ok(SubscribeTarget::Table { table, snapshot })
}

/// `[WITH (SNAPSHOT [=] bool)]` (true when absent).
fn parse_snapshot_option(parser: &mut Parser, statement: &str) -> Result<bool, ParserError> {
    let mut snapshot = true;
    if parser.parse_keyword(Keyword::WITH) {
        for (key, value) in parse_options(parser)? {
            match (key.as_str(), value.as_str()) {
                ("SNAPSHOT", "TRUE") => snapshot = true,
                ("SNAPSHOT", "FALSE") => snapshot = false,
                (key, value) => {
                    return Err(ParserError::ParserError(format!(
                        "{statement} takes WITH (SNAPSHOT = true | false), not {key} {value}"
                    )))
                }
            }
        }
    }
    Ok(snapshot)
}

/// `(name [=] value, ...)`, names and values in upper case.
fn parse_options(parser: &mut Parser) -> Result<Vec<(String, String)>, ParserError> {
    parser.expect_token(&Token::LParen)?;
    let mut options = Vec::new();
    loop {
        let key = parser.parse_identifier()?.value.to_ascii_uppercase();
        let _ = parser.consume_token(&Token::Eq);
        let value = match parser.next_token().token {
            Token::Word(w) => w.value,
            Token::SingleQuotedString(s) => s,
            Token::Number(n, _) => n,
            other => return Err(ParserError::ParserError(format!("expected a value for {key}, found {other}"))),
        };
        options.push((key, value.to_ascii_uppercase()));
        if !parser.consume_token(&Token::Comma) {
            break;
        }
    }
    parser.expect_token(&Token::RParen)?;
    Ok(options)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::dialect::SluiceDialect;

    fn parse(sql: &str) -> Result<StreamingStatement, ParserError> {
        let dialect = SluiceDialect::new();
        let mut parser = Parser::new(&dialect).try_with_sql(sql)?;
        assert!(is_subscription_statement(&parser), "{sql}");
        parse_subscription_statement(&mut parser)
    }

    #[test]
    fn parses_subscribe_alone_and_in_copy() {
        assert!(matches!(
            parse("SUBSCRIBE TO s.t WITH (SNAPSHOT = false)").unwrap(),
            StreamingStatement::Subscribe { target: SubscribeTarget::Table { snapshot: false, .. }, copy: false }
        ));
        assert!(matches!(
            parse("DECLARE c NO SCROLL CURSOR WITHOUT HOLD FOR SUBSCRIBE TO t WITH (SNAPSHOT = false)").unwrap(),
            StreamingStatement::DeclareSubscribe { target: SubscribeTarget::Table { snapshot: false, .. }, .. }
        ));
        assert!(matches!(
            parse("COPY (SUBSCRIBE t) TO STDOUT WITH (FORMAT text)").unwrap(),
            StreamingStatement::Subscribe { target: SubscribeTarget::Table { snapshot: true, .. }, copy: true }
        ));
        // A table named subscription.
        assert!(matches!(
            parse("SUBSCRIBE subscription").unwrap(),
            StreamingStatement::Subscribe { target: SubscribeTarget::Table { .. }, .. }
        ));
        for bad in ["COPY (SUBSCRIBE t) TO STDOUT (FORMAT csv)", "SUBSCRIBE t WITH (PROGRESS = true)"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parses_durable_subscriptions() {
        assert_eq!(
            parse("CREATE SUBSCRIPTION IF NOT EXISTS s FROM TABLE public.t WITH (SNAPSHOT = false)").unwrap(),
            StreamingStatement::CreateSubscription {
                name: "s".into(),
                table: ObjectName::from(vec!["public".into(), "t".into()]),
                snapshot: false,
                if_not_exists: true
            }
        );
        assert_eq!(
            parse("DECLARE c CURSOR FOR SUBSCRIBE TO SUBSCRIPTION s").unwrap(),
            StreamingStatement::DeclareSubscribe {
                cursor: "c".into(),
                target: SubscribeTarget::Durable("s".into()),
                hold: false,
                binary: false
            }
        );
        assert!(matches!(
            parse("DECLARE c BINARY CURSOR WITH HOLD FOR SUBSCRIBE t").unwrap(),
            StreamingStatement::DeclareSubscribe { hold: true, binary: true, .. }
        ));
        assert_eq!(
            parse("ALTER SUBSCRIPTION s ACKNOWLEDGE VERSION 42").unwrap(),
            StreamingStatement::AcknowledgeSubscription { name: "s".into(), version: 42 }
        );
        assert_eq!(
            parse("DROP SUBSCRIPTION IF EXISTS s CASCADE").unwrap(),
            StreamingStatement::DropSubscription { name: "s".into(), if_exists: true }
        );
        for unsupported in ["CREATE SUBSCRIPTION s CONNECTION 'host=x' PUBLICATION p", "ALTER SUBSCRIPTION s DISABLE"] {
            assert!(matches!(parse(unsupported).unwrap(), StreamingStatement::NotSupported(_)), "{unsupported}");
        }
        for bad in ["ALTER SUBSCRIPTION s ACKNOWLEDGE -1", "SUBSCRIBE TO SUBSCRIPTION s WITH (SNAPSHOT = true)"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
