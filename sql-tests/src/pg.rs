//! The same .slt files over the Postgres wire protocol: a `sluice serve` in-process on a free
//! loopback port, one tokio-postgres connection per file.
//!
//! Rows come back in binary (tokio-postgres' extended protocol) and are printed as the in-process
//! driver prints them (Arrow's display), so one expected result serves both: a value is decoded by
//! its Postgres type and formatted through a one-element Arrow array of the matching type.
//! Statements that prepare no rows (DDL, DML, several statements at once) go through the simple
//! query protocol. Records whose answer differs over the wire carry `skipif pgwire`.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, Date32Array, Float32Array, Float64Array, Time64MicrosecondArray, TimestampMicrosecondArray,
};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use postgres_protocol::types as wire;
use sqllogictest::{DBOutput, DefaultColumnType};
use tokio_postgres::types::{FromSql, Kind, Type};
use tokio_postgres::{Client, SimpleQueryMessage};

/// An error over the wire: the server's message and SQLSTATE.
#[derive(Debug)]
pub struct PgError {
    pub message: String,
    pub sqlstate: Option<String>,
}

impl std::fmt::Display for PgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PgError {}

impl From<tokio_postgres::Error> for PgError {
    fn from(e: tokio_postgres::Error) -> Self {
        match e.as_db_error() {
            Some(db) => PgError { message: db.message().to_string(), sqlstate: Some(db.code().code().to_string()) },
            None => PgError { message: e.to_string(), sqlstate: None },
        }
    }
}

fn failure(message: impl Into<String>) -> PgError {
    PgError { message: message.into(), sqlstate: None }
}

/// A fresh warehouse served over pgwire, and a client connected to it.
pub struct PgDb {
    client: Client,
    server: Option<sluice_server::pg::Server>,
    _dir: tempfile::TempDir,
}

impl PgDb {
    pub async fn new() -> Result<Self, PgError> {
        let dir = tempfile::tempdir().map_err(|e| failure(e.to_string()))?;
        let db =
            sluice::Database::open(dir.path().to_str().unwrap_or(".")).await.map_err(|e| failure(e.to_string()))?;
        let config = sluice_server::pg::ServerConfig {
            listen: "127.0.0.1:0".parse().map_err(|_| failure("bad address"))?,
            connections_max: 8,
            users: vec![],
            tls: None,
            // The .slt files attach fixtures from the repository with LOCATION.
            allowed_paths: vec![dir.path().to_path_buf(), std::path::PathBuf::from("/")],
            message_bytes_max: sluice_server::pg::socket::MESSAGE_BYTES_MAX_DEFAULT,
            ..Default::default()
        };
        let server = sluice_server::pg::serve(db, config).await.map_err(failure)?;
        let url = format!("host=127.0.0.1 port={} user=slt dbname=sluice", server.local_addr.port());
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
        tokio::spawn(connection);
        Ok(Self { client, server: Some(server), _dir: dir })
    }

    async fn rows(&self, sql: &str) -> Result<Option<DBOutput<DefaultColumnType>>, PgError> {
        let statement = match self.client.prepare(sql).await {
            Ok(statement) => statement,
            // Several statements, or one that cannot be prepared: the simple protocol runs it.
            Err(_) => return Ok(None),
        };
        // A `regtype`'s binary form is the type's OID, which only the server can name: such a
        // query is read as text, by the simple protocol.
        if statement.columns().is_empty() || statement.columns().iter().any(|c| *c.type_() == Type::REGTYPE) {
            return Ok(None);
        }
        let rows = self.client.query(&statement, &[]).await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let mut values = Vec::with_capacity(row.len());
            for (i, column) in row.columns().iter().enumerate() {
                let raw: Raw = row.try_get(i)?;
                values.push(display(column.type_(), raw.0)?);
            }
            out.push(values);
        }
        let types = statement.columns().iter().map(|c| column_type(c.type_())).collect();
        Ok(Some(DBOutput::Rows { types, rows: out }))
    }
}

fn column_type(t: &Type) -> DefaultColumnType {
    match *t {
        Type::INT2 | Type::INT4 | Type::INT8 => DefaultColumnType::Integer,
        Type::FLOAT4 | Type::FLOAT8 | Type::NUMERIC => DefaultColumnType::FloatingPoint,
        Type::TEXT | Type::VARCHAR => DefaultColumnType::Text,
        _ => DefaultColumnType::Any,
    }
}

/// A value's bytes, whatever its type.
struct Raw<'a>(Option<&'a [u8]>);

impl<'a> FromSql<'a> for Raw<'a> {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw(Some(raw)))
    }

    fn from_sql_null(_: &Type) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw(None))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// Microseconds from 1970 to 2000, Postgres' epoch.
const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;
const PG_EPOCH_DAYS: i32 = 10_957;

/// A value as the in-process driver prints it.
fn display(t: &Type, raw: Option<&[u8]>) -> Result<String, PgError> {
    let Some(raw) = raw else { return Ok("NULL".into()) };
    let text = value_text(t, raw).map_err(|e| failure(format!("cannot decode a {t} value: {e}")))?;
    Ok(if text.is_empty() { "(empty)".into() } else { text })
}

type DecodeResult = Result<String, Box<dyn std::error::Error + Sync + Send>>;

fn arrow_text(array: ArrayRef) -> DecodeResult {
    let options = FormatOptions::default().with_null("NULL");
    let formatter = ArrayFormatter::try_new(array.as_ref(), &options)?;
    Ok(formatter.value(0).to_string())
}

fn value_text(t: &Type, raw: &[u8]) -> DecodeResult {
    if let Kind::Array(element) = t.kind() {
        let array = wire::array_from_sql(raw)?;
        let mut parts = Vec::new();
        let mut values = array.values();
        while let Some(value) = fallible_iterator::FallibleIterator::next(&mut values)? {
            parts.push(match value {
                Some(v) => value_text(element, v)?,
                None => String::new(),
            });
        }
        return Ok(format!("[{}]", parts.join(", ")));
    }
    Ok(match *t {
        Type::BOOL => wire::bool_from_sql(raw)?.to_string(),
        Type::INT2 => wire::int2_from_sql(raw)?.to_string(),
        Type::INT4 => wire::int4_from_sql(raw)?.to_string(),
        Type::INT8 => wire::int8_from_sql(raw)?.to_string(),
        Type::OID => wire::oid_from_sql(raw)?.to_string(),
        Type::FLOAT4 => arrow_text(Arc::new(Float32Array::from(vec![wire::float4_from_sql(raw)?])))?,
        Type::FLOAT8 => arrow_text(Arc::new(Float64Array::from(vec![wire::float8_from_sql(raw)?])))?,
        Type::NUMERIC => numeric_text(raw)?,
        Type::DATE => arrow_text(Arc::new(Date32Array::from(vec![wire::date_from_sql(raw)? + PG_EPOCH_DAYS])))?,
        Type::TIME => arrow_text(Arc::new(Time64MicrosecondArray::from(vec![wire::time_from_sql(raw)?])))?,
        // As the in-process driver shows it: the stored text, PostgreSQL's output form.
        Type::TIMETZ => sluice::time_of_day::TimeTz::from_binary(raw)?.text(),
        Type::TIMESTAMP => arrow_text(Arc::new(TimestampMicrosecondArray::from(vec![
            wire::timestamp_from_sql(raw)? + PG_EPOCH_MICROS,
        ])))?,
        Type::TIMESTAMPTZ => arrow_text(Arc::new(
            TimestampMicrosecondArray::from(vec![wire::timestamp_from_sql(raw)? + PG_EPOCH_MICROS])
                .with_timezone("UTC"),
        ))?,
        Type::BYTEA => raw.iter().map(|b| format!("{b:02x}")).collect(),
        Type::UUID => {
            let bytes = wire::uuid_from_sql(raw)?;
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
        }
        Type::JSONB if raw.first() == Some(&1) => String::from_utf8_lossy(&raw[1..]).into_owned(),
        _ => String::from_utf8_lossy(raw).into_owned(),
    })
}

/// Postgres' binary NUMERIC: digit count, weight, sign, display scale, then base-10000 digits.
fn numeric_text(raw: &[u8]) -> DecodeResult {
    let word = |i: usize| -> Result<i16, String> {
        raw.get(i * 2..i * 2 + 2).map(|b| i16::from_be_bytes([b[0], b[1]])).ok_or_else(|| "short numeric".into())
    };
    let ndigits = word(0)? as usize;
    let weight = word(1)? as i32;
    let sign = word(2)? as u16;
    let dscale = word(3)? as usize;
    match sign {
        0xC000 => return Ok("NaN".into()),
        0xD000 => return Ok("inf".into()),
        0xF000 => return Ok("-inf".into()),
        _ => {}
    }
    let digits: Vec<i16> = (0..ndigits).map(|i| word(4 + i)).collect::<Result<_, _>>()?;
    let mut integer = String::new();
    for position in 0..=weight.max(0) {
        let digit = if weight < 0 { 0 } else { digits.get(position as usize).copied().unwrap_or(0) };
        if integer.is_empty() {
            integer = digit.to_string();
        } else {
            integer.push_str(&format!("{digit:04}"));
        }
    }
    let mut fraction = String::new();
    let mut position = weight + 1;
    while fraction.len() < dscale {
        let digit = if position < 0 { 0 } else { digits.get(position as usize).copied().unwrap_or(0) };
        fraction.push_str(&format!("{digit:04}"));
        position += 1;
    }
    fraction.truncate(dscale);
    let negative = if sign == 0x4000 { "-" } else { "" };
    Ok(if dscale > 0 { format!("{negative}{integer}.{fraction}") } else { format!("{negative}{integer}") })
}

#[async_trait::async_trait]
impl sqllogictest::AsyncDB for PgDb {
    type Error = PgError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<Self::ColumnType>, Self::Error> {
        if let Some(rows) = self.rows(sql).await? {
            return Ok(rows);
        }
        let messages = self.client.simple_query(sql).await?;
        let mut count = 0;
        let mut rows = Vec::new();
        let mut types = Vec::new();
        for message in messages {
            match message {
                SimpleQueryMessage::CommandComplete(n) => count = n,
                SimpleQueryMessage::RowDescription(columns) => types = vec![DefaultColumnType::Any; columns.len()],
                SimpleQueryMessage::Row(row) => {
                    rows.push((0..row.len()).map(|i| row.get(i).unwrap_or("NULL").to_string()).collect::<Vec<_>>())
                }
                _ => {}
            }
        }
        // Rows of a query read as text (see `rows`).
        if !types.is_empty() {
            return Ok(DBOutput::Rows { types, rows });
        }
        Ok(DBOutput::StatementComplete(count))
    }

    async fn shutdown(&mut self) {
        if let Some(server) = self.server.take() {
            server.stop();
        }
    }

    fn engine_name(&self) -> &str {
        "pgwire"
    }

    fn error_sql_state(err: &Self::Error) -> Option<String> {
        err.sqlstate.clone()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn numerics_print_with_their_scale() {
        // 12.30: 1 digit group before the point (12), one after (3000), scale 2.
        let raw = [0, 2, 0, 0, 0, 0, 0, 2, 0, 12, 0x0b, 0xb8];
        assert_eq!(super::numeric_text(&raw).unwrap(), "12.30");
        // -0.05: weight -1, digit 500, scale 2.
        let raw = [0, 1, 0xff, 0xff, 0x40, 0, 0, 2, 0x01, 0xf4];
        assert_eq!(super::numeric_text(&raw).unwrap(), "-0.05");
    }
}
