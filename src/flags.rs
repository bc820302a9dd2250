//! The command line's spelling of the libraries' settings: the crates name
//! a setting in their errors ([`headroom_units::setting::Message`]) and this
//! module writes it as the flag that sets it, when the error is printed.
//!
//! Owns the setting-to-flag tables and the one function that turns an error
//! into its printed line. Must not hold messages: the wording stays with the
//! crate that refuses.

use std::error::Error;

/// `headroom disk` / `run`'s disk settings (also in `serve`'s refusals of a
/// client's disk plan: the client's flags).
pub fn disk(s: headroom_disk::Setting) -> &'static str {
    use headroom_disk::Setting::*;
    match s {
        Preset => "--preset",
        TestSpec => "--test",
        Rw => "--rw",
        BlockSize => "--bs",
        QueueDepth => "--qd",
        Jobs => "--jobs",
        Time => "--time",
        Ramp => "--ramp",
        SampleInterval => "--sample-interval",
        Size => "--size",
        RwMix => "--rwmix",
        Sync => "--sync",
        Engine => "--engine",
        FixedBufs => "--fixedbufs",
        Destructive => "--destructive",
        Force => "--force",
        Keep => "--keep",
        Direct => "--direct",
        Credentials => "--credentials",
        IscsiKeys => "--iscsi",
        ServerAllowPath => "--allow-path",
    }
}

/// `headroom serve`'s listening, client and limit settings, in refusals
/// sent to clients and in its log lines.
pub fn serve(s: headroom_net::ServerSetting) -> &'static str {
    use headroom_net::ServerSetting::*;
    match s {
        Bind => "--bind",
        Port => "--port",
        Token => "--token",
        NoAuth => "--no-auth",
        MaxClients => "--max-clients",
        MaxDuration => "--max-duration",
        Iperf3 => "--iperf3",
        Iperf2 => "--iperf2",
        FlushcheckDir => "--flushcheck-dir",
    }
}

/// `headroom serve`'s far-end settings: what clients' probes may use.
pub fn far_end(s: headroom_job::ServeSetting) -> &'static str {
    use headroom_job::ServeSetting::*;
    match s {
        AllowPath => "--allow-path",
        AllowNetTo => "--allow-net-to",
        MaxJobs => "--max-jobs",
        MaxBufferMemory => "--max-buffer-memory",
        MaxDuration => "--max-duration",
    }
}

/// `headroom net`'s (and `run`'s, `ping`'s) network test settings, in
/// errors and in the warnings of the document.
pub fn net(s: headroom_net::NetSetting) -> &'static str {
    use headroom_net::NetSetting::*;
    match s {
        Protocol => "--protocol",
        Token => "--token",
        Tests => "--tests",
        Time => "--time",
        Bytes => "--bytes",
        Window => "--window",
    }
}

/// Every table, for a job that names settings of several libraries.
pub const SPELLING: headroom_job::Spelling = headroom_job::Spelling { disk, net, serve };

/// `headroom cpu`'s settings (also in `serve`'s refusals of a client's CPU
/// probe: the client's flags).
pub fn cpu(s: headroom_cpu::Setting) -> &'static str {
    use headroom_cpu::Setting::*;
    match s {
        Kernels => "--kernels",
        Threads => "--threads",
        Size => "--size",
        Time => "--time",
    }
}

/// `headroom soak`'s settings.
fn soak(s: headroom_soak::Setting) -> &'static str {
    use headroom_soak::Setting::*;
    match s {
        Duration => "--duration",
        ProbeTime => "--probe-time",
        Cycle => "--cycle",
        Server => "--server",
        Path => "--path",
        RemotePath => "--remote-path",
        Size => "--size",
        ServerAllowPath => "--allow-path",
        Db => "--db",
        Resume => "--resume",
    }
}

/// `headroom flushcheck`'s settings.
fn flushcheck(s: headroom_flushcheck::Setting) -> &'static str {
    match s {
        headroom_flushcheck::Setting::Block => "--block",
    }
}

/// `headroom link`'s framing settings.
fn framing(s: headroom_limits::FramingSetting) -> &'static str {
    use headroom_limits::FramingSetting::*;
    match s {
        Mtu => "--mtu",
        VlanTags => "--vlan-tags",
        IscsiSegment => "--iscsi-segment",
    }
}

/// The analysis's settings: goals (`run`, `disk`, `net`, `soak`, `fleet`)
/// and the link (`run`, `net`, `cpu`).
fn analysis(s: headroom_analysis::Setting) -> &'static str {
    match s {
        headroom_analysis::Setting::Goal => "--goal",
        headroom_analysis::Setting::Link => "--link",
    }
}

/// An error's own line (its causes are separate links of the chain), with
/// the settings a library names spelled as flags.
pub fn line(e: &(dyn Error + 'static)) -> String {
    if let Some(e) = e.downcast_ref::<headroom_disk::DiskError>() {
        return e.spelled(disk);
    }
    if let Some(headroom_job::JobError::Invalid(m)) = e.downcast_ref() {
        return m.spelled(disk);
    }
    if let Some(f) = e.downcast_ref::<headroom_soak::FlagError>() {
        return f.message().spelled(soak);
    }
    if let Some(headroom_soak::SetupError::Flag(f)) = e.downcast_ref() {
        return f.message().spelled(soak);
    }
    if let Some(s) = e.downcast_ref::<headroom_soak::StoreError>() {
        return s.message().spelled(soak);
    }
    if let Some(headroom_soak::SetupError::Store(s)) = e.downcast_ref() {
        return s.message().spelled(soak);
    }
    if let Some(headroom_fleet::HostsError(m)) = e.downcast_ref() {
        return m.spelled(|headroom_fleet::Setting::Hosts| "--hosts");
    }
    if let Some(headroom_net::SourceError(m)) = e.downcast_ref() {
        return m.spelled(source);
    }
    if let Some(headroom_proto::CredentialsError(m)) = e.downcast_ref() {
        return m.spelled(|headroom_proto::CredentialsSetting::File| "--credentials");
    }
    if let Some(headroom_job::ServeSettingError(m)) = e.downcast_ref() {
        return m.spelled(far_end);
    }
    if let Some(headroom_net::ServerSettingError(m)) = e.downcast_ref() {
        return m.spelled(serve);
    }
    if let Some(e) = e.downcast_ref::<headroom_net::NetError>() {
        return e.spelled(net);
    }
    if let Some(e) = e.downcast_ref::<headroom_flushcheck::FlushError>() {
        return e.spelled(headroom_flushcheck::Spelling { own: flushcheck, disk, net });
    }
    if let Some(headroom_cpu::BadChoice(m)) = e.downcast_ref() {
        return m.spelled(cpu);
    }
    if let Some(f) = e.downcast_ref::<headroom_limits::FramingError>() {
        return f.spelled(framing);
    }
    if let Some(g) = e.downcast_ref::<headroom_analysis::GoalError>() {
        return g.message().spelled(analysis);
    }
    if let Some(l) = e.downcast_ref::<headroom_analysis::BadLinkSpec>() {
        return l.message().spelled(analysis);
    }
    e.to_string()
}

/// `--bind` and `--interface`: where this machine's connections leave from
/// (also registered with headroom-net at start, for its connections' errors).
pub fn source(setting: headroom_net::SourceSetting) -> &'static str {
    match setting {
        headroom_net::SourceSetting::Bind => "--bind",
        headroom_net::SourceSetting::Interface => "--interface",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_library_error_prints_with_the_flag_of_each_setting_it_names() {
        let e = headroom_disk::resolve(&headroom_disk::TestChoice {
            preset: Some("cdm".into()),
            qd: Some(4),
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(
            line(&e),
            "--qd defines a custom test and cannot be combined with --preset cdm; drop one of them \
             (e.g. `headroom disk PATH --rw randread --bs 4k --qd 32`)"
        );
    }

    /// Each library's error, with the flags it names, as `Output::error` prints it.
    #[test]
    fn each_librarys_new_settings_print_as_their_flags() {
        use headroom_units::setting::Message;

        // headroom-proto: a share refusing a disk setting, at open and at a worker's connect.
        let size = headroom_proto::ProtoError::Invalid(
            Message::text("nbd://h/e: ").and(headroom_disk::Setting::Size).then(" is smaller than one block"),
        );
        assert_eq!(line(&headroom_disk::DiskError::from(size)), "nbd://h/e: --size is smaller than one block");
        let sync = headroom_proto::ProtoError::Invalid(Message::of(headroom_disk::Setting::Sync).then(" dsync"));
        let connect = headroom_disk::DiskError::io("cannot connect", std::io::Error::from(sync));
        assert_eq!(line(&connect), "cannot connect: --sync dsync");
        let keys = "InitialR2T".parse::<headroom_proto::IscsiKeys>().unwrap_err();
        assert!(line(&keys).contains("(e.g. --iscsi MaxOutstandingR2T=1"), "{}", line(&keys));

        // headroom-soak: a database that already holds a soak.
        let started = headroom_soak::StoreError::AlreadyStarted { path: "s.db".into() };
        assert_eq!(
            line(&started),
            "s.db: already holds a soak; add --resume to continue it, or choose another --db file"
        );

        // headroom-limits: link's framing.
        assert!(line(&headroom_limits::FramingError::Mtu(100)).starts_with("--mtu 100 is out of range"));

        // headroom-flushcheck: its own block size, and a share's refusal inside an io::Error.
        let block = headroom_flushcheck::FlushError::Invalid {
            path: "nbd://h/e".into(),
            reason: Message::text("blocks are 4096 bytes and ")
                .and(headroom_flushcheck::Setting::Block)
                .then(" 512 is not"),
        };
        assert_eq!(line(&block), "nbd://h/e: blocks are 4096 bytes and --block 512 is not");

        // headroom-analysis: goals and links.
        let goal = headroom_analysis::parse_goals("speed=1").unwrap_err();
        assert!(line(&goal).starts_with("--goal 'speed=1': unknown metric 'speed'"), "{}", line(&goal));
        let link = headroom_analysis::LinkSpec::parse("7gbe").unwrap_err();
        assert!(line(&link).starts_with("--link '7gbe' is neither"), "{}", line(&link));

        // headroom-cpu: a far end refusing a client's CPU probe in the client's words.
        let kernel = headroom_cpu::all_kernels().remove(0);
        let buffer = headroom_cpu::BufferSpec { bytes: 1 << 20, cache_resident: false };
        let request = headroom_cpu::CpuRequest::new(kernel, 1, buffer, std::time::Duration::ZERO, Default::default());
        let refused = request.check(cpu).unwrap_err();
        assert!(refused.to_string().contains("--time 0.000s is out of range"), "{refused}");

        // headroom-net's source settings: an NFS client's refusal in the registered words.
        headroom_net::spell_source_settings(source);
        let bind = Message::of(headroom_net::SourceSetting::Interface);
        assert_eq!(headroom_net::spelled_source(&bind), "--interface");
    }
}
