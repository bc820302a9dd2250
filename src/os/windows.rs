//! The Windows implementation of the binary's platform seam (see `mod.rs`):
//! the console's control events (SetConsoleCtrlHandler), the read-only
//! attribute and the console window's width.
//!
//! Windows runs a console control handler on a thread it starts for the
//! event, never inside a worker's call, which is what `watch_stop_signals`
//! promises. Ctrl-C and Ctrl-Break are a stop from the user, closing the
//! console window a hang-up, and logging off or shutting down a stop from
//! the system.

use super::StopSignal;
use std::path::Path;
use std::sync::OnceLock;
use windows_sys::core::BOOL;
use windows_sys::Win32::System::Console::{
    SetConsoleCtrlHandler, CTRL_BREAK_EVENT, CTRL_CLOSE_EVENT, CTRL_C_EVENT, CTRL_LOGOFF_EVENT, CTRL_SHUTDOWN_EVENT,
};

static ON_STOP: OnceLock<fn(StopSignal)> = OnceLock::new();

unsafe extern "system" fn on_control(event: u32) -> BOOL {
    let signal = match event {
        CTRL_C_EVENT | CTRL_BREAK_EVENT => StopSignal::Interrupt,
        CTRL_CLOSE_EVENT => StopSignal::HangUp,
        CTRL_LOGOFF_EVENT | CTRL_SHUTDOWN_EVENT => StopSignal::Terminate,
        _ => return 0,
    };
    match ON_STOP.get() {
        Some(on) => {
            on(signal);
            1
        }
        None => 0,
    }
}

/// From now on, every console control event calls `on` on the thread
/// Windows starts for it.
pub fn watch_stop_signals(on: fn(StopSignal)) {
    let _ = ON_STOP.set(on);
    // SAFETY: `on_control` is a plain function that lives as long as the process.
    // A refusal leaves the default action: the process ends with the event.
    unsafe { SetConsoleCtrlHandler(Some(on_control), 1) };
}

/// The code a Windows console reports for a program Ctrl-C ended is
/// STATUS_CONTROL_C_EXIT, which does not fit an exit code of 8 bits; the
/// shells' 130 (and 143, 129) say the same to scripts that run headroom.
pub fn exit_code(signal: StopSignal) -> u8 {
    match signal {
        StopSignal::Interrupt => 130,
        StopSignal::Terminate => 143,
        StopSignal::HangUp => 129,
    }
}

/// Whether `path` may be written: not marked read-only. Windows keeps who
/// may write in the ACL, which is not read yet; a refused write still says so
/// when it happens.
pub fn is_writable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| !m.permissions().readonly())
}

/// Whether `meta` is a file (Windows runs a file by its name, not a mode bit).
pub fn is_executable(meta: &std::fs::Metadata) -> bool {
    meta.is_file()
}

/// The console window's columns, None when `stdout` is no console.
pub fn terminal_columns(stdout: &std::io::Stdout) -> Option<u16> {
    use std::os::windows::io::AsRawHandle;
    use windows_sys::Win32::System::Console::{GetConsoleScreenBufferInfo, CONSOLE_SCREEN_BUFFER_INFO};
    // SAFETY: plain data, filled by the call.
    let mut info: CONSOLE_SCREEN_BUFFER_INFO = unsafe { std::mem::zeroed() };
    // SAFETY: the handle is stdout's; `info` is valid for the call.
    if unsafe { GetConsoleScreenBufferInfo(stdout.as_raw_handle(), &mut info) } == 0 {
        return None;
    }
    u16::try_from(info.srWindow.Right - info.srWindow.Left + 1).ok()
}
