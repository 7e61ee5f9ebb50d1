//! Keys: PRIMARY KEY and UNIQUE constraints, recorded in the Delta table and enforced by Sluice
//! through a key index per table.
//!
//! A key is a table property `sluice.key.<constraint>` = `PRIMARY KEY (a, b)` or `UNIQUE (a)`,
//! so it travels with the table (time travel, ATTACH, other engines see it as an informational
//! constraint, as Databricks shows its keys).
//!
//! The index of a table maps each key (Arrow's row format of the key columns) to the row that
//! holds it: a file of the snapshot and the row's position in it, as deletion vectors count. It
//! is built when a writer first locks the table, and caught up with the table's log under that
//! lock: each file of the log is read once (its key columns only); a file that leaves the log
//! takes its keys with it; a new deletion vector takes the keys of the rows it deletes. Each row's
//! key hash is kept per file, so removing a row needs no read. A commit by another engine is
//! caught up the same way as Sluice's own.
//!
//! Writers of a keyed table hold the table's lock from the check of their rows to the index's
//! catch-up after their commit ([`KeyGuard`]), so two writers never both add a key: the second
//! sees the first's commit in the index.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{DataType as ArrowType, UInt64Type};
use arrow::row::{RowConverter, Rows, SortField};
use futures::{StreamExt, TryStreamExt};
use roaring::RoaringTreemap;
use sluice_storage::actions::Add;
use sluice_storage::scan::{read_file, FileToRead, ScanOptions, TableLayout, ROW_INDEX_COLUMN};
use sluice_storage::snapshot::{FileSet, Snapshot};
use sluice_storage::table::Table;

use datafusion::common::ScalarValue;
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};

use crate::error::{Error, Result};
use crate::keymap::{KeyMap, SharedKeyMap};
use crate::provider::{Located, RowLocator};

/// The table property prefix of keys.
pub const KEY_PREFIX: &str = "sluice.key.";
/// The table property prefix of indexes (CREATE INDEX).
pub const INDEX_PREFIX: &str = "sluice.index.";
/// Files read at once when an index catches up.
const FILE_READS_CONCURRENT_MAX: usize = 4;
/// Keys a scan looks up in an index one by one at most (more: it reads the files).
const LOOKUP_KEYS_MAX: usize = 65_536;
/// Of a table of at least this many rows, a scan reads at most 1/[`LOOKUP_TABLE_FRACTION`]
/// through an index (more: it reads the files).
const LOOKUP_ROWS_MIN_TABLE: u64 = 100_000;
const LOOKUP_TABLE_FRACTION: u64 = 8;
/// Rows a scan reads one by one through an index at most (more: it reads the files).
const LOOKUP_ROWS_MAX: usize = 1 << 20;

/// A PRIMARY KEY or UNIQUE constraint, or an index (CREATE [UNIQUE] INDEX).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyDef {
    pub name: String,
    pub primary: bool,
    pub columns: Vec<String>,
    /// Whether a value may be there once only (a primary key, UNIQUE, a unique index).
    pub unique: bool,
    /// Made by CREATE INDEX (not a constraint: DROP INDEX removes it).
    pub index: bool,
    /// Whether rows with a NULL in the key never collide (PostgreSQL's default); `false`: NULLS
    /// NOT DISTINCT, a NULL is a value like another.
    pub nulls_distinct: bool,
    /// An index's `INCLUDE (...)` columns: not part of its key (lookups and uniqueness are on
    /// `columns`); they are what PostgreSQL would keep in the index for index-only scans, which
    /// Sluice does not make (an index finds rows, and the rows are read). Kept to be listed and
    /// reflected as given, renamed with their columns, and dropped with them.
    pub include: Vec<String>,
}

impl KeyDef {
    pub fn primary_key(name: String, columns: Vec<String>) -> Self {
        Self { name, primary: true, columns, unique: true, index: false, nulls_distinct: true, include: vec![] }
    }

    pub fn unique_key(name: String, columns: Vec<String>) -> Self {
        Self { name, primary: false, columns, unique: true, index: false, nulls_distinct: true, include: vec![] }
    }

    pub fn index(name: String, columns: Vec<String>, unique: bool) -> Self {
        Self { name, primary: false, columns, unique, index: true, nulls_distinct: true, include: vec![] }
    }

    /// The table property that records it.
    pub fn property(&self) -> (String, String) {
        let columns: Vec<String> = self.columns.iter().map(|c| quote(c)).collect();
        let (prefix, kind) = match (self.index, self.primary, self.unique) {
            (true, _, true) => (INDEX_PREFIX, "UNIQUE INDEX"),
            (true, _, false) => (INDEX_PREFIX, "INDEX"),
            (false, true, _) => (KEY_PREFIX, "PRIMARY KEY"),
            (false, false, _) => (KEY_PREFIX, "UNIQUE"),
        };
        let nulls = if self.nulls_distinct { "" } else { " NULLS NOT DISTINCT" };
        (format!("{prefix}{}", self.name), format!("{kind}{nulls} ({}){}", columns.join(", "), self.include_clause()))
    }

    /// ` INCLUDE (b, c)`, or nothing.
    pub fn include_clause(&self) -> String {
        if self.include.is_empty() {
            return String::new();
        }
        let include: Vec<String> = self.include.iter().map(|c| quote(c)).collect();
        format!(" INCLUDE ({})", include.join(", "))
    }

    /// Whether the key or index names `column` (among its key columns or its INCLUDE ones).
    pub fn uses_column(&self, column: &str) -> bool {
        self.columns.iter().chain(&self.include).any(|c| c == column)
    }

    /// Reads a key back from its property (`sluice.key.<name>` or `sluice.index.<name>`);
    /// `None` if it is not one.
    pub fn from_property(key: &str, text: &str) -> Option<Self> {
        if let Some(name) = key.strip_prefix(KEY_PREFIX) {
            return Self::parse(name, text);
        }
        let name = key.strip_prefix(INDEX_PREFIX)?;
        let text = text.trim();
        let (unique, rest) = match strip_prefix_ci(text, "UNIQUE INDEX") {
            Some(rest) => (true, rest),
            None => (false, strip_prefix_ci(text, "INDEX")?),
        };
        let (nulls_distinct, rest) = nulls_option(rest);
        let (columns, rest) = take_column_list(rest)?;
        let include = match strip_prefix_ci(rest.trim_start(), "INCLUDE") {
            Some(list) => parse_column_list(list)?,
            None if rest.trim().is_empty() => vec![],
            None => return None,
        };
        Some(Self { nulls_distinct, include, ..Self::index(name.to_string(), columns, unique) })
    }

    /// Reads a key back from the text of its `sluice.key.` property; `None` if the text is not one.
    pub fn parse(name: &str, text: &str) -> Option<Self> {
        let text = text.trim();
        let (primary, rest) = if let Some(rest) = strip_prefix_ci(text, "PRIMARY KEY") {
            (true, rest)
        } else {
            (false, strip_prefix_ci(text, "UNIQUE")?)
        };
        let (nulls_distinct, rest) = nulls_option(rest);
        let columns = parse_column_list(rest)?;
        let def = if primary {
            Self::primary_key(name.to_string(), columns)
        } else {
            Self::unique_key(name.to_string(), columns)
        };
        Some(Self { nulls_distinct, ..def })
    }

    /// `(a, b)`, as PostgreSQL names a key's columns in messages.
    pub fn column_list(&self) -> String {
        format!("({})", self.columns.join(", "))
    }

    /// Whether the key is on exactly these columns (in any order).
    pub fn is_on(&self, columns: &[String]) -> bool {
        let mine: HashSet<&str> = self.columns.iter().map(String::as_str).collect();
        let theirs: HashSet<&str> = columns.iter().map(String::as_str).collect();
        mine == theirs && columns.len() == self.columns.len()
    }
}

/// ` NULLS NOT DISTINCT (a)`: false and the rest; otherwise true and the text as it was.
fn nulls_option(text: &str) -> (bool, &str) {
    match strip_prefix_ci(text.trim_start(), "NULLS NOT DISTINCT") {
        Some(rest) => (false, rest),
        None => (true, text),
    }
}

/// ` (a, "b c") rest`: the names (at least one) and the text after the list.
fn take_column_list(text: &str) -> Option<(Vec<String>, &str)> {
    let text = text.trim_start();
    let mut quoted = false;
    let mut end = None;
    for (at, c) in text.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ')' if !quoted => {
                end = Some(at);
                break;
            }
            _ => {}
        }
    }
    let end = end?;
    Some((parse_column_list(text.get(..=end)?)?, text.get(end + 1..)?))
}

/// ` (a, "b c")`: the names, if there is at least one.
fn parse_column_list(text: &str) -> Option<Vec<String>> {
    let inner = text.trim().strip_prefix('(')?.strip_suffix(')')?;
    split_columns(inner).filter(|c| !c.is_empty())
}

fn strip_prefix_ci<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &text[prefix.len()..])
}

fn quote(name: &str) -> String {
    crate::names::quoted_if_needed(name)
}

/// Splits `a, "b c", d` into names.
fn split_columns(text: &str) -> Option<Vec<String>> {
    let mut columns = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut name = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next()? {
                    '"' if chars.peek() == Some(&'"') => {
                        chars.next();
                        name.push('"');
                    }
                    '"' => break,
                    c => name.push(c),
                }
            }
        } else {
            while let Some(c) = chars.peek().copied().filter(|c| *c != ',') {
                name.push(c);
                chars.next();
            }
            name = name.trim().to_string();
        }
        if name.is_empty() {
            return None;
        }
        columns.push(name);
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        match chars.next() {
            None => return Some(columns),
            Some(',') => continue,
            Some(_) => return None,
        }
    }
}

/// The keys and indexes a table's properties record: the primary key first, then by name.
pub fn key_defs(configuration: &HashMap<String, String>) -> Vec<KeyDef> {
    let mut defs: Vec<KeyDef> =
        configuration.iter().filter_map(|(key, value)| KeyDef::from_property(key, value)).collect();
    defs.sort_by(|a, b| b.primary.cmp(&a.primary).then_with(|| a.name.cmp(&b.name)));
    defs
}

/// Refuses setting key or index properties directly: keys and indexes are made by their
/// statements, which check the rows already there.
pub fn refuse_key_properties(properties: &HashMap<String, String>) -> Result<()> {
    match properties.keys().find(|k| k.starts_with(KEY_PREFIX) || k.starts_with(INDEX_PREFIX)) {
        Some(key) => Err(Error::NotSupported(format!(
            "setting the table property {key}: declare PRIMARY KEY or UNIQUE constraints, or CREATE INDEX, instead"
        ))),
        None => Ok(()),
    }
}

/// One key or index of a table, as the catalogs show it.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexInfo {
    pub schema: String,
    pub table: String,
    pub def: KeyDef,
}

impl IndexInfo {
    /// `primary key`, `unique`, `unique index` or `index`.
    pub fn kind(&self) -> &'static str {
        match (self.def.index, self.def.primary, self.def.unique) {
            (false, true, _) => "primary key",
            (false, false, _) => "unique",
            (true, _, true) => "unique index",
            (true, _, false) => "index",
        }
    }

    /// The constraint as PostgreSQL's `pg_get_constraintdef` shows it (`PRIMARY KEY (k)`,
    /// `UNIQUE NULLS NOT DISTINCT (a, b)`); None for an index made by CREATE INDEX.
    pub fn constraint_definition(&self) -> Option<String> {
        if self.def.index {
            return None;
        }
        let columns: Vec<String> = self.def.columns.iter().map(|c| quote(c)).collect();
        let kind = match (self.def.primary, self.def.nulls_distinct) {
            (true, _) => "PRIMARY KEY",
            (false, true) => "UNIQUE",
            (false, false) => "UNIQUE NULLS NOT DISTINCT",
        };
        Some(format!("{kind} ({})", columns.join(", ")))
    }

    /// The index as PostgreSQL's `pg_indexes.indexdef` shows it.
    pub fn definition(&self) -> String {
        let columns: Vec<String> = self.def.columns.iter().map(|c| quote(c)).collect();
        let nulls = if self.def.nulls_distinct { "" } else { " NULLS NOT DISTINCT" };
        format!(
            "CREATE {}INDEX {} ON {}.{} USING btree ({}){}{nulls}",
            if self.def.unique { "UNIQUE " } else { "" },
            quote(&self.def.name),
            quote(&self.schema),
            quote(&self.table),
            columns.join(", "),
            self.def.include_clause()
        )
    }
}

/// The keys a table's properties record that hold a value once (constraints and unique indexes).
pub fn unique_defs(configuration: &HashMap<String, String>) -> Vec<KeyDef> {
    key_defs(configuration).into_iter().filter(|d| d.unique).collect()
}

/// Where a key's row is: a file of the index and the row's position in it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Loc {
    pub file: u32,
    pub row: u32,
}

/// The `file` of a [`Loc`] that stands for several rows (its `row` names their set).
const MANY: u32 = u32::MAX;

impl Loc {
    fn many(posting: u32) -> Self {
        Self { file: MANY, row: posting }
    }

    fn posting(&self) -> Option<u32> {
        (self.file == MANY).then_some(self.row)
    }

    fn packed(&self) -> u64 {
        (u64::from(self.file) << 32) | u64::from(self.row)
    }

    fn unpacked(packed: u64) -> Self {
        Self { file: (packed >> 32) as u32, row: packed as u32 }
    }
}

/// One file of the log, as the index saw it.
#[derive(Clone)]
struct FileKeys {
    path: String,
    /// The deletion vector's identity, if it has one.
    dv: Option<String>,
    /// The rows its deletion vector deletes.
    deleted: RoaringTreemap,
    /// Per index, each row's key hash (0: no key, for a NULL in a UNIQUE column).
    hashes: Arc<Vec<Vec<u64>>>,
}

struct Index {
    def: KeyDef,
    /// Positions of the key columns in the table schema.
    columns: Vec<usize>,
    converter: RowConverter,
    /// The converter's fields (to make another: converters do not clone).
    fields: Vec<SortField>,
    /// Each key's row; for a key of a non-unique index in several rows, [`Loc::many`] naming
    /// its entry in `postings`.
    map: SharedKeyMap<Loc>,
    /// Shared with copies of the index until one writes.
    postings: Arc<Postings>,
}

/// The rows of the keys of a non-unique index that are in more than one row: sets of packed
/// locations ([`Loc::packed`]).
#[derive(Default, Clone)]
struct Postings {
    sets: Vec<Option<BTreeSet<u64>>>,
    free: Vec<u32>,
}

impl Postings {
    fn add(&mut self, set: BTreeSet<u64>) -> u32 {
        match self.free.pop() {
            Some(id) => {
                if let Some(slot) = self.sets.get_mut(id as usize) {
                    *slot = Some(set);
                }
                id
            }
            None => {
                self.sets.push(Some(set));
                (self.sets.len() - 1) as u32
            }
        }
    }

    fn get(&self, id: u32) -> Option<&BTreeSet<u64>> {
        self.sets.get(id as usize)?.as_ref()
    }

    fn get_mut(&mut self, id: u32) -> Option<&mut BTreeSet<u64>> {
        self.sets.get_mut(id as usize)?.as_mut()
    }

    fn remove(&mut self, id: u32) {
        if let Some(slot) = self.sets.get_mut(id as usize) {
            *slot = None;
            self.free.push(id);
        }
    }
}

impl Index {
    /// Adds a row with key `key`; false if the index is unique and the key is there already.
    fn add(&mut self, hash: u64, key: &[u8], loc: Loc) -> bool {
        let Some(&there) = self.map.get_hashed(hash, key) else {
            self.map.insert_hashed(hash, key, loc);
            return true;
        };
        if self.def.unique {
            return false;
        }
        match there.posting() {
            Some(id) => {
                if let Some(set) = Arc::make_mut(&mut self.postings).get_mut(id) {
                    set.insert(loc.packed());
                }
            }
            None => {
                let id = Arc::make_mut(&mut self.postings).add(BTreeSet::from([there.packed(), loc.packed()]));
                self.map.insert_hashed(hash, key, Loc::many(id));
            }
        }
        true
    }

    /// Removes the row at `loc`, whose key has hash `hash`.
    fn remove(&mut self, hash: u64, loc: Loc) {
        if self.def.unique {
            self.map.remove_hashed_where(hash, |l| *l == loc);
            return;
        }
        let postings = &self.postings;
        let packed = loc.packed();
        let Some(there) = self.map.get_mut_hashed_where(hash, |l| {
            *l == loc || l.posting().and_then(|id| postings.get(id)).is_some_and(|set| set.contains(&packed))
        }) else {
            return;
        };
        let Some(id) = there.posting() else {
            self.map.remove_hashed_where(hash, |l| *l == loc);
            return;
        };
        let postings = Arc::make_mut(&mut self.postings);
        let Some(set) = postings.get_mut(id) else { return };
        set.remove(&packed);
        if set.len() == 1 {
            // One row left: it goes back in the map.
            let last = set.first().copied().map(Loc::unpacked).unwrap_or_default();
            *there = last;
            postings.remove(id);
        }
    }

    /// The rows of `key`.
    fn rows_of(&self, key: &[u8]) -> Vec<Loc> {
        match self.map.get(key) {
            None => vec![],
            Some(loc) => match loc.posting() {
                None => vec![*loc],
                Some(id) => self.postings.get(id).into_iter().flatten().map(|p| Loc::unpacked(*p)).collect(),
            },
        }
    }
}

/// The key index of one table, at one version of its log.
pub struct TableKeys {
    /// What the index was built for: the table's id, keys and key column types.
    shape: String,
    version: Option<u64>,
    /// The files of the snapshot the index was last caught up with: the next catch-up reads
    /// only what changed since (see [`FileSet::changes_since`]).
    seen: Option<FileSet>,
    indexes: Vec<Index>,
    /// The files by their ids in [`Loc`], persistent (as `by_path` and `free`): a copy of the
    /// index (each transaction block's, each published one) shares them with the original and
    /// costs what either changes afterwards, not the table's file count.
    files: imbl::Vector<Option<Arc<FileKeys>>>,
    by_path: imbl::HashMap<String, u32>,
    free: imbl::Vector<u32>,
    /// Keys found twice while reading the log (written by another engine): the index keeps the
    /// first, and says so in the server's log.
    duplicates: u64,
}

fn shape_of(snapshot: &Snapshot, defs: &[KeyDef]) -> String {
    let types: Vec<String> = defs
        .iter()
        .flat_map(|d| d.columns.iter())
        .map(|c| snapshot.schema().field(c).map(|f| format!("{:?}", f.data_type)).unwrap_or_default())
        .collect();
    format!("{}|{defs:?}|{types:?}", snapshot.metadata().id)
}

impl TableKeys {
    /// A copy that forgets the version it is at (a transaction's own index, caught up with its
    /// staged snapshots by comparing files, whatever their version numbers).
    fn private_copy(&self) -> Result<Self> {
        Ok(Self { version: None, ..self.shared_copy()? })
    }

    /// A copy at the same version (copy on write: see [`SharedKeyMap`]).
    fn shared_copy(&self) -> Result<Self> {
        let mut indexes = Vec::with_capacity(self.indexes.len());
        for index in &self.indexes {
            indexes.push(Index {
                def: index.def.clone(),
                columns: index.columns.clone(),
                converter: RowConverter::new(index.fields.clone())?,
                fields: index.fields.clone(),
                map: index.map.clone(),
                postings: index.postings.clone(),
            });
        }
        Ok(Self {
            shape: self.shape.clone(),
            version: self.version,
            seen: self.seen.clone(),
            indexes,
            files: self.files.clone(),
            by_path: self.by_path.clone(),
            free: self.free.clone(),
            duplicates: self.duplicates,
        })
    }

    fn empty() -> Self {
        Self {
            shape: String::new(),
            version: None,
            seen: None,
            indexes: Vec::new(),
            files: imbl::Vector::new(),
            by_path: imbl::HashMap::new(),
            free: imbl::Vector::new(),
            duplicates: 0,
        }
    }

    fn build_for(snapshot: &Snapshot, defs: Vec<KeyDef>) -> Result<Self> {
        let shape = shape_of(snapshot, &defs);
        Ok(Self { shape, ..Self::for_schema(snapshot.schema(), defs)? })
    }

    /// An empty index of `defs` over rows of `schema`: [`TableKeys::check`] with no deleted
    /// rows then checks that rows hold no key twice.
    pub fn for_schema(schema: &sluice_storage::schema::StructType, defs: Vec<KeyDef>) -> Result<Self> {
        let arrow_schema = schema.to_arrow();
        let mut indexes = Vec::new();
        for def in defs {
            let mut columns = Vec::new();
            let mut fields = Vec::new();
            for name in &def.columns {
                let i = schema.index_of(name).ok_or_else(|| {
                    Error::Internal(format!("key {} names column {name}, which the table lacks", def.name))
                })?;
                columns.push(i);
                fields.push(SortField::new(arrow_schema.field(i).data_type().clone()));
            }
            let converter = RowConverter::new(fields.clone())?;
            indexes.push(Index { def, columns, converter, fields, map: SharedKeyMap::new(), postings: Arc::default() });
        }
        Ok(Self { indexes, ..Self::empty() })
    }

    pub fn defs(&self) -> impl Iterator<Item = &KeyDef> + '_ {
        self.indexes.iter().map(|i| &i.def)
    }

    /// Whether no key holds a value once (so no commit checks keys against the others).
    pub fn is_empty(&self) -> bool {
        !self.indexes.iter().any(|i| i.def.unique)
    }

    /// Brings the index to `snapshot`: drops the keys of files that left the log and of rows
    /// deleted since, and reads the files that joined.
    pub async fn catch_up(&mut self, snapshot: &Snapshot) -> Result<()> {
        let defs = key_defs(snapshot.configuration());
        if shape_of(snapshot, &defs) != self.shape {
            *self = Self::build_for(snapshot, defs)?;
        }
        if self.indexes.is_empty() || self.version == Some(snapshot.version()) {
            self.version = Some(snapshot.version());
            return Ok(());
        }
        let mut changed_dvs = Vec::new();
        let mut new_files = Vec::new();
        let mut sort = |add: &Arc<Add>| {
            let dv = add.deletion_vector.as_ref().map(|d| d.unique_id());
            match self.by_path.get(&add.path) {
                Some(&id) => {
                    let same = self.files.get(id as usize).and_then(Option::as_ref).is_some_and(|f| f.dv == dv);
                    if !same {
                        changed_dvs.push((id, add.clone()));
                    }
                }
                None => new_files.push(add.clone()),
            }
        };
        let gone: Vec<u32> = match &self.seen {
            // The files that changed since the last catch-up (the usual case: a commit or two).
            Some(seen) => {
                let changes = snapshot.file_set().changes_since(seen);
                let readded: HashSet<&str> = changes.added.iter().map(|a| a.path.as_str()).collect();
                changes.added.iter().for_each(|a| sort(a));
                changes
                    .removed
                    .iter()
                    .filter(|r| !readded.contains(r.path.as_str()))
                    .filter_map(|r| self.by_path.get(&r.path).copied())
                    .collect()
            }
            None => {
                let mut live: HashSet<&str> = HashSet::new();
                for add in snapshot.files() {
                    live.insert(add.path.as_str());
                    sort(add);
                }
                self.by_path.iter().filter(|(path, _)| !live.contains(path.as_str())).map(|(_, id)| *id).collect()
            }
        };
        for id in gone {
            self.remove_file(id);
        }
        let store = snapshot.store().clone();
        for (id, add) in changed_dvs {
            let deleted = match &add.deletion_vector {
                Some(dv) => sluice_storage::scan::read_dv(&store, dv, &add.path).await?,
                None => RoaringTreemap::new(),
            };
            let Some(file) = self.files.get(id as usize).and_then(Option::as_ref) else { continue };
            if file.deleted.is_subset(&deleted) {
                let newly = &deleted - &file.deleted;
                self.remove_rows(id, newly.iter());
                if let Some(Some(file)) = self.files.get_mut(id as usize) {
                    let file = Arc::make_mut(file);
                    file.deleted = deleted;
                    file.dv = add.deletion_vector.as_ref().map(|d| d.unique_id());
                }
            } else {
                // Rows came back (RESTORE): read the file again.
                self.remove_file(id);
                new_files.push(add);
            }
        }
        let layout = Arc::new(TableLayout::from_snapshot(snapshot));
        let names: Vec<String> = {
            let mut names = Vec::new();
            for index in &self.indexes {
                for c in &index.def.columns {
                    if !names.contains(c) {
                        names.push(c.clone());
                    }
                }
            }
            names
        };
        let fields = Arc::new(layout.projected_fields(Some(&names))?);
        let options = ScanOptions { row_index: true, ..Default::default() };
        let reads = futures::stream::iter(new_files)
            .map(|add| {
                let (store, layout, fields, options) = (store.clone(), layout.clone(), fields.clone(), options.clone());
                async move {
                    let file = FileToRead::from_add(&store, &add).await?;
                    let batches: Vec<RecordBatch> =
                        read_file(&store, &layout, &fields, &file, &options).await?.try_collect().await?;
                    let deleted = match &file.mask {
                        sluice_storage::scan::RowMask::Without(rows) => (**rows).clone(),
                        _ => RoaringTreemap::new(),
                    };
                    Ok::<_, sluice_storage::Error>((add, deleted, batches))
                }
            })
            .buffered(FILE_READS_CONCURRENT_MAX);
        futures::pin_mut!(reads);
        let duplicates_before = self.duplicates;
        while let Some(read) = reads.next().await {
            let (add, deleted, batches) = read.map_err(|e| e.at_version(snapshot.version()))?;
            self.add_file(&add, deleted, &names, &batches)?;
        }
        if self.duplicates > duplicates_before {
            tracing::warn!(
                version = snapshot.version(),
                "{} keys of {:?} are in the table twice (written by another engine); the key index keeps the first",
                self.duplicates - duplicates_before,
                self.indexes.iter().map(|i| &i.def.name).collect::<Vec<_>>()
            );
        }
        self.version = Some(snapshot.version());
        self.seen = Some(snapshot.file_set().clone());
        Ok(())
    }

    fn add_file(
        &mut self,
        add: &Add,
        deleted: RoaringTreemap,
        names: &[String],
        batches: &[RecordBatch],
    ) -> Result<()> {
        let id = match self.free.pop_back() {
            Some(id) => id,
            None => {
                self.files.push_back(None);
                u32::try_from(self.files.len() - 1)
                    .ok()
                    .filter(|id| *id != MANY)
                    .ok_or_else(|| Error::Internal("over 2^32 files in a key index".into()))?
            }
        };
        let rows: usize = batches
            .iter()
            .filter_map(|b| b.column_by_name(ROW_INDEX_COLUMN))
            .map(|c| c.as_primitive::<UInt64Type>().values().iter().max().map(|m| *m as usize + 1).unwrap_or(0))
            .max()
            .unwrap_or(0);
        let mut hashes = vec![vec![0u64; rows]; self.indexes.len()];
        for batch in batches {
            let Some(row_index) = batch.column_by_name(ROW_INDEX_COLUMN) else { continue };
            let row_index = row_index.as_primitive::<UInt64Type>();
            for (n, index) in self.indexes.iter_mut().enumerate() {
                let arrays: Vec<ArrayRef> = index
                    .def
                    .columns
                    .iter()
                    .map(|c| {
                        let at = names.iter().position(|n| n == c).unwrap_or_default();
                        batch.column(at).clone()
                    })
                    .collect();
                let keys = index.converter.convert_columns(&arrays)?;
                let nulls_distinct = index.def.nulls_distinct;
                for i in 0..batch.num_rows() {
                    if nulls_distinct && arrays.iter().any(|a| a.is_null(i)) {
                        continue;
                    }
                    let row = row_index.value(i);
                    let key = keys.row(i);
                    let hash = index.map.hash(key.as_ref());
                    let loc = Loc { file: id, row: u32::try_from(row).unwrap_or(u32::MAX) };
                    if !index.add(hash, key.as_ref(), loc) {
                        self.duplicates += 1;
                        continue;
                    }
                    if let Some(slot) = hashes.get_mut(n).and_then(|h| h.get_mut(row as usize)) {
                        *slot = hash;
                    }
                }
            }
        }
        let file = FileKeys {
            path: add.path.clone(),
            dv: add.deletion_vector.as_ref().map(|d| d.unique_id()),
            deleted,
            hashes: Arc::new(hashes),
        };
        self.by_path.insert(add.path.clone(), id);
        if let Some(slot) = self.files.get_mut(id as usize) {
            *slot = Some(Arc::new(file));
        }
        Ok(())
    }

    fn remove_rows(&mut self, id: u32, rows: impl Iterator<Item = u64>) {
        let Some(Some(file)) = self.files.get(id as usize) else { return };
        let rows: Vec<u64> = rows.collect();
        for (n, index) in self.indexes.iter_mut().enumerate() {
            let Some(hashes) = file.hashes.get(n) else { continue };
            for &row in &rows {
                let Some(&hash) = hashes.get(row as usize) else { continue };
                if hash == 0 {
                    continue;
                }
                index.remove(hash, Loc { file: id, row: row as u32 });
            }
        }
    }

    fn remove_file(&mut self, id: u32) {
        let Some(Some(file)) = self.files.get(id as usize) else { return };
        let rows = file.hashes.first().map(|h| h.len()).unwrap_or(0) as u64;
        let path = file.path.clone();
        self.remove_rows(id, 0..rows);
        self.by_path.remove(&path);
        if let Some(slot) = self.files.get_mut(id as usize) {
            *slot = None;
        }
        self.free.push_back(id);
    }

    /// The file path of a location.
    pub fn path_of(&self, loc: Loc) -> Option<&str> {
        self.files.get(loc.file as usize)?.as_ref().map(|f| f.path.as_str())
    }

    /// The index of the key on exactly `columns`, or of the constraint named `name`.
    /// (Unique keys only: what ON CONFLICT may name.)
    pub fn index_on(&self, columns: &[String]) -> Option<usize> {
        self.indexes.iter().position(|i| i.def.unique && i.def.is_on(columns))
    }

    /// The constraint named `name` (a unique index is not one).
    pub fn index_named(&self, name: &str) -> Option<usize> {
        self.indexes.iter().position(|i| i.def.unique && !i.def.index && i.def.name == name)
    }

    /// Every unique key and unique index.
    pub fn unique_indexes(&self) -> Vec<usize> {
        self.indexes.iter().enumerate().filter(|(_, index)| index.def.unique).map(|(i, _)| i).collect()
    }

    pub fn def(&self, index: usize) -> Option<&KeyDef> {
        self.indexes.get(index).map(|i| &i.def)
    }

    /// The keys of `index` in rows of the table's schema (None for a row with a NULL in them).
    pub fn keys_of(&self, index: usize, batch: &RecordBatch) -> Result<Vec<Option<Vec<u8>>>> {
        let Some(index) = self.indexes.get(index) else { return Ok(vec![None; batch.num_rows()]) };
        let (keys, has_null) = key_rows(index, batch)?;
        Ok((0..batch.num_rows()).map(|i| (!has_null(i)).then(|| keys.row(i).as_ref().to_vec())).collect())
    }

    /// The rows (by file path as logged, and row) that equality constraints (column → the
    /// values it may take) on every column of one of the keys can match, with their keys; `None`
    /// if they cover no key, or name too many keys to look up one by one.
    pub fn locate(
        &self,
        schema: &arrow::datatypes::Schema,
        equal: &HashMap<String, Vec<ScalarValue>>,
    ) -> Option<Located> {
        // Each column's values in its own type (a value no key can hold is dropped).
        let values_of = |index: &Index| -> Option<Vec<Vec<ScalarValue>>> {
            let mut columns = Vec::with_capacity(index.columns.len());
            for (name, &at) in index.def.columns.iter().zip(&index.columns) {
                let wanted = schema.fields().get(at)?.data_type();
                // 0.0 = -0.0 and NaN in SQL are not what their bytes say: such keys scan.
                if wanted.is_floating() {
                    return None;
                }
                let mut values: Vec<ScalarValue> = equal.get(name)?.iter().filter_map(|v| in_type(v, wanted)).collect();
                values.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
                values.dedup();
                columns.push(values);
            }
            Some(columns)
        };
        let (index, columns) = self
            .indexes
            .iter()
            .filter_map(|index| Some((index, values_of(index)?)))
            .min_by_key(|(_, columns)| columns.iter().map(Vec::len).product::<usize>())?;
        let combinations = columns.iter().try_fold(1usize, |n, c| n.checked_mul(c.len()))?;
        if combinations > LOOKUP_KEYS_MAX {
            return None;
        }
        // Column j of combination n takes value (n / stride_j) % len_j: every combination once.
        let mut arrays = Vec::with_capacity(columns.len());
        let mut stride = combinations;
        for (values, &at) in columns.iter().zip(&index.columns) {
            stride /= values.len().max(1);
            let column = (0..combinations).filter_map(|n| values.get((n / stride) % values.len()).cloned());
            arrays.push(if combinations == 0 {
                arrow::array::new_empty_array(schema.fields().get(at)?.data_type())
            } else {
                ScalarValue::iter_to_array(column).ok()?
            });
        }
        self.rows_holding(index, &arrays)
    }

    /// The rows that hold one of `keys` (one array per column of `columns`, in the table's
    /// types), through a key or index on exactly those columns, each row once; `None` if there
    /// is none, or a key column's values are not of its type.
    pub fn locate_keys(&self, columns: &[String], keys: &[ArrayRef]) -> Option<Located> {
        let index = self.indexes.iter().find(|i| i.def.is_on(columns))?;
        // The keys in the index's column order.
        let mut arrays = Vec::with_capacity(index.def.columns.len());
        for name in &index.def.columns {
            arrays.push(keys.get(columns.iter().position(|c| c == name)?)?.clone());
        }
        self.rows_holding(index, &arrays)
    }

    /// The rows of `index` that hold the keys of `arrays` (its key columns, in its order and
    /// types), each row once, with the key each was found by; `None` if the arrays are not of
    /// the key's types or the rows are too many to read one by one.
    fn rows_holding(&self, index: &Index, arrays: &[ArrayRef]) -> Option<Located> {
        let rows = index.converter.convert_columns(arrays).ok()?;
        let mut located = Located { columns: index.def.columns.clone(), ..Default::default() };
        let mut found_keys: Vec<u32> = Vec::new();
        let mut seen: HashSet<u64> = HashSet::new();
        for (n, key) in rows.iter().enumerate() {
            // A NULL in the key: no row holds it (unless NULLS NOT DISTINCT).
            if index.def.nulls_distinct && arrays.iter().any(|a| a.is_null(n)) {
                continue;
            }
            for loc in index.rows_of(key.as_ref()) {
                if !seen.insert(loc.packed()) {
                    continue;
                }
                let path = self.path_of(loc)?;
                located.rows.entry(path.to_string()).or_default().insert(u64::from(loc.row));
                located.paths.push(path.to_string());
                located.row_numbers.push(u64::from(loc.row));
                found_keys.push(u32::try_from(n).ok()?);
            }
            if found_keys.len() > LOOKUP_ROWS_MAX {
                return None;
            }
        }
        let take = arrow::array::UInt32Array::from(found_keys);
        located.keys =
            arrays.iter().map(|a| arrow::compute::take(a.as_ref(), &take, None)).collect::<Result<_, _>>().ok()?;
        Some(located)
    }

    /// Brings the index to `snapshot` for a lookup; false if it cannot: it is past it (an older
    /// version, or a newer commit since), or catching up failed (said in the server's log).
    async fn brought_to(&mut self, snapshot: &Snapshot) -> bool {
        match self.version {
            Some(v) if v == snapshot.version() => true,
            Some(v) if v > snapshot.version() => false,
            _ => match self.catch_up(snapshot).await {
                Ok(()) => true,
                Err(e) => {
                    tracing::warn!(version = snapshot.version(), "the key index could not catch up: {e}");
                    false
                }
            },
        }
    }

    /// Where `key` of `index` is.
    pub fn lookup(&self, index: usize, key: &[u8]) -> Option<Loc> {
        self.indexes.get(index)?.map.get(key).copied().filter(|l| l.posting().is_none())
    }

    /// Checks that rows to insert add no key that is there (unless its row is among `deleted`,
    /// by path and row; `None`: the commit replaces every row) and none twice: 23505 naming the
    /// constraint and the key otherwise.
    pub fn check(
        &self,
        table: &str,
        deleted: Option<&HashMap<String, RoaringTreemap>>,
        inserted: &[RecordBatch],
    ) -> Result<()> {
        let replaces_all = deleted.is_none();
        let deleted_ids: HashMap<u32, &RoaringTreemap> =
            deleted.into_iter().flatten().filter_map(|(path, rows)| Some((*self.by_path.get(path)?, rows))).collect();
        for index in self.indexes.iter().filter(|i| i.def.unique) {
            let mut seen: KeyMap<()> = KeyMap::with_state(index.map.state().clone());
            for batch in inserted {
                let (keys, has_null) = key_rows(index, batch)?;
                for i in (0..batch.num_rows()).filter(|i| !has_null(*i)) {
                    let key = keys.row(i);
                    let key = key.as_ref();
                    let hash = index.map.hash(key);
                    let taken = !replaces_all
                        && index.map.get_hashed(hash, key).is_some_and(|loc| {
                            !deleted_ids.get(&loc.file).is_some_and(|rows| rows.contains(loc.row as u64))
                        });
                    if taken || seen.insert_hashed(hash, key, ()).is_some() {
                        return Err(unique_violation(table, &index.def, batch, &index.columns, i));
                    }
                }
            }
        }
        Ok(())
    }
}

impl TableKeys {
    /// The keys of `index` that `columns` (its key columns, in its order and types) hold, one per
    /// row, in Arrow's row format.
    pub fn encode(&self, index: usize, columns: &[ArrayRef]) -> Result<Vec<Vec<u8>>> {
        let Some(index) = self.indexes.get(index) else { return Ok(vec![]) };
        let rows = index.converter.convert_columns(columns)?;
        Ok(rows.iter().map(|r| r.as_ref().to_vec()).collect())
    }

    /// Key columns (as [`TableKeys::encode`] takes them) from keys in the row format.
    pub fn decode(&self, index: usize, keys: &[Vec<u8>]) -> Result<Vec<ArrayRef>> {
        let Some(index) = self.indexes.get(index) else { return Ok(vec![]) };
        let parser = index.converter.parser();
        Ok(index.converter.convert_rows(keys.iter().map(|k| parser.parse(k)))?)
    }

    /// Whether a row of the index's snapshot holds `key`, other than the rows in `deleted` (by
    /// path).
    pub fn holds(&self, index: usize, key: &[u8], deleted: Option<&HashMap<String, RoaringTreemap>>) -> bool {
        let Some(index) = self.indexes.get(index) else { return false };
        let Some(loc) = index.map.get(key) else { return false };
        index.rows_of_loc(*loc).into_iter().any(|loc| {
            let gone = self
                .path_of(loc)
                .and_then(|path| deleted?.get(path))
                .is_some_and(|rows| rows.contains(u64::from(loc.row)));
            !gone
        })
    }

    /// Whether a row in a file not among `files` holds `key` (a row a transaction added).
    pub fn holds_outside(&self, index: usize, key: &[u8], files: &HashSet<&str>) -> bool {
        let Some(at) = self.indexes.get(index) else { return false };
        let Some(loc) = at.map.get(key) else { return false };
        at.rows_of_loc(*loc).into_iter().any(|loc| self.path_of(loc).is_some_and(|path| !files.contains(path)))
    }

    /// The keys of `index` held by the rows in `deleted` (by path), without reading them: each
    /// row's hash names its key in the index.
    pub fn keys_in_rows(&self, index: usize, deleted: &HashMap<String, RoaringTreemap>) -> Vec<Vec<u8>> {
        let Some(at) = self.indexes.get(index) else { return vec![] };
        let mut keys = Vec::new();
        for (path, rows) in deleted {
            let Some(&id) = self.by_path.get(path) else { continue };
            let Some(Some(file)) = self.files.get(id as usize) else { continue };
            let Some(hashes) = file.hashes.get(index) else { continue };
            for row in rows.iter() {
                let Some(&hash) = hashes.get(row as usize).filter(|h| **h != 0) else { continue };
                let here = Loc { file: id, row: row as u32 };
                let found = at.map.key_hashed_where(hash, |loc| at.rows_of_loc(*loc).contains(&here));
                if let Some(key) = found {
                    keys.push(key.to_vec());
                }
            }
        }
        keys
    }
}

impl TableKeys {
    /// Checks, for a transaction whose commit was moved onto a later version (see
    /// [`sluice_storage::stage::Rebase`]), that the rows it inserts add no key that `latest` (the
    /// table's index at that version) holds outside the rows the transaction deletes
    /// (`deleted`, by path; `None`: the whole file). `self` is the transaction's own index and
    /// `added` the paths of the files it adds. 23505 naming the constraint and key otherwise (a
    /// concurrent transaction committed the key first, as PostgreSQL reports it).
    pub fn check_moved(
        &self,
        latest: &TableKeys,
        table: &str,
        added: &HashSet<String>,
        deleted: &HashMap<String, Option<RoaringTreemap>>,
    ) -> Result<()> {
        for (n, index) in self.indexes.iter().enumerate().filter(|(_, i)| i.def.unique) {
            let Some(theirs) = latest.indexes.iter().find(|i| i.def == index.def) else { continue };
            // The files this commit adds, by their ids (not a walk of all the table's files).
            for &id in added.iter().filter_map(|path| self.by_path.get(path)) {
                let Some(file) = self.files.get(id as usize).and_then(Option::as_ref) else { continue };
                let Some(hashes) = file.hashes.get(n) else { continue };
                for (row, &hash) in hashes.iter().enumerate() {
                    if hash == 0 || file.deleted.contains(row as u64) {
                        continue;
                    }
                    let here = Loc { file: id, row: row as u32 };
                    let Some(key) = index.map.key_hashed_where(hash, |l| *l == here) else { continue };
                    let Some(there) = theirs.map.get_hashed(theirs.map.hash(key), key) else { continue };
                    let gone = theirs.rows_of_loc(*there).into_iter().all(|loc| {
                        latest.path_of(loc).and_then(|p| deleted.get(p)).is_some_and(|rows| match rows {
                            None => true,
                            Some(rows) => rows.contains(u64::from(loc.row)),
                        })
                    });
                    if !gone {
                        return Err(Error::UniqueViolation {
                            table: table.to_string(),
                            constraint: index.def.name.clone(),
                            key: index.key_text_of(key),
                        });
                    }
                }
            }
        }
        Ok(())
    }
}

impl Index {
    /// The rows a map entry stands for.
    fn rows_of_loc(&self, loc: Loc) -> Vec<Loc> {
        match loc.posting() {
            None => vec![loc],
            Some(id) => self.postings.get(id).into_iter().flatten().map(|p| Loc::unpacked(*p)).collect(),
        }
    }

    /// A key (in the row format) as PostgreSQL shows it in messages.
    fn key_text_of(&self, key: &[u8]) -> String {
        let parser = self.converter.parser();
        let arrays = match self.converter.convert_rows([parser.parse(key)]) {
            Ok(arrays) => arrays,
            Err(_) => return format!("{}=(?)", self.def.column_list()),
        };
        let values: Vec<String> = arrays.iter().map(|a| value_text(a, 0)).collect();
        format!("{}=({})", self.def.column_list(), values.join(", "))
    }
}

/// `value` in type `wanted`, if it casts there and back unchanged (`None`: no key of that type
/// equals it; NULL equals nothing).
pub(crate) fn in_type(value: &ScalarValue, wanted: &ArrowType) -> Option<ScalarValue> {
    if value.is_null() {
        return None;
    }
    if value.data_type() == *wanted {
        return Some(value.clone());
    }
    let cast = value.cast_to(wanted).ok()?;
    (cast.cast_to(&value.data_type()).ok()? == *value && !cast.is_null()).then_some(cast)
}

/// What filters (a conjunction) say a column equals: `c = v`, `v = c`, `c IN (v, ...)` and `c =
/// v OR c = w`, by column name.
pub fn equalities(filters: &[Expr]) -> HashMap<String, Vec<ScalarValue>> {
    let mut equal: HashMap<String, Vec<ScalarValue>> = HashMap::new();
    let mut terms: Vec<&Expr> = filters.iter().collect();
    while let Some(term) = terms.pop() {
        if let Expr::BinaryExpr(BinaryExpr { left, op: Operator::And, right }) = term {
            terms.push(left);
            terms.push(right);
            continue;
        }
        if let Some((column, values)) = one_of(term) {
            // Two constraints on a column: either one bounds it (the filters are applied again).
            let known = equal.entry(column).or_insert_with(|| values.clone());
            if values.len() < known.len() {
                *known = values;
            }
        }
    }
    equal
}

/// `column` and the values it may take, if `term` says it equals one of some constants.
fn one_of(term: &Expr) -> Option<(String, Vec<ScalarValue>)> {
    match term {
        Expr::BinaryExpr(BinaryExpr { left, op: Operator::Eq, right }) => match (left.as_ref(), right.as_ref()) {
            (Expr::Column(c), Expr::Literal(v, _)) | (Expr::Literal(v, _), Expr::Column(c)) => {
                Some((c.name.clone(), vec![v.clone()]))
            }
            _ => None,
        },
        Expr::InList(InList { expr, list, negated: false }) => {
            let Expr::Column(c) = expr.as_ref() else { return None };
            let values = list
                .iter()
                .map(|v| match v {
                    Expr::Literal(v, _) => Some(v.clone()),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()?;
            Some((c.name.clone(), values))
        }
        Expr::BinaryExpr(BinaryExpr { left, op: Operator::Or, right }) => {
            let (a, mut values) = one_of(left)?;
            let (b, more) = one_of(right)?;
            (a == b).then(|| {
                values.extend(more);
                (a, values)
            })
        }
        _ => None,
    }
}

/// An index's keys of a batch's rows (Arrow's row format), and whether a row has a NULL in them
/// (such a row has no key: NULLs never collide).
fn key_rows<'a>(index: &Index, batch: &'a RecordBatch) -> Result<(Rows, impl Fn(usize) -> bool + 'a)> {
    let arrays: Vec<ArrayRef> = index.columns.iter().map(|&c| batch.column(c).clone()).collect();
    let keys = index.converter.convert_columns(&arrays)?;
    let nulls_distinct = index.def.nulls_distinct;
    Ok((keys, move |row| nulls_distinct && arrays.iter().any(|a| a.is_null(row))))
}

/// 23505 for the key of row `row` of `batch`.
fn unique_violation(table: &str, def: &KeyDef, batch: &RecordBatch, columns: &[usize], row: usize) -> Error {
    Error::UniqueViolation {
        table: table.to_string(),
        constraint: def.name.clone(),
        key: key_text(def, batch, columns, row),
    }
}

/// A key as PostgreSQL shows it in messages: `(a, b)=(1, x)`.
pub fn key_text(def: &KeyDef, batch: &RecordBatch, columns: &[usize], row: usize) -> String {
    let values: Vec<String> = columns.iter().map(|&c| value_text(batch.column(c), row)).collect();
    format!("{}=({})", def.column_list(), values.join(", "))
}

/// A value as PostgreSQL shows it in a key's message.
pub fn value_text(array: &ArrayRef, row: usize) -> String {
    if array.is_null(row) {
        return "null".into();
    }
    let options = arrow::util::display::FormatOptions::default();
    match array.data_type() {
        ArrowType::Boolean => (if array.as_boolean().value(row) { "t" } else { "f" }).into(),
        _ => arrow::util::display::ArrayFormatter::try_new(array.as_ref(), &options)
            .map(|f| f.value(row).to_string())
            .unwrap_or_default(),
    }
}

/// The key index of every keyed table, each behind the lock its writers hold.
#[derive(Default)]
pub struct KeyIndexes {
    tables: Mutex<HashMap<String, Arc<tokio::sync::Mutex<TableKeys>>>>,
    /// Each table's index as its lock holder last left it caught up, with that snapshot: what
    /// a transaction block starts from, and what lookups use, without waiting for the lock.
    published: Arc<Mutex<HashMap<String, Arc<Published>>>>,
}

/// A table's index behind its lock.
pub type KeyCell = Arc<tokio::sync::Mutex<TableKeys>>;

/// A table's index at one snapshot, shared copy-on-write with the live one.
struct Published {
    snapshot: Arc<Snapshot>,
    keys: TableKeys,
}

/// Where a shared index publishes itself (see [`KeyIndexes::published`]).
#[derive(Clone)]
struct PublishTo {
    id: String,
    slots: Arc<Mutex<HashMap<String, Arc<Published>>>>,
}

impl PublishTo {
    /// Publishes the index at `snapshot`, unless that version is published already (a lock
    /// that found nothing new to catch up with).
    fn publish(&self, keys: &TableKeys, snapshot: &Arc<Snapshot>) {
        if self.get().is_some_and(|p| p.snapshot.version() == snapshot.version()) {
            return;
        }
        let Ok(copy) = keys.shared_copy() else { return };
        let published = Arc::new(Published { snapshot: snapshot.clone(), keys: copy });
        self.slots.lock().unwrap_or_else(|p| p.into_inner()).insert(self.id.clone(), published);
    }

    fn get(&self) -> Option<Arc<Published>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner()).get(&self.id).cloned()
    }
}

impl std::fmt::Debug for KeyIndexes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyIndexes").finish_non_exhaustive()
    }
}

/// A keyed table's index, locked and caught up with the table's latest version.
pub struct KeyGuard {
    keys: tokio::sync::OwnedMutexGuard<TableKeys>,
    table: Arc<Table>,
    snapshot: Arc<Snapshot>,
    /// A shared index's: where it publishes itself once caught up.
    publish: Option<PublishTo>,
    /// Other tables' indexes held with this one until its holder's commit is done (the tables a
    /// write's foreign keys reference), by table id.
    held: Vec<(String, KeyGuard)>,
}

impl std::ops::Deref for KeyGuard {
    type Target = TableKeys;
    fn deref(&self) -> &TableKeys {
        &self.keys
    }
}

impl KeyGuard {
    /// The snapshot the index is at: the table's latest when it was locked.
    pub fn snapshot(&self) -> &Arc<Snapshot> {
        &self.snapshot
    }

    /// A transaction's own copy of the index, at the guard's snapshot (see [`crate::staging`]).
    pub fn private_copy(&self) -> Result<KeyCell> {
        Ok(Arc::new(tokio::sync::Mutex::new(self.keys.private_copy()?)))
    }

    /// Holds another table's index (by its id) until this guard's commit is done.
    pub fn hold(&mut self, id: String, guard: KeyGuard) {
        self.held.push((id, guard));
    }

    /// The index of another table this guard holds.
    pub fn held(&self, id: &str) -> Option<&KeyGuard> {
        self.held.iter().find(|(held, _)| held == id).map(|(_, guard)| guard)
    }

    /// Catches the index up with the commit the guard's holder just made.
    pub async fn committed(mut self) -> Result<()> {
        let snapshot = self.table.snapshot().await?;
        self.keys.catch_up(&snapshot).await?;
        if let Some(to) = &self.publish {
            to.publish(&self.keys, &snapshot);
        }
        Ok(())
    }
}

/// Finds rows by key through a table's index, for scans that filter on all of a key's columns.
struct KeyLocator {
    cell: Arc<tokio::sync::Mutex<TableKeys>>,
    /// A shared index's published copies, for lookups while a writer holds the lock.
    published: Option<PublishTo>,
}

impl std::fmt::Debug for KeyLocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyLocator").finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl RowLocator for KeyLocator {
    async fn locate(&self, snapshot: &Snapshot, filters: &[Expr]) -> Option<Located> {
        let defs = key_defs(snapshot.configuration());
        let equal = equalities(filters);
        if !defs.iter().any(|d| d.columns.iter().all(|c| equal.contains_key(c))) {
            return None;
        }
        // A writer holds the lock from its check to its index's catch-up (a COPY, for a while):
        // then the scan reads the files rather than wait.
        let Ok(mut keys) = self.cell.try_lock() else {
            // The index as its holder last published it, if that is this snapshot's.
            let published = self.published.as_ref()?.get()?;
            if published.snapshot.version() != snapshot.version() {
                return None;
            }
            return found_by(&published.keys, snapshot, &equal);
        };
        if !keys.brought_to(snapshot).await {
            return None;
        }
        found_by(&keys, snapshot, &equal)
    }
}

/// The rows `keys` (at `snapshot`) finds for the equalities, unless they are a good part of the table.
fn found_by(keys: &TableKeys, snapshot: &Snapshot, equal: &HashMap<String, Vec<ScalarValue>>) -> Option<Located> {
    let located = keys.locate(&snapshot.arrow_schema(), equal)?;
    // A good part of the table (a non-unique index on a column of few values): reading the
    // files in parallel, with their statistics, does better than row by row.
    // (Counting the table's rows only when the rows found could be that many.)
    let found = located.paths.len() as u64 * LOOKUP_TABLE_FRACTION;
    if found > LOOKUP_ROWS_MIN_TABLE {
        let rows: u64 = snapshot.files().filter_map(|f| f.num_records()).map(|n| n.max(0) as u64).sum();
        if rows >= LOOKUP_ROWS_MIN_TABLE && found > rows {
            return None;
        }
    }
    Some(located)
}

impl KeyIndexes {
    fn cell(&self, id: &str) -> Arc<tokio::sync::Mutex<TableKeys>> {
        let mut tables = self.tables.lock().unwrap_or_else(|p| p.into_inner());
        tables.entry(id.to_string()).or_insert_with(|| Arc::new(tokio::sync::Mutex::new(TableKeys::empty()))).clone()
    }

    /// Locks a table's index, caught up with the table's latest version (the table may have no
    /// key yet: DDL that adds one, identity columns).
    pub async fn lock(&self, id: &str, table: &Arc<Table>) -> Result<KeyGuard> {
        if table.is_staged() {
            // Its versions are not the log's: the shared index must never see them.
            return Err(Error::Internal(format!("the shared key index of {id} was asked to lock a staged handle")));
        }
        Ok(self.publishing(id, lock_cell(self.cell(id), table).await?))
    }

    /// A guard on a table's shared index, which publishes it now and after its commit.
    fn publishing(&self, id: &str, mut guard: KeyGuard) -> KeyGuard {
        let to = self.publish_to(id);
        to.publish(&guard.keys, &guard.snapshot);
        guard.publish = Some(to);
        guard
    }

    fn publish_to(&self, id: &str) -> PublishTo {
        PublishTo { id: id.to_string(), slots: self.published.clone() }
    }

    /// A transaction's own copy of a table's index and the snapshot it is at, as the index's
    /// last lock holder left them (no wait), if that is `latest`'s version or `use_older`.
    pub fn published_copy(&self, id: &str, latest: u64, use_older: bool) -> Option<Result<(Arc<Snapshot>, KeyCell)>> {
        let published = self.publish_to(id).get()?;
        if published.snapshot.version() != latest && !use_older {
            return None;
        }
        Some(
            published
                .keys
                .private_copy()
                .map(|copy| (published.snapshot.clone(), Arc::new(tokio::sync::Mutex::new(copy)))),
        )
    }

    /// [`KeyIndexes::lock`] if no one holds the lock now (`None` otherwise): for a caller that
    /// holds the commit gate, which a committer holding the lock may wait for.
    pub async fn try_lock(&self, id: &str, table: &Arc<Table>) -> Option<Result<KeyGuard>> {
        if table.is_staged() {
            return Some(Err(Error::Internal(format!(
                "the shared key index of {id} was asked to lock a staged handle"
            ))));
        }
        let keys = self.cell(id).try_lock_owned().ok()?;
        Some(caught_up(keys, table).await.map(|guard| self.publishing(id, guard)))
    }

    /// The rows of the table `id` at `snapshot` that hold one of `keys` (see
    /// [`TableKeys::locate_keys`]), through its shared index brought to that snapshot; `None`
    /// if it has no key or index on `columns`, a writer holds the index, or the index is past
    /// the snapshot (the caller then reads the rows otherwise).
    pub async fn locate_keys(
        &self,
        id: &str,
        snapshot: &Snapshot,
        columns: &[String],
        keys: &[ArrayRef],
    ) -> Option<Located> {
        if !key_defs(snapshot.configuration()).iter().any(|d| d.is_on(columns)) {
            return None;
        }
        let cell = self.cell(id);
        let mut index = cell.try_lock().ok()?;
        if !index.brought_to(snapshot).await {
            return None;
        }
        index.locate_keys(columns, keys)
    }

    /// What finds a keyed table's rows by key for its scans (see [`TableKeys::locate`]).
    pub fn locator(&self, id: &str) -> Arc<dyn RowLocator> {
        Arc::new(KeyLocator { cell: self.cell(id), published: Some(self.publish_to(id)) })
    }

    /// A transaction's own copy of a table's index (see [`crate::staging`]), for
    /// [`lock_cell`] and [`locator_of`] with its staged handle.
    pub async fn private_copy(&self, id: &str) -> Result<Arc<tokio::sync::Mutex<TableKeys>>> {
        let cell = self.cell(id);
        let copy = cell.lock().await.private_copy()?;
        Ok(Arc::new(tokio::sync::Mutex::new(copy)))
    }

    /// Forgets a dropped table's index.
    pub fn forget(&self, id: &str) {
        self.tables.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
        self.published.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
    }
}

/// Locks an index (a table's shared one, or a transaction's copy), caught up with the latest
/// snapshot of `table` (a staged handle's: its staged snapshot).
pub async fn lock_cell(cell: Arc<tokio::sync::Mutex<TableKeys>>, table: &Arc<Table>) -> Result<KeyGuard> {
    caught_up(cell.lock_owned().await, table).await
}

/// A guard on a locked index, caught up with `table`'s latest snapshot.
async fn caught_up(mut keys: tokio::sync::OwnedMutexGuard<TableKeys>, table: &Arc<Table>) -> Result<KeyGuard> {
    let snapshot = table.snapshot().await?;
    keys.catch_up(&snapshot).await?;
    Ok(KeyGuard { keys, table: table.clone(), snapshot, publish: None, held: Vec::new() })
}

/// What finds rows by key through `cell` (see [`KeyIndexes::locator`]).
pub fn locator_of(cell: Arc<tokio::sync::Mutex<TableKeys>>) -> Arc<dyn RowLocator> {
    Arc::new(KeyLocator { cell, published: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_round_trips_through_its_property() {
        let def = KeyDef::primary_key("kv_pkey".into(), vec!["k".into(), "Odd, name".into()]);
        let (key, value) = def.property();
        assert_eq!(key, "sluice.key.kv_pkey");
        assert_eq!(value, "PRIMARY KEY (k, \"Odd, name\")");
        assert_eq!(KeyDef::parse("kv_pkey", &value), Some(def));
        let unique = KeyDef::parse("u", "UNIQUE (a,b)").unwrap();
        assert!(!unique.primary);
        assert!(unique.is_on(&["b".into(), "a".into()]));
        assert_eq!(KeyDef::parse("x", "CHECK (a > 1)"), None);
        assert_eq!(KeyDef::parse("x", "UNIQUE ()"), None);
        assert_eq!(KeyDef::parse("x", "UNIQUE (\"a)"), None);
    }

    #[test]
    fn an_index_keeps_its_include_columns() {
        let def = KeyDef {
            include: vec!["b".into(), "odd) INCLUDE (x".into()],
            nulls_distinct: false,
            ..KeyDef::index("t_a_idx".into(), vec!["a".into(), "c)".into()], true)
        };
        let (key, value) = def.property();
        assert_eq!(value, "UNIQUE INDEX NULLS NOT DISTINCT (a, \"c)\") INCLUDE (b, \"odd) INCLUDE (x\")");
        assert_eq!(KeyDef::from_property(&key, &value), Some(def.clone()));
        assert!(def.uses_column("b") && def.uses_column("a") && !def.uses_column("x"));
        let plain = KeyDef::from_property("sluice.index.i", "INDEX (a)").unwrap();
        assert!(plain.include.is_empty());
        assert_eq!(KeyDef::from_property("sluice.index.i", "INDEX (a) junk"), None);
        assert_eq!(KeyDef::from_property("sluice.index.i", "INDEX (a) INCLUDE ()"), None);
    }
}
