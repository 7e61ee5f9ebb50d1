//! Checkpoints of a view: its rows into its Delta table, its operator state into a side file.
//!
//! The state file `_sluice_state/<n>.bin` (in the view table's folder; Delta readers and VACUUM
//! ignore folders starting with `_`) is written first; then one commit overwrites the table's
//! rows and carries `txn('ivm-state', n)` and `txn('ivm-input:<table>', version)` per input. A crash
//! before the commit leaves an unreferenced file; after it, the checkpoint is whole.
//!
//! The file: a header (format, Sluice version, the dataflow's fingerprint), then each stateful
//! operator's entries in tree order, rows as Arrow row-format bytes. A file of another version or
//! shape is refused (the view is rebuilt).

use bytes::Bytes;
use datafusion::common::HashMap;
use sluice_storage::actions::Txn;
use sluice_storage::store::{PutOutcome, TableStore};
use sluice_storage::write::{SaveMode, WriteRequest};

use super::aggregate::{AggState, AggregateNode, Extreme, GroupState};
use super::dataflow::{Node, RowBytes};
use super::join::KeyRows;
use super::view::{LiveView, Strategy};
use crate::change::Operation;
use crate::error::{Error, Result};
use crate::warehouse::Warehouse;

const MAGIC: &str = "sluice-ivm-state-1";
/// The txn naming the state file of the checkpoint.
pub const STATE_APP_ID: &str = "ivm-state";
const STATE_FOLDER: &str = "_sluice_state";

pub fn input_app_id(table_key: &str) -> String {
    format!("ivm-input:{table_key}")
}

fn state_path(sequence: u64) -> String {
    format!("{STATE_FOLDER}/{sequence:020}.bin")
}

/// How often a checkpoint is tried again after another process's commit to the view's table (its
/// own checkpoint of the same view, usually) won the race.
const CHECKPOINT_ATTEMPTS: usize = 5;
/// Numbers tried for a new state file when other checkpoints take them first.
const STATE_FILE_ATTEMPTS: u64 = 64;

/// Writes a checkpoint; returns the view table's version that holds it.
///
/// Another process that maintains the same view checkpoints it too. Both commits carry
/// `txn('ivm-state')`, so one of two concurrent checkpoints loses; the loser starts again from the
/// winner's version (either state is a valid starting point: a restart replays what follows it).
pub async fn checkpoint(db: &Warehouse, live: &mut LiveView) -> Result<u64> {
    let table = db.open_table(&live.entry).await?;
    let store = table.store().clone();
    let state = Bytes::from(encode(live)?);
    let batches: Vec<_> = live.output.batches()?.iter().filter(|b| b.num_rows() > 0).cloned().collect();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let snapshot = table.snapshot().await?;
        let sequence = create_state_file(&store, snapshot.version() + 1, state.clone()).await?;
        let now = chrono::Utc::now().timestamp_millis();
        let mut txns = vec![Txn { app_id: STATE_APP_ID.into(), version: sequence as i64, last_updated: Some(now) }];
        for (key, input) in &live.inputs {
            let version = input.version.map(|v| v as i64).unwrap_or(-1);
            txns.push(Txn { app_id: input_app_id(key), version, last_updated: Some(now) });
        }
        let request = WriteRequest {
            batches: batches.clone(),
            mode: SaveMode::Overwrite,
            txns,
            operation: Some("MATERIALIZED VIEW CHECKPOINT".into()),
            ..Default::default()
        };
        let outcome = table.write_on(&snapshot, request).await?;
        let key = live.entry.qualified_name();
        let version = match db.writer.commit(&key, Operation::ViewCheckpoint, None, outcome).await {
            Ok(version) => version,
            Err(Error::SerializationFailure(reason)) if attempt < CHECKPOINT_ATTEMPTS => {
                tracing::debug!(view = %live.entry.name, %reason, "view checkpoint lost a race; trying again");
                let _ = store.delete(&store.path(&state_path(sequence))).await;
                continue;
            }
            Err(e) => {
                let _ = store.delete(&store.path(&state_path(sequence))).await;
                return Err(e);
            }
        };
        // Older state files are no longer named by the latest checkpoint. A file of another
        // process's checkpoint in flight has a higher number (numbers only grow, see
        // create_state_file) or belongs to a commit that will lose to this one.
        for older in state_files(&store).await?.into_iter().filter(|n| *n < sequence) {
            let _ = store.delete(&store.path(&state_path(older))).await;
        }
        return Ok(version);
    }
}

/// The state files in a view table's folder, by number.
async fn state_files(store: &TableStore) -> Result<Vec<u64>> {
    let listed = store.list(&store.path(STATE_FOLDER), None).await?;
    Ok(listed.iter().filter_map(|meta| meta.location.filename()?.strip_suffix(".bin")?.parse::<u64>().ok()).collect())
}

/// Creates a new state file, numbered above every existing one and at least `at_least`, without
/// overwriting the file of a concurrent checkpoint (which may take a number first: the next one
/// is tried).
async fn create_state_file(store: &TableStore, at_least: u64, state: Bytes) -> Result<u64> {
    let highest = state_files(store).await?.into_iter().max();
    let first = highest.map_or(at_least, |n| (n + 1).max(at_least));
    for sequence in first..first + STATE_FILE_ATTEMPTS {
        if store.put_if_absent(&store.path(&state_path(sequence)), state.clone()).await? == PutOutcome::Created {
            return Ok(sequence);
        }
    }
    Err(Error::SerializationFailure(format!(
        "could not create a view state file: {STATE_FILE_ATTEMPTS} numbers from {first} were taken"
    )))
}

/// Loads the latest checkpoint into a freshly compiled view; `None` when there is none.
pub async fn restore(db: &Warehouse, live: &mut LiveView) -> Result<Option<u64>> {
    let table = db.open_table(&live.entry).await?;
    let snapshot = table.snapshot().await?;
    let Some(sequence) = snapshot.txn_version(STATE_APP_ID) else { return Ok(None) };
    let store = table.store();
    let bytes = store.get(&store.path(&state_path(sequence as u64))).await?;
    decode(&bytes, live)?;
    for (key, input) in live.inputs.iter_mut() {
        let version = snapshot
            .txn_version(&input_app_id(key))
            .ok_or_else(|| Error::Internal(format!("the checkpoint has no version of input {key}")))?;
        input.version = u64::try_from(version).ok();
    }
    let batches = sluice_storage::scan::scan(&snapshot, &db.scan_options()).await?;
    live.output.replace(&batches)?;
    live.output.batches()?;
    live.dirty = false;
    Ok(Some(snapshot.version()))
}

fn encode(live: &LiveView) -> Result<Vec<u8>> {
    let mut w = Writer::default();
    w.bytes(MAGIC.as_bytes());
    w.bytes(env!("CARGO_PKG_VERSION").as_bytes());
    w.bytes(live.fingerprint.as_bytes());
    if let Strategy::Incremental(node) = &live.strategy {
        encode_node(node, &mut w);
    }
    Ok(w.buf)
}

fn decode(bytes: &[u8], live: &mut LiveView) -> Result<()> {
    let mut r = Reader { buf: bytes, at: 0 };
    if r.bytes()? != MAGIC.as_bytes() || r.bytes()? != env!("CARGO_PKG_VERSION").as_bytes() {
        return Err(Error::Internal("the view state was written by another version of Sluice".into()));
    }
    if r.bytes()? != live.fingerprint.as_bytes() {
        return Err(Error::Internal("the view state is of another plan".into()));
    }
    if let Strategy::Incremental(node) = &mut live.strategy {
        decode_node(node, &mut r)?;
    }
    if r.at != bytes.len() {
        return Err(Error::Internal("the view state has trailing bytes".into()));
    }
    Ok(())
}

fn encode_node(node: &Node, w: &mut Writer) {
    match node {
        Node::Scan(_) => {}
        Node::Filter { input, .. } | Node::Project { input, .. } => encode_node(input, w),
        Node::Union { inputs, .. } => inputs.iter().for_each(|i| encode_node(i, w)),
        Node::Distinct(distinct) => {
            encode_node(&distinct.input, w);
            encode_count_map(&distinct.counts, w);
        }
        Node::Join(join) => {
            encode_node(&join.left, w);
            encode_node(&join.right, w);
            for index in [&join.left_index, &join.right_index] {
                w.u64(index.len() as u64);
                for (key, rows) in index.iter() {
                    w.bytes(key);
                    encode_counts(rows.len(), rows.iter(), w);
                }
            }
        }
        Node::Aggregate(aggregate) => {
            encode_node(&aggregate.input, w);
            encode_groups(aggregate, w);
        }
    }
}

/// Rows with their multiplicities: how many, then each row and its count.
fn encode_counts<'a>(n: usize, counts: impl Iterator<Item = (&'a [u8], i64)>, w: &mut Writer) {
    w.u64(n as u64);
    for (row, count) in counts {
        w.bytes(row);
        w.u64(count as u64);
    }
}

fn encode_count_map(counts: &HashMap<RowBytes, i64>, w: &mut Writer) {
    encode_counts(counts.len(), counts.iter().map(|(row, count)| (&row[..], *count)), w);
}

fn encode_groups(aggregate: &AggregateNode, w: &mut Writer) {
    w.u64(aggregate.started as u64);
    w.u64(aggregate.groups.len() as u64);
    for (key, group) in aggregate.groups.iter() {
        w.bytes(key);
        w.u64(group.rows as u64);
        for state in &group.aggs {
            match state {
                AggState::Count(n) => {
                    w.u64(0);
                    w.u64(*n as u64);
                }
                AggState::SumInt { sum, count } => {
                    w.u64(1);
                    w.bytes(&sum.to_le_bytes());
                    w.u64(*count as u64);
                }
                AggState::SumFloat { sum, count } => {
                    w.u64(2);
                    w.u64(sum.to_bits());
                    w.u64(*count as u64);
                }
                AggState::Distinct(values) => {
                    w.u64(3);
                    encode_count_map(values, w);
                }
                AggState::Extreme(extreme) => {
                    w.u64(4);
                    w.u64(extreme.complete as u64 | (extreme.dirty as u64) << 1);
                    w.u64(extreme.len() as u64);
                    for value in extreme.values() {
                        w.bytes(value);
                    }
                }
            }
        }
    }
}

fn decode_node(node: &mut Node, r: &mut Reader<'_>) -> Result<()> {
    match node {
        Node::Scan(_) => {}
        Node::Filter { input, .. } | Node::Project { input, .. } => decode_node(input, r)?,
        Node::Union { inputs, .. } => {
            for input in inputs {
                decode_node(input, r)?;
            }
        }
        Node::Distinct(distinct) => {
            decode_node(&mut distinct.input, r)?;
            distinct.counts = decode_count_map(r)?;
        }
        Node::Join(join) => {
            decode_node(&mut join.left, r)?;
            decode_node(&mut join.right, r)?;
            for index in [&mut join.left_index, &mut join.right_index] {
                let keys = r.u64()?;
                for _ in 0..keys {
                    let key = r.row()?;
                    let mut rows = KeyRows::default();
                    decode_counts(r, |row, count| rows.add(&row, count))?;
                    index.insert(&key, rows);
                }
            }
        }
        Node::Aggregate(aggregate) => {
            decode_node(&mut aggregate.input, r)?;
            decode_groups(aggregate, r)?;
        }
    }
    Ok(())
}

/// Reads what [`encode_counts`] wrote, handing each row and its count to `add`.
fn decode_counts(r: &mut Reader<'_>, mut add: impl FnMut(RowBytes, i64)) -> Result<()> {
    for _ in 0..r.u64()? {
        let row = r.row()?;
        add(row, r.u64()? as i64);
    }
    Ok(())
}

fn decode_count_map(r: &mut Reader<'_>) -> Result<HashMap<RowBytes, i64>> {
    let mut counts = HashMap::new();
    decode_counts(r, |row, count| {
        counts.insert(row, count);
    })?;
    Ok(counts)
}

fn decode_groups(aggregate: &mut AggregateNode, r: &mut Reader<'_>) -> Result<()> {
    aggregate.started = r.u64()? != 0;
    let groups = r.u64()?;
    for _ in 0..groups {
        let key = r.row()?;
        let rows = r.u64()? as i64;
        let mut aggs = Vec::with_capacity(aggregate.specs.len());
        for _ in 0..aggregate.specs.len() {
            aggs.push(match r.u64()? {
                0 => AggState::Count(r.u64()? as i64),
                1 => {
                    let bytes: [u8; 16] =
                        r.bytes()?.try_into().map_err(|_| Error::Internal("a view sum is not 16 bytes".into()))?;
                    AggState::SumInt { sum: i128::from_le_bytes(bytes), count: r.u64()? as i64 }
                }
                2 => AggState::SumFloat { sum: f64::from_bits(r.u64()?), count: r.u64()? as i64 },
                3 => AggState::Distinct(decode_count_map(r)?),
                4 => {
                    let flags = r.u64()?;
                    let n = r.u64()?;
                    let mut extreme = Extreme::with_flags(flags & 1 != 0, flags & 2 != 0);
                    for _ in 0..n {
                        extreme.push(r.bytes()?);
                    }
                    AggState::Extreme(extreme)
                }
                tag => return Err(Error::Internal(format!("unknown view aggregate state {tag}"))),
            });
        }
        aggregate.groups.insert(&key, GroupState { rows, aggs, seen: 0 })?;
    }
    Ok(())
}

#[derive(Default)]
struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    fn u64(&mut self, value: u64) {
        self.buf.extend_from_slice(&value.to_le_bytes());
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.u64(bytes.len() as u64);
        self.buf.extend_from_slice(bytes);
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        let end = self.at.checked_add(n);
        let slice = end.and_then(|end| self.buf.get(self.at..end));
        let slice = slice.ok_or_else(|| Error::Internal("the view state file is truncated".into()))?;
        self.at += n;
        Ok(slice)
    }

    fn u64(&mut self) -> Result<u64> {
        let bytes: [u8; 8] = self.take(8)?.try_into().map_err(|_| Error::Internal("short read".into()))?;
        Ok(u64::from_le_bytes(bytes))
    }

    fn bytes(&mut self) -> Result<&[u8]> {
        let n = self.u64()? as usize;
        self.take(n)
    }

    fn row(&mut self) -> Result<RowBytes> {
        Ok(self.bytes()?.into())
    }
}
