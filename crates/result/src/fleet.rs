//! The fleet section of a result document: one probe run by many agents
//! (`headroom serve` on each host) at one start, gathered by `headroom fleet`.
//! Each host's own probes stay in `ResultDoc.probes` (their `host` is the
//! host as the fleet named it); this section says which hosts took part,
//! how their clocks and starts compared, which failed and why, and per test
//! the sum over hosts, the spread between them and each host's share.

use crate::{Host, Probe, Verdict};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A fleet run: its hosts and, per test, the sum over them.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Fleet {
    /// How the agents were started together, e.g. `released_together`: the
    /// client sends every agent its start once all are prepared.
    pub start: String,
    /// Every host of `--hosts`, in the order given.
    pub hosts: Vec<FleetHost>,
    /// One per test of the plan, in plan order: the sum over the hosts that measured it.
    #[serde(default)]
    pub sums: Vec<FleetSum>,
}

/// One agent of the fleet.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct FleetHost {
    /// `HOST[:PORT]` as `--hosts` named it; the `host` of this agent's probes.
    pub name: String,
    /// The agent machine's own hostname, when it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// The agent's headroom version, when it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// `ok`, or `failed` (see `error`): down, wrong token, another version,
    /// refused, lost mid-run.
    pub status: String,
    /// Why the host failed, one line; absent when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The agent's clock minus the client's, seconds (NTP's offset: the
    /// exchange with the smallest round trip of several).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_offset_s: Option<f64>,
    /// Round trip of that exchange over the control connection, seconds:
    /// the offset is known to within half of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_rtt_s: Option<f64>,
    /// When the agent started its first test, after the earliest host
    /// started, seconds on the client's clock (its clock offset removed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_skew_s: Option<f64>,
    /// The agent machine's inventory (CPU, NICs, disks), as `headroom sys`
    /// there reports it; absent when it did not answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inventory: Option<Host>,
    /// `fleet run`: this host's own bottleneck verdict, its probes held
    /// against its inventory as if `headroom run` had run there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
}

/// One test over the whole fleet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FleetSum {
    /// The sum as a probe: `id` is `fleet-<test id>`; bytes/s, IOPS, bytes
    /// and operations summed over hosts; latency from the hosts' histograms
    /// merged (never averaged percentiles); one sample per second of the
    /// client's clock summing the hosts' samples of that second, so a host
    /// that stalls shows as a dip.
    pub probe: Probe,
    /// Each host that measured this test, with its share of the sum.
    pub rows: Vec<FleetRow>,
    /// Hosts that were asked to run this test and did not measure it.
    #[serde(default)]
    pub failed_hosts: Vec<String>,
    /// How evenly the hosts fared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<Spread>,
}

/// One host's part of a fleet test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FleetRow {
    /// The host, as `FleetHost.name`.
    pub host: String,
    /// The id of its probe in `ResultDoc.probes`.
    pub probe_id: String,
    /// Its payload bytes per second.
    pub bytes_per_sec: f64,
    /// Its operations per second, when the test counts operations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops: Option<f64>,
    /// Its share of the sum's bytes per second (0 to 1).
    pub share: f64,
}

/// The spread between the hosts of one test (by bytes per second).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Spread {
    /// The slowest host.
    pub slowest: String,
    /// The fastest host.
    pub fastest: String,
    /// Slowest over fastest (1: all alike).
    pub slowest_over_fastest: f64,
    /// Jain's fairness index, (sum x)^2 / (n sum x^2): 1 when all hosts got
    /// the same, 1/n when one got everything.
    pub jain_index: f64,
}

impl Spread {
    /// The spread of `(host, bytes per second)`; None for no host.
    pub fn of(rates: &[(&str, f64)]) -> Option<Spread> {
        let by_rate = |a: &&(&str, f64), b: &&(&str, f64)| a.1.total_cmp(&b.1);
        let slowest = rates.iter().min_by(by_rate)?;
        let fastest = rates.iter().max_by(by_rate)?;
        let sum: f64 = rates.iter().map(|r| r.1).sum();
        let squares: f64 = rates.iter().map(|r| r.1 * r.1).sum();
        Some(Spread {
            slowest: slowest.0.to_string(),
            fastest: fastest.0.to_string(),
            slowest_over_fastest: if fastest.1 > 0.0 { slowest.1 / fastest.1 } else { 1.0 },
            jain_index: if squares > 0.0 { sum * sum / (rates.len() as f64 * squares) } else { 1.0 },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_is_one_when_even_and_one_over_n_when_one_takes_all() {
        let even = Spread::of(&[("a", 5.0), ("b", 5.0), ("c", 5.0), ("d", 5.0)]).unwrap();
        assert!((even.jain_index - 1.0).abs() < 1e-12);
        assert_eq!(even.slowest_over_fastest, 1.0);
        let hog = Spread::of(&[("a", 0.0), ("b", 9.0), ("c", 0.0), ("d", 0.0)]).unwrap();
        assert!((hog.jain_index - 0.25).abs() < 1e-12);
        assert_eq!((hog.fastest.as_str(), hog.slowest_over_fastest), ("b", 0.0));
        assert!(Spread::of(&[]).is_none());
    }
}
