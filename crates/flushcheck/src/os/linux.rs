//! Linux: O_DIRECT (EINVAL from a filesystem without it), O_DSYNC, pread and pwrite.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

pub(crate) fn open_direct(path: &Path) -> io::Result<(File, bool)> {
    match OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(path) {
        Ok(f) => Ok((f, true)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok((File::open(path)?, false)),
        Err(e) => Err(e),
    }
}

pub(crate) fn open_for_writes(path: &Path, dsync: bool) -> io::Result<File> {
    OpenOptions::new().write(true).custom_flags(if dsync { libc::O_DSYNC } else { 0 }).open(path)
}

pub(crate) fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    file.read_at(buf, offset)
}

pub(crate) fn write_all_at(file: &File, buf: &[u8], offset: u64) -> io::Result<()> {
    file.write_all_at(buf, offset)
}
