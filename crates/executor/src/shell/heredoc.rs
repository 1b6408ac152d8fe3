//! The word after `<<`: where it ends, the delimiter it stands for, and
//! whether the heredoc's body is text.
//!
//! A value goes into a quoted heredoc's body as it is, so the lexer must
//! agree with bash on the delimiter exactly: were it to think a heredoc
//! still open after bash had closed it, a value would land in code. Bash
//! reads the word with the full shell grammar (quotes that span lines,
//! expansions that are kept unexpanded); this reads only words it can read
//! exactly as bash does, and says so when it cannot.

/// What the word after `<<` is.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Word {
    /// A word read exactly: where it ends, its delimiter, and whether any
    /// part was quoted (then the body is text).
    Plain {
        end: usize,
        delimiter: String,
        quoted: bool,
    },
    /// No word (a syntax error for bash).
    Missing,
    /// Shell syntax beyond plain characters and closed quotes: where the
    /// heredoc ends, and whether its body is text, is not known.
    Unclear,
}

/// Reads the word that starts at `start` (blanks after `<<` skipped).
pub(super) fn word(script: &str, start: usize) -> Word {
    let bytes = script.as_bytes();
    let mut i = start;
    let mut delimiter = String::new();
    let mut quoted = false;
    while let Some(&byte) = bytes.get(i) {
        match byte {
            b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'<' | b'>' | b'(' | b')' => break,
            b'\'' | b'"' => {
                let Some(length) = script[i + 1..].find(char::from(byte)) else {
                    return Word::Unclear;
                };
                let inner = &script[i + 1..i + 1 + length];
                if !inner.bytes().all(|b| plain(b) || b == b' ') {
                    return Word::Unclear;
                }
                delimiter.push_str(inner);
                quoted = true;
                i += length + 2;
            }
            b'\\' => match bytes.get(i + 1) {
                Some(&next) if plain(next) => {
                    delimiter.push(char::from(next));
                    quoted = true;
                    i += 2;
                }
                _ => return Word::Unclear,
            },
            _ if plain(byte) => {
                delimiter.push(char::from(byte));
                i += 1;
            }
            _ => return Word::Unclear,
        }
    }
    if i == start {
        return Word::Missing;
    }
    Word::Plain {
        end: i,
        delimiter,
        quoted,
    }
}

/// Characters that mean themselves in a word, quoted or not.
fn plain(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"_.,:@%+=/-".contains(&byte)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain_word(script: &str) -> (String, bool, &str) {
        match word(script, 0) {
            Word::Plain {
                end,
                delimiter,
                quoted,
            } => (delimiter, quoted, &script[end..]),
            other => panic!("{script:?}: {other:?}"),
        }
    }

    #[test]
    fn reads_the_words_bash_reads() {
        assert_eq!(plain_word("EOF\n"), ("EOF".to_owned(), false, "\n"));
        assert_eq!(plain_word("'EOF' > f"), ("EOF".to_owned(), true, " > f"));
        assert_eq!(plain_word("\"EOF\";"), ("EOF".to_owned(), true, ";"));
        assert_eq!(plain_word("\\EOF|x"), ("EOF".to_owned(), true, "|x"));
        assert_eq!(plain_word("E'O'F"), ("EOF".to_owned(), true, ""));
        assert_eq!(
            plain_word("'END OF TEXT'\n"),
            ("END OF TEXT".to_owned(), true, "\n")
        );
        assert_eq!(plain_word("a-b.c_1)"), ("a-b.c_1".to_owned(), false, ")"));
    }

    #[test]
    fn anything_else_is_unclear() {
        for script in [
            "\"\n\"",
            "'EOF",
            "'a\"b'",
            "\"a\\\"b\"",
            "$X",
            "$(x)",
            "`x`",
            "E{x}",
            "\\\nEOF",
            "é",
            "'$x'",
        ] {
            assert_eq!(word(script, 0), Word::Unclear, "{script:?}");
        }
        assert_eq!(word("\n", 0), Word::Missing);
        assert_eq!(word("", 0), Word::Missing);
    }
}
