//! [`RecentObjects`]: the bytes of the small objects a warehouse wrote last, kept in memory.
//!
//! A commit is read back at once: the key index catches up by reading the file a write just made,
//! the next UPDATE of the row reads it again, and a transaction block's checks read the deletion
//! vectors it wrote. Each such read of local disk costs a trip through the blocking pool, an open
//! and a read. The objects cached here are the ones [`crate::store::TableStore`] wrote under names
//! never used before (data files, deletion vectors, log entries it created), so their bytes never
//! change: a hit is the object's exact content.
//!
//! A small data file also keeps the rows it was written from ([`RecentObjects::remember_rows`],
//! up to [`RECENT_FILE_ROWS_MAX`]): a scan of it then takes them as they are, without decoding
//! the Parquet (a one-row file costs more to open and decode than to use).
//!
//! Bounded: objects up to [`RECENT_OBJECT_BYTES_MAX`], [`RECENT_BYTES_MAX`] in all (their kept
//! rows counted), the oldest written forgotten first. A delete through the store forgets the object. A file damaged or
//! removed behind the process's back is noticed once its bytes are no longer here (as a database's
//! page cache serves what it holds).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use arrow::array::RecordBatch;
use bytes::Bytes;
use object_store::path::Path;

/// The largest object kept.
pub const RECENT_OBJECT_BYTES_MAX: usize = 1024 * 1024;
/// The most rows of a data file kept decoded beside its bytes.
pub const RECENT_FILE_ROWS_MAX: usize = 1024;
/// The bytes kept in all.
pub const RECENT_BYTES_MAX: usize = 64 * 1024 * 1024;

/// See the module documentation.
#[derive(Debug, Default)]
pub struct RecentObjects {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Each object's bytes and the number of its write.
    objects: HashMap<Path, (u64, Bytes)>,
    /// The rows some of the kept objects (data files) were written from, and their size.
    rows: HashMap<Path, (RecordBatch, usize)>,
    /// Writes in order (one forgotten or written again stays here until it comes out).
    order: VecDeque<(u64, Path)>,
    writes: u64,
    bytes: usize,
}

impl RecentObjects {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps an object just written (unless it is too large to keep).
    pub fn remember(&self, path: &Path, bytes: &Bytes) {
        if bytes.len() > RECENT_OBJECT_BYTES_MAX {
            return;
        }
        let mut inner = self.inner();
        inner.writes += 1;
        let write = inner.writes;
        if let Some((_, old)) = inner.objects.insert(path.clone(), (write, bytes.clone())) {
            inner.bytes -= old.len();
        }
        inner.forget_rows(path);
        inner.bytes += bytes.len();
        inner.order.push_back((write, path.clone()));
        inner.trim();
    }

    /// The object's bytes, if kept.
    pub fn get(&self, path: &Path) -> Option<Bytes> {
        self.inner().objects.get(path).map(|(_, bytes)| bytes.clone())
    }

    /// Keeps the rows a data file just remembered was written from (in the file's own schema),
    /// unless they are too many or its bytes are not kept.
    pub fn remember_rows(&self, path: &Path, rows: RecordBatch) {
        if rows.num_rows() > RECENT_FILE_ROWS_MAX {
            return;
        }
        let mut inner = self.inner();
        if !inner.objects.contains_key(path) {
            return;
        }
        let size = rows.get_array_memory_size();
        inner.forget_rows(path);
        inner.bytes += size;
        inner.rows.insert(path.clone(), (rows, size));
        inner.trim();
    }

    /// The rows a kept data file was written from, if kept.
    pub fn rows(&self, path: &Path) -> Option<RecordBatch> {
        self.inner().rows.get(path).map(|(rows, _)| rows.clone())
    }

    /// Forgets an object (deleted).
    pub fn forget(&self, path: &Path) {
        let mut inner = self.inner();
        if let Some((_, old)) = inner.objects.remove(path) {
            inner.bytes -= old.len();
        }
        inner.forget_rows(path);
        inner.trim();
    }
}

impl Inner {
    fn forget_rows(&mut self, path: &Path) {
        if let Some((_, size)) = self.rows.remove(path) {
            self.bytes -= size;
        }
    }

    /// Forgets the oldest objects past the bound. Forgotten objects and those written again
    /// linger in `order` until they come out at its front: it is bounded too, so that it cannot
    /// grow without end.
    fn trim(&mut self) {
        while let Some((write, oldest)) = self.order.front() {
            let live = self.objects.get(oldest).is_some_and(|(w, _)| w == write);
            let over = self.bytes > RECENT_BYTES_MAX || self.order.len() > 2 * self.objects.len() + 64;
            if live && !over {
                break;
            }
            let Some((write, oldest)) = self.order.pop_front() else { break };
            // Only the object of that write (not one written again since).
            if self.objects.get(&oldest).is_some_and(|(w, _)| *w == write) {
                if let Some((_, old)) = self.objects.remove(&oldest) {
                    self.bytes -= old.len();
                }
                self.forget_rows(&oldest);
            }
        }
    }
}

/// `range` of `bytes`, or None when it reaches past their end (the store's own read then reports
/// the error).
pub fn slice(bytes: &Bytes, range: &std::ops::Range<u64>) -> Option<Bytes> {
    let start = usize::try_from(range.start).ok()?;
    let end = usize::try_from(range.end).ok()?;
    (start <= end && end <= bytes.len()).then(|| bytes.slice(start..end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_small_objects_forgets_the_oldest_past_the_bound_and_deleted_ones() {
        let recent = RecentObjects::default();
        let big = Bytes::from(vec![1u8; RECENT_OBJECT_BYTES_MAX + 1]);
        recent.remember(&Path::from("big"), &big);
        assert!(recent.get(&Path::from("big")).is_none());
        let chunk = Bytes::from(vec![2u8; RECENT_OBJECT_BYTES_MAX]);
        let count = RECENT_BYTES_MAX / RECENT_OBJECT_BYTES_MAX + 3;
        for i in 0..count {
            recent.remember(&Path::from(format!("f{i}")), &chunk);
        }
        assert!(recent.get(&Path::from("f0")).is_none());
        assert!(recent.get(&Path::from("f2")).is_none());
        assert_eq!(recent.get(&Path::from(format!("f{}", count - 1))), Some(chunk.clone()));
        assert!(recent.inner().bytes <= RECENT_BYTES_MAX);
        recent.forget(&Path::from(format!("f{}", count - 1)));
        assert!(recent.get(&Path::from(format!("f{}", count - 1))).is_none());
        // Many small ones, forgotten as they come: the order list stays bounded.
        for i in 0..10_000 {
            let path = Path::from(format!("s{i}"));
            recent.remember(&path, &Bytes::from_static(b"x"));
            recent.forget(&path);
        }
        let inner = recent.inner();
        assert!(inner.order.len() <= 2 * inner.objects.len() + 64);
    }

    #[test]
    fn keeps_the_rows_of_small_kept_files_only_and_forgets_them_with_the_file() {
        use arrow::array::Int64Array;
        let recent = RecentObjects::default();
        let rows = |n: i64| {
            let column: arrow::array::ArrayRef = std::sync::Arc::new(Int64Array::from_iter_values(0..n));
            RecordBatch::try_from_iter([("id", column)]).unwrap()
        };
        // Not without the file's bytes, nor past the row bound.
        recent.remember_rows(&Path::from("a"), rows(3));
        assert!(recent.rows(&Path::from("a")).is_none());
        recent.remember(&Path::from("a"), &Bytes::from_static(b"parquet"));
        recent.remember_rows(&Path::from("a"), rows(RECENT_FILE_ROWS_MAX as i64 + 1));
        assert!(recent.rows(&Path::from("a")).is_none());
        recent.remember_rows(&Path::from("a"), rows(3));
        assert_eq!(recent.rows(&Path::from("a")).map(|r| r.num_rows()), Some(3));
        assert!(recent.inner().bytes > 7, "the rows count toward the bound");
        // Written again or deleted: the rows go with the old bytes.
        recent.remember(&Path::from("a"), &Bytes::from_static(b"other"));
        assert!(recent.rows(&Path::from("a")).is_none());
        recent.remember_rows(&Path::from("a"), rows(2));
        recent.forget(&Path::from("a"));
        assert!(recent.rows(&Path::from("a")).is_none());
        assert_eq!(recent.inner().bytes, 0);
    }

    #[test]
    fn slices_only_inside_the_object() {
        let bytes = Bytes::from_static(b"abcdef");
        assert_eq!(slice(&bytes, &(1..3)), Some(Bytes::from_static(b"bc")));
        assert_eq!(slice(&bytes, &(4..9)), None);
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = 3..2;
        assert_eq!(slice(&bytes, &reversed), None);
    }
}
