//! `CREATE SEQUENCE` and `ALTER SEQUENCE`, as PostgreSQL 15 accepts them: the options in any
//! order, each at most once (sqlparser takes CREATE's options only in one order, and has no ALTER
//! SEQUENCE). `DROP SEQUENCE` is sqlparser's. [`crate::sql::sequences`] runs them.

use datafusion::sql::sqlparser::ast::{Ident, ObjectName};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;

use super::parser::word;
use crate::sequence::SequenceOptions;

/// A sequence statement.
#[derive(Debug, Clone, PartialEq)]
pub enum SequenceStatement {
    Create {
        name: ObjectName,
        if_not_exists: bool,
        temporary: bool,
        options: SequenceOptions,
        owned_by: Option<OwnedBy>,
    },
    Alter {
        name: ObjectName,
        if_exists: bool,
        change: AlterSequence,
    },
}

/// What an `ALTER SEQUENCE` changes.
#[derive(Debug, Clone, PartialEq)]
pub enum AlterSequence {
    /// Its options (RESTART among them) and owner column.
    Options {
        options: SequenceOptions,
        owned_by: Option<OwnedBy>,
    },
    RenameTo(Ident),
    /// Another change PostgreSQL has (`SET SCHEMA`, `OWNER TO`, `SET LOGGED`, ...), by its words,
    /// which the engine refuses by name.
    Other(String),
}

/// `OWNED BY table.column` or `OWNED BY NONE`.
#[derive(Debug, Clone, PartialEq)]
pub enum OwnedBy {
    None,
    /// The column's name with its table's in front (`t.c`, `s.t.c`).
    Column(ObjectName),
}

/// Whether the next tokens begin a sequence statement this module parses.
pub fn is_sequence_statement(parser: &Parser) -> bool {
    let mut n = 1;
    match word(parser, 0).as_deref() {
        Some("CREATE") => {
            if matches!(word(parser, n).as_deref(), Some("TEMP" | "TEMPORARY")) {
                n += 1;
            }
            word(parser, n).as_deref() == Some("SEQUENCE")
        }
        Some("ALTER") => word(parser, 1).as_deref() == Some("SEQUENCE"),
        _ => false,
    }
}

/// Parses `CREATE [TEMP] SEQUENCE ...` or `ALTER SEQUENCE ...`.
pub fn parse_sequence_statement(parser: &mut Parser) -> Result<SequenceStatement, ParserError> {
    if word(parser, 0).as_deref() == Some("ALTER") {
        parser.next_token();
        parser.next_token();
        return parse_alter(parser);
    }
    parser.next_token();
    let temporary = matches!(word(parser, 0).as_deref(), Some("TEMP" | "TEMPORARY"));
    if temporary {
        parser.next_token();
    }
    parser.next_token();
    let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = parser.parse_object_name(false)?;
    let (options, owned_by) = parse_options(parser, false)?;
    Ok(SequenceStatement::Create { name, if_not_exists, temporary, options, owned_by })
}

fn parse_alter(parser: &mut Parser) -> Result<SequenceStatement, ParserError> {
    let if_exists = parser.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
    let name = parser.parse_object_name(false)?;
    let change = if parser.parse_keywords(&[Keyword::RENAME, Keyword::TO]) {
        AlterSequence::RenameTo(parser.parse_identifier()?)
    } else if let Some(words) = other_change(parser) {
        skip_to_end(parser);
        AlterSequence::Other(words)
    } else {
        let (options, owned_by) = parse_options(parser, true)?;
        if options == SequenceOptions::default() && owned_by.is_none() {
            return parser.expected("an option of ALTER SEQUENCE", parser.peek_token());
        }
        AlterSequence::Options { options, owned_by }
    };
    Ok(SequenceStatement::Alter { name, if_exists, change })
}

/// The changes of ALTER SEQUENCE other than its options and RENAME, by their first words.
fn other_change(parser: &Parser) -> Option<String> {
    let words = match (word(parser, 0).as_deref(), word(parser, 1).as_deref()) {
        (Some("SET"), Some(second @ ("SCHEMA" | "LOGGED" | "UNLOGGED"))) => format!("SET {second}"),
        (Some("OWNER"), Some("TO")) => "OWNER TO".into(),
        _ => return None,
    };
    Some(words)
}

/// The options of CREATE or (with `alter`, which also takes RESTART) ALTER SEQUENCE.
fn parse_options(parser: &mut Parser, alter: bool) -> Result<(SequenceOptions, Option<OwnedBy>), ParserError> {
    let mut options = SequenceOptions::default();
    let mut owned_by = None;
    loop {
        let first = word(parser, 0);
        let given = match first.as_deref() {
            Some("AS") => {
                parser.next_token();
                let data_type = parser.parse_data_type()?.to_string();
                once(&mut options.data_type, data_type)
            }
            Some("INCREMENT") => {
                parser.next_token();
                let _ = parser.parse_keyword(Keyword::BY);
                once(&mut options.increment, parse_integer(parser)?)
            }
            Some("MINVALUE") => {
                parser.next_token();
                once(&mut options.min_value, Some(parse_integer(parser)?))
            }
            Some("MAXVALUE") => {
                parser.next_token();
                once(&mut options.max_value, Some(parse_integer(parser)?))
            }
            Some("START") => {
                parser.next_token();
                let _ = parser.parse_keyword(Keyword::WITH);
                once(&mut options.start, parse_integer(parser)?)
            }
            Some("RESTART") if alter => {
                parser.next_token();
                let with = parser.parse_keyword(Keyword::WITH);
                let value = match parser.peek_token().token {
                    Token::Number(..) | Token::Minus | Token::Plus => Some(parse_integer(parser)?),
                    _ if with => return parser.expected("a number after RESTART WITH", parser.peek_token()),
                    _ => None,
                };
                once(&mut options.restart, value)
            }
            Some("CACHE") => {
                parser.next_token();
                once(&mut options.cache, parse_integer(parser)?)
            }
            Some("CYCLE") => {
                parser.next_token();
                once(&mut options.cycle, true)
            }
            Some("NO") => {
                let what = word(parser, 1);
                let given = match what.as_deref() {
                    Some("MINVALUE") => once(&mut options.min_value, None),
                    Some("MAXVALUE") => once(&mut options.max_value, None),
                    Some("CYCLE") => once(&mut options.cycle, false),
                    _ => return parser.expected("MINVALUE, MAXVALUE or CYCLE after NO", parser.peek_nth_token(1)),
                };
                parser.next_token();
                parser.next_token();
                given
            }
            Some("OWNED") => {
                parser.next_token();
                parser.expect_keyword_is(Keyword::BY)?;
                let owner = if word(parser, 0).as_deref() == Some("NONE") {
                    parser.next_token();
                    OwnedBy::None
                } else {
                    OwnedBy::Column(parser.parse_object_name(false)?)
                };
                once(&mut owned_by, owner)
            }
            _ => return Ok((options, owned_by)),
        };
        if !given {
            return Err(ParserError::ParserError("conflicting or redundant options".into()));
        }
    }
}

/// Sets an option given once; false when it was given already.
fn once<T>(slot: &mut Option<T>, value: T) -> bool {
    if slot.is_some() {
        return false;
    }
    *slot = Some(value);
    true
}

/// A signed integer constant (`-1`, `+5`, `9223372036854775807`).
fn parse_integer(parser: &mut Parser) -> Result<i64, ParserError> {
    let negative = match parser.peek_token().token {
        Token::Minus => {
            parser.next_token();
            true
        }
        Token::Plus => {
            parser.next_token();
            false
        }
        _ => false,
    };
    let token = parser.next_token();
    let Token::Number(digits, _) = &token.token else { return parser.expected("an integer", token) };
    let text = if negative { format!("-{digits}") } else { digits.clone() };
    text.parse::<i64>()
        .map_err(|_| ParserError::ParserError(format!("value \"{text}\" is out of range for type bigint")))
}

/// Consumes the rest of a statement that is refused whatever it says, up to its `;`.
fn skip_to_end(parser: &mut Parser) {
    while !matches!(parser.peek_token().token, Token::EOF | Token::SemiColon) {
        parser.next_token();
    }
}

#[cfg(test)]
mod tests {
    use super::super::parser::{parse_statement_text, SluiceStatement};
    use super::*;

    fn sequence(sql: &str) -> SequenceStatement {
        match parse_statement_text(sql).unwrap() {
            SluiceStatement::Sequence(statement) => *statement,
            other => panic!("not a sequence statement: {other:?}"),
        }
    }

    #[test]
    fn options_come_in_any_order() {
        let SequenceStatement::Create { options, owned_by, if_not_exists, .. } = sequence(
            "CREATE SEQUENCE IF NOT EXISTS s.q START WITH 5 INCREMENT -2 NO MAXVALUE MINVALUE -100 CACHE 3 CYCLE \
             AS integer OWNED BY t.id",
        ) else {
            panic!("not a CREATE")
        };
        assert!(if_not_exists);
        assert_eq!(
            options,
            SequenceOptions {
                data_type: Some("INTEGER".into()),
                increment: Some(-2),
                min_value: Some(Some(-100)),
                max_value: Some(None),
                start: Some(5),
                restart: None,
                cache: Some(3),
                cycle: Some(true),
            }
        );
        assert!(matches!(owned_by, Some(OwnedBy::Column(name)) if name.0.len() == 2));
        let SequenceStatement::Alter { change: AlterSequence::Options { options, .. }, .. } =
            sequence("ALTER SEQUENCE s RESTART NO CYCLE")
        else {
            panic!("not an ALTER")
        };
        assert_eq!(options.restart, Some(None));
        assert_eq!(options.cycle, Some(false));
        assert!(matches!(
            sequence("ALTER SEQUENCE IF EXISTS s RENAME TO r"),
            SequenceStatement::Alter { if_exists: true, change: AlterSequence::RenameTo(_), .. }
        ));
        assert!(matches!(
            sequence("ALTER SEQUENCE s SET SCHEMA x"),
            SequenceStatement::Alter { change: AlterSequence::Other(words), .. } if words == "SET SCHEMA"
        ));
    }

    #[test]
    fn refuses_what_postgres_refuses() {
        for sql in [
            "CREATE SEQUENCE s START 1 START 2",
            "CREATE SEQUENCE s INCREMENT BY x",
            "CREATE SEQUENCE s RESTART 1",
            "ALTER SEQUENCE s",
            "CREATE SEQUENCE s NO START",
        ] {
            assert!(parse_statement_text(sql).is_err(), "{sql}");
        }
    }
}
