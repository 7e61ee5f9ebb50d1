//! Maps keyed by rows in Arrow's row format, with short keys stored inline.
//!
//! Group keys, join keys and unique output keys are mostly a few bytes: an integer id is 9 in row
//! format. A key of up to 15 bytes is packed with its length into a `u128` and stored in the hash
//! table itself, so a lookup compares two integers where a boxed key would cost a cache miss to
//! read and a call to compare. Longer keys go to a second map of boxed bytes.

use datafusion::common::HashMap;

use super::dataflow::RowBytes;

/// A key that fits inline: its bytes, then zeros, then its length in the last byte.
fn short(key: &[u8]) -> Option<u128> {
    if key.len() >= 16 {
        return None;
    }
    let mut packed = [0u8; 16];
    packed[..key.len()].copy_from_slice(key);
    packed[15] = key.len() as u8;
    Some(u128::from_le_bytes(packed))
}

/// The bytes of an inline key.
fn unpack(packed: u128) -> ([u8; 16], usize) {
    let bytes = packed.to_le_bytes();
    let len = bytes[15] as usize;
    (bytes, len)
}

pub struct KeyMap<V> {
    short: HashMap<u128, V>,
    long: HashMap<RowBytes, V>,
}

impl<V> Default for KeyMap<V> {
    fn default() -> Self {
        Self { short: HashMap::new(), long: HashMap::new() }
    }
}

impl<V> KeyMap<V> {
    pub fn len(&self) -> usize {
        self.short.len() + self.long.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn clear(&mut self) {
        self.short.clear();
        self.long.clear();
    }

    pub fn get(&self, key: &[u8]) -> Option<&V> {
        match short(key) {
            Some(packed) => self.short.get(&packed),
            None => self.long.get(key),
        }
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut V> {
        match short(key) {
            Some(packed) => self.short.get_mut(&packed),
            None => self.long.get_mut(key),
        }
    }

    /// Inserts a value; returns the one the key had.
    pub fn insert(&mut self, key: &[u8], value: V) -> Option<V> {
        match short(key) {
            Some(packed) => self.short.insert(packed, value),
            None => self.long.insert(key.into(), value),
        }
    }

    pub fn remove(&mut self, key: &[u8]) -> Option<V> {
        match short(key) {
            Some(packed) => self.short.remove(&packed),
            None => self.long.remove(key),
        }
    }

    /// The key's value, inserted from `make` when it has none.
    pub fn get_or_insert_with(&mut self, key: &[u8], make: impl FnOnce() -> V) -> &mut V {
        match short(key) {
            Some(packed) => self.short.entry(packed).or_insert_with(make),
            None => self.long.entry(key.into()).or_insert_with(make),
        }
    }

    /// Calls `f` with each key's bytes and value.
    pub fn for_each(&self, mut f: impl FnMut(&[u8], &V)) {
        for (packed, value) in &self.short {
            let (bytes, len) = unpack(*packed);
            f(&bytes[..len], value);
        }
        for (key, value) in &self.long {
            f(key, value);
        }
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.short.values_mut().chain(self.long.values_mut())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn short_and_long_keys_are_distinct_and_read_back() {
        let mut map: KeyMap<usize> = KeyMap::default();
        // Keys that differ only in length or trailing zeros must stay apart.
        let keys: Vec<Vec<u8>> =
            vec![vec![], vec![0], vec![0, 0], vec![1], vec![1, 0], vec![7; 15], vec![7; 16], vec![7; 40], vec![0; 15]];
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(map.insert(key, i), None);
        }
        assert_eq!(map.len(), keys.len());
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(map.get(key), Some(&i), "{key:?}");
        }
        let mut seen = BTreeMap::new();
        map.for_each(|key, value| {
            seen.insert(key.to_vec(), *value);
        });
        assert_eq!(seen, keys.iter().cloned().enumerate().map(|(i, k)| (k, i)).collect());
        *map.get_or_insert_with(&[7; 40], || 99) += 100;
        assert_eq!(map.get(&[7; 40]), Some(&107));
        assert_eq!(*map.get_or_insert_with(&[9; 3], || 5), 5);
        assert_eq!(map.remove(&[0, 0]), Some(2));
        assert_eq!(map.remove(&[7; 16]), Some(6));
        assert_eq!(map.get(&[0, 0]), None);
        assert_eq!(map.get(&[0]), Some(&1));
        map.values_mut().for_each(|v| *v += 1);
        assert_eq!(map.get(&[]), Some(&1));
        map.clear();
        assert!(map.is_empty());
    }
}
