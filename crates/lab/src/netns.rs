//! Network namespaces joined by veth pairs, shaped with tbf: a real network
//! of known speed inside one machine (docs/reference/lab.md).
//!
//! Names carry the process id and a counter, so tests running in parallel
//! never collide; addresses come from 198.18.0.0/15 (RFC 2544, reserved for
//! benchmarking) and only exist inside the namespaces. Every namespace is
//! deleted on drop (which also removes its veth ends), even when a test
//! panics; processes started through [`Netns::spawn`] are killed first.

use rustix::process::{kill_process, Pid, Signal};
use std::io;
use std::net::Ipv4Addr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

static COUNTER: AtomicU32 = AtomicU32::new(0);

fn ip(args: &[&str]) -> io::Result<String> {
    crate::sh("ip", args)
}

const PIN_CUBIC: &str = "net.ipv4.tcp_congestion_control=cubic";
const ALLOWED: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";

/// A namespace may only choose an algorithm the host allows to everyone
/// (`tcp_allowed_congestion_control`, set in the host's namespace); hosts
/// tuned for BBR often allow only `reno bbr`. Adds cubic to that list (root
/// only; it lets processes choose cubic and changes nothing else) and says
/// so. Kept afterwards: other tests' namespaces may be using it.
fn allow_cubic_in_namespaces() -> io::Result<()> {
    let allowed = std::fs::read_to_string(ALLOWED)?;
    if allowed.split_whitespace().any(|a| a == "cubic") {
        return Ok(());
    }
    let wider = format!("{} cubic", allowed.trim());
    std::fs::write(ALLOWED, &wider).map_err(|e| {
        io::Error::new(e.kind(), format!("cannot allow cubic in namespaces ({ALLOWED}: {e}); the lab pins cubic"))
    })?;
    eprintln!("lab: {ALLOWED} was '{}', now '{wider}', so namespaces can pin cubic", allowed.trim());
    Ok(())
}

/// One network namespace, deleted on drop.
pub struct Netns {
    /// The namespace's name, as `ip netns` lists it.
    pub name: String,
}

impl Netns {
    /// Creates a namespace named `hr<pid>-<n><tag>` (at most 15 characters used for devices).
    pub fn new(tag: &str) -> io::Result<Netns> {
        let name = format!("hr{}-{}{tag}", std::process::id(), COUNTER.fetch_add(1, Ordering::SeqCst));
        ip(&["netns", "add", &name])?;
        let ns = Netns { name };
        ns.exec("ip", &["link", "set", "lo", "up"])?;
        // A new namespace takes the host's congestion control. Under BBR a
        // sender paces from kernel timers, work not charged to its process, so
        // a CPU quota on it holds it back far less than under cubic; the lab
        // pins cubic (Linux's default) so its figures do not depend on how the
        // host was tuned. Per namespace since Linux 4.15: the host is untouched.
        if ns.exec("sysctl", &["-qw", PIN_CUBIC]).is_err() {
            allow_cubic_in_namespaces()?;
            ns.exec("sysctl", &["-qw", PIN_CUBIC])?;
        }
        Ok(ns)
    }

    /// Runs a command inside the namespace and waits for it.
    pub fn exec(&self, program: &str, args: &[&str]) -> io::Result<String> {
        let mut all = vec!["netns", "exec", &self.name, program];
        all.extend_from_slice(args);
        ip(&all)
    }

    /// A command that will run inside the namespace.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// Bytes sent plus received by interface `dev` of this namespace, from
    /// its counters as /proc/net/dev shows them to a process inside (the
    /// same counters as /sys/class/net/DEV/statistics, which `ip netns exec`
    /// cannot remount in every container).
    pub fn traffic_bytes(&self, dev: &str) -> io::Result<u64> {
        let table = self.exec("cat", &["/proc/net/dev"])?;
        let row = table
            .lines()
            .find_map(|l| l.trim_start().strip_prefix(dev)?.strip_prefix(':'))
            .ok_or_else(|| io::Error::other(format!("no interface {dev} in {}'s /proc/net/dev", self.name)))?;
        let fields: Vec<u64> = row.split_whitespace().filter_map(|f| f.parse().ok()).collect();
        // rx_bytes is the first column, tx_bytes the ninth.
        match (fields.first(), fields.get(8)) {
            (Some(rx), Some(tx)) => Ok(rx + tx),
            _ => Err(io::Error::other(format!("{dev}: unreadable counters '{row}'"))),
        }
    }

    /// Starts a background process inside the namespace; it is killed when the guard drops.
    pub fn spawn(&self, program: &str, args: &[&str]) -> io::Result<ChildGuard> {
        let child = self
            .command(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        Ok(ChildGuard(Some(child)))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Kill whatever still runs inside, then delete (which removes the veth ends too).
        if let Ok(pids) = ip(&["netns", "pids", &self.name]) {
            for pid in pids.split_whitespace().filter_map(|p| p.parse::<i32>().ok()).filter_map(Pid::from_raw) {
                let _ = kill_process(pid, Signal::KILL);
            }
        }
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// A child process killed (SIGKILL) and reaped on drop.
pub struct ChildGuard(pub Option<Child>);

impl ChildGuard {
    /// The child's pid, 0 once it was taken or reaped.
    pub fn id(&self) -> u32 {
        self.0.as_ref().map_or(0, |c| c.id())
    }
    /// The running child.
    pub fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("child present until drop")
    }
    /// Kills the process now (a server "killed mid-test").
    pub fn kill(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
    /// Takes the child out, e.g. to wait for its output.
    pub fn take(&mut self) -> Child {
        self.0.take().expect("child present")
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `tbf rate <rate_bits>bit` on each (namespace, device).
fn shape_ends(ends: &[(&Netns, &String)], rate_bits: u64) -> io::Result<()> {
    // Burst: at least a few 64 KiB GSO super-packets, and ~4 ms at the rate.
    let burst = (rate_bits / 8 / 250).max(256 * 1024);
    for (ns, dev) in ends {
        ns.exec(
            "tc",
            &[
                "qdisc",
                "replace",
                "dev",
                dev,
                "root",
                "tbf",
                "rate",
                &format!("{rate_bits}bit"),
                "burst",
                &burst.to_string(),
                "latency",
                "20ms",
            ],
        )?;
    }
    Ok(())
}

/// A second veth pair of a [`TwoHosts`] (removed with its namespaces).
pub struct SecondLink {
    /// Its device in `a`.
    pub dev_a: String,
    /// Its device in `b`.
    pub dev_b: String,
    /// `a`'s address on it.
    pub addr_a: Ipv4Addr,
    /// `b`'s address on it.
    pub addr_b: Ipv4Addr,
}

/// Two namespaces joined by one veth pair: `a` (198.18.x.1) and `b` (198.18.x.2).
pub struct TwoHosts {
    /// The first namespace.
    pub a: Netns,
    /// The second namespace.
    pub b: Netns,
    /// Address of `a` on the veth pair.
    pub addr_a: Ipv4Addr,
    /// Address of `b` on the veth pair.
    pub addr_b: Ipv4Addr,
    /// veth device names inside a and b.
    pub dev_a: String,
    /// Name of the veth device inside `b` (`dev_a` is `a`'s).
    pub dev_b: String,
}

impl TwoHosts {
    /// Builds the pair with the given MTU.
    pub fn new(mtu: u32) -> io::Result<TwoHosts> {
        let a = Netns::new("a")?;
        let b = Netns::new("b")?;
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let dev_a = format!("hv{}a{n}", std::process::id() % 100_000);
        let dev_b = format!("hv{}b{n}", std::process::id() % 100_000);
        ip(&["link", "add", &dev_a, "netns", &a.name, "type", "veth", "peer", "name", &dev_b, "netns", &b.name])?;
        let third = (n % 250) as u8 + 1;
        let addr_a = Ipv4Addr::new(198, 18, third, 1);
        let addr_b = Ipv4Addr::new(198, 18, third, 2);
        let mtu = mtu.to_string();
        for (ns, dev, addr) in [(&a, &dev_a, addr_a), (&b, &dev_b, addr_b)] {
            ns.exec("ip", &["addr", "add", &format!("{addr}/24"), "dev", dev])?;
            ns.exec("ip", &["link", "set", dev, "mtu", &mtu, "up"])?;
        }
        Ok(TwoHosts { a, b, addr_a, addr_b, dev_a, dev_b })
    }

    /// Shapes both directions with `tbf rate <rate_bits>bit`. tbf counts the
    /// frame from the MAC header on; see headroom_limits::tbf_tcp_goodput_bits.
    pub fn shape(&self, rate_bits: u64) -> io::Result<()> {
        shape_ends(&[(&self.a, &self.dev_a), (&self.b, &self.dev_b)], rate_bits)
    }

    /// A second veth pair between the same two namespaces (198.19.x.1 in
    /// `a`, 198.19.x.2 in `b`): two NICs of one host towards one target.
    pub fn second_link(&self) -> io::Result<SecondLink> {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let dev_a = format!("hw{}a{n}", std::process::id() % 100_000);
        let dev_b = format!("hw{}b{n}", std::process::id() % 100_000);
        ip(&[
            "link",
            "add",
            &dev_a,
            "netns",
            &self.a.name,
            "type",
            "veth",
            "peer",
            "name",
            &dev_b,
            "netns",
            &self.b.name,
        ])?;
        let third = (n % 250) as u8 + 1;
        let addr_a = Ipv4Addr::new(198, 19, third, 1);
        let addr_b = Ipv4Addr::new(198, 19, third, 2);
        for (ns, dev, addr) in [(&self.a, &dev_a, addr_a), (&self.b, &dev_b, addr_b)] {
            ns.exec("ip", &["addr", "add", &format!("{addr}/24"), "dev", dev])?;
            ns.exec("ip", &["link", "set", dev, "up"])?;
        }
        Ok(SecondLink { dev_a, dev_b, addr_a, addr_b })
    }

    /// A route in `b` to `a`'s first-link subnet through `link`, behind the
    /// first link's (a higher metric): the routing table still sends `addr_a`
    /// through the first link, and a socket held to `link.dev_b`
    /// (SO_BINDTODEVICE) reaches it through the second: a NAS (`a`)
    /// reachable through either NIC of a client (`b`).
    pub fn route_behind(&self, link: &SecondLink) -> io::Result<()> {
        let [x, y, z, _] = self.addr_a.octets();
        let subnet = format!("{x}.{y}.{z}.0/24");
        let via = link.addr_a.to_string();
        self.b.exec("ip", &["route", "add", &subnet, "via", &via, "dev", &link.dev_b, "metric", "100"]).map(|_| ())
    }

    /// Shapes the second link both ways, as [`TwoHosts::shape`] the first.
    pub fn shape_second(&self, link: &SecondLink, rate_bits: u64) -> io::Result<()> {
        shape_ends(&[(&self.a, &link.dev_a), (&self.b, &link.dev_b)], rate_bits)
    }

    /// Cuts the link: both veth ends down.
    pub fn cut(&self) -> io::Result<()> {
        self.a.exec("ip", &["link", "set", &self.dev_a, "down"])?;
        self.b.exec("ip", &["link", "set", &self.dev_b, "down"]).map(|_| ())
    }
}

/// Several hosts and one server on one switch: `leaves` namespaces
/// (198.18.x.11, .12, ...) and a `server` namespace (198.18.x.1), each
/// joined by a veth pair to a bridge in a `switch` namespace. The switch's
/// port towards the server is the one link they share: [`Star::shape`] puts
/// tbf on it, both ways, so it is the ceiling of their sum.
pub struct Star {
    /// The hosts (a fleet's agents).
    pub leaves: Vec<Netns>,
    /// Their addresses, in order.
    pub leaf_addrs: Vec<Ipv4Addr>,
    /// The server's namespace.
    pub server: Netns,
    /// The server's address.
    pub server_addr: Ipv4Addr,
    /// The bridge's namespace (deleted last: it holds the other ends); the
    /// bridge itself has `switch_addr`, so a client there reaches every host
    /// without crossing the server's link.
    pub switch: Netns,
    /// The bridge's address, inside `switch`.
    pub switch_addr: Ipv4Addr,
    /// The server's veth device (inside `server`).
    dev_server: String,
    /// The switch's port towards the server (inside `switch`).
    dev_uplink: String,
}

impl Star {
    /// `leaves` hosts and one server behind a bridge, MTU 1500.
    pub fn new(leaves: usize) -> io::Result<Star> {
        let switch = Netns::new("sw")?;
        let server = Netns::new("srv")?;
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let tag = format!("{}{n}", std::process::id() % 100_000);
        let bridge = format!("hb{tag}");
        switch.exec("ip", &["link", "add", &bridge, "type", "bridge"])?;
        switch.exec("ip", &["link", "set", &bridge, "up"])?;
        let third = (n % 250) as u8 + 1;
        let switch_addr = Ipv4Addr::new(198, 18, third, 2);
        switch.exec("ip", &["addr", "add", &format!("{switch_addr}/24"), "dev", &bridge])?;
        let plug = |ns: &Netns, inside: &str, port: &str, addr: Ipv4Addr| -> io::Result<()> {
            ip(&[
                "link",
                "add",
                inside,
                "netns",
                &ns.name,
                "type",
                "veth",
                "peer",
                "name",
                port,
                "netns",
                &switch.name,
            ])?;
            ns.exec("ip", &["addr", "add", &format!("{addr}/24"), "dev", inside])?;
            ns.exec("ip", &["link", "set", inside, "up"])?;
            switch.exec("ip", &["link", "set", port, "master", &bridge])?;
            switch.exec("ip", &["link", "set", port, "up"]).map(|_| ())
        };
        let server_addr = Ipv4Addr::new(198, 18, third, 1);
        let (dev_server, dev_uplink) = (format!("hs{tag}"), format!("hu{tag}"));
        plug(&server, &dev_server, &dev_uplink, server_addr)?;
        let (mut leaves_ns, mut leaf_addrs) = (Vec::new(), Vec::new());
        for i in 0..leaves {
            let leaf = Netns::new(&format!("l{i}"))?;
            let addr = Ipv4Addr::new(198, 18, third, 11 + i as u8);
            plug(&leaf, &format!("hl{tag}{i}"), &format!("hp{tag}{i}"), addr)?;
            leaves_ns.push(leaf);
            leaf_addrs.push(addr);
        }
        let star =
            Star { leaves: leaves_ns, leaf_addrs, server, server_addr, switch, switch_addr, dev_server, dev_uplink };
        Ok(star)
    }

    /// Shapes the server's link both ways with `tbf rate <rate_bits>bit`
    /// (see [`TwoHosts::shape`] for what tbf counts).
    pub fn shape(&self, rate_bits: u64) -> io::Result<()> {
        let burst = (rate_bits / 8 / 250).max(256 * 1024);
        for (ns, dev) in [(&self.switch, &self.dev_uplink), (&self.server, &self.dev_server)] {
            let (rate, burst) = (format!("{rate_bits}bit"), burst.to_string());
            let args =
                ["qdisc", "replace", "dev", dev, "root", "tbf", "rate", &rate, "burst", &burst, "latency", "20ms"];
            ns.exec("tc", &args)?;
        }
        Ok(())
    }
}

/// One veth pair of a [`Mesh`]: between hosts `i` and `j` (`i < j`).
pub struct MeshLink {
    /// The lower host's index and its device and address on this pair.
    pub i: usize,
    /// The higher host's index.
    pub j: usize,
    /// Host `i`'s device.
    pub dev_i: String,
    /// Host `j`'s device.
    pub dev_j: String,
    /// Host `i`'s address (198.18.K.(i+1), K one subnet per pair).
    pub addr_i: Ipv4Addr,
    /// Host `j`'s address.
    pub addr_j: Ipv4Addr,
}

/// A switchless mesh: `n` namespaces, every pair joined by its own veth pair
/// on its own /24, so each host has one NIC per peer and the routing table
/// sends each peer's address through the NIC towards it.
pub struct Mesh {
    /// The hosts, in order.
    pub hosts: Vec<Netns>,
    /// Every pair's link.
    pub links: Vec<MeshLink>,
}

impl Mesh {
    /// `n` hosts (at most 9), fully meshed, MTU 1500.
    pub fn new(n: usize) -> io::Result<Mesh> {
        let hosts = (0..n).map(|i| Netns::new(&format!("m{i}"))).collect::<io::Result<Vec<_>>>()?;
        let tag = format!("{}{}", std::process::id() % 100_000, COUNTER.fetch_add(1, Ordering::SeqCst));
        let mut links = Vec::new();
        for i in 0..n {
            for j in i + 1..n {
                let k = links.len() as u8 + 1;
                let (dev_i, dev_j) = (format!("hm{tag}{i}{j}"), format!("hm{tag}{j}{i}"));
                ip(&[
                    "link",
                    "add",
                    &dev_i,
                    "netns",
                    &hosts[i].name,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    &dev_j,
                    "netns",
                    &hosts[j].name,
                ])?;
                let (addr_i, addr_j) = (Ipv4Addr::new(198, 18, k, i as u8 + 1), Ipv4Addr::new(198, 18, k, j as u8 + 1));
                for (ns, dev, addr) in [(&hosts[i], &dev_i, addr_i), (&hosts[j], &dev_j, addr_j)] {
                    ns.exec("ip", &["addr", "add", &format!("{addr}/24"), "dev", dev])?;
                    ns.exec("ip", &["link", "set", dev, "up"])?;
                }
                links.push(MeshLink { i, j, dev_i, dev_j, addr_i, addr_j });
            }
        }
        Ok(Mesh { hosts, links })
    }

    /// The link between hosts `i` and `j`.
    pub fn link(&self, i: usize, j: usize) -> &MeshLink {
        let (i, j) = (i.min(j), i.max(j));
        self.links.iter().find(|l| l.i == i && l.j == j).expect("every pair has a link")
    }
}
