//! The files that hold the records of this process's transactions committing several tables,
//! where the warehouse's store rewrites files in place (see `crate::staging`, `Record::write`).

use std::sync::Mutex;

/// The files this process writes the records of its transactions into, when the warehouse's
/// store rewrites them in place (see `crate::staging`): as many as transactions commit at
/// once, named after the process's opening of the warehouse so that no other process writes
/// them. An empty one holds no record; a warehouse's open deletes the empty ones.
#[derive(Debug)]
pub(crate) struct RecordFiles {
    opening: String,
    next: std::sync::atomic::AtomicU64,
    free: Mutex<Vec<String>>,
}

impl Default for RecordFiles {
    fn default() -> Self {
        Self { opening: uuid::Uuid::new_v4().to_string(), next: Default::default(), free: Default::default() }
    }
}

impl RecordFiles {
    /// A file no commit of this process is using now.
    pub(crate) fn take(&self) -> String {
        if let Some(name) = self.free.lock().unwrap_or_else(|p| p.into_inner()).pop() {
            return name;
        }
        let number = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("{}-{number}.json", self.opening)
    }

    /// A file emptied by the commit that used it.
    pub(crate) fn give_back(&self, name: String) {
        self.free.lock().unwrap_or_else(|p| p.into_inner()).push(name);
    }
}
