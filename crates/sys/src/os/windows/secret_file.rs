//! Who else may read a secret file, on Windows: its owner and DACL from
//! GetNamedSecurityInfoW, each ACE (GetAce) turned into a
//! `crate::secret_file::Ace` with its SID classified (EqualSid with the
//! owner, IsWellKnownSid) and named (LookupAccountSidW, else
//! ConvertSidToStringSidW). The rule is `crate::secret_file::judge_dacl`.

use crate::secret_file::{judge_dacl, Ace, Trustee, ACCESS_ALLOWED_ACE_TYPE};
use std::path::Path;
use windows_sys::Win32::Foundation::LocalFree;
use windows_sys::Win32::Security::Authorization::{ConvertSidToStringSidW, GetNamedSecurityInfoW, SE_FILE_OBJECT};
use windows_sys::Win32::Security::{
    EqualSid, GetAce, IsWellKnownSid, LookupAccountSidW, WinBuiltinAdministratorsSid, WinCreatorOwnerRightsSid,
    WinLocalSystemSid, ACCESS_ALLOWED_ACE, ACE_HEADER, ACL, DACL_SECURITY_INFORMATION, OWNER_SECURITY_INFORMATION,
    PSECURITY_DESCRIPTOR, PSID,
};

/// See `crate::secret_file::who_else_may_read`.
pub fn who_else_may_read(path: &Path) -> Result<Option<String>, String> {
    use std::os::windows::ffi::OsStrExt;
    let wide: Vec<u16> = path.as_os_str().encode_wide().chain(Some(0)).collect();
    let (mut owner, mut dacl): (PSID, *mut ACL) = (std::ptr::null_mut(), std::ptr::null_mut());
    let mut sd: PSECURITY_DESCRIPTOR = std::ptr::null_mut();
    // SAFETY: the name is NUL-terminated; the out pointers point into `sd`, freed below.
    let rc = unsafe {
        GetNamedSecurityInfoW(
            wide.as_ptr(),
            SE_FILE_OBJECT,
            OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION,
            &mut owner,
            std::ptr::null_mut(),
            &mut dacl,
            std::ptr::null_mut(),
            &mut sd,
        )
    };
    if rc != 0 {
        return Err(format!(
            "cannot read who may read it (GetNamedSecurityInfoW: {})",
            std::io::Error::from_raw_os_error(rc as i32)
        ));
    }
    // SAFETY: `dacl` and `owner` point into `sd`, alive until LocalFree.
    let aces = (!dacl.is_null()).then(|| unsafe { aces_of(dacl, owner) });
    let judged = judge_dacl(aces.as_deref(), &path.display().to_string());
    // SAFETY: `sd` was allocated by GetNamedSecurityInfoW for the caller to LocalFree.
    unsafe { LocalFree(sd) };
    judged
}

/// The DACL's entries; the SID is read only for ACCESS_ALLOWED_ACE (the one
/// type whose SID the rule weighs), whose layout is ACE_HEADER, Mask, SID.
///
/// # Safety
/// `dacl` and `owner` must be valid (from GetNamedSecurityInfoW).
unsafe fn aces_of(dacl: *mut ACL, owner: PSID) -> Vec<Ace> {
    let count = unsafe { (*dacl).AceCount };
    let mut aces = Vec::with_capacity(count.into());
    for index in 0..u32::from(count) {
        let mut raw = std::ptr::null_mut();
        // SAFETY: index < AceCount; GetAce points `raw` into the ACL.
        if unsafe { GetAce(dacl, index, &mut raw) } == 0 {
            continue;
        }
        // SAFETY: every ACE starts with an ACE_HEADER.
        let header = unsafe { *raw.cast::<ACE_HEADER>() };
        let (mut mask, mut trustee) = (0, None);
        if header.AceType == ACCESS_ALLOWED_ACE_TYPE {
            let ace = raw.cast::<ACCESS_ALLOWED_ACE>();
            // SAFETY: an ACCESS_ALLOWED_ACE; its SID starts at SidStart.
            unsafe {
                mask = (*ace).Mask;
                trustee = Some(trustee_of(std::ptr::addr_of_mut!((*ace).SidStart).cast(), owner));
            }
        }
        aces.push(Ace { ace_type: header.AceType, flags: header.AceFlags, mask, trustee });
    }
    aces
}

/// Whom `sid` names for the rule.
///
/// # Safety
/// Both SIDs must be valid.
unsafe fn trustee_of(sid: PSID, owner: PSID) -> Trustee {
    // SAFETY: both SIDs are valid (the caller's promise).
    unsafe {
        if (!owner.is_null() && EqualSid(sid, owner) != 0) || IsWellKnownSid(sid, WinCreatorOwnerRightsSid) != 0 {
            Trustee::Owner
        } else if IsWellKnownSid(sid, WinLocalSystemSid) != 0 {
            Trustee::LocalSystem
        } else if IsWellKnownSid(sid, WinBuiltinAdministratorsSid) != 0 {
            Trustee::Administrators
        } else {
            Trustee::Other(account_name(sid).or_else(|| sid_string(sid)).unwrap_or_else(|| "an unnamed SID".into()))
        }
    }
}

/// `DOMAIN\name` (LookupAccountSidW), None when the SID is not known here.
unsafe fn account_name(sid: PSID) -> Option<String> {
    let (mut name, mut domain) = ([0u16; 256], [0u16; 256]);
    let (mut name_len, mut domain_len, mut kind) = (256u32, 256u32, 0);
    // SAFETY: both buffers hold the lengths given; the SID is valid.
    let ok = unsafe {
        LookupAccountSidW(
            std::ptr::null(),
            sid,
            name.as_mut_ptr(),
            &mut name_len,
            domain.as_mut_ptr(),
            &mut domain_len,
            &mut kind,
        )
    };
    if ok == 0 {
        return None;
    }
    let name = String::from_utf16_lossy(&name[..name_len as usize]);
    let domain = String::from_utf16_lossy(&domain[..domain_len as usize]);
    Some(if domain.is_empty() { name } else { format!(r"{domain}\{name}") })
}

/// The SID as `S-1-...` (ConvertSidToStringSidW).
unsafe fn sid_string(sid: PSID) -> Option<String> {
    let mut text = std::ptr::null_mut::<u16>();
    // SAFETY: the SID is valid; the call allocates `text` for LocalFree.
    if unsafe { ConvertSidToStringSidW(sid, &mut text) } == 0 {
        return None;
    }
    // SAFETY: `text` is NUL-terminated.
    let len = (0..).take_while(|&i| unsafe { *text.add(i) } != 0).count();
    // SAFETY: `len` u16s before the NUL.
    let string = String::from_utf16_lossy(unsafe { std::slice::from_raw_parts(text, len) });
    // SAFETY: allocated by ConvertSidToStringSidW.
    unsafe { LocalFree(text.cast()) };
    Some(string)
}
