//! Fletcher-4 as ZFS computes it (`checksum=fletcher4`, ZFS's default):
//! four 64-bit running sums over the data as 32-bit little-endian words.
//!
//! Hand-written because no crate implements ZFS's variant: the `fletcher`
//! crate does the classic Fletcher-16/32/64 (two sums, modular), a different
//! checksum. This is ZFS's scalar reference loop; ZFS also ships SSE/AVX2/
//! AVX-512 versions that run several streams in parallel, so on a vector CPU
//! ZFS is faster than this figure (it is a lower bound).

/// The four Fletcher-4 sums of `data` (length a multiple of 4; a tail is ignored, as ZFS does).
pub fn fletcher4(data: &[u8]) -> [u64; 4] {
    let (mut a, mut b, mut c, mut d) = (0u64, 0u64, 0u64, 0u64);
    for word in data.chunks_exact(4) {
        let w = u64::from(u32::from_le_bytes([word[0], word[1], word[2], word[3]]));
        a = a.wrapping_add(w);
        b = b.wrapping_add(a);
        c = c.wrapping_add(b);
        d = d.wrapping_add(c);
    }
    [a, b, c, d]
}
