//! What a token holder may send `headroom serve` as a remote probe request:
//! any JSON is either refused by the server's admission or admitted within
//! the command line's ranges and the server's caps (jobs, buffer memory,
//! duration). Admission must never panic (a Duration overflow, a division)
//! nor allocate by what the request says.
#![no_main]

use headroom_cpu::CpuRequest;
use headroom_disk::{buffer_bytes, check_test_def, DiskRequest};
use headroom_job::{ProbeCaps, ServedProbes};
use headroom_net::{NetRequest, NetTest, ProbeHost};
use headroom_runner::{EngineKind, ProbeRequest};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;
use std::time::Duration;

const MAX_DURATION: Duration = Duration::from_secs(600);

fn served() -> &'static (ServedProbes, ProbeCaps) {
    static SERVED: OnceLock<(ServedProbes, ProbeCaps)> = OnceLock::new();
    SERVED.get_or_init(|| {
        let dir = std::env::temp_dir().join("headroom-fuzz-admission");
        std::fs::create_dir_all(&dir).expect("a directory to allow");
        let caps = ProbeCaps { max_jobs: 64, max_buffer_bytes: 1 << 30 };
        let probes = ServedProbes::new(&[dir])
            .expect("allowed")
            .allowing_net_to(vec!["127.0.0.0/8".parse().unwrap()])
            .with_caps(caps);
        (probes, caps)
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(request) = serde_json::from_slice::<ProbeRequest>(data) else { return };
    let (probes, caps) = served();
    if probes.admit(&request, MAX_DURATION).is_err() {
        return;
    }
    // Admitted: every figure the engines will trust is within bounds.
    match request.engine {
        EngineKind::Disk => {
            let disk: DiskRequest = request.params().expect("admitted requests parse");
            assert!(check_test_def(&disk.test).is_ok());
            assert!(disk.test.jobs <= caps.max_jobs);
            assert!(buffer_bytes(&disk.test) <= caps.max_buffer_bytes);
            assert!(disk.test.ramp.saturating_add(disk.test.time) <= MAX_DURATION);
            assert!(!disk.target.destructive && !disk.target.force);
        }
        EngineKind::Cpu => {
            let cpu: CpuRequest = request.params().expect("admitted requests parse");
            assert!(cpu.check(headroom_cpu::Setting::name).is_ok());
            assert!(cpu.threads as u64 <= u64::from(caps.max_jobs));
            assert!(cpu.buffer_bytes_total() <= caps.max_buffer_bytes);
            assert!(cpu.warmup.saturating_add(cpu.time) <= MAX_DURATION);
        }
        EngineKind::Net => {
            let net: NetRequest = request.params().expect("admitted requests parse");
            assert!(net.check(headroom_net::NetSetting::name).is_ok());
            if let NetTest::Throughput(t) = &net.test {
                assert!(t.duration <= MAX_DURATION);
            }
        }
    }
});
