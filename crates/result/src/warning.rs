//! Warnings: what a user must know to trust a figure. The codes are an enum
//! serialised to the stable words documents have always carried
//! (`page_cache_possible`, `write_cliff`, ...); a word this version does not
//! know (a newer headroom's) loads as [`WarningCode::Other`] and is written
//! back unchanged.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

words_enum! {
    /// A warning's stable code.
    open WarningCode {
        /// Buffered I/O, or a test file that fits in RAM: the page cache may have answered.
        PageCachePossible = "page_cache_possible",
        /// Faster than the ceiling of the hop: a cache, compression or a wrong ceiling.
        FasterThanCeiling = "faster_than_ceiling",
        /// The write rate fell when a cache filled up.
        WriteCliff = "write_cliff",
        /// Sequential writes ran 1.5x or more faster than the same file's reads: a write-back cache acknowledged them.
        WritesOutranReads = "writes_outran_reads",
        /// Sustained writes slowed to under half in several steps (no single cliff).
        WriteDecline = "write_decline",
        /// The filesystem cannot do what the test asked as asked (O_DIRECT, fallocate, ...).
        FilesystemCaveat = "filesystem_caveat",
        /// The queue depth asked for was more than the device takes.
        QueueDepthCapped = "queue_depth_capped",
        /// A kernel granted smaller socket buffers than `--window` asked.
        SocketBufferCapped = "socket_buffer_capped",
        /// The test file's blocks were not allocated before reading.
        LayoutNotAllocated = "layout_not_allocated",
        /// An iSCSI target's small Data-Out segment (MaxRecvDataSegmentLength) split each write into many PDUs.
        IscsiSmallDataOut = "iscsi_small_data_out",
        /// A test completed no I/O at all.
        NoIoCompleted = "no_io_completed",
        /// An I/O failed.
        IoError = "io_error",
        /// Ctrl-C or a limit stopped the test before its time.
        StoppedEarly = "stopped_early",
        /// A test was aborted.
        TestAborted = "test_aborted",
        /// A test failed; the others ran.
        TestFailed = "test_failed",
        /// One TCP stream held back by a buffer or window (the TCP_INFO diagnosis).
        SingleStreamLimited = "single_stream_limited",
        /// A CPU on one end limited the figure.
        CpuLimited = "cpu_limited",
        /// Other work competed for the CPU during the test.
        CpuContended = "cpu_contended",
        /// Other processes kept cores busy during a memory-resident CPU figure: its memory bandwidth was shared.
        MemoryShared = "memory_shared",
        /// A CPU kernel cannot fill the link it is compared with.
        CpuBelowLink = "cpu_below_link",
        /// No interface reported a link speed: the link compared with is assumed.
        LinkAssumed = "link_assumed",
        /// UDP datagrams were lost.
        UdpLoss = "udp_loss",
        /// The server sent no report of the test: this side's figures stand in.
        NoServerReport = "no_server_report",
        /// TCP handshakes failed.
        ConnectFailures = "connect_failures",
        /// The inventory could not be taken: the bus, NIC and link ceilings are unknown.
        NoInventory = "no_inventory",
        /// A `--goal` was missed.
        GoalMissed = "goal_missed",
        /// A soak went without samples for a while.
        SoakGap = "soak_gap",
        /// A soak's samples dip at a regular period (a soak detection).
        PeriodicDips = "periodic_dips",
        /// A soak's latency crept up over its run (a soak detection).
        LatencyDrift = "latency_drift",
        /// The link went down and up during a soak (a soak detection).
        LinkFlaps = "link_flaps",
        /// The server stopped answering during a soak (a soak detection).
        ServerOutage = "server_outage",
    }
}

/// Something the user must know to trust a figure; `code` is stable, `message` human.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Warning {
    /// e.g. page_cache_possible, faster_than_ceiling, write_cliff.
    #[schemars(with = "String")]
    pub code: WarningCode,
    /// One or two sentences for the user: what was seen and what it means for the figure.
    pub message: String,
}

impl Warning {
    /// A warning with `code` (a [`WarningCode`] or its word, e.g. `"write_cliff"`) and its message.
    pub fn new(code: impl Into<WarningCode>, message: impl Into<String>) -> Self {
        Warning { code: code.into(), message: message.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_the_words_documents_carry_and_unknown_ones_survive() {
        let w: Warning = serde_json::from_str(r#"{"code":"write_cliff","message":"m"}"#).unwrap();
        assert_eq!(w.code, WarningCode::WriteCliff);
        assert_eq!(serde_json::to_string(&w).unwrap(), r#"{"code":"write_cliff","message":"m"}"#);
        let future: Warning = serde_json::from_str(r#"{"code":"nvme_thermal","message":"m"}"#).unwrap();
        assert_eq!(future.code, WarningCode::Other("nvme_thermal".into()));
        assert_eq!(serde_json::to_string(&future).unwrap(), r#"{"code":"nvme_thermal","message":"m"}"#);
        assert_eq!(Warning::new("goal_missed", "x").code, WarningCode::GoalMissed);
    }
}
