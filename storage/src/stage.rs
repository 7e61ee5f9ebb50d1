//! Staged commits: a transaction's writes, held until it commits.
//!
//! [`Table::staged`] makes a handle on a table that commits nowhere: its writers write their data
//! files as usual (they are unreferenced until a commit names them), and each [`Table::commit`]
//! through it is validated, checked against the staged commits made since the snapshot it was
//! built on, and applied to the handle's own snapshot (the base it was made at plus every staged
//! commit), which its readers then see. Nothing reaches the log.
//!
//! [`Table::commit_staged`] commits what the handle holds to the real table as one commit built
//! on the base: the files the base had and the staged snapshot has not are removed, the files the
//! staged snapshot added are added, with the metadata, protocol, streaming txns and domains it
//! changed and the change data files the staged commits wrote; the conflict rules of
//! [`crate::commit`] then judge it against whatever was committed since the base (a staged
//! commit that read the table's rows, as a key check or an UPDATE does, conflicts with any
//! concurrent data change). [`Table::discard_stage`] deletes the files a rolled-back stage wrote;
//! [`Table::stage_mark`] and [`Table::rollback_stage_to`] serve savepoints.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use roaring::RoaringTreemap;

use crate::actions::{now_ms, Action, Add, Stats};
use crate::commit::{CommitOutcome, Committed, Conflict, ConflictReason, Transaction};
use crate::deletion_vector::DvFileWriter;
use crate::error::{Error, Result};
use crate::log::{self, LogFile, LogFileKind};
use crate::snapshot::Snapshot;
use crate::table::Table;

use crate::protocol::DELETION_VECTORS as DV;

/// The commitInfo operation parameter naming the warehouse transaction a commit belongs to.
pub const TRANSACTION_ID_PARAMETER: &str = "transactionId";

/// What a staged handle holds.
#[derive(Debug)]
pub(crate) struct Stage {
    base: Arc<Snapshot>,
    commits: Vec<StagedCommit>,
    /// A statement read the table other than row by row through a key (see
    /// [`Table::note_whole_read`]): its commit cannot be moved onto a later version.
    read_whole: bool,
}

#[derive(Debug)]
struct StagedCommit {
    transaction: Transaction,
    /// The handle's snapshot after this commit.
    after: Arc<Snapshot>,
}

impl Stage {
    pub(crate) fn new(base: Arc<Snapshot>) -> Mutex<Self> {
        Mutex::new(Self { base, commits: Vec::new(), read_whole: false })
    }
}

fn lock(stage: &Mutex<Stage>) -> std::sync::MutexGuard<'_, Stage> {
    stage.lock().unwrap_or_else(|p| p.into_inner())
}

impl Table {
    /// A handle that stages its commits on the table's latest snapshot (see the module docs).
    pub async fn staged(&self) -> Result<Table> {
        let base = self.snapshot().await?;
        Ok(self.staged_handle(base))
    }

    /// A handle that stages its commits on `base`, a snapshot of this table.
    pub fn staged_on(&self, base: Arc<Snapshot>) -> Table {
        self.staged_handle(base)
    }

    /// Whether this handle stages its commits.
    pub fn is_staged(&self) -> bool {
        self.stage().is_some()
    }

    /// Whether a staged handle holds any commit.
    pub fn has_staged_commits(&self) -> bool {
        self.stage().is_some_and(|s| !lock(s).commits.is_empty())
    }

    /// The operations of the staged commits, in order (WRITE, DELETE, ...).
    pub fn staged_operations(&self) -> Vec<String> {
        match self.stage() {
            Some(stage) => lock(stage).commits.iter().map(|c| c.transaction.operation().to_string()).collect(),
            None => Vec::new(),
        }
    }

    /// Whether a staged commit added or removed a data file (changed rows, rather than only the
    /// schema or the properties).
    pub fn stage_changes_files(&self) -> bool {
        let Some(stage) = self.stage() else { return false };
        let stage = lock(stage);
        stage
            .commits
            .iter()
            .any(|c| c.transaction.actions().iter().any(|a| matches!(a, Action::Add(_) | Action::Remove(_))))
    }

    /// The bytes of the data files the staged commits added (counted once per file).
    pub fn staged_bytes(&self) -> u64 {
        let Some(stage) = self.stage() else { return 0 };
        let stage = lock(stage);
        let mut seen = HashSet::new();
        let mut bytes = 0u64;
        for commit in &stage.commits {
            for action in commit.transaction.actions() {
                match action {
                    Action::Add(add) if add.deletion_vector.is_none() && seen.insert(add.path.as_str()) => {
                        bytes = bytes.saturating_add(add.size.max(0) as u64)
                    }
                    Action::Cdc(cdc) if seen.insert(cdc.path.as_str()) => {
                        bytes = bytes.saturating_add(cdc.size.max(0) as u64)
                    }
                    _ => {}
                }
            }
        }
        bytes
    }

    /// Records that a statement read a staged handle's rows by a scan rather than by key
    /// lookups: what it read depends on every row, so [`Table::rebase_stage`] leaves the
    /// handle's commit to the conflict rules. (Nothing for a handle that stages nothing.)
    pub fn note_whole_read(&self) {
        if let Some(stage) = self.stage() {
            lock(stage).read_whole = true;
        }
    }

    /// The version a staged handle's commits are built on.
    pub fn stage_base_version(&self) -> Option<u64> {
        self.stage().map(|s| lock(s).base.version())
    }

    /// The snapshot a staged handle's commits are staged on.
    pub fn stage_base(&self) -> Option<Arc<Snapshot>> {
        self.stage().map(|s| lock(s).base.clone())
    }

    /// How many commits a staged handle holds (a savepoint's mark).
    pub fn stage_mark(&self) -> usize {
        self.stage().map_or(0, |s| lock(s).commits.len())
    }

    /// Drops the staged commits after the first `mark` (ROLLBACK TO SAVEPOINT), deleting the
    /// files only they wrote.
    pub async fn rollback_stage_to(&self, mark: usize) -> Result<()> {
        let Some(stage) = self.stage() else { return Ok(()) };
        let (dropped, kept_files, snapshot) = {
            let mut stage = lock(stage);
            let from = mark.min(stage.commits.len());
            let dropped: Vec<StagedCommit> = stage.commits.drain(from..).collect();
            let snapshot = stage.commits.last().map(|c| c.after.clone()).unwrap_or_else(|| stage.base.clone());
            (dropped, referenced_paths(&snapshot), snapshot)
        };
        self.replace_snapshot(snapshot);
        delete_written(self, dropped.iter().map(|c| &c.transaction), &kept_files).await;
        Ok(())
    }

    /// Deletes the files a staged handle wrote and forgets its commits (ROLLBACK).
    pub async fn discard_stage(&self) {
        let Some(stage) = self.stage() else { return };
        let (dropped, base) = {
            let mut stage = lock(stage);
            (std::mem::take(&mut stage.commits), stage.base.clone())
        };
        self.replace_snapshot(base.clone());
        delete_written(self, dropped.iter().map(|c| &c.transaction), &referenced_paths(&base)).await;
    }

    /// Applies a transaction to a staged handle's snapshot (called by [`Table::commit`]).
    pub(crate) fn commit_to_stage(
        &self,
        stage: &Mutex<Stage>,
        snapshot: &Snapshot,
        transaction: Transaction,
    ) -> Result<CommitOutcome> {
        transaction.validate(Some(snapshot), self.location())?;
        // A staged commit is the statement's commit point: its gate decides (a read-only role,
        // a cancelled statement) as for a commit to the log.
        crate::gate::check()?;
        let mut stage = lock(stage);
        let current = stage.commits.last().map(|c| c.after.clone()).unwrap_or_else(|| stage.base.clone());
        // Built on an older staged snapshot: the staged commits since then are its winners.
        for (i, commit) in stage.commits.iter().enumerate() {
            let version = stage.base.version() + i as u64 + 1;
            if version > snapshot.version() {
                if let Some(conflict) = transaction.conflict_with(version, commit.transaction.actions()) {
                    return Ok(CommitOutcome::Conflict(conflict));
                }
            }
        }
        let version = current.version() + 1;
        let modified = now_ms();
        let file = LogFile {
            version,
            kind: LogFileKind::Commit,
            path: self.store().log_path(&log::commit_file_name(version)),
            size: 0,
            modified_ms: modified,
        };
        let actions = transaction.actions().to_vec();
        let after = Arc::new(current.apply_commits(vec![(file, actions.clone())])?);
        stage.commits.push(StagedCommit { transaction, after: after.clone() });
        drop(stage);
        self.replace_snapshot(after);
        Ok(CommitOutcome::Committed(Committed { version, commits: vec![(version, modified, actions)], staged: true }))
    }

    /// Commits what `staged` (a staged handle on this table) holds, as one commit on its base,
    /// with `transaction_id` (a warehouse's id of the transaction) among its commitInfo's
    /// operation parameters. `None`: it holds nothing. A checkpoint due is left to the caller
    /// (see [`Table::commit_leaving_checkpoint`]).
    pub async fn commit_staged(
        &self,
        staged: &Table,
        transaction_id: &str,
    ) -> Result<Option<(CommitOutcome, Option<crate::table::CheckpointDue>)>> {
        let Some(stage) = staged.stage() else {
            return Err(Error::Internal("commit_staged of a handle that stages nothing".into()));
        };
        let (base, transaction) = {
            let stage = lock(stage);
            let Some(last) = stage.commits.last() else { return Ok(None) };
            (stage.base.clone(), net_transaction(&stage.base, &last.after, &stage.commits))
        };
        let mut transaction = transaction;
        transaction.parameter(TRANSACTION_ID_PARAMETER, transaction_id);
        self.commit_leaving_checkpoint(&base, transaction).await.map(Some)
    }
}

/// What [`Table::rebase_stage`] did.
#[derive(Debug)]
pub enum Rebase {
    /// Nothing to move, or a stage that the conflict rules must judge as it is.
    Unchanged,
    /// The stage is now built on the later snapshot. `deleted`: the rows of that snapshot's
    /// files that the stage deletes, by path (`None`: the whole file), for the caller's key check.
    Rebased { deleted: HashMap<String, Option<RoaringTreemap>> },
    /// A commit since the base changed a row the stage changes.
    Conflict(Conflict),
}

impl Table {
    /// Row-level conflict resolution (as Delta writers with deletion vectors do it): moves what a
    /// staged handle of this table holds onto `latest`, a later snapshot of the table, when the
    /// commits since its base changed other rows than it did. A file that both changed gets a
    /// deletion vector of both deletions; a row both deleted, or a file one of them removed
    /// whole, is a conflict. Only a stage that did nothing but change rows (no metadata,
    /// protocol, streaming txns, domains or overwrite) and read the table only by key
    /// (see [`Table::note_whole_read`]) is moved, and only when the commits since changed no
    /// metadata or protocol: the caller checks the keys of the rows the stage inserts against
    /// `latest`, and its commit then goes through the usual rules against anything after it.
    pub async fn rebase_stage(&self, staged: &Table, latest: &Arc<Snapshot>) -> Result<Rebase> {
        let Some(stage) = staged.stage() else {
            return Err(Error::Internal("rebase_stage of a handle that stages nothing".into()));
        };
        let (base, after) = {
            let stage = lock(stage);
            let Some(last) = stage.commits.last() else { return Ok(Rebase::Unchanged) };
            let movable = !stage.read_whole
                && !stage.commits.iter().any(|c| {
                    c.transaction.is_replacing_data()
                        || c.transaction.actions().iter().any(|a| match a {
                            // The first deletion vector's protocol upgrade moves with the stage.
                            Action::Protocol(p) => !crate::protocol::adds_only(stage.base.protocol(), p, DV),
                            Action::Metadata(_) | Action::Txn(_) | Action::DomainMetadata(_) => true,
                            _ => false,
                        })
                });
            if !movable {
                return Ok(Rebase::Unchanged);
            }
            (stage.base.clone(), last.after.clone())
        };
        if latest.version() <= base.version()
            || latest.metadata() != base.metadata()
            || !crate::protocol::adds_only(base.protocol(), latest.protocol(), DV)
        {
            return Ok(Rebase::Unchanged);
        }
        let conflict = |path: &str| {
            Ok(Rebase::Conflict(Conflict {
                winning_version: latest.version(),
                reason: ConflictReason::ConcurrentDelete { path: path.to_string() },
            }))
        };
        // What the stage changed: the base's files it replaced or removed, and the files it
        // added (the diff of two related persistent sets costs the changes, not the table).
        let ours_changed = after.file_set().changes_since(base.file_set());
        let now = now_ms();
        let mut actions = Vec::new();
        let mut deleted = HashMap::new();
        let mut dv_file = DvFileWriter::new();
        let store = self.store();
        for b in ours_changed.removed.iter().copied() {
            let ours = after.file_by_path(&b.path);
            let Some(theirs) = latest.file_by_path(&b.path) else {
                return conflict(&b.path);
            };
            let unchanged = theirs.key() == b.key();
            let Some(ours) = ours else {
                // Removed whole by the stage, which the others must not have touched.
                if !unchanged {
                    return conflict(&b.path);
                }
                actions.push(Action::Remove(b.to_remove(now, true)));
                deleted.insert(b.path.clone(), None);
                continue;
            };
            let base_rows = rows_deleted(store, b).await?;
            let our_rows = rows_deleted(store, ours).await?;
            if unchanged {
                // Only the stage changed it: its own version stands.
                actions.push(Action::Remove(b.to_remove(now, true)));
                actions.push(Action::Add((**ours).clone()));
                deleted.insert(b.path.clone(), Some(&our_rows - &base_rows));
                continue;
            }
            let their_rows = rows_deleted(store, theirs).await?;
            if !base_rows.is_subset(&our_rows) || !base_rows.is_subset(&their_rows) {
                // Rows came back (a RESTORE): not a change of rows this can merge.
                return conflict(&b.path);
            }
            let mine = &our_rows - &base_rows;
            if !(&mine & &their_rows).is_empty() {
                return conflict(&b.path);
            }
            let merged = &their_rows | &mine;
            actions.push(Action::Remove(theirs.to_remove(now, true)));
            deleted.insert(b.path.clone(), Some(mine));
            let physical = match theirs.num_records() {
                Some(n) => n.max(0) as u64,
                None => u64::MAX,
            };
            if merged.len() < physical {
                let stats = theirs.parsed_stats().map(|s| Stats { tight_bounds: Some(false), ..s });
                actions.push(Action::Add(Add {
                    deletion_vector: Some(dv_file.add(&merged)),
                    stats: stats.and_then(|s| serde_json::to_string(&s).ok()).or(theirs.stats.clone()),
                    modification_time: now,
                    data_change: true,
                    ..(**theirs).clone()
                }));
            }
        }
        for f in ours_changed.added.iter().filter(|f| base.file_by_path(&f.path).is_none()) {
            actions.push(Action::Add((***f).clone()));
        }
        if actions.iter().any(|a| matches!(a, Action::Add(add) if add.deletion_vector.is_some())) {
            if let Some(upgraded) =
                crate::protocol::declaring_deletion_vectors(latest.protocol(), latest.metadata(), latest.schema())?
            {
                actions.push(Action::Protocol(upgraded));
            }
        }
        if let Some((path, bytes)) = dv_file.finish() {
            store.put(&store.path(&path), bytes).await?;
        }
        let version = latest.version() + 1;
        let file = LogFile {
            version,
            kind: LogFileKind::Commit,
            path: store.log_path(&log::commit_file_name(version)),
            size: 0,
            modified_ms: now,
        };
        let moved = Arc::new(latest.apply_commits(vec![(file, actions)])?);
        {
            let mut stage = lock(stage);
            stage.base = latest.clone();
            if let Some(last) = stage.commits.last_mut() {
                last.after = moved.clone();
            }
        }
        staged.replace_snapshot(moved);
        Ok(Rebase::Rebased { deleted })
    }

    /// The version after `after` whose commitInfo names `transaction_id` (see
    /// [`Table::commit_staged`]), if one does.
    pub async fn find_transaction(&self, after: u64, transaction_id: &str) -> Result<Option<u64>> {
        let files = log::list_log(self.store(), Some(after + 1)).await?;
        let commits: Vec<LogFile> =
            files.into_iter().filter(|f| f.kind == LogFileKind::Commit && f.version > after).collect();
        for (file, actions) in log::read_commits(self.store(), &commits).await? {
            let named = actions.iter().any(|a| match a {
                Action::CommitInfo(info) => info
                    .get("operationParameters")
                    .and_then(|p| p.get(TRANSACTION_ID_PARAMETER))
                    .and_then(|v| v.as_str())
                    .is_some_and(|id| id == transaction_id),
                _ => false,
            });
            if named {
                return Ok(Some(file.version));
            }
        }
        Ok(None)
    }

    /// Undoes commit `version` by a new commit on the latest snapshot: the files it added that
    /// are still live are removed, the files it removed are added back (as the version before
    /// it had them), and the metadata it changed is restored. For a transaction that committed
    /// to one table and then lost on the next, or was cut short by a crash.
    pub async fn revert_version(&self, version: u64) -> Result<CommitOutcome> {
        if self.is_staged() {
            return Err(Error::Internal("revert_version on a staged handle".into()));
        }
        let actions = log::read_commit(self.store(), version).await?;
        let before = self.snapshot_at_version(version.saturating_sub(1)).await?;
        let latest = self.snapshot().await?;
        let mut transaction = Transaction::new(Some(&latest), "TRANSACTION ROLLBACK");
        transaction.parameter("revertedVersion", version);
        if actions.iter().any(|a| matches!(a, Action::Metadata(_))) {
            transaction.add_action(Action::Metadata(before.metadata().clone()));
        }
        let live: HashSet<_> = latest.files().map(|f| f.key()).collect();
        let now = now_ms();
        for action in &actions {
            match action {
                Action::Add(add) if live.contains(&add.key()) => {
                    transaction.add_action(Action::Remove(add.to_remove(now, true)));
                }
                Action::Remove(remove) if !live.contains(&remove.key()) => {
                    if let Some(add) = before.files().find(|f| f.key() == remove.key()) {
                        transaction.add_action(Action::Add((**add).clone()));
                    }
                }
                _ => {}
            }
        }
        self.commit(&latest, transaction).await
    }
}

/// One transaction that takes `base` to `after`, with the flags of the staged commits.
fn net_transaction(base: &Snapshot, after: &Snapshot, commits: &[StagedCommit]) -> Transaction {
    let operations: Vec<&str> = commits.iter().map(|c| c.transaction.operation()).collect();
    let operation = match operations.first() {
        Some(first) if operations.iter().all(|o| o == first) => first.to_string(),
        _ => "TRANSACTION".to_string(),
    };
    let mut transaction = Transaction::new(Some(base), operation);
    transaction.parameter("statements", commits.len());
    if commits.iter().any(|c| c.transaction.is_replacing_data()) {
        transaction.replaces_data();
    }
    if commits.iter().any(|c| c.transaction.is_reading_data()) {
        transaction.reads_data();
    }
    if after.protocol() != base.protocol() {
        transaction.add_action(Action::Protocol(after.protocol().clone()));
    }
    if after.metadata() != base.metadata() {
        transaction.add_action(Action::Metadata(after.metadata().clone()));
        // A schema or property change (ALTER TABLE, an index) was checked against every row (a
        // NOT NULL, a CHECK, a key): rows another writer added or removed since conflict.
        transaction.reads_data();
    }
    let now = now_ms();
    // The staged snapshots are the base with commits applied, so this visits only the changes.
    let mut changes = after.file_set().changes_since(base.file_set());
    changes.removed.sort_by(|a, b| a.path.cmp(&b.path));
    transaction.add_actions(changes.removed.into_iter().map(|f| Action::Remove(f.to_remove(now, true))));
    changes.added.sort_by(|a, b| a.path.cmp(&b.path));
    transaction.add_actions(changes.added.into_iter().map(|f| Action::Add((**f).clone())));
    for commit in commits {
        transaction.add_actions(commit.transaction.actions().iter().filter(|a| matches!(a, Action::Cdc(_))).cloned());
    }
    let mut txns: Vec<_> = after.txns().values().filter(|t| base.txns().get(&t.app_id) != Some(*t)).collect();
    txns.sort_by(|a, b| a.app_id.cmp(&b.app_id));
    transaction.add_actions(txns.into_iter().map(|t| Action::Txn(t.clone())));
    let mut domains: Vec<_> = after.domains().values().filter(|d| base.domains().get(&d.domain) != Some(*d)).collect();
    domains.sort_by(|a, b| a.domain.cmp(&b.domain));
    transaction.add_actions(domains.into_iter().map(|d| Action::DomainMetadata(d.clone())));
    transaction
}

/// The rows a file's deletion vector deletes.
async fn rows_deleted(store: &crate::store::TableStore, add: &Add) -> Result<RoaringTreemap> {
    match &add.deletion_vector {
        Some(dv) => crate::scan::read_dv(store, dv, &add.path).await,
        None => Ok(RoaringTreemap::new()),
    }
}

/// The data file paths a snapshot references.
fn referenced_paths(snapshot: &Snapshot) -> HashSet<String> {
    snapshot.files().map(|f| f.path.clone()).collect()
}

/// Deletes the data and change files that `transactions` added and `kept` does not reference
/// (best effort: a file left behind is unreferenced, and VACUUM's concern).
async fn delete_written<'a>(
    table: &Table,
    transactions: impl Iterator<Item = &'a Transaction>,
    kept: &HashSet<String>,
) {
    let mut paths = Vec::new();
    for transaction in transactions {
        for action in transaction.actions() {
            match action {
                Action::Add(add) if add.deletion_vector.is_none() && !kept.contains(&add.path) => {
                    paths.push(add.path.clone())
                }
                Action::Cdc(cdc) => paths.push(cdc.path.clone()),
                _ => {}
            }
        }
    }
    for path in paths {
        let relative = crate::store::decode_path(table.store(), &path);
        if let Err(e) = table.store().delete(&table.store().path(&relative)).await {
            tracing::debug!(table = table.location(), path, "a rolled-back file was not deleted: {e}");
        }
    }
}
