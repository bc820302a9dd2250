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
/// filesystems, whichever system it runs (`/tank/bench` or `C:\bench`).
pub use headroom_net::is_absolute_on_far_end;

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
