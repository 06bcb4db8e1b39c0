//! The encodings' edges, on a small saved form of every kind of value.

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use super::*;

/// Every kind of value a saved form can hold.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Sample {
    version: u32,
    byte: u8,
    small: u16,
    big: u64,
    on: bool,
    pair: [u32; 2],
    names: Vec<String>,
    maybe: Option<u64>,
    kind: Kind,
}

#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum Kind {
    #[default]
    Unit,
    Data {
        x: u8,
    },
}

impl Saved for Sample {
    fn settle(&mut self) -> Result<(), SnapshotError> {
        Ok(())
    }
}

fn sample() -> Sample {
    Sample {
        version: SNAPSHOT_VERSION,
        byte: 200,
        small: 300,
        big: u64::MAX,
        on: true,
        pair: [0, 128],
        names: vec![String::from("a\"\\\n\u{1}é😀"), String::new()],
        maybe: None,
        kind: Kind::Data { x: 7 },
    }
}

const SAMPLE_JSON: &str = r#"{"version":3,"byte":200,"small":300,"big":18446744073709551615,"on":true,"pair":[0,128],"names":["a\"\\\n\u0001é😀",""],"maybe":null,"kind":{"data":{"x":7}}}"#;

fn kind(r: Result<Sample, SnapshotError>) -> &'static str {
    match r {
        Ok(_) => "ok",
        Err(e) => e.kind(),
    }
}

#[test]
fn json_round_trips_in_field_order() {
    assert_eq!(to_json(&sample()).unwrap(), SAMPLE_JSON);
    assert_eq!(from_json::<Sample>(SAMPLE_JSON), Ok(sample()));
    let unit = Sample { kind: Kind::Unit, maybe: Some(5), ..sample() };
    assert!(to_json(&unit).unwrap().ends_with(r#""maybe":5,"kind":"unit"}"#));
    assert_eq!(from_json::<Sample>(&to_json(&unit).unwrap()), Ok(unit));
}

#[test]
fn json_fields_may_come_in_any_order_with_space_and_escapes() {
    let text = " {\"kind\" : {\"data\":{\"x\":7}} ,\n\"pair\":[0, 128],\"byte\":200,\"small\":300,\"big\":18446744073709551615,\
                \"on\":true,\"version\":3,\"names\":[\"a\\\"\\\\\\n\\u0001\\u00e9\\ud83d\\ude00\",\"\"],\"m\\u0061ybe\":null}\t";
    assert_eq!(from_json::<Sample>(text), Ok(sample()));
}

#[test]
fn an_optional_field_may_be_missing_but_no_other() {
    let without_maybe = SAMPLE_JSON.replace(r#""maybe":null,"#, "");
    assert_eq!(from_json::<Sample>(&without_maybe), Ok(sample()));
    let without_byte = SAMPLE_JSON.replace(r#""byte":200,"#, "");
    assert!(
        matches!(from_json::<Sample>(&without_byte), Err(SnapshotError::Malformed(why)) if why.contains("missing field `byte`"))
    );
}

#[test]
fn json_that_is_not_exactly_a_sample_is_malformed() {
    let cases: &[(&str, &str)] = &[
        (r#""byte":200"#, r#""byte":200,"byte":200"#),
        (r#""byte":200"#, r#""byte":200,"extra":1"#),
        (r#""byte":200"#, r#""byte":256"#),
        (r#""byte":200"#, r#""byte":-1"#),
        (r#""byte":200"#, r#""byte":-0"#),
        (r#""byte":200"#, r#""byte":200.0"#),
        (r#""byte":200"#, r#""byte":2e2"#),
        (r#""byte":200"#, r#""byte":0200"#),
        (r#""byte":200"#, r#""byte":"200""#),
        (r#""byte":200"#, r#""byte":null"#),
        (r#""big":18446744073709551615"#, r#""big":18446744073709551616"#),
        (r#""on":true"#, r#""on":1"#),
        (r#""on":true"#, r#""on":True"#),
        ("[0,128]", "[0,128,1]"),
        ("[0,128]", "[0]"),
        ("[0,128]", "[0,128,]"),
        ("[0,128]", "{}"),
        (r#""kind":{"data":{"x":7}}"#, r#""kind":"data""#),
        (r#""kind":{"data":{"x":7}}"#, r#""kind":{"unit":{"x":7}}"#),
        (r#""kind":{"data":{"x":7}}"#, r#""kind":{"data":{"x":7},"unit":null}"#),
        (r#""kind":{"data":{"x":7}}"#, r#""kind":"other""#),
        (r#""kind":{"data":{"x":7}}"#, r#""kind":{"data":{"x":7,"y":1}}"#),
        (r#""names":["#, r#""names":["\ud800","#),
        (r#""names":["#, r#""names":["\x","#),
        (r#""names":["#, "\"names\":[\"\t\","),
        (r#""names":["#, r#""names":[1,"#),
    ];
    for (from, to) in cases {
        assert!(SAMPLE_JSON.contains(from), "{from}");
        let text = SAMPLE_JSON.replacen(from, to, 1);
        assert_eq!(kind(from_json(&text)), "malformed", "{text}");
    }
    for text in ["", " ", "null", "[]", "{} {}", &(String::from(SAMPLE_JSON) + "x"), "{\"byte\"}"] {
        assert_eq!(kind(from_json(text)), "malformed", "{text}");
    }
}

#[test]
fn deep_nesting_is_malformed_or_skipped_never_a_stack_overflow() {
    #[derive(serde::Deserialize)]
    struct Deep {
        x: Option<ListLength>,
    }
    let deep = |n: usize| {
        let mut s = String::from(r#"{"x":"#);
        s.extend(core::iter::repeat_n('[', n));
        s.extend(core::iter::repeat_n(']', n));
        s.push('}');
        s
    };
    let deep = |n| deep(n).replacen('{', "{\"version\":3,", 1);
    // serde_json skips an unknown value without recursing, and the forms
    // nest a few levels only: deep text is malformed, never a stack overflow.
    for n in [100, 1_000_000] {
        let r = from_json::<Sample>(&deep(n));
        assert!(matches!(&r, Err(SnapshotError::Malformed(why)) if why.contains("unknown field `x`")), "{r:?}");
        // Counted, the deep list is one item, skipped as deeply.
        assert_eq!(count_json(&deep(n), |d: &Deep| d.x.map(|l| l.0)), Ok(1));
    }
}

#[test]
fn compact_bytes_are_postcards_wire_format() {
    let bytes = to_bytes(&sample()).unwrap();
    let mut expected = vec![3, 200, 0xac, 0x02];
    expected.extend([0xff; 9]);
    expected.extend([0x01, 1, 0, 0x80, 0x01, 2, 11]);
    expected.extend("a\"\\\n\u{1}é😀".as_bytes());
    expected.extend([0, 0, 1, 7]);
    assert_eq!(bytes, expected);
    assert_eq!(from_bytes::<Sample>(&bytes), Ok(sample()));
}

#[test]
fn compact_bytes_that_are_not_exactly_a_sample_are_malformed() {
    let bytes = to_bytes(&sample()).unwrap();
    for len in 0..bytes.len() {
        assert_eq!(kind(from_bytes(&bytes[..len])), "malformed", "{len} bytes");
    }
    let with = |at: usize, b: &[u8]| {
        let mut v = bytes.clone();
        v.splice(at..at + 1, b.iter().copied());
        v
    };
    let cases = [
        with(2, &[0xff, 0xff, 0x04]), // small: 2^16 and more
        with(4, &[0xff; 11]),         // big: eleven bytes
        with(4, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]), // big: 2^64
        with(14, &[2]),               // on: neither 0 nor 1
        with(bytes.len() - 3, &[5]),  // maybe: tag 5
        with(bytes.len() - 2, &[2]),  // kind: variant 2
        [bytes.as_slice(), &[0]].concat(), // one byte more
    ];
    for case in cases {
        assert_eq!(kind(from_bytes(&case)), "malformed", "{case:?}");
    }
    let mut not_utf8 = bytes.clone();
    let text_at = 21;
    not_utf8[text_at] = 0xff;
    let r = from_bytes::<Sample>(&not_utf8);
    assert!(matches!(&r, Err(SnapshotError::Malformed(why)) if why.contains("utf-8")), "{r:?}");
}
