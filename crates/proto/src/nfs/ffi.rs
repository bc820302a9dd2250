//! The few functions of libnfs (LGPL-2.1+) the NFS client calls, declared by
//! hand from `<nfsc/libnfs.h>` and `<nfsc/libnfs-raw.h>` of libnfs 4.0
//! (Debian 12's libnfs13), loaded at run time by that exact soname,
//! `libnfs.so.13`: libnfs 6 reordered the arguments of `nfs_pread_async` and
//! `nfs_pwrite_async` (a buffer where the offset was) under a new soname, so
//! binding any other version would pass an offset where a pointer belongs.
//! Every pointer here is owned by libnfs; the safe wrappers live in the
//! parent module, which calls [`load`] before anything else.

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_void};

/// `struct nfs_context`: one connection (and mount) to a server.
#[repr(C)]
pub struct nfs_context {
    _opaque: [u8; 0],
}

/// `struct nfsfh`: an open file.
#[repr(C)]
pub struct nfsfh {
    _opaque: [u8; 0],
}

/// `struct rpc_context`: a bare ONC RPC connection (for the MOUNT export list).
#[repr(C)]
pub struct rpc_context {
    _opaque: [u8; 0],
}

/// `struct nfs_url`, as `nfs_parse_url_dir` returns it (only freed here).
#[repr(C)]
pub struct nfs_url {
    _opaque: [u8; 0],
}

/// `struct groupnode` of the MOUNT protocol's export list.
#[repr(C)]
pub struct groupnode {
    pub gr_name: *mut c_char,
    pub gr_next: *mut groupnode,
}

/// `struct exportnode` of the MOUNT protocol's export list (RFC 1813, MOUNTPROC3_EXPORT).
#[repr(C)]
pub struct exportnode {
    pub ex_dir: *mut c_char,
    pub ex_groups: *mut groupnode,
    pub ex_next: *mut exportnode,
}

/// `nfs_cb`: `err` is bytes moved or -errno; `data` read data or an error string.
pub type nfs_cb = unsafe extern "C" fn(err: c_int, nfs: *mut nfs_context, data: *mut c_void, private: *mut c_void);

/// `rpc_cb`: `status` is RPC_STATUS_*; `data` the decoded reply or an error string.
pub type rpc_cb = unsafe extern "C" fn(rpc: *mut rpc_context, status: c_int, data: *mut c_void, private: *mut c_void);

/// `RPC_STATUS_SUCCESS` of libnfs-raw.h.
pub const RPC_STATUS_SUCCESS: c_int = 0;

headroom_sys::c_library! {
    library "libnfs.so.13", package "libnfs13", for "an nfs:// target";
    fn nfs_init_context() -> *mut nfs_context;
    fn nfs_destroy_context(nfs: *mut nfs_context);
    fn nfs_get_error(nfs: *mut nfs_context) -> *mut c_char;
    fn nfs_set_version(nfs: *mut nfs_context, version: c_int) -> c_int;
    fn nfs_set_timeout(nfs: *mut nfs_context, milliseconds: c_int);
    fn nfs_set_tcp_syncnt(nfs: *mut nfs_context, v: c_int);
    fn nfs_set_autoreconnect(nfs: *mut nfs_context, num_retries: c_int);
    fn nfs_set_interface(nfs: *mut nfs_context, ifname: *const c_char);
    fn nfs_parse_url_dir(nfs: *mut nfs_context, url: *const c_char) -> *mut nfs_url;
    fn nfs_destroy_url(url: *mut nfs_url);
    fn nfs_mount(nfs: *mut nfs_context, server: *const c_char, exportname: *const c_char) -> c_int;
    fn nfs_get_readmax(nfs: *mut nfs_context) -> u64;
    fn nfs_get_writemax(nfs: *mut nfs_context) -> u64;
    fn nfs_create(
        nfs: *mut nfs_context,
        path: *const c_char,
        flags: c_int,
        mode: c_int,
        nfsfh: *mut *mut nfsfh,
    ) -> c_int;
    fn nfs_open(nfs: *mut nfs_context, path: *const c_char, flags: c_int, nfsfh: *mut *mut nfsfh) -> c_int;
    fn nfs_close(nfs: *mut nfs_context, nfsfh: *mut nfsfh) -> c_int;
    fn nfs_unlink(nfs: *mut nfs_context, path: *const c_char) -> c_int;
    fn nfs_stat64(nfs: *mut nfs_context, path: *const c_char, st: *mut nfs_stat_64) -> c_int;
    fn nfs_get_fd(nfs: *mut nfs_context) -> c_int;
    fn nfs_which_events(nfs: *mut nfs_context) -> c_int;
    fn nfs_service(nfs: *mut nfs_context, revents: c_int) -> c_int;
    fn nfs_pread_async(
        nfs: *mut nfs_context,
        nfsfh: *mut nfsfh,
        offset: u64,
        count: u64,
        cb: nfs_cb,
        private: *mut c_void,
    ) -> c_int;
    fn nfs_pwrite_async(
        nfs: *mut nfs_context,
        nfsfh: *mut nfsfh,
        offset: u64,
        count: u64,
        buf: *const c_void,
        cb: nfs_cb,
        private: *mut c_void,
    ) -> c_int;
    fn nfs_fsync_async(nfs: *mut nfs_context, nfsfh: *mut nfsfh, cb: nfs_cb, private: *mut c_void) -> c_int;

    fn rpc_init_context() -> *mut rpc_context;
    fn rpc_destroy_context(rpc: *mut rpc_context);
    fn rpc_set_interface(rpc: *mut rpc_context, ifname: *const c_char);
    fn rpc_get_fd(rpc: *mut rpc_context) -> c_int;
    fn rpc_which_events(rpc: *mut rpc_context) -> c_int;
    fn rpc_service(rpc: *mut rpc_context, revents: c_int) -> c_int;
    fn rpc_get_error(rpc: *mut rpc_context) -> *mut c_char;
    fn mount_getexports_async(
        rpc: *mut rpc_context,
        server: *const c_char,
        cb: rpc_cb,
        private: *mut c_void,
    ) -> c_int;
}

/// `struct nfs_stat_64` of libnfs.h.
#[repr(C)]
#[derive(Default)]
pub struct nfs_stat_64 {
    pub nfs_dev: u64,
    pub nfs_ino: u64,
    pub nfs_mode: u64,
    pub nfs_nlink: u64,
    pub nfs_uid: u64,
    pub nfs_gid: u64,
    pub nfs_rdev: u64,
    pub nfs_size: u64,
    pub nfs_blksize: u64,
    pub nfs_blocks: u64,
    pub nfs_atime: u64,
    pub nfs_mtime: u64,
    pub nfs_ctime: u64,
    pub nfs_atime_nsec: u64,
    pub nfs_mtime_nsec: u64,
    pub nfs_ctime_nsec: u64,
    pub nfs_used: u64,
}

#[cfg(test)]
mod tests {
    #[test]
    fn libnfs_loads_and_has_every_function_declared_here() {
        super::load().unwrap();
    }
}
