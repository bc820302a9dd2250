//! Holding a fleet's document against the analysis and the goals: each
//! host's own verdict (`fleet run`: its probes against its inventory, as
//! `headroom run` on that host would judge them), `--goal` against the
//! fleet's sums and `--host-goal` against every host's own probes. A missed
//! goal becomes a `goal_missed` warning in the document, as in every command.

use headroom_analysis::{annotate, BadLinkSpec, Goal, GoalResult, PathHints};
use headroom_result::{FleetHost, ProbeKind, ResultDoc, WarningCode};

/// The probes `host` measured, as that host itself would hold them: run
/// there (no far end), on its inventory.
fn host_doc(doc: &ResultDoc, host: &FleetHost) -> ResultDoc {
    let mut own = ResultDoc::new(doc.started_at.clone());
    own.host = host.inventory.clone().unwrap_or_default();
    own.probes = doc
        .probes
        .iter()
        .filter(|p| p.host.as_deref() == Some(host.name.as_str()))
        .map(|p| {
            let mut p = p.clone();
            p.host = None;
            p
        })
        .collect();
    own
}

/// Gives every host that measured something its own bottleneck verdict.
pub fn judge_hosts(doc: &mut ResultDoc) {
    let Some(fleet) = &doc.fleet else { return };
    let verdicts: Vec<_> = fleet
        .hosts
        .iter()
        .map(|h| {
            let mut own = host_doc(doc, h);
            if own.probes.is_empty() {
                return None;
            }
            annotate(&mut own, &PathHints::default()).ok()?;
            own.verdict
        })
        .collect();
    if let Some(fleet) = &mut doc.fleet {
        for (host, verdict) in fleet.hosts.iter_mut().zip(verdicts) {
            host.verdict = verdict;
        }
    }
}

/// Holds `sum_goals` against the fleet's sums and `host_goals` against
/// each host that measured (every one must meet it); the results name what
/// they were held against (`read=1GB/s (sum)`, `iops=20k @hv1:5201`).
///
/// A host's goals are judged as `headroom run` there would judge them: a
/// read or write goal against its verdict's end-to-end figure. The sums have
/// no verdict: a goal is held against the best sum of its kind, and when
/// the fleet measured a disk (`fleet run --path`), read and write goals
/// against the disk's sums alone (the path the hosts use, network included
/// when PATH is a share), not the raw network's. A host that measured
/// nothing is not judged: it failed, and says so. Every missed goal is also
/// a warning in `doc`.
pub fn hold_goals(
    doc: &mut ResultDoc,
    sum_goals: &[Goal],
    host_goals: &[Goal],
) -> Result<Vec<GoalResult>, BadLinkSpec> {
    let Some(fleet) = doc.fleet.clone() else { return Ok(Vec::new()) };
    let named = |goals: &[Goal], what: &str| -> Vec<Goal> {
        goals.iter().map(|g| Goal { text: format!("{} {what}", g.text), ..g.clone() }).collect()
    };
    let mut results = Vec::new();
    if !sum_goals.is_empty() {
        let mut sums = ResultDoc::new(doc.started_at.clone());
        sums.probes = fleet.sums.iter().map(|s| s.probe.clone()).collect();
        if sums.probes.iter().any(|p| p.kind() == ProbeKind::Disk) {
            sums.probes.retain(|p| p.kind() != ProbeKind::Net);
        }
        results.extend(headroom_job::hold_goals(&mut sums, &named(sum_goals, "(sum)"), None));
        doc.warnings.append(&mut sums.warnings);
    }
    if !host_goals.is_empty() {
        for host in &fleet.hosts {
            let mut own = host_doc(doc, host);
            if own.probes.is_empty() {
                continue;
            }
            let goals = named(host_goals, &format!("@{}", host.name));
            results.extend(headroom_job::judge(&mut own, &PathHints::default(), &goals, None)?);
            doc.warnings.extend(own.warnings.into_iter().filter(|w| w.code == WarningCode::GoalMissed));
        }
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_analysis::parse_goals;

    /// A `fleet run` document of one agent (saved from a real run, samples
    /// dropped): the loopback network's sum at 8.06 GB/s, the disk's at 665 MB/s.
    fn fleet_run() -> ResultDoc {
        ResultDoc::from_json(include_str!("../tests/fixtures/fleet-run-one-host.json")).unwrap()
    }

    #[test]
    fn a_sum_read_goal_is_held_against_the_disk_not_the_raw_network() {
        let mut doc = fleet_run();
        let results = hold_goals(&mut doc, &parse_goals("read=1GB/s").unwrap(), &[]).unwrap();
        assert_eq!(results.len(), 1);
        let r = &results[0];
        assert_eq!((r.goal.as_str(), r.met), ("read=1GB/s (sum)", false));
        assert_eq!(r.source.as_deref(), Some("fleet-seq1m-q8t1-read"));
        assert!((r.measured.unwrap() - 665.3e6).abs() < 1e5, "{r:?}");
        assert_eq!(doc.warnings.len(), 1);
        assert_eq!(doc.warnings[0].message, "goal read=1GB/s (sum) missed");
    }

    #[test]
    fn a_host_goal_is_held_against_that_hosts_verdict() {
        let mut doc = fleet_run();
        judge_hosts(&mut doc);
        let verdict = doc.fleet.as_ref().unwrap().hosts[0].verdict.clone().expect("a verdict");
        let read = verdict.directions.iter().find(|d| d.direction.as_str() == "read").unwrap();
        let results = hold_goals(&mut doc, &[], &parse_goals("read=100MB/s").unwrap()).unwrap();
        let r = &results[0];
        assert_eq!((r.goal.as_str(), r.met), ("read=100MB/s @127.0.0.1:5492", true));
        assert_eq!(r.measured, Some(read.figure_bytes_per_sec));
        assert!(doc.warnings.is_empty());
    }

    #[test]
    fn two_fleet_runs_compare_each_hosts_path() {
        let mut before = fleet_run();
        judge_hosts(&mut before);
        // The same fleet after its disks got twice as fast.
        let mut after = fleet_run();
        for p in after.probes.iter_mut().filter(|p| p.kind() == ProbeKind::Disk) {
            p.summary.bytes_per_sec *= 2.0;
        }
        judge_hosts(&mut after);
        let c = headroom_analysis::compare(&[before.clone(), after.clone()], &[]).unwrap();
        let host = "127.0.0.1:5492";
        let row = c.rows.iter().find(|r| r.probe == format!("path-read@{host}")).expect("the host's path row");
        assert_eq!(row.name, format!("reads end to end @{host}"));
        let figure = |doc: &ResultDoc| {
            let v = doc.fleet.as_ref().unwrap().hosts[0].verdict.clone().unwrap();
            let read = v.directions.into_iter().find(|d| d.direction.as_str() == "read").unwrap();
            (read.figure_bytes_per_sec, read.bottleneck.to_string())
        };
        let ((was, held_before), (now, held_after)) = (figure(&before), figure(&after));
        assert_eq!(row.bottlenecks, [held_before, held_after]);
        assert!((row.cells[1].ratio - now / was).abs() < 1e-9 && row.cells[1].ratio > 1.5, "{row:?}");
        // The fleet as a whole is not one path: no row without a host.
        assert!(c.rows.iter().all(|r| r.probe != "path-read"), "{:?}", c.rows);
        // A run whose host was not judged (an older document) gets none.
        after.fleet.as_mut().unwrap().hosts[0].verdict = None;
        let c = headroom_analysis::compare(&[before, after], &[]).unwrap();
        assert!(c.rows.iter().all(|r| !r.probe.starts_with("path-")), "{:?}", c.rows);
    }
}
