//! `--remote HOST[:PORT]` of `disk`, `cpu` and `sys`: the flags that send a
//! command's probes to a `headroom serve` and print the results here.

use headroom_net::Endpoint;
use std::time::Duration;

/// How long connecting to the far end and its silent spells may take.
const REMOTE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where a command runs when it does not run here.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct RemoteArgs {
    /// Run on the `headroom serve` at HOST[:PORT] (default port 5201) and print here; disk
    /// probes need the server started with --allow-path covering PATH
    #[arg(long, value_name = "HOST[:PORT]", value_parser = check_remote)]
    pub remote: Option<Endpoint>,
    /// Token of a `headroom serve --token` server (also $HEADROOM_TOKEN)
    #[arg(long, env = "HEADROOM_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

/// Whether `path` names a directory from the root of the far end's
/// filesystems, whichever system it runs: `/tank/bench` (Linux) or
/// `C:\bench`, `\\?\C:\bench`, `\\nas\share` (Windows). The client cannot
/// know the far end's system, and the far end resolves the path itself
/// (its `--allow-path` decides), so either form is sent.
pub fn is_absolute_on_far_end(path: &std::path::Path) -> bool {
    let text = path.to_string_lossy();
    let b = text.as_bytes();
    let drive = b.len() >= 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && matches!(b[2], b'\\' | b'/');
    path.is_absolute() || text.starts_with('/') || drive || text.starts_with(r"\\")
}

fn check_remote(spec: &str) -> Result<Endpoint, String> {
    Endpoint::parse(spec, None, REMOTE_TIMEOUT)
}

impl RemoteArgs {
    /// The server to run on, when `--remote` was given.
    pub fn endpoint(&self) -> Option<Endpoint> {
        let endpoint = self.remote.as_ref()?;
        Some(Endpoint { token: self.token.clone(), ..endpoint.clone() })
    }
}

#[cfg(test)]
mod tests {
    use super::is_absolute_on_far_end;
    use std::path::Path;

    #[test]
    fn either_systems_absolute_path_names_a_far_end_directory() {
        for p in ["/tank/bench", r"C:\bench", "c:/bench", r"\\?\C:\bench", r"\\nas\share\bench"] {
            assert!(is_absolute_on_far_end(Path::new(p)), "{p}");
        }
        for p in ["bench", r"C:bench", r"bench\sub", "./bench", ""] {
            assert!(!is_absolute_on_far_end(Path::new(p)), "{p}");
        }
    }
}
