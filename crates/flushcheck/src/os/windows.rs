//! Windows: FILE_FLAG_NO_BUFFERING (ERROR_INVALID_PARAMETER where the
//! volume refuses it), FILE_FLAG_WRITE_THROUGH for dsync, and positioned
//! I/O through std's seek_read/seek_write (which move the file pointer:
//! each file here is used by one thread).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::windows::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

/// CreateFile's FILE_FLAG_NO_BUFFERING (winbase.h).
const FILE_FLAG_NO_BUFFERING: u32 = 0x2000_0000;
/// CreateFile's FILE_FLAG_WRITE_THROUGH (winbase.h).
const FILE_FLAG_WRITE_THROUGH: u32 = 0x8000_0000;
/// winerror.h's ERROR_INVALID_PARAMETER.
const ERROR_INVALID_PARAMETER: i32 = 87;

pub(crate) fn open_direct(path: &Path) -> io::Result<(File, bool)> {
    match OpenOptions::new().read(true).custom_flags(FILE_FLAG_NO_BUFFERING).open(path) {
        Ok(f) => Ok((f, true)),
        Err(e) if e.raw_os_error() == Some(ERROR_INVALID_PARAMETER) => Ok((File::open(path)?, false)),
        Err(e) => Err(e),
    }
}

pub(crate) fn open_for_writes(path: &Path, dsync: bool) -> io::Result<File> {
    OpenOptions::new().write(true).custom_flags(if dsync { FILE_FLAG_WRITE_THROUGH } else { 0 }).open(path)
}

pub(crate) fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    file.seek_read(buf, offset)
}

pub(crate) fn write_all_at(file: &File, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match file.seek_write(buf, offset) {
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
