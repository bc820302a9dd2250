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

/// `headroom cpu`'s settings.
fn cpu(s: headroom_cpu::Setting) -> &'static str {
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
    if let Some(headroom_flushcheck::FlushError::Net(e)) = e.downcast_ref() {
        return e.spelled(net);
    }
    if let Some(headroom_cpu::BadChoice(m)) = e.downcast_ref() {
        return m.spelled(cpu);
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
}
