//! Rewrites of a statement's tokens before sqlparser parses them, for PostgreSQL syntax that
//! sqlparser reads only in part.
//!
//! - The options of `GENERATED ... AS IDENTITY ( ... )`: PostgreSQL takes them in any order
//!   (pg_dump writes `START WITH 1 INCREMENT BY 1 NO MINVALUE NO MAXVALUE CACHE 1`); sqlparser
//!   takes them only in the order INCREMENT, MINVALUE, MAXVALUE, START, CACHE, CYCLE. They are put
//!   in that order (an option sqlparser does not know leaves the list as written, for its error).
//! - `FETCH FIRST (n) ROWS ONLY`: PostgreSQL takes the count in parentheses (SQLAlchemy writes
//!   `FETCH FIRST (%(param)s) ROWS ONLY`); sqlparser only without them. Parentheses around a
//!   single number or parameter there are dropped; an expression in them, `FETCH FIRST (1 + 1)
//!   ROWS ONLY`, is read as `LIMIT (1 + 1)`, which means the same.
//! - A window frame's offset written as a cast, `RANGE BETWEEN '7 days'::interval PRECEDING`
//!   (psycopg's form of a Python timedelta): sqlparser reads a quoted offset as an interval
//!   literal only, so it becomes `INTERVAL '7 days' PRECEDING`.

use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Whitespace};

/// The tokens with each identity option list in the order sqlparser reads, and FETCH counts
/// without their parentheses.
pub fn canonical(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    frame_intervals(fetch_counts(identity_options(tokens)))
}

/// `'...'::interval PRECEDING|FOLLOWING` as `INTERVAL '...' PRECEDING|FOLLOWING`.
fn frame_intervals(mut tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    if !tokens.iter().any(|t| is_word(&t.token, "PRECEDING") || is_word(&t.token, "FOLLOWING")) {
        return tokens;
    }
    let significant: Vec<usize> =
        tokens.iter().enumerate().filter(|(_, t)| !matches!(t.token, Token::Whitespace(_))).map(|(i, _)| i).collect();
    let mut dropped = std::collections::HashSet::new();
    for window in significant.windows(4) {
        let [text, colons, interval, bound] = window else { continue };
        let token = |i: &usize| tokens.get(*i).map(|t| &t.token);
        let quoted = matches!(token(text), Some(Token::SingleQuotedString(_)));
        let bound_word = token(bound).is_some_and(|t| is_word(t, "PRECEDING") || is_word(t, "FOLLOWING"));
        if quoted
            && token(colons) == Some(&Token::DoubleColon)
            && token(interval).is_some_and(|t| is_word(t, "INTERVAL"))
            && bound_word
        {
            dropped.insert((*text, *colons, *interval));
        }
    }
    if dropped.is_empty() {
        return tokens;
    }
    for (text, colons, interval) in &dropped {
        // INTERVAL, a blank, 'text' in the places of 'text', ::, interval.
        let literal = tokens.get(*text).map(|t| t.token.clone());
        if let (Some(literal), Some(slot)) = (literal, tokens.get_mut(*interval)) {
            slot.token = literal;
        }
        if let Some(slot) = tokens.get_mut(*text) {
            slot.token = Token::make_keyword("INTERVAL");
        }
        if let Some(slot) = tokens.get_mut(*colons) {
            slot.token = Token::Whitespace(Whitespace::Space);
        }
    }
    tokens
}

/// `FETCH FIRST|NEXT ( n ) ROW|ROWS` as `FETCH FIRST|NEXT n ROW|ROWS`, for a number or parameter n.
fn fetch_counts(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    if !tokens.iter().any(|t| is_word(&t.token, "FETCH")) {
        return tokens;
    }
    let significant: Vec<usize> =
        tokens.iter().enumerate().filter(|(_, t)| !matches!(t.token, Token::Whitespace(_))).map(|(i, _)| i).collect();
    let mut dropped = std::collections::HashSet::new();
    for window in significant.windows(6) {
        let [fetch, first, open, value, close, rows] = window else { continue };
        let token = |i: &usize| tokens.get(*i).map(|t| &t.token);
        let word = |i: &usize, words: &[&str]| token(i).is_some_and(|t| words.iter().any(|w| is_word(t, w)));
        let count = matches!(token(value), Some(Token::Number(..) | Token::Placeholder(_)));
        if word(fetch, &["FETCH"])
            && word(first, &["FIRST", "NEXT"])
            && token(open) == Some(&Token::LParen)
            && count
            && token(close) == Some(&Token::RParen)
            && word(rows, &["ROW", "ROWS"])
        {
            dropped.insert(*open);
            dropped.insert(*close);
        }
    }
    // `FETCH FIRST|NEXT ( expression ) ROW|ROWS ONLY` as `LIMIT ( expression )`.
    let mut limits = Vec::new();
    for (at, start) in significant.iter().enumerate() {
        let token = |k: usize| significant.get(k).and_then(|i| tokens.get(*i)).map(|t| &t.token);
        let word = |k: usize, words: &[&str]| token(k).is_some_and(|t| words.iter().any(|w| is_word(t, w)));
        if !(word(at, &["FETCH"]) && word(at + 1, &["FIRST", "NEXT"]) && token(at + 2) == Some(&Token::LParen)) {
            continue;
        }
        if dropped.contains(significant.get(at + 2).unwrap_or(start)) {
            continue;
        }
        let mut depth = 0usize;
        let mut close = None;
        for k in at + 2..significant.len() {
            match token(k) {
                Some(Token::LParen) => depth += 1,
                Some(Token::RParen) => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        close = Some(k);
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(close) = close else { continue };
        if word(close + 1, &["ROW", "ROWS"]) && word(close + 2, &["ONLY"]) {
            limits.push(*start);
            for k in [at + 1, close + 1, close + 2] {
                dropped.extend(significant.get(k).copied());
            }
        }
    }
    if dropped.is_empty() {
        return tokens;
    }
    tokens
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !dropped.contains(i))
        .map(|(i, mut t)| {
            if limits.contains(&i) {
                t.token = Token::make_keyword("LIMIT");
            }
            t
        })
        .collect()
}

/// The tokens with each identity option list in the order sqlparser reads.
fn identity_options(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    if !tokens.iter().any(|t| is_word(&t.token, "IDENTITY")) {
        return tokens;
    }
    let mut out = Vec::with_capacity(tokens.len());
    let mut rest = tokens.into_iter().peekable();
    while let Some(token) = rest.next() {
        let is_identity = is_word(&token.token, "IDENTITY");
        out.push(token);
        if !is_identity {
            continue;
        }
        // Whitespace, then `(`: the option list follows.
        while rest.peek().is_some_and(|t| matches!(t.token, Token::Whitespace(_))) {
            out.extend(rest.next());
        }
        if rest.peek().is_none_or(|t| t.token != Token::LParen) {
            continue;
        }
        out.extend(rest.next());
        let mut inner = Vec::new();
        let mut depth = 0usize;
        while let Some(next) = rest.peek() {
            match next.token {
                Token::RParen if depth == 0 => break,
                Token::LParen => depth += 1,
                Token::RParen => depth -= 1,
                Token::EOF => break,
                _ => {}
            }
            inner.extend(rest.next());
        }
        out.extend(reordered(inner));
    }
    out
}

fn is_word(token: &Token, word: &str) -> bool {
    matches!(token, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word))
}

/// Where sqlparser reads an option that starts with `first` (and `second`, after NO).
fn rank(first: &Token, second: Option<&Token>) -> Option<u8> {
    let word = |w: &str| is_word(first, w);
    if word("NO") {
        let second = second?;
        return [("MINVALUE", 1), ("MAXVALUE", 2), ("CYCLE", 5)]
            .iter()
            .find(|(w, _)| is_word(second, w))
            .map(|(_, rank)| *rank);
    }
    [("INCREMENT", 0), ("MINVALUE", 1), ("MAXVALUE", 2), ("START", 3), ("CACHE", 4), ("CYCLE", 5)]
        .iter()
        .find(|(w, _)| word(w))
        .map(|(_, rank)| *rank)
}

/// The options (the tokens inside the parentheses) in sqlparser's order, or as they were.
fn reordered(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let words: Vec<&TokenWithSpan> = tokens.iter().filter(|t| !matches!(t.token, Token::Whitespace(_))).collect();
    // Each option: its rank and its tokens (from its first word to the next option's).
    let mut options: Vec<(u8, Vec<TokenWithSpan>)> = Vec::new();
    let mut i = 0;
    while let Some(first) = words.get(i) {
        let second = words.get(i + 1);
        match rank(&first.token, second.map(|t| &t.token)) {
            Some(r) => {
                let mut option = vec![(*first).clone()];
                if is_word(&first.token, "NO") {
                    option.extend(second.map(|t| (*t).clone()));
                    i += 1;
                }
                options.push((r, option));
            }
            // A value, or BY / WITH, of the option before.
            None => match options.last_mut() {
                Some(last) => last.1.push((*first).clone()),
                None => return tokens,
            },
        }
        i += 1;
    }
    // An option given twice stays as written: sqlparser reports it.
    let mut ranks: Vec<u8> = options.iter().map(|(r, _)| *r).collect();
    ranks.sort_unstable();
    ranks.dedup();
    if ranks.len() != options.len() {
        return tokens;
    }
    options.sort_by_key(|(r, _)| *r);
    let mut out = Vec::with_capacity(tokens.len());
    for (_, option) in options {
        for token in option {
            out.push(token);
            out.push(TokenWithSpan::wrap(Token::Whitespace(Whitespace::Space)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::tokenizer::Tokenizer;

    use super::*;
    use crate::syntax::dialect::SluiceDialect;

    fn rewritten(sql: &str) -> String {
        let tokens = Tokenizer::new(&SluiceDialect::default(), sql).tokenize_with_location().unwrap();
        canonical(tokens)
            .iter()
            .map(|t| t.token.to_string())
            .collect::<String>()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn identity_options_take_sqlparsers_order() {
        assert_eq!(
            rewritten(
                "CREATE TABLE t (id int GENERATED BY DEFAULT AS IDENTITY (START WITH 100 INCREMENT BY 10), v int)"
            ),
            "CREATE TABLE t (id int GENERATED BY DEFAULT AS IDENTITY (INCREMENT BY 10 START WITH 100 ), v int)"
        );
        assert_eq!(
            rewritten("x IDENTITY (START WITH 1 INCREMENT BY 1 NO MINVALUE NO MAXVALUE CACHE 1)"),
            "x IDENTITY (INCREMENT BY 1 NO MINVALUE NO MAXVALUE START WITH 1 CACHE 1 )"
        );
        // Unknown options are left for sqlparser to report.
        assert_eq!(rewritten("x IDENTITY (SEQUENCE NAME s START WITH 1)"), "x IDENTITY (SEQUENCE NAME s START WITH 1)");
        assert_eq!(rewritten("x IDENTITY, y"), "x IDENTITY, y");
    }

    #[test]
    fn frame_offsets_cast_to_interval_are_interval_literals() {
        assert_eq!(
            rewritten(
                "sum(v) OVER (ORDER BY d RANGE BETWEEN '7 days 0.000000 seconds'::interval PRECEDING AND CURRENT ROW)"
            ),
            "sum(v) OVER (ORDER BY d RANGE BETWEEN INTERVAL '7 days 0.000000 seconds' PRECEDING AND CURRENT ROW)"
        );
        assert_eq!(rewritten("SELECT '1 day'::interval"), "SELECT '1 day'::interval");
    }

    #[test]
    fn fetch_counts_lose_their_parentheses() {
        assert_eq!(
            rewritten("SELECT 1 OFFSET (1) ROWS FETCH FIRST (2) ROWS ONLY"),
            "SELECT 1 OFFSET (1) ROWS FETCH FIRST 2 ROWS ONLY"
        );
        assert_eq!(rewritten("SELECT 1 FETCH NEXT ( $1 ) ROW ONLY"), "SELECT 1 FETCH NEXT $1 ROW ONLY");
        // An expression is a LIMIT; text that only looks alike is left alone, and so is WITH TIES.
        assert_eq!(rewritten("SELECT 1 FETCH FIRST (1 + 1) ROWS ONLY"), "SELECT 1 LIMIT (1 + 1)");
        assert_eq!(
            rewritten("SELECT 1 OFFSET 2 ROWS FETCH NEXT ((3) * 2) ROW ONLY"),
            "SELECT 1 OFFSET 2 ROWS LIMIT ((3) * 2)"
        );
        assert_eq!(
            rewritten("SELECT 1 FETCH FIRST (1 + 1) ROWS WITH TIES"),
            "SELECT 1 FETCH FIRST (1 + 1) ROWS WITH TIES"
        );
        assert_eq!(rewritten("SELECT 'FETCH FIRST (2) ROWS'"), "SELECT 'FETCH FIRST (2) ROWS'");
    }
}
