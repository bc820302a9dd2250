//! Test data: incompressible (PRNG) and 2:1 compressible, generated fast and
//! deterministically so runs are comparable.
use headroom_result::kernels::DataKind;

/// SplitMix64: a tiny, fast PRNG; hand-written because filling a buffer is
/// all we need from it and it keeps the data identical across runs and
/// platforms (a `rand` version bump could change the stream).
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Fills `buf` with `kind` data from `seed`.
pub fn fill(buf: &mut [u8], kind: DataKind, seed: u64) {
    let mut rng = SplitMix64(seed);
    let mut words = buf.chunks_exact_mut(8);
    for w in &mut words {
        w.copy_from_slice(&rng.next().to_le_bytes());
    }
    let tail = words.into_remainder();
    let last = rng.next().to_le_bytes();
    tail.copy_from_slice(&last[..tail.len()]);
    if kind == DataKind::Compressible2to1 {
        for run in buf.chunks_mut(256) {
            let half = run.len() / 2;
            run[half..].fill(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compressible_data_is_half_zero_and_incompressible_is_not() {
        let mut a = vec![0u8; 1 << 16];
        fill(&mut a, DataKind::Compressible2to1, 1);
        let zeros = a.iter().filter(|b| **b == 0).count();
        assert!((zeros as f64 / a.len() as f64 - 0.5).abs() < 0.01);
        fill(&mut a, DataKind::Incompressible, 1);
        let zeros = a.iter().filter(|b| **b == 0).count();
        assert!(zeros < a.len() / 100);
    }
}
