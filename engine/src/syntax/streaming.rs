//! The syntax of streaming tables and flows: `CREATE STREAMING TABLE ... [PUSH INTO ...]`,
//! `CREATE FLOW`, `ALTER STREAMING TABLE ... ADD|DROP PUSH INTO`, `ALTER FLOW ... RESUME`,
//! `REFRESH STREAMING TABLE`, `EXPLAIN FLOW`, `DROP FLOW`, `CONSTRAINT ... EXPECT`, and the
//! sources streaming tables ingest: `CREATE SOURCE name FROM KAFKA (options)`, `DROP SOURCE` and
//! `CREATE STREAMING TABLE t FROM SOURCE name`; and materialized views: `CREATE [OR REPLACE]
//! MATERIALIZED VIEW [IF NOT EXISTS] v [WITH (...)] AS query`, `REFRESH MATERIALIZED VIEW v [FULL]`,
//! `EXPLAIN MATERIALIZED VIEW v`, `DROP MATERIALIZED VIEW [IF EXISTS] v [CASCADE]`.
//!
//! A PUSH INTO route's query ends where the next `PUSH INTO` or `ELSE PUSH INTO` begins at the
//! top level; the parser cuts the tokens there and parses the query from that slice, so a route's
//! query never swallows the next route as a table alias.

use datafusion::sql::sqlparser::ast::{ColumnDef, Expr, ObjectName, Query, TableConstraint};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

use super::dialect::SluiceDialect;
use super::parser::{expect_word, parse_property_list, parse_table_elements, word, PARSER_RECURSION_MAX};
pub use super::subscription::SubscribeTarget;
use super::subscription::{is_subscription_statement, parse_subscription_statement};
use crate::catalog::{CdcSpec, ViolationAction};

/// `PUSH INTO target [AS query | WHERE predicate] [EXPAND JSON column]`.
#[derive(Debug, Clone, PartialEq)]
pub struct PushRoute {
    pub target: ObjectName,
    pub query: Option<Box<Query>>,
    pub predicate: Option<Expr>,
    pub expand_json: Option<String>,
}

/// `PUSH INTO TABLE PER expr [NAMED 'template'] [WHERE predicate] [EXPAND JSON column]`: a table
/// per distinct value of `expr`, created when the value is first seen.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueRouteDef {
    pub expr: Expr,
    /// The target's name, `{...}` standing for the value (`silver_{topic}`).
    pub template: Option<String>,
    pub predicate: Option<Expr>,
    pub expand_json: Option<String>,
}

/// `CONSTRAINT name EXPECT (expr) [ON VIOLATION ...]`.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpectationDef {
    pub name: String,
    pub expr: Expr,
    pub action: ViolationAction,
}

/// `CREATE [OR REPLACE] STREAMING TABLE`.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateStreamingTable {
    pub name: ObjectName,
    pub or_replace: bool,
    pub if_not_exists: bool,
    pub columns: Vec<ColumnDef>,
    pub constraints: Vec<TableConstraint>,
    pub expectations: Vec<ExpectationDef>,
    pub options: Vec<(String, String)>,
    pub routes: Vec<PushRoute>,
    pub else_route: Option<ObjectName>,
    /// `PUSH INTO TABLE PER ...`.
    pub value_route: Option<ValueRouteDef>,
    /// `AS SELECT ... FROM STREAM(src)`.
    pub query: Option<Box<Query>>,
    /// `FROM SOURCE name`: the table ingests an external source.
    pub from_source: Option<String>,
    /// `FLOW AUTO CDC FROM STREAM(src) ...`: `query` is the CDC input query and this its clauses.
    pub cdc: Option<CdcSpec>,
}

/// `CREATE [OR REPLACE] SOURCE [IF NOT EXISTS] name FROM KAFKA (option 'value', ...)`.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateSource {
    pub name: String,
    pub or_replace: bool,
    pub if_not_exists: bool,
    /// The connector, lower case (`kafka`).
    pub kind: String,
    pub options: Vec<(String, String)>,
}

/// `CREATE [OR REPLACE] FLOW name [WITH (...)] AS INSERT INTO target [BY NAME] query`, or `AS
/// AUTO CDC INTO target FROM STREAM(src) ...` (then `query` is the CDC input query of
/// [`super::cdc::input_query`] and `cdc` its clauses).
#[derive(Debug, Clone, PartialEq)]
pub struct CreateFlow {
    pub name: String,
    pub or_replace: bool,
    pub target: ObjectName,
    pub by_name: bool,
    pub query: Box<Query>,
    pub options: Vec<(String, String)>,
    pub cdc: Option<CdcSpec>,
}

/// What `ALTER STREAMING TABLE` changes.
#[derive(Debug, Clone, PartialEq)]
pub enum AlterStreaming {
    AddPush(Box<PushRoute>),
    AddElse(ObjectName),
    DropPush(ObjectName),
}

/// `CREATE [OR REPLACE] MATERIALIZED VIEW [IF NOT EXISTS] name [WITH (...)] AS query`.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateMaterializedView {
    pub name: ObjectName,
    pub or_replace: bool,
    pub if_not_exists: bool,
    pub options: Vec<(String, String)>,
    pub query: Box<Query>,
}

/// Streaming statements.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamingStatement {
    CreateStreamingTable(Box<CreateStreamingTable>),
    CreateFlow(Box<CreateFlow>),
    AlterStreamingTable {
        table: ObjectName,
        change: Box<AlterStreaming>,
    },
    ResumeFlow {
        name: String,
    },
    Refresh {
        table: ObjectName,
        full: bool,
    },
    ExplainFlow {
        name: String,
    },
    DropFlow {
        name: String,
        if_exists: bool,
    },
    CreateSource(Box<CreateSource>),
    DropSource {
        name: String,
        if_exists: bool,
        cascade: bool,
    },
    CreateMaterializedView(Box<CreateMaterializedView>),
    RefreshMaterializedView {
        name: ObjectName,
        full: bool,
    },
    ExplainMaterializedView {
        name: ObjectName,
    },
    DropMaterializedView {
        name: ObjectName,
        if_exists: bool,
        cascade: bool,
    },
    /// `SUBSCRIBE [TO] t [WITH (SNAPSHOT = true | false)]` or `SUBSCRIBE [TO] SUBSCRIPTION s`, alone
    /// or as `COPY (SUBSCRIBE ...) TO STDOUT` (`copy`): t's rows (unless SNAPSHOT = false) and then
    /// its changes as they commit, each with its version and a +1/-1 diff (Materialize's shape).
    /// Served over pgwire (see [`super::subscription`]).
    Subscribe {
        target: SubscribeTarget,
        copy: bool,
    },
    /// `DECLARE c [BINARY] [NO SCROLL] CURSOR [WITH[OUT] HOLD] FOR SUBSCRIBE ...`: a cursor whose
    /// FETCH waits for the subscription's next rows. Served over pgwire (which refuses the
    /// options it lacks: `hold`, `binary`).
    DeclareSubscribe {
        cursor: String,
        target: SubscribeTarget,
        /// WITH HOLD: the cursor would outlive its transaction.
        hold: bool,
        /// BINARY: rows in binary rather than text.
        binary: bool,
    },
    /// `CREATE SUBSCRIPTION [IF NOT EXISTS] s FROM [TABLE] t [WITH (SNAPSHOT = bool)]`.
    CreateSubscription {
        name: String,
        table: ObjectName,
        snapshot: bool,
        if_not_exists: bool,
    },
    /// `ALTER SUBSCRIPTION s ACKNOWLEDGE [VERSION] n`.
    AcknowledgeSubscription {
        name: String,
        version: u64,
    },
    /// `CREATE ALERT ...` (see [`super::alert`]).
    CreateAlert(Box<super::alert::CreateAlert>),
    /// `DROP ALERT [IF EXISTS] name`.
    DropAlert {
        name: String,
        if_exists: bool,
    },
    /// `DROP SUBSCRIPTION [IF EXISTS] s`.
    DropSubscription {
        name: String,
        if_exists: bool,
    },
    /// A statement of this family's words that asks for what Sluice does not do (0A000 with this
    /// text), such as PostgreSQL's logical replication subscriptions.
    NotSupported(String),
}

/// Whether the statement at the parser is a streaming one (looked at without consuming).
pub fn is_streaming_statement(parser: &Parser) -> bool {
    let words: Vec<Option<String>> = (0..5).map(|n| word(parser, n)).collect();
    let w = |n: usize| words.get(n).and_then(|w| w.as_deref());
    let mut create_at = 1;
    if w(1) == Some("OR") && w(2) == Some("REPLACE") {
        create_at = 3;
    }
    if is_subscription_statement(parser) || super::alert::is_alert_statement(parser) {
        return true;
    }
    match w(0) {
        Some("CREATE") => {
            matches!(w(create_at), Some("FLOW") | Some("SOURCE") | Some("MATERIALIZED"))
                || (w(create_at) == Some("STREAMING") && w(create_at + 1) == Some("TABLE"))
        }
        Some("ALTER") => (w(1) == Some("STREAMING") && w(2) == Some("TABLE")) || w(1) == Some("FLOW"),
        Some("REFRESH") => w(1) == Some("STREAMING") || w(1) == Some("MATERIALIZED"),
        Some("EXPLAIN") => w(1) == Some("FLOW") || w(1) == Some("MATERIALIZED"),
        Some("DROP") => w(1) == Some("FLOW") || w(1) == Some("SOURCE") || w(1) == Some("MATERIALIZED"),
        _ => false,
    }
}

pub fn parse_streaming(parser: &mut Parser) -> Result<StreamingStatement, ParserError> {
    if is_subscription_statement(parser) {
        return parse_subscription_statement(parser);
    }
    if super::alert::is_alert_statement(parser) {
        return super::alert::parse_alert_statement(parser);
    }
    match word(parser, 0).as_deref() {
        Some("CREATE") => {
            parser.next_token();
            let or_replace = parser.parse_keywords(&[Keyword::OR, Keyword::REPLACE]);
            if word(parser, 0).as_deref() == Some("FLOW") {
                parser.next_token();
                return parse_create_flow(parser, or_replace);
            }
            if word(parser, 0).as_deref() == Some("SOURCE") {
                parser.next_token();
                return parse_create_source(parser, or_replace);
            }
            if word(parser, 0).as_deref() == Some("MATERIALIZED") {
                parser.next_token();
                parser.expect_keyword_is(Keyword::VIEW)?;
                return parse_create_materialized_view(parser, or_replace);
            }
            expect_word(parser, "STREAMING")?;
            parser.expect_keyword_is(Keyword::TABLE)?;
            parse_create_streaming_table(parser, or_replace)
        }
        Some("ALTER") => {
            parser.next_token();
            if word(parser, 0).as_deref() == Some("FLOW") {
                parser.next_token();
                let name = parser.parse_identifier()?.value;
                expect_word(parser, "RESUME")?;
                return Ok(StreamingStatement::ResumeFlow { name });
            }
            expect_word(parser, "STREAMING")?;
            parser.expect_keyword_is(Keyword::TABLE)?;
            let table = parser.parse_object_name(false)?;
            let change = if parser.parse_keyword(Keyword::ADD) {
                if parser.parse_keyword(Keyword::ELSE) {
                    expect_word(parser, "PUSH")?;
                    parser.expect_keyword_is(Keyword::INTO)?;
                    AlterStreaming::AddElse(parser.parse_object_name(false)?)
                } else {
                    AlterStreaming::AddPush(Box::new(parse_route(parser)?))
                }
            } else if parser.parse_keyword(Keyword::DROP) {
                let _ = parser.parse_keyword(Keyword::ELSE);
                expect_word(parser, "PUSH")?;
                parser.expect_keyword_is(Keyword::INTO)?;
                AlterStreaming::DropPush(parser.parse_object_name(false)?)
            } else {
                return parser.expected("ADD PUSH INTO or DROP PUSH INTO", parser.peek_token());
            };
            Ok(StreamingStatement::AlterStreamingTable { table, change: Box::new(change) })
        }
        Some("REFRESH" | "EXPLAIN") if word(parser, 1).as_deref() == Some("MATERIALIZED") => {
            let refresh = word(parser, 0).as_deref() == Some("REFRESH");
            parser.next_token();
            parser.next_token();
            parser.expect_keyword_is(Keyword::VIEW)?;
            let name = parser.parse_object_name(false)?;
            if refresh {
                let full = parser.parse_keyword(Keyword::FULL);
                Ok(StreamingStatement::RefreshMaterializedView { name, full })
            } else {
                Ok(StreamingStatement::ExplainMaterializedView { name })
            }
        }
        Some("DROP") if word(parser, 1).as_deref() == Some("MATERIALIZED") => {
            parser.next_token();
            parser.next_token();
            parser.expect_keyword_is(Keyword::VIEW)?;
            let if_exists = parser.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
            let name = parser.parse_object_name(false)?;
            let cascade = parser.parse_keyword(Keyword::CASCADE);
            if !cascade {
                let _ = parser.parse_keyword(Keyword::RESTRICT);
            }
            Ok(StreamingStatement::DropMaterializedView { name, if_exists, cascade })
        }
        Some("REFRESH") => {
            parser.next_token();
            expect_word(parser, "STREAMING")?;
            parser.expect_keyword_is(Keyword::TABLE)?;
            let table = parser.parse_object_name(false)?;
            let full = parser.parse_keyword(Keyword::FULL);
            Ok(StreamingStatement::Refresh { table, full })
        }
        Some("EXPLAIN") => {
            parser.next_token();
            expect_word(parser, "FLOW")?;
            Ok(StreamingStatement::ExplainFlow { name: parser.parse_identifier()?.value })
        }
        Some("DROP") if word(parser, 1).as_deref() == Some("SOURCE") => {
            parser.next_token();
            parser.next_token();
            let if_exists = parser.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
            let name = parser.parse_identifier()?.value;
            let cascade = parser.parse_keyword(Keyword::CASCADE);
            if !cascade {
                let _ = parser.parse_keyword(Keyword::RESTRICT);
            }
            Ok(StreamingStatement::DropSource { name, if_exists, cascade })
        }
        Some("DROP") => {
            parser.next_token();
            expect_word(parser, "FLOW")?;
            let if_exists = parser.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
            Ok(StreamingStatement::DropFlow { name: parser.parse_identifier()?.value, if_exists })
        }
        _ => parser.expected("a streaming statement", parser.peek_token()),
    }
}

fn parse_options(parser: &mut Parser) -> Result<Vec<(String, String)>, ParserError> {
    if parser.parse_keyword(Keyword::WITH) || parser.parse_keyword(Keyword::TBLPROPERTIES) {
        return parse_property_list(parser);
    }
    Ok(vec![])
}

fn parse_create_materialized_view(parser: &mut Parser, or_replace: bool) -> Result<StreamingStatement, ParserError> {
    let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = parser.parse_object_name(false)?;
    let options = parse_options(parser)?;
    parser.expect_keyword_is(Keyword::AS)?;
    let query = parser.parse_query()?;
    Ok(StreamingStatement::CreateMaterializedView(Box::new(CreateMaterializedView {
        name,
        or_replace,
        if_not_exists,
        options,
        query,
    })))
}

fn parse_create_flow(parser: &mut Parser, or_replace: bool) -> Result<StreamingStatement, ParserError> {
    let name = parser.parse_identifier()?.value;
    let options = parse_options(parser)?;
    parser.expect_keyword_is(Keyword::AS)?;
    if super::cdc::at_auto_cdc(parser) {
        super::cdc::expect_auto_cdc(parser)?;
        parser.expect_keyword_is(Keyword::INTO)?;
        let target = parser.parse_object_name(false)?;
        let (source, spec) = super::cdc::parse_cdc_body(parser)?;
        let query = super::cdc::input_query(&source, &spec)?;
        let create = CreateFlow { name, or_replace, target, by_name: true, query, options, cdc: Some(spec) };
        return Ok(StreamingStatement::CreateFlow(Box::new(create)));
    }
    parser.expect_keyword_is(Keyword::INSERT)?;
    parser.expect_keyword_is(Keyword::INTO)?;
    let target = parser.parse_object_name(false)?;
    let by_name = parser.parse_keywords(&[Keyword::BY, Keyword::NAME]);
    let query = parser.parse_query()?;
    Ok(StreamingStatement::CreateFlow(Box::new(CreateFlow {
        name,
        or_replace,
        target,
        by_name,
        query,
        options,
        cdc: None,
    })))
}

fn parse_create_source(parser: &mut Parser, or_replace: bool) -> Result<StreamingStatement, ParserError> {
    let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = parser.parse_identifier()?.value;
    parser.expect_keyword_is(Keyword::FROM)?;
    let kind = match word(parser, 0) {
        Some(kind) => {
            parser.next_token();
            kind.to_ascii_lowercase()
        }
        None => return parser.expected("a connector such as KAFKA", parser.peek_token()),
    };
    let options = if parser.peek_token().token == Token::LParen { parse_property_list(parser)? } else { vec![] };
    Ok(StreamingStatement::CreateSource(Box::new(CreateSource { name, or_replace, if_not_exists, kind, options })))
}

fn parse_create_streaming_table(parser: &mut Parser, or_replace: bool) -> Result<StreamingStatement, ParserError> {
    let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = parser.parse_object_name(false)?;
    let mut create = CreateStreamingTable {
        name,
        or_replace,
        if_not_exists,
        columns: vec![],
        constraints: vec![],
        expectations: vec![],
        options: vec![],
        routes: vec![],
        else_route: None,
        value_route: None,
        query: None,
        from_source: None,
        cdc: None,
    };
    if parser.parse_keyword(Keyword::FROM) {
        expect_word(parser, "SOURCE")?;
        create.from_source = Some(parser.parse_identifier()?.value);
    }
    let mut expectations = Vec::new();
    (create.columns, create.constraints) = parse_table_elements(parser, |parser| {
        if word(parser, 0).as_deref() == Some("CONSTRAINT") && word(parser, 2).as_deref() == Some("EXPECT") {
            expectations.push(parse_expectation(parser)?);
            return Ok(true);
        }
        Ok(false)
    })?;
    create.expectations = expectations;
    create.options = parse_options(parser)?;
    if word(parser, 0).as_deref() == Some("FLOW") {
        parser.next_token();
        super::cdc::expect_auto_cdc(parser)?;
        let (source, spec) = super::cdc::parse_cdc_body(parser)?;
        create.query = Some(super::cdc::input_query(&source, &spec)?);
        create.cdc = Some(spec);
        return Ok(StreamingStatement::CreateStreamingTable(Box::new(create)));
    }
    if parser.parse_keyword(Keyword::AS) {
        create.query = Some(parser.parse_query()?);
        return Ok(StreamingStatement::CreateStreamingTable(Box::new(create)));
    }
    loop {
        if word(parser, 0).as_deref() == Some("PUSH")
            && word(parser, 2).as_deref() == Some("TABLE")
            && word(parser, 3).as_deref() == Some("PER")
        {
            if create.value_route.is_some() {
                return parser.expected("one PUSH INTO TABLE PER route", parser.peek_token());
            }
            create.value_route = Some(parse_value_route(parser)?);
        } else if word(parser, 0).as_deref() == Some("PUSH") {
            create.routes.push(parse_route(parser)?);
        } else if word(parser, 0).as_deref() == Some("ELSE") && word(parser, 1).as_deref() == Some("PUSH") {
            parser.next_token();
            parser.next_token();
            parser.expect_keyword_is(Keyword::INTO)?;
            create.else_route = Some(parser.parse_object_name(false)?);
        } else {
            break;
        }
    }
    Ok(StreamingStatement::CreateStreamingTable(Box::new(create)))
}

fn parse_expectation(parser: &mut Parser) -> Result<ExpectationDef, ParserError> {
    parser.expect_keyword_is(Keyword::CONSTRAINT)?;
    let name = parser.parse_identifier()?.value;
    expect_word(parser, "EXPECT")?;
    parser.expect_token(&Token::LParen)?;
    let expr = parser.parse_expr()?;
    parser.expect_token(&Token::RParen)?;
    let mut action = ViolationAction::Keep;
    if parser.parse_keyword(Keyword::ON) {
        expect_word(parser, "VIOLATION")?;
        if parser.parse_keyword(Keyword::DROP) {
            parser.expect_keyword_is(Keyword::ROW)?;
            action = ViolationAction::DropRow;
        } else if parser.parse_keyword(Keyword::FAIL) {
            parser.expect_keyword_is(Keyword::UPDATE)?;
            action = ViolationAction::Fail;
        } else if word(parser, 0).as_deref() == Some("QUARANTINE") {
            parser.next_token();
            parser.expect_keyword_is(Keyword::INTO)?;
            action = ViolationAction::Quarantine(parser.parse_object_name(false)?.to_string());
        } else {
            return parser.expected("DROP ROW, FAIL UPDATE or QUARANTINE INTO", parser.peek_token());
        }
    }
    Ok(ExpectationDef { name, expr, action })
}

/// `PUSH INTO target [AS query | WHERE predicate]`.
fn parse_route(parser: &mut Parser) -> Result<PushRoute, ParserError> {
    expect_word(parser, "PUSH")?;
    parser.expect_keyword_is(Keyword::INTO)?;
    if word(parser, 0).as_deref() == Some("TABLE") && word(parser, 1).as_deref() == Some("PER") {
        return Err(ParserError::ParserError(
            "PUSH INTO TABLE PER is defined with CREATE [OR REPLACE] STREAMING TABLE, not added by ALTER".into(),
        ));
    }
    let target = parser.parse_object_name(false)?;
    let mut route = PushRoute { target, query: None, predicate: None, expand_json: None };
    if parser.parse_keyword(Keyword::AS) {
        let mut sub = route_slice(parser);
        route.query = Some(sub.parse_query()?);
        expect_slice_end(&mut sub)?;
    } else {
        route.predicate = parse_route_where(parser)?;
    }
    route.expand_json = parse_expand_json(parser)?;
    Ok(route)
}

/// A route's `WHERE predicate`, if it has one.
fn parse_route_where(parser: &mut Parser) -> Result<Option<Expr>, ParserError> {
    if !parser.parse_keyword(Keyword::WHERE) {
        return Ok(None);
    }
    let mut sub = route_slice(parser);
    let predicate = sub.parse_expr()?;
    expect_slice_end(&mut sub)?;
    Ok(Some(predicate))
}

/// A route's `EXPAND JSON column`, if it has one.
fn parse_expand_json(parser: &mut Parser) -> Result<Option<String>, ParserError> {
    if word(parser, 0).as_deref() != Some("EXPAND") {
        return Ok(None);
    }
    parser.next_token();
    expect_word(parser, "JSON")?;
    Ok(Some(parser.parse_identifier()?.value))
}

/// `PUSH INTO TABLE PER expr [NAMED 'template'] [WHERE predicate] [EXPAND JSON column]`.
fn parse_value_route(parser: &mut Parser) -> Result<ValueRouteDef, ParserError> {
    for expected in ["PUSH", "INTO", "TABLE", "PER"] {
        expect_word(parser, expected)?;
    }
    let expr = parser.parse_expr()?;
    let mut template = None;
    if word(parser, 0).as_deref() == Some("NAMED") {
        parser.next_token();
        template = Some(parser.parse_literal_string()?);
    }
    let predicate = parse_route_where(parser)?;
    let expand_json = parse_expand_json(parser)?;
    Ok(ValueRouteDef { expr, template, predicate, expand_json })
}

/// Takes the tokens up to the next top-level `PUSH INTO` / `ELSE PUSH` / `EXPAND JSON`, `;` or the
/// end, and returns
/// a parser over them.
fn route_slice(parser: &mut Parser) -> Parser<'static> {
    static DIALECT: SluiceDialect = SluiceDialect::new();
    let mut tokens: Vec<TokenWithSpan> = Vec::new();
    let mut depth = 0usize;
    loop {
        let next = parser.peek_token();
        let at_boundary = depth == 0
            && match &next.token {
                Token::EOF | Token::SemiColon => true,
                Token::Word(w) if w.value.eq_ignore_ascii_case("PUSH") => word(parser, 1).as_deref() == Some("INTO"),
                Token::Word(w) if w.value.eq_ignore_ascii_case("ELSE") => word(parser, 1).as_deref() == Some("PUSH"),
                Token::Word(w) if w.value.eq_ignore_ascii_case("EXPAND") => word(parser, 1).as_deref() == Some("JSON"),
                _ => false,
            };
        if at_boundary {
            break;
        }
        match next.token {
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            _ => {}
        }
        tokens.push(parser.next_token());
    }
    let end = parser.peek_token();
    tokens.push(TokenWithSpan::new(Token::EOF, end.span));
    Parser::new(&DIALECT).with_recursion_limit(PARSER_RECURSION_MAX).with_tokens_with_locations(tokens)
}

fn expect_slice_end(sub: &mut Parser) -> Result<(), ParserError> {
    if sub.peek_token().token == Token::EOF {
        Ok(())
    } else {
        sub.expected("PUSH INTO, ELSE PUSH INTO, EXPAND JSON or the end of the statement", sub.peek_token())
    }
}

#[cfg(test)]
mod tests {
    use super::super::parser::{parse_statements, SluiceStatement};
    use super::*;

    fn streaming(sql: &str) -> StreamingStatement {
        match parse_statements(sql).unwrap().remove(0) {
            SluiceStatement::Streaming(s) => *s,
            other => panic!("not streaming: {other:?}"),
        }
    }

    #[test]
    fn parses_push_routes_and_expectations() {
        let StreamingStatement::CreateStreamingTable(create) = streaming(
            "CREATE STREAMING TABLE bronze (topic text NOT NULL, payload text, \
             CONSTRAINT has_topic EXPECT (topic <> '') ON VIOLATION DROP ROW, \
             CONSTRAINT q EXPECT (payload IS NOT NULL) ON VIOLATION QUARANTINE INTO bad) \
             PUSH INTO silver_orders AS SELECT payload->>'id' AS id FROM bronze WHERE topic = 'orders' \
             PUSH INTO silver_clicks WHERE topic = 'clicks' \
             PUSH INTO raw \
             ELSE PUSH INTO unrouted",
        ) else {
            panic!("not a create")
        };
        assert_eq!(create.columns.len(), 2);
        assert_eq!(create.expectations.len(), 2);
        assert_eq!(create.expectations[0].action, ViolationAction::DropRow);
        assert_eq!(create.expectations[1].action, ViolationAction::Quarantine("bad".into()));
        assert_eq!(create.routes.len(), 3);
        assert!(create.routes[0].query.is_some());
        assert!(create.routes[1].predicate.is_some());
        assert!(create.routes[2].query.is_none() && create.routes[2].predicate.is_none());
        assert_eq!(create.else_route.unwrap().to_string(), "unrouted");
    }

    #[test]
    fn parses_flow_statements() {
        assert!(matches!(
            streaming("CREATE FLOW f AS INSERT INTO t BY NAME SELECT * FROM STREAM(s)"),
            StreamingStatement::CreateFlow(f) if f.by_name
        ));
        assert!(matches!(streaming("ALTER FLOW f RESUME"), StreamingStatement::ResumeFlow { .. }));
        assert!(matches!(streaming("REFRESH STREAMING TABLE t FULL"), StreamingStatement::Refresh { full: true, .. }));
        assert!(matches!(
            streaming("ALTER STREAMING TABLE b DROP PUSH INTO s"),
            StreamingStatement::AlterStreamingTable { .. }
        ));
        let StreamingStatement::CreateStreamingTable(pull) =
            streaming("CREATE STREAMING TABLE s WITH (mode = 'async') AS SELECT * FROM STREAM(b) WHERE x > 1")
        else {
            panic!("not a create")
        };
        assert!(pull.query.is_some());
        assert_eq!(pull.options, vec![("mode".to_string(), "async".to_string())]);
        assert!(parse_statements("CREATE STREAMING TABLE b (x int) PUSH INTO s AS SELECT FROM").is_err());
    }

    #[test]
    fn parses_sources_and_json_expansion() {
        let StreamingStatement::CreateSource(source) = streaming(
            "CREATE SOURCE events FROM KAFKA (brokers 'localhost:9092', topics = 'a,b', 'security.protocol' 'plaintext')",
        ) else {
            panic!("not a source")
        };
        assert_eq!(source.kind, "kafka");
        assert_eq!(source.options.len(), 3);
        assert_eq!(source.options[2], ("security.protocol".to_string(), "plaintext".to_string()));
        let StreamingStatement::CreateStreamingTable(bronze) = streaming(
            "CREATE STREAMING TABLE bronze FROM SOURCE events \
             PUSH INTO orders WHERE topic = 'orders' EXPAND JSON value \
             PUSH INTO clicks AS SELECT value FROM bronze WHERE topic = 'clicks' EXPAND JSON value \
             PUSH INTO raw",
        ) else {
            panic!("not a create")
        };
        assert_eq!(bronze.from_source.as_deref(), Some("events"));
        assert_eq!(bronze.routes.len(), 3);
        assert_eq!(bronze.routes[0].expand_json.as_deref(), Some("value"));
        assert!(bronze.routes[1].query.is_some());
        assert_eq!(bronze.routes[1].expand_json.as_deref(), Some("value"));
        assert_eq!(bronze.routes[2].expand_json, None);
        assert!(matches!(
            streaming("DROP SOURCE IF EXISTS events CASCADE"),
            StreamingStatement::DropSource { if_exists: true, cascade: true, .. }
        ));
    }
}
