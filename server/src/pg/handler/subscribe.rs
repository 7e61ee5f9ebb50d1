//! `COPY (SUBSCRIBE [TO] t [WITH (SNAPSHOT = false)]) TO STDOUT`: follows a table over pgwire, in
//! Materialize's shape: every row carries the table version it belongs to and a diff (+1 for a
//! row that arrived, -1 for one that left), first t's rows as of the version the subscription
//! starts at (unless SNAPSHOT = false), then each committed change as it commits, until the
//! client cancels it or goes away. psql and any driver's COPY OUT can follow a table live. (A
//! client that goes away is noticed at the next change sent to it.)
//!
//! The snapshot is read through the session like any query (so the role needs to read t), at the
//! version just before the subscription's first, so no commit is missed or seen twice.

use datafusion::sql::sqlparser::ast::ObjectName;
use pgwire::messages::copy::CopyOutResponse;

use super::*;

/// The columns every subscription row starts with.
const VERSION_COLUMN: &str = "version";
const DIFF_COLUMN: &str = "diff";

impl Connection {
    /// Serves the subscription on this connection until the client cancels it (57014) or goes
    /// away. The COPY messages are sent and flushed here, as each change commits (a COPY
    /// response stream would be flushed only at its end).
    pub(super) async fn subscribe<C>(
        &self,
        client: &mut C,
        table: &ObjectName,
        snapshot: bool,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let name = sluice::sql::names::table_name(table).map_err(|e| encode::error(&e))?;
        let qualified =
            format!("{}.{}", sluice::sql::names::quoted(&name.schema), sluice::sql::names::quoted(&name.name));
        let mut subscription = self.server.db.subscribe(&qualified, None).await.map_err(|e| encode::error(&e))?;
        let version = i64::try_from(subscription.next_version().saturating_sub(1))
            .map_err(|e| user_error("XX000", e.to_string()))?;
        let limit = if snapshot { "" } else { " LIMIT 0" };
        let query = format!("SELECT * FROM {qualified} VERSION AS OF {version}{limit}");
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
        for batch in &batches {
            first.push(with_version_and_diff(&schema, batch, version, None)?);
        }
        let initial = super::super::copy_out::encode(&schema, &first, &CopyOptions::default())?;
        let columns = schema.fields().len();
        let width = i16::try_from(columns).map_err(|_| user_error("54011", "too many columns to subscribe to"))?;
        let header = CopyOutResponse::new(0, width, vec![0; columns]);
        client.send(PgWireBackendMessage::CopyOutResponse(header)).await?;
        send_rows(client, initial).await?;
        let cancel = super::super::cancel_receiver(client).await;
        let cancelled = async {
            match cancel {
                Some(receiver) => {
                    let _ = receiver.await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::pin!(cancelled);
        loop {
            tokio::select! {
                change = subscription.next() => {
                    let change = change.map_err(|e| encode::error(&e))?;
                    send_rows(client, change_data(&schema, &change)?).await?;
                }
                _ = &mut cancelled => {
                    return Err(user_error("57014", "canceling statement due to user request"));
                }
            }
        }
    }
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
    super::super::copy_out::encode(schema, &batches, &CopyOptions::default())
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
