//! The listener side of `headroom flushcheck`: a writer on another machine
//! reports each block its storage acknowledged, and this server keeps the
//! list on its own disk (through the operator's [`FlushLedger`]) so that
//! `flushcheck verify` can fetch it after the writer's machine lost power,
//! even when this server was restarted meanwhile.
//!
//! Every message is checked against the run the writer declared
//! ([`FlushRun::validate`], [`FlushRun::check_ack`]) before the ledger sees
//! it; pages of the list are bounded ([`wire::FLUSH_PAGE`]).

use super::registry::Shared;
use super::ServerSetting;
use crate::wire::{self, FlushAck, FlushRun, Reply, Request};
use std::io;
use std::net::TcpStream;

/// Where `headroom serve` keeps flushcheck runs. The binary supplies it
/// (`--flushcheck-dir`): storage lives in a crate the server must not import.
pub trait FlushLedger: Send + Sync {
    /// Records a run (again after a writer's reconnect: the same fields are
    /// no error, different ones are). The error is what the writer prints.
    fn begin(&self, run: &FlushRun) -> Result<(), String>;
    /// The run `run` was begun here, as declared; None when unknown.
    fn run(&self, run: &str) -> Result<Option<FlushRun>, String>;
    /// Records one acknowledged block durably (on disk, synced) before
    /// returning; a block at the same offset with a lower sequence number is replaced.
    fn record(&self, run: &str, ack: &FlushAck) -> Result<(), String>;
    /// Up to `max` acknowledged blocks at offsets above `after`, in offset order.
    fn page(&self, run: &str, after: u64, max: usize) -> Result<Vec<FlushAck>, String>;
}

/// Answers one flushcheck request; Err when the connection is gone.
pub(super) fn answer(conn: &mut TcpStream, req: Request, s: &Shared) -> io::Result<()> {
    let reply = match &s.cfg.flush {
        None => Reply::Refused { reason: no_ledger(s) },
        Some(ledger) => handle(ledger.as_ref(), req).unwrap_or_else(|reason| Reply::Refused { reason }),
    };
    wire::write_frame(conn, &reply)
}

/// The refusal of a server started without a ledger, saying how to start one.
fn no_ledger(s: &Shared) -> String {
    let [dir, bind, token] =
        [ServerSetting::FlushcheckDir, ServerSetting::Bind, ServerSetting::Token].map(|x| s.cfg.spell(x));
    format!(
        "this server keeps no flushcheck records: start it with {dir} DIR \
         (example: headroom serve {bind} 0.0.0.0 {token} s3cret {dir} /var/lib/headroom)"
    )
}

fn known(ledger: &dyn FlushLedger, run: &str) -> Result<FlushRun, String> {
    if wire::from_hex::<{ wire::FLUSH_RUN_LEN }>(run).is_none() {
        return Err(format!("a flushcheck run id is {} hex digits", wire::FLUSH_RUN_LEN * 2));
    }
    ledger.run(run)?.ok_or_else(|| format!("no flushcheck run {run} is recorded on this server"))
}

fn handle(ledger: &dyn FlushLedger, req: Request) -> Result<Reply, String> {
    match req {
        Request::FlushBegin { run } => {
            run.validate()?;
            ledger.begin(&run)?;
            Ok(Reply::FlushRecorded { seq: 0 })
        }
        Request::FlushAck { run, ack } => {
            known(ledger, &run)?.check_ack(&ack)?;
            ledger.record(&run, &ack)?;
            Ok(Reply::FlushRecorded { seq: ack.seq })
        }
        Request::FlushList { run, after } => {
            let declared = known(ledger, &run)?;
            let mut acks = ledger.page(&run, after, wire::FLUSH_PAGE + 1)?;
            let more = acks.len() > wire::FLUSH_PAGE;
            acks.truncate(wire::FLUSH_PAGE);
            Ok(Reply::FlushAcks { run: declared, acks, more })
        }
        _ => Err("not a flushcheck request".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    /// Runs, and acknowledged blocks by (run, offset).
    type Books = (BTreeMap<String, FlushRun>, BTreeMap<(String, u64), FlushAck>);

    #[derive(Default)]
    struct MemLedger(Mutex<Books>);

    impl FlushLedger for MemLedger {
        fn begin(&self, run: &FlushRun) -> Result<(), String> {
            self.0.lock().unwrap().0.insert(run.run.clone(), run.clone());
            Ok(())
        }
        fn run(&self, run: &str) -> Result<Option<FlushRun>, String> {
            Ok(self.0.lock().unwrap().0.get(run).cloned())
        }
        fn record(&self, run: &str, ack: &FlushAck) -> Result<(), String> {
            self.0.lock().unwrap().1.insert((run.into(), ack.offset), *ack);
            Ok(())
        }
        fn page(&self, run: &str, after: u64, max: usize) -> Result<Vec<FlushAck>, String> {
            let g = self.0.lock().unwrap();
            Ok(g.1.iter().filter(|((r, o), _)| r == run && *o > after).map(|(_, a)| *a).take(max).collect())
        }
    }

    fn run() -> FlushRun {
        FlushRun {
            run: "00112233445566778899aabbccddeeff".into(),
            block_size: 4096,
            blocks: 2000,
            sync: "fsync".into(),
            path: "/x".into(),
            host: "h".into(),
        }
    }

    #[test]
    fn hostile_flush_messages_are_refused_and_never_reach_the_ledger() {
        let ledger = MemLedger::default();
        for (bad, says) in [
            (FlushRun { run: "zz".into(), ..run() }, "hex digits"),
            (FlushRun { block_size: 512, ..run() }, "power of two"),
            (FlushRun { block_size: 12288, ..run() }, "power of two"),
            (FlushRun { blocks: 0, ..run() }, "blocks"),
            (FlushRun { blocks: u64::MAX, ..run() }, "blocks"),
            (FlushRun { sync: "maybe".into(), ..run() }, "fsync"),
            (FlushRun { path: "p".repeat(5000), ..run() }, "at most"),
        ] {
            let e = handle(&ledger, Request::FlushBegin { run: bad }).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
        let ack = |seq, offset| Request::FlushAck { run: run().run, ack: FlushAck { seq, offset, checksum: 1 } };
        assert!(handle(&ledger, ack(1, 4096)).unwrap_err().contains("no flushcheck run"));
        handle(&ledger, Request::FlushBegin { run: run() }).unwrap();
        for (seq, offset) in [(0, 4096), (1, 0), (1, 4095), (1, 4096 * 2001), (1, u64::MAX)] {
            assert!(handle(&ledger, ack(seq, offset)).unwrap_err().contains("outside run"), "{seq} {offset}");
        }
        assert!(ledger.0.lock().unwrap().1.is_empty());
        assert_eq!(handle(&ledger, ack(1, 4096 * 2000)).unwrap(), Reply::FlushRecorded { seq: 1 });
    }

    #[test]
    fn the_list_comes_in_bounded_pages() {
        let ledger = MemLedger::default();
        handle(&ledger, Request::FlushBegin { run: run() }).unwrap();
        for i in 1..=1200u64 {
            let a = FlushAck { seq: i, offset: i * 4096, checksum: i };
            handle(&ledger, Request::FlushAck { run: run().run, ack: a }).unwrap();
        }
        let (mut after, mut got) = (0, 0);
        loop {
            let Reply::FlushAcks { acks, more, .. } =
                handle(&ledger, Request::FlushList { run: run().run, after }).unwrap()
            else {
                panic!("not a page")
            };
            assert!(acks.len() <= wire::FLUSH_PAGE);
            got += acks.len();
            after = acks.last().map_or(after, |a| a.offset);
            if !more {
                break;
            }
        }
        assert_eq!(got, 1200);
    }
}
