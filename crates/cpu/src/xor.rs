//! RAID-5 parity: the XOR of the data blocks of a stripe.
//!
//! Hand-written: XOR parity is one line of arithmetic and no maintained
//! crate offers it as a kernel. What matters is the vector width, so the
//! same loop is compiled for AVX-512, AVX2 and the baseline, and the widest
//! this CPU has is picked at run time (as Linux md's `xor` picks its
//! fastest template at boot).

/// `parity = blocks[0] ^ blocks[1] ^ ...`; every block as long as `parity`.
pub fn xor_parity(parity: &mut [u8], blocks: &[&[u8]]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F (checked just above).
            return unsafe { xor_avx512(parity, blocks) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe { xor_avx2(parity, blocks) };
        }
    }
    xor_generic(parity, blocks)
}

/// Which implementation [`xor_parity`] runs on this CPU.
pub fn xor_implementation() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return "avx512f";
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            return "avx2";
        }
    }
    if cfg!(target_arch = "aarch64") {
        "neon, the aarch64 baseline"
    } else {
        "baseline"
    }
}

#[inline(always)]
fn xor_body(parity: &mut [u8], blocks: &[&[u8]]) {
    let Some((first, rest)) = blocks.split_first() else { return };
    parity.copy_from_slice(&first[..parity.len()]);
    for block in rest {
        for (p, b) in parity.iter_mut().zip(block.iter()) {
            *p ^= *b;
        }
    }
}

fn xor_generic(parity: &mut [u8], blocks: &[&[u8]]) {
    xor_body(parity, blocks)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn xor_avx2(parity: &mut [u8], blocks: &[&[u8]]) {
    xor_body(parity, blocks)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn xor_avx512(parity: &mut [u8], blocks: &[&[u8]]) {
    xor_body(parity, blocks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_implementation_agrees() {
        let a: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        let b: Vec<u8> = (0..1000u32).map(|i| (i * 13 + 5) as u8).collect();
        let mut expect = vec![0u8; 1000];
        xor_generic(&mut expect, &[&a, &b]);
        assert!(expect.iter().enumerate().all(|(i, p)| *p == a[i] ^ b[i]));
        let mut got = vec![0u8; 1000];
        xor_parity(&mut got, &[&a, &b]);
        assert_eq!(got, expect);
    }
}
