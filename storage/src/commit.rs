//! Commits: writing the next version of the log with put-if-absent, detecting logical conflicts
//! with the commits that won the race, and retrying those that do not conflict.
//!
//! Conflict rules (Delta's `WriteSerializable` level; the protocol leaves them to writers):
//! - a winning commit that changes the metadata or protocol conflicts with every transaction,
//!   except one that only declares deletion vectors (a table's first DELETE) for a transaction
//!   that changes neither metadata nor protocol, or declares the same;
//! - removing a file that a winning commit also removed (or re-added with a new deletion vector)
//!   conflicts: the same rows would be deleted twice or an update lost;
//! - two commits with a `txn` for the same appId, or domain metadata for the same domain, conflict;
//! - a transaction that read the whole table to replace it (overwrite, truncate, restore)
//!   conflicts with a winning commit that added data;
//! - everything else, and blind appends in particular, is rebased onto the next version.
//!
//! A lost race is not an error: [`CommitOutcome::Conflict`] says who won and why.

use std::collections::HashSet;

use bytes::Bytes;
use serde_json::{Map, Value};

use crate::actions::{now_ms, serialize_commit, Action};
use crate::error::{Error, Result};
use crate::log::{commit_file_name, read_commit};
use crate::protocol::{self, APPEND_ONLY_KEY};
use crate::snapshot::Snapshot;
use crate::store::{PutOutcome, TableStore};

/// How many times a commit is rebased onto newer versions before giving up.
pub const COMMIT_RETRY_MAX: usize = 10_000;

/// What a commit did.
#[derive(Debug, Clone)]
#[must_use]
pub enum CommitOutcome {
    /// The commit is version `version` of the table.
    Committed(Committed),
    /// Another commit changed what this one depended on; nothing was written.
    Conflict(Conflict),
}

/// A successful commit, with the commits it was rebased over (so caches can advance).
#[derive(Debug, Clone)]
pub struct Committed {
    pub version: u64,
    /// The commits after the read version, this one last: `(version, modified_ms, actions)`.
    pub commits: Vec<(u64, i64, Vec<Action>)>,
    /// The commit went to a staged handle (see [`crate::stage`]): held, not in the log.
    pub staged: bool,
}

/// Why a commit lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub winning_version: u64,
    pub reason: ConflictReason,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConflictReason {
    MetadataChanged,
    ProtocolChanged,
    /// A file this commit removes was removed (or rewritten) by the winner.
    ConcurrentDelete {
        path: String,
    },
    /// Both commits carry a `txn` for this application.
    ConcurrentTransaction {
        app_id: String,
    },
    ConcurrentDomainMetadata {
        domain: String,
    },
    /// This commit replaces the table's content and the winner added data.
    ConcurrentAppend {
        path: String,
    },
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let why = match &self.reason {
            ConflictReason::MetadataChanged => "it changed the table's metadata".to_string(),
            ConflictReason::ProtocolChanged => "it changed the table's protocol".to_string(),
            ConflictReason::ConcurrentDelete { path } => format!("it also removed or rewrote {path}"),
            ConflictReason::ConcurrentTransaction { app_id } => format!("it also committed for application '{app_id}'"),
            ConflictReason::ConcurrentDomainMetadata { domain } => format!("it also changed domain '{domain}'"),
            ConflictReason::ConcurrentAppend { path } => format!("it added {path} to data this commit replaces"),
        };
        write!(f, "a concurrent commit (version {}) conflicts: {why}", self.winning_version)
    }
}

impl CommitOutcome {
    /// The version, or an error describing the conflict (for callers that treat a conflict as a
    /// failure of the whole operation).
    pub fn version(&self) -> std::result::Result<u64, Conflict> {
        match self {
            CommitOutcome::Committed(c) => Ok(c.version),
            CommitOutcome::Conflict(c) => Err(c.clone()),
        }
    }
}

/// A set of actions to commit on top of a snapshot.
#[derive(Debug, Clone)]
pub struct Transaction {
    read_version: Option<u64>,
    /// The protocol of the snapshot the transaction was built on.
    read_protocol: Option<crate::actions::Protocol>,
    actions: Vec<Action>,
    operation: String,
    operation_parameters: Map<String, Value>,
    replaces_data: bool,
    /// The commit read the table's rows (a key check): any concurrent data commit conflicts.
    reads_data: bool,
    ict_enabled: bool,
    previous_ict: Option<i64>,
}

impl Transaction {
    /// A transaction on top of `snapshot` (or creating a table when `None`).
    pub fn new(snapshot: Option<&Snapshot>, operation: impl Into<String>) -> Self {
        Self {
            read_version: snapshot.map(Snapshot::version),
            read_protocol: snapshot.map(|s| s.protocol().clone()),
            actions: Vec::new(),
            operation: operation.into(),
            operation_parameters: Map::new(),
            replaces_data: false,
            reads_data: false,
            ict_enabled: snapshot.is_some_and(|s| s.property_is_true(protocol::IN_COMMIT_TIMESTAMPS_KEY)),
            previous_ict: snapshot.map(Snapshot::timestamp_ms),
        }
    }

    pub fn add_action(&mut self, action: Action) -> &mut Self {
        self.actions.push(action);
        self
    }

    pub fn add_actions(&mut self, actions: impl IntoIterator<Item = Action>) -> &mut Self {
        self.actions.extend(actions);
        self
    }

    /// Records an operation parameter in `commitInfo` (shown by history).
    pub fn parameter(&mut self, key: &str, value: impl Into<Value>) -> &mut Self {
        self.operation_parameters.insert(key.to_string(), value.into());
        self
    }

    /// Marks the transaction as replacing the table's data (overwrite, truncate, restore).
    pub fn replaces_data(&mut self) -> &mut Self {
        self.replaces_data = true;
        self
    }

    /// Marks the transaction as depending on every row of the table (a writer that checked its
    /// keys against them): a concurrent commit that adds or removes data conflicts with it.
    pub fn reads_data(&mut self) -> &mut Self {
        self.reads_data = true;
        self
    }

    pub fn actions(&self) -> &[Action] {
        &self.actions
    }

    pub fn read_version(&self) -> Option<u64> {
        self.read_version
    }

    pub fn operation(&self) -> &str {
        &self.operation
    }

    /// Whether the commit replaces the table's rows (an overwrite).
    pub fn is_replacing_data(&self) -> bool {
        self.replaces_data
    }

    /// Whether the commit read the table's rows (see [`Transaction::reads_data`]).
    pub fn is_reading_data(&self) -> bool {
        self.reads_data
    }

    fn is_blind_append(&self) -> bool {
        !self.replaces_data
            && !self.reads_data
            && self.actions.iter().all(|a| matches!(a, Action::Add(_) | Action::Txn(_) | Action::CommitInfo(_)))
    }

    fn commit_info(&self, version: u64) -> Action {
        let mut info = Map::new();
        let now = now_ms();
        if self.ict_enabled {
            let ict = self.previous_ict.map_or(now, |p| now.max(p + 1));
            info.insert("inCommitTimestamp".into(), Value::from(ict));
        }
        info.insert("timestamp".into(), Value::from(now));
        info.insert("operation".into(), Value::from(self.operation.clone()));
        info.insert("operationParameters".into(), Value::Object(self.operation_parameters.clone()));
        if let Some(read) = self.read_version {
            info.insert("readVersion".into(), Value::from(read));
        }
        info.insert("isolationLevel".into(), Value::from("WriteSerializable"));
        info.insert("isBlindAppend".into(), Value::from(self.is_blind_append()));
        info.insert("engineInfo".into(), Value::from(format!("sluice/{}", env!("CARGO_PKG_VERSION"))));
        info.insert("txnId".into(), Value::from(uuid::Uuid::new_v4().to_string()));
        let _ = version;
        Action::CommitInfo(info)
    }

    /// Checks the transaction against the rules of the table it commits to.
    pub(crate) fn validate(&self, snapshot: Option<&Snapshot>, location: &str) -> Result<()> {
        let mut paths = HashSet::new();
        for action in &self.actions {
            if let Action::Add(add) = action {
                // Invariant: one add per path and deletion vector in a commit.
                if !paths.insert((add.path.as_str(), add.deletion_vector.as_ref().map(|d| d.unique_id()))) {
                    return Err(Error::Internal(format!("commit adds {} twice", add.path)));
                }
            }
        }
        let Some(snapshot) = snapshot else { return Ok(()) };
        let new_protocol = self.actions.iter().find_map(|a| match a {
            Action::Protocol(p) => Some(p),
            _ => None,
        });
        protocol::check_writable(new_protocol.unwrap_or(snapshot.protocol()), location)?;
        let append_only = snapshot.property_is_true(APPEND_ONLY_KEY);
        if append_only && self.actions.iter().any(|a| matches!(a, Action::Remove(r) if r.data_change)) {
            return Err(Error::NotAllowed {
                location: location.to_string(),
                message: "the table is append-only (delta.appendOnly = true): data cannot be removed".into(),
            });
        }
        Ok(())
    }

    /// Why `winning` (version `version`) conflicts with this transaction, if it does.
    pub(crate) fn conflict_with(&self, version: u64, winning: &[Action]) -> Option<Conflict> {
        let conflict = |reason| Some(Conflict { winning_version: version, reason });
        let removed: HashSet<&str> = self
            .actions
            .iter()
            .filter_map(|a| match a {
                Action::Remove(r) => Some(r.path.as_str()),
                _ => None,
            })
            .collect();
        let apps: HashSet<&str> = self
            .actions
            .iter()
            .filter_map(|a| match a {
                Action::Txn(t) => Some(t.app_id.as_str()),
                _ => None,
            })
            .collect();
        let domains: HashSet<&str> = self
            .actions
            .iter()
            .filter_map(|a| match a {
                Action::DomainMetadata(d) => Some(d.domain.as_str()),
                _ => None,
            })
            .collect();
        for action in winning {
            match action {
                Action::Metadata(_) => return conflict(ConflictReason::MetadataChanged),
                Action::Protocol(p) if !self.accepts_protocol(p) => return conflict(ConflictReason::ProtocolChanged),
                Action::Remove(r) if removed.contains(r.path.as_str()) => {
                    return conflict(ConflictReason::ConcurrentDelete { path: r.path.clone() })
                }
                Action::Add(a) if a.data_change && (self.replaces_data || self.reads_data) => {
                    return conflict(ConflictReason::ConcurrentAppend { path: a.path.clone() })
                }
                Action::Remove(r) if r.data_change && self.reads_data => {
                    return conflict(ConflictReason::ConcurrentDelete { path: r.path.clone() })
                }
                Action::Txn(t) if apps.contains(t.app_id.as_str()) => {
                    return conflict(ConflictReason::ConcurrentTransaction { app_id: t.app_id.clone() })
                }
                Action::DomainMetadata(d) if domains.contains(d.domain.as_str()) => {
                    return conflict(ConflictReason::ConcurrentDomainMetadata { domain: d.domain.clone() })
                }
                _ => {}
            }
        }
        None
    }

    /// Whether a winning commit's protocol `winning` leaves this transaction valid: it only
    /// declared deletion vectors (the first DELETE of a table, see
    /// [`crate::protocol::with_feature`]), and this transaction changes neither metadata nor
    /// protocol, or declares the same protocol itself. Any other protocol change conflicts.
    fn accepts_protocol(&self, winning: &crate::actions::Protocol) -> bool {
        let Some(read) = &self.read_protocol else { return false };
        if !protocol::adds_only(read, winning, "deletionVectors") {
            return false;
        }
        self.actions.iter().all(|a| match a {
            Action::Metadata(_) => false,
            Action::Protocol(ours) => ours == winning,
            _ => true,
        })
    }

    /// Commits to `store`, rebasing over non-conflicting winners.
    pub async fn commit(self, store: &TableStore, snapshot: Option<&Snapshot>) -> Result<CommitOutcome> {
        self.commit_after(store, snapshot, None).await
    }

    /// [`Self::commit`], knowing that the log has every version up to `known` (the latest a
    /// handle saw): those are read and checked for conflicts as winners without trying to
    /// create them, which would cost a journal sync and a file each.
    pub async fn commit_after(
        mut self,
        store: &TableStore,
        snapshot: Option<&Snapshot>,
        known: Option<u64>,
    ) -> Result<CommitOutcome> {
        self.validate(snapshot, store.location())?;
        let mut version = self.read_version.map_or(0, |v| v + 1);
        let known = known.filter(|_| self.read_version.is_some());
        let mut rebased_over = Vec::new();
        let mut attempts = 0;
        while attempts < COMMIT_RETRY_MAX {
            let path = store.log_path(&commit_file_name(version));
            let (outcome, actions) = if known.is_some_and(|known| version <= known) {
                (PutOutcome::AlreadyExists, Vec::new())
            } else {
                attempts += 1;
                let mut actions = vec![self.commit_info(version)];
                actions.extend(self.actions.iter().cloned());
                let bytes = Bytes::from(serialize_commit(&actions)?);
                crate::gate::check()?;
                (store.put_if_absent(&path, bytes).await?, actions)
            };
            match outcome {
                PutOutcome::Created => {
                    rebased_over.push((version, now_ms(), actions));
                    return Ok(CommitOutcome::Committed(Committed { version, commits: rebased_over, staged: false }));
                }
                PutOutcome::AlreadyExists => {
                    if self.read_version.is_none() {
                        return Err(Error::TableExists { location: store.location().to_string() });
                    }
                    let winning = read_commit(store, version).await?;
                    if let Some(conflict) = self.conflict_with(version, &winning) {
                        return Ok(CommitOutcome::Conflict(conflict));
                    }
                    if self.ict_enabled {
                        let winner_ict = winning.iter().find_map(|a| match a {
                            Action::CommitInfo(info) => info.get("inCommitTimestamp").and_then(Value::as_i64),
                            _ => None,
                        });
                        self.previous_ict = winner_ict.or(self.previous_ict);
                    }
                    let modified = store
                        .head(&path)
                        .await
                        .map(|m| m.last_modified.timestamp_millis())
                        .unwrap_or_else(|_| now_ms());
                    rebased_over.push((version, modified, winning));
                    version += 1;
                }
            }
        }
        Err(Error::CommitRetriesExhausted { location: store.location().to_string(), attempts: COMMIT_RETRY_MAX })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actions::{Add, Remove, Txn};

    fn add(path: &str) -> Action {
        Action::Add(Add {
            path: path.into(),
            partition_values: Default::default(),
            size: 1,
            modification_time: 1,
            data_change: true,
            stats: None,
            tags: None,
            deletion_vector: None,
            base_row_id: None,
            default_row_commit_version: None,
            clustering_provider: None,
        })
    }

    fn remove(path: &str) -> Action {
        Action::Remove(Remove {
            path: path.into(),
            deletion_timestamp: None,
            data_change: true,
            extended_file_metadata: None,
            partition_values: None,
            size: None,
            stats: None,
            tags: None,
            deletion_vector: None,
            base_row_id: None,
            default_row_commit_version: None,
        })
    }

    #[test]
    fn detects_conflicts() {
        let mut append = Transaction::new(None, "WRITE");
        append.read_version = Some(1);
        append.add_action(add("a"));
        assert!(append.conflict_with(2, &[add("b"), remove("c")]).is_none(), "blind appends never conflict");
        let mut delete = append.clone();
        delete.add_action(remove("c"));
        assert_eq!(
            delete.conflict_with(2, &[remove("c")]).map(|c| c.reason),
            Some(ConflictReason::ConcurrentDelete { path: "c".into() })
        );
        let mut overwrite = append.clone();
        overwrite.replaces_data();
        assert!(matches!(
            overwrite.conflict_with(2, &[add("b")]).map(|c| c.reason),
            Some(ConflictReason::ConcurrentAppend { .. })
        ));
        let mut stream = append.clone();
        stream.add_action(Action::Txn(Txn { app_id: "f".into(), version: 3, last_updated: None }));
        let winner = Action::Txn(Txn { app_id: "f".into(), version: 3, last_updated: None });
        assert!(stream.conflict_with(2, &[winner]).is_some());
    }
}
