//! A hash map from keys in Arrow's row format to values, for lookups that miss the caches: the
//! state of incremental views and the key indexes of tables.
//!
//! The maintained state is much larger than the caches, so a lookup is a cache miss, and with a
//! map of boxed keys it is three in a row: the control bytes, the slot they point to, the key the
//! slot points to. Here a slot holds the key's hash, its bytes (up to [`INLINE`] inline, longer
//! ones in an arena) and the value, and a key's first slot follows from its hash alone. So a loop
//! over a change's rows hashes them all first, prefetches the slots of a batch of them
//! ([`KeyMap::prefetch`]), then looks them up: one miss per lookup, overlapped.
//!
//! Open addressing with linear probing, at most 3/4 full; a removal shifts the slots after it
//! back (no tombstones).
// Indexes here are positions the operator itself assigned (group ids, row positions of its own
// batches, key slots); input reaches them only through those, so an index out of range would be a
// bug in the operator. Reviewed for issue 19; the hot loops keep plain indexing.
#![allow(clippy::indexing_slicing)]

use std::hash::BuildHasher;

/// Keys up to this many bytes live in their slot.
const INLINE: usize = 16;
/// Set in every stored hash: a slot whose hash is 0 is empty.
const OCCUPIED: u64 = 1 << 63;
/// Arena bytes of removed keys that make a rebuild worthwhile (when they are half of it).
const ARENA_DEAD_MIN: usize = 1 << 16;

/// A prefetch hint for the cache line at `at` (nothing on targets without one).
#[inline(always)]
pub fn prefetch(at: *const u8) {
    // SAFETY: `prefetch` is a hint: it never reads memory into the program and never faults, on
    // any address, and SSE (its target feature) is part of every x86_64 CPU.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

#[derive(Default, Clone)]
struct Slot<V> {
    /// The key's hash with [`OCCUPIED`] set, or 0.
    hash: u64,
    /// The key's bytes, or (a longer key) its offset in the arena in the first 8 bytes.
    key: [u8; INLINE],
    len: u32,
    value: V,
}

fn key_of<'a, V>(arena: &'a [u8], slot: &'a Slot<V>) -> &'a [u8] {
    let len = slot.len as usize;
    if len <= INLINE {
        &slot.key[..len]
    } else {
        let mut offset = [0u8; 8];
        offset.copy_from_slice(&slot.key[..8]);
        let at = u64::from_le_bytes(offset) as usize;
        &arena[at..at + len]
    }
}

#[derive(Clone)]
pub struct KeyMap<V> {
    /// A power of two of them, or none before the first insert.
    slots: Vec<Slot<V>>,
    /// The bytes of keys longer than [`INLINE`].
    arena: Vec<u8>,
    /// Arena bytes of removed keys (dropped when the slots are rebuilt).
    arena_dead: usize,
    len: usize,
    state: foldhash::fast::RandomState,
}

impl<V: Default> Default for KeyMap<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V: Default> KeyMap<V> {
    pub fn new() -> Self {
        Self::with_state(Default::default())
    }

    /// A map that hashes as the one whose [`Self::state`] this is: a key's hash is then good
    /// for both.
    pub fn with_state(state: foldhash::fast::RandomState) -> Self {
        Self { slots: Vec::new(), arena: Vec::new(), arena_dead: 0, len: 0, state }
    }

    pub fn state(&self) -> &foldhash::fast::RandomState {
        &self.state
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn clear(&mut self) {
        self.slots = Vec::new();
        self.arena = Vec::new();
        self.arena_dead = 0;
        self.len = 0;
    }

    /// The hash that the `*_hashed` methods take for `key`.
    pub fn hash(&self, key: &[u8]) -> u64 {
        self.state.hash_one(key) | OCCUPIED
    }

    /// Asks the CPU to load the first slot of a key with this hash: a hint, never an error.
    pub fn prefetch(&self, hash: u64) {
        if let Some(slot) = self.slots.get(hash as usize & self.slots.len().wrapping_sub(1)) {
            prefetch(slot as *const Slot<V> as *const u8);
        }
    }

    /// The slot of `key` (Ok), or the empty slot where it would go (Err). The slots must exist.
    fn find(&self, hash: u64, key: &[u8]) -> Result<usize, usize> {
        let mask = self.slots.len() - 1;
        let mut i = hash as usize & mask;
        loop {
            let slot = &self.slots[i];
            if slot.hash == 0 {
                return Err(i);
            }
            if slot.hash == hash && slot.len as usize == key.len() && key_of(&self.arena, slot) == key {
                return Ok(i);
            }
            i = (i + 1) & mask;
        }
    }

    fn position(&self, hash: u64, key: &[u8]) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        self.find(hash, key).ok()
    }

    pub fn get_hashed(&self, hash: u64, key: &[u8]) -> Option<&V> {
        self.position(hash, key).map(|i| &self.slots[i].value)
    }

    pub fn get_mut_hashed(&mut self, hash: u64, key: &[u8]) -> Option<&mut V> {
        self.position(hash, key).map(|i| &mut self.slots[i].value)
    }

    pub fn get(&self, key: &[u8]) -> Option<&V> {
        self.get_hashed(self.hash(key), key)
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut V> {
        self.get_mut_hashed(self.hash(key), key)
    }

    /// Sets `key`'s value; returns the one it had.
    pub fn insert_hashed(&mut self, hash: u64, key: &[u8], value: V) -> Option<V> {
        let (i, new) = self.slot_for(hash, key);
        let old = std::mem::replace(&mut self.slots[i].value, value);
        (!new).then_some(old)
    }

    /// `key`'s value, added as `V::default()` if the key is new.
    pub fn entry_hashed(&mut self, hash: u64, key: &[u8]) -> &mut V {
        let (i, _) = self.slot_for(hash, key);
        &mut self.slots[i].value
    }

    /// `key`'s slot, taken for it if the key is new (then true).
    fn slot_for(&mut self, hash: u64, key: &[u8]) -> (usize, bool) {
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.rebuild((self.slots.len() * 2).max(16));
        }
        match self.find(hash, key) {
            Ok(i) => (i, false),
            Err(i) => {
                let slot = &mut self.slots[i];
                slot.hash = hash;
                slot.len = key.len() as u32;
                if key.len() <= INLINE {
                    slot.key[..key.len()].copy_from_slice(key);
                } else {
                    slot.key[..8].copy_from_slice(&(self.arena.len() as u64).to_le_bytes());
                    self.arena.extend_from_slice(key);
                }
                self.len += 1;
                (i, true)
            }
        }
    }

    pub fn insert(&mut self, key: &[u8], value: V) -> Option<V> {
        self.insert_hashed(self.hash(key), key, value)
    }

    /// Removes `key`; returns its value.
    pub fn remove_hashed(&mut self, hash: u64, key: &[u8]) -> Option<V> {
        let i = self.position(hash, key)?;
        let value = std::mem::take(&mut self.slots[i].value);
        if self.slots[i].len as usize > INLINE {
            self.arena_dead += self.slots[i].len as usize;
        }
        // Each slot after the hole that may move back into it (its first slot is not between
        // the hole and it) does; the hole moves to where it was.
        let mask = self.slots.len() - 1;
        let mut hole = i;
        let mut j = (i + 1) & mask;
        while self.slots[j].hash != 0 {
            let home = self.slots[j].hash as usize & mask;
            if j.wrapping_sub(home) & mask >= j.wrapping_sub(hole) & mask {
                self.slots.swap(hole, j);
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.slots[hole] = Slot::default();
        self.len -= 1;
        if self.arena_dead >= ARENA_DEAD_MIN && self.arena_dead * 2 > self.arena.len() {
            self.rebuild(self.slots.len());
        }
        Some(value)
    }

    pub fn remove(&mut self, key: &[u8]) -> Option<V> {
        self.remove_hashed(self.hash(key), key)
    }

    /// The slot of the entry with this hash whose value `matches`.
    fn slot_where(&self, hash: u64, matches: impl Fn(&V) -> bool) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = hash as usize & mask;
        loop {
            let slot = &self.slots[i];
            if slot.hash == 0 {
                return None;
            }
            if slot.hash == hash && matches(&slot.value) {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// The value of the entry with this hash that `matches` (the caller knows the hash and
    /// something of the value, not the key).
    pub fn get_mut_hashed_where(&mut self, hash: u64, matches: impl Fn(&V) -> bool) -> Option<&mut V> {
        let i = self.slot_where(hash, matches)?;
        Some(&mut self.slots[i].value)
    }

    /// The key of the entry with this hash whose value `matches`.
    pub fn key_hashed_where(&self, hash: u64, matches: impl Fn(&V) -> bool) -> Option<&[u8]> {
        let i = self.slot_where(hash, matches)?;
        Some(key_of(&self.arena, &self.slots[i]))
    }

    /// Removes the entry with this hash whose value `matches` (the caller knows the value and
    /// the hash, not the key); returns its value.
    pub fn remove_hashed_where(&mut self, hash: u64, matches: impl Fn(&V) -> bool) -> Option<V> {
        let key = self.key_hashed_where(hash, matches)?.to_vec();
        self.remove_hashed(hash, &key)
    }

    /// Moves the entries into `capacity` slots (a power of two), with an arena of live keys only.
    fn rebuild(&mut self, capacity: usize) {
        let old = std::mem::replace(&mut self.slots, (0..capacity).map(|_| Slot::default()).collect());
        let arena = std::mem::take(&mut self.arena);
        self.arena_dead = 0;
        let mask = capacity - 1;
        for mut slot in old.into_iter().filter(|slot| slot.hash != 0) {
            if slot.len as usize > INLINE {
                let key = key_of(&arena, &slot);
                let at = self.arena.len() as u64;
                self.arena.extend_from_slice(key);
                slot.key[..8].copy_from_slice(&at.to_le_bytes());
            }
            let mut i = slot.hash as usize & mask;
            while self.slots[i].hash != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = slot;
        }
    }

    /// Each key with its value, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &V)> + '_ {
        self.slots.iter().filter(|slot| slot.hash != 0).map(|slot| (key_of(&self.arena, slot), &slot.value))
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> + '_ {
        self.slots.iter_mut().filter(|slot| slot.hash != 0).map(|slot| &mut slot.value)
    }
}

/// How many shards a [`SharedKeyMap`] has (a power of two).
const SHARDS: usize = 256;

/// A [`KeyMap`] in shards that copies share until one writes: a clone costs [`SHARDS`] reference
/// counts, and the first write to a shard after a clone copies that shard only. The key index of
/// a table is one, so that a transaction's own copy of it costs what the transaction writes, not
/// what the table holds.
#[derive(Clone)]
pub struct SharedKeyMap<V> {
    shards: Vec<std::sync::Arc<KeyMap<V>>>,
    state: foldhash::fast::RandomState,
}

impl<V: Default + Clone> Default for SharedKeyMap<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V: Default + Clone> SharedKeyMap<V> {
    pub fn new() -> Self {
        let state = foldhash::fast::RandomState::default();
        let shards = (0..SHARDS).map(|_| std::sync::Arc::new(KeyMap::with_state(state.clone()))).collect();
        Self { shards, state }
    }

    pub fn state(&self) -> &foldhash::fast::RandomState {
        &self.state
    }

    /// The hash that the `*_hashed` methods take for `key` (the same as a [`KeyMap`] with this
    /// state gives).
    pub fn hash(&self, key: &[u8]) -> u64 {
        self.state.hash_one(key) | OCCUPIED
    }

    /// A shard by bits of the hash that a shard's own slots do not use first.
    fn shard_of(hash: u64) -> usize {
        (hash >> 48) as usize & (SHARDS - 1)
    }

    fn shard(&self, hash: u64) -> &KeyMap<V> {
        &self.shards[Self::shard_of(hash)]
    }

    fn shard_mut(&mut self, hash: u64) -> &mut KeyMap<V> {
        std::sync::Arc::make_mut(&mut self.shards[Self::shard_of(hash)])
    }

    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.shards.iter().all(|s| s.is_empty())
    }

    pub fn get_hashed(&self, hash: u64, key: &[u8]) -> Option<&V> {
        self.shard(hash).get_hashed(hash, key)
    }

    pub fn get(&self, key: &[u8]) -> Option<&V> {
        self.get_hashed(self.hash(key), key)
    }

    /// Sets `key`'s value; returns the one it had.
    pub fn insert_hashed(&mut self, hash: u64, key: &[u8], value: V) -> Option<V> {
        self.shard_mut(hash).insert_hashed(hash, key, value)
    }

    pub fn insert(&mut self, key: &[u8], value: V) -> Option<V> {
        self.insert_hashed(self.hash(key), key, value)
    }

    pub fn remove(&mut self, key: &[u8]) -> Option<V> {
        let hash = self.hash(key);
        self.shard(hash).get_hashed(hash, key)?;
        self.shard_mut(hash).remove_hashed(hash, key)
    }

    /// See [`KeyMap::get_mut_hashed_where`] (a shard shared with a copy is copied first, only
    /// if an entry matches).
    pub fn get_mut_hashed_where(&mut self, hash: u64, matches: impl Fn(&V) -> bool) -> Option<&mut V> {
        self.shard(hash).key_hashed_where(hash, &matches)?;
        self.shard_mut(hash).get_mut_hashed_where(hash, matches)
    }

    /// See [`KeyMap::remove_hashed_where`].
    pub fn remove_hashed_where(&mut self, hash: u64, matches: impl Fn(&V) -> bool) -> Option<V> {
        self.shard(hash).key_hashed_where(hash, &matches)?;
        self.shard_mut(hash).remove_hashed_where(hash, matches)
    }

    /// See [`KeyMap::key_hashed_where`].
    pub fn key_hashed_where(&self, hash: u64, matches: impl Fn(&V) -> bool) -> Option<&[u8]> {
        self.shard(hash).key_hashed_where(hash, matches)
    }

    /// Each key with its value, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &V)> + '_ {
        self.shards.iter().flat_map(|s| s.iter())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// A key of `len` bytes made from `n` (short ones inline, long ones in the arena).
    fn key(n: u64, len: usize) -> Vec<u8> {
        let mut key = n.to_le_bytes().repeat(len / 8 + 1);
        key.truncate(len);
        key
    }

    #[test]
    fn agrees_with_a_std_map_through_inserts_and_removals_of_short_and_long_keys() {
        let mut map: KeyMap<u64> = KeyMap::new();
        let mut expected: HashMap<Vec<u8>, u64> = HashMap::new();
        // A simple generator: many keys collide on their first slots and removals shift runs.
        let mut x: u64 = 7;
        for step in 0..40_000_u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let n = (x >> 33) % 3_000;
            let k = key(n, if n.is_multiple_of(3) { 40 } else { 9 });
            if (x >> 20).is_multiple_of(3) {
                assert_eq!(map.remove(&k), expected.remove(&k), "remove at step {step}");
            } else {
                assert_eq!(map.insert(&k, step), expected.insert(k.clone(), step), "insert at step {step}");
            }
            assert_eq!(map.len(), expected.len());
        }
        for (k, v) in &expected {
            assert_eq!(map.get(k), Some(v));
        }
        let mut seen: Vec<(Vec<u8>, u64)> = map.iter().map(|(k, v)| (k.to_vec(), *v)).collect();
        let mut want: Vec<(Vec<u8>, u64)> = expected.into_iter().collect();
        seen.sort();
        want.sort();
        assert_eq!(seen, want);
    }

    #[test]
    fn a_shared_map_and_its_clone_diverge_only_where_written() {
        let mut map: SharedKeyMap<u64> = SharedKeyMap::new();
        for n in 0..10_000 {
            map.insert(&key(n, 9), n);
        }
        let mut copy = map.clone();
        for n in 0..100 {
            assert_eq!(copy.remove(&key(n, 9)), Some(n));
            copy.insert(&key(20_000 + n, 40), n);
        }
        assert_eq!(copy.remove(&key(99_999, 9)), None);
        let hash = copy.hash(&key(500, 9));
        assert_eq!(copy.get_mut_hashed_where(hash, |v| *v == 501), None);
        *copy.get_mut_hashed_where(hash, |v| *v == 500).unwrap() = 7;
        assert_eq!(map.len(), 10_000);
        assert_eq!(copy.len(), 10_000);
        for n in 0..10_000 {
            assert_eq!(map.get(&key(n, 9)), Some(&n));
        }
        assert_eq!(copy.get(&key(5, 9)), None);
        assert_eq!(copy.get(&key(500, 9)), Some(&7));
        assert_eq!(copy.get(&key(20_005, 40)), Some(&5));
        assert_eq!(map.get(&key(20_005, 40)), None);
        assert!(copy.remove_hashed_where(copy.hash(&key(600, 9)), |v| *v == 600).is_some());
        assert_eq!(map.get(&key(600, 9)), Some(&600));
        assert_eq!(copy.iter().count(), 9_999);
    }

    #[test]
    fn the_arena_of_long_keys_is_compacted_and_keys_stay_found() {
        let mut map: KeyMap<u32> = KeyMap::new();
        for round in 0..4_u64 {
            for n in 0..5_000 {
                map.insert(&key(round * 10_000 + n, 64), n as u32);
            }
            for n in 0..5_000 {
                assert_eq!(map.remove(&key(round * 10_000 + n, 64)), Some(n as u32));
            }
        }
        assert!(map.is_empty());
        assert!(map.arena.len() < 5_000 * 64, "arena of {} bytes after every key went", map.arena.len());
        map.insert(&key(1, 64), 1);
        *map.entry_hashed(map.hash(&key(2, 3)), &key(2, 3)) += 5;
        assert_eq!(map.get(&key(1, 64)), Some(&1));
        assert_eq!(map.get(&key(2, 3)), Some(&5));
        assert_eq!(map.get(&key(3, 3)), None);
        map.clear();
        assert_eq!(map.get(&key(1, 64)), None);
    }
}
