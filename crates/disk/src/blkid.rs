//! The eight functions of libblkid (util-linux, LGPL-2.1+) the signature
//! probe calls, declared from `<blkid/blkid.h>` (ABI `libblkid.so.1`, stable
//! since util-linux 2.15), and a probe that frees itself. Loaded at run time
//! ([`headroom_sys::clib`]); the static build links `libblkid.a` (feature
//! `static-blkid`).
//!
//! Owns the FFI only; what a signature means is safety.rs's business.

use std::ffi::{c_char, c_int, CStr};
use std::io;
use std::os::fd::AsRawFd;

/// `struct blkid_struct_probe`, opaque.
#[repr(C)]
pub struct blkid_struct_probe {
    _opaque: [u8; 0],
}

// The function names are libblkid's.
#[allow(non_camel_case_types)]
type blkid_probe = *mut blkid_struct_probe;

headroom_sys::c_library! {
    library "libblkid.so.1", package "libblkid1", for "the signature check",
    static feature "static-blkid", link "blkid";
    fn blkid_new_probe() -> blkid_probe;
    fn blkid_free_probe(pr: blkid_probe);
    fn blkid_probe_set_device(pr: blkid_probe, fd: c_int, off: i64, size: i64) -> c_int;
    fn blkid_probe_enable_superblocks(pr: blkid_probe, enable: c_int) -> c_int;
    fn blkid_probe_set_superblocks_flags(pr: blkid_probe, flags: c_int) -> c_int;
    fn blkid_probe_enable_partitions(pr: blkid_probe, enable: c_int) -> c_int;
    fn blkid_do_probe(pr: blkid_probe) -> c_int;
    fn blkid_probe_lookup_value(pr: blkid_probe, name: *const c_char, data: *mut *const c_char, len: *mut usize) -> c_int;
}

/// `BLKID_SUBLKS_TYPE`: report `TYPE`.
pub const SUBLKS_TYPE: c_int = 1 << 5;
/// `BLKID_SUBLKS_USAGE`: report `USAGE`.
pub const SUBLKS_USAGE: c_int = 1 << 7;
/// `BLKID_SUBLKS_VERSION`: report `VERSION`.
pub const SUBLKS_VERSION: c_int = 1 << 8;
/// `BLKID_SUBLKS_BADCSUM`: report a superblock whose checksum is wrong.
pub const SUBLKS_BADCSUM: c_int = 1 << 10;

/// What `blkid_do_probe` found.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// A match: its values can be looked up.
    Found,
    /// Every prober ran.
    Done,
}

/// One libblkid probe over an open descriptor, freed on drop.
pub struct Probe(blkid_probe);

fn failed(what: &str) -> io::Error {
    io::Error::other(format!("libblkid {what} failed"))
}

impl Probe {
    /// A probe of the whole of `file` (libblkid reads through the descriptor,
    /// never reopens the path). Fails with the one line naming the package
    /// when libblkid cannot be loaded.
    pub fn new(file: &impl AsRawFd) -> io::Result<Probe> {
        load().map_err(|e| io::Error::new(io::ErrorKind::NotFound, e))?;
        // SAFETY: loaded; no arguments, NULL on failure.
        let pr = unsafe { blkid_new_probe() };
        if pr.is_null() {
            return Err(failed("new probe"));
        }
        let probe = Probe(pr);
        // SAFETY: valid probe; the descriptor outlives the probe (the caller's borrow).
        probe.check("set device", unsafe { blkid_probe_set_device(pr, file.as_raw_fd(), 0, 0) })?;
        Ok(probe)
    }

    fn check(&self, what: &str, rc: c_int) -> io::Result<c_int> {
        if rc < 0 {
            Err(failed(what))
        } else {
            Ok(rc)
        }
    }

    /// Superblock probing on, reporting what `flags` (SUBLKS_*) ask for.
    pub fn superblocks(&mut self, flags: c_int) -> io::Result<()> {
        // SAFETY: valid probe.
        self.check("enable superblocks", unsafe { blkid_probe_enable_superblocks(self.0, 1) })?;
        // SAFETY: valid probe.
        self.check("superblock flags", unsafe { blkid_probe_set_superblocks_flags(self.0, flags) }).map(drop)
    }

    /// Partition table probing on.
    pub fn partitions(&mut self) -> io::Result<()> {
        // SAFETY: valid probe.
        self.check("enable partitions", unsafe { blkid_probe_enable_partitions(self.0, 1) }).map(drop)
    }

    /// The next match of the current chain.
    pub fn step(&mut self) -> io::Result<Step> {
        // SAFETY: valid probe.
        match self.check("probe", unsafe { blkid_do_probe(self.0) })? {
            0 => Ok(Step::Found),
            _ => Ok(Step::Done),
        }
    }

    /// A value of the last match (`TYPE`, `USAGE`, `VERSION`, `PTTYPE`).
    pub fn value(&self, name: &CStr) -> Option<String> {
        let mut data: *const c_char = std::ptr::null();
        // SAFETY: valid probe and NUL-terminated name; len may be NULL.
        let rc = unsafe { blkid_probe_lookup_value(self.0, name.as_ptr(), &mut data, std::ptr::null_mut()) };
        // SAFETY: on success data is a NUL-terminated string owned by the probe.
        (rc == 0 && !data.is_null()).then(|| unsafe { CStr::from_ptr(data) }.to_string_lossy().into_owned())
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        // SAFETY: created by blkid_new_probe, freed once.
        unsafe { blkid_free_probe(self.0) }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn libblkid_loads_and_has_every_function_declared_here() {
        super::load().unwrap();
    }
}
