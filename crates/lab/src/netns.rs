//! Network namespaces joined by veth pairs, shaped with tbf: a real network
//! of known speed inside one machine (../shared/reference/LAB.md).
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
        // Burst: at least a few 64 KiB GSO super-packets, and ~4 ms at the rate.
        let burst = (rate_bits / 8 / 250).max(256 * 1024);
        for (ns, dev) in [(&self.a, &self.dev_a), (&self.b, &self.dev_b)] {
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

    /// Cuts the link: both veth ends down.
    pub fn cut(&self) -> io::Result<()> {
        self.a.exec("ip", &["link", "set", &self.dev_a, "down"])?;
        self.b.exec("ip", &["link", "set", &self.dev_b, "down"]).map(|_| ())
    }
}
