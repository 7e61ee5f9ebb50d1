//! The options of `CREATE SOURCE name FROM KAFKA (...)`.
//!
//! Sluice's own options (case-insensitive): `brokers` (or `bootstrap.servers`), `topics` (a comma
//! separated list) or `topic_pattern` (a regular expression over topic names), `format` (`json`,
//! `text`, `bytes` or `debezium`), `start` (`earliest` or `latest`, for partitions the table has no offset
//! for), and the micro-batch limits `batch_rows`, `batch_bytes` and `batch_ms`. Other options are
//! librdkafka properties, and only those on an allow-list ([`CLIENT_PROPERTIES`]: security and
//! authentication, batching and timeouts, client ids) are passed to the client; librdkafka checks
//! their values when the source is created. A client is untrusted: properties that load code or
//! run commands (`plugin.library.paths`, `ssl.engine.location`, `sasl.kerberos.kinit.cmd`, ...) or
//! reach other hosts on the server's behalf are refused, and properties naming files
//! ([`FILE_PROPERTIES`]) are accepted only from the warehouse owner, for files inside the allowed
//! folders (checked by [`crate::paths`] when the source is created).

use std::collections::BTreeMap;

use crate::error::{Error, Result};

/// A micro-batch closes at the first of these limits.
pub const BATCH_ROWS_DEFAULT: usize = 100_000;
pub const BATCH_BYTES_DEFAULT: usize = 32 * 1024 * 1024;
pub const BATCH_MS_DEFAULT: u64 = 500;

/// How record values (and keys) are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadFormat {
    /// Text that must be valid JSON (else the record is a dead letter).
    Json,
    /// Text that must be valid UTF-8.
    Text,
    /// Raw bytes (`bytea`).
    Bytes,
    /// Debezium's change events (JSON), with the operation and row image as columns (see
    /// [`super::debezium`]).
    Debezium,
}

impl PayloadFormat {
    pub fn as_str(&self) -> &'static str {
        match self {
            PayloadFormat::Json => "json",
            PayloadFormat::Text => "text",
            PayloadFormat::Bytes => "bytes",
            PayloadFormat::Debezium => "debezium",
        }
    }
}

/// Where a partition without a stored offset starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAt {
    Earliest,
    Latest,
}

/// Which topics a source reads.
#[derive(Debug, Clone, PartialEq)]
pub enum Topics {
    List(Vec<String>),
    Pattern(String),
}

/// The limits that close a micro-batch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchLimits {
    pub rows: usize,
    pub bytes: usize,
    pub ms: u64,
}

/// A Kafka source's options, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct KafkaOptions {
    pub brokers: String,
    pub topics: Topics,
    pub format: PayloadFormat,
    pub start: StartAt,
    pub batch: BatchLimits,
    /// librdkafka properties, as given.
    pub client: BTreeMap<String, String>,
}

fn invalid(message: String) -> Error {
    Error::data("22023", message)
}

fn positive<T: std::str::FromStr + PartialOrd + Default>(key: &str, value: &str) -> Result<T> {
    match value.trim().parse::<T>() {
        Ok(n) if n > T::default() => Ok(n),
        _ => Err(invalid(format!("option {key} must be a positive integer, not '{value}'"))),
    }
}

/// librdkafka properties a client may set.
pub const CLIENT_PROPERTIES: &[&str] = &[
    // Identity.
    "client.id",
    "client.rack",
    "group.instance.id",
    // Security and authentication (values, not files).
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "ssl.ca.pem",
    "ssl.certificate.pem",
    "ssl.key.pem",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "enable.ssl.certificate.verification",
    "ssl.cipher.suites",
    "ssl.curves.list",
    "ssl.sigalgs.list",
    // Batching, fetching and timeouts.
    "fetch.min.bytes",
    "fetch.max.bytes",
    "fetch.wait.max.ms",
    "fetch.error.backoff.ms",
    "max.partition.fetch.bytes",
    "fetch.message.max.bytes",
    "receive.message.max.bytes",
    "message.max.bytes",
    "queued.min.messages",
    "queued.max.messages.kbytes",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "max.poll.interval.ms",
    "socket.timeout.ms",
    "socket.keepalive.enable",
    "socket.connection.setup.timeout.ms",
    "connections.max.idle.ms",
    "reconnect.backoff.ms",
    "reconnect.backoff.max.ms",
    "retry.backoff.ms",
    "retry.backoff.max.ms",
    "metadata.max.age.ms",
    "topic.metadata.refresh.interval.ms",
    "isolation.level",
    "check.crcs",
    "api.version.request",
    "broker.version.fallback",
    "allow.auto.create.topics",
    "partition.assignment.strategy",
    "client.dns.lookup",
];

/// librdkafka properties that name files the client reads: the owner's only, inside the allowed
/// folders.
pub const FILE_PROPERTIES: &[&str] = &[
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.crl.location",
    "ssl.keystore.location",
    "sasl.kerberos.keytab",
];

/// Properties the ingest loop sets itself (it keeps offsets in the table's log, not in Kafka).
const RESERVED: [&str; 4] =
    ["enable.auto.commit", "enable.auto.offset.store", "auto.offset.reset", "enable.partition.eof"];

impl KafkaOptions {
    pub fn parse(options: &BTreeMap<String, String>) -> Result<Self> {
        let mut brokers = None;
        let mut topics = None;
        let mut pattern = None;
        let mut format = PayloadFormat::Json;
        let mut start = StartAt::Earliest;
        let mut batch = BatchLimits { rows: BATCH_ROWS_DEFAULT, bytes: BATCH_BYTES_DEFAULT, ms: BATCH_MS_DEFAULT };
        let mut client = BTreeMap::new();
        for (key, value) in options {
            match key.to_ascii_lowercase().as_str() {
                "brokers" | "bootstrap.servers" => brokers = Some(value.trim().to_string()),
                "topics" | "topic" | "subscribe" => {
                    let list: Vec<String> =
                        value.split(',').map(|t| t.trim().to_string()).filter(|t| !t.is_empty()).collect();
                    if list.is_empty() {
                        return Err(invalid("option topics names no topic".into()));
                    }
                    topics = Some(list);
                }
                "topic_pattern" | "subscribepattern" => {
                    regex::Regex::new(value)
                        .map_err(|e| invalid(format!("option topic_pattern is not a valid regular expression: {e}")))?;
                    pattern = Some(value.clone());
                }
                "format" => {
                    format = match value.to_ascii_lowercase().as_str() {
                        "json" => PayloadFormat::Json,
                        "text" | "string" => PayloadFormat::Text,
                        "bytes" | "binary" | "bytea" => PayloadFormat::Bytes,
                        "debezium" => PayloadFormat::Debezium,
                        other => {
                            return Err(invalid(format!(
                                "option format must be 'json', 'text', 'bytes' or 'debezium', not '{other}'"
                            )))
                        }
                    }
                }
                "start" | "startingoffsets" => {
                    start = match value.to_ascii_lowercase().as_str() {
                        "earliest" => StartAt::Earliest,
                        "latest" => StartAt::Latest,
                        other => {
                            return Err(invalid(format!("option start must be 'earliest' or 'latest', not '{other}'")))
                        }
                    }
                }
                "batch_rows" => batch.rows = positive(key, value)?,
                "batch_bytes" => batch.bytes = positive(key, value)?,
                "batch_ms" => batch.ms = positive(key, value)?,
                lower if RESERVED.contains(&lower) => {
                    return Err(invalid(format!(
                        "option {key} is set by Sluice (offsets are kept in the table's log, exactly once)"
                    )))
                }
                lower if CLIENT_PROPERTIES.contains(&lower) || FILE_PROPERTIES.contains(&lower) => {
                    client.insert(lower.to_string(), value.clone());
                }
                _ => {
                    return Err(Error::PermissionDenied(format!(
                        "option {key} is not allowed for a Kafka source (allowed: Sluice's options, and the librdkafka properties {}; {} from the warehouse owner)",
                        CLIENT_PROPERTIES.join(", "),
                        FILE_PROPERTIES.join(", ")
                    )))
                }
            }
        }
        let brokers = brokers
            .filter(|b| !b.is_empty())
            .ok_or_else(|| invalid("a Kafka source needs option brokers ('host:port,...')".into()))?;
        let topics = match (topics, pattern) {
            (Some(list), None) => Topics::List(list),
            (None, Some(pattern)) => Topics::Pattern(pattern),
            (Some(_), Some(_)) => return Err(invalid("give either topics or topic_pattern, not both".into())),
            (None, None) => return Err(invalid("a Kafka source needs option topics or topic_pattern".into())),
        };
        Ok(Self { brokers, topics, format, start, batch, client })
    }

    /// The files the client properties name (property, path), to be checked against the caller's
    /// rights.
    pub fn files(&self) -> impl Iterator<Item = (&str, &str)> {
        self.client
            .iter()
            .filter(|(key, _)| FILE_PROPERTIES.contains(&key.as_str()))
            .map(|(key, value)| (key.as_str(), value.as_str()))
    }

    /// Whether a topic belongs to the source (the pattern compiled once, checked at parse time).
    pub fn topic_matcher(&self) -> impl Fn(&str) -> bool + '_ {
        let pattern = match &self.topics {
            Topics::Pattern(pattern) => regex::Regex::new(pattern).ok(),
            Topics::List(_) => None,
        };
        move |topic| match (&self.topics, &pattern) {
            (Topics::List(list), _) => list.iter().any(|t| t == topic),
            (Topics::Pattern(_), Some(regex)) => regex.is_match(topic),
            (Topics::Pattern(_), None) => false,
        }
    }

    /// The topics option as shown in `sluice.sources`.
    pub fn topics_text(&self) -> String {
        match &self.topics {
            Topics::List(list) => list.join(","),
            Topics::Pattern(pattern) => format!("pattern {pattern}"),
        }
    }
}

/// Options shown back to users: secrets masked.
pub fn shown_options(options: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    options
        .iter()
        .map(|(k, v)| {
            let lower = k.to_ascii_lowercase();
            let secret = ["password", "secret", "token", "key.pem", "jaas"].iter().any(|s| lower.contains(s));
            (k.clone(), if secret { "********".to_string() } else { v.clone() })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn parses_and_checks_options() {
        let parsed = KafkaOptions::parse(&options(&[
            ("brokers", "a:9092"),
            ("topics", "x, y"),
            ("format", "text"),
            ("start", "latest"),
            ("batch_rows", "10"),
            ("security.protocol", "plaintext"),
        ]))
        .unwrap();
        assert_eq!(parsed.topics, Topics::List(vec!["x".into(), "y".into()]));
        assert_eq!(parsed.format, PayloadFormat::Text);
        assert_eq!(parsed.start, StartAt::Latest);
        assert_eq!(parsed.batch.rows, 10);
        assert_eq!(parsed.client.get("security.protocol").map(String::as_str), Some("plaintext"));
        let matches = parsed.topic_matcher();
        assert!(matches("y") && !matches("z"));

        let pattern = KafkaOptions::parse(&options(&[("brokers", "a"), ("topic_pattern", "^events\\..*")])).unwrap();
        let matches = pattern.topic_matcher();
        assert!(matches("events.orders") && !matches("orders"));

        for (bad, message) in [
            (options(&[("topics", "x")]), "brokers"),
            (options(&[("brokers", "a")]), "topics or topic_pattern"),
            (options(&[("brokers", "a"), ("topics", "x"), ("format", "xml")]), "format"),
            (options(&[("brokers", "a"), ("topics", "x"), ("batch_rows", "0")]), "positive"),
            (options(&[("brokers", "a"), ("topic_pattern", "(")]), "regular expression"),
            (options(&[("brokers", "a"), ("topics", "x"), ("enable.auto.commit", "true")]), "set by Sluice"),
            (options(&[("brokers", "a"), ("topics", "x"), ("plugin.library.paths", "/tmp/x.so")]), "not allowed"),
            (options(&[("brokers", "a"), ("topics", "x"), ("ssl.engine.location", "/tmp/x.so")]), "not allowed"),
            (options(&[("brokers", "a"), ("topics", "x"), ("sasl.kerberos.kinit.cmd", "touch /tmp/x")]), "not allowed"),
        ] {
            let err = KafkaOptions::parse(&bad).unwrap_err().to_string();
            assert!(err.contains(message), "{err}");
        }
        let shown = shown_options(&options(&[("sasl.password", "p"), ("brokers", "a")]));
        assert_eq!(shown["sasl.password"], "********");
        assert_eq!(shown["brokers"], "a");
    }
}
