//! Row locks of READ COMMITTED transaction blocks (see [`crate::staging::isolation`]) and of
//! writers outside a block.
//!
//! An UPDATE or DELETE in a READ COMMITTED block locks the key of each row it changes in a keyed
//! table, until the block ends (COMMIT, ROLLBACK, or its session's end). Another block that
//! changes one of those rows waits until the holder's block ends, then runs its statement again
//! on the table's latest version, as PostgreSQL re-reads a row that a concurrent UPDATE changed:
//! the two do not both change the row from its old value, and neither is refused with 40001.
//! An UPDATE or DELETE outside a block locks its rows the same way until it has committed (or
//! failed): it waits for a block that holds one, and a block waits for it.
//!
//! The locks order writers; they do not decide correctness. What COMMIT checks is unchanged (a
//! row two transactions changed is 40001, whatever the locks did), so a wait that is cut short
//! costs a retry, never a lost update. A wait lasts at most
//! [`crate::DatabaseOptions::row_lock_wait`] (default [`WAIT_MAX`]): past that, the waiter
//! goes on without the lock and the first of the two to commit wins. So a block left idle holds
//! nobody up for long (where PostgreSQL waits for it forever), and two blocks that wait for each
//! other's rows (PostgreSQL's deadlock, 40P01) both go on after the wait, one of them failing
//! with 40001 at COMMIT. REPEATABLE READ and SERIALIZABLE blocks, MERGE and `INSERT ... ON
//! CONFLICT` take no row locks.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// The longest a statement waits for another block's row lock by default (PostgreSQL's
/// `deadlock_timeout`).
pub const WAIT_MAX: Duration = Duration::from_secs(1);

/// A row: its table's id and its key (in the row format of the table's first unique key).
type RowId = (String, Vec<u8>);

/// The row locks of one warehouse.
#[derive(Debug, Default)]
pub struct RowLocks {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Each locked row's holder.
    rows: HashMap<RowId, u64>,
    /// Each holder's rows, and what tells its waiters that it released them.
    holders: HashMap<u64, Holder>,
}

#[derive(Debug)]
struct Holder {
    rows: Vec<RowId>,
    released: tokio::sync::watch::Sender<bool>,
}

impl RowLocks {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Locks `keys` of table `table` for `owner` (a session's [`crate::staging::Staging`]),
    /// waiting for their holders' blocks to end (at most `wait` in all). Returns whether it took
    /// a row that another block held when it asked: that block has ended, and the row may have
    /// changed since the statement read it. A row whose wait ran out is not taken.
    pub async fn lock(&self, owner: u64, table: &str, keys: Vec<Vec<u8>>, wait: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + wait;
        let mut taken_from_another = false;
        for key in keys {
            let row = (table.to_string(), key);
            let mut waited = false;
            loop {
                let mut released = {
                    let mut state = self.state();
                    match state.rows.get(&row).copied() {
                        Some(holder) if holder == owner => break,
                        Some(holder) => match state.holders.get(&holder) {
                            Some(h) => h.released.subscribe(),
                            None => {
                                // A holder without a record: cannot happen; the row is free.
                                state.rows.remove(&row);
                                continue;
                            }
                        },
                        None => {
                            state.rows.insert(row.clone(), owner);
                            let holder = state.holders.entry(owner).or_insert_with(|| Holder {
                                rows: Vec::new(),
                                released: tokio::sync::watch::channel(false).0,
                            });
                            holder.rows.push(row);
                            taken_from_another |= waited;
                            break;
                        }
                    }
                };
                waited = true;
                let woke = tokio::time::timeout_at(deadline, released.wait_for(|done| *done)).await;
                if woke.is_err() {
                    // Waited long enough: on without the lock (see the module docs).
                    tracing::debug!(table, owner, "a row lock wait ran out; the statement goes on without it");
                    break;
                }
            }
        }
        taken_from_another
    }

    /// Releases every row `owner` holds and wakes their waiters.
    pub fn release(&self, owner: u64) {
        let mut state = self.state();
        let Some(holder) = state.holders.remove(&owner) else { return };
        for row in &holder.rows {
            if state.rows.get(row) == Some(&owner) {
                state.rows.remove(row);
            }
        }
        holder.released.send_replace(true);
    }

    /// How many rows `owner` holds.
    pub fn held_by(&self, owner: u64) -> usize {
        self.state().holders.get(&owner).map_or(0, |h| h.rows.len())
    }

    /// How many rows are locked (for tests and `sluice.locks`-like views).
    pub fn locked_rows(&self) -> usize {
        self.state().rows.len()
    }
}

/// A new owner id for [`RowLocks`] (one per session's staging).
pub fn new_owner() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_waiter_goes_on_when_the_holder_releases() {
        let locks = Arc::new(RowLocks::default());
        assert!(!locks.lock(1, "t", vec![b"a".to_vec(), b"b".to_vec()], WAIT_MAX).await);
        // Its own rows again: no wait.
        assert!(!locks.lock(1, "t", vec![b"a".to_vec()], WAIT_MAX).await);
        // Another table's row of the same key is another row.
        assert!(!locks.lock(2, "u", vec![b"a".to_vec()], WAIT_MAX).await);
        let waiter = {
            let locks = locks.clone();
            tokio::spawn(async move { locks.lock(2, "t", vec![b"b".to_vec()], WAIT_MAX).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "the second owner waits for the first");
        locks.release(1);
        assert!(waiter.await.expect("the waiter runs"), "it says that it took a row another held");
        assert_eq!(locks.locked_rows(), 2, "u/a and t/b, both the second owner's");
        locks.release(2);
        assert_eq!(locks.locked_rows(), 0);
    }

    #[tokio::test]
    async fn a_wait_ends_after_the_longest_wait() {
        let locks = RowLocks::default();
        let wait = Duration::from_millis(100);
        locks.lock(1, "t", vec![b"a".to_vec()], wait).await;
        let started = std::time::Instant::now();
        assert!(!locks.lock(2, "t", vec![b"a".to_vec(), b"b".to_vec()], wait).await, "it took no row another held");
        assert!(started.elapsed() >= wait);
        // It went on without a, and took b.
        locks.release(1);
        assert_eq!(locks.locked_rows(), 1);
    }
}
