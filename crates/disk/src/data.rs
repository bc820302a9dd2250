//! What written blocks contain: fresh incompressible bytes for every write,
//! and the pseudo-random numbers that pick random offsets.
//!
//! Hand-written rather than taken from `rand`: filling a 1 MiB buffer before
//! every write must run at memory speed (several GB/s per core) so the
//! generator never limits the engine; four independent wyrand lanes written
//! 32 bytes at a time let the CPU overlap the multiplications, which the
//! general-purpose `fill_bytes` of the rand crates does not do. The rate is
//! measured by `cargo bench -p headroom-disk --bench disk_overhead`.

use crate::Pattern;

/// wyrand: a 64-bit generator with one multiply per output; good enough for
/// incompressible data and offsets, not for cryptography.
#[derive(Debug, Clone)]
pub struct FastRng {
    state: u64,
}

const WY_INC: u64 = 0xa076_1d64_78bd_642f;
const WY_XOR: u64 = 0xe703_7ed1_a0b4_28db;

#[inline(always)]
fn wy_step(state: &mut u64) -> u64 {
    *state = state.wrapping_add(WY_INC);
    let t = u128::from(*state) * u128::from(*state ^ WY_XOR);
    ((t >> 64) ^ t) as u64
}

impl FastRng {
    /// A generator from a seed; different seeds give unrelated streams.
    pub fn new(seed: u64) -> Self {
        let mut state = seed ^ 0x9e37_79b9_7f4a_7c15;
        // Mix the seed so seeds 0, 1, 2 do not start with related outputs.
        let _ = wy_step(&mut state);
        FastRng { state }
    }

    /// A seed from the clock and the process id, different for every run.
    pub fn seed_from_time(salt: u64) -> u64 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        nanos ^ (u64::from(std::process::id()) << 32) ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    /// The next pseudo-random 64-bit word (wyrand).
    #[inline(always)]
    pub fn next_u64(&mut self) -> u64 {
        wy_step(&mut self.state)
    }

    /// A uniform number in `0..n` (n > 0), by Lemire's multiply-shift.
    #[inline(always)]
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Fills `buf` with pseudo-random bytes, 32 bytes per step from four lanes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        let mut lanes = [
            self.next_u64(),
            self.next_u64() ^ 0x1234_5678_9abc_def1,
            self.next_u64() ^ 0x0fed_cba9_8765_4321,
            self.next_u64() ^ 0x5555_aaaa_3333_cccc,
        ];
        let mut chunks = buf.chunks_exact_mut(32);
        for chunk in &mut chunks {
            let words =
                [wy_step(&mut lanes[0]), wy_step(&mut lanes[1]), wy_step(&mut lanes[2]), wy_step(&mut lanes[3])];
            for (dst, w) in chunk.chunks_exact_mut(8).zip(words) {
                dst.copy_from_slice(&w.to_ne_bytes());
            }
        }
        for b in chunks.into_remainder() {
            *b = wy_step(&mut lanes[0]) as u8;
        }
    }
}

/// Fills a block about to be written according to `pattern`.
pub fn fill_block(rng: &mut FastRng, pattern: Pattern, buf: &mut [u8]) {
    match pattern {
        Pattern::Random => rng.fill(buf),
        Pattern::Zero => buf.fill(0),
        Pattern::Compressible(pct) => {
            let zeros = buf.len() * usize::from(pct.min(100)) / 100;
            buf[..zeros].fill(0);
            rng.fill(&mut buf[zeros..]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_is_fresh_each_time_and_not_constant() {
        let mut rng = FastRng::new(7);
        let mut a = vec![0u8; 4096];
        let mut b = vec![0u8; 4096];
        rng.fill(&mut a);
        rng.fill(&mut b);
        assert_ne!(a, b, "two writes must not carry the same block (dedupe)");
        // Every byte value shows up in 4 KiB of random data.
        let mut seen = [false; 256];
        a.iter().for_each(|&x| seen[x as usize] = true);
        assert!(seen.iter().filter(|&&s| s).count() > 250);
    }

    #[test]
    fn random_blocks_do_not_compress() {
        // A crude entropy estimate: byte histogram of 1 MiB is close to uniform.
        let mut rng = FastRng::new(1);
        let mut buf = vec![0u8; 1 << 20];
        rng.fill(&mut buf);
        let mut counts = [0u64; 256];
        buf.iter().for_each(|&x| counts[x as usize] += 1);
        let n = buf.len() as f64;
        let entropy: f64 = counts
            .iter()
            .filter(|&&c| c > 0)
            .map(|&c| {
                let p = c as f64 / n;
                -p * p.log2()
            })
            .sum();
        assert!(entropy > 7.99, "entropy {entropy} bits/byte");
    }

    #[test]
    fn compressible_pattern_zeroes_the_asked_share() {
        let mut rng = FastRng::new(3);
        let mut buf = vec![0xffu8; 1000];
        fill_block(&mut rng, Pattern::Compressible(30), &mut buf);
        assert!(buf[..300].iter().all(|&b| b == 0));
        assert!(buf[300..].iter().filter(|&&b| b == 0).count() < 20);
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut rng = FastRng::new(9);
        let mut seen = [false; 10];
        for _ in 0..1000 {
            let v = rng.below(10);
            assert!(v < 10);
            seen[v as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }
}
