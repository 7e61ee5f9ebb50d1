//! The options of `CREATE SOURCE name FROM FILES (...)` and of `read_files(...)`.
//!
//! `path` (a folder, relative to the data folder, absolute, or an object-store URL; a glob in its
//! last segments becomes the `pattern`), `format` (`csv`, `json` for JSON lines, `parquet`),
//! `pattern` (a glob over file names, or over paths below the folder when it holds a `/`),
//! the CSV dialect (`header`, `delimiter`, `quote`, `escape`: `auto` sniffs), `infer_types`
//! (`false` keeps every CSV and JSON column as text, as Auto Loader does by default), and the
//! ingest limits `interval_ms` (how often the folder is listed), `batch_files` and `batch_bytes`
//! (a commit closes at the first), `max_file_bytes` (a larger file goes to the dead-letter table
//! instead of into memory). Unknown options are refused, naming the known ones.

use std::collections::BTreeMap;

use crate::error::{Error, Result};

pub const INTERVAL_MS_DEFAULT: u64 = 1_000;
pub const BATCH_FILES_DEFAULT: usize = 1_000;
pub const BATCH_BYTES_DEFAULT: u64 = 32 * 1024 * 1024;
pub const MAX_FILE_BYTES_DEFAULT: u64 = 512 * 1024 * 1024;

/// The formats a file source reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    Csv,
    /// One JSON object per line.
    Json,
    Parquet,
}

impl FileFormat {
    pub fn as_str(&self) -> &'static str {
        match self {
            FileFormat::Csv => "csv",
            FileFormat::Json => "json",
            FileFormat::Parquet => "parquet",
        }
    }
}

/// A CSV setting that may be sniffed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sniffed<T> {
    Auto,
    Given(T),
}

/// A file source's options, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct FileOptions {
    /// The folder as given (a path or URL), without a trailing glob.
    pub path: String,
    pub format: FileFormat,
    pub pattern: Option<String>,
    pub header: Sniffed<bool>,
    pub delimiter: Sniffed<u8>,
    pub quote: u8,
    pub escape: Option<u8>,
    pub infer_types: bool,
    pub interval_ms: u64,
    pub batch_files: usize,
    pub batch_bytes: u64,
    pub max_file_bytes: u64,
}

const KNOWN: &[&str] = &[
    "path",
    "format",
    "pattern",
    "header",
    "delimiter",
    "quote",
    "escape",
    "infer_types",
    "interval_ms",
    "batch_files",
    "batch_bytes",
    "max_file_bytes",
];

fn invalid(message: String) -> Error {
    Error::data("22023", message)
}

fn boolean(key: &str, value: &str) -> Result<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "on" | "yes" | "1" => Ok(true),
        "false" | "off" | "no" | "0" => Ok(false),
        _ => Err(invalid(format!("option {key} must be true or false, not '{value}'"))),
    }
}

fn one_byte(key: &str, value: &str) -> Result<u8> {
    let unescaped = match value {
        "\\t" | "tab" => "\t",
        other => other,
    };
    match unescaped.as_bytes() {
        [b] if b.is_ascii() && *b != b'\n' && *b != b'\r' => Ok(*b),
        _ => Err(invalid(format!("option {key} must be one ASCII character (not a line break), not '{value}'"))),
    }
}

fn positive<T: std::str::FromStr + PartialOrd + Default>(key: &str, value: &str) -> Result<T> {
    match value.trim().parse::<T>() {
        Ok(n) if n > T::default() => Ok(n),
        _ => Err(invalid(format!("option {key} must be a positive integer, not '{value}'"))),
    }
}

/// Whether a path segment holds glob characters.
fn is_glob(segment: &str) -> bool {
    segment.contains(['*', '?', '['])
}

/// Splits `landing/orders/*.csv` into the folder `landing/orders` and the pattern `*.csv` (the
/// segments from the first one with a glob character on).
pub fn split_glob(path: &str) -> (String, Option<String>) {
    let trimmed = path.trim_end_matches('/');
    let segments: Vec<&str> = trimmed.split('/').collect();
    match segments.iter().position(|s| is_glob(s)) {
        None => (trimmed.to_string(), None),
        Some(first) => {
            let folder = segments.iter().take(first).copied().collect::<Vec<_>>().join("/");
            let pattern = segments.iter().skip(first).copied().collect::<Vec<_>>().join("/");
            let folder = if folder.is_empty() && path.starts_with('/') { "/".to_string() } else { folder };
            (folder, Some(pattern))
        }
    }
}

impl FileOptions {
    pub fn parse(options: &BTreeMap<String, String>) -> Result<Self> {
        let mut path = None;
        let mut format = None;
        let mut pattern = None;
        let mut parsed = FileOptions {
            path: String::new(),
            format: FileFormat::Csv,
            pattern: None,
            header: Sniffed::Auto,
            delimiter: Sniffed::Auto,
            quote: b'"',
            escape: None,
            infer_types: true,
            interval_ms: INTERVAL_MS_DEFAULT,
            batch_files: BATCH_FILES_DEFAULT,
            batch_bytes: BATCH_BYTES_DEFAULT,
            max_file_bytes: MAX_FILE_BYTES_DEFAULT,
        };
        for (key, value) in options {
            let auto = value.trim().eq_ignore_ascii_case("auto");
            match key.to_ascii_lowercase().as_str() {
                "path" => path = Some(value.trim().to_string()),
                "format" => {
                    format = Some(match value.trim().to_ascii_lowercase().as_str() {
                        "csv" => FileFormat::Csv,
                        "json" | "jsonl" | "ndjson" => FileFormat::Json,
                        "parquet" => FileFormat::Parquet,
                        other => {
                            return Err(invalid(format!(
                                "option format must be 'csv', 'json' (one object per line) or 'parquet', not '{other}'"
                            )))
                        }
                    })
                }
                "pattern" | "pathglobfilter" => {
                    glob::Pattern::new(value)
                        .map_err(|e| invalid(format!("option pattern is not a valid glob: {e}")))?;
                    pattern = Some(value.clone());
                }
                "header" => parsed.header = if auto { Sniffed::Auto } else { Sniffed::Given(boolean(key, value)?) },
                "delimiter" | "sep" => {
                    parsed.delimiter = if auto { Sniffed::Auto } else { Sniffed::Given(one_byte(key, value)?) }
                }
                "quote" => parsed.quote = one_byte(key, value)?,
                "escape" => parsed.escape = Some(one_byte(key, value)?),
                "infer_types" | "infercolumntypes" => parsed.infer_types = boolean(key, value)?,
                "interval_ms" => parsed.interval_ms = positive(key, value)?,
                "batch_files" => parsed.batch_files = positive(key, value)?,
                "batch_bytes" => parsed.batch_bytes = positive(key, value)?,
                "max_file_bytes" => parsed.max_file_bytes = positive(key, value)?,
                _ => {
                    return Err(invalid(format!(
                        "unknown option {key} of a FILES source (known: {})",
                        KNOWN.join(", ")
                    )))
                }
            }
        }
        let path = path
            .filter(|p| !p.is_empty())
            .ok_or_else(|| invalid("a FILES source needs option path (a folder)".into()))?;
        parsed.format =
            format.ok_or_else(|| invalid("a FILES source needs option format (csv, json or parquet)".into()))?;
        let (folder, glob) = split_glob(&path);
        parsed.pattern = match (glob, pattern) {
            (Some(_), Some(_)) => {
                return Err(invalid("give the glob either in path or in option pattern, not both".into()))
            }
            (Some(glob), None) => {
                glob::Pattern::new(&glob).map_err(|e| invalid(format!("the glob in path is not valid: {e}")))?;
                Some(glob)
            }
            (None, pattern) => pattern,
        };
        parsed.path = folder;
        Ok(parsed)
    }

    /// Whether a file (its path relative to the folder) is one the source reads.
    pub fn matcher(&self) -> impl Fn(&str) -> bool + '_ {
        let pattern = self.pattern.as_deref().and_then(|p| glob::Pattern::new(p).ok());
        let by_path = self.pattern.as_deref().is_some_and(|p| p.contains('/'));
        let options =
            glob::MatchOptions { case_sensitive: true, require_literal_separator: true, ..Default::default() };
        move |relative: &str| match &pattern {
            None => true,
            Some(pattern) if by_path => pattern.matches_with(relative, options),
            Some(pattern) => pattern.matches_with(relative.rsplit('/').next().unwrap_or(relative), options),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn parses_and_checks_options() {
        let parsed = FileOptions::parse(&options(&[
            ("path", "landing/orders/"),
            ("format", "csv"),
            ("pattern", "*.csv"),
            ("delimiter", ";"),
            ("header", "true"),
            ("batch_files", "10"),
        ]))
        .unwrap();
        assert_eq!(parsed.path, "landing/orders");
        assert_eq!(parsed.delimiter, Sniffed::Given(b';'));
        assert_eq!(parsed.header, Sniffed::Given(true));
        assert_eq!(parsed.batch_files, 10);
        let matches = parsed.matcher();
        assert!(matches("a.csv") && matches("x/y/b.csv") && !matches("a.json"));

        let globbed = FileOptions::parse(&options(&[("path", "landing/*/part-*.json"), ("format", "json")])).unwrap();
        assert_eq!(globbed.path, "landing");
        let matches = globbed.matcher();
        assert!(matches("orders/part-1.json") && !matches("orders/x/part-1.json") && !matches("part-1.json"));

        for (bad, message) in [
            (options(&[("format", "csv")]), "needs option path"),
            (options(&[("path", "x")]), "needs option format"),
            (options(&[("path", "x"), ("format", "xml")]), "format must be"),
            (options(&[("path", "x"), ("format", "csv"), ("colour", "red")]), "unknown option colour"),
            (options(&[("path", "x"), ("format", "csv"), ("delimiter", ",,")]), "one ASCII character"),
            (options(&[("path", "x"), ("format", "csv"), ("batch_files", "0")]), "positive"),
            (options(&[("path", "x/*.csv"), ("format", "csv"), ("pattern", "*.csv")]), "not both"),
            (options(&[("path", "x"), ("format", "csv"), ("header", "maybe")]), "true or false"),
        ] {
            let err = FileOptions::parse(&bad).unwrap_err().to_string();
            assert!(err.contains(message), "{err}");
        }
    }
}
