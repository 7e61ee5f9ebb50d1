//! `FETCH` and `MOVE` as PostgreSQL 15 reads them: `FETCH [direction] [FROM | IN] cursor`, the
//! direction and the FROM/IN optional (`FETCH c`, `FETCH NEXT c`, `FETCH 2 c`, `FETCH FORWARD
//! c`, `MOVE c`). sqlparser wants both, and has no MOVE. A FETCH is sqlparser's
//! `Statement::Fetch` (the server serves cursors, see `server/src/pg/handler/cursors.rs`); a
//! MOVE is [`SluiceStatement::Move`].

use datafusion::sql::sqlparser::ast::{FetchDirection, FetchPosition, Statement, Value, ValueWithSpan};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;

use super::parser::{word, SluiceStatement};

/// Whether the next tokens begin a FETCH or a MOVE.
pub fn is_fetch_or_move(parser: &Parser) -> bool {
    matches!(word(parser, 0).as_deref(), Some("FETCH" | "MOVE"))
}

/// Parses a FETCH or a MOVE (see the module docs).
pub fn parse_fetch_or_move(parser: &mut Parser) -> Result<SluiceStatement, ParserError> {
    let is_move = word(parser, 0).as_deref() == Some("MOVE");
    parser.next_token();
    let direction = parse_direction(parser)?;
    let position = if parser.parse_keyword(Keyword::IN) {
        FetchPosition::In
    } else {
        let _ = parser.parse_keyword(Keyword::FROM);
        FetchPosition::From
    };
    let name = parser.parse_identifier()?;
    Ok(if is_move {
        SluiceStatement::Move { name, direction }
    } else {
        SluiceStatement::Standard(Box::new(Statement::Fetch { name, direction, position, into: None }))
    })
}

/// The direction, NEXT when none is written (the next token is FROM, IN or the cursor).
fn parse_direction(parser: &mut Parser) -> Result<FetchDirection, ParserError> {
    Ok(match word(parser, 0).as_deref() {
        Some("NEXT") => keyword_then(parser, FetchDirection::Next),
        Some("PRIOR") => keyword_then(parser, FetchDirection::Prior),
        Some("FIRST") => keyword_then(parser, FetchDirection::First),
        Some("LAST") => keyword_then(parser, FetchDirection::Last),
        Some("ALL") => keyword_then(parser, FetchDirection::All),
        Some("ABSOLUTE") => {
            parser.next_token();
            FetchDirection::Absolute { limit: signed_count(parser)?.ok_or_else(|| count_expected(parser))? }
        }
        Some("RELATIVE") => {
            parser.next_token();
            FetchDirection::Relative { limit: signed_count(parser)?.ok_or_else(|| count_expected(parser))? }
        }
        Some("FORWARD") => {
            parser.next_token();
            if parser.parse_keyword(Keyword::ALL) {
                FetchDirection::ForwardAll
            } else {
                FetchDirection::Forward { limit: signed_count(parser)? }
            }
        }
        Some("BACKWARD") => {
            parser.next_token();
            if parser.parse_keyword(Keyword::ALL) {
                FetchDirection::BackwardAll
            } else {
                FetchDirection::Backward { limit: signed_count(parser)? }
            }
        }
        _ => match signed_count(parser)? {
            Some(limit) => FetchDirection::Count { limit },
            None => FetchDirection::Next,
        },
    })
}

fn keyword_then(parser: &mut Parser, direction: FetchDirection) -> FetchDirection {
    parser.next_token();
    direction
}

/// A count with its sign (`-2`), if the next tokens are one.
fn signed_count(parser: &mut Parser) -> Result<Option<ValueWithSpan>, ParserError> {
    let sign = match parser.peek_token().token {
        Token::Minus => "-",
        Token::Plus => "",
        Token::Number(..) => return Ok(Some(parser.parse_number_value()?)),
        _ => return Ok(None),
    };
    parser.next_token();
    let value = parser.parse_number_value()?;
    let Value::Number(digits, long) = value.value else { return parser.expected("a count", parser.peek_token()) };
    Ok(Some(ValueWithSpan { value: Value::Number(format!("{sign}{digits}"), long), span: value.span }))
}

fn count_expected(parser: &Parser) -> ParserError {
    ParserError::ParserError(format!("expected a count at {}", parser.peek_token().span.start))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::parser::parse_statement_text;

    fn direction_and_name(sql: &str) -> (bool, String, String) {
        match parse_statement_text(sql).unwrap() {
            SluiceStatement::Move { name, direction } => (true, direction.to_string(), name.value),
            SluiceStatement::Standard(s) => match *s {
                Statement::Fetch { name, direction, .. } => (false, direction.to_string(), name.value),
                other => panic!("{sql}: {other:?}"),
            },
            other => panic!("{sql}: {other:?}"),
        }
    }

    #[test]
    fn reads_fetch_and_move_as_postgresql_does() {
        let fetch =
            |sql: &str, direction: &str| assert_eq!(direction_and_name(sql), (false, direction.into(), "c".into()));
        let moves =
            |sql: &str, direction: &str| assert_eq!(direction_and_name(sql), (true, direction.into(), "c".into()));
        fetch("FETCH c", "NEXT");
        fetch("FETCH NEXT c", "NEXT");
        fetch("FETCH FROM c", "NEXT");
        fetch("fetch 2 in c", "2");
        fetch("FETCH -1 c", "-1");
        fetch("FETCH FORWARD c", "FORWARD");
        fetch("FETCH FORWARD 3 FROM c", "FORWARD 3");
        fetch("FETCH ALL c", "ALL");
        fetch("FETCH BACKWARD ALL c", "BACKWARD ALL");
        fetch("FETCH ABSOLUTE 2 c", "ABSOLUTE 2");
        moves("MOVE c", "NEXT");
        moves("MOVE FORWARD 2 IN c", "FORWARD 2");
        moves("MOVE ALL FROM c", "ALL");
        assert!(parse_statement_text("FETCH").is_err());
        assert!(parse_statement_text("MOVE ABSOLUTE c").is_err());
    }
}
