//! The one macro for enums written as words in documents (and in the soak
//! database): each variant and its word are listed once, and the word, the
//! parse and `Display` come from that list. Owns no enum itself; must not
//! decide what a word means.

/// Declares an enum whose variants are stored as words.
///
/// `Name { Variant = "word", ... }`: a closed list (`Copy`, serde words,
/// `as_str`, `FromStr` refusing an unknown word, `Display`).
///
/// `open Name { Variant = "word", ... }`: a list a newer headroom may extend
/// (an unknown word is kept as `Other(word)` and written back unchanged;
/// `as_str`, `From<&str>`/`From<String>`, `Display`, serde as the word, and
/// comparison with a word; a field of this type takes
/// `#[schemars(with = "String")]`, since the list is open).
macro_rules! words_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $word:literal,)+ }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
        pub enum $name {
            $($(#[$vdoc])* #[serde(rename = $word)] $variant,)+
        }

        words_enum!(@words $name { $($variant = $word,)+ });

        impl $name {
            /// The word documents and the soak database use.
            pub fn as_str(self) -> &'static str {
                self.known_word().expect("every variant of a closed list has a word")
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                $name::from_known_word(s).ok_or_else(|| format!("'{s}' is not a {}", stringify!($name)))
            }
        }
    };
    ($(#[$doc:meta])* open $name:ident { $($(#[$vdoc:meta])* $variant:ident = $word:literal,)+ }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)+
            /// A word this version does not know, kept as written.
            Other(String),
        }

        words_enum!(@words $name { $($variant = $word,)+ });

        impl $name {
            /// The word written in documents.
            pub fn as_str(&self) -> &str {
                match self {
                    $name::Other(word) => word,
                    known => known.known_word().expect("every listed variant has a word"),
                }
            }
        }

        impl From<&str> for $name {
            fn from(word: &str) -> Self {
                $name::from_known_word(word).unwrap_or_else(|| $name::Other(word.to_string()))
            }
        }

        impl From<String> for $name {
            fn from(word: String) -> Self {
                $name::from(word.as_str())
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> Self {
                value.as_str().to_string()
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                String::deserialize(d).map($name::from)
            }
        }
    };
    (@words $name:ident { $($variant:ident = $word:literal,)+ }) => {
        impl $name {
            /// The listed word of a variant (None only for `Other`).
            fn known_word(&self) -> Option<&'static str> {
                match self {
                    $($name::$variant => Some($word),)+
                    #[allow(unreachable_patterns)]
                    _ => None,
                }
            }

            /// The listed variant of a word.
            fn from_known_word(word: &str) -> Option<Self> {
                match word {
                    $($word => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
