//! Deletion vectors: which rows of a data file are deleted, without rewriting the file.
//!
//! A deletion vector is a set of 0-based row indexes. On disk it is the "portable" 64-bit Roaring
//! format (a `u32` little-endian magic 1681511377, then a `RoaringTreemap` serialization) either
//! inline in the log as Z85 text (`storageType = "i"`) or inside a `deletion_vector_<uuid>.bin` file
//! (`"u"`, path derived from a UUID; `"p"`, an absolute path). A DV file is a version byte `1`
//! followed by entries of (u32 big-endian size, bitmap bytes, u32 big-endian CRC-32); a
//! descriptor's `offset` points at the size field.
//!
//! Z85 text from Delta's JVM writer zero-pads the last block; text from the Rust `z85` crate marks
//! each missing byte of the last block with a leading `#`. [`z85_decode`] accepts both (a block
//! starting with `#` cannot be valid standard Z85, since its value would exceed 2^32). Sluice writes
//! the JVM form.

use std::io::Cursor;

use bytes::Bytes;
use roaring::RoaringTreemap;
use uuid::Uuid;

use crate::actions::DeletionVectorDescriptor;
use crate::error::{Error, Result};
use crate::store::TableStore;

/// The magic number that starts a portable 64-bit Roaring deletion vector.
pub const PORTABLE_ROARING_MAGIC: u32 = 1_681_511_377;
/// The version byte that starts a deletion-vector file.
const DV_FILE_FORMAT_VERSION: u8 = 1;
/// Largest deletion vector Sluice reads (a guard against corrupt sizes): 1 GiB.
const DV_SIZE_BYTES_MAX: usize = 1 << 30;

const Z85_ALPHABET: &[u8; 85] =
    b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

/// Each byte's Z85 digit, 0xFF for a byte outside the alphabet: decoding an inline deletion
/// vector looks up each character once (a search of the alphabet per character cost more than
/// the rest of reading a point UPDATE's vector). Built at compile time: a byte is below 256.
#[allow(clippy::indexing_slicing)]
const Z85_DIGITS: [u8; 256] = {
    let mut digits = [0xFF_u8; 256];
    let mut i = 0;
    while i < Z85_ALPHABET.len() {
        digits[Z85_ALPHABET[i] as usize] = i as u8;
        i += 1;
    }
    digits
};

fn z85_digit(c: u8) -> Option<u32> {
    Z85_DIGITS.get(usize::from(c)).copied().filter(|d| *d != 0xFF).map(u32::from)
}

/// Encodes bytes as Z85, zero-padding the last block to 4 bytes (Delta's JVM form).
pub fn z85_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(4) * 5);
    for chunk in bytes.chunks(4) {
        let mut block = [0u8; 4];
        block.iter_mut().zip(chunk).for_each(|(b, c)| *b = *c);
        let mut value = u32::from_be_bytes(block);
        let mut digits = [0u8; 5];
        for digit in digits.iter_mut().rev() {
            // value % 85 < 85, the alphabet's length.
            *digit = Z85_ALPHABET.get((value % 85) as usize).copied().unwrap_or(b'0');
            value /= 85;
        }
        out.extend(digits.iter().map(|&d| d as char));
    }
    out
}

/// Decodes Z85 text (either padding form); returns at most `size` bytes when `size` is given.
pub fn z85_decode(text: &str, size: Option<usize>) -> Result<Vec<u8>> {
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(5) {
        return Err(z85_error(format!("length {} is not a multiple of 5", bytes.len())));
    }
    let mut out = Vec::with_capacity(bytes.len() / 5 * 4);
    for block in bytes.chunks(5) {
        // A leading '#' marks padding in the `z85` crate's form: count the missing bytes.
        let padding = block.iter().take_while(|&&c| c == b'#').count().min(3);
        let mut value: u64 = 0;
        for (index, &c) in block.iter().enumerate() {
            let digit = if index < padding {
                0
            } else {
                z85_digit(c).ok_or_else(|| z85_error(format!("invalid character {:?}", c as char)))?
            };
            value = value * 85 + u64::from(digit);
        }
        if value > u64::from(u32::MAX) {
            return Err(z85_error("a block overflows 32 bits".into()));
        }
        let decoded = (value as u32).to_be_bytes();
        out.extend(decoded.iter().skip(padding));
    }
    if let Some(size) = size {
        if out.len() < size {
            return Err(z85_error(format!("decodes to {} bytes, the descriptor says {size}", out.len())));
        }
        out.truncate(size);
    }
    Ok(out)
}

fn z85_error(message: String) -> Error {
    Error::CorruptFile {
        path: "<inline deletion vector>".into(),
        version: None,
        message: format!("bad Z85: {message}"),
    }
}

/// Serializes a deletion vector: magic, then the portable Roaring treemap.
pub fn serialize_bitmap(rows: &RoaringTreemap) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + rows.serialized_size());
    out.extend_from_slice(&PORTABLE_ROARING_MAGIC.to_le_bytes());
    // Writing into a Vec cannot fail.
    let _ = rows.serialize_into(&mut out);
    out
}

/// Parses the bytes written by [`serialize_bitmap`]; `origin` names them in errors.
pub fn deserialize_bitmap(bytes: &[u8], origin: &str) -> Result<RoaringTreemap> {
    let corrupt = |message: String| Error::CorruptFile { path: origin.to_string(), version: None, message };
    let Some((magic, rest)) = bytes.split_first_chunk::<4>() else {
        return Err(corrupt(format!("deletion vector of {} bytes is too short", bytes.len())));
    };
    let magic = u32::from_le_bytes(*magic);
    if magic != PORTABLE_ROARING_MAGIC {
        return Err(corrupt(format!("deletion vector magic {magic} is not the portable Roaring format")));
    }
    RoaringTreemap::deserialize_from(Cursor::new(rest)).map_err(|e| corrupt(format!("bad Roaring bitmap: {e}")))
}

/// An inline descriptor for a (small) deletion vector.
pub fn inline_descriptor(rows: &RoaringTreemap) -> DeletionVectorDescriptor {
    inline_bitmap(rows, &serialize_bitmap(rows))
}

/// The inline descriptor of `rows`, serialized as `bitmap`.
fn inline_bitmap(rows: &RoaringTreemap, bitmap: &[u8]) -> DeletionVectorDescriptor {
    DeletionVectorDescriptor {
        storage_type: "i".into(),
        path_or_inline_dv: z85_encode(bitmap),
        offset: None,
        size_in_bytes: bitmap.len() as i32,
        cardinality: rows.len() as i64,
    }
}

/// The path, relative to the table root, of the file that holds a `u` or `p` deletion vector.
pub fn file_path(descriptor: &DeletionVectorDescriptor) -> Result<String> {
    match descriptor.storage_type.as_str() {
        "u" => {
            let text = &descriptor.path_or_inline_dv;
            if text.len() < 20 || !text.is_char_boundary(text.len() - 20) {
                return Err(Error::CorruptFile {
                    path: text.clone(),
                    version: None,
                    message: "a 'u' deletion vector path must end in a 20-character Z85 UUID".into(),
                });
            }
            let (prefix, encoded) = text.split_at(text.len() - 20);
            let uuid_bytes = z85_decode(encoded, Some(16))?;
            let uuid = Uuid::from_slice(&uuid_bytes).map_err(|e| Error::Internal(e.to_string()))?;
            let file = format!("deletion_vector_{uuid}.bin");
            Ok(if prefix.is_empty() { file } else { format!("{prefix}/{file}") })
        }
        "p" => Ok(crate::store::percent_decode(&descriptor.path_or_inline_dv)),
        other => Err(Error::CorruptFile {
            path: descriptor.path_or_inline_dv.clone(),
            version: None,
            message: format!("deletion vector storage type '{other}' has no file"),
        }),
    }
}

/// Reads the rows a descriptor deletes.
pub async fn read(store: &TableStore, descriptor: &DeletionVectorDescriptor) -> Result<RoaringTreemap> {
    let size = usize::try_from(descriptor.size_in_bytes).unwrap_or(usize::MAX);
    if size > DV_SIZE_BYTES_MAX {
        return Err(Error::CorruptFile {
            path: descriptor.path_or_inline_dv.clone(),
            version: None,
            message: format!("deletion vector size {} is out of range", descriptor.size_in_bytes),
        });
    }
    let rows = if descriptor.storage_type == "i" {
        let bytes = z85_decode(&descriptor.path_or_inline_dv, Some(size))?;
        deserialize_bitmap(&bytes, "<inline deletion vector>")?
    } else {
        let relative = file_path(descriptor)?;
        let path = if descriptor.storage_type == "p" { absolute_path(store, &relative) } else { store.path(&relative) };
        let offset = descriptor.offset.unwrap_or(1).max(0) as u64;
        let bytes = store.get_range(&path, offset..offset + 4 + size as u64).await?;
        // A truncated file gives fewer bytes than asked for.
        let (stored_size, bitmap) = match bytes.split_first_chunk::<4>() {
            Some((stored, rest)) => (u32::from_be_bytes(*stored) as usize, rest),
            None => (0, &[][..]),
        };
        if stored_size != size || bitmap.len() != size {
            return Err(Error::CorruptFile {
                path: relative,
                version: None,
                message: format!(
                    "deletion vector at offset {offset} has size {stored_size} and {} bytes, the log says {size}",
                    bitmap.len()
                ),
            });
        }
        deserialize_bitmap(bitmap, &relative)?
    };
    if rows.len() != descriptor.cardinality as u64 {
        return Err(Error::CorruptFile {
            path: descriptor.path_or_inline_dv.clone(),
            version: None,
            message: format!("deletion vector holds {} rows, the log says {}", rows.len(), descriptor.cardinality),
        });
    }
    Ok(rows)
}

fn absolute_path(store: &TableStore, uri: &str) -> object_store::path::Path {
    let relative = crate::store::decode_path(store, uri);
    store.path(&relative)
}

/// The largest deletion vector (serialized bitmap, in bytes) a commit writes inline in its log
/// entry rather than into a file: about a thousand scattered rows. A point UPDATE or DELETE then
/// creates no deletion-vector file, and no reader opens one; the log entry grows by the text
/// (5/4 of the bytes), and so does the checkpoint. Readers of the protocol's `deletionVectors`
/// feature read both forms (delta-rs's QueryBuilder and polars read them in `delta_readers`).
pub const INLINE_DV_MAX_BYTES: usize = 2048;

/// Collects the deletion vectors of one commit: the small ones inline, the others into one file.
#[derive(Debug)]
pub struct DvFileWriter {
    uuid: Uuid,
    bytes: Vec<u8>,
    inline: usize,
}

impl Default for DvFileWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl DvFileWriter {
    /// A new, empty file with a random name.
    pub fn new() -> Self {
        Self { uuid: Uuid::new_v4(), bytes: vec![DV_FILE_FORMAT_VERSION], inline: 0 }
    }

    /// Adds a deletion vector and returns its descriptor: inline when it is at most
    /// [`INLINE_DV_MAX_BYTES`], else appended to the file.
    pub fn add(&mut self, rows: &RoaringTreemap) -> DeletionVectorDescriptor {
        let bitmap = serialize_bitmap(rows);
        if bitmap.len() <= INLINE_DV_MAX_BYTES {
            self.inline += 1;
            return inline_bitmap(rows, &bitmap);
        }
        let offset = self.bytes.len() as i32;
        self.bytes.extend_from_slice(&(bitmap.len() as u32).to_be_bytes());
        self.bytes.extend_from_slice(&bitmap);
        self.bytes.extend_from_slice(&crc32fast::hash(&bitmap).to_be_bytes());
        DeletionVectorDescriptor {
            storage_type: "u".into(),
            path_or_inline_dv: z85_encode(self.uuid.as_bytes()),
            offset: Some(offset),
            size_in_bytes: bitmap.len() as i32,
            cardinality: rows.len() as i64,
        }
    }

    /// Whether no deletion vector was added, inline or to the file.
    pub fn is_empty(&self) -> bool {
        self.inline == 0 && self.bytes.len() <= 1
    }

    /// The file's path relative to the table root and its bytes, when a vector went to the file.
    pub fn finish(self) -> Option<(String, Bytes)> {
        (self.bytes.len() > 1).then(|| (format!("deletion_vector_{}.bin", self.uuid), Bytes::from(self.bytes)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn z85_matches_the_reference_vector() {
        // The example from the ZeroMQ Z85 specification.
        let bytes = [0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B];
        assert_eq!(z85_encode(&bytes), "HelloWorld");
        assert_eq!(z85_decode("HelloWorld", None).unwrap(), bytes);
    }

    #[test]
    fn z85_accepts_both_paddings() {
        let bytes = [1u8, 2, 3, 4, 3, 0];
        let jvm = z85_encode(&bytes);
        assert_eq!(z85_decode(&jvm, Some(6)).unwrap(), bytes);
        // The z85 crate's form: the tail [3, 0] is the number 0x0300 with two '#' pads.
        let crate_form = format!("{}##093", &jvm[..5]);
        assert_eq!(z85_decode(&crate_form, Some(6)).unwrap(), bytes);
        assert!(z85_decode("abc", None).is_err());
        assert!(z85_decode("~~~~~", None).is_err());
        // Every byte outside the alphabet is refused; every byte of it is its own position.
        for byte in 0..=255u8 {
            assert_eq!(z85_digit(byte), Z85_ALPHABET.iter().position(|&a| a == byte).map(|p| p as u32));
        }
    }

    #[test]
    fn inline_and_file_vectors_round_trip() {
        let rows: RoaringTreemap = [0u64, 3, 9, 1 << 33].into_iter().collect();
        let descriptor = inline_descriptor(&rows);
        let bytes = z85_decode(&descriptor.path_or_inline_dv, Some(descriptor.size_in_bytes as usize)).unwrap();
        assert_eq!(deserialize_bitmap(&bytes, "t").unwrap(), rows);
        // Small vectors go inline; a commit with only those writes no file.
        let mut writer = DvFileWriter::new();
        assert_eq!(writer.add(&rows), descriptor);
        assert!(!writer.is_empty());
        assert!(writer.finish().is_none());
        // Large ones go to the file, one after the other.
        let scattered: RoaringTreemap = (0..5_000u64).map(|i| i * 7).collect();
        let mut writer = DvFileWriter::new();
        let first = writer.add(&scattered);
        let second = writer.add(&scattered);
        assert!(first.size_in_bytes as usize > INLINE_DV_MAX_BYTES);
        assert_eq!(first.offset, Some(1));
        assert_eq!(second.offset, Some(1 + 4 + first.size_in_bytes + 4));
        let (path, _) = writer.finish().unwrap();
        assert_eq!(file_path(&first).unwrap(), path);
    }

    #[test]
    fn rejects_a_wrong_magic() {
        assert!(deserialize_bitmap(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], "x").is_err());
    }
}
