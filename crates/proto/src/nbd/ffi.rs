//! The few functions of libnbd (the NBD project's reference client library,
//! LGPL-2.1+) headroom calls, declared by hand from `<libnbd.h>` of libnbd
//! 1.14 (Debian 12's libnbd0), loaded at run time by its soname
//! `libnbd.so.0` (libnbd keeps its ABI under that soname: symbols are
//! versioned and only added), and a handle that closes itself. The parent
//! module calls [`load`] before anything else.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};

/// libnbd's opaque connection handle.
#[repr(C)]
pub struct NbdHandle {
    _private: [u8; 0],
}

/// `nbd_completion_callback`: called once per command when its reply (or
/// its failure) arrives; `free` once libnbd no longer needs `user_data`.
#[repr(C)]
pub struct CompletionCallback {
    pub callback: Option<unsafe extern "C" fn(user_data: *mut c_void, error: *mut c_int) -> c_int>,
    pub user_data: *mut c_void,
    pub free: Option<unsafe extern "C" fn(user_data: *mut c_void)>,
}

/// `LIBNBD_CMD_FLAG_FUA`: the write is stable before the reply.
pub const CMD_FLAG_FUA: u32 = 0x01;
/// `LIBNBD_AIO_DIRECTION_READ` / `_WRITE`: what the state machine waits for.
pub const AIO_DIRECTION_READ: c_uint = 1;
pub const AIO_DIRECTION_WRITE: c_uint = 2;
/// `LIBNBD_SIZE_MINIMUM` / `_PREFERRED` / `_MAXIMUM` for `nbd_get_block_size`.
pub const SIZE_MINIMUM: c_int = 0;
pub const SIZE_PREFERRED: c_int = 1;
pub const SIZE_MAXIMUM: c_int = 2;

headroom_sys::c_library! {
    library "libnbd.so.0", package "libnbd0", for "an nbd:// target";
    fn nbd_create() -> *mut NbdHandle;
    fn nbd_close(h: *mut NbdHandle);
    fn nbd_get_error() -> *const c_char;
    fn nbd_get_errno() -> c_int;
    fn nbd_set_export_name(h: *mut NbdHandle, name: *const c_char) -> c_int;
    fn nbd_set_pread_initialize(h: *mut NbdHandle, request: bool) -> c_int;
    fn nbd_aio_connect_socket(h: *mut NbdHandle, sock: c_int) -> c_int;
    fn nbd_aio_is_ready(h: *mut NbdHandle) -> c_int;
    fn nbd_aio_is_dead(h: *mut NbdHandle) -> c_int;
    fn nbd_aio_is_closed(h: *mut NbdHandle) -> c_int;
    fn nbd_get_size(h: *mut NbdHandle) -> i64;
    fn nbd_is_read_only(h: *mut NbdHandle) -> c_int;
    fn nbd_can_flush(h: *mut NbdHandle) -> c_int;
    fn nbd_can_fua(h: *mut NbdHandle) -> c_int;
    fn nbd_get_block_size(h: *mut NbdHandle, size_type: c_int) -> i64;
    fn nbd_get_structured_replies_negotiated(h: *mut NbdHandle) -> c_int;
    fn nbd_get_protocol(h: *mut NbdHandle) -> *const c_char;
    fn nbd_aio_pread(
        h: *mut NbdHandle,
        buf: *mut c_void,
        count: usize,
        offset: u64,
        completion: CompletionCallback,
        flags: u32,
    ) -> i64;
    fn nbd_aio_pwrite(
        h: *mut NbdHandle,
        buf: *const c_void,
        count: usize,
        offset: u64,
        completion: CompletionCallback,
        flags: u32,
    ) -> i64;
    fn nbd_aio_flush(h: *mut NbdHandle, completion: CompletionCallback, flags: u32) -> i64;
    fn nbd_aio_get_fd(h: *mut NbdHandle) -> c_int;
    fn nbd_aio_get_direction(h: *mut NbdHandle) -> c_uint;
    fn nbd_aio_notify_read(h: *mut NbdHandle) -> c_int;
    fn nbd_aio_notify_write(h: *mut NbdHandle) -> c_int;
    fn nbd_aio_in_flight(h: *mut NbdHandle) -> c_int;
    fn nbd_aio_disconnect(h: *mut NbdHandle, flags: u32) -> c_int;
}

/// libnbd's message for the last failed call on this thread, on one line.
pub fn last_error() -> String {
    // SAFETY: nbd_get_error returns a thread-local string or NULL.
    let msg = unsafe { nbd_get_error() };
    let text = if msg.is_null() {
        "unknown libnbd error".to_string()
    } else {
        // SAFETY: non-null, NUL-terminated, valid until the next libnbd call on this thread.
        unsafe { CStr::from_ptr(msg) }.to_string_lossy().into_owned()
    };
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// errno of the last failed call on this thread (0 when libnbd set none).
pub fn last_errno() -> i32 {
    // SAFETY: plain thread-local read.
    unsafe { nbd_get_errno() }
}

/// One libnbd handle, closed on drop. Not shared between threads: each
/// worker owns its own (libnbd handles are thread-safe, but one per worker
/// needs no lock).
pub struct Handle(*mut NbdHandle);

// SAFETY: libnbd handles may be used from any thread (it locks internally);
// ours is only ever used by the thread that owns the engine.
unsafe impl Send for Handle {}

impl Handle {
    /// A new handle, or libnbd's reason.
    pub fn new() -> Result<Handle, String> {
        // SAFETY: no arguments; NULL on failure.
        let h = unsafe { nbd_create() };
        if h.is_null() {
            Err(last_error())
        } else {
            Ok(Handle(h))
        }
    }

    /// The raw pointer, for the aio calls.
    pub fn raw(&self) -> *mut NbdHandle {
        self.0
    }

    fn check(&self, rc: c_int) -> Result<c_int, String> {
        if rc < 0 {
            Err(last_error())
        } else {
            Ok(rc)
        }
    }

    /// Export name to ask for (before connecting).
    pub fn set_export_name(&self, name: &CStr) -> Result<(), String> {
        // SAFETY: valid handle and NUL-terminated string (copied by libnbd).
        self.check(unsafe { nbd_set_export_name(self.0, name.as_ptr()) }).map(drop)
    }

    /// Whether libnbd zeroes read buffers before each read; the reply
    /// overwrites them anyway, so headroom turns it off (as nbdcopy does).
    pub fn set_pread_initialize(&self, on: bool) -> Result<(), String> {
        // SAFETY: valid handle.
        self.check(unsafe { nbd_set_pread_initialize(self.0, on) }).map(drop)
    }

    /// Starts the handshake over a connected, non-blocking socket; libnbd owns it from now on.
    pub fn aio_connect_socket(&self, fd: c_int) -> Result<(), String> {
        // SAFETY: valid handle; fd ownership passes to libnbd.
        self.check(unsafe { nbd_aio_connect_socket(self.0, fd) }).map(drop)
    }

    /// The connection failed or was closed.
    pub fn is_dead(&self) -> bool {
        // SAFETY: valid handle.
        unsafe { nbd_aio_is_dead(self.0) == 1 || nbd_aio_is_closed(self.0) == 1 }
    }

    /// Whether the handshake finished.
    pub fn is_ready(&self) -> bool {
        // SAFETY: valid handle.
        unsafe { nbd_aio_is_ready(self.0) == 1 }
    }

    /// Export size, bytes.
    pub fn size(&self) -> Result<u64, String> {
        // SAFETY: valid handle.
        let s = unsafe { nbd_get_size(self.0) };
        if s < 0 {
            Err(last_error())
        } else {
            Ok(s as u64)
        }
    }

    fn flag(&self, f: unsafe fn(*mut NbdHandle) -> c_int) -> Result<bool, String> {
        // SAFETY: valid handle; f is one of libnbd's flag getters.
        self.check(unsafe { f(self.0) }).map(|v| v == 1)
    }

    /// The server exports read-only.
    pub fn is_read_only(&self) -> Result<bool, String> {
        self.flag(nbd_is_read_only)
    }

    /// The server accepts NBD_CMD_FLUSH.
    pub fn can_flush(&self) -> Result<bool, String> {
        self.flag(nbd_can_flush)
    }

    /// The server honours NBD_CMD_FLAG_FUA.
    pub fn can_fua(&self) -> Result<bool, String> {
        self.flag(nbd_can_fua)
    }

    /// Structured replies were negotiated.
    pub fn structured_replies(&self) -> Result<bool, String> {
        self.flag(nbd_get_structured_replies_negotiated)
    }

    /// A block size constraint the server advertised (0: none advertised).
    pub fn block_size(&self, which: c_int) -> Result<u64, String> {
        // SAFETY: valid handle.
        let s = unsafe { nbd_get_block_size(self.0, which) };
        if s < 0 {
            Err(last_error())
        } else {
            Ok(s as u64)
        }
    }

    /// Handshake style, e.g. `newstyle-fixed`.
    pub fn protocol(&self) -> Option<String> {
        // SAFETY: valid handle; static string or NULL.
        let p = unsafe { nbd_get_protocol(self.0) };
        // SAFETY: non-null static NUL-terminated string.
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }

    /// The socket libnbd reads and writes (-1 before connecting).
    pub fn fd(&self) -> c_int {
        // SAFETY: valid handle.
        unsafe { nbd_aio_get_fd(self.0) }
    }

    /// What the state machine waits for: AIO_DIRECTION_READ and/or _WRITE.
    pub fn direction(&self) -> c_uint {
        // SAFETY: valid handle.
        unsafe { nbd_aio_get_direction(self.0) }
    }

    /// The socket is readable: let libnbd read (runs completion callbacks).
    pub fn notify_read(&self) -> Result<(), String> {
        // SAFETY: valid handle.
        self.check(unsafe { nbd_aio_notify_read(self.0) }).map(drop)
    }

    /// The socket is writable: let libnbd send what it queued.
    pub fn notify_write(&self) -> Result<(), String> {
        // SAFETY: valid handle.
        self.check(unsafe { nbd_aio_notify_write(self.0) }).map(drop)
    }

    /// Commands sent and not yet answered.
    pub fn in_flight(&self) -> usize {
        // SAFETY: valid handle.
        unsafe { nbd_aio_in_flight(self.0) }.max(0) as usize
    }

    /// Tells the server the session ends (NBD_CMD_DISC), without waiting:
    /// nbd_shutdown would wait for the server, which may be gone.
    pub fn disconnect(&self) {
        // SAFETY: valid handle; failure (not ready, already dead) is fine here.
        unsafe { nbd_aio_disconnect(self.0, 0) };
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: created by nbd_create, closed once. Frees every pending
        // command's closure (their free callbacks run here).
        unsafe { nbd_close(self.0) }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn libnbd_loads_and_has_every_function_declared_here() {
        super::load().unwrap();
    }
}
