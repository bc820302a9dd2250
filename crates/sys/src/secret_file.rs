//! Who besides its owner may read a secret file (`serve --token-file`,
//! `--credentials FILE`): one question for the binary and headroom-proto,
//! answered per platform in `os::secret_file` (Linux: the mode bits, judged
//! there; Windows: the file's owner and DACL, judged here).
//!
//! Windows' answer is judged here, over a platform-neutral list of the
//! DACL's entries ([`Ace`]), so the rule is unit-tested on every platform;
//! the Windows reader only turns the DACL into that list and names its SIDs.
//!
//! Owns the rule and the words of a refusal (with the command that fixes
//! it); reads nothing itself.

use std::path::Path;

/// Who else may read the file at `path`: `Ok(None)` when only its owner (and
/// the system) may; `Ok(Some(line))` naming who else may and the command
/// that makes it private ("mode 644 lets other users read it; run `chmod
/// 600 FILE`"); `Err` when it cannot be told (the caller refuses the file).
pub fn who_else_may_read(path: &Path) -> Result<Option<String>, String> {
    crate::os::secret_file::who_else_may_read(path)
}

/// Whom an ACE names, as far as the rule cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trustee {
    /// The file's owner (its owner SID, or OWNER RIGHTS, S-1-3-4).
    Owner,
    /// LocalSystem (S-1-5-18): the operating system itself.
    LocalSystem,
    /// BUILTIN\Administrators (S-1-5-32-544): may take any file anyway.
    Administrators,
    /// Anyone else, by name (`BUILTIN\Users`) or SID string (`S-1-5-21-...`).
    Other(String),
}

/// One entry of a file's DACL (ACE_HEADER's type and flags, the access mask, the SID).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ace {
    /// ACE_HEADER.AceType (ACCESS_ALLOWED_ACE_TYPE is 0).
    pub ace_type: u8,
    /// ACE_HEADER.AceFlags (INHERIT_ONLY_ACE, INHERITED_ACE).
    pub flags: u8,
    /// The access mask, generic rights not yet mapped.
    pub mask: u32,
    /// Whom it names; `None` for the entries the rule does not read the SID of (denies, object and callback ACEs).
    pub trustee: Option<Trustee>,
}

// winnt.h's values: ACE types and flags, and the file object's rights.
/// ACCESS_ALLOWED_ACE_TYPE.
pub const ACCESS_ALLOWED_ACE_TYPE: u8 = 0;
const ACCESS_DENIED_ACE_TYPE: u8 = 1;
const ACCESS_DENIED_OBJECT_ACE_TYPE: u8 = 6;
const ACCESS_DENIED_CALLBACK_ACE_TYPE: u8 = 10;
const ACCESS_DENIED_CALLBACK_OBJECT_ACE_TYPE: u8 = 12;
/// INHERIT_ONLY_ACE: the entry applies to children, not to this file.
pub const INHERIT_ONLY_ACE: u8 = 0x08;
/// INHERITED_ACE: the entry came from the parent directory.
pub const INHERITED_ACE: u8 = 0x10;
const FILE_READ_DATA: u32 = 0x0001;
const WRITE_DAC: u32 = 0x0004_0000;
const WRITE_OWNER: u32 = 0x0008_0000;
const MAXIMUM_ALLOWED: u32 = 0x0200_0000;
const GENERIC_ALL: u32 = 0x1000_0000;
const GENERIC_EXECUTE: u32 = 0x2000_0000;
const GENERIC_WRITE: u32 = 0x4000_0000;
const GENERIC_READ: u32 = 0x8000_0000;
// The file generic mapping (what MapGenericMask does with a file's GENERIC_MAPPING).
const FILE_GENERIC_READ: u32 = 0x0012_0089;
const FILE_GENERIC_WRITE: u32 = 0x0012_0116;
const FILE_GENERIC_EXECUTE: u32 = 0x0012_00A0;
const FILE_ALL_ACCESS: u32 = 0x001F_01FF;

/// `mask` with its generic rights replaced by the file rights they stand
/// for. MAXIMUM_ALLOWED is no right an ACE should hold; taken as all.
fn map_generic(mask: u32) -> u32 {
    let mut mapped = mask & !(GENERIC_ALL | GENERIC_EXECUTE | GENERIC_WRITE | GENERIC_READ | MAXIMUM_ALLOWED);
    for (generic, specific) in [
        (GENERIC_READ, FILE_GENERIC_READ),
        (GENERIC_WRITE, FILE_GENERIC_WRITE),
        (GENERIC_EXECUTE, FILE_GENERIC_EXECUTE),
        (GENERIC_ALL | MAXIMUM_ALLOWED, FILE_ALL_ACCESS),
    ] {
        if mask & generic != 0 {
            mapped |= specific;
        }
    }
    mapped
}

fn is_deny(ace_type: u8) -> bool {
    matches!(
        ace_type,
        ACCESS_DENIED_ACE_TYPE
            | ACCESS_DENIED_OBJECT_ACE_TYPE
            | ACCESS_DENIED_CALLBACK_ACE_TYPE
            | ACCESS_DENIED_CALLBACK_OBJECT_ACE_TYPE
    )
}

/// The Windows rule over a file's DACL (`None`: a NULL DACL, which lets
/// everyone in). Deny entries are skipped: they can only take access away,
/// and a deny for one SID never makes an allow for another safe, so judging
/// the allow entries alone can refuse a file that is private in fact (an
/// allow for Users under a deny for Users) but never takes an exposed one.
/// INHERIT_ONLY_ACE entries do not apply to the file itself. An allow to
/// anyone but the owner, LocalSystem or Administrators that lets them read
/// the data (FILE_READ_DATA after the generic mapping) or change who may
/// (WRITE_DAC, WRITE_OWNER) exposes the file. Object and callback allow
/// entries carry conditions this rule does not weigh: cannot tell.
/// `shown` is the file as the fix should name it.
pub fn judge_dacl(dacl: Option<&[Ace]>, shown: &str) -> Result<Option<String>, String> {
    let Some(aces) = dacl else {
        return Ok(Some(format!(
            "it has no access list (a NULL DACL), so everyone may read it; run {}",
            icacls_fix(shown, &[])
        )));
    };
    let mut readers = Vec::new();
    let mut changers = Vec::new();
    let mut explicit = Vec::new();
    for ace in aces {
        if ace.flags & INHERIT_ONLY_ACE != 0 || is_deny(ace.ace_type) {
            continue;
        }
        if ace.ace_type != ACCESS_ALLOWED_ACE_TYPE {
            return Err(format!(
                "who may read it cannot be told: its access list holds an entry of type {} (an object or conditional ACE), which headroom does not judge; run {}",
                ace.ace_type,
                icacls_fix(shown, &[])
            ));
        }
        let Some(Trustee::Other(name)) = &ace.trustee else { continue };
        let mask = map_generic(ace.mask);
        let list = if mask & FILE_READ_DATA != 0 {
            &mut readers
        } else if mask & (WRITE_DAC | WRITE_OWNER) != 0 {
            &mut changers
        } else {
            continue;
        };
        if !list.contains(name) {
            list.push(name.clone());
        }
        if ace.flags & INHERITED_ACE == 0 && !explicit.contains(name) {
            explicit.push(name.clone());
        }
    }
    let mut who = Vec::new();
    if !readers.is_empty() {
        who.push(format!("{} may read it", readers.join(", ")));
    }
    if !changers.is_empty() {
        who.push(format!("{} may change who reads it", changers.join(", ")));
    }
    Ok((!who.is_empty()).then(|| format!("{}; run {}", who.join(" and "), icacls_fix(shown, &explicit))))
}

/// The icacls command (cmd's syntax) that leaves the file to its user:
/// drop the inherited entries, give the user read alone, remove the
/// entries set on the file itself for `explicit`.
fn icacls_fix(shown: &str, explicit: &[String]) -> String {
    let removes: String = explicit.iter().map(|name| format!(" /remove:g \"{name}\"")).collect();
    format!("`icacls \"{shown}\" /inheritance:r /grant:r \"%USERNAME%:R\"{removes}`")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow(trustee: Trustee, flags: u8, mask: u32) -> Ace {
        Ace { ace_type: ACCESS_ALLOWED_ACE_TYPE, flags, mask, trustee: Some(trustee) }
    }

    fn users() -> Trustee {
        Trustee::Other(r"BUILTIN\Users".into())
    }

    #[test]
    fn owner_system_and_administrators_alone_keep_it_private() {
        let dacl = [
            allow(Trustee::Owner, 0, FILE_ALL_ACCESS),
            allow(Trustee::LocalSystem, INHERITED_ACE, GENERIC_ALL),
            allow(Trustee::Administrators, INHERITED_ACE, FILE_ALL_ACCESS),
        ];
        assert_eq!(judge_dacl(Some(&dacl), "C:\\t"), Ok(None));
        assert_eq!(judge_dacl(Some(&[]), "C:\\t"), Ok(None), "an empty DACL lets no one in");
    }

    #[test]
    fn an_inherited_read_for_users_is_refused_with_the_fix() {
        // What a file under C:\ gets by default: Users read and execute, inherited.
        let dacl = [allow(Trustee::Owner, 0, FILE_ALL_ACCESS), allow(users(), INHERITED_ACE, 0x1200A9)];
        let line = judge_dacl(Some(&dacl), r"C:\hr\token").unwrap().unwrap();
        assert_eq!(
            line,
            r#"BUILTIN\Users may read it; run `icacls "C:\hr\token" /inheritance:r /grant:r "%USERNAME%:R"`"#
        );
    }

    #[test]
    fn generic_rights_are_mapped_before_judging() {
        for (mask, exposed) in [
            (GENERIC_READ, true),
            (GENERIC_ALL, true),
            (MAXIMUM_ALLOWED, true),
            (FILE_READ_DATA, true),
            (GENERIC_EXECUTE, false),
            (GENERIC_WRITE, false),
            (0x0080, false), // FILE_READ_ATTRIBUTES only
        ] {
            let dacl = [allow(Trustee::Other("Everyone".into()), 0, mask)];
            let judged = judge_dacl(Some(&dacl), "t").unwrap();
            assert_eq!(judged.is_some(), exposed, "mask {mask:#x}: {judged:?}");
        }
    }

    #[test]
    fn an_explicit_entry_is_removed_by_name_and_write_dac_counts() {
        let dacl = [allow(Trustee::Other("HOST\\bob".into()), 0, WRITE_DAC)];
        let line = judge_dacl(Some(&dacl), "t").unwrap().unwrap();
        assert!(line.starts_with("HOST\\bob may change who reads it; run "), "{line}");
        assert!(line.ends_with(r#"/remove:g "HOST\bob"`"#), "{line}");
    }

    #[test]
    fn inherit_only_and_deny_entries_do_not_count() {
        let dacl = [
            allow(users(), INHERIT_ONLY_ACE, GENERIC_READ),
            Ace { ace_type: ACCESS_DENIED_ACE_TYPE, flags: 0, mask: GENERIC_ALL, trustee: None },
        ];
        assert_eq!(judge_dacl(Some(&dacl), "t"), Ok(None));
        // A deny for Users leaves Everyone's allow standing.
        let dacl = [
            Ace { ace_type: ACCESS_DENIED_ACE_TYPE, flags: 0, mask: GENERIC_ALL, trustee: None },
            allow(Trustee::Other("Everyone".into()), 0, GENERIC_READ),
        ];
        assert!(judge_dacl(Some(&dacl), "t").unwrap().unwrap().starts_with("Everyone may read it"));
    }

    #[test]
    fn a_null_dacl_is_refused_and_a_callback_allow_cannot_be_told() {
        assert!(judge_dacl(None, "t").unwrap().unwrap().contains("NULL DACL"));
        let callback = Ace { ace_type: 9, flags: 0, mask: GENERIC_READ, trustee: None };
        let err = judge_dacl(Some(&[callback]), "t").unwrap_err();
        assert!(err.contains("cannot be told") && err.contains("type 9"), "{err}");
    }
}
