//! The instruction-set features that decide these kernels' speed, detected at
//! run time (what this CPU and kernel expose, not what the binary was built for).

use headroom_result::kernels::Feature;

/// The storage-relevant features of this CPU.
pub fn features() -> Vec<Feature> {
    let mut list = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        let f = |name, present, used_for| Feature { name, present, used_for };
        list.push(f("AES-NI", has!("aes"), "AES-GCM (SMB3, TLS, SSH aes*-gcm)"));
        list.push(f("PCLMULQDQ", has!("pclmulqdq"), "GHASH, the GCM half of AES-GCM"));
        list.push(f(
            "VAES",
            has!("vaes"),
            "wide AES-GCM (ring, OpenSSL and the kernel use it where they have a VAES path)",
        ));
        list.push(f("VPCLMULQDQ", has!("vpclmulqdq"), "wide GHASH; as VAES"));
        list.push(f("SSE4.2", has!("sse4.2"), "CRC32C instruction (iSCSI, ext4, btrfs checksums)"));
        list.push(f("SHA-NI", has!("sha"), "SHA-256 (ZFS checksum=sha256, dedup)"));
        list.push(f("AVX2", has!("avx2"), "RAID parity, BLAKE3, ChaCha20, zstd"));
        list.push(f("AVX-512F", has!("avx512f"), "RAID-5 XOR, BLAKE3"));
        list.push(f("AVX-512BW", has!("avx512bw"), "RAID-5 XOR"));
        list.push(f("GFNI", has!("gfni"), "Galois-field multiply (RAID-6 Q in recent kernels)"));
    }
    #[cfg(target_arch = "aarch64")]
    {
        use std::arch::is_aarch64_feature_detected as has;
        let f = |name, present, used_for| Feature { name, present, used_for };
        list.push(f(
            "AES",
            has!("aes"),
            "AES-GCM (ring's ARMv8 path; without it ring's NEON AES, several times slower)",
        ));
        list.push(f("PMULL", has!("pmull"), "GHASH, the GCM half of AES-GCM"));
        list.push(f("SHA2", has!("sha2"), "SHA-256 (ZFS checksum=sha256, dedup)"));
        list.push(f("CRC32", has!("crc"), "CRC32C instruction (iSCSI, ext4, btrfs checksums)"));
        list.push(f("NEON", has!("neon"), "RAID-5 XOR, RAID-6 parity, XXH3, BLAKE3, ChaCha20, zstd's copies"));
        list.push(f("SVE", has!("sve"), "wide vectors (none of these kernels uses them yet)"));
    }
    list
}
