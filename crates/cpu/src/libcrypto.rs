//! The system's OpenSSL 3 libcrypto as a second implementation of the
//! AES-GCM and ChaCha20-Poly1305 kernels, loaded at run time.
//!
//! Why: OpenSSH and most software that encrypts on a NAS or a desktop run
//! OpenSSL's ciphers, whose code may take a wider path than ring's on the
//! same CPU (OpenSSL 3's AVX-512 ChaCha20 and IFMA Poly1305 on x86-64, its
//! NEON Poly1305 on ARM, where ring's is portable C), or a narrower one
//! (OpenSSL 3.0 has no VAES AES-GCM). A figure from ring alone would
//! understate or overstate what that software gets. The bench times both
//! and keeps the faster, naming it; the slower is recorded beside it.
//!
//! No crate binds libcrypto without linking it at build time (openssl-sys
//! needs its headers and a `.so` to link, which the static, Windows and
//! fresh-machine builds do not have), so the handful of EVP calls is
//! declared here and loaded through [`headroom_sys::c_library!`]: a machine
//! without OpenSSL 3 keeps ring's figure.
//!
//! Owns the declarations and a sealing context; knows nothing of timing.

use headroom_result::kernels::Kernel;
use std::ffi::{c_char, c_int, c_uchar, c_void, CStr};

/// OpenSSL's `EVP_CIPHER` (opaque).
#[repr(C)]
pub(crate) struct EvpCipher {
    _opaque: [u8; 0],
}

/// OpenSSL's `EVP_CIPHER_CTX` (opaque).
#[repr(C)]
pub(crate) struct EvpCipherCtx {
    _opaque: [u8; 0],
}

/// `EVP_CTRL_AEAD_GET_TAG` of openssl/evp.h (the same for GCM and ChaCha20-Poly1305).
const EVP_CTRL_AEAD_GET_TAG: c_int = 0x10;
/// `OPENSSL_VERSION` of openssl/crypto.h: "OpenSSL 3.0.22 1 Jul 2025".
const OPENSSL_VERSION: c_int = 0;
/// Bytes of every kernel's nonce and tag (96-bit nonce, 128-bit tag).
pub(crate) const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;

/// The same declarations under each platform's library name (OpenSSL 3's
/// ABI; 1.1 had other sonames and is not loaded).
macro_rules! declare_libcrypto {
    ($soname:literal, $package:literal) => {
        /// The library's file name, as loaded.
        pub(crate) const SONAME: &str = $soname;
        headroom_sys::c_library! {
            library $soname, package $package, for "pricing the system's OpenSSL ciphers";
            fn OpenSSL_version(kind: c_int) -> *const c_char;
            fn EVP_aes_128_gcm() -> *const EvpCipher;
            fn EVP_aes_256_gcm() -> *const EvpCipher;
            fn EVP_chacha20_poly1305() -> *const EvpCipher;
            fn EVP_CIPHER_CTX_new() -> *mut EvpCipherCtx;
            fn EVP_CIPHER_CTX_free(ctx: *mut EvpCipherCtx);
            fn EVP_EncryptInit_ex(
                ctx: *mut EvpCipherCtx,
                cipher: *const EvpCipher,
                engine: *mut c_void,
                key: *const c_uchar,
                iv: *const c_uchar,
            ) -> c_int;
            fn EVP_EncryptUpdate(
                ctx: *mut EvpCipherCtx,
                out: *mut c_uchar,
                out_len: *mut c_int,
                input: *const c_uchar,
                in_len: c_int,
            ) -> c_int;
            fn EVP_EncryptFinal_ex(ctx: *mut EvpCipherCtx, out: *mut c_uchar, out_len: *mut c_int) -> c_int;
            fn EVP_CIPHER_CTX_ctrl(ctx: *mut EvpCipherCtx, kind: c_int, arg: c_int, ptr: *mut c_void) -> c_int;
        }
    };
}

#[allow(non_snake_case)]
mod ffi {
    use super::{c_char, c_int, c_uchar, c_void, EvpCipher, EvpCipherCtx};
    #[cfg(all(windows, target_arch = "x86_64"))]
    declare_libcrypto!("libcrypto-3-x64.dll", "OpenSSL 3 for Windows");
    #[cfg(all(windows, target_arch = "aarch64"))]
    declare_libcrypto!("libcrypto-3-arm64.dll", "OpenSSL 3 for Windows");
    #[cfg(all(windows, not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
    declare_libcrypto!("libcrypto-3.dll", "OpenSSL 3 for Windows");
    #[cfg(not(windows))]
    declare_libcrypto!("libcrypto.so.3", "libssl3");
}

/// Loads libcrypto, or says why not. A static build never tries: its
/// libc cannot host a shared library that links the system's libc.
fn load() -> Result<(), String> {
    if cfg!(target_feature = "crt-static") {
        return Err("a static build does not load the system's libcrypto".into());
    }
    ffi::load()
}

/// "OpenSSL 3.0.22 1 Jul 2025 (the system's libcrypto.so.3)", or why it
/// cannot be loaded.
pub(crate) fn implementation() -> Result<String, String> {
    load()?;
    // SAFETY: loaded; OpenSSL_version returns a static NUL-terminated string.
    let version = unsafe { CStr::from_ptr(ffi::OpenSSL_version(OPENSSL_VERSION)) };
    Ok(format!("{} (the system's {})", version.to_string_lossy(), ffi::SONAME))
}

/// Whether libcrypto is a candidate for `kernel`.
pub(crate) fn offers(kernel: &Kernel) -> bool {
    matches!(kernel, Kernel::Aes128Gcm | Kernel::Aes256Gcm | Kernel::ChaCha20Poly1305)
}

/// One thread's encryption context for one kernel and key.
pub(crate) struct Sealer {
    ctx: *mut EvpCipherCtx,
}

// SAFETY: an EVP_CIPHER_CTX may move between threads; it is never shared
// (every method takes &mut self).
unsafe impl Send for Sealer {}

impl Sealer {
    /// A context for `kernel` keyed with `key` (16 bytes for AES-128, 32
    /// otherwise), or why libcrypto cannot provide one.
    pub(crate) fn new(kernel: Kernel, key: &[u8]) -> Result<Sealer, String> {
        load()?;
        // SAFETY: loaded; each returns a static cipher description.
        let (cipher, key_len) = unsafe {
            match kernel {
                Kernel::Aes128Gcm => (ffi::EVP_aes_128_gcm(), 16),
                Kernel::Aes256Gcm => (ffi::EVP_aes_256_gcm(), 32),
                Kernel::ChaCha20Poly1305 => (ffi::EVP_chacha20_poly1305(), 32),
                _ => return Err(format!("libcrypto is not timed for {}", kernel.id())),
            }
        };
        if cipher.is_null() || key.len() != key_len {
            return Err(format!("libcrypto has no {} for a {}-byte key", kernel.id(), key.len()));
        }
        // SAFETY: loaded; freed in Drop.
        let sealer = Sealer { ctx: unsafe { ffi::EVP_CIPHER_CTX_new() } };
        if sealer.ctx.is_null() {
            return Err("EVP_CIPHER_CTX_new failed".into());
        }
        // SAFETY: a live context, a cipher of libcrypto's, a key of the
        // cipher's length; no IV yet (each seal sets its own).
        let ok = unsafe {
            ffi::EVP_EncryptInit_ex(sealer.ctx, cipher, std::ptr::null_mut(), key.as_ptr(), std::ptr::null())
        };
        if ok != 1 {
            return Err(format!("EVP_EncryptInit_ex refused the {} key", kernel.id()));
        }
        Ok(sealer)
    }

    /// Encrypts `message` in place under `nonce` (no associated data) and
    /// returns the tag, as ring's `seal_in_place_separate_tag` does.
    pub(crate) fn seal(&mut self, nonce: &[u8; NONCE_LEN], message: &mut [u8]) -> Result<[u8; TAG_LEN], String> {
        let len = c_int::try_from(message.len()).map_err(|_| "a message above 2 GiB".to_string())?;
        let mut written: c_int = 0;
        let mut tag = [0u8; TAG_LEN];
        let ptr = message.as_mut_ptr();
        // SAFETY: a live, keyed context; the 12-byte nonce is the ciphers'
        // default IV length; GCM and ChaCha20-Poly1305 encrypt exactly in
        // place (out == in) and write at most `len` bytes in Update and
        // none in Final; the tag buffer holds the 16 bytes asked for.
        let ok = unsafe {
            ffi::EVP_EncryptInit_ex(self.ctx, std::ptr::null(), std::ptr::null_mut(), std::ptr::null(), nonce.as_ptr())
                == 1
                && ffi::EVP_EncryptUpdate(self.ctx, ptr, &mut written, ptr, len) == 1
                && written == len
                && ffi::EVP_EncryptFinal_ex(self.ctx, ptr.add(message.len()), &mut written) == 1
                && written == 0
                && ffi::EVP_CIPHER_CTX_ctrl(self.ctx, EVP_CTRL_AEAD_GET_TAG, TAG_LEN as c_int, tag.as_mut_ptr().cast())
                    == 1
        };
        if ok {
            Ok(tag)
        } else {
            Err("libcrypto's seal failed".into())
        }
    }
}

impl Drop for Sealer {
    fn drop(&mut self) {
        // SAFETY: created by EVP_CIPHER_CTX_new (so the library is loaded), freed once.
        unsafe { ffi::EVP_CIPHER_CTX_free(self.ctx) }
    }
}
