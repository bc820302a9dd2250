//! Soak databases from outside (`report soak.sqlite`, `soak --resume`): any
//! file that claims to be SQLite must load into a result document or fail
//! with an error, never panic.
#![no_main]

use headroom_soak::{load_result, SampleDetail};
use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::OnceLock;

/// One file per fuzzing process, on tmpfs where there is one.
fn db_path() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm".into() } else { std::env::temp_dir() };
        dir.join(format!("headroom-fuzz-soak-{}.sqlite", std::process::id()))
    })
}

fuzz_target!(|data: &[u8]| {
    let path = db_path();
    std::fs::write(path, data).expect("write the fuzz database");
    if headroom_soak::is_sqlite_file(path) {
        if let Ok(doc) = load_result(path, SampleDetail::AtMost(200)) {
            let _ = doc.validate();
        }
    }
    // SQLite may leave a write-ahead log and its index beside the file.
    for suffix in ["", "-wal", "-shm"] {
        let mut name = path.clone().into_os_string();
        name.push(suffix);
        let _ = std::fs::remove_file(name);
    }
});
