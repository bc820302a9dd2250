//! Credentials for the protocols that authenticate (SMB's NTLM, iSCSI's
//! CHAP), from the environment or a file, never from the command line (it
//! stays in the shell history and the process list).
//!
//! The file holds `KEY=VALUE` lines with the same keys as the environment;
//! `#` starts a comment. A file others can read is refused, as ssh refuses a
//! private key others can read (headroom-sys's `secret_file` judges: the
//! mode bits on Linux, the DACL on Windows). A refused file names the
//! [`CredentialsSetting`]; the front end spells it (the binary's
//! `--credentials`), never this module.

use headroom_units::setting::Message;
use std::collections::BTreeMap;
use std::path::Path;

/// What credentials are set by, besides the environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialsSetting {
    /// The credentials file.
    File,
}

impl std::fmt::Display for CredentialsSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("credentials file")
    }
}

/// A credentials file that cannot be used: one line naming the setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CredentialsError(pub Message<CredentialsSetting>);

/// The keys headroom reads, in the environment or a credentials file.
pub const KEYS: [&str; 5] = [
    "HEADROOM_SMB_USER",
    "HEADROOM_SMB_PASSWORD",
    "HEADROOM_SMB_DOMAIN",
    "HEADROOM_ISCSI_USER",
    "HEADROOM_ISCSI_PASSWORD",
];

/// User names and secrets for the protocols. `Debug` never shows a secret.
#[derive(Clone, Default)]
pub struct Credentials {
    values: BTreeMap<&'static str, String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.values.keys()).finish()
    }
}

impl Credentials {
    /// From the environment, then `file` (its values win), checked.
    pub fn load(file: Option<&Path>) -> Result<Credentials, CredentialsError> {
        let mut values = BTreeMap::new();
        for key in KEYS {
            if let Ok(v) = std::env::var(key) {
                values.insert(key, v);
            }
        }
        if let Some(path) = file {
            values.extend(read_file(path)?);
        }
        Ok(Credentials { values })
    }

    /// From explicit pairs (tests, and callers that hold secrets already).
    pub fn from_pairs(pairs: &[(&str, &str)]) -> Result<Credentials, String> {
        let mut values = BTreeMap::new();
        for (k, v) in pairs {
            values.insert(known_key(k)?, v.to_string());
        }
        Ok(Credentials { values })
    }

    /// The value of `key` (one of [`KEYS`]).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }
}

fn known_key(key: &str) -> Result<&'static str, String> {
    KEYS.iter()
        .copied()
        .find(|k| *k == key)
        .ok_or_else(|| format!("unknown credentials key '{key}'; the keys are {}", KEYS.join(", ")))
}

fn read_file(path: &Path) -> Result<BTreeMap<&'static str, String>, CredentialsError> {
    let shown = path.display();
    let refuse = |why: String| CredentialsError(Message::of(CredentialsSetting::File).then(format!(" {shown}{why}")));
    if let Some(who) = headroom_sys::secret_file::who_else_may_read(path).map_err(|e| refuse(format!(": {e}")))? {
        return Err(refuse(format!(": {who}")));
    }
    let text = std::fs::read_to_string(path).map_err(|e| refuse(format!(": {e}")))?;
    let mut values = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, value) =
            line.split_once('=').ok_or_else(|| refuse(format!(" line {}: expected KEY=VALUE", n + 1)))?;
        let key = known_key(key.trim()).map_err(|e| refuse(format!(" line {}: {e}", n + 1)))?;
        values.insert(key, value.trim().to_string());
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_private_file_is_read_and_a_shared_one_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("creds");
        std::fs::write(&path, "# lab\nHEADROOM_SMB_USER=alice\nHEADROOM_SMB_PASSWORD = s3cret\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let c = Credentials::load(Some(&path)).unwrap();
        assert_eq!((c.get("HEADROOM_SMB_USER"), c.get("HEADROOM_SMB_PASSWORD")), (Some("alice"), Some("s3cret")));
        assert!(!format!("{c:?}").contains("s3cret"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(Credentials::load(Some(&path)).unwrap_err().to_string().contains("chmod 600"));
        std::fs::write(&path, "SMB_PASS=x\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(Credentials::load(Some(&path)).unwrap_err().to_string().contains("line 1: unknown credentials key"));
    }
}
