//! The Windows implementation of headroom-disk's platform seam (see
//! `os/mod.rs`). Neither engine is written for Windows yet (the overlapped
//! I/O engine on a completion port, "iocp", comes next): both refuse to
//! start, so `disk` on a local path stops with that message before any test.
//! `target.rs` and `safety.rs` here are the stand-ins lib.rs builds instead
//! of the Linux target and safety checks.

use crate::engine::{Completion, EngineConfig, IoEngine, IoUnit};
use std::io;

/// An open file as the engines' system calls take it: its HANDLE's value
/// (a number, so that an engine's configuration may cross to its threads).
pub type RawFile = usize;

const NO_ENGINE: &str = "disk engines are not available on Windows yet";

/// The handle of `file`, as the engines take it.
pub fn raw_file(file: &std::fs::File) -> RawFile {
    std::os::windows::io::AsRawHandle::as_raw_handle(file) as usize
}

/// Not available on Windows yet.
pub fn memory_file(_name: &str) -> io::Result<std::fs::File> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "a file in memory only is not available on Windows yet"))
}

/// Writes all of `buf` at `offset`.
pub fn write_all_at(file: &std::fs::File, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_write(file, buf, offset) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                buf = &buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// No I/O is submitted asynchronously on Windows yet.
pub fn force_async(_block_size: u64, _direct: bool) -> bool {
    false
}

/// No asynchronous engine on Windows yet.
pub fn uring_available() -> io::Result<()> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "io_uring is Linux's"))
}

/// The synchronous engine: not available on Windows yet (never built).
pub enum PsyncEngine {}

/// The asynchronous engine: not available on Windows yet (never built).
pub enum UringEngine {}

impl PsyncEngine {
    /// Refuses: not available on Windows yet.
    pub fn new(_config: EngineConfig) -> io::Result<Self> {
        Err(io::Error::new(io::ErrorKind::Unsupported, NO_ENGINE))
    }
}

impl UringEngine {
    /// Refuses: io_uring is Linux's.
    pub fn new(_config: EngineConfig) -> io::Result<Self> {
        Err(io::Error::new(io::ErrorKind::Unsupported, NO_ENGINE))
    }
}

macro_rules! never_built {
    ($engine:ty) => {
        impl IoEngine for $engine {
            fn buffer_mut(&mut self, _index: u16) -> &mut [u8] {
                match *self {}
            }
            fn queue(&mut self, _io: IoUnit) -> io::Result<()> {
                match *self {}
            }
            fn commit(&mut self) -> io::Result<()> {
                match *self {}
            }
            fn getevents(&mut self, _min: usize, _out: &mut Vec<Completion>) -> io::Result<()> {
                match *self {}
            }
        }
    };
}
never_built!(PsyncEngine);
never_built!(UringEngine);

/// Fails with NotFound: no signature probe (libblkid's place) is written for
/// Windows yet, so safety.rs refuses every write over existing data.
pub fn probe_signatures(_file: &std::fs::File) -> io::Result<Vec<crate::safety::Signature>> {
    Err(io::Error::new(io::ErrorKind::NotFound, "no signature probe is available on Windows yet"))
}
