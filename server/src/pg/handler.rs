//! One client connection: the pgwire handlers (simple and extended query, COPY) over a Sluice
//! session, and the statements the server itself answers (SET/SHOW/RESET, cursors, COPY, roles).
//!
//! Every statement runs under the session's `statement_timeout` and can be cancelled by a
//! CancelRequest from another connection. Errors carry the engine's SQLSTATE; after an error in
//! the extended protocol pgwire skips to the next Sync, as Postgres does.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::compute::concat_batches;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::common::ScalarValue;
use datafusion::sql::sqlparser::ast::{
    CloseCursor, CopyLegacyCsvOption, CopyLegacyOption, CopyOption, CopySource, CopyTarget, FetchDirection, Statement,
    Value,
};
use futures::sink::Sink;
use futures::SinkExt;
use parking_lot::Mutex;
use pgwire::api::copy::CopyHandler;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{
    CopyResponse, DescribePortalResponse, DescribeResponse, DescribeStatementResponse, Response, Tag,
};
use pgwire::api::stmt::{QueryParser, StoredStatement};
use pgwire::api::store::{Entry, PortalStore};
use pgwire::api::{ClientInfo, ClientPortalStore, Type, DEFAULT_NAME};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::copy::{CopyData, CopyDone};
use pgwire::messages::extendedquery::{Bind, BindComplete, Sync as PgSync};
use pgwire::messages::response::ReadyForQuery;
use pgwire::messages::startup::ParameterStatus;
use pgwire::messages::PgWireBackendMessage;
use pgwire::types::format::FormatOptions;
use sluice::control::StatementControl;
use sluice::paths::PathUse;
use sluice::sql::copy_in::StagedCopy;
use sluice::sql::parser::{parse_statements, SluiceStatement};
use sluice::transaction::Isolation;
use sluice::{Session, StatementResult};

use super::copy::{CopyDecoder, CopyFormat, CopyOptions};
use super::encode::{self, user_error};
use super::settings::Settings;
use super::ServerState;

mod copy;
mod cursors;
mod subscribe;
use copy::{copy_settings, CopyIn};

/// A statement prepared with Parse.
#[derive(Debug, Clone, Default)]
pub struct Prepared {
    pub statement: Option<SluiceStatement>,
    pub parameter_types: Vec<Type>,
    pub arrow_parameter_types: Vec<Option<DataType>>,
    pub result_schema: Option<SchemaRef>,
    /// How many values a Bind must supply (`None`: not known, not checked).
    pub parameter_count: Option<usize>,
    /// The statement's text, as the client sent it (for `pg_stat_activity`).
    pub text: String,
}

/// An open cursor: its rows, how far FETCH has read, and how long it lives.
struct Cursor {
    batch: RecordBatch,
    /// PostgreSQL's position: 0 before the first row, k on row k, rows + 1 after the last.
    position: u64,
    /// Not declared NO SCROLL: it may go back.
    scroll: bool,
    life: cursors::CursorLife,
    /// The transaction block's newest savepoint when it was declared: a rollback to that
    /// savepoint or an older one closes it (see [`cursors`]).
    savepoint: Option<u64>,
}

/// One connection's state.
pub struct Connection {
    pub(crate) server: Arc<ServerState>,
    session: Session,
    settings: Arc<Mutex<Settings>>,
    /// Set once the client's startup parameters became the session's settings.
    startup_adopted: std::sync::Once,
    cursors: Mutex<HashMap<String, Cursor>>,
    /// Cursors over subscriptions (`DECLARE c CURSOR FOR SUBSCRIBE ...`; see [`subscribe`]).
    subscriptions: tokio::sync::Mutex<HashMap<String, subscribe::SubscriptionCursor>>,
    copy_in: tokio::sync::Mutex<Option<CopyIn>>,
    rewriter: super::compat::PgCatalogRules,
    parser: Arc<SluiceQueryParser>,
    /// The names of the statements prepared with Parse, for `DEALLOCATE ALL`.
    prepared_names: Mutex<std::collections::HashSet<String>>,
    /// This connection's row of `pg_stat_activity`.
    activity: super::activity::Registration,
    /// Whether the open implicit transaction is the extended protocol's (its statements up to
    /// Sync), which PostgreSQL does not count as a transaction block (see [`cursors`]).
    pipeline: std::sync::atomic::AtomicBool,
    /// Whether a statement failed in the open transaction (its end is then no commit).
    transaction_failed: std::sync::atomic::AtomicBool,
    /// The statements [`Connection::rewrite`] rewrote lately, newest first (see [`Rewritten`]).
    rewritten: Mutex<Vec<Rewritten>>,
}

/// A statement as [`Connection::rewrite`] rewrote it, with what the rewrite depended on: the
/// session's `search_path` and user, and the catalog (the same state, held, so that any change
/// of it is a miss). A prepared statement runs its rewrite once, not at every Execute (the AST
/// walks cost about a twentieth of a short statement's time).
struct Rewritten {
    statement: SluiceStatement,
    search_path: String,
    user: String,
    catalog: Arc<sluice::catalog::CatalogState>,
    rewritten: SluiceStatement,
}

/// Statements kept by a connection's rewrite memo.
const REWRITTEN_MAX: usize = 16;

impl Connection {
    pub fn new(server: Arc<ServerState>) -> Arc<Self> {
        let session = server.db.session();
        let settings = Arc::new(Mutex::new(Settings::default()));
        let activity = server.activity.register();
        super::catalog::install(&session, &server, settings.clone(), activity.id());
        Arc::new_cyclic(|weak: &std::sync::Weak<Connection>| Connection {
            activity,
            server,
            session,
            settings,
            startup_adopted: std::sync::Once::new(),
            cursors: Mutex::new(HashMap::new()),
            subscriptions: tokio::sync::Mutex::new(HashMap::new()),
            copy_in: tokio::sync::Mutex::new(None),
            rewriter: super::compat::PgCatalogRules::new(),
            parser: Arc::new(SluiceQueryParser { connection: weak.clone() }),
            prepared_names: Mutex::new(std::collections::HashSet::new()),
            rewritten: Mutex::new(Vec::new()),
            pipeline: std::sync::atomic::AtomicBool::new(false),
            transaction_failed: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// How long the client may now stay silent before the server closes the connection: its
    /// `idle_in_transaction_session_timeout` while it is inside a transaction block (`None`:
    /// outside one, or no limit). Closing it drops the block's staged writes.
    pub fn idle_limit(&self) -> Option<std::time::Duration> {
        // Between an Execute and its Sync the client is not idle (and no limit applies then).
        if !self.session.in_transaction_block() || self.session.in_implicit() {
            return None;
        }
        let ms = self.settings.lock().idle_in_transaction_timeout_ms();
        (ms > 0).then(|| std::time::Duration::from_millis(ms))
    }

    /// Rewrites Postgres-only constructs (`OPERATOR(pg_catalog.~)`, `::regclass`, ...) that
    /// clients send in catalog queries into forms DataFusion plans.
    /// Also qualifies unqualified names along the session's `search_path`.
    fn rewrite(&self, statement: SluiceStatement) -> PgWireResult<SluiceStatement> {
        let (setting, user) = {
            let settings = self.settings.lock();
            let setting = settings.get("search_path").unwrap_or_default().to_string();
            (setting, settings.get("session_authorization").unwrap_or_default().to_string())
        };
        let catalog = self.server.db.catalog_state();
        if !matches!(statement, SluiceStatement::Standard(_)) {
            return self.rewrite_with(statement, &setting, &user, &catalog);
        }
        {
            let mut memo = self.rewritten.lock();
            let hit = memo.iter().position(|r| {
                Arc::ptr_eq(&r.catalog, &catalog)
                    && r.search_path == setting
                    && r.user == user
                    && r.statement == statement
            });
            if let Some(at) = hit {
                let entry = memo.remove(at);
                let rewritten = entry.rewritten.clone();
                memo.insert(0, entry);
                return Ok(rewritten);
            }
        }
        let rewritten = self.rewrite_with(statement.clone(), &setting, &user, &catalog)?;
        let mut memo = self.rewritten.lock();
        memo.truncate(REWRITTEN_MAX - 1);
        memo.insert(0, Rewritten { statement, search_path: setting, user, catalog, rewritten: rewritten.clone() });
        Ok(rewritten)
    }

    /// [`Self::rewrite`], done.
    fn rewrite_with(
        &self,
        statement: SluiceStatement,
        setting: &str,
        user: &str,
        catalog: &sluice::catalog::CatalogState,
    ) -> PgWireResult<SluiceStatement> {
        let path = super::search_path::schemas(setting, user, catalog);
        let unschemed = |e: String| user_error("3F000", e);
        match statement {
            SluiceStatement::CreateTable(mut create) if !create.temporary => {
                super::search_path::qualify_created(&mut create.name, &path).map_err(unschemed)?;
                if let Some(query) = create.query.take() {
                    let mut select = Statement::Query(query);
                    super::search_path::qualify(&mut select, &path, catalog).map_err(unschemed)?;
                    if let Statement::Query(query) = select {
                        create.query = Some(query);
                    }
                }
                Ok(SluiceStatement::CreateTable(create))
            }
            SluiceStatement::Standard(s) => {
                // Sluice's rewrites go first: datafusion-pg-catalog's rules (which turn scalar
                // subqueries in projections into joins) must see the subqueries they free.
                let mut s = *s;
                super::search_path::qualify(&mut s, &path, catalog).map_err(unschemed)?;
                super::search_path::current_schemas(&mut s, &path);
                sluice::sql::postgres_forms::array_literals(&mut s).map_err(|e| encode::error(&e))?;
                super::compat::rewrite(&mut s);
                // Before datafusion-pg-catalog's rules, which drop every COLLATE.
                sluice::sql::collations::rewrite(&mut s).map_err(|e| encode::error(&e))?;
                let s = self.rewriter.rewrite(s);
                Ok(SluiceStatement::Standard(Box::new(s)))
            }
            other => Ok(other),
        }
    }

    /// Hands the rights of the connection's user to the engine, which checks them (on the
    /// statement, the plan and every commit).
    /// Makes the settings the client sent at startup the session's (once; the connection is
    /// made before the client's startup packet arrives).
    fn adopt_startup_settings<C: ClientInfo>(&self, client: &C) {
        self.startup_adopted.call_once(|| {
            *self.settings.lock() = Settings::from_startup(client.metadata());
            self.apply_settings();
            let pid = client.pid_and_secret_key().0;
            let metadata = client.metadata();
            let address = client.socket_addr();
            self.activity.update(|backend| {
                backend.pid = pid;
                backend.user = metadata.get("user").cloned().unwrap_or_default();
                backend.database = metadata.get("database").cloned().unwrap_or_else(|| backend.user.clone());
                backend.client_addr = Some(address.ip().to_string());
                backend.client_port = Some(i32::from(address.port()));
            });
            // `pg_backend_pid()`: the pid this connection was given at startup (its cancel key's),
            // which `pg_stat_activity` shows too.
            self.session.context().register_udf(datafusion::logical_expr::create_udf(
                "pg_backend_pid",
                vec![],
                DataType::Int32,
                datafusion::logical_expr::Volatility::Stable,
                Arc::new(move |_| Ok(datafusion::logical_expr::ColumnarValue::Scalar(ScalarValue::Int32(Some(pid))))),
            ));
        });
    }

    /// A statement's text begins to run: `pg_stat_activity` shows it.
    fn note_started<C: ClientInfo>(&self, client: &C, text: &str) {
        self.adopt_startup_settings(client);
        let application = self.settings.lock().get("application_name").unwrap_or_default().to_string();
        self.activity.update(|backend| backend.application_name = application);
        self.activity.started(text, self.session.in_transaction_block());
    }

    fn authorize<C: ClientInfo>(&self, client: &C) -> sluice::Privileges {
        let privileges = super::auth::privileges(&self.server, client);
        self.session.set_privileges(privileges);
        if let Some(user) = client.metadata().get("user") {
            self.session.set_user(user);
        }
        self.activity.update(|backend| backend.owner = privileges.owner);
        privileges
    }

    /// Runs a statement in the engine under the session's `statement_timeout` and the client's
    /// CancelRequests. A cancellation stops the statement only before its first commit (see
    /// `sluice::control`): after that it runs to its end and reports success, so a client told
    /// 57014 knows that nothing was committed.
    async fn run_in_engine<C>(
        &self,
        client: &C,
        statement: SluiceStatement,
        parameters: &[ScalarValue],
    ) -> sluice::Result<StatementResult>
    where
        C: ClientInfo,
    {
        let control = StatementControl::new(self.session.privileges());
        let running = self.session.run_with(statement, parameters, control.clone());
        let result = self.controlled(client, control, running).await;
        self.show_isolation();
        result
    }

    /// Keeps `transaction_isolation` (SHOW, `current_setting`, `pg_settings`) at the level of the
    /// session's block, or its default outside one.
    fn show_isolation(&self) {
        let level = self.session.isolation().name();
        let mut settings = self.settings.lock();
        if settings.get("transaction_isolation") != Some(level) {
            settings.set("transaction_isolation", level);
        }
    }

    /// Awaits `running`, cancelling it (if it has not begun to commit) on a timeout or a
    /// CancelRequest.
    async fn controlled<C, T>(
        &self,
        client: &C,
        control: Arc<StatementControl>,
        running: impl std::future::Future<Output = sluice::Result<T>>,
    ) -> sluice::Result<T>
    where
        C: ClientInfo,
    {
        let timeout_ms = self.settings.lock().statement_timeout_ms();
        let cancel = super::cancel_receiver(client).await;
        tokio::pin!(running);
        let timeout = async {
            if timeout_ms > 0 {
                tokio::time::sleep(Duration::from_millis(timeout_ms)).await
            } else {
                std::future::pending::<()>().await
            }
        };
        let requested = super::cancel_requested(cancel);
        let reason = tokio::select! {
            result = &mut running => return result,
            _ = timeout => "statement timeout",
            _ = requested => "user request",
        };
        if control.cancel(reason) {
            return Err(sluice::Error::Cancelled(reason.into()));
        }
        // The statement began to commit before the cancellation: it finishes, and its outcome
        // is what the client gets.
        running.await
    }

    /// Runs one statement and builds its response; an error aborts the session's transaction
    /// block, if it is in one, as in PostgreSQL.
    async fn run<C>(
        &self,
        client: &mut C,
        statement: SluiceStatement,
        parameters: &[ScalarValue],
        format: &Format,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let kind = crate::metrics::statement_kind(&statement);
        let outcome = cursors::Outcome::of(&statement);
        let started = std::time::Instant::now();
        let response = self.run_statement(client, statement, parameters, format).await;
        if let Some(metrics) = crate::metrics::global() {
            let sqlstate = match &response {
                Err(PgWireError::UserError(info)) => Some(info.code.as_str()),
                Err(_) => Some("XX000"),
                Ok(_) => None,
            };
            metrics.statement(kind, started.elapsed().as_secs_f64(), sqlstate);
        }
        if response.is_err() {
            self.session.statement_failed();
        }
        self.statement_ended(outcome, response.is_err()).await;
        self.activity.finished(self.session.in_transaction_block(), response.is_err());
        // PostgreSQL's warnings (COMMIT with no transaction block, BEGIN inside one) and notices
        // (DROP ... IF EXISTS of nothing), before the statement's own answer.
        for notice in self.session.take_warnings() {
            let notice = ErrorInfo::new(notice.severity.to_owned(), notice.sqlstate.to_owned(), notice.message);
            client.send(PgWireBackendMessage::NoticeResponse(notice.into())).await?;
        }
        response
    }

    async fn run_statement<C>(
        &self,
        client: &mut C,
        statement: SluiceStatement,
        parameters: &[ScalarValue],
        format: &Format,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        self.adopt_startup_settings(client);
        let privileges = self.authorize(client);
        sluice::rights::check_statement(&statement, privileges).map_err(|e| encode::error(&e))?;
        if let SluiceStatement::Streaming(streaming) = &statement {
            use sluice::sql::streaming::StreamingStatement as S;
            match streaming.as_ref() {
                S::Subscribe { target, copy: true } => {
                    self.session.admit(&statement).map_err(|e| encode::error(&e))?;
                    return self.subscribe(client, target).await;
                }
                S::DeclareSubscribe { cursor, target, hold, binary } => {
                    self.session.admit(&statement).map_err(|e| encode::error(&e))?;
                    if *hold {
                        return Err(user_error("0A000", "DECLARE ... WITH HOLD FOR SUBSCRIBE is not supported"));
                    }
                    return self.declare_subscription(client, cursor, target, *binary).await;
                }
                _ => {}
            }
        }
        if let SluiceStatement::Move { name, direction } = &statement {
            self.session.admit(&statement).map_err(|e| encode::error(&e))?;
            return self.move_cursor(name, direction).await;
        }
        if let SluiceStatement::Standard(standard) = &statement {
            if let Statement::Deallocate { name, .. } = standard.as_ref() {
                self.session.admit(&statement).map_err(|e| encode::error(&e))?;
                if let Some(response) = self.deallocate(client, &name.value) {
                    return Ok(response);
                }
                // SQL's PREPARE named it (or ALL: the engine's go too).
            }
        }
        if let SluiceStatement::Standard(standard) = &statement {
            // The statements the server answers itself (SET, SHOW, ...) wait for ROLLBACK in an
            // aborted transaction block like any other.
            if super::statements::is_server_statement(standard) {
                self.session.admit(&statement).map_err(|e| encode::error(&e))?;
            }
            if let Some(response) = self.server_statement(client, standard, format).await? {
                return Ok(response);
            }
        }
        let mut statement = self.rewrite(statement)?;
        if let SluiceStatement::Standard(standard) = &statement {
            if let Some(removed) = super::compat::PgCatalogRules::catalog_subqueries_removed(standard) {
                if !self.session.plans_fully(&statement).await {
                    statement = SluiceStatement::Standard(Box::new(removed));
                }
            }
        }
        let empty_columns = match &statement {
            SluiceStatement::Standard(s) => super::compat::empty_catalog_columns(s),
            _ => None,
        };
        let result = self.run_in_engine(client, statement, parameters).await;
        let result = match (result, empty_columns) {
            (Err(_), Some(columns)) => {
                let fields: Vec<Field> = columns.iter().map(|c| Field::new(c, DataType::Utf8, true)).collect();
                StatementResult::Rows { schema: Arc::new(Schema::new(fields)), batches: vec![] }
            }
            (result, _) => result.map_err(|e| encode::error(&e))?,
        };
        let in_block = self.session.in_transaction_block();
        encode::response(result, format, Some(self.format_options(client)), in_block)
    }

    /// `DEALLOCATE name` and `DEALLOCATE ALL` of the statements prepared with Parse under a name
    /// (psycopg and pgjdbc deallocate what they prepared), as in PostgreSQL, where SQL's PREPARE
    /// and the protocol's share one namespace: None when the engine is to answer (a name SQL's
    /// PREPARE gave, or none: 26000; and ALL, after the protocol's are gone).
    fn deallocate<C>(&self, client: &mut C, name: &str) -> Option<Response>
    where
        C: ClientPortalStore,
        C::PortalStore: PortalStore,
    {
        let mut names = self.prepared_names.lock();
        if name.eq_ignore_ascii_case("all") {
            for name in names.drain() {
                client.portal_store().rm_statement(&name);
            }
            return None;
        }
        if !names.remove(name) {
            return None;
        }
        client.portal_store().rm_statement(name);
        Some(Response::Execution(Tag::new("DEALLOCATE")))
    }

    /// Hands the settings the engine applies to it: `default_transaction_read_only`, and
    /// `TimeZone` (how `timestamptz` input without an offset, `now()` and `current_date` read),
    /// and `DateStyle`'s order (how `'1/8/1999'::date` reads).
    fn apply_settings(&self) {
        let settings = self.settings.lock();
        let read_only = settings.get("default_transaction_read_only").is_some_and(super::statements::setting_is_on);
        self.session.set_default_read_only(read_only);
        let isolation = Isolation::named(settings.get("default_transaction_isolation").unwrap_or_default());
        self.session.set_default_isolation(isolation);
        self.session.set_time_zone(settings.get("TimeZone").unwrap_or("UTC"));
        let order = super::text::DateStyle::of(settings.get("DateStyle").unwrap_or("ISO, MDY")).order();
        self.session.set_date_order(order);
        drop(settings);
        self.show_isolation();
    }

    /// How values are written in text: the session's settings (what the client sent at startup
    /// and what it SET since).
    fn format_options<C: ClientInfo>(&self, client: &C) -> Arc<FormatOptions> {
        self.adopt_startup_settings(client);
        let mut options = FormatOptions::from_client_metadata(client.metadata());
        let settings = self.settings.lock();
        if let Some(zone) = settings.get("TimeZone") {
            options.time_zone = zone.to_string();
        }
        if let Some(style) = settings.get("DateStyle") {
            options.date_style = style.to_string();
        }
        if let Some(digits) = settings.get("extra_float_digits").and_then(|d| d.trim().parse().ok()) {
            options.extra_float_digits = digits;
        }
        Arc::new(options)
    }

    /// Tells the client a reported setting's new value (ParameterStatus), as PostgreSQL does
    /// after SET and RESET of `TimeZone`, `DateStyle`, `application_name`, ...
    async fn report_setting<C>(&self, client: &mut C, name: Option<String>) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let Some(name) = name else { return Ok(()) };
        let Some(value) = self.settings.lock().get(&name).map(str::to_string) else { return Ok(()) };
        client.feed(PgWireBackendMessage::ParameterStatus(ParameterStatus::new(name.clone(), value.clone()))).await?;
        client.metadata_mut().insert(name, value);
        Ok(())
    }

    /// Statements the server answers itself; `None` for the rest.
    async fn server_statement<C>(
        &self,
        client: &mut C,
        statement: &Statement,
        format: &Format,
    ) -> PgWireResult<Option<Response>>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let options = Some(self.format_options(client));
        Ok(Some(match statement {
            Statement::Set(set) => {
                let user = client.metadata().get("user").cloned().unwrap_or_default();
                super::statements::check_role_switch(set, &user)?;
                super::statements::check_value_count(set)?;
                let Some(changes) = super::statements::set_changes(set) else { return Ok(None) };
                for (name, value) in &changes {
                    super::settings::check(name, value).map_err(|message| user_error("22023", message))?;
                }
                for (name, value) in &changes {
                    // SET transaction_isolation is SET TRANSACTION ISOLATION LEVEL (the block's).
                    if super::settings::is_transaction_isolation(name) {
                        self.session.set_isolation(Isolation::named(value)).map_err(|e| encode::error(&e))?;
                    }
                }
                for (name, value) in changes {
                    let reported = self.settings.lock().set(&name, &value);
                    self.report_setting(client, reported).await?;
                }
                self.apply_settings();
                Response::Execution(Tag::new("SET"))
            }
            Statement::Reset(reset) => {
                let reported = match super::statements::reset_target(reset) {
                    Some(name) => vec![self.settings.lock().reset(&name)],
                    None => {
                        self.settings.lock().reset_all();
                        super::settings::REPORTED.iter().map(|name| Some(name.to_string())).collect()
                    }
                };
                for name in reported {
                    self.report_setting(client, name).await?;
                }
                self.apply_settings();
                Response::Execution(Tag::new("RESET"))
            }
            Statement::ShowVariable { variable } => {
                let name = variable.iter().map(|i| i.value.clone()).collect::<Vec<_>>().join(" ");
                if name.to_lowercase().starts_with("datafusion.") {
                    return Ok(None);
                }
                let (column, value) = if name.eq_ignore_ascii_case("all") {
                    let all = self.settings.lock().all();
                    let schema = Arc::new(Schema::new(vec![
                        Field::new("name", DataType::Utf8, false),
                        Field::new("setting", DataType::Utf8, false),
                    ]));
                    let names: ArrayRef =
                        Arc::new(StringArray::from(all.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>()));
                    let values: ArrayRef =
                        Arc::new(StringArray::from(all.iter().map(|(_, v)| v.as_str()).collect::<Vec<_>>()));
                    let batch = RecordBatch::try_new(schema.clone(), vec![names, values])
                        .map_err(|e| user_error("XX000", e.to_string()))?;
                    return encode::rows(&schema, vec![batch], format, options).map(Some);
                } else {
                    let settings = self.settings.lock();
                    let value = settings.get(&name).map(str::to_string).ok_or_else(|| {
                        user_error("42704", format!("unrecognized configuration parameter \"{name}\""))
                    })?;
                    (super::statements::show_column(&name), value)
                };
                let schema = Arc::new(Schema::new(vec![Field::new(column, DataType::Utf8, false)]));
                let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(StringArray::from(vec![value]))])
                    .map_err(|e| user_error("XX000", e.to_string()))?;
                encode::rows(&schema, vec![batch], format, options)?
            }
            // Sluice sends no notifications, so there is nothing to stop listening to.
            Statement::UNLISTEN { .. } => Response::Execution(Tag::new("UNLISTEN")),
            Statement::LISTEN { .. } => {
                return Err(user_error("0A000", "LISTEN is not supported: Sluice sends no notifications"))
            }
            Statement::Discard { object_type } => {
                use datafusion::sql::sqlparser::ast::DiscardObject;
                let all = matches!(object_type, DiscardObject::ALL);
                if all && self.session.in_transaction_block() {
                    return Err(user_error("25001", "DISCARD ALL cannot run inside a transaction block"));
                }
                if all || matches!(object_type, DiscardObject::TEMP) {
                    self.session.discard_temporary().await.map_err(|e| encode::error(&e))?;
                }
                if all {
                    self.cursors.lock().clear();
                    self.subscriptions.lock().await.clear();
                }
                Response::Execution(Tag::new(&format!("DISCARD {object_type}")))
            }
            Statement::Declare { stmts } => {
                for declare in stmts {
                    self.declare(client, declare).await?;
                }
                Response::Execution(Tag::new("DECLARE CURSOR"))
            }
            Statement::Fetch { name, direction, .. } => {
                if !self.cursors.lock().contains_key(&name.value) {
                    let count = cursors::forward_count("FETCH", direction);
                    if let Some(response) = self.fetch_subscription(client, &name.value, count, format).await? {
                        return Ok(Some(response));
                    }
                }
                let rows = self.advance(&name.value, cursors::Motion::of("FETCH", direction)?)?;
                let schema = rows.schema();
                let mut response = encode::rows(&schema, vec![rows], format, options)?;
                if let Response::Query(query) = &mut response {
                    query.set_command_tag("FETCH");
                }
                response
            }
            Statement::Close { cursor } => {
                match cursor {
                    CloseCursor::All => {
                        self.cursors.lock().clear();
                        self.subscriptions.lock().await.clear();
                    }
                    CloseCursor::Specific { name } => {
                        let subscription = self.subscriptions.lock().await.remove(&name.value);
                        if self.cursors.lock().remove(&name.value).is_none() && subscription.is_none() {
                            return Err(user_error("34000", format!("cursor \"{}\" does not exist", name.value)));
                        }
                    }
                }
                Response::Execution(Tag::new("CLOSE CURSOR"))
            }
            Statement::Copy { source, to, target, options: copy_options, legacy_options, .. } => {
                let options = copy_settings(copy_options, legacy_options)?;
                return self.copy(client, source, *to, target, options, format).await.map(Some);
            }
            _ => return Ok(None),
        }))
    }

    /// A server-side file a client names, checked by the engine's path policy.
    fn client_file(&self, filename: &str, purpose: PathUse) -> PgWireResult<std::path::PathBuf> {
        self.server.db.client_file(filename, self.session.privileges(), purpose).map_err(|e| encode::error(&e))
    }
}

#[async_trait]
impl SimpleQueryHandler for Connection {
    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        self.note_started(client, query);
        let statements = parse_statements(&super::compat::substitute(query)).map_err(|e| {
            // A statement that does not parse aborts the transaction block too.
            self.session.statement_failed();
            encode::error(&e)
        })?;
        if statements.is_empty() {
            return Ok(vec![Response::EmptyQuery]);
        }
        // Several statements run in one implicit transaction, as in PostgreSQL (not with COPY,
        // whose rows arrive after this returns).
        let implicit = statements.len() > 1 && !statements.iter().any(is_copy);
        let mut responses = Vec::with_capacity(statements.len());
        for statement in statements {
            if implicit {
                self.session.begin_implicit();
            }
            match self.run(client, statement, &[], &Format::UnifiedText).await {
                Ok(response) => {
                    let copying = matches!(response, Response::CopyIn(_));
                    responses.push(response);
                    if copying {
                        break;
                    }
                }
                Err(PgWireError::UserError(info)) => {
                    responses.push(Response::Error(info));
                    break;
                }
                Err(other) => {
                    let _ = self.session.end_implicit().await;
                    return Err(other);
                }
            }
        }
        if implicit {
            let ended = self.session.end_implicit().await;
            self.statement_ended(cursors::Outcome::Other, ended.is_err()).await;
            if let Err(e) = ended {
                if let PgWireError::UserError(info) = encode::error(&e) {
                    responses.push(Response::Error(info));
                }
            }
        }
        Ok(responses)
    }
}

/// Whether a statement is a COPY (its data flows after the query's statements ran).
fn is_copy(statement: &SluiceStatement) -> bool {
    matches!(statement, SluiceStatement::Standard(s) if matches!(**s, Statement::Copy { .. }))
}

/// Plans statements at Parse time to report parameter and result types.
pub struct SluiceQueryParser {
    connection: std::sync::Weak<Connection>,
}

#[async_trait]
impl QueryParser for SluiceQueryParser {
    type Statement = Prepared;

    async fn parse_sql<C>(&self, _client: &C, sql: &str, types: &[Option<Type>]) -> PgWireResult<Option<Prepared>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let connection = self.connection.upgrade().ok_or_else(|| user_error("08006", "the connection is closing"))?;
        let introspection = super::compat::is_asyncpg_introspection(sql);
        let sql = if introspection { super::compat::ASYNCPG_TYPES } else { sql };
        let mut statements = parse_statements(&super::compat::substitute(sql)).map_err(|e| {
            connection.session.statement_failed();
            encode::error(&e)
        })?;
        if statements.len() > 1 {
            connection.session.statement_failed();
            return Err(user_error("42601", "cannot insert multiple commands into a prepared statement"));
        }
        let Some(statement) = statements.pop() else {
            return Ok(Some(Prepared {
                statement: None,
                parameter_types: vec![],
                arrow_parameter_types: vec![],
                result_schema: None,
                parameter_count: Some(0),
                text: sql.to_string(),
            }));
        };
        let mut parameter_count = super::statements::placeholder_count(&statement).map(|n| n.max(types.len()));
        let statement = connection.rewrite(statement)?;
        let described = connection.session.describe_statement(&statement).await;
        let mut result_schema = described.result_schema;
        if let (None, SluiceStatement::Standard(s)) = (&result_schema, &statement) {
            if let Some(columns) = super::compat::empty_catalog_columns(s) {
                let fields: Vec<Field> = columns.iter().map(|c| Field::new(c, DataType::Utf8, true)).collect();
                result_schema = Some(Arc::new(Schema::new(fields)));
            }
        }
        if let SluiceStatement::Standard(s) = &statement {
            if let Statement::ShowVariable { variable } = &**s {
                let name = variable.iter().map(|i| i.value.clone()).collect::<Vec<_>>().join(" ");
                let column = super::statements::show_column(&name);
                result_schema = Some(Arc::new(Schema::new(vec![Field::new(column, DataType::Utf8, false)])));
            }
        }
        let count = described.parameter_types.len().max(types.len());
        let mut parameter_types = Vec::with_capacity(count);
        let mut arrow_types = Vec::with_capacity(count);
        for i in 0..count {
            let inferred = described.parameter_types.get(i).cloned().flatten();
            let given = types.get(i).cloned().flatten().filter(|t| t.oid() != 0);
            let pg = match (&given, &inferred) {
                (Some(t), _) => t.clone(),
                (None, Some(dt)) => arrow_pg::datatypes::into_pg_type(dt).unwrap_or(Type::TEXT),
                (None, None) => Type::TEXT,
            };
            arrow_types.push(inferred.or_else(|| super::statements::arrow_type_of(&pg)));
            parameter_types.push(pg);
        }
        if super::enums::oid_parameters(sql) {
            for pg in parameter_types.iter_mut().filter(|t| **t == Type::INT4) {
                *pg = Type::OID;
            }
            result_schema = result_schema.map(|schema| super::enums::typeinfo_schema(&schema));
        }
        if introspection {
            // asyncpg has a built-in codec for oid[] only; it sends the type oids in binary.
            parameter_types = vec![Type::OID_ARRAY];
            parameter_count = Some(1);
            arrow_types = vec![Some(DataType::List(Arc::new(Field::new_list_field(DataType::Int32, true))))];
        }
        Ok(Some(Prepared {
            statement: Some(statement),
            parameter_types,
            arrow_parameter_types: arrow_types,
            result_schema,
            parameter_count,
            text: sql.to_string(),
        }))
    }

    fn get_parameter_types(&self, statement: &Prepared) -> PgWireResult<Vec<Type>> {
        Ok(statement.parameter_types.clone())
    }

    fn get_result_schema(
        &self,
        statement: &Prepared,
        format: Option<&Format>,
    ) -> PgWireResult<Vec<pgwire::api::results::FieldInfo>> {
        match &statement.result_schema {
            Some(schema) => encode::fields(schema, format.unwrap_or(&Format::UnifiedText), None),
            None => Ok(vec![]),
        }
    }
}

#[async_trait]
impl ExtendedQueryHandler for Connection {
    type Statement = Prepared;
    type QueryParser = SluiceQueryParser;

    fn query_parser(&self) -> Arc<Self::QueryParser> {
        self.parser.clone()
    }

    /// pgwire's Parse, with the statement's name remembered for `DEALLOCATE ALL`.
    async fn on_parse<C>(&self, client: &mut C, message: pgwire::messages::extendedquery::Parse) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let name = message.name.clone().unwrap_or_else(|| DEFAULT_NAME.to_owned());
        match StoredStatement::parse(client, &message, self.query_parser()).await? {
            Some(statement) => client.portal_store().put_statement(Arc::new(statement)),
            None => client.portal_store().put_empty_statement(&name),
        }
        if name != DEFAULT_NAME {
            self.prepared_names.lock().insert(name);
        }
        client.send(PgWireBackendMessage::ParseComplete(pgwire::messages::extendedquery::ParseComplete::new())).await?;
        Ok(())
    }

    /// Sync ends the implicit transaction of the statements executed since the last one: their
    /// writes commit together, or are dropped if one failed (a failed commit is reported here, as
    /// PostgreSQL reports an error at Sync).
    async fn on_sync<C>(&self, client: &mut C, _message: PgSync) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        client.portal_store().rm_portal(DEFAULT_NAME);
        let ended = self.session.end_implicit().await;
        self.statement_ended(cursors::Outcome::Other, ended.is_err()).await;
        if let Err(e) = ended {
            let info: ErrorInfo = encode::error(&e).into();
            client.send(PgWireBackendMessage::ErrorResponse(info.into())).await?;
        }
        client.send(PgWireBackendMessage::ReadyForQuery(ReadyForQuery::new(client.transaction_status()))).await?;
        client.flush().await?;
        Ok(())
    }

    /// pgwire's Bind, after the checks PostgreSQL makes of it.
    async fn on_bind<C>(&self, client: &mut C, message: Bind) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let statement_name = message.statement_name.as_deref().unwrap_or(DEFAULT_NAME);
        let portal_name = message.portal_name.as_deref().unwrap_or(DEFAULT_NAME);
        match client.portal_store().get_statement(statement_name) {
            Some(Entry::Value(statement)) => {
                super::statements::check_bind(&message, statement_name, statement.statement.parameter_count)?;
                let portal = Portal::try_new(&message, statement)?;
                client.portal_store().put_portal(Arc::new(portal));
            }
            Some(Entry::Empty) => {
                super::statements::check_bind(&message, statement_name, Some(0))?;
                client.portal_store().put_empty_portal(portal_name);
            }
            None => return Err(PgWireError::StatementNotFound(statement_name.to_owned())),
        }
        client.send(PgWireBackendMessage::BindComplete(BindComplete::new())).await?;
        Ok(())
    }

    async fn do_query<C>(&self, client: &mut C, portal: &Portal<Prepared>, _max_rows: usize) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let prepared = &portal.statement.statement;
        self.note_started(client, &prepared.text);
        let Some(statement) = prepared.statement.clone() else { return Ok(Response::EmptyQuery) };
        // Outside a block, the statements up to the next Sync are one implicit transaction, as
        // in PostgreSQL: `on_sync` commits it (not COPY, which commits when its rows are in).
        if !is_copy(&statement) {
            if !self.session.in_transaction_block() {
                self.pipeline.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            self.session.begin_implicit();
        }
        let types: Vec<Option<&DataType>> = prepared.arrow_parameter_types.iter().map(Option::as_ref).collect();
        let parameters = if prepared.parameter_types == [Type::OID_ARRAY] {
            vec![super::statements::oid_array_parameter(portal.parameters.first().cloned().flatten())?]
        } else {
            let session = self.session.context().state_ref().read().config_options().clone();
            super::wire_types::decode_parameters(portal, &types, &session)?
        };
        self.run(client, statement, &parameters, &portal.result_column_format).await
    }

    async fn do_describe_statement<C>(
        &self,
        _client: &mut C,
        target: &StoredStatement<Prepared>,
    ) -> PgWireResult<DescribeStatementResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let prepared = &target.statement;
        let fields = match &prepared.result_schema {
            Some(schema) => encode::fields(schema, &Format::UnifiedText, None)?,
            None => vec![],
        };
        Ok(DescribeStatementResponse::new(prepared.parameter_types.clone(), fields))
    }

    async fn do_describe_portal<C>(
        &self,
        client: &mut C,
        portal: &Portal<Prepared>,
    ) -> PgWireResult<DescribePortalResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match &portal.statement.statement.result_schema {
            Some(schema) => Ok(DescribePortalResponse::new(encode::fields(
                schema,
                &portal.result_column_format,
                Some(self.format_options(client)),
            )?)),
            None => Ok(DescribePortalResponse::no_data()),
        }
    }
}
