//! Protocol versions and table features: what Sluice can read and write, and the lowest protocol
//! a table's properties and schema need.
//!
//! Writer features that depend on evaluating SQL (`invariants`, `checkConstraints`) are accepted
//! here because the engine enforces them: [`crate::snapshot::Snapshot::constraints`] hands them out.

use std::collections::BTreeSet;

use crate::actions::{Metadata, Protocol};
use crate::error::{Error, Result};
use crate::schema::{ColumnMappingMode, PrimitiveType, StructType};

/// Reader features Sluice implements.
pub const READER_FEATURES: &[&str] = &[
    "columnMapping",
    "deletionVectors",
    "timestampNtz",
    "v2Checkpoint",
    "vacuumProtocolCheck",
    "typeWidening",
    "typeWidening-preview",
];

/// Writer features Sluice implements.
pub const WRITER_FEATURES: &[&str] = &[
    "appendOnly",
    "invariants",
    "checkConstraints",
    "changeDataFeed",
    "columnMapping",
    "deletionVectors",
    "timestampNtz",
    "domainMetadata",
    "inCommitTimestamp",
    "v2Checkpoint",
    "vacuumProtocolCheck",
    "identityColumns",
    // The engine computes generated columns' values in every write (sluice::sql::generated).
    "generatedColumns",
];

/// Field metadata of an identity column: its first value.
pub const IDENTITY_START_KEY: &str = "delta.identity.start";
/// Field metadata of an identity column: the step between values.
pub const IDENTITY_STEP_KEY: &str = "delta.identity.step";
/// Field metadata of an identity column: the highest value handed out (lowest, for a negative step).
pub const IDENTITY_HIGH_WATER_MARK_KEY: &str = "delta.identity.highWaterMark";
/// Field metadata of an identity column: whether an INSERT may give its own value.
pub const IDENTITY_ALLOW_EXPLICIT_INSERT_KEY: &str = "delta.identity.allowExplicitInsert";

/// Features that both readers and writers must know (they go in `readerFeatures` too).
const READER_WRITER_FEATURES: &[&str] = &[
    "columnMapping",
    "deletionVectors",
    "timestampNtz",
    "v2Checkpoint",
    "vacuumProtocolCheck",
    "typeWidening",
    "variantType",
];

/// Features that only exist with writer version 7 (no legacy version implies them).
const TABLE_FEATURES_ONLY: &[&str] =
    &["deletionVectors", "timestampNtz", "domainMetadata", "inCommitTimestamp", "v2Checkpoint", "vacuumProtocolCheck"];

/// The deletion vectors table feature.
pub const DELETION_VECTORS: &str = "deletionVectors";

/// Table property that turns on deletion vectors for new deletes.
pub const ENABLE_DELETION_VECTORS_KEY: &str = "delta.enableDeletionVectors";
/// Table property that turns on the change data feed.
pub const ENABLE_CHANGE_DATA_FEED_KEY: &str = "delta.enableChangeDataFeed";
/// Table property that forbids removing data.
pub const APPEND_ONLY_KEY: &str = "delta.appendOnly";
/// Table property that turns on in-commit timestamps.
pub const IN_COMMIT_TIMESTAMPS_KEY: &str = "delta.enableInCommitTimestamps";

/// Refuses a table this reader cannot read.
pub fn check_readable(protocol: &Protocol, location: &str) -> Result<()> {
    if protocol.min_reader_version > 3 || protocol.min_reader_version < 1 {
        return Err(Error::UnsupportedProtocol {
            location: location.to_string(),
            kind: "reader",
            version: protocol.min_reader_version,
            supported: 3,
        });
    }
    if protocol.min_reader_version == 3 {
        let missing: Vec<String> = protocol
            .reader_features
            .iter()
            .flatten()
            .filter(|f| !READER_FEATURES.contains(&f.as_str()))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(Error::UnsupportedReaderFeatures { location: location.to_string(), features: missing });
        }
    }
    Ok(())
}

/// Refuses a table this writer cannot write.
pub fn check_writable(protocol: &Protocol, location: &str) -> Result<()> {
    check_readable(protocol, location)?;
    if protocol.min_writer_version > 7 || protocol.min_writer_version < 1 {
        return Err(Error::UnsupportedProtocol {
            location: location.to_string(),
            kind: "writer",
            version: protocol.min_writer_version,
            supported: 7,
        });
    }
    if protocol.min_writer_version == 7 {
        let missing: Vec<String> = protocol
            .writer_features
            .iter()
            .flatten()
            .filter(|f| !WRITER_FEATURES.contains(&f.as_str()))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(Error::UnsupportedWriterFeatures { location: location.to_string(), features: missing });
        }
    }
    Ok(())
}

/// Whether the protocol lists (or, for legacy versions, implies) a writer feature.
pub fn has_writer_feature(protocol: &Protocol, feature: &str) -> bool {
    if protocol.min_writer_version == 7 {
        return protocol.writer_features.iter().flatten().any(|f| f == feature);
    }
    legacy_writer_features(protocol.min_writer_version).contains(&feature)
}

/// Whether the protocol lets readers rely on a reader feature.
pub fn has_reader_feature(protocol: &Protocol, feature: &str) -> bool {
    match protocol.min_reader_version {
        3 => protocol.reader_features.iter().flatten().any(|f| f == feature),
        2 => feature == "columnMapping",
        _ => false,
    }
}

fn legacy_writer_features(version: i32) -> &'static [&'static str] {
    match version {
        i32::MIN..=1 => &[],
        2 => &["appendOnly", "invariants"],
        3 => &["appendOnly", "invariants", "checkConstraints"],
        4 => &["appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns"],
        5 => &["appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns", "columnMapping"],
        _ => &[
            "appendOnly",
            "invariants",
            "checkConstraints",
            "changeDataFeed",
            "generatedColumns",
            "columnMapping",
            "identityColumns",
        ],
    }
}

fn is_true(metadata: &Metadata, key: &str) -> bool {
    metadata.configuration.get(key).is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// The writer features a table's metadata and schema use.
///
/// `delta.enableDeletionVectors` is not one of them: it says that deletes may write deletion
/// vectors, and the protocol gains the feature in the commit that writes the first one
/// ([`with_feature`]), so a table that never deleted a row stays readable by readers that lack
/// deletion vectors.
pub fn needed_features(metadata: &Metadata, schema: &StructType) -> Result<BTreeSet<&'static str>> {
    let mut features = BTreeSet::new();
    if is_true(metadata, APPEND_ONLY_KEY) {
        features.insert("appendOnly");
    }
    if schema_has_invariants(schema) {
        features.insert("invariants");
    }
    if metadata.configuration.keys().any(|k| k.starts_with("delta.constraints.")) {
        features.insert("checkConstraints");
    }
    if is_true(metadata, ENABLE_CHANGE_DATA_FEED_KEY) {
        features.insert("changeDataFeed");
    }
    if ColumnMappingMode::from_configuration(&metadata.configuration)? != ColumnMappingMode::None {
        features.insert("columnMapping");
    }
    if schema.fields.iter().any(|f| f.metadata.contains_key(IDENTITY_START_KEY)) {
        features.insert("identityColumns");
    }
    if schema_has_generated_columns(schema) {
        features.insert("generatedColumns");
    }
    if schema.any_type(&|p| *p == PrimitiveType::TimestampNtz) {
        features.insert("timestampNtz");
    }
    if is_true(metadata, IN_COMMIT_TIMESTAMPS_KEY) {
        features.insert("inCommitTimestamp");
    }
    if metadata.configuration.get("delta.checkpointPolicy").is_some_and(|v| v == "v2") {
        features.insert("v2Checkpoint");
    }
    Ok(features)
}

fn schema_has_invariants(schema: &StructType) -> bool {
    schema.fields.iter().any(|f| {
        f.metadata.contains_key("delta.invariants")
            || matches!(&f.data_type, crate::schema::DataType::Struct(s) if schema_has_invariants(s))
    })
}

/// The lowest protocol that serves `metadata` and `schema` without dropping anything the current
/// protocol already has (protocols are never downgraded).
pub fn required_protocol(current: Option<&Protocol>, metadata: &Metadata, schema: &StructType) -> Result<Protocol> {
    let writer: BTreeSet<String> = needed_features(metadata, schema)?.into_iter().map(String::from).collect();
    lowest_protocol(current, writer, schema_has_generated_columns(schema))
}

/// The protocol `current` upgraded to also declare `feature` (for a commit that starts using it,
/// such as the first deletion vector).
pub fn with_feature(current: &Protocol, metadata: &Metadata, schema: &StructType, feature: &str) -> Result<Protocol> {
    let mut writer: BTreeSet<String> = needed_features(metadata, schema)?.into_iter().map(String::from).collect();
    writer.insert(feature.to_string());
    lowest_protocol(Some(current), writer, schema_has_generated_columns(schema))
}

/// The protocol action a commit that writes deletion vectors adds: `None` when `current`
/// declares them already, else `current` upgraded ([`with_feature`]).
pub fn declaring_deletion_vectors(
    current: &Protocol,
    metadata: &Metadata,
    schema: &StructType,
) -> Result<Option<Protocol>> {
    if has_reader_feature(current, DELETION_VECTORS) {
        return Ok(None);
    }
    with_feature(current, metadata, schema, DELETION_VECTORS).map(Some)
}

/// The protocol `current` without `feature` (Delta's DROP FEATURE): the lowest protocol that
/// still declares every other feature `current` has and the metadata and schema use, in legacy
/// versions when no remaining feature needs table features.
pub fn without_feature(
    current: &Protocol,
    metadata: &Metadata,
    schema: &StructType,
    feature: &str,
) -> Result<Protocol> {
    let needed = needed_features(metadata, schema)?;
    if needed.contains(feature) {
        return Err(Error::InvalidArgument(format!("the table still uses {feature}: turn it off first")));
    }
    let mut writer: BTreeSet<String> = needed.into_iter().map(String::from).collect();
    writer.extend(writer_features_of(current));
    writer.extend(reader_features_of(current));
    writer.remove(feature);
    // A legacy version implies generatedColumns; it stays only where a column is generated.
    let generated = schema_has_generated_columns(schema);
    if current.min_writer_version != 7 && !generated {
        writer.remove("generatedColumns");
    }
    lowest_protocol(None, writer, generated)
}

/// Whether `after` differs from `before` only by declaring `feature` (moving from legacy versions
/// to table features on the way, which may leave out an unused `generatedColumns`).
pub fn adds_only(before: &Protocol, after: &Protocol, feature: &str) -> bool {
    let (reader_before, writer_before) = (reader_features_of(before), writer_features_of(before));
    let (reader_after, writer_after) = (reader_features_of(after), writer_features_of(after));
    writer_after.iter().all(|f| f == feature || writer_before.contains(f))
        && writer_before.iter().all(|f| f == "generatedColumns" || writer_after.contains(f))
        && reader_after.iter().all(|f| f == feature || reader_before.contains(f))
        && reader_before.iter().all(|f| reader_after.contains(f))
}

fn reader_features_of(protocol: &Protocol) -> BTreeSet<String> {
    match protocol.min_reader_version {
        3 => protocol.reader_features.iter().flatten().cloned().collect(),
        2 => BTreeSet::from(["columnMapping".to_string()]),
        _ => BTreeSet::new(),
    }
}

fn writer_features_of(protocol: &Protocol) -> BTreeSet<String> {
    match protocol.min_writer_version {
        7 => protocol.writer_features.iter().flatten().cloned().collect(),
        v => legacy_writer_features(v).iter().map(|f| f.to_string()).collect(),
    }
}

fn schema_has_generated_columns(schema: &StructType) -> bool {
    schema.fields.iter().any(|f| f.metadata.contains_key("delta.generationExpression"))
}

fn lowest_protocol(
    current: Option<&Protocol>,
    mut writer: BTreeSet<String>,
    has_generated_columns: bool,
) -> Result<Protocol> {
    let mut uses_table_features = writer.iter().any(|f| TABLE_FEATURES_ONLY.contains(&f.as_str()));
    if let Some(current) = current {
        if current.min_writer_version == 7 {
            uses_table_features = true;
            writer.extend(current.writer_features.iter().flatten().cloned());
        } else if uses_table_features {
            // The legacy version's features become explicit; `generatedColumns` only where a column
            // is generated (a feature listed but unused would make the table unwritable for
            // writers without it).
            writer.extend(
                legacy_writer_features(current.min_writer_version)
                    .iter()
                    .filter(|f| **f != "generatedColumns" || has_generated_columns)
                    .map(|f| f.to_string()),
            );
        }
        if current.min_reader_version == 3 {
            uses_table_features = true;
            writer.extend(current.reader_features.iter().flatten().cloned());
        }
    }
    if uses_table_features {
        let reader: Vec<String> =
            writer.iter().filter(|f| READER_WRITER_FEATURES.contains(&f.as_str())).cloned().collect();
        let needs_reader_features =
            reader.iter().any(|f| f != "columnMapping") || current.is_some_and(|c| c.min_reader_version == 3);
        let (reader_version, reader_features) = if needs_reader_features {
            (3, Some(reader))
        } else if reader.is_empty() {
            (current.map_or(1, |c| c.min_reader_version.max(1)), None)
        } else {
            (2, None)
        };
        return Ok(Protocol {
            min_reader_version: reader_version,
            min_writer_version: 7,
            reader_features,
            writer_features: Some(writer.into_iter().collect()),
        });
    }
    let mut writer_version = current.map_or(2, |c| c.min_writer_version.max(2));
    let mut reader_version = current.map_or(1, |c| c.min_reader_version.max(1));
    for feature in &writer {
        let needed = match feature.as_str() {
            "checkConstraints" => 3,
            "changeDataFeed" | "generatedColumns" => 4,
            "columnMapping" => 5,
            _ => 2,
        };
        writer_version = writer_version.max(needed);
        if feature == "columnMapping" {
            reader_version = reader_version.max(2);
        }
    }
    Ok(Protocol {
        min_reader_version: reader_version,
        min_writer_version: writer_version,
        reader_features: None,
        writer_features: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actions::Format;
    use std::collections::HashMap;

    fn metadata(config: &[(&str, &str)]) -> Metadata {
        Metadata {
            id: "x".into(),
            name: None,
            description: None,
            format: Format::default(),
            schema_string: r#"{"type":"struct","fields":[]}"#.into(),
            partition_columns: vec![],
            configuration: config.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<HashMap<_, _>>(),
            created_time: None,
        }
    }

    #[test]
    fn picks_the_lowest_protocol() {
        let schema = StructType::default();
        let plain = required_protocol(None, &metadata(&[]), &schema).unwrap();
        assert_eq!((plain.min_reader_version, plain.min_writer_version), (1, 2));
        let cdf = required_protocol(None, &metadata(&[(ENABLE_CHANGE_DATA_FEED_KEY, "true")]), &schema).unwrap();
        assert_eq!((cdf.min_reader_version, cdf.min_writer_version), (1, 4));
        let enabled = metadata(&[(ENABLE_DELETION_VECTORS_KEY, "true")]);
        let lazy = required_protocol(Some(&cdf), &enabled, &schema).unwrap();
        assert_eq!(lazy, cdf, "the property alone does not declare deletion vectors");
        let dv = with_feature(&cdf, &enabled, &schema, "deletionVectors").unwrap();
        assert_eq!((dv.min_reader_version, dv.min_writer_version), (3, 7));
        assert_eq!(dv.reader_features, Some(vec!["deletionVectors".to_string()]));
        assert!(dv.writer_features.as_ref().unwrap().contains(&"changeDataFeed".to_string()));
    }

    #[test]
    fn refuses_unknown_features() {
        let p = Protocol {
            min_reader_version: 3,
            min_writer_version: 7,
            reader_features: Some(vec!["deletionVectors".into(), "futureThing".into()]),
            writer_features: Some(vec![]),
        };
        let err = check_readable(&p, "t").unwrap_err().to_string();
        assert!(err.contains("futureThing"), "{err}");
        let w = Protocol { reader_features: Some(vec![]), writer_features: Some(vec!["rowTracking".into()]), ..p };
        assert!(check_readable(&w, "t").is_ok());
        assert!(check_writable(&w, "t").is_err());
    }
}
