//! What headroom's own bookkeeping costs, so it never limits the engine:
//! - the data generator's fill rate (GB/s per core) for 4 KiB and 1 MiB writes,
//! - a clock read plus a histogram record, per I/O (what each completion costs),
//!   set against the I/O they accompany (a ~10 us NVMe read, the lab's 70 us one).
//!
//! Run: `cargo bench -p headroom-disk --bench disk_overhead`.

use headroom_disk::FastRng;
use std::hint::black_box;
use std::time::{Duration, Instant};

fn rate<F: FnMut()>(mut f: F, bytes_per_call: usize) -> f64 {
    let start = Instant::now();
    let mut calls = 0u64;
    while start.elapsed() < Duration::from_millis(700) {
        for _ in 0..64 {
            f();
        }
        calls += 64;
    }
    calls as f64 * bytes_per_call as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let mut rng = FastRng::new(1);
    for size in [4096usize, 1 << 20] {
        let mut buf = vec![0u8; size];
        let r = rate(
            || {
                rng.fill(&mut buf);
                black_box(&buf);
            },
            size,
        );
        println!(
            "data generator, {:>7} B blocks: {:>6.2} GB/s per core ({:.2} us per block)",
            size,
            r / 1e9,
            size as f64 / r * 1e6
        );
    }

    let mut hist = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
    let n = 5_000_000u64;
    let start = Instant::now();
    let mut last = Instant::now();
    for _ in 0..n {
        let now = Instant::now();
        let lat = now.duration_since(last).as_nanos() as u64;
        hist.saturating_record(lat.max(1));
        last = now;
    }
    let per = start.elapsed().as_nanos() as f64 / n as f64;
    black_box(&hist);
    println!("clock read + histogram record: {per:.1} ns per I/O");
    println!(
        "  = {:.2}% of a 10 us I/O (QD1 NVMe read), {:.3}% of the 70 us I/O of the lab's virtual disk",
        per / 10_000.0 * 100.0,
        per / 70_000.0 * 100.0
    );
}
