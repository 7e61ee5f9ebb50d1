//! The one error type of the engine, with the Postgres SQLSTATE of every error.
//!
//! Errors are sorted by phase: the statement text (`Parse`), naming and planning (`Undefined*`,
//! `Duplicate*`, `Plan`), the data (`Data`, `NotNullViolation`, `CheckViolation`), concurrency
//! (`SerializationFailure`), the storage layer, and bugs (`Internal`). DataFusion's errors are
//! classified by what they say, since its error type does not carry SQLSTATEs.

use std::sync::Arc;

use datafusion::error::DataFusionError;

/// The result type of the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong running a statement.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The statement is not valid SQL. `line` and `column` are 1-based.
    #[error("syntax error at line {line}, column {column}: {message}")]
    Parse { message: String, line: u64, column: u64 },

    #[error("relation \"{0}\" does not exist")]
    UndefinedTable(String),

    #[error("column \"{0}\" does not exist")]
    UndefinedColumn(String),

    #[error("schema \"{0}\" does not exist")]
    UndefinedSchema(String),

    #[error("{kind} \"{name}\" does not exist")]
    UndefinedObject { kind: &'static str, name: String },

    #[error("relation \"{0}\" already exists")]
    DuplicateTable(String),

    #[error("schema \"{0}\" already exists")]
    DuplicateSchema(String),

    #[error("{kind} \"{name}\" already exists")]
    DuplicateObject { kind: &'static str, name: String },

    /// The statement is understood but cannot be planned (wrong types, bad arguments, ...).
    #[error("{0}")]
    Plan(String),

    /// A feature Sluice does not have.
    #[error("not supported: {0}")]
    NotSupported(String),

    /// A value is invalid for its type or operation (bad cast, overflow, ...).
    #[error("{message}")]
    Data { sqlstate: &'static str, message: String },

    #[error("null value in column \"{column}\" of relation \"{table}\" violates not-null constraint")]
    NotNullViolation { table: String, column: String },

    #[error("new row for relation \"{table}\" violates check constraint \"{constraint}\"")]
    CheckViolation { table: String, constraint: String },

    /// A key that is there already; `key` reads `(k)=(1)`.
    #[error("duplicate key value violates unique constraint \"{constraint}\"")]
    UniqueViolation { table: String, constraint: String, key: String },

    /// A row whose referenced key is missing, or a key still referenced (`detail`: PostgreSQL's
    /// DETAIL line, `Key (a)=(1) is not present in table "p".`).
    #[error("{message}")]
    ForeignKeyViolation { message: String, detail: String },

    /// A row violated an expectation declared `ON VIOLATION FAIL UPDATE`.
    #[error("expectation \"{constraint}\" on {table} failed ({rows} violating rows): nothing was written to {table}")]
    ExpectationFailed { table: String, constraint: String, rows: u64 },

    /// Another transaction changed what this one depended on; retrying may succeed.
    #[error("could not serialize access due to a concurrent update: {0}")]
    SerializationFailure(String),

    /// A statement that needs more rights than the session has.
    #[error("{0}")]
    PermissionDenied(String),

    /// A write by a role that may only read.
    #[error("permission denied: {0}")]
    ReadOnly(String),

    /// A statement needed more memory than its limit (or the server's) allows.
    #[error("out of memory: {0}")]
    OutOfMemory(String),

    /// A statement cancelled by the client or a timeout.
    #[error("canceling statement due to {0}")]
    Cancelled(String),

    /// The table log or files failed.
    #[error(transparent)]
    Storage(sluice_storage::Error),

    /// An error from DataFusion that fits no better variant.
    #[error("{0}")]
    DataFusion(Box<DataFusionError>),

    /// An invariant of Sluice does not hold: a bug.
    #[error("internal error (this is a bug in Sluice): {0}")]
    Internal(String),
}

impl Error {
    /// The Postgres SQLSTATE for this error.
    pub fn sqlstate(&self) -> &'static str {
        use sluice_storage::Error as S;
        match self {
            Error::Parse { .. } => "42601",
            Error::UndefinedTable(_) => "42P01",
            Error::UndefinedColumn(_) => "42703",
            Error::UndefinedSchema(_) => "3F000",
            Error::UndefinedObject { .. } => "42704",
            Error::DuplicateTable(_) => "42P07",
            Error::DuplicateSchema(_) => "42P06",
            Error::DuplicateObject { .. } => "42710",
            Error::Plan(_) => "42000",
            Error::NotSupported(_) => "0A000",
            Error::Data { sqlstate, .. } => sqlstate,
            Error::NotNullViolation { .. } => "23502",
            Error::UniqueViolation { .. } => "23505",
            Error::ForeignKeyViolation { .. } => "23503",
            Error::CheckViolation { .. } | Error::ExpectationFailed { .. } => "23514",
            Error::SerializationFailure(_) => "40001",
            Error::PermissionDenied(_) => "42501",
            Error::Cancelled(_) => "57014",
            Error::ReadOnly(_) => "25006",
            Error::OutOfMemory(_) => "53200",
            Error::Storage(e) => match e {
                S::NotATable { .. } => "42P01",
                S::TableExists { .. } => "42P07",
                S::InvalidData { .. } => "22000",
                S::InvalidArgument(_) => "22023",
                S::Schema(_) => "42000",
                S::NotAllowed { .. } => "55000",
                S::VersionNotFound { .. } | S::TimestampTooEarly { .. } => "22023",
                S::UnsupportedReaderFeatures { .. }
                | S::UnsupportedWriterFeatures { .. }
                | S::UnsupportedProtocol { .. }
                | S::Unsupported(_) => "0A000",
                S::CommitRetriesExhausted { .. } => "40001",
                S::CorruptCommit { .. }
                | S::CorruptCheckpoint { .. }
                | S::CorruptFile { .. }
                | S::InvalidLog { .. } => "XX001",
                S::MissingFile { .. } => "58P01",
                _ => "58000",
            },
            Error::DataFusion(e) => datafusion_sqlstate(e),
            Error::Internal(_) => "XX000",
        }
    }

    /// The DETAIL line PostgreSQL sends with this error, if any.
    pub fn detail(&self) -> Option<String> {
        match self {
            Error::UniqueViolation { key, .. } => Some(format!("Key {key} already exists.")),
            Error::ForeignKeyViolation { detail, .. } => Some(detail.clone()),
            _ => None,
        }
    }

    /// A data error with a SQLSTATE.
    pub fn data(sqlstate: &'static str, message: impl Into<String>) -> Self {
        Error::Data { sqlstate, message: message.into() }
    }

    /// 42703 for a column a statement names in one relation, worded as PostgreSQL's `column "x"
    /// of relation "t" does not exist`.
    pub fn undefined_column_of(column: &str, relation: &str) -> Self {
        Error::data("42703", format!("column \"{column}\" of relation \"{relation}\" does not exist"))
    }

    /// 42703 for a key's column that the table lacks: `column "x" named in key does not exist`.
    pub fn undefined_key_column(column: &str) -> Self {
        Error::data("42703", format!("column \"{column}\" named in key does not exist"))
    }
}

/// The SQLSTATE of a DataFusion error, from its kind (and the kind of the Arrow error inside).
fn datafusion_sqlstate(e: &DataFusionError) -> &'static str {
    use arrow::error::ArrowError as A;
    use datafusion::common::SchemaError as S;
    match unwrap(e) {
        DataFusionError::ArrowError(arrow, _) => match arrow.as_ref() {
            A::DivideByZero => "22012",
            A::ArithmeticOverflow(_) | A::DictionaryKeyOverflowError | A::RunEndIndexOverflowError => "22003",
            A::CastError(_) | A::ParseError(_) => "22P02",
            A::NotYetImplemented(_) => "0A000",
            A::MemoryError(_) => "53200",
            A::IoError(..) => "58030",
            _ => "22000",
        },
        DataFusionError::SQL(..) => "42601",
        DataFusionError::SchemaError(schema, _) => match schema.as_ref() {
            S::FieldNotFound { .. } => "42703",
            S::AmbiguousReference { .. } => "42702",
            S::DuplicateQualifiedField { .. } | S::DuplicateUnqualifiedField { .. } => "42701",
        },
        DataFusionError::NotImplemented(_) => "0A000",
        DataFusionError::ResourcesExhausted(_) => "53200",
        DataFusionError::IoError(_) | DataFusionError::ObjectStore(_) => "58030",
        DataFusionError::Execution(_) | DataFusionError::ExecutionJoin(_) | DataFusionError::ParquetError(_) => "22000",
        _ => "42000",
    }
}

fn unwrap(e: &DataFusionError) -> &DataFusionError {
    match e {
        DataFusionError::Context(_, inner) => unwrap(inner),
        DataFusionError::Shared(inner) => unwrap(inner),
        other => other,
    }
}

impl From<DataFusionError> for Error {
    fn from(e: DataFusionError) -> Self {
        // Errors raised by Sluice code inside DataFusion (providers, functions) come back whole.
        match e {
            DataFusionError::External(inner) => match inner.downcast::<Error>() {
                Ok(ours) => *ours,
                Err(other) => match other.downcast::<sluice_storage::Error>() {
                    Ok(storage) => Error::from(*storage),
                    Err(other) => match other.downcast::<DataFusionError>() {
                        Ok(inner) => Error::from(*inner),
                        Err(other) => match other.downcast::<arrow::error::ArrowError>() {
                            Ok(arrow) => Error::from(DataFusionError::ArrowError(arrow, None)),
                            Err(other) => Error::DataFusion(Box::new(DataFusionError::External(other))),
                        },
                    },
                },
            },
            DataFusionError::Context(context, inner) => match Error::from(*inner) {
                Error::DataFusion(inner) => Error::DataFusion(Box::new(DataFusionError::Context(context, inner))),
                ours => ours,
            },
            DataFusionError::Diagnostic(_, inner) => Error::from(*inner),
            // A correlated subquery that DataFusion could not turn into a join.
            DataFusionError::NotImplemented(message)
                if message.starts_with("Physical plan does not support logical expression ScalarSubquery")
                    || message.starts_with("Physical plan does not support logical expression Exists")
                    || message.starts_with("Physical plan does not support logical expression InSubquery") =>
            {
                Error::NotSupported(
                    "this correlated subquery: Sluice runs a correlated subquery as a join, which needs its \
                     conditions on the outer row to be equalities (outer.x = inner.y) and no LIMIT"
                        .into(),
                )
            }
            // DataFusion's check of an uncorrelated scalar subquery, in PostgreSQL's words.
            DataFusionError::Execution(message)
                if message.starts_with("Scalar subquery returned more than one row") =>
            {
                Error::data("21000", "more than one row returned by a subquery used as an expression")
            }
            DataFusionError::ResourcesExhausted(message) => Error::OutOfMemory(message),
            DataFusionError::ObjectStore(e) => match *e {
                object_store::Error::NotFound { path, .. } => {
                    Error::Storage(sluice_storage::Error::MissingFile { path, version: None })
                }
                other => Error::DataFusion(Box::new(DataFusionError::ObjectStore(Box::new(other)))),
            },
            DataFusionError::ParquetError(e) => match missing_file(&e) {
                Some(path) => Error::Storage(sluice_storage::Error::MissingFile { path, version: None }),
                None => Error::DataFusion(Box::new(DataFusionError::ParquetError(e))),
            },
            DataFusionError::Shared(inner) => match Arc::try_unwrap(inner) {
                Ok(inner) => Error::from(inner),
                // Shared with another consumer: a Sluice error inside is copied (its SQLSTATE and
                // message), anything else stays shared.
                Err(shared) => match unwrap(&shared) {
                    DataFusionError::External(inner) => match inner.downcast_ref::<Error>() {
                        Some(ours) => Error::data(ours.sqlstate(), ours.to_string()),
                        None => Error::DataFusion(Box::new(DataFusionError::Shared(shared))),
                    },
                    _ => Error::DataFusion(Box::new(DataFusionError::Shared(shared))),
                },
            },
            DataFusionError::SchemaError(schema_error, backtrace) => match schema_error.as_ref() {
                datafusion::common::SchemaError::FieldNotFound { field, .. } => {
                    Error::UndefinedColumn(field.name().to_string())
                }
                _ => Error::DataFusion(Box::new(DataFusionError::SchemaError(schema_error, backtrace))),
            },
            DataFusionError::SQL(parse, _) => {
                let text = parse.to_string();
                let (line, column) = parse_position(&text);
                Error::Parse { message: strip_position(&text), line, column }
            }
            DataFusionError::ArrowError(arrow, context) => match *arrow {
                // PostgreSQL's words for what Arrow's kernels raise (numeric division, casts).
                arrow::error::ArrowError::DivideByZero => Error::data("22012", "division by zero"),
                arrow::error::ArrowError::ArithmeticOverflow(_) => Error::data("22003", "numeric value out of range"),
                arrow::error::ArrowError::InvalidArgumentError(message)
                    if message.contains("too large to store in a Decimal") =>
                {
                    Error::data("22003", "numeric field overflow")
                }
                // A function's error that crossed an Arrow kernel (unnest, for one).
                arrow::error::ArrowError::ExternalError(inner) => match inner.downcast::<DataFusionError>() {
                    Ok(inner) => Error::from(*inner),
                    Err(inner) => match inner.downcast::<Error>() {
                        Ok(inner) => *inner,
                        Err(other) => Error::DataFusion(Box::new(DataFusionError::ArrowError(
                            Box::new(arrow::error::ArrowError::ExternalError(other)),
                            context,
                        ))),
                    },
                },
                other => Error::DataFusion(Box::new(DataFusionError::ArrowError(Box::new(other), context))),
            },
            other => Error::DataFusion(Box::new(other)),
        }
    }
}

/// A commit that the statement's gate refused carries the engine's reason (a cancellation, a
/// read-only role) back whole.
impl From<sluice_storage::Error> for Error {
    fn from(e: sluice_storage::Error) -> Self {
        match e {
            sluice_storage::Error::CommitRefused(reason) => match reason.downcast::<Error>() {
                Ok(ours) => *ours,
                Err(other) => Error::Storage(sluice_storage::Error::CommitRefused(other)),
            },
            other => Error::Storage(other),
        }
    }
}

impl From<datafusion::sql::sqlparser::parser::ParserError> for Error {
    fn from(e: datafusion::sql::sqlparser::parser::ParserError) -> Self {
        let text = e.to_string();
        let (line, column) = parse_position(&text);
        Error::Parse { message: strip_position(&text), line, column }
    }
}

impl From<arrow::error::ArrowError> for Error {
    fn from(e: arrow::error::ArrowError) -> Self {
        Error::from(DataFusionError::from(e))
    }
}

/// Sluice errors travel through DataFusion as external errors.
impl From<Error> for DataFusionError {
    fn from(e: Error) -> Self {
        match e {
            Error::DataFusion(inner) => *inner,
            other => DataFusionError::External(Box::new(other)),
        }
    }
}

/// The path of a file the object store did not find, when that is why Parquet failed. A reader
/// that wraps the store's error keeps it; DataFusion's Parquet opener flattens it into its
/// message ("Failed to fetch metadata for file ...: Object Store error: Object at location X not
/// found"), the one error kind still recognised by its text (`api::a_lost_data_file_is_named`
/// fails if that text changes).
fn missing_file(e: &parquet::errors::ParquetError) -> Option<String> {
    if let parquet::errors::ParquetError::External(inner) = e {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(inner.as_ref());
        while let Some(error) = cause {
            if let Some(object_store::Error::NotFound { path, .. }) = error.downcast_ref::<object_store::Error>() {
                return Some(path.clone());
            }
            cause = error.source();
        }
    }
    let text = e.to_string();
    let start = text.find("Object at location ")? + "Object at location ".len();
    let rest = text.get(start..)?;
    let end = rest.find(" not found")?;
    rest.get(..end).map(str::to_string)
}

/// Finds "Line: L, Column: C" in a sqlparser message.
fn parse_position(text: &str) -> (u64, u64) {
    let number_after = |key: &str| {
        text.find(key).and_then(|at| {
            text[at + key.len()..]
                .trim_start()
                .chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
                .parse()
                .ok()
        })
    };
    (number_after("Line:").unwrap_or(1), number_after("Column:").unwrap_or(1))
}

fn strip_position(text: &str) -> String {
    let text = text.trim_start_matches("sql parser error: ");
    match text.find(" at Line:") {
        Some(at) => text[..at].to_string(),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_come_from_the_parser_message() {
        assert_eq!(parse_position("Expected: x, found: y at Line: 3, Column: 14"), (3, 14));
        assert_eq!(
            strip_position("sql parser error: Expected: x, found: y at Line: 3, Column: 14"),
            "Expected: x, found: y"
        );
    }

    #[test]
    fn storage_errors_keep_their_meaning() {
        let e = Error::from(DataFusionError::External(Box::new(Error::UndefinedTable("t".into()))));
        assert_eq!(e.sqlstate(), "42P01");
        let conflict = Error::SerializationFailure("x".into());
        assert_eq!(conflict.sqlstate(), "40001");
    }

    #[test]
    fn datafusion_errors_take_their_sqlstate_from_their_kind() {
        use arrow::error::ArrowError;
        let arrow = |e: ArrowError| Error::from(DataFusionError::ArrowError(Box::new(e), None)).sqlstate();
        assert_eq!(arrow(ArrowError::DivideByZero), "22012");
        assert_eq!(arrow(ArrowError::ArithmeticOverflow("x".into())), "22003");
        assert_eq!(arrow(ArrowError::CastError("x".into())), "22P02");
        assert_eq!(arrow(ArrowError::ComputeError("x".into())), "22000");
        let wrapped = DataFusionError::Context(
            "while planning".into(),
            Box::new(DataFusionError::ArrowError(Box::new(ArrowError::DivideByZero), None)),
        );
        assert_eq!(Error::from(wrapped).sqlstate(), "22012");
        assert_eq!(Error::from(DataFusionError::NotImplemented("x".into())).sqlstate(), "0A000");
        assert_eq!(Error::from(DataFusionError::Execution("divide by zero".into())).sqlstate(), "22000");
        assert_eq!(Error::from(DataFusionError::ResourcesExhausted("x".into())).sqlstate(), "53200");
    }
}
