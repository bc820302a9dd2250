//! Loading the C libraries headroom calls (libblkid in headroom-disk, libnfs and libnbd in
//! headroom-proto, libcrypto in headroom-cpu) at run time, on first use, by exact soname: building needs
//! neither their headers nor their link-time `.so`, and a machine without one
//! loses only what needs it, with one line naming the package to install.
//!
//! The soname pins the ABI the hand-written declarations were checked
//! against (libnfs 6 reordered arguments of `nfs_pread_async` and bumped its
//! soname): never a bare `libfoo.so`, which may be any version.
//!
//! Owns the loading and the message; each library's declarations stay in the
//! module that calls them (through [`c_library!`](crate::c_library)). Must
//! not know any library's functions.

pub use libloading::Library;

/// Opens `soname` (e.g. `libnfs.so.13`) for good, or one line saying which
/// package to install.
pub fn open(soname: &str, package: &str, needed_for: &str) -> Result<Library, String> {
    // SAFETY: these libraries run no initialiser with preconditions; loading
    // them is what linking them did before.
    unsafe { Library::new(soname) }.map_err(|e| {
        let why = e.to_string();
        let why = why.rsplit(": ").next().unwrap_or(&why).to_string();
        format!("{needed_for} needs {soname}, which cannot be loaded ({why}): install the package {package}, e.g. apt-get install {package}")
    })
}

/// The function `name` of `lib` as the pointer type `T`, or one line naming
/// the library and the symbol (a library of the right soname without it is
/// not the build the declarations were written for).
///
/// `name` ends with a NUL.
///
/// # Safety
/// `T` must be the function's true C signature.
pub unsafe fn symbol<T: Copy>(lib: &Library, soname: &str, name: &str) -> Result<T, String> {
    // SAFETY: the caller vouches for T.
    unsafe { lib.get::<T>(name.as_bytes()) }
        .map(|s| *s)
        .map_err(|e| format!("{soname} lacks {} ({e}): reinstall it", name.trim_end_matches('\0')))
}

/// Declares the functions of one C library, loaded at run time: a private
/// table filled on first use, `load()` (Ok once every symbol resolved, or
/// the one line of [`open`]/[`symbol`]) and one `unsafe fn` per function
/// that calls through the table. Callers call `load()?` before the first
/// function, where its error can be reported; a function called first loads
/// the library itself and panics if it is missing.
///
/// ```ignore
/// headroom_sys::c_library! {
///     library "libnbd.so.0", package "libnbd0", for "nbd:// targets";
///     fn nbd_create() -> *mut NbdHandle;
/// }
/// ```
///
/// With `static feature "F", link "NAME"` after the package, building with
/// cargo feature `F` links `libNAME.a` instead (a static binary cannot load
/// shared libraries reliably) and `load()` always succeeds.
#[macro_export]
macro_rules! c_library {
    (
        library $soname:literal, package $package:literal, for $needed:literal,
        static feature $feature:literal, link $link:literal;
        $( fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?; )*
    ) => {
        #[cfg(not(feature = $feature))]
        mod loaded {
            #[allow(unused_imports)]
            use super::*;
            $crate::c_library! {
                library $soname, package $package, for $needed;
                $( fn $name($($arg: $ty),*) $(-> $ret)?; )*
            }
        }
        #[cfg(not(feature = $feature))]
        pub use loaded::*;
        #[cfg(feature = $feature)]
        mod linked {
            #[allow(unused_imports)]
            use super::*;
            // Not bundled into the rlib: the final link finds lib$link.a
            // where the system's linker looks (rustc itself searches only -L).
            #[link(name = $link, kind = "static", modifiers = "-bundle")]
            extern "C" {
                $( pub fn $name($($arg: $ty),*) $(-> $ret)?; )*
            }
            /// Linked in: nothing to load.
            pub fn load() -> Result<(), String> {
                Ok(())
            }
        }
        #[cfg(feature = $feature)]
        pub use linked::*;
    };
    (
        library $soname:literal, package $package:literal, for $needed:literal;
        $( fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?; )*
    ) => {
        #[allow(non_snake_case)]
        struct Api {
            $( $name: unsafe extern "C" fn($($ty),*) $(-> $ret)?, )*
            // Never dropped (the table is a static): the pointers stay valid.
            _lib: $crate::clib::Library,
        }

        static API: std::sync::OnceLock<Result<Api, String>> = std::sync::OnceLock::new();

        fn api() -> Result<&'static Api, String> {
            API.get_or_init(|| {
                let lib = $crate::clib::open($soname, $package, $needed)?;
                // SAFETY: each pointer type is the declaration below, checked
                // against the headers of the version the soname names.
                unsafe {
                    Ok(Api {
                        $( $name: $crate::clib::symbol(&lib, $soname, concat!(stringify!($name), "\0"))?, )*
                        _lib: lib,
                    })
                }
            })
            .as_ref()
            .map_err(Clone::clone)
        }

        /// Loads the library and resolves every function declared here, or
        /// one line naming the package to install.
        pub fn load() -> Result<(), String> {
            api().map(drop)
        }

        $(
            #[allow(clippy::too_many_arguments, clippy::missing_safety_doc)]
            pub unsafe fn $name($($arg: $ty),*) $(-> $ret)? {
                let api = api().unwrap_or_else(|e| panic!("{e}"));
                // SAFETY: the caller keeps the C function's contract.
                unsafe { (api.$name)($($arg),*) }
            }
        )*
    };
}
