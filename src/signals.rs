//! Ctrl-C, SIGTERM and SIGHUP: the first one asks every running probe to
//! stop (engines poll the flag, clean up their files and return what they
//! measured); a second one hurries the cleanup rather than skipping it: it
//! removes the test files at once and exits. The exit code is 128 plus the
//! first signal's number, as shells report a process that signal killed:
//! 130 for Ctrl-C, 143 for SIGTERM (systemd, Kubernetes, `kill`), 129 for
//! SIGHUP (the terminal went away). Owns only the stop flag and which signal
//! set it; what is cleaned up is the engines' business.
//!
//! No thread runs a signal handler: the thread that installs this blocks the
//! three signals, every thread spawned later inherits the mask, and one
//! thread takes them with sigwait(2). A signal landing in a worker would
//! interrupt its system calls, and some C clients take that for a dead
//! connection: libnfs's synchronous calls turn EINTR from poll(2) into a
//! socket error and then crash when their context is destroyed. Child
//! processes start with an empty mask (std resets it).

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::OnceLock;

static STOP: AtomicBool = AtomicBool::new(false);
/// The first signal that arrived (0: none).
static FIRST: AtomicI32 = AtomicI32::new(0);
static INSTALLED: OnceLock<()> = OnceLock::new();

/// The signals that stop headroom.
const TERMINATING: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// The process-wide stop flag, with the signal thread started on first use.
pub fn stop_flag() -> &'static AtomicBool {
    INSTALLED.get_or_init(|| {
        let set = terminating_set();
        // SAFETY: pthread_sigmask changes only this thread's mask; `set` is
        // initialised.
        unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
        // The thread inherits the blocked mask, which is what sigwait needs.
        let spawned = std::thread::Builder::new().name("signals".into()).spawn(move || loop {
            let mut signal: libc::c_int = 0;
            // SAFETY: `set` and `signal` are valid for the call.
            if unsafe { libc::sigwait(&set, &mut signal) } == 0 {
                on_signal(signal);
            }
        });
        if spawned.is_err() {
            // No thread to take them: leave the default action (the process
            // dies with the signal) rather than ignore Ctrl-C.
            // SAFETY: as above.
            unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
        }
    });
    &STOP
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

fn on_signal(signal: libc::c_int) {
    let _ = FIRST.compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
    if STOP.swap(true, Ordering::SeqCst) {
        eprintln!("\nheadroom: removing the test files and quitting");
        headroom_disk::remove_test_files_now();
        std::process::exit(i32::from(exit_code_for(FIRST.load(Ordering::SeqCst))));
    }
    let name = match signal {
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "Ctrl-C",
    };
    eprintln!("\nheadroom: {name}: stopping (Ctrl-C again to quit sooner)");
}

/// 128 + the signal's number, as shells report it.
fn exit_code_for(signal: libc::c_int) -> u8 {
    u8::try_from(128 + signal).unwrap_or(130)
}

/// The exit code after a stop by signal (130, 143 or 129), or None when
/// none arrived.
pub fn interrupted_exit() -> Option<u8> {
    if !STOP.load(Ordering::SeqCst) {
        return None;
    }
    Some(exit_code_for(FIRST.load(Ordering::SeqCst)))
}
