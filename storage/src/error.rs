//! The one error type of sluice-storage.
//!
//! Variants are sorted by who is at fault: the caller (`InvalidArgument`, `Schema`), the data on
//! disk (`Corrupt*`, `MissingFile`, `Unsupported*`), the environment (`Store`, `Io`) or Sluice
//! itself (`Internal`). Every variant that concerns a file names it, and the table version where
//! one is known, so that an operator can find the broken piece. A commit that loses a race is not
//! an error: see [`crate::commit::CommitOutcome`].

use std::fmt;

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the table log.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// There is no Delta table at the location (no `_delta_log/` commits).
    #[error("no Delta table at {location}: {reason}")]
    NotATable { location: String, reason: String },

    /// `create` found a table already there.
    #[error("a Delta table already exists at {location}")]
    TableExists { location: String },

    /// A JSON commit file could not be parsed.
    #[error("corrupt commit {path} (version {version}){}: {message}", line_suffix(*line))]
    CorruptCommit { path: String, version: u64, line: Option<usize>, message: String },

    /// A checkpoint (or sidecar, or `_last_checkpoint`) could not be read.
    #[error("corrupt checkpoint {path} (version {version}): {message}")]
    CorruptCheckpoint { path: String, version: u64, message: String },

    /// A data, deletion-vector or change-data file could not be decoded.
    #[error("corrupt file {path}{}: {message}", version_suffix(*version))]
    CorruptFile { path: String, version: Option<u64>, message: String },

    /// A file that the log references does not exist.
    #[error("missing file {path}{}: the log references it but the store does not have it", version_suffix(*version))]
    MissingFile { path: String, version: Option<u64> },

    /// The log is not a valid sequence of commits (for example a gap in the versions).
    #[error("invalid log at {location}: {message}")]
    InvalidLog { location: String, message: String },

    /// Time travel to a version that does not exist (or was cleaned up).
    #[error("version {version} of {location} is not available (the log holds {earliest}..={latest})")]
    VersionNotFound { location: String, version: u64, earliest: u64, latest: u64 },

    /// Time travel to a timestamp before the first commit.
    #[error("no version of {location} is as old as {timestamp}: the first commit was at {earliest}")]
    TimestampTooEarly { location: String, timestamp: String, earliest: String },

    /// The table needs a reader feature that Sluice does not implement.
    #[error("table {location} needs reader features Sluice does not support: {}", features.join(", "))]
    UnsupportedReaderFeatures { location: String, features: Vec<String> },

    /// The table needs a writer feature that Sluice does not implement.
    #[error("table {location} needs writer features Sluice does not support: {}", features.join(", "))]
    UnsupportedWriterFeatures { location: String, features: Vec<String> },

    /// The table's protocol version is newer than this reader or writer knows.
    #[error("table {location} needs protocol {kind} version {version}, Sluice supports up to {supported}")]
    UnsupportedProtocol { location: String, kind: &'static str, version: i32, supported: i32 },

    /// A schema string, type name or schema change is not valid.
    #[error("schema error: {0}")]
    Schema(String),

    /// Data handed to a writer does not fit the table.
    #[error("invalid data for table {location}: {message}")]
    InvalidData { location: String, message: String },

    /// An argument from the caller is not valid (bad option value, unknown column, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// Something PostgreSQL or Delta allows that Sluice does not do (yet).
    #[error("not supported: {0}")]
    Unsupported(String),

    /// An operation that the table's properties forbid (for example a delete on an append-only table).
    #[error("operation not allowed on {location}: {message}")]
    NotAllowed { location: String, message: String },

    /// The commit gate of the running work refused the commit (see [`crate::gate`]); nothing
    /// was written.
    #[error("{0}")]
    CommitRefused(Box<dyn std::error::Error + Send + Sync>),

    /// A commit lost the race more often than `commit_retry_max` allows.
    #[error("commit to {location} lost the race {attempts} times; giving up")]
    CommitRetriesExhausted { location: String, attempts: usize },

    /// The object store failed.
    #[error("storage error at {path}: {source}")]
    Store {
        path: String,
        #[source]
        source: object_store::Error,
    },

    /// Arrow failed (casts, concatenation, ...).
    #[error("arrow error: {0}")]
    Arrow(#[from] arrow::error::ArrowError),

    /// The Parquet writer failed (readers report `CorruptFile` with the path instead).
    #[error("parquet error: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),

    /// An invariant of Sluice itself does not hold: this is a bug.
    #[error("internal error (this is a bug in Sluice): {0}")]
    Internal(String),
}

fn line_suffix(line: Option<usize>) -> String {
    line.map(|l| format!(" line {l}")).unwrap_or_default()
}

fn version_suffix(version: Option<u64>) -> String {
    version.map(|v| format!(" (version {v})")).unwrap_or_default()
}

impl Error {
    /// Wraps an object-store error with the path it concerns.
    pub fn store(path: impl fmt::Display, source: object_store::Error) -> Self {
        match source {
            object_store::Error::NotFound { .. } => Error::MissingFile { path: path.to_string(), version: None },
            source => Error::Store { path: path.to_string(), source },
        }
    }

    /// Attaches a table version to errors about files, where it is not yet known.
    pub fn at_version(self, at: u64) -> Self {
        match self {
            Error::MissingFile { path, version: None } => Error::MissingFile { path, version: Some(at) },
            Error::CorruptFile { path, version: None, message } => {
                Error::CorruptFile { path, version: Some(at), message }
            }
            other => other,
        }
    }

    /// Whether the error says that a file does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::MissingFile { .. })
    }
}
