//! An aggregate's groups: each group's state in a slab, found by its key through an index of ids.
//!
//! A change of a thousand rows touches a thousand groups spread over a state much larger than the
//! CPU's caches, so its cost is cache misses: the index's slot (which holds the key, see
//! [`super::keymap`]), the group's state, its aggregate states, its min/max buffers. Looked up and
//! updated row by row, those misses come one after another. With the groups in a slab, a change
//! first looks up every row's group id in a loop of lookups alone, after the slots of a batch of
//! rows were prefetched by their hashes ([`Groups::prefetch_key`]), then prefetches the batch's
//! group states level by level ([`Groups::prefetch`]) and updates the groups by id.

use super::aggregate::{AggState, GroupState};
use super::dataflow::prefetch;
use crate::error::{Error, Result};
use crate::keymap::KeyMap;

#[derive(Default)]
pub struct Groups {
    index: KeyMap<u32>,
    /// By id; a free id's state is empty (no aggregate states) until it is reused.
    states: Vec<GroupState>,
    free: Vec<u32>,
}

fn unknown_group(id: u32) -> Error {
    Error::Internal(format!("a view aggregate has no group {id}"))
}

impl Groups {
    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    pub fn clear(&mut self) {
        self.index.clear();
        self.states.clear();
        self.free.clear();
    }

    /// The id of the group with `key`.
    pub fn id(&self, key: &[u8]) -> Option<u32> {
        self.index.get(key).copied()
    }

    /// The hash of `key` that [`Self::id_hashed`] and [`Self::prefetch_key`] take.
    pub fn hash(&self, key: &[u8]) -> u64 {
        self.index.hash(key)
    }

    /// The id of the group with `key`, whose [`Self::hash`] is `hash`.
    pub fn id_hashed(&self, hash: u64, key: &[u8]) -> Option<u32> {
        self.index.get_hashed(hash, key).copied()
    }

    /// Asks the CPU to load the index slot of the key with this hash: a hint, never an error.
    pub fn prefetch_key(&self, hash: u64) {
        self.index.prefetch(hash);
    }

    /// Adds a group (the caller knows `key` is new, or replaces its group); returns its id.
    pub fn insert(&mut self, key: &[u8], state: GroupState) -> Result<u32> {
        if let Some(id) = self.id(key) {
            *self.state_mut(id)? = state;
            return Ok(id);
        }
        let id = match self.free.pop() {
            Some(id) => {
                *self.state_mut(id)? = state;
                id
            }
            None => {
                let id = u32::try_from(self.states.len())
                    .map_err(|_| Error::Internal("a view aggregate has more than 2^32 groups".into()))?;
                self.states.push(state);
                id
            }
        };
        self.index.insert(key, id);
        Ok(id)
    }

    /// Forgets the group with `key`; its id may be reused.
    pub fn remove(&mut self, key: &[u8]) {
        if let Some(id) = self.index.remove(key) {
            if let Some(state) = self.states.get_mut(id as usize) {
                *state = GroupState { rows: 0, aggs: Vec::new(), seen: 0 };
                self.free.push(id);
            }
        }
    }

    pub fn state(&self, id: u32) -> Result<&GroupState> {
        self.states.get(id as usize).ok_or_else(|| unknown_group(id))
    }

    pub fn state_mut(&mut self, id: u32) -> Result<&mut GroupState> {
        self.states.get_mut(id as usize).ok_or_else(|| unknown_group(id))
    }

    /// The group with `key`.
    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut GroupState> {
        let id = self.id(key)?;
        self.states.get_mut(id as usize)
    }

    /// Each group's key and state.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &GroupState)> + '_ {
        self.index.iter().filter_map(|(key, &id)| self.states.get(id as usize).map(|state| (key, state)))
    }

    /// Asks the CPU to load group `id`'s state (`stage` 0), or, once it is there, its aggregate
    /// states (1) and the ends of the min/max buffers they point to (2): a hint, never an error.
    pub fn prefetch(&self, id: u32, stage: u8) {
        let Some(state) = self.states.get(id as usize) else { return };
        match stage {
            0 => prefetch(state as *const GroupState as *const u8),
            1 => {
                let aggs = state.aggs.as_ptr() as *const u8;
                let bytes = std::mem::size_of_val(&state.aggs[..]);
                for offset in (0..bytes).step_by(64) {
                    prefetch(aggs.wrapping_add(offset));
                }
            }
            _ => {
                for agg in &state.aggs {
                    if let AggState::Extreme(extreme) = agg {
                        let (first, last) = extreme.ends();
                        prefetch(first);
                        prefetch(last);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn state(rows: i64) -> GroupState {
        GroupState { rows, aggs: vec![AggState::Count(rows)], seen: 0 }
    }

    fn contents(groups: &Groups) -> BTreeMap<Vec<u8>, i64> {
        groups.iter().map(|(key, state)| (key.to_vec(), state.rows)).collect()
    }

    #[test]
    fn removed_groups_free_their_ids_for_new_ones_and_keys_find_their_states() {
        let mut groups = Groups::default();
        let a = groups.insert(b"a", state(1)).expect("insert a");
        let b = groups.insert(b"b", state(2)).expect("insert b");
        assert_ne!(a, b);
        assert_eq!(groups.insert(b"a", state(10)).expect("replace a"), a, "a key keeps its id");
        assert_eq!(groups.state(a).expect("a").rows, 10);
        groups.remove(b"b");
        assert_eq!(groups.id(b"b"), None);
        assert_eq!(groups.len(), 1);
        let c = groups.insert(b"c", state(3)).expect("insert c");
        assert_eq!(c, b, "the freed id is reused");
        assert_eq!(contents(&groups), BTreeMap::from([(b"a".to_vec(), 10), (b"c".to_vec(), 3)]));
        groups.get_mut(b"c").expect("c").rows += 1;
        assert_eq!(groups.state(c).expect("c").rows, 4);
        assert!(groups.state(99).is_err(), "an unknown id is an error, not a panic");
        groups.clear();
        assert!(groups.is_empty());
        assert_eq!(groups.insert(b"d", state(4)).expect("insert d"), 0, "ids start again after clear");
    }
}
