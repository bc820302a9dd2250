//! The fleet's hosts: `--hosts a,b,c` or a file with one `host[:port]` per
//! line (`#` starts a comment). Everything that can be known before the run
//! is checked here, so a bad list costs nothing: an unreadable, oversized or
//! non-text file, a bad port, a host named twice, more than [`MAX_HOSTS`]
//! hosts, a name that does not resolve. Errors name the [`Setting`]; the
//! front end spells it (the binary's `--hosts`), never this module.

use headroom_net::{resolve, Endpoint};
use headroom_units::setting::Message;
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

/// What a fleet's host list is set by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// The hosts: a list or a file.
    Hosts,
}

impl std::fmt::Display for Setting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("hosts")
    }
}

/// Why the host list cannot be used: one line for the user, naming the setting.
#[derive(Debug, Clone, PartialEq)]
pub struct HostsError(pub Message<Setting>);

impl std::fmt::Display for HostsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

fn hosts_setting() -> Message<Setting> {
    Message::of(Setting::Hosts)
}

impl std::error::Error for HostsError {}

/// Most hosts one fleet drives: each holds a connection (and a file
/// descriptor) for the whole run, and a list longer than this is a mistake
/// (a wrong file) rather than a fleet.
pub const MAX_HOSTS: usize = 65_536;

/// The hosts of `--hosts SPEC` as endpoints (port 5201 unless given), in
/// order. SPEC is a comma-separated list, or a file when it names one (or
/// contains a `/`), read as `report` reads its files (at most 64 MiB, a FIFO
/// nobody writes to is empty). Names are not resolved here: see [`resolve_all`].
pub fn parse_hosts(spec: &str, token: Option<String>, timeout: Duration) -> Result<Vec<Endpoint>, HostsError> {
    let text;
    // Each entry: where it is (a line number of the file, or None in a list) and the text.
    let (entries, source): (Vec<(Option<usize>, &str)>, Message<Setting>) = if is_file(spec) {
        let bytes = headroom_result::read_input_file(Path::new(spec)).map_err(|e| match e {
            headroom_result::LoadError::TooLarge => HostsError(hosts_setting().then(format!(
                " {spec}: larger than {} MiB, the most headroom reads from a file it is given: is it the right file? (one host[:port] per line)",
                headroom_result::MAX_DOCUMENT_BYTES >> 20
            ))),
            e => HostsError(
                hosts_setting()
                    .then(format!(" {spec}: the hosts file: {e} (example: "))
                    .and(Setting::Hosts)
                    .then(" hosts.txt with one host[:port] per line, or ")
                    .and(Setting::Hosts)
                    .then(" hv1,hv2)"),
            ),
        })?;
        text = String::from_utf8(bytes).map_err(|_| {
            HostsError(
                hosts_setting()
                    .then(format!(" {spec}: the hosts file is not text (one host[:port] per line, # comments)")),
            )
        })?;
        let lines = text
            .lines()
            .enumerate()
            .map(|(i, l)| (Some(i + 1), l.split('#').next().unwrap_or("").trim()))
            .filter(|(_, l)| !l.is_empty())
            .take(MAX_HOSTS + 1)
            .collect();
        (lines, hosts_setting().then(format!(" {spec}")))
    } else {
        (
            spec.split(',').map(|h| (None, h.trim())).take(MAX_HOSTS + 1).collect(),
            hosts_setting().then(format!(" '{spec}'")),
        )
    };
    if entries.is_empty() {
        return Err(HostsError(
            source
                .clone()
                .then(" names no hosts (example: ")
                .and(Setting::Hosts)
                .then(" hv1,hv2:5202, or a file with one host[:port] per line)"),
        ));
    }
    if entries.len() > MAX_HOSTS {
        return Err(HostsError(source.clone().then(format!(
            " names more than {MAX_HOSTS} hosts, the most one fleet drives: split the list (or is it the right file?)"
        ))));
    }
    let at = |line: Option<usize>| match line {
        Some(n) => Message::text(format!("{spec} line {n}")),
        None => source.clone(),
    };
    let mut hosts: Vec<Endpoint> = Vec::with_capacity(entries.len());
    // Each name and where it was first seen: a host named twice is found in one pass.
    let mut seen: HashMap<String, Option<usize>> = HashMap::with_capacity(entries.len());
    for (line, entry) in entries {
        if entry.split_whitespace().count() > 1 {
            return Err(HostsError(
                at(line).then(format!(": '{entry}' is more than one host[:port] (example: hv1:5201)")),
            ));
        }
        let endpoint =
            Endpoint::parse(entry, token.clone(), timeout).map_err(|e| HostsError(at(line).then(format!(": {e}"))))?;
        let name = endpoint.display();
        if let Some(first) = seen.get(&name) {
            return Err(HostsError(
                at(line)
                    .then(format!(": {name} is named twice (first at "))
                    .join(at(*first))
                    .then("): each agent runs the probe once; remove one"),
            ));
        }
        seen.insert(name, line);
        hosts.push(endpoint);
    }
    Ok(hosts)
}

/// A `--hosts` value naming a file rather than a list.
fn is_file(spec: &str) -> bool {
    !spec.contains(',') && (spec.contains('/') || Path::new(spec).exists())
}

/// Resolves every host's name, `workers` at a time; the first that does not
/// resolve is the error (with how many others did not).
pub fn resolve_all(hosts: &[Endpoint], workers: usize) -> Result<(), HostsError> {
    let workers = workers.clamp(1, hosts.len().max(1));
    let failures: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                scope.spawn(move || {
                    hosts
                        .iter()
                        .skip(w)
                        .step_by(workers)
                        .filter_map(|h| resolve(&h.host, h.port).err().map(|e| format!("{}: {e}", h.display())))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
    });
    match failures.split_first() {
        None => Ok(()),
        Some((first, rest)) => Err(HostsError(hosts_setting().then(format!(
            ": {first}{} (fix or remove the name; nothing was started)",
            if rest.is_empty() { String::new() } else { format!("; and {} more unknown", rest.len()) }
        )))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(1);

    #[test]
    fn a_list_takes_the_default_port_and_keeps_the_order() {
        let h = parse_hosts("hv2,hv1:5301,[fe80::1]:7", None, T).unwrap();
        let names: Vec<String> = h.iter().map(Endpoint::display).collect();
        assert_eq!(names, ["hv2:5201", "hv1:5301", "[fe80::1]:7"]);
    }

    #[test]
    fn a_file_has_comments_and_names_the_bad_line() {
        let dir = std::env::temp_dir().join(format!("headroom-fleet-hosts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("hosts");
        std::fs::write(&file, "# agents\nhv1\n\nhv2:5202  # rack 2\n").unwrap();
        let h = parse_hosts(file.to_str().unwrap(), None, T).unwrap();
        assert_eq!(h.len(), 2);
        std::fs::write(&file, "hv1\nhv2:99999\n").unwrap();
        let e = parse_hosts(file.to_str().unwrap(), None, T).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("99999") && e.contains("example"), "{e}");
        std::fs::write(&file, "hv1\nhv1:5201\n").unwrap();
        let e = parse_hosts(file.to_str().unwrap(), None, T).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("named twice") && e.contains("line 1"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
        let e = parse_hosts(file.to_str().unwrap(), None, T).unwrap_err().to_string();
        assert!(e.contains("cannot read"), "{e}");
    }

    #[test]
    fn a_long_list_is_checked_in_one_pass_and_bounded() {
        let mut list: Vec<String> =
            (0..20_000).map(|i| format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255)).collect();
        assert_eq!(parse_hosts(&list.join(","), None, T).unwrap().len(), 20_000);
        list.push("10.0.0.7".into());
        let e = parse_hosts(&list.join(","), None, T).unwrap_err().to_string();
        assert!(e.contains("10.0.0.7:5201 is named twice"), "{e}");
        let e = parse_hosts("/dev/zero", None, T).unwrap_err().to_string();
        assert!(e.contains("hosts /dev/zero") && e.contains("64 MiB"), "{e}");
        let many = vec!["h"; MAX_HOSTS + 1].join(",");
        let e = parse_hosts(&many, None, T).unwrap_err().to_string();
        assert!(e.contains("more than 65536 hosts"), "{e}");
    }

    #[test]
    fn an_unknown_name_is_found_before_anything_starts() {
        let h = parse_hosts("127.0.0.1:5301,no-such-host.invalid", None, T).unwrap();
        let e = resolve_all(&h, 64).unwrap_err().to_string();
        assert!(e.contains("no-such-host.invalid"), "{e}");
    }
}
