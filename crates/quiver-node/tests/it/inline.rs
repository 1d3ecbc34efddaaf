use quiver_service::frame::split_args;
use quiver_service::Limits;

use crate::{parse_every_way, Outcome};

const UNBALANCED: &str = "ERR Protocol error: unbalanced quotes in request";

fn check(input: &[u8], expected: Outcome) {
    assert_eq!(parse_every_way(input, &Limits::default()), expected);
}

fn args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    split_args(line).map(|v| v.iter().map(|a| a.to_vec()).collect())
}

#[test]
fn line_endings_and_blanks() {
    for input in [
        &b"PING\n"[..],
        b"PING\r\n",
        b" PING\t\r\n",
        b"\x0b\x0cPING \n",
    ] {
        check(input, Outcome::ok(&[&[b"PING"]], 0));
    }
    check(b"SET  k\tv\r\n", Outcome::ok(&[&[b"SET", b"k", b"v"]], 0));
    check(b"PING", Outcome::ok(&[], 4));
    check(b"PING\r", Outcome::ok(&[], 5));
}

#[test]
fn empty_lines_are_skipped() {
    for input in [&b"\n"[..], b"\r\n", b" \t\n", b"\r\n\r\n\n"] {
        check(input, Outcome::ok(&[], 0));
    }
    check(b"\r\nPING\r\n", Outcome::ok(&[&[b"PING"]], 0));
}

#[test]
fn quoting_rules() {
    assert_eq!(
        args(b"SET \"a b\" 'c d'"),
        Some(vec![b"SET".to_vec(), b"a b".to_vec(), b"c d".to_vec()])
    );
    assert_eq!(
        args(br#""\n\r\t\b\a\\\"\x41\x4a\x4A\xzz\q""#),
        Some(vec![b"\n\r\t\x08\x07\\\"AJJxzzq".to_vec()])
    );
    assert_eq!(
        args(br"'it\'s' 'a\nb'"),
        Some(vec![b"it's".to_vec(), b"a\\nb".to_vec()])
    );
    assert_eq!(args(br#""" ''"#), Some(vec![b"".to_vec(), b"".to_vec()]));
    assert_eq!(args(br#"a"b c""#), Some(vec![b"ab c".to_vec()]));
    assert_eq!(args(br#""\x00""#), Some(vec![b"\0".to_vec()]));
    // Only ' ', \t, \r, \n end an unquoted argument; \v and \f do not.
    assert_eq!(args(b"a\x0bb\x0cc"), Some(vec![b"a\x0bb\x0cc".to_vec()]));
    // ...but any isspace() byte may follow a closing quote.
    assert_eq!(
        args(b"\"a\"\x0bb"),
        Some(vec![b"a".to_vec(), b"b".to_vec()])
    );
    assert_eq!(args(b"a\rb"), Some(vec![b"a".to_vec(), b"b".to_vec()]));
    assert_eq!(args(b"\xff\x80"), Some(vec![b"\xff\x80".to_vec()]));
    assert_eq!(args(b""), Some(vec![]));
}

#[test]
fn inline_requests_with_quotes() {
    check(
        b"SET \"k\\r\\n\" '\"v\"'\r\nECHO \"\"\n",
        Outcome::ok(&[&[b"SET", b"k\r\n", b"\"v\""], &[b"ECHO", b""]], 0),
    );
}

#[test]
fn unbalanced_quotes() {
    for input in [
        &b"ECHO \"a\n"[..],
        b"ECHO 'a\r\n",
        b"ECHO \"a\"x\n",
        b"ECHO 'a'x\n",
        b"ECHO \"a\\\"\n",
        b"ECHO 'a\\'\n",
        b"\"\n",
        b"ECHO \"a\\\n",
    ] {
        check(input, Outcome::err(&[], UNBALANCED));
    }
    check(
        b"PING\r\nECHO \"x\r\nPING\r\n",
        Outcome::err(&[&[b"PING"]], UNBALANCED),
    );
}
