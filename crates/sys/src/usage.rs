//! CPU time tallied per process or thread, the same on every platform: which
//! ids used the most between two readings. The readings themselves are the
//! platform seam's (`os::cpu_load`, `os::serving`).

use std::collections::BTreeMap;

/// The `shown` ids that used the most ticks between the two readings, busiest
/// first, as (id, name, ticks); one that started in between counts from zero.
pub(crate) fn busiest(
    now: &BTreeMap<u32, (String, u64)>,
    then: &BTreeMap<u32, (String, u64)>,
    shown: usize,
) -> impl Iterator<Item = (u32, String, u64)> {
    let mut used: Vec<(u32, String, u64)> = now
        .iter()
        .map(|(id, (name, ticks))| (*id, name.clone(), ticks.saturating_sub(then.get(id).map_or(0, |(_, t)| *t))))
        .filter(|(_, _, ticks)| *ticks > 0)
        .collect();
    used.sort_by_key(|u| std::cmp::Reverse(u.2));
    used.truncate(shown);
    used.into_iter()
}
