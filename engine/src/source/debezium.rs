//! Debezium change events (`format 'debezium'`): a record's value is Debezium's JSON envelope,
//! with or without its schema (`{"schema": ..., "payload": {...}}` or the payload alone); the
//! payload has `op` (`c` create, `u` update, `d` delete, `r` snapshot read, `t` truncate), `ts_ms`,
//! `before` and `after`. A bronze row keeps the record (topic, partition, offset, key, value) and
//! adds `op`, `ts_ms` and `image`: the row image as JSON text (`after`, or for a delete `before`,
//! or the record's key when the source table logs no old image), ready for `EXPAND JSON image`
//! and AUTO CDC (`APPLY AS DELETE WHEN op = 'd'`, sequenced by the record's offset, which orders
//! one key's events: Debezium keys records by the row's key, so one key stays in one partition).
//!
//! A tombstone (a record with a key and no value, which Debezium sends after a delete for log
//! compaction) carries no change: it becomes no row (its offset still counts as consumed). A value
//! that is not a Debezium envelope is a dead letter with the reason.

use serde_json::Value;

/// What a Debezium record means.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A change: its operation, its time (ms) and its row image (JSON text; None for a truncate).
    Change { op: String, ts_ms: Option<i64>, image: Option<String> },
    /// A tombstone: no change.
    Tombstone,
}

/// The payload of an envelope, or of a key (with or without its schema).
fn payload(value: &Value) -> &Value {
    match (value.get("schema"), value.get("payload")) {
        (Some(_), Some(payload)) => payload,
        _ => value,
    }
}

/// Reads one record's key and value.
pub fn decode(key: Option<&[u8]>, value: Option<&[u8]>) -> Result<Event, String> {
    let Some(value) = value else { return Ok(Event::Tombstone) };
    let envelope: Value =
        serde_json::from_slice(value).map_err(|e| format!("the value is not a Debezium JSON envelope: {e}"))?;
    let body = payload(&envelope);
    let op = body
        .get("op")
        .and_then(Value::as_str)
        .ok_or("the value is not a Debezium change event (no \"op\")")?
        .to_string();
    if !matches!(op.as_str(), "c" | "u" | "d" | "r" | "t") {
        return Err(format!("unknown Debezium operation \"{op}\" (expected c, u, d, r or t)"));
    }
    let ts_ms = body.get("ts_ms").and_then(Value::as_i64);
    let present = |name: &str| body.get(name).filter(|v| v.is_object());
    let image = match op.as_str() {
        "t" => None,
        "d" => match present("before") {
            Some(before) => Some(before.clone()),
            None => {
                let key = key.ok_or("a Debezium delete without its old row image or a key")?;
                let key: Value = serde_json::from_slice(key)
                    .map_err(|e| format!("the key of a Debezium delete is not JSON: {e}"))?;
                Some(payload(&key).clone())
            }
        },
        _ => Some(
            present("after")
                .ok_or_else(|| format!("a Debezium \"{op}\" event without its row image (\"after\")"))?
                .clone(),
        ),
    };
    Ok(Event::Change { op, ts_ms, image: image.map(|i| i.to_string()) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_envelopes_with_and_without_schema_and_tombstones() {
        let with_schema = br#"{"schema": {"type": "struct"}, "payload": {"before": null, "after": {"id": 1, "name": "a"}, "op": "c", "ts_ms": 5}}"#;
        assert_eq!(
            decode(Some(b"{\"id\": 1}"), Some(with_schema)).unwrap(),
            Event::Change { op: "c".into(), ts_ms: Some(5), image: Some(r#"{"id":1,"name":"a"}"#.into()) }
        );
        let delete = br#"{"before": {"id": 2, "name": "b"}, "after": null, "op": "d", "ts_ms": 6}"#;
        assert_eq!(
            decode(None, Some(delete)).unwrap(),
            Event::Change { op: "d".into(), ts_ms: Some(6), image: Some(r#"{"id":2,"name":"b"}"#.into()) }
        );
        // A delete without the old image takes the key's columns.
        let bare = br#"{"before": null, "after": null, "op": "d"}"#;
        let key = br#"{"schema": {}, "payload": {"id": 3}}"#;
        assert_eq!(
            decode(Some(key), Some(bare)).unwrap(),
            Event::Change { op: "d".into(), ts_ms: None, image: Some(r#"{"id":3}"#.into()) }
        );
        assert_eq!(decode(Some(key), None).unwrap(), Event::Tombstone);
    }

    #[test]
    fn refuses_what_is_not_an_envelope() {
        assert!(decode(None, Some(b"not json")).unwrap_err().contains("not a Debezium JSON envelope"));
        assert!(decode(None, Some(br#"{"id": 1}"#)).unwrap_err().contains("no \"op\""));
        assert!(decode(None, Some(br#"{"op": "x"}"#)).unwrap_err().contains("unknown Debezium operation"));
        assert!(decode(None, Some(br#"{"op": "u", "after": null}"#)).unwrap_err().contains("row image"));
    }
}
