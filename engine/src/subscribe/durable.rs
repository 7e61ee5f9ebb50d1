//! Durable subscriptions: a consumer's place in one table's changes, kept in the catalog so that
//! it survives restarts and reconnects.
//!
//! ```sql
//! CREATE SUBSCRIPTION s FROM t [WITH (SNAPSHOT = false)];   -- at t's latest version V
//! DECLARE c CURSOR FOR SUBSCRIBE TO SUBSCRIPTION s;         -- or COPY (SUBSCRIBE TO SUBSCRIPTION s) TO STDOUT
//! FETCH 100 FROM c;                                         -- version, diff, t's columns
//! ALTER SUBSCRIPTION s ACKNOWLEDGE VERSION 42;              -- every row up to version 42 is done
//! DROP SUBSCRIPTION s;
//! ```
//!
//! A reader of the subscription gets t's rows as of V (as inserts at version V, unless SNAPSHOT =
//! false), then every committed change after V, version by version, and after a restart or a
//! reconnect starts again after the newest version acknowledged: nothing acknowledged is sent
//! again and nothing after it is skipped. Acknowledging is the consumer's promise that it has
//! processed every row up to that version (rows come in version order, so a version is complete
//! once a row of a later one arrived); acknowledgements only move forward, and one beyond the
//! table's latest version is refused (22023). An acknowledgement inside a transaction block takes
//! effect at once, as every streaming statement does.
//!
//! While a subscription has not read a version, the table keeps what reading it needs:
//! [`sluice_storage::table::Table::retain_changes_from`] makes VACUUM keep the files those
//! commits removed or wrote as change data, and log cleanup keep the commits. Readers outside
//! Sluice (Spark's VACUUM) do not know about it.

use datafusion::sql::sqlparser::ast::ObjectName;

use crate::catalog::{CatalogState, SubscriptionEntry, TableEntry};
use crate::error::{Error, Result};
use crate::sql::context::{QueryContext, StatementResult};

/// The subscription `name` in `state`.
pub(crate) fn find<'a>(state: &'a CatalogState, name: &str) -> Result<&'a SubscriptionEntry> {
    state.subscriptions.get(name).ok_or_else(|| Error::UndefinedObject { kind: "subscription", name: name.to_string() })
}

/// The table a subscription follows.
pub(crate) fn table_of<'a>(state: &'a CatalogState, subscription: &SubscriptionEntry) -> Result<&'a TableEntry> {
    state.table_by_id(&subscription.table_id).ok_or_else(|| {
        Error::UndefinedTable(format!("the table of subscription {} (it was dropped)", subscription.name))
    })
}

/// `CREATE SUBSCRIPTION [IF NOT EXISTS] name FROM t [WITH (SNAPSHOT = bool)]`.
pub(crate) async fn create(
    cx: &QueryContext,
    name: &str,
    table: &ObjectName,
    snapshot: bool,
    if_not_exists: bool,
) -> Result<StatementResult> {
    let (entry, handle, _) = cx.resolve_table(table).await?;
    if crate::catalog::is_temporary_schema(&entry.schema) {
        return Err(Error::NotSupported(format!(
            "a durable subscription to the temporary table {} (it ends with the session)",
            entry.name
        )));
    }
    let version = handle.snapshot().await?.version();
    let subscription = SubscriptionEntry {
        name: name.to_string(),
        table_id: entry.id.clone(),
        created_version: version,
        snapshot,
        acknowledged: None,
        created_ms: crate::util::now_ms(),
        acknowledged_ms: None,
    };
    let (state, _created) = cx
        .db
        .catalog
        .update(|state| {
            if state.subscriptions.contains_key(name) {
                return if if_not_exists {
                    Ok(false)
                } else {
                    Err(Error::DuplicateObject { kind: "subscription", name: name.to_string() })
                };
            }
            if state.table_by_id(&entry.id).is_none() {
                return Err(Error::UndefinedTable(entry.qualified_name()));
            }
            state.subscriptions.insert(name.to_string(), subscription.clone());
            Ok(true)
        })
        .await?;
    handle.retain_changes_from(state.changes_needed_from(&entry.id));
    Ok(StatementResult::command("CREATE SUBSCRIPTION"))
}

/// `ALTER SUBSCRIPTION name ACKNOWLEDGE [VERSION] version`.
pub(crate) async fn acknowledge(cx: &QueryContext, name: &str, version: u64) -> Result<StatementResult> {
    let state = cx.db.catalog.refresh().await?;
    let subscription = find(&state, name)?;
    let entry = table_of(&state, subscription)?.clone();
    let handle = cx.db.open_table(&entry).await?;
    let latest = handle.snapshot().await?.version();
    if version > latest {
        return Err(Error::data(
            "22023",
            format!(
                "cannot acknowledge version {version} of {}: its latest version is {latest}",
                entry.qualified_name()
            ),
        ));
    }
    let now = crate::util::now_ms();
    let (state, ()) = cx
        .db
        .catalog
        .update(|state| {
            let subscription = state
                .subscriptions
                .get_mut(name)
                .ok_or_else(|| Error::UndefinedObject { kind: "subscription", name: name.to_string() })?;
            // Only forward; acknowledging the snapshot's version or later ends the snapshot.
            let floor =
                if subscription.snapshot { subscription.created_version } else { subscription.created_version + 1 };
            if version >= floor && subscription.acknowledged.is_none_or(|done| version > done) {
                subscription.acknowledged = Some(version);
                subscription.acknowledged_ms = Some(now);
            }
            Ok(())
        })
        .await?;
    handle.retain_changes_from(state.changes_needed_from(&entry.id));
    Ok(StatementResult::command("ALTER SUBSCRIPTION"))
}

/// `DROP SUBSCRIPTION [IF EXISTS] name`.
pub(crate) async fn drop(cx: &QueryContext, name: &str, if_exists: bool) -> Result<StatementResult> {
    if if_exists && !cx.db.catalog.current().subscriptions.contains_key(name) {
        cx.notice(format!("subscription \"{name}\" does not exist, skipping"));
    }
    let (state, dropped) = cx
        .db
        .catalog
        .update(|state| match state.subscriptions.remove(name) {
            Some(dropped) => Ok(Some(dropped)),
            None if if_exists => Ok(None),
            None => Err(Error::UndefinedObject { kind: "subscription", name: name.to_string() }),
        })
        .await?;
    if let Some(entry) = dropped.and_then(|dropped| state.table_by_id(&dropped.table_id)) {
        cx.db.open_table(entry).await?.retain_changes_from(state.changes_needed_from(&entry.id));
    }
    Ok(StatementResult::command("DROP SUBSCRIPTION"))
}
