//! Ctrl-C (and SIGTERM/SIGHUP): the first one asks every running probe to
//! stop (engines poll the flag, clean up their files and return what they
//! measured); a second one hurries the cleanup rather than skipping it: it
//! removes the test files at once and exits. Either way the exit code is 130.
//!
//! Only the handler's own thread receives these signals: the thread that
//! installs it blocks them, and every thread spawned later inherits the mask.
//! A signal landing in a worker would interrupt its system calls, and some C
//! clients take that for a dead connection: libnfs's synchronous calls turn
//! EINTR from poll(2) into a socket error and then crash when their context
//! is destroyed. Child processes start with an empty mask (std resets it).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

static STOP: AtomicBool = AtomicBool::new(false);
static INSTALLED: OnceLock<()> = OnceLock::new();

/// The exit code after Ctrl-C (128 + SIGINT, as shells report it).
pub const INTERRUPTED_EXIT: u8 = 130;

/// The process-wide stop flag, with the Ctrl-C/SIGTERM handler installed on first use.
pub fn stop_flag() -> &'static AtomicBool {
    INSTALLED.get_or_init(|| {
        let _ = ctrlc::set_handler(|| {
            if STOP.swap(true, Ordering::SeqCst) {
                eprintln!("\nheadroom: removing the test files and quitting");
                headroom_disk::remove_test_files_now();
                std::process::exit(i32::from(INTERRUPTED_EXIT));
            }
            eprintln!("\nheadroom: stopping (Ctrl-C again to quit sooner)");
        });
        block_termination_signals_here();
    });
    &STOP
}

/// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread (and so in the
/// threads it spawns), leaving them to ctrlc's thread, spawned before this.
fn block_termination_signals_here() {
    // SAFETY: a local sigset_t, filled before use; pthread_sigmask changes
    // only this thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, signal);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Whether Ctrl-C (or SIGTERM/SIGHUP) arrived: the command then exits 130.
pub fn interrupted() -> bool {
    STOP.load(Ordering::SeqCst)
}
