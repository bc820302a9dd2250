//! The settings analysis's errors name (a goal list, a link): the front end
//! spells them as its flags, this crate never does.

use std::fmt;

/// What an analysis is given by the user, as an error names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// The goals held against the figures ([`crate::GoalError`]).
    Goal,
    /// The narrowest link between the ends ([`crate::BadLinkSpec`]).
    Link,
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Setting::Goal => "goal",
            Setting::Link => "link",
        })
    }
}
