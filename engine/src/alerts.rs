//! Alerts: `CREATE ALERT name ON FAILURE [OF FLOW f | OF SOURCE s] | WHEN (condition) NOTIFY
//! WEBHOOK 'url' [WITH (cooldown_seconds = 60, retries = 5)]`, `DROP ALERT`, and the task that
//! watches them.
//!
//! Every [`CHECK_INTERVAL_MS`] the watcher evaluates each alert with SQL over the system tables
//! (`sluice.flows` and `sluice.sources` for failures; the alert's own condition otherwise). An
//! alert fires when its condition becomes true and clears when it becomes false again; each
//! change POSTs a JSON payload to the webhook (Slack-compatible: a `text` field, plus `alert`,
//! `state`, `at` and `details`), tried up to `retries` more times with doubling waits. After a
//! clear, the alert does not fire again within `cooldown_seconds` (a flapping condition sends one
//! pair of messages per cooldown). `sluice.alerts` shows each alert's state, its last firing and
//! clearing, and its last delivery error; the event log records firings, clearings and failed
//! deliveries.
//!
//! Alerts are in the catalog (they survive restarts; an alert firing when the server stopped
//! fires again after it starts, if its condition still holds). Only the warehouse owner creates
//! them: the server POSTs to the address an alert names, which is the operator's choice.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::DataType;

pub use crate::catalog::{AlertCondition, AlertEntry};
use crate::error::{Error, Result};
use crate::sql::context::{QueryContext, StatementResult};
use crate::syntax::alert::CreateAlert;
use crate::util::{lock, now_ms};
use crate::warehouse::Warehouse;

/// How often the alerts are evaluated.
pub const CHECK_INTERVAL_MS: u64 = 1_000;
/// The default wait after a clear before the alert may fire again.
pub const COOLDOWN_SECONDS_DEFAULT: u64 = 60;
/// The default number of retries of a failed delivery.
pub const RETRIES_DEFAULT: u32 = 5;
/// The most retries an alert may ask for.
const RETRIES_MAX: u32 = 20;
/// The first wait before a retry (it doubles, up to [`RETRY_WAIT_MAX_MS`]).
const RETRY_WAIT_FIRST_MS: u64 = 500;
const RETRY_WAIT_MAX_MS: u64 = 30_000;
/// How long one delivery may take.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest text of a failure or condition put in a payload.
const DETAIL_CHARS_MAX: usize = 2_000;

/// What the watcher knows of one alert (in memory).
#[derive(Debug, Clone, Default)]
pub struct AlertState {
    pub firing: bool,
    pub last_fired_ms: Option<i64>,
    pub last_cleared_ms: Option<i64>,
    /// What made it fire (the failing flows' errors, or the condition).
    pub last_message: Option<String>,
    pub deliveries: u64,
    pub delivery_failures: u64,
    pub last_delivery_error: Option<String>,
    pub last_delivered_ms: Option<i64>,
    /// The last evaluation's error (a condition that no longer plans, say).
    pub check_error: Option<String>,
}

/// The alerts' states, by name.
#[derive(Debug, Default)]
pub struct AlertRuntime {
    states: Mutex<HashMap<String, AlertState>>,
}

impl AlertRuntime {
    pub fn states(&self) -> HashMap<String, AlertState> {
        lock(&self.states).clone()
    }

    fn update(&self, name: &str, change: impl FnOnce(&mut AlertState)) {
        change(lock(&self.states).entry(name.to_string()).or_default());
    }
}

/// `CREATE ALERT`: checks the webhook's address and the condition (it must plan, over what
/// exists now, to a boolean), then keeps the alert in the catalog.
pub(crate) async fn create(cx: &QueryContext, create: CreateAlert) -> Result<StatementResult> {
    if !cx.privileges().owner {
        return Err(Error::PermissionDenied(
            "only the warehouse owner creates alerts (the server POSTs to the address an alert names)".into(),
        ));
    }
    let url = url::Url::parse(&create.webhook)
        .map_err(|e| Error::data("22023", format!("invalid webhook address \"{}\": {e}", create.webhook)))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(Error::data(
            "22023",
            format!("a webhook is an http:// or https:// address, not \"{}\"", create.webhook),
        ));
    }
    let mut cooldown_seconds = COOLDOWN_SECONDS_DEFAULT;
    let mut retries = RETRIES_DEFAULT;
    for (key, value) in &create.options {
        let number = || {
            value
                .trim()
                .parse::<u64>()
                .map_err(|_| Error::data("22023", format!("alert option {key} takes a whole number, not {value}")))
        };
        match key.to_ascii_lowercase().as_str() {
            "cooldown_seconds" | "cooldown" => cooldown_seconds = number()?,
            "retries" => {
                retries = u32::try_from(number()?).unwrap_or(u32::MAX);
                if retries > RETRIES_MAX {
                    return Err(Error::data("22023", format!("alert option retries is at most {RETRIES_MAX}")));
                }
            }
            other => {
                return Err(Error::data(
                    "22023",
                    format!("unknown alert option \"{other}\" (an alert takes cooldown_seconds and retries)"),
                ))
            }
        }
    }
    match &create.condition {
        AlertCondition::When(condition) => {
            evaluate_condition(cx, condition).await?;
        }
        AlertCondition::Failure { flow: Some(flow), .. } if !cx.catalog_state().flows.contains_key(flow) => {
            return Err(Error::UndefinedObject { kind: "flow", name: flow.clone() });
        }
        AlertCondition::Failure { source: Some(source), .. } if !cx.catalog_state().sources.contains_key(source) => {
            return Err(Error::UndefinedObject { kind: "source", name: source.clone() });
        }
        AlertCondition::Failure { .. } => {}
    }
    let entry = AlertEntry {
        name: create.name.clone(),
        condition: create.condition,
        webhook: create.webhook,
        cooldown_seconds,
        retries,
        created_ms: now_ms(),
    };
    let (or_replace, if_not_exists) = (create.or_replace, create.if_not_exists);
    let (_, created) = cx
        .db
        .catalog
        .update(|state| {
            if state.alerts.contains_key(&entry.name) && !or_replace {
                if if_not_exists {
                    return Ok(false);
                }
                return Err(Error::DuplicateObject { kind: "alert", name: entry.name.clone() });
            }
            state.alerts.insert(entry.name.clone(), entry.clone());
            Ok(true)
        })
        .await?;
    if !created {
        cx.notice(format!("alert \"{}\" already exists, skipping", create.name));
    }
    Ok(StatementResult::command("CREATE ALERT"))
}

/// `DROP ALERT [IF EXISTS] name`.
pub(crate) async fn drop(
    cx: &QueryContext,
    runtime: &AlertRuntime,
    name: &str,
    if_exists: bool,
) -> Result<StatementResult> {
    if !cx.privileges().owner {
        return Err(Error::PermissionDenied("only the warehouse owner drops alerts".into()));
    }
    let (_, dropped) = cx
        .db
        .catalog
        .update(|state| match state.alerts.remove(name) {
            Some(_) => Ok(true),
            None if if_exists => Ok(false),
            None => Err(Error::UndefinedObject { kind: "alert", name: name.to_string() }),
        })
        .await?;
    if dropped {
        lock(&runtime.states).remove(name);
    } else {
        cx.notice(format!("alert \"{name}\" does not exist, skipping"));
    }
    Ok(StatementResult::command("DROP ALERT"))
}

/// Runs `SELECT (condition)`: whether it is true now (NULL and no row count as false).
async fn evaluate_condition(cx: &QueryContext, condition: &str) -> Result<bool> {
    let sql = format!("SELECT ({condition}) AS fired");
    let statement = match crate::syntax::parser::parse_statement_text(&sql)? {
        crate::syntax::parser::SluiceStatement::Standard(statement) => *statement,
        _ => return Err(Error::Plan(format!("an alert condition is an expression, not \"{condition}\""))),
    };
    let plan = cx.plan_statement(statement).await?;
    let frame = cx.ctx.execute_logical_plan(plan).await?;
    let field = frame.schema().as_arrow().fields().first().cloned();
    if field.is_none_or(|f| f.data_type() != &DataType::Boolean) {
        return Err(Error::data("42804", format!("an alert condition must be boolean: {condition}")));
    }
    let batches = cx.collect(frame).await?;
    let value = batches.iter().find(|b| b.num_rows() > 0).and_then(|b| {
        let column = b.column(0).as_boolean_opt()?;
        (!column.is_null(0)).then(|| column.value(0))
    });
    Ok(value.unwrap_or(false))
}

/// The names and errors of the failed flows and sources an alert on failure watches.
async fn failures(cx: &QueryContext, flow: Option<&str>, source: Option<&str>) -> Result<Vec<String>> {
    let quote = |s: &str| s.replace('\'', "''");
    let mut queries = Vec::new();
    match (flow, source) {
        (Some(flow), _) => queries.push(format!(
            "SELECT 'flow ' || name, error FROM sluice.flows WHERE state = 'failed' AND name = '{}'",
            quote(flow)
        )),
        (None, Some(source)) => queries.push(format!(
            "SELECT 'source ' || name, error FROM sluice.sources WHERE state = 'failed' AND name = '{}'",
            quote(source)
        )),
        (None, None) => {
            queries.push("SELECT 'flow ' || name, error FROM sluice.flows WHERE state = 'failed'".into());
            queries.push("SELECT 'source ' || name, error FROM sluice.sources WHERE state = 'failed'".into());
            queries.push("SELECT 'view ' || name, error FROM sluice.views WHERE state = 'failed'".into());
        }
    }
    let mut out = Vec::new();
    for sql in queries {
        let crate::syntax::parser::SluiceStatement::Standard(statement) =
            crate::syntax::parser::parse_statement_text(&sql)?
        else {
            continue;
        };
        let plan = cx.plan_statement(*statement).await?;
        let frame = cx.ctx.execute_logical_plan(plan).await?;
        for batch in cx.collect(frame).await? {
            out.extend(failure_lines(&batch));
        }
    }
    Ok(out)
}

fn failure_lines(batch: &RecordBatch) -> Vec<String> {
    let text = |column: usize, row: usize| -> String {
        let Some(array) = batch.columns().get(column) else { return String::new() };
        if array.is_null(row) {
            return String::new();
        }
        match array.data_type() {
            DataType::Utf8 => array.as_string::<i32>().value(row).to_string(),
            DataType::Utf8View => array.as_string_view().value(row).to_string(),
            DataType::LargeUtf8 => array.as_string::<i64>().value(row).to_string(),
            _ => String::new(),
        }
    };
    (0..batch.num_rows()).map(|row| format!("{}: {}", text(0, row), text(1, row))).collect()
}

fn cut(text: &str) -> String {
    text.chars().take(DETAIL_CHARS_MAX).collect()
}

/// Watches the alerts until the warehouse is dropped (one task per database).
pub(crate) async fn watch(db: Weak<Warehouse>, runtime: Weak<AlertRuntime>) {
    let client = match reqwest::Client::builder().timeout(DELIVERY_TIMEOUT).build() {
        Ok(client) => client,
        Err(e) => {
            tracing::error!("alerts: no HTTP client, alerts are not watched: {e}");
            return;
        }
    };
    loop {
        tokio::time::sleep(Duration::from_millis(CHECK_INTERVAL_MS)).await;
        let (Some(db), Some(runtime)) = (db.upgrade(), runtime.upgrade()) else { return };
        // Alerts another process created or dropped count too (one catalog read per pass).
        let _ = db.catalog.refresh().await;
        let alerts: Vec<AlertEntry> = db.catalog.current().alerts.values().cloned().collect();
        if alerts.is_empty() {
            continue;
        }
        // A context per pass, not kept across passes: it holds the warehouse, which must be
        // free to go once the database's last handle is dropped.
        let cx = QueryContext::new(db.clone());
        cx.set_privileges(crate::privileges::Privileges::OWNER);
        for alert in alerts {
            check(&cx, &db, &runtime, &client, &alert).await;
        }
    }
}

async fn check(
    cx: &QueryContext,
    db: &Arc<Warehouse>,
    runtime: &Arc<AlertRuntime>,
    client: &reqwest::Client,
    alert: &AlertEntry,
) {
    cx.clear_statement_state();
    let outcome = match &alert.condition {
        AlertCondition::When(condition) => {
            evaluate_condition(cx, condition).await.map(|fired| (fired, format!("condition {condition} is true")))
        }
        AlertCondition::Failure { flow, source } => {
            failures(cx, flow.as_deref(), source.as_deref()).await.map(|failed| (!failed.is_empty(), failed.join("\n")))
        }
    };
    let (holds, message) = match outcome {
        Ok(result) => {
            runtime.update(&alert.name, |s| s.check_error = None);
            result
        }
        Err(e) => {
            runtime.update(&alert.name, |s| s.check_error = Some(e.to_string()));
            return;
        }
    };
    let now = now_ms();
    let state = lock(&runtime.states).get(&alert.name).cloned().unwrap_or_default();
    let change = match (state.firing, holds) {
        (false, true) => {
            let cooled = state.last_cleared_ms.is_none_or(|cleared| {
                now - cleared >= i64::try_from(alert.cooldown_seconds.saturating_mul(1000)).unwrap_or(i64::MAX)
            });
            cooled.then_some("firing")
        }
        (true, false) => Some("cleared"),
        _ => None,
    };
    let Some(change) = change else { return };
    runtime.update(&alert.name, |s| {
        s.firing = change == "firing";
        if s.firing {
            s.last_fired_ms = Some(now);
            s.last_message = Some(cut(&message));
        } else {
            s.last_cleared_ms = Some(now);
        }
    });
    let text = if change == "firing" {
        format!("[sluice] alert {} FIRING: {} — {}", alert.name, alert.describe(), cut(&message))
    } else {
        format!("[sluice] alert {} cleared: {}", alert.name, alert.describe())
    };
    db.events.record(crate::events::FlowEvent {
        at_ms: now,
        flow: alert.name.clone(),
        kind: if change == "firing" { "alert fired" } else { "alert cleared" },
        message: Some(text.clone()),
        ..Default::default()
    });
    let payload = serde_json::json!({
        "text": text,
        "alert": alert.name,
        "state": change,
        "condition": alert.describe(),
        "at": chrono::DateTime::from_timestamp_millis(now).map(|t| t.to_rfc3339()),
        "details": if change == "firing" { cut(&message) } else { String::new() },
    });
    // Delivered apart from the watcher: a slow or down receiver delays no other alert.
    tokio::spawn(deliver(Arc::downgrade(db), runtime.clone(), client.clone(), alert.clone(), payload.to_string()));
}

/// POSTs one payload, retrying with doubling waits; records the outcome.
async fn deliver(
    db: Weak<Warehouse>,
    runtime: Arc<AlertRuntime>,
    client: reqwest::Client,
    alert: AlertEntry,
    body: String,
) {
    let mut wait = RETRY_WAIT_FIRST_MS;
    for attempt in 0..=alert.retries {
        let result = client
            .post(&alert.webhook)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await
            // Without the address: a webhook's URL is a secret (Slack's are), and the error is
            // shown to every role in sluice.alerts and the event log.
            .map_err(|e| e.without_url().to_string())
            .and_then(|response| {
                let status = response.status();
                if status.is_success() {
                    Ok(())
                } else {
                    Err(format!("the webhook answered {status}"))
                }
            });
        match result {
            Ok(()) => {
                runtime.update(&alert.name, |s| {
                    s.deliveries += 1;
                    s.last_delivery_error = None;
                    s.last_delivered_ms = Some(now_ms());
                });
                return;
            }
            Err(e) => {
                let error = format!("attempt {} of {}: {e}", attempt + 1, alert.retries + 1);
                runtime.update(&alert.name, |s| {
                    s.delivery_failures += 1;
                    s.last_delivery_error = Some(error.clone());
                });
                if attempt == alert.retries {
                    if let Some(db) = db.upgrade() {
                        db.events.record(crate::events::FlowEvent {
                            at_ms: now_ms(),
                            flow: alert.name.clone(),
                            kind: "alert delivery failed",
                            message: Some(error),
                            ..Default::default()
                        });
                    }
                    return;
                }
                tokio::time::sleep(Duration::from_millis(wait)).await;
                wait = (wait * 2).min(RETRY_WAIT_MAX_MS);
            }
        }
    }
}
