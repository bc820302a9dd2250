//! Aligned buffers and reads that bypass the page cache: what a verify reads
//! must come from the device, not from memory the writer filled.

use std::fs::File;
use std::path::Path;

/// O_DIRECT wants buffers, offsets and lengths aligned to the logical block.
pub const ALIGN: usize = 4096;

/// A zeroed buffer of `len` bytes whose start is [`ALIGN`]-aligned.
pub struct AlignedBuf {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    /// `len` zero bytes, aligned.
    pub fn new(len: usize) -> AlignedBuf {
        let raw = vec![0u8; len + ALIGN];
        let start = raw.as_ptr().align_offset(ALIGN);
        AlignedBuf { raw, start, len }
    }
    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.raw[self.start..self.start + self.len]
    }
    /// The bytes, to fill.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }
}

/// The file opened for reading past the page cache, and whether that
/// worked (a filesystem without O_DIRECT falls back to buffered reads).
pub fn open_direct(path: &Path) -> std::io::Result<(File, bool)> {
    crate::os::open_direct(path)
}

/// Fills `buf` from `offset`; returns how many bytes the file had there.
pub fn read_full_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match crate::os::read_at(file, &mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}
