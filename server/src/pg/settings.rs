//! Session settings: what `SET`, `SHOW` and `RESET` read and write, and which changes are
//! reported to the client (`ParameterStatus`), with the values real clients check for.
//!
//! Settings are per connection. Most are kept only so that clients can read back what they set
//! (`extra_float_digits`, `application_name`, ...); `statement_timeout` limits how long a
//! statement runs, and `TimeZone` is the zone `current_setting('TimeZone')` reports.

use std::collections::BTreeMap;

/// The version clients are told, in the form Postgres clients parse.
pub const SERVER_VERSION: &str = concat!("16.6 (Sluice ", env!("CARGO_PKG_VERSION"), ")");
/// `server_version_num` for the version above.
pub const SERVER_VERSION_NUM: &str = "160006";

/// The full `version()` string.
pub fn version_string() -> String {
    format!(
        "PostgreSQL 16.6 (Sluice {}) on {}-unknown-linux-gnu, compiled by rustc, 64-bit",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::ARCH
    )
}

/// Settings reported to the client whenever they change (as Postgres does).
pub const REPORTED: &[&str] = &[
    "application_name",
    "client_encoding",
    "DateStyle",
    "IntervalStyle",
    "is_superuser",
    "server_encoding",
    "server_version",
    "session_authorization",
    "standard_conforming_strings",
    "TimeZone",
    "integer_datetimes",
];

fn defaults() -> Vec<(&'static str, String)> {
    vec![
        ("application_name", String::new()),
        ("client_encoding", "UTF8".into()),
        ("server_encoding", "UTF8".into()),
        ("DateStyle", "ISO, MDY".into()),
        ("IntervalStyle", "postgres".into()),
        ("TimeZone", "UTC".into()),
        ("standard_conforming_strings", "on".into()),
        ("integer_datetimes", "on".into()),
        ("is_superuser", "on".into()),
        ("session_authorization", "sluice".into()),
        ("server_version", SERVER_VERSION.into()),
        ("server_version_num", SERVER_VERSION_NUM.into()),
        ("extra_float_digits", "1".into()),
        ("search_path", "\"$user\", public".into()),
        ("statement_timeout", "0".into()),
        ("lock_timeout", "0".into()),
        ("idle_in_transaction_session_timeout", "0".into()),
        // What Sluice provides by default (sluice::staging): one snapshot per transaction block,
        // writes checked at COMMIT (first committer wins); SERIALIZABLE when asked for.
        ("transaction_isolation", PROVIDED_ISOLATION.into()),
        ("default_transaction_isolation", PROVIDED_ISOLATION.into()),
        ("transaction_read_only", "off".into()),
        ("default_transaction_read_only", "off".into()),
        ("bytea_output", "hex".into()),
        ("max_identifier_length", "63".into()),
        ("lc_collate", "C.UTF-8".into()),
        ("lc_ctype", "C.UTF-8".into()),
        ("lc_messages", "C.UTF-8".into()),
        ("lc_monetary", "C.UTF-8".into()),
        ("lc_numeric", "C.UTF-8".into()),
        ("lc_time", "C.UTF-8".into()),
        ("jit", "off".into()),
        ("max_connections", "100".into()),
        ("block_size", "8192".into()),
        ("datestyle", "ISO, MDY".into()),
    ]
}

/// One connection's settings. Names are matched ignoring case; the canonical spelling is kept.
#[derive(Debug, Clone)]
pub struct Settings {
    values: BTreeMap<String, (String, String)>,
}

impl Default for Settings {
    fn default() -> Self {
        let mut values = BTreeMap::new();
        for (name, value) in defaults() {
            values.insert(name.to_lowercase(), (name.to_string(), value));
        }
        Self { values }
    }
}

impl Settings {
    /// The settings of a session whose client sent `startup` in its startup packet: as in
    /// PostgreSQL, a known setting there (`TimeZone`, `DateStyle`, `extra_float_digits`,
    /// `application_name`, ...) is the session's value from the start. Values PostgreSQL would
    /// refuse are ignored.
    pub fn from_startup(startup: &std::collections::HashMap<String, String>) -> Self {
        let mut settings = Settings::default();
        // `options=-c name=value --name=value` (libpq's PGOPTIONS and PGTZ) come after the
        // parameters sent by name, and win over them, as in PostgreSQL.
        let options = startup.iter().find(|(name, _)| name.as_str() == "options").map(|(_, v)| v.as_str());
        let from_options = options.map(command_line_settings).unwrap_or_default();
        let named = startup.iter().filter(|(name, _)| name.as_str() != "options");
        for (name, value) in named.chain(from_options.iter().map(|(n, v)| (n, v))) {
            let known = settings.values.contains_key(&canonical_key(name));
            let fixed = matches!(
                canonical_key(name).as_str(),
                "server_version"
                    | "server_version_num"
                    | "server_encoding"
                    | "is_superuser"
                    | "session_authorization"
                    | "integer_datetimes"
                    | "max_identifier_length"
                    | "max_connections"
                    | "block_size"
                    | "lc_collate"
                    | "lc_ctype"
            );
            if known && !fixed && check(name, value).is_ok() {
                settings.set(name, value);
            }
        }
        settings
    }

    /// The value of a setting, if it exists.
    pub fn get(&self, name: &str) -> Option<&str> {
        let key = canonical_key(name);
        self.values.get(&key).map(|(_, v)| v.as_str())
    }

    /// Sets a value; returns the canonical name if the change must be reported to the client.
    pub fn set(&mut self, name: &str, value: &str) -> Option<String> {
        let key = canonical_key(name);
        let mut value = normalize_value(&key, value);
        if key == "datestyle" {
            // A style or an order alone keeps the other part (`SET DateStyle = 'SQL'`).
            let previous = self.values.get(&key).map(|(_, v)| v.as_str()).unwrap_or("ISO, MDY");
            value = date_style(previous, &value).unwrap_or(value);
        }
        let canonical = self.values.get(&key).map(|(n, _)| n.clone()).unwrap_or_else(|| name.to_string());
        self.values.insert(key.clone(), (canonical.clone(), value));
        if key == "datestyle" {
            let v = self.values.get("datestyle").map(|(_, v)| v.clone()).unwrap_or_default();
            self.values.insert("datestyle".into(), ("DateStyle".into(), v));
        }
        REPORTED.iter().any(|r| r.eq_ignore_ascii_case(&canonical)).then(|| canonical_reported(&canonical))
    }

    /// Restores a setting to its default; returns the reported name as `set` does.
    pub fn reset(&mut self, name: &str) -> Option<String> {
        let key = canonical_key(name);
        let default = defaults().into_iter().find(|(n, _)| n.eq_ignore_ascii_case(&key)).map(|(_, v)| v);
        match default {
            Some(value) => self.set(name, &value),
            None => {
                self.values.remove(&key);
                None
            }
        }
    }

    /// Restores every setting.
    pub fn reset_all(&mut self) {
        *self = Settings::default();
    }

    /// Every setting, as `(name, value)` sorted by name.
    pub fn all(&self) -> Vec<(String, String)> {
        self.values.values().map(|(n, v)| (n.clone(), v.clone())).collect()
    }

    /// The statement timeout in milliseconds (0: none).
    pub fn statement_timeout_ms(&self) -> u64 {
        parse_duration_ms(self.get("statement_timeout").unwrap_or("0")).unwrap_or(0)
    }

    /// How long a session may sit idle inside a transaction block before the server closes it
    /// (0: forever), in milliseconds.
    pub fn idle_in_transaction_timeout_ms(&self) -> u64 {
        parse_duration_ms(self.get("idle_in_transaction_session_timeout").unwrap_or("0")).unwrap_or(0)
    }
}

/// The settings in a startup packet's `options` (`-c name=value`, `-cname=value`,
/// `--name=value`; `\ ` is a space inside a value).
fn command_line_settings(options: &str) -> Vec<(String, String)> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut chars = options.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => word.extend(chars.next()),
            c if c.is_whitespace() => words.extend((!word.is_empty()).then(|| std::mem::take(&mut word))),
            c => word.push(c),
        }
    }
    words.extend((!word.is_empty()).then_some(word));
    let mut settings = Vec::new();
    let mut words = words.into_iter();
    while let Some(word) = words.next() {
        let assignment = match word.as_str() {
            "-c" => words.next(),
            other => other.strip_prefix("-c").or_else(|| other.strip_prefix("--")).map(str::to_string),
        };
        if let Some((name, value)) = assignment.as_deref().and_then(|a| a.split_once('=')) {
            settings.push((name.replace('-', "_"), value.to_string()));
        }
    }
    settings
}

/// Refuses a value PostgreSQL would refuse for a setting (SQLSTATE 22023), with its message.
pub fn check(name: &str, value: &str) -> Result<(), String> {
    let key = canonical_key(name);
    if matches!(key.as_str(), "transaction_isolation" | "default_transaction_isolation") {
        // Checked as written: a level reads back as the one Sluice provides for it.
        return check_isolation(&key, value);
    }
    let value = normalize_value(&key, value);
    if value.eq_ignore_ascii_case("default") {
        return Ok(());
    }
    let valid = match key.as_str() {
        "datestyle" => date_style("ISO, MDY", &value).is_some(),
        "timezone" => valid_time_zone(&value),
        "statement_timeout" | "idle_in_transaction_session_timeout" => parse_duration_ms(&value).is_some(),
        _ => true,
    };
    if valid {
        Ok(())
    } else {
        let name = canonical_reported(name.trim().trim_matches('"'));
        Err(format!("invalid value for parameter \"{name}\": \"{value}\""))
    }
}

/// The isolation levels PostgreSQL accepts for `transaction_isolation` and
/// `default_transaction_isolation`, in the order its hint lists them.
const ISOLATION_LEVELS: [&str; 4] = ["serializable", "repeatable read", "read committed", "read uncommitted"];

/// Refuses what PostgreSQL refuses as an isolation level (any case, one blank between words).
fn check_isolation(name: &str, value: &str) -> Result<(), String> {
    let value = value.trim().trim_matches('\'').trim_matches('"');
    if value.eq_ignore_ascii_case("default") || ISOLATION_LEVELS.iter().any(|l| l.eq_ignore_ascii_case(value)) {
        return Ok(());
    }
    Err(format!("invalid value for parameter \"{name}\": \"{value}\""))
}

/// `DateStyle` as PostgreSQL shows it after `value` is set over `previous`: the output style
/// (`ISO`, `SQL`, `Postgres`, `German`) and the order of day and month (`MDY`, `DMY`, `YMD`), each
/// kept from `previous` when `value` names only the other (German alone means DMY). None for a
/// word PostgreSQL does not know, or two styles or two orders.
fn date_style(previous: &str, value: &str) -> Option<String> {
    let split = |text: &str| -> Vec<String> {
        text.split(|c: char| c == ',' || c.is_whitespace())
            .filter(|w| !w.is_empty())
            .map(str::to_ascii_uppercase)
            .collect()
    };
    let (mut style, mut order) = (None, None);
    for word in split(value) {
        let (style_word, order_word) = match word.as_str() {
            "ISO" => (Some("ISO"), None),
            "SQL" => (Some("SQL"), None),
            "POSTGRES" => (Some("Postgres"), None),
            "GERMAN" => (Some("German"), None),
            "DMY" | "EURO" | "EUROPEAN" => (None, Some("DMY")),
            "MDY" | "US" | "NONEURO" | "NONEUROPEAN" => (None, Some("MDY")),
            "YMD" => (None, Some("YMD")),
            "DEFAULT" => (Some("ISO"), Some("MDY")),
            _ => return None,
        };
        if (style.is_some() && style_word.is_some() && style != style_word)
            || (order.is_some() && order_word.is_some() && order != order_word)
        {
            return None;
        }
        style = style.or(style_word);
        order = order.or(order_word);
    }
    let old = split(previous);
    let old_style = old.first().map(String::as_str).unwrap_or("ISO");
    let style = style.unwrap_or(match old_style {
        "SQL" => "SQL",
        "POSTGRES" => "Postgres",
        "GERMAN" => "German",
        _ => "ISO",
    });
    let order = match order {
        Some(order) => order,
        None if style == "German" => "DMY",
        None => match old.get(1).map(String::as_str) {
            Some("DMY") => "DMY",
            Some("YMD") => "YMD",
            _ => "MDY",
        },
    };
    Some(format!("{style}, {order}"))
}

/// A zone name the IANA database knows (in any case, as PostgreSQL matches it), a UTC offset
/// (`+02:00`), or hours east of UTC as a number (`SET TIME ZONE -7`).
fn valid_time_zone(value: &str) -> bool {
    use std::str::FromStr;
    if value.parse::<f64>().is_ok_and(|hours| hours.abs() <= 15.0) {
        return true;
    }
    zone_name(value).is_some() || arrow::array::timezone::Tz::from_str(value).is_ok()
}

/// A zone's name as the IANA database spells it (`america/new_york` is `America/New_York`).
fn zone_name(value: &str) -> Option<&'static str> {
    chrono_tz::TZ_VARIANTS.iter().map(|zone| zone.name()).find(|name| name.eq_ignore_ascii_case(value))
}

/// The isolation level Sluice gives transactions by default, as PostgreSQL names it.
const PROVIDED_ISOLATION: &str = "read committed";

/// Whether `name` is `transaction_isolation` (SET's spellings of it).
pub fn is_transaction_isolation(name: &str) -> bool {
    canonical_key(name) == "transaction_isolation"
}

fn canonical_key(name: &str) -> String {
    let lower = name.trim().trim_matches('"').to_lowercase();
    match lower.as_str() {
        "time zone" | "time_zone" | "timezone" => "timezone".into(),
        "names" => "client_encoding".into(),
        "transaction isolation level" | "transaction_isolation_level" => "transaction_isolation".into(),
        "session authorization" => "session_authorization".into(),
        other => other.to_string(),
    }
}

fn canonical_reported(name: &str) -> String {
    REPORTED.iter().find(|r| r.eq_ignore_ascii_case(name)).map(|r| r.to_string()).unwrap_or_else(|| name.to_string())
}

fn normalize_value(key: &str, value: &str) -> String {
    let value = value.trim().trim_matches('\'').to_string();
    match key {
        "timezone" if value.eq_ignore_ascii_case("local") || value.eq_ignore_ascii_case("default") => "UTC".into(),
        "timezone" => zone_name(&value).map(str::to_string).unwrap_or(value),
        // The level reported is the one provided, not the one asked for: READ UNCOMMITTED gets
        // READ COMMITTED (sluice::transaction::Isolation).
        "transaction_isolation" | "default_transaction_isolation" => {
            sluice::transaction::Isolation::named(&value).name().into()
        }
        _ => value,
    }
}

/// Parses `5000`, `5s`, `100ms`, `1min` as milliseconds (Postgres units; a bare number is ms).
pub fn parse_duration_ms(text: &str) -> Option<u64> {
    let text = text.trim().trim_matches('\'').to_lowercase();
    let digits: String = text.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
    let unit = text[digits.len()..].trim();
    let amount: f64 = digits.parse().ok()?;
    let factor = match unit {
        "" | "ms" => 1.0,
        "s" => 1000.0,
        "min" => 60_000.0,
        "h" => 3_600_000.0,
        "d" => 86_400_000.0,
        "us" => 0.001,
        _ => return None,
    };
    Some((amount * factor) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip() {
        let mut settings = Settings::default();
        assert_eq!(settings.get("datestyle"), Some("ISO, MDY"));
        assert_eq!(settings.set("application_name", "'psql'"), Some("application_name".into()));
        assert_eq!(settings.get("APPLICATION_NAME"), Some("psql"));
        assert_eq!(settings.set("extra_float_digits", "3"), None);
        assert_eq!(settings.set("TIME ZONE", "'Europe/Paris'"), Some("TimeZone".into()));
        assert_eq!(settings.get("timezone"), Some("Europe/Paris"));
        // The isolation level reported is the one Sluice provides for what was asked.
        assert_eq!(settings.get("transaction_isolation"), Some("read committed"));
        settings.set("default_transaction_isolation", "'Repeatable Read'");
        assert_eq!(settings.get("default_transaction_isolation"), Some("repeatable read"));
        settings.set("default_transaction_isolation", "'read uncommitted'");
        assert_eq!(settings.get("default_transaction_isolation"), Some("read committed"));
        settings.set("default_transaction_isolation", "'SERIALIZABLE'");
        assert_eq!(settings.get("default_transaction_isolation"), Some("serializable"));
        settings.set("statement_timeout", "2s");
        assert_eq!(settings.statement_timeout_ms(), 2000);
        // Levels PostgreSQL does not know are refused as PostgreSQL refuses them.
        assert!(check("default_transaction_isolation", "'Read Committed'").is_ok());
        assert!(check("transaction_isolation", "\"serializable\"").is_ok());
        assert_eq!(
            check("default_transaction_isolation", "'nonsense'"),
            Err("invalid value for parameter \"default_transaction_isolation\": \"nonsense\"".into())
        );
        assert!(check("Transaction_Isolation", "'read  committed'").is_err());
        settings.reset_all();
        assert_eq!(settings.get("application_name"), Some(""));
    }

    #[test]
    fn a_startup_packet_sets_the_session_settings_it_names() {
        let startup = std::collections::HashMap::from([
            ("TimeZone".to_string(), "europe/paris".to_string()),
            ("extra_float_digits".to_string(), "0".to_string()),
            ("user".to_string(), "ann".to_string()),
            ("is_superuser".to_string(), "off".to_string()),
            ("DateStyle".to_string(), "ISO, DMY".to_string()),
            ("statement_timeout".to_string(), "forever".to_string()),
            ("options".to_string(), "-c extra_float_digits=2 --application-name=my\\ app".to_string()),
        ]);
        let settings = Settings::from_startup(&startup);
        assert_eq!(settings.get("timezone"), Some("Europe/Paris"));
        assert_eq!(settings.get("extra_float_digits"), Some("2"));
        assert_eq!(settings.get("application_name"), Some("my app"));
        assert_eq!(settings.get("DateStyle"), Some("ISO, DMY"));
        assert_eq!(settings.get("user"), None);
        assert_eq!(settings.get("is_superuser"), Some("on"));
        assert_eq!(settings.get("statement_timeout"), Some("0"));
    }

    #[test]
    fn bad_time_zones_and_timeouts_are_refused() {
        for zone in ["'Europe/Paris'", "UTC", "utc", "'+02:00'", "-7", "LOCAL", "'america/new_york'"] {
            assert_eq!(check("TimeZone", zone), Ok(()), "{zone}");
        }
        let mut settings = Settings::default();
        settings.set("TimeZone", "'america/new_york'");
        assert_eq!(settings.get("timezone"), Some("America/New_York"));
        assert_eq!(
            check("timezone", "'Mars/Olympus'"),
            Err("invalid value for parameter \"TimeZone\": \"Mars/Olympus\"".into())
        );
        assert!(check("statement_timeout", "'soon'").is_err());
        assert_eq!(check("application_name", "anything"), Ok(()));
    }
}
