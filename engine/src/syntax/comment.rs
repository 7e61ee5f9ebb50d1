//! `COMMENT ON <object> IS '<text>' | NULL`, as PostgreSQL 15 accepts it.
//!
//! Every form is parsed here (sqlparser has no `COMMENT ON CONSTRAINT`): tables, columns and
//! constraints into names the engine resolves ([`crate::sql::comments`] runs them), and every other
//! kind of object PostgreSQL knows into [`CommentTarget::Other`] with the kind's words, which the
//! engine refuses by name. What follows such a kind's words is not parsed (functions with their
//! argument lists, operators, casts, ...): the statement is refused whatever it says.

use datafusion::sql::sqlparser::ast::{Ident, ObjectName};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;

use super::parser::word;

/// `COMMENT ON ...`: what it comments on, and the text (None: the comment is removed, as `IS
/// NULL` and `IS ''` do).
#[derive(Debug, Clone, PartialEq)]
pub struct CommentOn {
    pub target: CommentTarget,
    pub comment: Option<String>,
}

/// The object a `COMMENT ON` names.
#[derive(Debug, Clone, PartialEq)]
pub enum CommentTarget {
    /// `TABLE t`.
    Table(ObjectName),
    /// `COLUMN t.c` (or `s.t.c`): the table's name and the column's.
    Column { table: ObjectName, column: Ident },
    /// `CONSTRAINT name ON t`.
    Constraint { name: Ident, table: ObjectName },
    /// `VIEW v`.
    View(ObjectName),
    /// `MATERIALIZED VIEW v`.
    MaterializedView(ObjectName),
    /// Any other kind of object, by its words as PostgreSQL spells them (`FUNCTION`,
    /// `CONSTRAINT ... ON DOMAIN`, `TEXT SEARCH CONFIGURATION`).
    Other(String),
}

impl CommentTarget {
    /// The table the comment is on (tables, columns, constraints, views).
    pub fn relation(&self) -> Option<&ObjectName> {
        match self {
            CommentTarget::Table(name) | CommentTarget::View(name) | CommentTarget::MaterializedView(name) => {
                Some(name)
            }
            CommentTarget::Column { table, .. } | CommentTarget::Constraint { table, .. } => Some(table),
            CommentTarget::Other(_) => None,
        }
    }

    /// The relation's name, mutably (to qualify a temporary table's).
    pub fn relation_mut(&mut self) -> Option<&mut ObjectName> {
        match self {
            CommentTarget::Table(name) | CommentTarget::View(name) | CommentTarget::MaterializedView(name) => {
                Some(name)
            }
            CommentTarget::Column { table, .. } | CommentTarget::Constraint { table, .. } => Some(table),
            CommentTarget::Other(_) => None,
        }
    }
}

/// The kinds of object PostgreSQL 15's `COMMENT ON` takes that Sluice has no comment for, longest
/// spelling first where one begins another.
const OTHER_KINDS: &[&[&str]] = &[
    &["ACCESS", "METHOD"],
    &["AGGREGATE"],
    &["CAST"],
    &["COLLATION"],
    &["CONVERSION"],
    &["DATABASE"],
    &["DOMAIN"],
    &["EXTENSION"],
    &["EVENT", "TRIGGER"],
    &["FOREIGN", "DATA", "WRAPPER"],
    &["FOREIGN", "TABLE"],
    &["FUNCTION"],
    &["INDEX"],
    &["LARGE", "OBJECT"],
    &["OPERATOR", "CLASS"],
    &["OPERATOR", "FAMILY"],
    &["OPERATOR"],
    &["POLICY"],
    &["PROCEDURAL", "LANGUAGE"],
    &["LANGUAGE"],
    &["PROCEDURE"],
    &["PUBLICATION"],
    &["ROLE"],
    &["ROUTINE"],
    &["RULE"],
    &["SCHEMA"],
    &["SEQUENCE"],
    &["SERVER"],
    &["STATISTICS"],
    &["SUBSCRIPTION"],
    &["TABLESPACE"],
    &["TEXT", "SEARCH", "CONFIGURATION"],
    &["TEXT", "SEARCH", "DICTIONARY"],
    &["TEXT", "SEARCH", "PARSER"],
    &["TEXT", "SEARCH", "TEMPLATE"],
    &["TRANSFORM", "FOR"],
    &["TRIGGER"],
    &["TYPE"],
];

/// Whether the next tokens begin a `COMMENT ON`.
pub fn is_comment_on(parser: &Parser) -> bool {
    word(parser, 0).as_deref() == Some("COMMENT") && word(parser, 1).as_deref() == Some("ON")
}

/// Parses `COMMENT ON <object> IS <text | NULL>`.
pub fn parse_comment_on(parser: &mut Parser) -> Result<CommentOn, ParserError> {
    parser.next_token();
    parser.next_token();
    let target = match word(parser, 0).as_deref() {
        Some("TABLE") => {
            parser.next_token();
            CommentTarget::Table(parser.parse_object_name(false)?)
        }
        Some("VIEW") => {
            parser.next_token();
            CommentTarget::View(parser.parse_object_name(false)?)
        }
        Some("MATERIALIZED") if word(parser, 1).as_deref() == Some("VIEW") => {
            parser.next_token();
            parser.next_token();
            CommentTarget::MaterializedView(parser.parse_object_name(false)?)
        }
        Some("COLUMN") => {
            parser.next_token();
            parse_column(parser)?
        }
        Some("CONSTRAINT") => {
            parser.next_token();
            let name = parser.parse_identifier()?;
            parser.expect_keyword_is(Keyword::ON)?;
            if word(parser, 0).as_deref() == Some("DOMAIN") {
                skip_to_end(parser);
                return Ok(CommentOn {
                    target: CommentTarget::Other("CONSTRAINT ... ON DOMAIN".into()),
                    comment: None,
                });
            }
            CommentTarget::Constraint { name, table: parser.parse_object_name(false)? }
        }
        _ => {
            let kind = other_kind(parser).ok_or_else(|| {
                ParserError::ParserError(format!(
                    "expected an object kind after COMMENT ON, found {}",
                    parser.peek_token()
                ))
            })?;
            skip_to_end(parser);
            return Ok(CommentOn { target: CommentTarget::Other(kind), comment: None });
        }
    };
    parser.expect_keyword_is(Keyword::IS)?;
    let comment = if parser.parse_keyword(Keyword::NULL) { None } else { Some(parse_text(parser)?) };
    // PostgreSQL removes a comment given as the empty string, as with NULL.
    Ok(CommentOn { target, comment: comment.filter(|text| !text.is_empty()) })
}

/// `t.c` or `s.t.c` (or `catalog.s.t.c`): the last part is the column.
fn parse_column(parser: &mut Parser) -> Result<CommentTarget, ParserError> {
    let mut name = parser.parse_object_name(false)?;
    let column = match name.0.pop().as_ref().and_then(|part| part.as_ident()) {
        Some(column) if !name.0.is_empty() => column.clone(),
        _ => {
            return Err(ParserError::ParserError(
                "column name must be qualified (COMMENT ON COLUMN table.column)".into(),
            ))
        }
    };
    Ok(CommentTarget::Column { table: name, column })
}

/// The comment's text: a string constant in any of SQL's spellings.
fn parse_text(parser: &mut Parser) -> Result<String, ParserError> {
    let token = parser.next_token();
    match token.token {
        Token::SingleQuotedString(text)
        | Token::EscapedStringLiteral(text)
        | Token::NationalStringLiteral(text)
        | Token::UnicodeStringLiteral(text) => Ok(text),
        Token::DollarQuotedString(text) => Ok(text.value),
        _ => parser.expected("a string constant or NULL", token),
    }
}

/// The words of a kind of [`OTHER_KINDS`] that the next tokens spell, consumed.
fn other_kind(parser: &mut Parser) -> Option<String> {
    let kind = OTHER_KINDS
        .iter()
        .find(|kind| kind.iter().enumerate().all(|(n, expected)| word(parser, n).as_deref() == Some(*expected)))?;
    for _ in 0..kind.len() {
        parser.next_token();
    }
    Some(kind.join(" "))
}

/// Consumes the rest of a statement that is refused whatever it says, up to its `;`.
fn skip_to_end(parser: &mut Parser) {
    let mut depth = 0usize;
    loop {
        match parser.peek_token().token {
            Token::EOF => return,
            Token::SemiColon if depth == 0 => return,
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            _ => {}
        }
        parser.next_token();
    }
}

#[cfg(test)]
mod tests {
    use super::super::parser::{parse_statement_text, SluiceStatement};
    use super::*;

    fn comment(sql: &str) -> CommentOn {
        match parse_statement_text(sql).unwrap() {
            SluiceStatement::Comment(comment) => *comment,
            other => panic!("not a comment: {other:?}"),
        }
    }

    #[test]
    fn parses_every_form_postgres_has() {
        let table = comment("COMMENT ON TABLE s.t IS 'rows'");
        assert_eq!(table.target, CommentTarget::Table(ObjectName::from(vec![Ident::new("s"), Ident::new("t")])));
        assert_eq!(table.comment.as_deref(), Some("rows"));
        let column = comment("comment on column s.t.c is $$it's$$");
        assert!(matches!(&column.target, CommentTarget::Column { table, column }
            if table.0.len() == 2 && column.value == "c"));
        assert_eq!(column.comment.as_deref(), Some("it's"));
        let constraint = comment("COMMENT ON CONSTRAINT t_pkey ON t IS E'a\\nb'");
        assert!(matches!(&constraint.target, CommentTarget::Constraint { name, .. } if name.value == "t_pkey"));
        assert_eq!(constraint.comment.as_deref(), Some("a\nb"));
        assert_eq!(comment("COMMENT ON TABLE t IS NULL").comment, None);
        assert_eq!(comment("COMMENT ON TABLE t IS ''").comment, None);
        assert!(matches!(comment("COMMENT ON MATERIALIZED VIEW m IS 'x'").target, CommentTarget::MaterializedView(_)));
        assert_eq!(comment("COMMENT ON FUNCTION f(int, text) IS 'x'").target, CommentTarget::Other("FUNCTION".into()));
        assert_eq!(
            comment("COMMENT ON TEXT SEARCH CONFIGURATION c IS 'x'").target,
            CommentTarget::Other("TEXT SEARCH CONFIGURATION".into())
        );
        assert_eq!(
            comment("COMMENT ON CONSTRAINT c ON DOMAIN d IS 'x'").target,
            CommentTarget::Other("CONSTRAINT ... ON DOMAIN".into())
        );
    }

    #[test]
    fn refuses_what_postgres_refuses() {
        for sql in [
            "COMMENT ON COLUMN c IS 'x'",
            "COMMENT ON TABLE t 'x'",
            "COMMENT ON TABLE t IS 42",
            "COMMENT ON WIDGET w IS 'x'",
            "COMMENT ON CONSTRAINT c t IS 'x'",
        ] {
            assert!(parse_statement_text(sql).is_err(), "{sql}");
        }
    }
}
