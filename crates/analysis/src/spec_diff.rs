//! Which settings of a shared probe the compared results did not measure
//! with alike: a before/after is a like-for-like only when both ran the same
//! block size, queue depth, cipher implementation or granted iSCSI segment,
//! and `compare` says where they did not. Reads each probe's resolved `spec`
//! only; it never judges whether a difference matters, and never touches the
//! figures.

use headroom_result::Probe;
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Spec fields that say where a probe ran, not how it measured: a
/// before/after of two machines or two NAS boxes differs in them by design,
/// and headroom's own test file (and the fio command naming it) is named
/// per run.
const WHERE_NOT_HOW: &[&str] =
    &["path", "peer", "server", "interface", "source", "source_address", "sources", "fio_equivalent"];

/// A setting of a probe every result has, with different values.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SettingDiff {
    /// The probe id the results share.
    pub probe: String,
    /// The setting's place in the probe's `spec`, dotted
    /// (`block_size`, `protocol.granted.MaxBurstLength`).
    pub setting: String,
    /// Its value in each result, in the comparison's column order; `-`
    /// where a result has none.
    pub values: Vec<String>,
}

/// The settings of `probes` (one per result, the same id) whose values are
/// not all equal, by setting name.
pub fn differing_settings(probes: &[&Probe]) -> Vec<SettingDiff> {
    let Some(first) = probes.first() else { return Vec::new() };
    let flat: Vec<BTreeMap<String, String>> = probes.iter().map(|p| settings_of(p)).collect();
    let names: BTreeSet<&String> = flat.iter().flat_map(BTreeMap::keys).collect();
    names
        .into_iter()
        .filter_map(|name| {
            let values: Vec<String> = flat.iter().map(|m| m.get(name).cloned().unwrap_or_else(|| "-".into())).collect();
            values.iter().any(|v| *v != values[0]).then(|| SettingDiff {
                probe: first.id.clone(),
                setting: name.clone(),
                values,
            })
        })
        .collect()
}

/// Every leaf of the probe's spec but the where-not-how ones, by dotted name.
fn settings_of(probe: &Probe) -> BTreeMap<String, String> {
    let tagged = serde_json::to_value(&probe.spec).unwrap_or(Value::Null);
    let mut out = BTreeMap::new();
    if let Some(spec) = tagged.get("spec") {
        leaves(spec, "", &mut out);
    }
    out
}

fn leaves(value: &Value, prefix: &str, out: &mut BTreeMap<String, String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter().filter(|(key, _)| !WHERE_NOT_HOW.contains(&key.as_str())) {
                let name = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
                leaves(v, &name, out);
            }
        }
        Value::String(s) => {
            out.insert(prefix.to_string(), s.clone());
        }
        Value::Null => {}
        other => {
            out.insert(prefix.to_string(), other.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_result::ResultDoc;

    fn fixture(name: &str) -> ResultDoc {
        let path = format!("{}/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
        ResultDoc::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn settings_measured_differently_are_named_and_where_a_probe_ran_is_not() {
        let before = fixture("compare-before");
        let mut after = before.clone();
        let mut again = before.clone();
        for doc in [&mut after, &mut again] {
            let headroom_result::ProbeSpec::Disk(spec) = &mut doc.probes[0].spec else { panic!("a disk probe") };
            spec.path = "/mnt/other".into();
        }
        let headroom_result::ProbeSpec::Disk(spec) = &mut after.probes[0].spec else { unreachable!() };
        spec.queue_depth = 32;
        spec.engine = "psync".into();
        let probes = [&before.probes[0], &after.probes[0]];
        let diffs = differing_settings(&probes);
        let named: Vec<(&str, Vec<&str>)> =
            diffs.iter().map(|d| (d.setting.as_str(), d.values.iter().map(String::as_str).collect())).collect();
        assert_eq!(named, [("engine", vec!["io_uring", "psync"]), ("queue_depth", vec!["8", "32"])]);
        assert!(diffs.iter().all(|d| d.probe == before.probes[0].id));
        assert!(
            differing_settings(&[&before.probes[0], &again.probes[0]]).is_empty(),
            "another path alone is not a difference"
        );
    }

    #[test]
    fn a_setting_only_one_result_has_shows_a_dash_and_nested_ones_are_dotted() {
        let mut base = fixture("compare-before");
        let headroom_result::ProbeSpec::Disk(spec) = &mut base.probes[0].spec else { panic!("a disk probe") };
        spec.protocol = Some(headroom_result::ProtocolInfo {
            name: "iscsi".into(),
            version: Some("RFC 7143".into()),
            server: "198.19.251.1:3260".into(),
            granted: [("MaxRecvDataSegmentLength_initiator".to_string(), 262_144)].into(),
            ..Default::default()
        });
        let mut other = base.clone();
        let headroom_result::ProbeSpec::Disk(spec) = &mut other.probes[0].spec else { unreachable!() };
        let protocol = spec.protocol.as_mut().unwrap();
        protocol.granted.insert("MaxRecvDataSegmentLength_initiator".into(), 1_048_576);
        protocol.version = None;
        protocol.server = "198.19.252.1:3260".into();
        let diffs = differing_settings(&[&base.probes[0], &other.probes[0]]);
        let named: Vec<(&str, Vec<&str>)> =
            diffs.iter().map(|d| (d.setting.as_str(), d.values.iter().map(String::as_str).collect())).collect();
        assert_eq!(
            named,
            [
                ("protocol.granted.MaxRecvDataSegmentLength_initiator", vec!["262144", "1048576"]),
                ("protocol.version", vec!["RFC 7143", "-"]),
            ]
        );
    }
}
