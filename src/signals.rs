//! Ctrl-C (and SIGTERM/SIGHUP): the first one asks every running probe to
//! stop (engines poll the flag, clean up their files and return what they
//! measured); a second one hurries the cleanup rather than skipping it: it
//! removes the test files at once and exits. Either way the exit code is 130.

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
    });
    &STOP
}

/// Whether Ctrl-C (or SIGTERM/SIGHUP) arrived: the command then exits 130.
pub fn interrupted() -> bool {
    STOP.load(Ordering::SeqCst)
}
