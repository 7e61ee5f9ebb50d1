//! `COPY (SUBSCRIBE [TO] t [WITH (SNAPSHOT = false)]) TO STDOUT`: follows a table over pgwire, in
//! Materialize's shape: every row carries the table version it belongs to and a diff (+1 for a
//! row that arrived, -1 for one that left), first t's rows as of the version the subscription
//! starts at (unless SNAPSHOT = false), then each committed change as it commits, until the
//! client cancels it or goes away. psql and any driver's COPY OUT can follow a table live. A
//! client that goes away is noticed at the next write to it: a change, or every two seconds the
//! server's version again as a ParameterStatus (which clients take at any time, also in COPY).
//!
//! `DECLARE c CURSOR FOR SUBSCRIBE ...` makes a cursor of it: each FETCH returns up to its count
//! of pending rows, waiting for the next change when none are pending (with the same heartbeat).
//!
//! The snapshot is read through the session like any query (so the role needs to read t), at the
//! version just before the subscription's first, so no commit is missed or seen twice.

use pgwire::messages::copy::CopyOutResponse;
use pgwire::messages::startup::ParameterStatus;

use crate::pg::settings::SERVER_VERSION;
use sluice::sql::streaming::SubscribeTarget;

use super::*;

/// How often a COPY subscription with nothing to send writes to its client, to notice one that
/// went away (the write fails) rather than follow the table for nobody until the next change.
const HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(2);

/// The columns every subscription row starts with.
const VERSION_COLUMN: &str = "version";
const DIFF_COLUMN: &str = "diff";

/// A cursor over a subscription: FETCH returns its pending rows, waiting for the next change
/// when none are pending.
pub(super) struct SubscriptionCursor {
    subscription: sluice::Subscription,
    schema: SchemaRef,
    /// Rows (version, diff, columns) not fetched yet.
    pending: std::collections::VecDeque<RecordBatch>,
    /// The transaction block's newest savepoint when it was declared (see `Cursor::savepoint`).
    pub(super) savepoint: Option<u64>,
}

impl Connection {
    /// Starts following `target`: the subscription, the rows' schema (version, diff, t's
    /// columns) and the snapshot's rows (none with SNAPSHOT = false; a durable subscription's
    /// snapshot comes from the subscription itself).
    async fn start_subscription<C>(
        &self,
        client: &C,
        target: &SubscribeTarget,
    ) -> PgWireResult<(sluice::Subscription, SchemaRef, Vec<RecordBatch>)>
    where
        C: ClientInfo,
    {
        let (subscription, query, version) = match target {
            SubscribeTarget::Table { table, snapshot } => {
                let name = sluice::sql::names::table_name(table).map_err(|e| encode::error(&e))?;
                let qualified = qualified(&name);
                let subscription = self.server.db.subscribe(&qualified, None).await.map_err(|e| encode::error(&e))?;
                let version = i64::try_from(subscription.next_version().saturating_sub(1))
                    .map_err(|e| user_error("XX000", e.to_string()))?;
                let limit = if *snapshot { "" } else { " LIMIT 0" };
                (subscription, format!("SELECT * FROM {qualified} VERSION AS OF {version}{limit}"), version)
            }
            SubscribeTarget::Durable(name) => {
                let subscription = self.server.db.resume_subscription(name).await.map_err(|e| encode::error(&e))?;
                let qualified = qualified(subscription.table());
                (subscription, format!("SELECT * FROM {qualified} LIMIT 0"), 0)
            }
        };
        // The rows (or only the columns) through the session, as any query: the role must read t.
        let statement = parse_statements(&query)
            .map_err(|e| encode::error(&e))?
            .into_iter()
            .next()
            .ok_or_else(|| user_error("XX000", "no snapshot query"))?;
        let result = self.run_in_engine(client, statement, &[]).await.map_err(|e| encode::error(&e))?;
        let StatementResult::Rows { schema: table_schema, batches } = result else {
            return Err(user_error("XX000", "the snapshot query returned no rows"));
        };
        let mut fields =
            vec![Field::new(VERSION_COLUMN, DataType::Int64, false), Field::new(DIFF_COLUMN, DataType::Int64, false)];
        fields.extend(table_schema.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)));
        let schema: SchemaRef = Arc::new(Schema::new(fields));
        let mut first = Vec::new();
        for batch in batches.iter().filter(|b| b.num_rows() > 0) {
            first.push(with_version_and_diff(&schema, batch, version, None)?);
        }
        Ok((subscription, schema, first))
    }

    /// `DECLARE c CURSOR FOR SUBSCRIBE ...`: the cursor holds the snapshot's rows and then the
    /// changes FETCH waits for.
    pub(super) async fn declare_subscription<C>(
        &self,
        client: &C,
        cursor: &str,
        target: &SubscribeTarget,
        binary: bool,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo,
    {
        if self.cursors.lock().contains_key(cursor) || self.subscriptions.lock().await.contains_key(cursor) {
            return Err(user_error("42P03", format!("cursor \"{cursor}\" already exists")));
        }
        let (subscription, schema, first) = self.start_subscription(client, target).await?;
        // As for any cursor: a transaction block, once the target is known to exist.
        self.check_declare(binary, false)?;
        let cursor_state = SubscriptionCursor {
            subscription,
            schema,
            pending: first.into(),
            savepoint: self.session.newest_savepoint(),
        };
        self.subscriptions.lock().await.insert(cursor.to_string(), cursor_state);
        Ok(Response::Execution(Tag::new("DECLARE CURSOR")))
    }

    /// FETCH from a subscription cursor: up to `count` rows (its error, 0A000, for a direction a
    /// subscription cannot move in), waiting (until the client cancels,
    /// 57014) for the next change when none are pending. None when `name` is no such cursor.
    pub(super) async fn fetch_subscription<C>(
        &self,
        client: &mut C,
        name: &str,
        count: PgWireResult<usize>,
        format: &Format,
    ) -> PgWireResult<Option<Response>>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let mut cursors = self.subscriptions.lock().await;
        let Some(cursor) = cursors.get_mut(name) else { return Ok(None) };
        // A subscription moves forward only.
        let count = count?;
        if cursor.pending.is_empty() {
            let cancelled = super::super::cancel_requested(super::super::cancel_receiver(client).await);
            tokio::pin!(cancelled);
            // While it waits, the heartbeat notices a client that went away (see HEARTBEAT).
            let mut heartbeat = tokio::time::interval_at(tokio::time::Instant::now() + HEARTBEAT, HEARTBEAT);
            let change = loop {
                tokio::select! {
                    change = cursor.subscription.next() => break change.map_err(|e| encode::error(&e))?,
                    _ = heartbeat.tick() => send_heartbeat(client).await?,
                    _ = &mut cancelled => return Err(user_error("57014", "canceling statement due to user request")),
                }
            };
            cursor.pending.extend(change_batches(&cursor.schema, &change)?);
        }
        let mut taken = Vec::new();
        let mut wanted = count;
        while wanted > 0 {
            let Some(batch) = cursor.pending.pop_front() else { break };
            if batch.num_rows() > wanted {
                taken.push(batch.slice(0, wanted));
                cursor.pending.push_front(batch.slice(wanted, batch.num_rows() - wanted));
                wanted = 0;
            } else {
                wanted -= batch.num_rows();
                taken.push(batch);
            }
        }
        let schema = cursor.schema.clone();
        drop(cursors);
        let mut response = encode::rows(&schema, taken, format, Some(self.format_options(client)))?;
        if let Response::Query(query) = &mut response {
            query.set_command_tag("FETCH");
        }
        Ok(Some(response))
    }

    /// Serves the subscription on this connection until the client cancels it (57014) or goes
    /// away. The COPY messages are sent and flushed here, as each change commits (a COPY
    /// response stream would be flushed only at its end).
    pub(super) async fn subscribe<C>(&self, client: &mut C, target: &SubscribeTarget) -> PgWireResult<Response>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let (mut subscription, schema, first) = self.start_subscription(client, target).await?;
        let initial = super::super::copy_out::encode(&schema, &first, &CopyOptions::default())?;
        let columns = schema.fields().len();
        let width = i16::try_from(columns).map_err(|_| user_error("54011", "too many columns to subscribe to"))?;
        let header = CopyOutResponse::new(0, width, vec![0; columns]);
        client.send(PgWireBackendMessage::CopyOutResponse(header)).await?;
        send_rows(client, initial).await?;
        let cancelled = super::super::cancel_requested(super::super::cancel_receiver(client).await);
        tokio::pin!(cancelled);
        let mut heartbeat = tokio::time::interval(HEARTBEAT);
        heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                change = subscription.next() => {
                    let change = change.map_err(|e| encode::error(&e))?;
                    send_rows(client, change_data(&schema, &change)?).await?;
                }
                _ = heartbeat.tick() => send_heartbeat(client).await?,
                _ = &mut cancelled => {
                    return Err(user_error("57014", "canceling statement due to user request"));
                }
            }
        }
    }
}

/// `schema.name`, quoted.
fn qualified(name: &sluice::names::TableName) -> String {
    format!("{}.{}", sluice::sql::names::quoted(&name.schema), sluice::sql::names::quoted(&name.name))
}

/// Writes to a client that is waiting for a subscription's rows, so that one that went away is
/// noticed (the write fails): a message every client takes at any time, also inside COPY, the
/// server's version again, unchanged.
async fn send_heartbeat<C>(client: &mut C) -> PgWireResult<()>
where
    C: Sink<PgWireBackendMessage> + Unpin,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let status = ParameterStatus::new("server_version".into(), SERVER_VERSION.into());
    client.send(PgWireBackendMessage::ParameterStatus(status)).await?;
    Ok(())
}

/// Sends COPY data rows and flushes them.
async fn send_rows<C>(client: &mut C, rows: Vec<CopyData>) -> PgWireResult<()>
where
    C: Sink<PgWireBackendMessage> + Unpin,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    if rows.is_empty() {
        return Ok(());
    }
    for row in rows {
        client.feed(PgWireBackendMessage::CopyData(row)).await?;
    }
    client.flush().await?;
    Ok(())
}

/// One committed change as COPY data rows.
fn change_data(schema: &SchemaRef, change: &sluice::TableChange) -> PgWireResult<Vec<CopyData>> {
    super::super::copy_out::encode(schema, &change_batches(schema, change)?, &CopyOptions::default())
}

/// One committed change as rows of `schema` (version, diff, columns).
fn change_batches(schema: &SchemaRef, change: &sluice::TableChange) -> PgWireResult<Vec<RecordBatch>> {
    let version = i64::try_from(change.version).map_err(|e| user_error("XX000", e.to_string()))?;
    let mut batches = Vec::new();
    for batch in &change.rows {
        let kind =
            batch.column_by_name("_change_type").ok_or_else(|| user_error("XX000", "a change without _change_type"))?;
        let kind = arrow::array::AsArray::as_string::<i32>(kind.as_ref());
        let diff: Vec<i64> = (0..batch.num_rows())
            .map(|i| if matches!(kind.value(i), "delete" | "update_preimage") { -1 } else { 1 })
            .collect();
        batches.push(with_version_and_diff(schema, batch, version, Some(diff))?);
    }
    Ok(batches)
}

/// `batch`'s columns named as `schema`'s table columns (cast to their types), after a version
/// column and a diff column (+1 when `diff` is None).
fn with_version_and_diff(
    schema: &SchemaRef,
    batch: &RecordBatch,
    version: i64,
    diff: Option<Vec<i64>>,
) -> PgWireResult<RecordBatch> {
    let rows = batch.num_rows();
    let diff = diff.unwrap_or_else(|| vec![1; rows]);
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(arrow::array::Int64Array::from(vec![version; rows])),
        Arc::new(arrow::array::Int64Array::from(diff)),
    ];
    for field in schema.fields().iter().skip(2) {
        let column = batch.column_by_name(field.name()).ok_or_else(|| {
            user_error(
                "55000",
                format!("column \"{}\" is gone from the subscribed table: the subscription ends", field.name()),
            )
        })?;
        let column = arrow::compute::cast(column, field.data_type()).map_err(|e| user_error("XX000", e.to_string()))?;
        columns.push(column);
    }
    RecordBatch::try_new(schema.clone(), columns).map_err(|e| user_error("XX000", e.to_string()))
}
