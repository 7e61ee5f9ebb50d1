//! Sluice's statements: standard SQL parsed by sqlparser, wrapped with the statements Sluice adds
//! (Delta's table syntax and maintenance commands), as DataFusion's `DFParser` wraps sqlparser.
//!
//! The parser looks at the first words of each statement; for Sluice's statements it drives
//! sqlparser's own pieces (column definitions, expressions, queries), so errors carry sqlparser's
//! line and column; everything else is handed to sqlparser whole.

use datafusion::sql::sqlparser::ast::{ColumnDef, Expr, Ident, ObjectName, Query, Statement, TableConstraint, Value};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;

use super::dialect::SluiceDialect;
use crate::error::Result;

/// Deepest expression nesting accepted (a guard against stack exhaustion).
pub const PARSER_RECURSION_MAX: usize = 200;

/// A parsed statement.
#[derive(Debug, Clone, PartialEq)]
pub enum SluiceStatement {
    /// Any statement sqlparser understands.
    Standard(Box<Statement>),
    CreateTable(Box<CreateTable>),
    DescribeHistory {
        table: ObjectName,
        limit: Option<u64>,
    },
    /// `OPTIMIZE t`, or with `purge` Databricks' `REORG TABLE t [WHERE ...] APPLY (PURGE)` (only
    /// the files with deletion vectors are rewritten; `predicate` is the WHERE, which Sluice
    /// refuses).
    Optimize {
        table: ObjectName,
        purge: bool,
        predicate: Option<Box<datafusion::sql::sqlparser::ast::Expr>>,
    },
    /// `ALTER TABLE t DROP FEATURE name [TRUNCATE HISTORY]` (Databricks' spelling).
    DropFeature {
        table: ObjectName,
        feature: String,
        truncate_history: bool,
    },
    Vacuum {
        table: Box<ObjectName>,
        retain_hours: Option<f64>,
        dry_run: bool,
    },
    Restore {
        table: ObjectName,
        target: Box<TimeTravel>,
    },
    /// Streaming tables and flows.
    Streaming(Box<super::streaming::StreamingStatement>),
    /// `INSERT INTO t BY NAME <query>`: columns matched by name.
    InsertByName {
        table: ObjectName,
        query: Box<Query>,
        overwrite: bool,
    },
    /// `INSERT ... OVERRIDING {SYSTEM | USER} VALUE ...` (sqlparser has no such clause): the
    /// INSERT without it.
    InsertOverriding {
        insert: Box<Statement>,
        overriding: Overriding,
    },
    /// `COMMENT ON ...` (see [`super::comment`]).
    Comment(Box<super::comment::CommentOn>),
    /// `CREATE SEQUENCE` and `ALTER SEQUENCE` (see [`super::sequence`]).
    Sequence(Box<super::sequence::SequenceStatement>),
    /// `MOVE [direction] [FROM | IN] cursor` (see [`super::cursor`]): a FETCH whose rows are
    /// skipped. The server serves cursors.
    Move {
        name: Ident,
        direction: datafusion::sql::sqlparser::ast::FetchDirection,
    },
}

/// What an INSERT's OVERRIDING clause asks of identity columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overriding {
    /// Values given for GENERATED ALWAYS columns are stored.
    System,
    /// Values given for identity columns are ignored: the columns are generated.
    User,
}

/// `VERSION AS OF n` or `TIMESTAMP AS OF expr`.
#[derive(Debug, Clone, PartialEq)]
pub enum TimeTravel {
    Version(Expr),
    Timestamp(Expr),
}

/// `CREATE TABLE` with Delta's clauses.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateTable {
    pub name: ObjectName,
    pub or_replace: bool,
    pub if_not_exists: bool,
    pub external: bool,
    pub columns: Vec<ColumnDef>,
    pub constraints: Vec<TableConstraint>,
    pub partitioned_by: Vec<Ident>,
    pub location: Option<String>,
    pub comment: Option<String>,
    pub properties: Vec<(String, String)>,
    pub query: Option<Box<Query>>,
    /// `CREATE TEMP[ORARY] TABLE` (see [`crate::sql::temporary`]).
    pub temporary: bool,
    /// A temporary table's `ON COMMIT` clause.
    pub on_commit: Option<OnCommit>,
    /// A streaming table declared without columns: a flow into it gives them (AUTO CDC), so it
    /// may start with none.
    pub columns_later: bool,
}

/// What happens to a temporary table at the end of each transaction (`ON COMMIT ...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnCommit {
    PreserveRows,
    DeleteRows,
    Drop,
}

impl OnCommit {
    /// The clause's words, as PostgreSQL spells them.
    pub fn words(self) -> &'static str {
        match self {
            OnCommit::PreserveRows => "PRESERVE ROWS",
            OnCommit::DeleteRows => "DELETE ROWS",
            OnCommit::Drop => "DROP",
        }
    }

    /// The clause from its words (as [`OnCommit::words`] spells them).
    pub fn from_words(words: &str) -> Option<Self> {
        [OnCommit::PreserveRows, OnCommit::DeleteRows, OnCommit::Drop].into_iter().find(|c| c.words() == words)
    }
}

impl CreateTable {
    /// A plain `CREATE TABLE name` with nothing else said.
    pub fn new(name: ObjectName) -> Self {
        Self {
            name,
            or_replace: false,
            if_not_exists: false,
            external: false,
            columns: vec![],
            constraints: vec![],
            partitioned_by: vec![],
            location: None,
            comment: None,
            properties: vec![],
            query: None,
            temporary: false,
            on_commit: None,
            columns_later: false,
        }
    }
}

/// Parses one or more statements separated by `;`.
/// A parser over `sql`'s tokens as Sluice reads them (canonical, unescaped, with a recursion
/// limit), for statements and stored expressions alike.
fn parser_for<'a>(dialect: &'a SluiceDialect, sql: &str) -> Result<Parser<'a>> {
    let tokens = datafusion::sql::sqlparser::tokenizer::Tokenizer::new(dialect, sql)
        .with_unescape(true)
        .tokenize_with_location()
        .map_err(ParserError::from)?;
    let tokens = super::tokens::canonical(tokens);
    Ok(Parser::new(dialect).with_recursion_limit(PARSER_RECURSION_MAX).with_tokens_with_locations(tokens))
}

pub fn parse_statements(sql: &str) -> Result<Vec<SluiceStatement>> {
    let dialect = SluiceDialect::default();
    let mut parser = parser_for(&dialect, sql)?;
    let mut statements = Vec::new();
    loop {
        while parser.consume_token(&Token::SemiColon) {}
        if parser.peek_token().token == Token::EOF {
            break;
        }
        statements.push(parse_statement(&mut parser)?);
        if !parser.consume_token(&Token::SemiColon) && parser.peek_token().token != Token::EOF {
            let found = parser.peek_token();
            return match parser.expected::<()>("end of statement", found) {
                Err(e) => Err(e.into()),
                Ok(()) => Err(crate::error::Error::Internal("the parser accepted an unexpected token".into())),
            };
        }
    }
    Ok(statements)
}

/// Parses exactly one statement.
pub fn parse_statement_text(sql: &str) -> Result<SluiceStatement> {
    let mut statements = parse_statements(sql)?;
    match statements.len() {
        1 => Ok(statements.remove(0)),
        0 => Err(crate::error::Error::Parse { message: "empty statement".into(), line: 1, column: 1 }),
        n => Err(crate::error::Error::Plan(format!("expected one statement, found {n}"))),
    }
}

/// One expression's text (a stored default or generation expression), parsed as statements are.
pub fn parse_expression_text(sql: &str) -> Result<datafusion::sql::sqlparser::ast::Expr> {
    let dialect = SluiceDialect::default();
    let mut parser = parser_for(&dialect, sql)?;
    let expr = parser.parse_expr()?;
    if parser.peek_token().token != Token::EOF {
        let found = parser.peek_token();
        return match parser.expected::<()>("end of expression", found) {
            Err(e) => Err(e.into()),
            Ok(()) => Err(crate::error::Error::Internal("the parser accepted an unexpected token".into())),
        };
    }
    Ok(expr)
}

/// The `n`th next token as an upper-case word, if it is one.
pub(crate) fn word(parser: &Parser, n: usize) -> Option<String> {
    match parser.peek_nth_token(n).token {
        Token::Word(w) => Some(w.value.to_ascii_uppercase()),
        _ => None,
    }
}

/// Consumes the next token if it is the word `expected` (upper case), else the parser's error.
pub(crate) fn expect_word(parser: &mut Parser, expected: &str) -> Result<(), ParserError> {
    if word(parser, 0).as_deref() == Some(expected) {
        parser.next_token();
        Ok(())
    } else {
        parser.expected(expected, parser.peek_token())
    }
}

fn parse_statement(parser: &mut Parser) -> Result<SluiceStatement, ParserError> {
    if super::streaming::is_streaming_statement(parser) {
        return super::streaming::parse_streaming(parser).map(|s| SluiceStatement::Streaming(Box::new(s)));
    }
    if super::comment::is_comment_on(parser) {
        return super::comment::parse_comment_on(parser).map(|c| SluiceStatement::Comment(Box::new(c)));
    }
    if super::sequence::is_sequence_statement(parser) {
        return super::sequence::parse_sequence_statement(parser).map(|s| SluiceStatement::Sequence(Box::new(s)));
    }
    if super::cursor::is_fetch_or_move(parser) {
        return super::cursor::parse_fetch_or_move(parser);
    }
    let first = word(parser, 0);
    match first.as_deref() {
        Some("CREATE") => {
            let mut n = 1;
            if word(parser, n).as_deref() == Some("OR") && word(parser, n + 1).as_deref() == Some("REPLACE") {
                n += 2;
            }
            if word(parser, n).as_deref() == Some("EXTERNAL") {
                n += 1;
            }
            if matches!(word(parser, n).as_deref(), Some("GLOBAL" | "LOCAL")) {
                n += 1;
            }
            if matches!(word(parser, n).as_deref(), Some("TEMP" | "TEMPORARY")) {
                n += 1;
            }
            if word(parser, n).as_deref() == Some("TABLE") {
                return parse_create_table(parser).map(|c| SluiceStatement::CreateTable(Box::new(c)));
            }
        }
        Some("DESCRIBE" | "DESC") if word(parser, 1).as_deref() == Some("HISTORY") => {
            parser.next_token();
            parser.next_token();
            let table = parser.parse_object_name(false)?;
            let limit = if parser.parse_keyword(Keyword::LIMIT) { Some(parse_u64(parser)?) } else { None };
            return Ok(SluiceStatement::DescribeHistory { table, limit });
        }
        Some("INSERT") => {
            let by_name_at = (1..=4)
                .find(|&n| word(parser, n).as_deref() == Some("BY") && word(parser, n + 1).as_deref() == Some("NAME"));
            if by_name_at.is_some() {
                parser.next_token();
                let overwrite = parser.parse_keyword(Keyword::OVERWRITE);
                if !overwrite {
                    parser.expect_keyword_is(Keyword::INTO)?;
                }
                let _ = parser.parse_keyword(Keyword::TABLE);
                let table = parser.parse_object_name(false)?;
                parser.expect_keywords(&[Keyword::BY, Keyword::NAME])?;
                let query = parser.parse_query()?;
                return Ok(SluiceStatement::InsertByName { table, query, overwrite });
            }
            if let Some(statement) = parse_insert_overriding(parser)? {
                return Ok(statement);
            }
        }
        Some("OPTIMIZE") => {
            parser.next_token();
            let _ = parser.parse_keyword(Keyword::TABLE);
            let table = parser.parse_object_name(false)?;
            return Ok(SluiceStatement::Optimize { table, purge: false, predicate: None });
        }
        Some("REORG") if word(parser, 1).as_deref() == Some("TABLE") => {
            parser.next_token();
            parser.next_token();
            let table = parser.parse_object_name(false)?;
            let predicate =
                if parser.parse_keyword(Keyword::WHERE) { Some(Box::new(parser.parse_expr()?)) } else { None };
            parser.expect_keyword_is(Keyword::APPLY)?;
            parser.expect_token(&Token::LParen)?;
            if word(parser, 0).as_deref() != Some("PURGE") {
                return parser.expected("PURGE", parser.peek_token());
            }
            parser.next_token();
            parser.expect_token(&Token::RParen)?;
            return Ok(SluiceStatement::Optimize { table, purge: true, predicate });
        }
        Some("ALTER") if word(parser, 1).as_deref() == Some("TABLE") && drop_feature_at(parser).is_some() => {
            parser.next_token();
            parser.next_token();
            let table = parser.parse_object_name(false)?;
            parser.expect_keyword_is(Keyword::DROP)?;
            parser.next_token();
            let feature = parser.parse_identifier()?.value;
            let truncate_history = if word(parser, 0).as_deref() == Some("TRUNCATE") {
                parser.next_token();
                if word(parser, 0).as_deref() != Some("HISTORY") {
                    return parser.expected("HISTORY", parser.peek_token());
                }
                parser.next_token();
                true
            } else {
                false
            };
            return Ok(SluiceStatement::DropFeature { table, feature, truncate_history });
        }
        Some("VACUUM") => {
            parser.next_token();
            let _ = parser.parse_keyword(Keyword::TABLE);
            let table = parser.parse_object_name(false)?;
            let mut retain_hours = None;
            let mut dry_run = false;
            loop {
                if parser.parse_keyword(Keyword::RETAIN) {
                    retain_hours = Some(parse_f64(parser)?);
                    if !parser.parse_keyword(Keyword::HOURS) && !parser.parse_keyword(Keyword::HOUR) {
                        return parser.expected("HOURS", parser.peek_token());
                    }
                } else if parser.parse_keywords(&[Keyword::DRY, Keyword::RUN]) {
                    dry_run = true;
                } else {
                    break;
                }
            }
            return Ok(SluiceStatement::Vacuum { table: Box::new(table), retain_hours, dry_run });
        }
        // PostgreSQL's `RESET TIME ZONE` is `RESET timezone` (as `SET TIME ZONE` is `SET timezone`).
        Some("RESET")
            if word(parser, 1).as_deref() == Some("TIME")
                && word(parser, 2).as_deref() == Some("ZONE")
                && matches!(parser.peek_nth_token(3).token, Token::EOF | Token::SemiColon) =>
        {
            for _ in 0..3 {
                parser.next_token();
            }
            let name = ObjectName::from(vec![Ident::new("timezone")]);
            return Ok(SluiceStatement::Standard(Box::new(Statement::Reset(
                datafusion::sql::sqlparser::ast::ResetStatement {
                    reset: datafusion::sql::sqlparser::ast::Reset::ConfigurationParameter(name),
                },
            ))));
        }
        Some("RESTORE") => {
            parser.next_token();
            let _ = parser.parse_keyword(Keyword::TABLE);
            let table = parser.parse_object_name(false)?;
            let _ = parser.parse_keyword(Keyword::TO);
            let target = parse_time_travel(parser)?;
            return Ok(SluiceStatement::Restore { table, target: Box::new(target) });
        }
        _ => {}
    }
    let statement = parser.parse_statement()?;
    match super::dml_with::unwrap(&statement)? {
        Some(dml) => Ok(SluiceStatement::Standard(Box::new(dml))),
        None => Ok(SluiceStatement::Standard(Box::new(statement))),
    }
}

/// Where `DROP FEATURE <feature> [TRUNCATE HISTORY]` follows `ALTER TABLE <name>` (a name of up
/// to three parts) and ends the statement. PostgreSQL's `ALTER TABLE t DROP feature [CASCADE]`
/// drops a column named `feature`, and stays that.
fn drop_feature_at(parser: &Parser) -> Option<usize> {
    let mut n = 2;
    for _ in 0..3 {
        if !matches!(parser.peek_nth_token(n).token, Token::Word(_)) {
            return None;
        }
        if parser.peek_nth_token(n + 1).token == Token::Period {
            n += 2;
        } else {
            n += 1;
            break;
        }
    }
    let named = !matches!(word(parser, n + 2).as_deref(), None | Some("CASCADE" | "RESTRICT"));
    let ends = matches!(parser.peek_nth_token(n + 3).token, Token::EOF | Token::SemiColon)
        || word(parser, n + 3).as_deref() == Some("TRUNCATE");
    (word(parser, n).as_deref() == Some("DROP") && word(parser, n + 1).as_deref() == Some("FEATURE") && named && ends)
        .then_some(n)
}

/// Tokens at most between INSERT and its OVERRIDING clause that are looked at.
const OVERRIDING_LOOKAHEAD_TOKENS: usize = 64;

/// `INSERT ... OVERRIDING {SYSTEM | USER} VALUE <source>`: the clause comes between the target
/// (with its column list) and the source; taken out, the rest parses as an INSERT.
fn parse_insert_overriding(parser: &mut Parser) -> Result<Option<SluiceStatement>, ParserError> {
    let mut depth = 0usize;
    let mut found = None;
    for n in 1..OVERRIDING_LOOKAHEAD_TOKENS {
        match parser.peek_nth_token_ref(n).token {
            Token::EOF | Token::SemiColon => break,
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth > 0 {
            continue;
        }
        match word(parser, n).as_deref() {
            Some("VALUES" | "SELECT" | "WITH" | "TABLE" | "DEFAULT") => break,
            Some("OVERRIDING") => {
                let overriding = match word(parser, n + 1).as_deref() {
                    Some("SYSTEM") => Overriding::System,
                    Some("USER") => Overriding::User,
                    _ => return parser.expected("SYSTEM VALUE or USER VALUE", parser.peek_nth_token(n + 1)),
                };
                if word(parser, n + 2).as_deref() != Some("VALUE") {
                    return parser.expected("VALUE", parser.peek_nth_token(n + 2));
                }
                found = Some((n, overriding));
                break;
            }
            _ => {}
        }
    }
    let Some((at, overriding)) = found else { return Ok(None) };
    // The statement's tokens (to its end), without the clause's three.
    let mut tokens = Vec::new();
    let mut depth = 0usize;
    loop {
        match parser.peek_token_ref().token {
            Token::EOF => break,
            Token::SemiColon if depth == 0 => break,
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            _ => {}
        }
        tokens.push(parser.next_token());
    }
    tokens.drain(at..at + 3);
    let dialect = SluiceDialect::default();
    let mut inner = Parser::new(&dialect).with_recursion_limit(PARSER_RECURSION_MAX).with_tokens_with_locations(tokens);
    let insert = inner.parse_statement()?;
    if !matches!(insert, Statement::Insert(_)) {
        return parser.expected("an INSERT statement", parser.peek_token());
    }
    if inner.peek_token_ref().token != Token::EOF {
        return inner.expected("end of statement", inner.peek_token());
    }
    Ok(Some(SluiceStatement::InsertOverriding { insert: Box::new(insert), overriding }))
}

fn parse_time_travel(parser: &mut Parser) -> Result<TimeTravel, ParserError> {
    if parser.parse_keywords(&[Keyword::VERSION, Keyword::AS, Keyword::OF]) {
        Ok(TimeTravel::Version(parser.parse_expr()?))
    } else if parser.parse_keywords(&[Keyword::TIMESTAMP, Keyword::AS, Keyword::OF]) {
        Ok(TimeTravel::Timestamp(parser.parse_expr()?))
    } else {
        parser.expected("VERSION AS OF or TIMESTAMP AS OF", parser.peek_token())
    }
}

fn parse_u64(parser: &mut Parser) -> Result<u64, ParserError> {
    parse_number(parser, "an integer")
}

fn parse_f64(parser: &mut Parser) -> Result<f64, ParserError> {
    parse_number(parser, "a number")
}

fn parse_number<T: std::str::FromStr>(parser: &mut Parser, what: &str) -> Result<T, ParserError> {
    let token = parser.next_token();
    match &token.token {
        Token::Number(n, _) => n
            .parse()
            .map_err(|_| ParserError::ParserError(format!("expected {what}, found {n} at {}", token.span.start))),
        _ => parser.expected(what, token),
    }
}

fn parse_create_table(parser: &mut Parser) -> Result<CreateTable, ParserError> {
    parser.expect_keyword_is(Keyword::CREATE)?;
    let or_replace = parser.parse_keywords(&[Keyword::OR, Keyword::REPLACE]);
    let external = parser.parse_keyword(Keyword::EXTERNAL);
    // PostgreSQL accepts and ignores GLOBAL and LOCAL (both mean a session's temporary table).
    let _ = parser.parse_one_of_keywords(&[Keyword::GLOBAL, Keyword::LOCAL]);
    let temporary = parser.parse_one_of_keywords(&[Keyword::TEMP, Keyword::TEMPORARY]).is_some();
    parser.expect_keyword_is(Keyword::TABLE)?;
    let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = parser.parse_object_name(false)?;
    let mut create = CreateTable { or_replace, if_not_exists, external, temporary, ..CreateTable::new(name) };
    (create.columns, create.constraints) = parse_table_elements(parser, |_| Ok(false))?;
    loop {
        if parser.parse_keyword(Keyword::USING) {
            let format = parser.parse_identifier()?;
            if !format.value.eq_ignore_ascii_case("delta") {
                return Err(ParserError::ParserError(format!("only USING DELTA is supported, found {format}")));
            }
        } else if parser.parse_keywords(&[Keyword::PARTITIONED, Keyword::BY]) {
            parser.expect_token(&Token::LParen)?;
            create.partitioned_by = parser.parse_comma_separated(|p| p.parse_identifier())?;
            parser.expect_token(&Token::RParen)?;
        } else if parser.parse_keyword(Keyword::LOCATION) {
            create.location = Some(parser.parse_literal_string()?);
        } else if parser.parse_keyword(Keyword::COMMENT) {
            let _ = parser.consume_token(&Token::Eq);
            create.comment = Some(parser.parse_literal_string()?);
        } else if parser.parse_keyword(Keyword::TBLPROPERTIES) || parser.parse_keyword(Keyword::WITH) {
            create.properties.extend(parse_property_list(parser)?);
        } else if parser.parse_keywords(&[Keyword::ON, Keyword::COMMIT]) {
            create.on_commit = Some(if parser.parse_keywords(&[Keyword::PRESERVE, Keyword::ROWS]) {
                OnCommit::PreserveRows
            } else if parser.parse_keywords(&[Keyword::DELETE, Keyword::ROWS]) {
                OnCommit::DeleteRows
            } else {
                parser.expect_keyword_is(Keyword::DROP)?;
                OnCommit::Drop
            });
        } else {
            break;
        }
    }
    if parser.parse_keyword(Keyword::AS) {
        create.query = Some(parser.parse_query()?);
    }
    Ok(create)
}

/// The optional `(column, constraint, ...)` list of a CREATE TABLE. `element` may take an element
/// of its own (returning true), as streaming tables take expectations.
pub(crate) fn parse_table_elements(
    parser: &mut Parser,
    mut element: impl FnMut(&mut Parser) -> Result<bool, ParserError>,
) -> Result<(Vec<ColumnDef>, Vec<TableConstraint>), ParserError> {
    let (mut columns, mut constraints) = (vec![], vec![]);
    if !parser.consume_token(&Token::LParen) || parser.consume_token(&Token::RParen) {
        return Ok((columns, constraints));
    }
    loop {
        if !element(parser)? {
            match parser.parse_optional_table_constraint()? {
                Some(constraint) => constraints.push(constraint),
                None => columns.push(parser.parse_column_def()?),
            }
        }
        if parser.consume_token(&Token::Comma) {
            continue;
        }
        parser.expect_token(&Token::RParen)?;
        return Ok((columns, constraints));
    }
}

/// `( property, ... )` after WITH or TBLPROPERTIES.
pub(crate) fn parse_property_list(parser: &mut Parser) -> Result<Vec<(String, String)>, ParserError> {
    parser.expect_token(&Token::LParen)?;
    let properties = parser.parse_comma_separated(parse_property)?;
    parser.expect_token(&Token::RParen)?;
    Ok(properties)
}

/// `'key' = 'value'`, `key.path = value` (the `=` is optional, as in Spark).
pub fn parse_property(parser: &mut Parser) -> Result<(String, String), ParserError> {
    let key = match parser.peek_token().token {
        Token::SingleQuotedString(_) | Token::DoubleQuotedString(_) => parser.parse_literal_string()?,
        _ => parser
            .parse_object_name(false)?
            .0
            .iter()
            .map(|p| p.to_string().trim_matches('"').to_string())
            .collect::<Vec<_>>()
            .join("."),
    };
    let _ = parser.consume_token(&Token::Eq);
    let token = parser.next_token();
    let value = match token.token {
        Token::SingleQuotedString(s) | Token::DoubleQuotedString(s) => s,
        Token::Number(n, _) => n,
        Token::Word(w) => w.value,
        _ => return parser.expected("a property value", token),
    };
    Ok((key, value))
}

/// The text of a literal used as a property or option value.
pub fn literal_text(value: &Value) -> Option<String> {
    match value {
        Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => Some(s.clone()),
        Value::Number(n, _) => Some(n.to_string()),
        Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sluice_statements() {
        let statements = parse_statements(
            "CREATE TABLE IF NOT EXISTS s.t (id bigint NOT NULL, v text DEFAULT 'x', CHECK (id > 0)) \
             PARTITIONED BY (v) LOCATION '/tmp/t' TBLPROPERTIES ('delta.appendOnly' = 'true', delta.x = 1); \
             DESCRIBE HISTORY t LIMIT 3; OPTIMIZE t; VACUUM t RETAIN 1 HOURS DRY RUN; \
             RESTORE TABLE t TO VERSION AS OF 2; SELECT * FROM t VERSION AS OF 1",
        )
        .unwrap();
        assert_eq!(statements.len(), 6);
        let SluiceStatement::CreateTable(create) = &statements[0] else { panic!("not a create") };
        assert!(create.if_not_exists);
        assert_eq!(create.columns.len(), 2);
        assert_eq!(create.constraints.len(), 1);
        assert_eq!(create.partitioned_by[0].value, "v");
        assert_eq!(create.properties, vec![("delta.appendOnly".into(), "true".into()), ("delta.x".into(), "1".into())]);
        assert!(
            matches!(statements[3], SluiceStatement::Vacuum { retain_hours: Some(h), dry_run: true, .. } if h == 1.0)
        );
        assert!(matches!(statements[5], SluiceStatement::Standard(_)));
    }

    #[test]
    fn errors_give_line_and_column() {
        let err = parse_statements("SELECT 1;\nSELEC 2").unwrap_err();
        assert!(matches!(err, crate::error::Error::Parse { line: 2, .. }), "{err}");
        let err = parse_statements("CREATE TABLE t (a int,").unwrap_err().to_string();
        assert!(err.contains("line 1"), "{err}");
    }
}
