//! The Linux implementation of the binary's platform seam (see `mod.rs`):
//! SIGINT, SIGTERM and SIGHUP taken with sigwait(2); access(2), mode bits
//! and the terminal's window size.
//!
//! No thread runs a signal handler: the thread that installs this blocks the
//! three signals, every thread spawned later inherits the mask, and one
//! thread takes them with sigwait(2). A signal landing in a worker would
//! interrupt its system calls, and some C clients take that for a dead
//! connection: libnfs's synchronous calls turn EINTR from poll(2) into a
//! socket error and then crash when their context is destroyed. Child
//! processes start with an empty mask (std resets it).

use super::StopSignal;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The signals that stop headroom.
const TERMINATING: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Blocks the three signals in this thread (and so in every thread spawned
/// later) and starts the thread that takes them.
pub fn watch_stop_signals(on: fn(StopSignal)) {
    let set = terminating_set();
    // SAFETY: pthread_sigmask changes only this thread's mask; `set` is
    // initialised.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    // The thread inherits the blocked mask, which is what sigwait needs.
    let spawned = std::thread::Builder::new().name("signals".into()).spawn(move || loop {
        let mut signal: libc::c_int = 0;
        // SAFETY: `set` and `signal` are valid for the call.
        if unsafe { libc::sigwait(&set, &mut signal) } == 0 {
            on(match signal {
                libc::SIGTERM => StopSignal::Terminate,
                libc::SIGHUP => StopSignal::HangUp,
                _ => StopSignal::Interrupt,
            });
        }
    });
    if spawned.is_err() {
        // No thread to take them: leave the default action (the process
        // dies with the signal) rather than ignore Ctrl-C.
        // SAFETY: as above.
        unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
    }
}

fn terminating_set() -> libc::sigset_t {
    // SAFETY: a local sigset_t, emptied before use.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in TERMINATING {
            libc::sigaddset(&mut set, signal);
        }
        set
    }
}

/// 128 + the signal's number, as shells report it.
pub fn exit_code(signal: StopSignal) -> u8 {
    let number = match signal {
        StopSignal::Interrupt => libc::SIGINT,
        StopSignal::Terminate => libc::SIGTERM,
        StopSignal::HangUp => libc::SIGHUP,
    };
    u8::try_from(128 + number).unwrap_or(130)
}

/// Whether this process may write `path` (access(2) W_OK).
pub fn is_writable(path: &Path) -> bool {
    rustix::fs::access(path, rustix::fs::Access::WRITE_OK).is_ok()
}

/// Whether `meta` is a file someone may execute.
pub fn is_executable(meta: &std::fs::Metadata) -> bool {
    meta.is_file() && meta.permissions().mode() & 0o111 != 0
}

/// The terminal's columns (TIOCGWINSZ), None when `stdout` is no terminal.
pub fn terminal_columns(stdout: &std::io::Stdout) -> Option<u16> {
    rustix::termios::tcgetwinsize(stdout).ok().map(|size| size.ws_col)
}
