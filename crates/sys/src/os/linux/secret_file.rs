//! Who else may read a secret file, on Linux: its mode bits (stat(2),
//! following a symlink as the read will); any bit for group or others
//! exposes it.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// See `crate::secret_file::who_else_may_read`.
pub fn who_else_may_read(path: &Path) -> Result<Option<String>, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    Ok(judge_mode(meta.permissions().mode(), path))
}

fn judge_mode(mode: u32, path: &Path) -> Option<String> {
    (mode & 0o077 != 0)
        .then(|| format!("mode {:o} lets other users read it; run `chmod 600 {}`", mode & 0o777, path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mode_is_named_with_chmod() {
        assert_eq!(judge_mode(0o100600, Path::new("/t")), None);
        assert_eq!(judge_mode(0o100400, Path::new("/t")), None);
        let line = judge_mode(0o100640, Path::new("/etc/t")).unwrap();
        assert_eq!(line, "mode 640 lets other users read it; run `chmod 600 /etc/t`");
    }
}
