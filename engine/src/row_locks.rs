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
//! nobody up for long (where PostgreSQL waits for it forever).
//!
//! Deadlocks are found as PostgreSQL finds them: a waiter that has waited
//! [`DEADLOCK_TIMEOUT`] (or its whole wait, if shorter) looks for a cycle of waits that leads
//! back to itself, and if there is one its statement fails with 40P01 ([`Deadlock`]); the check
//! and the waiter's leaving the cycle are one step under the locks' mutex, so only one of the
//! cycle's waiters fails. A block whose statement failed releases its row locks at once (see
//! `Session::run_with`), as PostgreSQL's aborted transaction does: the others go on.
//! REPEATABLE READ and SERIALIZABLE blocks, MERGE and `INSERT ... ON CONFLICT` take no row locks.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// The longest a statement waits for another block's row lock by default (PostgreSQL's
/// `deadlock_timeout`).
pub const WAIT_MAX: Duration = Duration::from_secs(1);

/// How long a waiter waits before it looks for a deadlock (PostgreSQL's `deadlock_timeout`).
pub const DEADLOCK_TIMEOUT: Duration = Duration::from_secs(1);

/// The longest chain of waits a deadlock check follows (each owner waits for one holder at a
/// time, so a chain longer than the owners that wait cannot be a new cycle).
const WAIT_CHAIN_MAX: usize = 10_000;

/// A lock wait that closed a cycle of waits: the statement fails with 40P01.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlock {
    /// The holder the waiter waited for.
    pub holder: u64,
}

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
    /// Each waiting owner's holder, for the deadlock check.
    waits: HashMap<u64, u64>,
}

impl State {
    /// Whether the holders `owner` would wait for, followed from `holder`, lead back to it.
    fn closes_a_cycle(&self, owner: u64, holder: u64) -> bool {
        let mut current = holder;
        for _ in 0..WAIT_CHAIN_MAX {
            if current == owner {
                return true;
            }
            match self.waits.get(&current) {
                Some(next) => current = *next,
                None => return false,
            }
        }
        false
    }
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
    /// changed since the statement read it. A row whose wait ran out is not taken. A wait that
    /// closes a cycle of waits is a [`Deadlock`] (see the module docs); the rows taken before it
    /// stay the owner's.
    pub async fn lock(
        &self,
        owner: u64,
        table: &str,
        keys: Vec<Vec<u8>>,
        wait: Duration,
    ) -> std::result::Result<bool, Deadlock> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut taken_from_another = false;
        for key in keys {
            let row = (table.to_string(), key);
            let mut waited = false;
            let mut check_at = tokio::time::Instant::now() + DEADLOCK_TIMEOUT.min(wait);
            loop {
                let (mut released, holder) = {
                    let mut state = self.state();
                    match state.rows.get(&row).copied() {
                        Some(holder) if holder == owner => break,
                        Some(holder) => match state.holders.get(&holder) {
                            Some(h) => {
                                let released = h.released.subscribe();
                                state.waits.insert(owner, holder);
                                (released, holder)
                            }
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
                let woke = tokio::time::timeout_at(check_at.min(deadline), released.wait_for(|done| *done)).await;
                let mut state = self.state();
                state.waits.remove(&owner);
                if woke.is_ok() {
                    continue;
                }
                if state.closes_a_cycle(owner, holder) {
                    tracing::debug!(table, owner, holder, "a row lock wait closes a cycle of waits: deadlock");
                    return Err(Deadlock { holder });
                }
                if tokio::time::Instant::now() >= deadline {
                    // Waited long enough: on without the lock (see the module docs).
                    tracing::debug!(table, owner, "a row lock wait ran out; the statement goes on without it");
                    break;
                }
                check_at += DEADLOCK_TIMEOUT;
            }
        }
        Ok(taken_from_another)
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
        assert_eq!(locks.lock(1, "t", vec![b"a".to_vec(), b"b".to_vec()], WAIT_MAX).await, Ok(false));
        // Its own rows again: no wait.
        assert_eq!(locks.lock(1, "t", vec![b"a".to_vec()], WAIT_MAX).await, Ok(false));
        // Another table's row of the same key is another row.
        assert_eq!(locks.lock(2, "u", vec![b"a".to_vec()], WAIT_MAX).await, Ok(false));
        let waiter = {
            let locks = locks.clone();
            tokio::spawn(async move { locks.lock(2, "t", vec![b"b".to_vec()], WAIT_MAX).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "the second owner waits for the first");
        locks.release(1);
        assert_eq!(waiter.await.expect("the waiter runs"), Ok(true), "it says that it took a row another held");
        assert_eq!(locks.locked_rows(), 2, "u/a and t/b, both the second owner's");
        locks.release(2);
        assert_eq!(locks.locked_rows(), 0);
    }

    #[tokio::test]
    async fn a_wait_ends_after_the_longest_wait() {
        let locks = RowLocks::default();
        let wait = Duration::from_millis(100);
        assert_eq!(locks.lock(1, "t", vec![b"a".to_vec()], wait).await, Ok(false));
        let started = std::time::Instant::now();
        assert_eq!(
            locks.lock(2, "t", vec![b"a".to_vec(), b"b".to_vec()], wait).await,
            Ok(false),
            "it took no row another held"
        );
        assert!(started.elapsed() >= wait);
        // It went on without a, and took b.
        locks.release(1);
        assert_eq!(locks.locked_rows(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_waiter_that_closes_a_cycle_fails_and_the_other_goes_on() {
        let locks = Arc::new(RowLocks::default());
        let wait = Duration::from_secs(60);
        assert_eq!(locks.lock(1, "t", vec![b"a".to_vec()], wait).await, Ok(false));
        assert_eq!(locks.lock(2, "t", vec![b"b".to_vec()], wait).await, Ok(false));
        // 3 waits for 1 (a chain, not a cycle).
        let chained = {
            let locks = locks.clone();
            tokio::spawn(async move { locks.lock(3, "t", vec![b"a".to_vec()], wait).await })
        };
        let first = {
            let locks = locks.clone();
            tokio::spawn(async move { locks.lock(1, "t", vec![b"b".to_vec()], wait).await })
        };
        let second = {
            let locks = locks.clone();
            tokio::spawn(async move { locks.lock(2, "t", vec![b"a".to_vec()], wait).await })
        };
        // One of the two in the cycle fails at its check (after DEADLOCK_TIMEOUT, not `wait`);
        // its owner then releases its rows (its statement failed), and the other takes them.
        let (failed, winner, waiting) = loop {
            tokio::time::sleep(Duration::from_millis(20)).await;
            if first.is_finished() {
                break (first.await.expect("runs"), 2, second);
            }
            if second.is_finished() {
                break (second.await.expect("runs"), 1, first);
            }
        };
        let loser = if winner == 1 { 2 } else { 1 };
        assert_eq!(failed, Err(Deadlock { holder: winner }));
        assert!(!chained.is_finished(), "3 is in no cycle: it still waits");
        locks.release(loser);
        assert_eq!(waiting.await.expect("runs"), Ok(true));
        locks.release(winner);
        assert_eq!(chained.await.expect("runs"), Ok(true));
        locks.release(3);
        assert_eq!(locks.locked_rows(), 0);
        assert!(locks.state().waits.is_empty());
    }
}
