//! Whose fault each failure of headroom's NFS client is, against a real
//! server (nfs-ganesha in the lab NAS namespace): a missing export and a
//! directory the user may not write to are the user's (`Usage`, `Auth`), a
//! server killed under a running read is a lost connection. The client runs
//! in this process, on a thread moved into the NAS's client namespace, so
//! the test sees the typed error rather than only the exit code (2 for all).

use headroom_disk::{IoKind, IoUnit, Share, ShareIo, SyncMode, TargetOptions};
use headroom_lab::nas::nfs::nfs_lab_ready;
use headroom_lab::nas::Nas;
use headroom_proto::{ProtoError, ShareUrl};
use std::io;
use std::os::fd::AsRawFd;

/// Runs `f` on a thread inside `nas`'s client namespace (setns(2) moves only
/// the calling thread), as user `uid` when given: the raw setresuid(2)
/// changes only that thread's credentials, which libnfs's AUTH_SYS reads.
fn in_client<R: Send>(nas: &Nas, uid: Option<u32>, f: impl FnOnce() -> R + Send) -> R {
    let ns = std::fs::File::open(format!("/run/netns/{}", nas.client().name)).expect("the client namespace");
    std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: a namespace descriptor that stays open for the call; the
            // thread ends with the scope, so nothing else runs in its namespace.
            assert_eq!(unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) }, 0, "setns");
            if let Some(id) = uid {
                // SAFETY: raw syscalls on this thread's own credentials.
                unsafe {
                    assert_eq!(libc::syscall(libc::SYS_setresgid, id, id, id), 0, "setresgid");
                    assert_eq!(libc::syscall(libc::SYS_setresuid, id, id, id), 0, "setresuid");
                }
            }
            f()
        })
        .join()
        .expect("the client thread")
    })
}

/// Opens `target` with headroom's NFS client, as the disk engine would.
fn open(target: &str) -> Result<Box<dyn Share>, ProtoError> {
    let ShareUrl::Nfs(url) = ShareUrl::parse(target).expect("an nfs:// URL") else { panic!("{target}") };
    let opts = TargetOptions { default_size: 1 << 20, ..TargetOptions::default() };
    headroom_proto::nfs::open(&url, &opts, &[])
}

#[test]
fn a_missing_export_and_a_refused_write_are_the_users_a_killed_server_is_lost() {
    headroom_lab::require_root!();
    if !nfs_lab_ready() {
        return;
    }
    let (nas, export) = Nas::with_nfs_export().expect("lab NAS serving NFS");
    let addr = nas.addr();

    // No such export: the MOUNT list (NFSv3) and the NFSv4 namespace.
    for target in [format!("nfs://{addr}/no/such/export"), format!("nfs://{addr}/no/such/export?version=4")] {
        let e = in_client(&nas, None, || open(&target)).expect_err("no such export");
        eprintln!("{target}: {e:?}");
        assert!(matches!(&e, ProtoError::Usage(m) if m.contains("/no/such/export")), "{e:?}");
        assert!(headroom_disk::DiskError::from(e).is_usage());
    }

    // A user the exported directory (root's, 0755) does not let write: the
    // server refuses the create (NFS3ERR_ACCES, NFS4ERR_ACCESS).
    for target in [export.url.clone(), format!("{}?version=4", export.url)] {
        let e = in_client(&nas, Some(65534), || open(&target)).expect_err("not writable for nobody");
        eprintln!("{target} as uid 65534: {e:?}");
        assert!(
            matches!(&e, ProtoError::Auth(m) if m.contains("cannot create the test file") && m.contains("uid 65534")),
            "{e:?}"
        );
    }

    // A server killed under a worker's connection: the next read ends with
    // a lost connection, naming the server.
    let err = in_client(&nas, None, || {
        let share = open(&export.url).expect("the export opens");
        let io = ShareIo { write: false, sync: SyncMode::None, depth: 1, buf_size: 4096, job: 0 };
        let mut engine = share.connect(io).expect("a worker's connection");
        // SAFETY: a signal to the ganesha this test started.
        assert_eq!(unsafe { libc::kill(export.pid as i32, libc::SIGKILL) }, 0, "kill ganesha");
        std::thread::sleep(std::time::Duration::from_millis(300));
        let read = IoUnit { kind: IoKind::Read, offset: 0, len: 4096, buf_index: 0, tag: 1 };
        let result = headroom_disk::one_io(engine.as_mut(), read);
        drop(engine);
        drop(share);
        result
    })
    .expect_err("the server is gone");
    eprintln!("killed: {err}");
    assert_eq!(err.kind(), io::ErrorKind::ConnectionAborted, "{err}");
    assert!(err.to_string().contains(&format!("NFS server {addr}")), "{err}");
}
