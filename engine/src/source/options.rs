//! The options of `CREATE SOURCE name FROM KAFKA (...)`.
//!
//! Sluice's own options (case-insensitive): `brokers` (or `bootstrap.servers`), `topics` (a comma
//! separated list) or `topic_pattern` (a regular expression over topic names), `format` (`json`,
//! `text` or `bytes`), `start` (`earliest` or `latest`, for partitions the table has no offset
//! for), and the micro-batch limits `batch_rows`, `batch_bytes` and `batch_ms`. Every other
//! option is a librdkafka property (`security.protocol`, `sasl.username`, `client.id`, ...),
//! passed to the client as given; librdkafka checks them when the source is created.

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
}

impl PayloadFormat {
    pub fn as_str(&self) -> &'static str {
        match self {
            PayloadFormat::Json => "json",
            PayloadFormat::Text => "text",
            PayloadFormat::Bytes => "bytes",
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
                        other => {
                            return Err(invalid(format!(
                                "option format must be 'json', 'text' or 'bytes', not '{other}'"
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
                _ => {
                    client.insert(key.clone(), value.clone());
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
        ] {
            let err = KafkaOptions::parse(&bad).unwrap_err().to_string();
            assert!(err.contains(message), "{err}");
        }
        let shown = shown_options(&options(&[("sasl.password", "p"), ("brokers", "a")]));
        assert_eq!(shown["sasl.password"], "********");
        assert_eq!(shown["brokers"], "a");
    }
}
