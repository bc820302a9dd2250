//! Where a flushcheck's blocks live: the [`Storage`] the writer and verify
//! go through, a local file ([`LocalFile`]) or an export reached through
//! headroom's protocol clients ([`ShareStorage`]: NBD, iSCSI, or a file
//! on an SMB or NFS share).
//!
//! It owns only moving bytes and asking for durability; the block layout,
//! the ledger and the judging stay in `block`, `writer` and `verify`. It
//! must not decide whether a target may be written: the caller checks that
//! (a local file in `writer`, an export in headroom-disk's `prepare_share`).

use headroom_disk::{one_io, IoEngine, IoKind, IoUnit, Share, ShareIo};
use std::fs::File;
use std::io;

/// Blocks at offsets, made durable on request, read back past any cache.
pub trait Storage {
    /// Writes all of `buf` at `offset`; durable on return if the storage was
    /// opened for dsync (O_DSYNC, FUA).
    fn write_at(&mut self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Makes every write so far durable: fsync, NBD_CMD_FLUSH, SYNCHRONIZE CACHE,
    /// SMB2 FLUSH, NFS COMMIT.
    fn make_durable(&mut self) -> io::Result<()>;
    /// Fills `buf` from `offset` from the storage itself, not a cache of
    /// this machine; returns how many bytes it had there.
    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
}

/// A file on a local or mounted filesystem, opened by the caller (O_DSYNC
/// for writes, O_DIRECT for reads where the filesystem allows: buffers and
/// offsets are then aligned by the caller).
pub struct LocalFile(pub File);

impl Storage for LocalFile {
    fn write_at(&mut self, buf: &[u8], offset: u64) -> io::Result<()> {
        crate::os::write_all_at(&self.0, buf, offset)
    }

    fn make_durable(&mut self) -> io::Result<()> {
        self.0.sync_all()
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        crate::io::read_full_at(&self.0, buf, offset)
    }
}

/// One connection to an export. headroom's clients keep no cache, so a
/// read is answered by the server.
pub struct ShareStorage {
    engine: Box<dyn IoEngine + Send>,
    buf_size: usize,
    block_size: u64,
    capacity: u64,
}

impl ShareStorage {
    /// A connection to `share` moving at most `buf_size` bytes per request:
    /// for writes made durable as `writes` says (Dsync: every write carries
    /// FUA), or for reads only (None).
    pub fn connect(share: &dyn Share, writes: Option<crate::SyncMode>, buf_size: usize) -> io::Result<ShareStorage> {
        let sync = match writes {
            Some(crate::SyncMode::Fsync) => headroom_disk::SyncMode::Fsync,
            Some(crate::SyncMode::Dsync) => headroom_disk::SyncMode::Dsync,
            Some(crate::SyncMode::None) | None => headroom_disk::SyncMode::None,
        };
        let engine = share.connect(ShareIo { write: writes.is_some(), sync, depth: 1, buf_size, job: 0 })?;
        Ok(ShareStorage { engine, buf_size, block_size: share.block_size().max(1), capacity: share.capacity() })
    }

    fn one(&mut self, kind: IoKind, offset: u64, len: usize) -> io::Result<()> {
        one_io(self.engine.as_mut(), IoUnit { kind, offset, len: len as u32, buf_index: 0, tag: 0 })
    }
}

impl Storage for ShareStorage {
    fn write_at(&mut self, buf: &[u8], offset: u64) -> io::Result<()> {
        assert!(buf.len() <= self.buf_size, "a write larger than the connection's buffer");
        self.engine.buffer_mut(0)[..buf.len()].copy_from_slice(buf);
        self.one(IoKind::Write, offset, buf.len())
    }

    fn make_durable(&mut self) -> io::Result<()> {
        self.one(IoKind::Fsync, 0, 0)
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        // Past the export's end there is nothing; a request there is an error on the wire.
        let len = (buf.len().min(self.buf_size) as u64).min(self.capacity.saturating_sub(offset));
        let len = (len - len % self.block_size) as usize;
        if len == 0 {
            return Ok(0);
        }
        self.one(IoKind::Read, offset, len)?;
        buf[..len].copy_from_slice(&self.engine.buffer_mut(0)[..len]);
        Ok(len)
    }
}
