//! Messages about a library's settings that leave the spelling of each
//! setting to the front end: a library knows it was given a queue depth of
//! 0, not that the command line calls it `--qd`.
//!
//! Owns [`Message`], the one shape every crate's `Invalid` error carries. It
//! must not know any crate's settings or any flag: each crate has its own
//! `Setting` enum, and the binary spells them when it prints.

use std::fmt;

/// One line for the user, made of text and the settings it names. The
/// front end renders it with [`Message::spelled`]; `Display` falls back on
/// the setting's own `Display` (a plain name such as "queue depth").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message<S> {
    parts: Vec<Part<S>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part<S> {
    Text(String),
    Setting(S),
}

impl<S: Copy> Message<S> {
    /// A message that starts by naming `setting`, as most do ("--qd 0 is ...").
    pub fn of(setting: S) -> Self {
        Message { parts: vec![Part::Setting(setting)] }
    }

    /// A message that starts with text.
    pub fn text(text: impl Into<String>) -> Self {
        Message { parts: vec![Part::Text(text.into())] }
    }

    /// Appends text.
    pub fn then(mut self, text: impl Into<String>) -> Self {
        self.parts.push(Part::Text(text.into()));
        self
    }

    /// Appends the name of a setting.
    pub fn and(mut self, setting: S) -> Self {
        self.parts.push(Part::Setting(setting));
        self
    }

    /// Appends another message (a reason built elsewhere).
    pub fn join(mut self, other: Message<S>) -> Self {
        self.parts.extend(other.parts);
        self
    }

    /// The settings named, in order; the first is what the message is about.
    pub fn settings(&self) -> impl Iterator<Item = S> + '_ {
        self.parts.iter().filter_map(|p| match p {
            Part::Setting(s) => Some(*s),
            Part::Text(_) => None,
        })
    }

    /// The line with each setting written as `spell` names it.
    pub fn spelled<N: AsRef<str>>(&self, spell: impl Fn(S) -> N) -> String {
        let mut line = String::new();
        for part in &self.parts {
            match part {
                Part::Text(t) => line.push_str(t),
                Part::Setting(s) => line.push_str(spell(*s).as_ref()),
            }
        }
        line
    }

    /// The same message about another crate's settings (a crate that wraps
    /// another's error keeps the setting typed).
    pub fn map<T>(self, f: impl Fn(S) -> T) -> Message<T> {
        let parts = self
            .parts
            .into_iter()
            .map(|p| match p {
                Part::Text(t) => Part::Text(t),
                Part::Setting(s) => Part::Setting(f(s)),
            })
            .collect();
        Message { parts }
    }
}

impl<S: Copy + fmt::Display> fmt::Display for Message<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.spelled(|s| s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::Message;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum S {
        Depth,
        Engine,
    }

    impl std::fmt::Display for S {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(match self {
                S::Depth => "queue depth",
                S::Engine => "engine",
            })
        }
    }

    #[test]
    fn the_front_end_spells_each_setting_where_it_is_named() {
        let m = Message::of(S::Depth)
            .then(" 0 is out of range (e.g. ")
            .and(S::Depth)
            .then(" 32, or another ")
            .and(S::Engine);
        let flag = |s| match s {
            S::Depth => "--qd",
            S::Engine => "--engine",
        };
        assert_eq!(m.spelled(flag), "--qd 0 is out of range (e.g. --qd 32, or another --engine");
        assert_eq!(m.to_string(), "queue depth 0 is out of range (e.g. queue depth 32, or another engine");
        assert_eq!(m.settings().collect::<Vec<_>>(), [S::Depth, S::Depth, S::Engine]);
        assert_eq!(Message::text("a ").join(m).map(|_| 1u8).settings().count(), 3);
    }
}
